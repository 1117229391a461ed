//! The administrator's policy: what each plugin may produce, where, and with which limits.
//!
//! `operator-host run --policy FILE` (and `operator-host rbac --policy FILE`) read a YAML
//! document:
//!
//! ```yaml
//! apiVersion: operator-host.dev/v1alpha1
//! kind: Policy
//! defaults:                 # every plugin, unless its entry under `plugins` says otherwise
//!   kinds: [apps/v1/Deployment, v1/Service]   # absent: every kind the plugin declares
//!   namespaces: [team-a]    # parents' namespaces; absent or []: any namespace watched
//!   allowRbac: false
//!   allowSecrets: false
//!   allowServiceAccountTokens: false
//!   maxChildren: 1000
//!   limits: {callTimeoutMs: 1000, memoryMiB: 64, maxResponseMiB: 4, maxConcurrentCalls: 4}
//! plugins:
//!   memcached:
//!     allowSecrets: true
//! ```
//!
//! A field of a plugin's entry replaces the same field of `defaults` (each limit on its
//! own); a field set in neither takes the safe default of [`Rules`]. Without a policy file
//! the host runs with [`Policy::default`]: the safe defaults for every plugin.
//!
//! [`Policy::check`] is the pure function the controller calls on every plan before any
//! write. It complements the validation of [`crate::plan`], which already refuses
//! undeclared and cluster-scoped kinds, other namespaces and reserved metadata; a violation
//! of either becomes [`PlanError::PolicyViolation`], the condition reason `PolicyViolation`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::plan::{DEFAULT_MAX_CHILDREN, Plan, PlanError};
use crate::plugin::{Declaration, KindRef, check_dns_label};
use crate::runtime::{Limits, RuntimeConfig};

/// The `apiVersion` of a policy document.
pub const API_VERSION: &str = "operator-host.dev/v1alpha1";
/// The `kind` of a policy document.
pub const KIND: &str = "Policy";
/// The API group of the RBAC kinds that `allowRbac` governs.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The RBAC kinds that `allowRbac` governs.
pub const RBAC_KINDS: [&str; 4] = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
/// The Secret type of service-account tokens that `allowServiceAccountTokens` governs.
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";

/// Why a policy could not be used; each variant names the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the policy file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the policy file {} is not a valid policy: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("the policy file {} is invalid: {field} is {found}, expected {expected}", path.display())]
    Validate {
        path: PathBuf,
        field: String,
        found: String,
        expected: String,
    },
    #[error("the policy refuses plugin {plugin} ({parent}): {problem}")]
    Admit {
        plugin: String,
        parent: String,
        problem: String,
    },
}

/// What a plan did that the policy does not allow. It becomes
/// [`PlanError::PolicyViolation`], so the parent gets `Reconciled=False` with the reason
/// `PolicyViolation` and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyViolation(pub String);

impl From<PolicyViolation> for PlanError {
    fn from(violation: PolicyViolation) -> Self {
        PlanError::PolicyViolation(violation.0)
    }
}

/// Per-call limits of a plugin as a policy writes them; an absent field keeps the value of
/// `defaults`, or the command line's (`--call-timeout-ms`, `--memory-limit-mib`,
/// `--max-response-mib`), or two calls per core for `maxConcurrentCalls`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyLimits {
    pub call_timeout_ms: Option<u64>,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<usize>,
    #[serde(rename = "maxResponseMiB")]
    pub max_response_mib: Option<usize>,
    pub max_concurrent_calls: Option<usize>,
}

impl PolicyLimits {
    /// `self`, with the fields it lacks taken from `fallback`.
    fn or(&self, fallback: &PolicyLimits) -> PolicyLimits {
        PolicyLimits {
            call_timeout_ms: self.call_timeout_ms.or(fallback.call_timeout_ms),
            memory_mib: self.memory_mib.or(fallback.memory_mib),
            max_response_mib: self.max_response_mib.or(fallback.max_response_mib),
            max_concurrent_calls: self.max_concurrent_calls.or(fallback.max_concurrent_calls),
        }
    }
}

/// The rules of `defaults` or of one plugin's entry, as written. Absent fields fall back
/// (plugin entry, then `defaults`, then these safe defaults):
///
/// - `kinds`: every kind the plugin declares. When set, the allowed child kinds are the
///   ones both declared and listed (`group/version/Kind`, `version/Kind` for the core group).
/// - `namespaces`: `[]`, any namespace the host watches; otherwise the parents' namespaces.
/// - `allowClusterScoped`: `false`, and only `false` is accepted: children always live in
///   their parent's namespace (a namespaced owner cannot own a cluster-scoped object).
/// - `allowRbac`: `false`: no Role, RoleBinding, ClusterRole or ClusterRoleBinding.
/// - `allowSecrets`: `false`: no Secret.
/// - `allowServiceAccountTokens`: `false`: no Secret of type
///   `kubernetes.io/service-account-token`, no ServiceAccount that does not set
///   `automountServiceAccountToken: false`, and no pod template that sets
///   `automountServiceAccountToken: true`.
/// - `maxChildren`: 1000 (also the host's hard cap).
/// - `limits`: the command line's limits.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rules {
    pub kinds: Option<Vec<String>>,
    pub namespaces: Option<Vec<String>>,
    pub allow_cluster_scoped: Option<bool>,
    pub allow_rbac: Option<bool>,
    pub allow_secrets: Option<bool>,
    pub allow_service_account_tokens: Option<bool>,
    pub max_children: Option<usize>,
    pub limits: Option<PolicyLimits>,
}

/// The policy document as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Document {
    api_version: String,
    kind: String,
    #[serde(default)]
    defaults: Rules,
    #[serde(default)]
    plugins: BTreeMap<String, Rules>,
}

/// A kind as a policy names it: `group/version/Kind`, or `version/Kind` in the core group.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KindName {
    group: String,
    version: String,
    kind: String,
}

impl KindName {
    fn parse(text: &str) -> Option<KindName> {
        let parts: Vec<&str> = text.split('/').collect();
        let (group, version, kind) = match parts.as_slice() {
            [version, kind] => ("", *version, *kind),
            [group, version, kind] => (*group, *version, *kind),
            _ => return None,
        };
        let group_ok = group.is_empty() || crate::plan::check_dns_subdomain(group).is_ok();
        let version_ok = version.starts_with('v')
            && version
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let kind_ok = kind.starts_with(|c: char| c.is_ascii_uppercase())
            && kind.bytes().all(|b| b.is_ascii_alphanumeric());
        (group_ok && version_ok && kind_ok).then(|| KindName {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        })
    }

    fn matches(&self, kind: &KindRef) -> bool {
        self.group == kind.group && self.version == kind.version && self.kind == kind.kind
    }
}

/// The rules that apply to one plugin, every field resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    /// `None`: every declared kind.
    kinds: Option<Vec<KindName>>,
    /// Empty: any namespace.
    pub namespaces: Vec<String>,
    pub allow_rbac: bool,
    pub allow_secrets: bool,
    pub allow_service_account_tokens: bool,
    pub max_children: usize,
    pub limits: PolicyLimits,
}

/// A validated policy. [`Policy::default`] is the safe defaults for every plugin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    defaults: Rules,
    plugins: BTreeMap<String, Rules>,
}

impl Policy {
    /// Reads and validates the policy file at `path`.
    pub fn load(path: &Path) -> Result<Policy, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Policy::parse(&text, path)
    }

    /// Parses and validates a policy document; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Policy, Error> {
        let document: Document = serde_yaml::from_str(text).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let invalid = |field: &str, found: String, expected: &str| Error::Validate {
            path: path.to_path_buf(),
            field: field.to_string(),
            found,
            expected: expected.to_string(),
        };
        if document.api_version != API_VERSION {
            return Err(invalid(
                "apiVersion",
                format!("{:?}", document.api_version),
                &format!("{API_VERSION:?}"),
            ));
        }
        if document.kind != KIND {
            return Err(invalid(
                "kind",
                format!("{:?}", document.kind),
                &format!("{KIND:?}"),
            ));
        }
        validate_rules(&document.defaults, "defaults", &invalid)?;
        for (name, rules) in &document.plugins {
            let field = format!("plugins.{name}");
            if check_dns_label(name).is_err() {
                return Err(invalid(
                    "a key of plugins",
                    format!("{name:?}"),
                    "a plugin name (a DNS-1123 label: lower-case letters, digits and '-')",
                ));
            }
            validate_rules(rules, &field, &invalid)?;
        }
        Ok(Policy {
            defaults: document.defaults,
            plugins: document.plugins,
        })
    }

    /// The policy with every limit that `defaults` leaves unset taken from `base` (the
    /// command line's limits), so those apply to plugins without limits of their own.
    pub fn with_default_limits(mut self, base: &Limits) -> Policy {
        let given = self.defaults.limits.take().unwrap_or_default();
        self.defaults.limits = Some(given.or(&PolicyLimits {
            call_timeout_ms: u64::try_from(base.call_timeout.as_millis()).ok(),
            memory_mib: Some(base.max_memory_bytes >> 20),
            max_response_mib: Some(base.max_response_bytes >> 20),
            max_concurrent_calls: None,
        }));
        self
    }

    /// The rules that apply to `plugin`.
    pub fn rules(&self, plugin: &str) -> Effective {
        let own = self.plugins.get(plugin).cloned().unwrap_or_default();
        let defaults = &self.defaults;
        let kinds = own.kinds.or_else(|| defaults.kinds.clone()).map(|kinds| {
            // Validated when parsed.
            kinds.iter().filter_map(|k| KindName::parse(k)).collect()
        });
        let limits = own.limits.unwrap_or_default();
        Effective {
            kinds,
            namespaces: own
                .namespaces
                .or_else(|| defaults.namespaces.clone())
                .unwrap_or_default(),
            allow_rbac: own.allow_rbac.or(defaults.allow_rbac).unwrap_or(false),
            allow_secrets: own
                .allow_secrets
                .or(defaults.allow_secrets)
                .unwrap_or(false),
            allow_service_account_tokens: own
                .allow_service_account_tokens
                .or(defaults.allow_service_account_tokens)
                .unwrap_or(false),
            max_children: own
                .max_children
                .or(defaults.max_children)
                .unwrap_or(DEFAULT_MAX_CHILDREN),
            limits: limits.or(&defaults.limits.clone().unwrap_or_default()),
        }
    }

    /// `base` with the limits the policy sets for `plugin`.
    pub fn limits(&self, plugin: &str, base: &Limits) -> Limits {
        let limits = self.rules(plugin).limits;
        Limits {
            call_timeout: limits
                .call_timeout_ms
                .map_or(base.call_timeout, Duration::from_millis),
            max_memory_bytes: limits.memory_mib.map_or(base.max_memory_bytes, |m| m << 20),
            max_response_bytes: limits
                .max_response_mib
                .map_or(base.max_response_bytes, |m| m << 20),
            ..base.clone()
        }
    }

    /// Most calls of `plugin` running at once, if the policy bounds them.
    pub fn max_concurrent_calls(&self, plugin: &str) -> Option<usize> {
        self.rules(plugin).limits.max_concurrent_calls
    }

    /// Fits the policy and the runtime's configuration to each other: limits that
    /// `defaults` leaves unset take the configuration's (the command line's), and the
    /// runtime's instance slots grow to the largest memory limit any plugin is given, so
    /// that limit is reachable.
    pub fn fit_runtime(self, config: &mut RuntimeConfig) -> Policy {
        let policy = self.with_default_limits(&config.limits);
        if let Some(max) = policy.max_memory_bytes() {
            config.limits.max_memory_bytes = config.limits.max_memory_bytes.max(max);
        }
        policy
    }

    /// The largest memory limit the policy gives any plugin, in bytes: the runtime's
    /// instance slots must be at least that large.
    pub fn max_memory_bytes(&self) -> Option<usize> {
        std::iter::once(&self.defaults)
            .chain(self.plugins.values())
            .filter_map(|r| r.limits.as_ref()?.memory_mib)
            .max()
            .map(|m| m << 20)
    }

    /// Whether `plugin` may have children of `kind`; `Err` says why not.
    pub fn allows_kind(&self, plugin: &str, kind: &KindRef) -> Result<(), String> {
        kind_verdict(plugin, &self.rules(plugin), kind)
    }

    /// The declared child kinds the policy allows: what the host watches and applies.
    pub fn allowed_children(&self, decl: &Declaration) -> Vec<KindRef> {
        let rules = self.rules(&decl.name);
        decl.children
            .iter()
            .filter(|k| kind_verdict(&decl.name, &rules, k).is_ok())
            .cloned()
            .collect()
    }

    /// Checks a plugin when it is loaded. A plugin that declares child kinds none of which
    /// the policy allows is refused (it could never reconcile anything); otherwise the
    /// returned warnings name each declared kind the policy forbids (never watched, never
    /// applied) and each kind the policy lists that the plugin does not declare.
    pub fn admit(&self, decl: &Declaration) -> Result<Vec<String>, Error> {
        let rules = self.rules(&decl.name);
        let mut warnings = Vec::new();
        for kind in &decl.children {
            if let Err(problem) = kind_verdict(&decl.name, &rules, kind) {
                warnings.push(format!("{kind} will not be watched or applied: {problem}"));
            }
        }
        if !decl.children.is_empty() && warnings.len() == decl.children.len() {
            return Err(Error::Admit {
                plugin: decl.name.clone(),
                parent: decl.parent.to_string(),
                problem: format!(
                    "none of the child kinds it declares is allowed ({})",
                    warnings.join("; ")
                ),
            });
        }
        for listed in rules.kinds.iter().flatten() {
            if !decl.children.iter().any(|k| listed.matches(k)) {
                warnings.push(format!(
                    "the policy allows {}, which the plugin does not declare",
                    display_kind(listed)
                ));
            }
        }
        Ok(warnings)
    }

    /// Checks a plan of `plugin` for a parent in `parent_namespace` before anything is
    /// written: the parent's namespace, the number of children, and each child's kind and
    /// service-account-token use. What [`crate::plan`] already validated is not repeated.
    pub fn check(
        &self,
        plugin: &Declaration,
        parent_namespace: &str,
        plan: &Plan,
    ) -> Result<(), PolicyViolation> {
        let rules = self.rules(&plugin.name);
        let name = &plugin.name;
        if !rules.namespaces.is_empty() && !rules.namespaces.iter().any(|n| n == parent_namespace) {
            return Err(PolicyViolation(format!(
                "plugin {name} may not reconcile parents in namespace {parent_namespace:?} \
                 (the policy allows: {})",
                rules.namespaces.join(", ")
            )));
        }
        if plan.apply.len() > rules.max_children {
            return Err(PolicyViolation(format!(
                "plugin {name} returned {} children, the policy allows at most {}",
                plan.apply.len(),
                rules.max_children
            )));
        }
        for child in &plan.apply {
            let child_name = child["metadata"]["name"].as_str().unwrap_or_default();
            let Some(kind) = plugin.children.iter().find(|k| k.matches(child)) else {
                // The plan only holds declared kinds; refuse rather than assume.
                return Err(PolicyViolation(format!(
                    "{}/{} {child_name:?} is not a kind plugin {name} declared",
                    child["apiVersion"].as_str().unwrap_or_default(),
                    child["kind"].as_str().unwrap_or_default()
                )));
            };
            let label = format!("{kind} {child_name:?}");
            kind_verdict(name, &rules, kind)
                .map_err(|p| PolicyViolation(format!("{label}: {p}")))?;
            if !rules.allow_service_account_tokens
                && let Some(problem) = token_problem(kind, child)
            {
                return Err(PolicyViolation(format!(
                    "{label} {problem}, and allowServiceAccountTokens is false for plugin {name}"
                )));
            }
        }
        Ok(())
    }
}

fn validate_rules(
    rules: &Rules,
    field: &str,
    invalid: &dyn Fn(&str, String, &str) -> Error,
) -> Result<(), Error> {
    for (index, kind) in rules.kinds.iter().flatten().enumerate() {
        if KindName::parse(kind).is_none() {
            return Err(invalid(
                &format!("{field}.kinds[{index}]"),
                format!("{kind:?}"),
                "group/version/Kind, or version/Kind for the core group (e.g. apps/v1/Deployment, v1/Service)",
            ));
        }
    }
    for (index, namespace) in rules.namespaces.iter().flatten().enumerate() {
        if check_dns_label(namespace).is_err() {
            return Err(invalid(
                &format!("{field}.namespaces[{index}]"),
                format!("{namespace:?}"),
                "a namespace name (a DNS-1123 label)",
            ));
        }
    }
    if rules.allow_cluster_scoped == Some(true) {
        return Err(invalid(
            &format!("{field}.allowClusterScoped"),
            "true".into(),
            "false: children always live in their parent's namespace",
        ));
    }
    if let Some(max) = rules.max_children
        && !(1..=DEFAULT_MAX_CHILDREN).contains(&max)
    {
        return Err(invalid(
            &format!("{field}.maxChildren"),
            max.to_string(),
            &format!("a number from 1 to {DEFAULT_MAX_CHILDREN}"),
        ));
    }
    if let Some(limits) = &rules.limits {
        let values = [
            ("callTimeoutMs", limits.call_timeout_ms.map(|v| v as usize)),
            ("memoryMiB", limits.memory_mib),
            ("maxResponseMiB", limits.max_response_mib),
            ("maxConcurrentCalls", limits.max_concurrent_calls),
        ];
        for (name, value) in values {
            if value == Some(0) {
                return Err(invalid(
                    &format!("{field}.limits.{name}"),
                    "0".into(),
                    "a number greater than 0",
                ));
            }
        }
    }
    Ok(())
}

/// Whether `rules` allow children of `kind`; `Err` says why not.
fn kind_verdict(plugin: &str, rules: &Effective, kind: &KindRef) -> Result<(), String> {
    if !kind.namespaced {
        return Err("cluster-scoped kinds are never allowed as children".into());
    }
    if let Some(kinds) = &rules.kinds
        && !kinds.iter().any(|k| k.matches(kind))
    {
        let listed: Vec<String> = kinds.iter().map(display_kind).collect();
        return Err(format!(
            "the policy's kinds for plugin {plugin} do not include it (allowed: {})",
            if listed.is_empty() {
                "none".to_string()
            } else {
                listed.join(", ")
            }
        ));
    }
    if kind.group == RBAC_GROUP && RBAC_KINDS.contains(&kind.kind.as_str()) && !rules.allow_rbac {
        return Err(format!(
            "it is an RBAC kind, and allowRbac is false for plugin {plugin}"
        ));
    }
    if kind.group.is_empty() && kind.kind == "Secret" && !rules.allow_secrets {
        return Err(format!("allowSecrets is false for plugin {plugin}"));
    }
    Ok(())
}

fn display_kind(kind: &KindName) -> String {
    if kind.group.is_empty() {
        format!("{}/{}", kind.version, kind.kind)
    } else {
        format!("{}/{}/{}", kind.group, kind.version, kind.kind)
    }
}

/// How `child` of `kind` would give pods a service-account token, if it would.
fn token_problem(kind: &KindRef, child: &Value) -> Option<&'static str> {
    if kind.group.is_empty() && kind.kind == "Secret" {
        return (child["type"] == SERVICE_ACCOUNT_TOKEN_TYPE)
            .then_some("is a Secret of type kubernetes.io/service-account-token");
    }
    if kind.group.is_empty() && kind.kind == "ServiceAccount" {
        return (child["automountServiceAccountToken"] != false)
            .then_some("does not set automountServiceAccountToken: false");
    }
    let pod_spec = match kind.kind.as_str() {
        "Pod" => &child["spec"],
        "CronJob" => &child["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &child["spec"]["template"]["spec"],
    };
    (pod_spec["automountServiceAccountToken"] == true)
        .then_some("sets automountServiceAccountToken: true in its pod spec")
}

#[cfg(test)]
mod tests;
