//! The administrator's policy: what each plugin may make the host write, where, and with which limits.
//!
//! `operator-host run --policy FILE` (and `rbac`, `render --policy`) read a YAML document:
//!
//! ```yaml
//! apiVersion: operator-host.dev/v1alpha1
//! kind: Policy
//! defaults:                 # every plugin, unless its entry under `plugins` says otherwise
//!   kinds: [apps/v1/Deployment, v1/Service]   # absent: every kind the plugin declares
//!   namespaces: [team-a]    # parents' namespaces; absent or []: any namespace watched
//!   related: [v1/ConfigMap] # kinds it may read (contract 0.2.0); absent: every one it declares
//!   podSecurity: baseline   # privileged | baseline | restricted
//!   secretReferences: parentSpec              # parentSpec | any | none
//!   serviceAccountReferences: defaultOrOwn    # defaultOrOwn | any
//!   minRequeueSeconds: 5
//!   writeBudget: {perSecond: 100, burst: 1000}
//!   statusChurnLimit: 5
//! plugins:
//!   memcached:              # the plugin's file name without `.wasm`
//!     sha256: "sha256:..."  # only this content may serve
//!     allowSecrets: true
//! ```
//!
//! A field of a plugin's entry replaces the same field of `defaults` (each limit and each
//! write-budget field on its own); a field set in neither takes the safe default documented
//! on [`Rules`]. Without a policy file the host runs with [`Policy::default`]. The document is
//! validated and turned into typed [`Effective`] rules once, when it is read.
//!
//! The rules about what a plugin's output may contain are two: the contract's,
//! [`check_child`](crate::plan::check_child) (declared kinds, the parent's namespace, metadata
//! only the host may set), which runs on each child while [`crate::plan`] builds the plan, and
//! the administrator's, here: [`Policy::check`] (the
//! administrator's rules: namespaces, counts, kinds, tokens, Secret and ServiceAccount
//! references, Pod Security) on every plan before any write. A violation of either becomes
//! [`PlanError::PolicyViolation`], the condition reason `PolicyViolation`.

pub mod pod_security;
mod pods;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::{Limits, SecretView};
use crate::declaration::{Declaration, Related};
use crate::kinds::{Kind, KindName};
use crate::names::{check_dns_label, check_dns_subdomain};
use crate::plan::{DEFAULT_MAX_CHILDREN, Plan, PlanError};

pub use pod_security::Level as PodSecurityLevel;

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
/// operator-host's own API group: no plugin may own a kind in it.
pub const HOST_GROUP: &str = "operator-host.dev";
/// API groups of Kubernetes itself (and its SIG projects): no plugin may own a kind in them.
pub const KUBERNETES_GROUP_SUFFIXES: [&str; 3] = ["k8s.io", "kubernetes.io", "x-k8s.io"];
/// Default of `minRequeueSeconds`.
pub const DEFAULT_MIN_REQUEUE: Duration = Duration::from_secs(5);
/// Default of `writeBudget.perSecond`: far above what a busy real operator needs per plugin.
pub const DEFAULT_WRITES_PER_SECOND: u32 = 100;
/// Default of `writeBudget.burst`.
pub const DEFAULT_WRITE_BURST: u32 = 1000;
/// Default of `statusChurnLimit`.
pub const DEFAULT_STATUS_CHURN_LIMIT: u32 = 5;
/// Default of `pruneGuard.maxPercent`.
pub const DEFAULT_PRUNE_GUARD_PERCENT: u32 = 10;
/// Default of `pruneGuard.windowSeconds`.
pub const DEFAULT_PRUNE_GUARD_WINDOW: Duration = Duration::from_secs(600);

/// How many of a plugin's `children` the prune guard lets a window delete unasked:
/// `percent` of them, at least one.
pub fn prune_guard_limit(children: usize, percent: u32) -> usize {
    (children * percent as usize / 100).max(1)
}

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
    #[error("{owner} is invalid: {field} is {found}, expected {expected}")]
    ValidateEntry {
        owner: String,
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
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyLimits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<u64>,
    #[serde(rename = "memoryMiB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<usize>,
    #[serde(rename = "maxResponseMiB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_response_mib: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// The API writes a plugin's reconciles may cause, as a policy writes them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WriteBudget {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// The prune guard: deletions of children that no change of their parent's spec asked for
/// may take at most maxPercent (default 10) of the plugin's children within windowSeconds
/// (default 600); beyond, they are held (PruneHeld) until approved.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PruneGuardRules {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_percent: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<u64>,
}

/// How a new version of a plugin starts serving. `Planned` (the default): before it serves,
/// the new version is planned on every parent the host caches, beside the serving one; if its
/// plans would delete a child of a workload kind (holdWorkloadDeletes, default true) or more
/// than maxDeletePercent (default 10) of the plugin's children, it is held (RolloutHeld) and
/// the serving version goes on, until the new one is approved. `Immediate`: it serves at once.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RolloutRules {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delete_percent: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_workload_deletes: Option<bool>,
    /// With `Canary`: the share of the parents (chosen by a stable hash of their UIDs, at
    /// least one) the new version serves first (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_percent: Option<u32>,
    /// With `Canary`: a label selector of the canary parents (e.g. `tier=canary`), in place of
    /// canaryPercent. A canary whose selector matches no parent waits for an approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_selector: Option<String>,
    /// With `Canary`: how long the canary parents must reconcile without a failure before
    /// the new version serves every parent (default 60).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis_seconds: Option<u64>,
}

/// How a new version starts serving: `Planned` (held if its plans delete too much) or
/// `Immediate`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum RolloutStrategy {
    /// Planned on the live parents first; held if its plans would delete too much.
    #[default]
    Planned,
    /// Planned first like `Planned`; then it serves a canary share of the parents, and every
    /// parent once they reconciled without a failure for the analysis window; a failure of a
    /// canary parent rolls it back, and the version is not tried again until it changes.
    Canary,
    /// Serves at once (for development).
    Immediate,
}

/// The default of `rollout.canaryPercent`.
pub const DEFAULT_CANARY_PERCENT: u32 = 10;
/// The default of `rollout.analysisSeconds`.
pub const DEFAULT_CANARY_ANALYSIS: Duration = Duration::from_secs(60);

/// What the host does with a plugin's plans: `Reconcile` (the default) applies and prunes;
/// `Observe` only compares them with the cluster and reports the drift on each parent (its
/// `Drifted` condition), writing nothing else: how a team tries a third-party plugin, or a new
/// operator beside existing workloads, safely.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum PluginMode {
    #[default]
    Reconcile,
    Observe,
}

/// The default of `rollout.maxDeletePercent`.
pub const DEFAULT_ROLLOUT_DELETE_PERCENT: u32 = 10;

/// Which Secrets a pod template in a plugin's output may reference (volumes, projected
/// sources, `env`, `envFrom`, `imagePullSecrets`, volume plugins' secret references).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SecretReferences {
    /// Secrets whose name appears as a value in the parent's spec (the CR's author chose
    /// them), and Secrets the plugin itself returns as children.
    #[default]
    ParentSpec,
    /// Any Secret of the parent's namespace.
    Any,
    /// None at all.
    None,
}

/// Which ServiceAccounts a pod template in a plugin's output may run as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ServiceAccountReferences {
    /// The namespace's `default`, or one the plugin returns as a child for the same parent.
    #[default]
    DefaultOrOwn,
    /// Any ServiceAccount of the parent's namespace.
    Any,
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
/// - `allowSecrets`: `false`: no Secret, as a child or as a related object.
/// - `related`: every kind the plugin declares as related (contract 0.2.0). When set, the
///   kinds a plugin may read beside its children (`group/version/Kind`); a plugin that
///   declares another is refused at load.
/// - `allowSecretData`: `false`: a related Secret reaches the plugin with each value
///   hashed (`data-hash`); a plugin that asks for the data in clear is refused at load.
/// - `allowServiceAccountTokens`: `false`: no Secret of type
///   `kubernetes.io/service-account-token`, no ServiceAccount that does not set
///   `automountServiceAccountToken: false`, no pod template that sets
///   `automountServiceAccountToken: true` or mounts a projected service-account token.
/// - `podSecurity`: `baseline`: every pod template passes the Pod Security Standard.
/// - `secretReferences`: `parentSpec` (see [`SecretReferences`]).
/// - `serviceAccountReferences`: `defaultOrOwn` (see [`ServiceAccountReferences`]).
/// - `parentGroups`: any group; when set, the API groups whose kinds the plugin may
///   reconcile (`example.com`, or `*.example.com` for its subdomains). Groups of Kubernetes
///   and operator-host's own group are never allowed.
/// - `sha256` (plugin entries only): the only content that may serve as this plugin.
/// - `maxChildren`: 1000 (also the host's hard cap).
/// - `minRequeueSeconds`: 5: the shortest `requeueAfterMs` honoured.
/// - `writeBudget`: 100 writes per second, bursts of 1000, shared by all parents of a plugin;
///   each parent may spend a tenth of it (at least 1/s, bursts of 10).
/// - `statusChurnLimit`: 5 status changes in a row with no change of the parent's
///   generation or of its observed children make the parent `StatusNotConverging`; as many
///   reconciles in a row that change a child only the host changed since, with the parent's
///   generation, labels, annotations and related objects unchanged, `ChildrenNotConverging`.
/// - `pruneGuard`: `maxPercent` 10, `windowSeconds` 600. Deletions of children that no
///   change of their parent's spec asked for (a new plugin version, a related object that
///   changed, anything but the parent's own spec within the window) may take at most
///   `maxPercent` of the plugin's children (at least one) within the window; a reconcile that
///   would go beyond is held (`PruneHeld`), and so is every such deletion of that plugin
///   version after it, until the parent is annotated `operator-host.dev/approve-prune: "true"`
///   or another version serves. 100 turns the guard off.
/// - `mode`: `Reconcile`; `Observe` applies, prunes and finalizes nothing: each plan is only
///   compared with the cluster, and each parent's `Drifted` condition says what differs.
/// - `rollout`: `strategy` `Planned`, `maxDeletePercent` 10, `holdWorkloadDeletes` true. A
///   new version is planned on every cached parent before it serves; one whose plans would
///   delete a child of a workload kind, or more than `maxDeletePercent` of the plugin's
///   children, is held (`RolloutHeld`) and the serving version goes on until it is approved.
///   `Immediate` serves a new version at once. `Canary` (`canaryPercent` 10,
///   `analysisSeconds` 60) plans it the same, then serves it to a share of the parents first.
/// - `limits`: the command line's limits.
/// - `requireSignature`: `false`; when `true`, a plugin from an `OperatorPlugin` serves only
///   if a cosign signature of its artifact verifies with one of its keys (a file of the plugin
///   directory is the administrator's own: pin it with `sha256`).
/// - `signatureKeys`: none; PEM public keys (ECDSA P-256) trusted for every plugin of this
///   entry. When given, they are the only ones: an OperatorPlugin's `spec.verify.keys` may
///   name some of them, never another.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rules {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_cluster_scoped: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_rbac: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_secrets: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_service_account_tokens: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_secret_data: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<PodSecurityLevel>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_references: Option<SecretReferences>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_references: Option<ServiceAccountReferences>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_children: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_requeue_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_budget: Option<WriteBudget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_churn_limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prune_guard: Option<PruneGuardRules>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutRules>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<PluginMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<PolicyLimits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_signature: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_keys: Option<Vec<String>>,
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

/// An API group as `parentGroups` names it: exact, or `*.suffix` for any subdomain of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupPattern {
    Exact(String),
    Subdomains(String),
}

impl GroupPattern {
    fn parse(text: &str) -> Option<GroupPattern> {
        let (pattern, domain) = match text.strip_prefix("*.") {
            Some(suffix) => (GroupPattern::Subdomains(suffix.into()), suffix),
            None => (GroupPattern::Exact(text.into()), text),
        };
        (domain.contains('.') && check_dns_subdomain(domain).is_ok()).then_some(pattern)
    }

    fn matches(&self, group: &str) -> bool {
        match self {
            GroupPattern::Exact(exact) => group == exact,
            GroupPattern::Subdomains(suffix) => is_subdomain_of(group, suffix),
        }
    }
}

impl std::fmt::Display for GroupPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupPattern::Exact(group) => f.write_str(group),
            GroupPattern::Subdomains(suffix) => write!(f, "*.{suffix}"),
        }
    }
}

fn is_subdomain_of(group: &str, domain: &str) -> bool {
    group
        .strip_suffix(domain)
        .is_some_and(|head| head.ends_with('.') && head.len() > 1)
}

/// The rules that apply to one plugin, every field resolved and typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    /// `None`: every declared kind.
    pub kinds: Option<Vec<KindName>>,
    /// Empty: any namespace.
    pub namespaces: Vec<String>,
    pub allow_rbac: bool,
    pub allow_secrets: bool,
    pub allow_service_account_tokens: bool,
    /// `None`: every kind the plugin declares as related.
    pub related: Option<Vec<KindName>>,
    pub allow_secret_data: bool,
    pub pod_security: PodSecurityLevel,
    pub secret_references: SecretReferences,
    pub service_account_references: ServiceAccountReferences,
    /// `None`: any group (except the never-allowed ones).
    pub parent_groups: Option<Vec<GroupPattern>>,
    /// Hex SHA-256 of the only content allowed to serve, if pinned.
    pub sha256: Option<String>,
    pub max_children: usize,
    pub min_requeue: Duration,
    pub writes_per_second: u32,
    pub write_burst: u32,
    pub status_churn_limit: u32,
    /// `pruneGuard.maxPercent`: 1 to 100.
    pub prune_guard_percent: u32,
    pub prune_guard_window: Duration,
    pub rollout_strategy: RolloutStrategy,
    /// `rollout.maxDeletePercent`: 1 to 100.
    pub rollout_delete_percent: u32,
    pub rollout_holds_workload_deletes: bool,
    /// `rollout.canaryPercent`: 1 to 100.
    pub rollout_canary_percent: u32,
    /// `rollout.canarySelector`, a label selector validated when the policy was read.
    pub rollout_canary_selector: Option<String>,
    pub rollout_analysis: Duration,
    pub mode: PluginMode,
    pub limits: PolicyLimits,
    pub require_signature: bool,
    /// PEM public keys, validated when the policy was read.
    pub signature_keys: Vec<String>,
}

/// One field of [`Rules`] validated and typed; `None` when not written.
#[derive(Debug, Clone, Default, PartialEq)]
struct Typed {
    rules: Rules,
    kinds: Option<Vec<KindName>>,
    related: Option<Vec<KindName>>,
    parent_groups: Option<Vec<GroupPattern>>,
    sha256: Option<String>,
}

impl Effective {
    /// `own` over `defaults` over the safe defaults.
    fn resolve(own: &Typed, defaults: &Typed) -> Effective {
        let (o, d) = (&own.rules, &defaults.rules);
        let budget = o.write_budget.clone().unwrap_or_default();
        let default_budget = d.write_budget.clone().unwrap_or_default();
        let guard = o.prune_guard.clone().unwrap_or_default();
        let default_guard = d.prune_guard.clone().unwrap_or_default();
        let rollout = o.rollout.clone().unwrap_or_default();
        let default_rollout = d.rollout.clone().unwrap_or_default();
        Effective {
            kinds: own.kinds.clone().or_else(|| defaults.kinds.clone()),
            namespaces: o
                .namespaces
                .clone()
                .or_else(|| d.namespaces.clone())
                .unwrap_or_default(),
            allow_rbac: o.allow_rbac.or(d.allow_rbac).unwrap_or(false),
            allow_secrets: o.allow_secrets.or(d.allow_secrets).unwrap_or(false),
            allow_service_account_tokens: o
                .allow_service_account_tokens
                .or(d.allow_service_account_tokens)
                .unwrap_or(false),
            related: own.related.clone().or_else(|| defaults.related.clone()),
            allow_secret_data: o.allow_secret_data.or(d.allow_secret_data).unwrap_or(false),
            pod_security: o.pod_security.or(d.pod_security).unwrap_or_default(),
            secret_references: o
                .secret_references
                .or(d.secret_references)
                .unwrap_or_default(),
            service_account_references: o
                .service_account_references
                .or(d.service_account_references)
                .unwrap_or_default(),
            parent_groups: own
                .parent_groups
                .clone()
                .or_else(|| defaults.parent_groups.clone()),
            // Pins are per plugin; `defaults` cannot have one (refused when parsed).
            sha256: own.sha256.clone(),
            max_children: o
                .max_children
                .or(d.max_children)
                .unwrap_or(DEFAULT_MAX_CHILDREN),
            min_requeue: o
                .min_requeue_seconds
                .or(d.min_requeue_seconds)
                .map_or(DEFAULT_MIN_REQUEUE, Duration::from_secs),
            writes_per_second: budget
                .per_second
                .or(default_budget.per_second)
                .unwrap_or(DEFAULT_WRITES_PER_SECOND),
            write_burst: budget
                .burst
                .or(default_budget.burst)
                .unwrap_or(DEFAULT_WRITE_BURST),
            status_churn_limit: o
                .status_churn_limit
                .or(d.status_churn_limit)
                .unwrap_or(DEFAULT_STATUS_CHURN_LIMIT),
            prune_guard_percent: guard
                .max_percent
                .or(default_guard.max_percent)
                .unwrap_or(DEFAULT_PRUNE_GUARD_PERCENT),
            prune_guard_window: guard
                .window_seconds
                .or(default_guard.window_seconds)
                .map_or(DEFAULT_PRUNE_GUARD_WINDOW, Duration::from_secs),
            rollout_strategy: rollout
                .strategy
                .or(default_rollout.strategy)
                .unwrap_or_default(),
            rollout_delete_percent: rollout
                .max_delete_percent
                .or(default_rollout.max_delete_percent)
                .unwrap_or(DEFAULT_ROLLOUT_DELETE_PERCENT),
            rollout_holds_workload_deletes: rollout
                .hold_workload_deletes
                .or(default_rollout.hold_workload_deletes)
                .unwrap_or(true),
            rollout_canary_percent: rollout
                .canary_percent
                .or(default_rollout.canary_percent)
                .unwrap_or(DEFAULT_CANARY_PERCENT),
            rollout_canary_selector: rollout
                .canary_selector
                .clone()
                .or_else(|| default_rollout.canary_selector.clone()),
            rollout_analysis: rollout
                .analysis_seconds
                .or(default_rollout.analysis_seconds)
                .map_or(DEFAULT_CANARY_ANALYSIS, Duration::from_secs),
            mode: o.mode.or(d.mode).unwrap_or_default(),
            limits: o
                .limits
                .clone()
                .unwrap_or_default()
                .or(&d.limits.clone().unwrap_or_default()),
            require_signature: o.require_signature.or(d.require_signature).unwrap_or(false),
            signature_keys: o
                .signature_keys
                .clone()
                .or_else(|| d.signature_keys.clone())
                .unwrap_or_default(),
        }
    }
}

/// A validated policy. [`Policy::default`] is the safe defaults for every plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    defaults: Typed,
    plugins: BTreeMap<String, Typed>,
    /// The rules of plugins without an entry.
    fallback: Arc<Effective>,
    /// The rules of each plugin with an entry.
    resolved: BTreeMap<String, Arc<Effective>>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::from_typed(Typed::default(), BTreeMap::new())
    }
}

impl Policy {
    fn from_typed(defaults: Typed, plugins: BTreeMap<String, Typed>) -> Policy {
        let fallback = Arc::new(Effective::resolve(&Typed::default(), &defaults));
        let resolved = plugins
            .iter()
            .map(|(name, own)| (name.clone(), Arc::new(Effective::resolve(own, &defaults))))
            .collect();
        Policy {
            defaults,
            plugins,
            fallback,
            resolved,
        }
    }

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
        if document.defaults.sha256.is_some() {
            return Err(invalid(
                "defaults.sha256",
                "set".into(),
                "no value: a content pin belongs to one plugin's entry",
            ));
        }
        let defaults = typed(document.defaults, "defaults", &invalid)?;
        let mut plugins = BTreeMap::new();
        for (name, rules) in document.plugins {
            if check_dns_label(&name).is_err() {
                return Err(invalid(
                    "a key of plugins",
                    format!("{name:?}"),
                    "a plugin name (a DNS-1123 label: lower-case letters, digits and '-')",
                ));
            }
            let field = format!("plugins.{name}");
            plugins.insert(name, typed(rules, &field, &invalid)?);
        }
        Ok(Policy::from_typed(defaults, plugins))
    }

    /// This policy with `rules` as the entry of `plugin`, as an OperatorPlugin's
    /// `spec.policy` gives it (`owner` names it in errors); the entry resolves over
    /// `defaults` as an entry of the file does. The file stays the host administrator's
    /// word: a plugin it has an entry for cannot be given another, and whether signatures
    /// are required, and by which keys beyond `spec.verify`, is not an entry's to say.
    pub fn with_entry(&self, plugin: &str, rules: Rules, owner: &str) -> Result<Policy, Error> {
        let invalid = |field: &str, found: String, expected: &str| Error::ValidateEntry {
            owner: owner.to_string(),
            field: field.to_string(),
            found,
            expected: expected.to_string(),
        };
        if self.plugins.contains_key(plugin) {
            return Err(invalid(
                "spec.policy",
                "set".into(),
                &format!(
                    "no value: the host's policy file has an entry for {plugin}, which applies \
                     instead; remove one of the two"
                ),
            ));
        }
        if rules.require_signature.is_some() {
            return Err(invalid(
                "spec.policy.requireSignature",
                "set".into(),
                "no value: the host's policy file says whether signatures are required",
            ));
        }
        if rules.signature_keys.is_some() {
            return Err(invalid(
                "spec.policy.signatureKeys",
                "set".into(),
                "no value: spec.verify.keys names the keys of this plugin",
            ));
        }
        let mut plugins = self.plugins.clone();
        plugins.insert(plugin.to_string(), typed(rules, "spec.policy", &invalid)?);
        Ok(Policy::from_typed(self.defaults.clone(), plugins))
    }

    /// The policy with every limit that `defaults` leaves unset taken from `base` (the
    /// command line's limits), so those apply to plugins without limits of their own.
    pub fn with_default_limits(mut self, base: &Limits) -> Policy {
        let given = self.defaults.rules.limits.take().unwrap_or_default();
        self.defaults.rules.limits = Some(given.or(&PolicyLimits {
            call_timeout_ms: u64::try_from(base.call_timeout.as_millis()).ok(),
            memory_mib: Some(base.max_memory_bytes >> 20),
            max_response_mib: Some(base.max_response_bytes >> 20),
            max_concurrent_calls: None,
        }));
        Policy::from_typed(self.defaults, self.plugins)
    }

    /// The rules that apply to `plugin` (its file name without `.wasm`).
    pub fn rules(&self, plugin: &str) -> &Effective {
        self.resolved.get(plugin).unwrap_or(&self.fallback)
    }

    /// `base` with the limits the policy sets for `plugin`.
    pub fn limits(&self, plugin: &str, base: &Limits) -> Limits {
        let limits = &self.rules(plugin).limits;
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

    /// Fits the policy and the runtime's limits to each other: limits that `defaults` leaves
    /// unset take `limits` (the command line's), and the memory limit the runtime sizes its
    /// instance slots by grows to the largest any plugin is given, so that one is reachable.
    pub fn fit_limits(self, limits: &mut Limits) -> Policy {
        let policy = self.with_default_limits(limits);
        if let Some(max) = policy.max_memory_bytes() {
            limits.max_memory_bytes = limits.max_memory_bytes.max(max);
        }
        policy
    }

    /// The largest memory limit the policy gives any plugin, in bytes: the runtime's
    /// instance slots must be at least that large.
    pub fn max_memory_bytes(&self) -> Option<usize> {
        std::iter::once(&self.defaults)
            .chain(self.plugins.values())
            .filter_map(|t| t.rules.limits.as_ref()?.memory_mib)
            .max()
            .map(|m| m << 20)
    }

    /// Whether `plugin` may have children of `kind`; `Err` says why not.
    pub fn allows_kind(&self, plugin: &str, kind: &Kind) -> Result<(), String> {
        kind_verdict(plugin, self.rules(plugin), kind)
    }

    /// The declared child kinds the policy allows: what the host watches and applies.
    pub fn allowed_children(&self, decl: &Declaration) -> Vec<Kind> {
        let rules = self.rules(&decl.name);
        decl.children
            .iter()
            .filter(|k| kind_verdict(&decl.name, rules, k).is_ok())
            .cloned()
            .collect()
    }

    /// Checks a plugin when it is loaded: its content against a `sha256` pin, its parent
    /// kind's API group, and its child kinds. A plugin that declares child kinds none of
    /// which the policy allows is refused (it could never reconcile anything); otherwise the
    /// returned warnings name each declared kind the policy forbids (never watched, never
    /// applied) and each kind the policy lists that the plugin does not declare.
    pub fn admit(&self, decl: &Declaration) -> Result<Vec<String>, Error> {
        let rules = self.rules(&decl.name);
        let refuse = |problem: String| Error::Admit {
            plugin: decl.name.clone(),
            parent: decl.parent.to_string(),
            problem,
        };
        if let Some(pinned) = &rules.sha256
            && *pinned != decl.content_hash
        {
            return Err(refuse(format!(
                "its content is sha256:{}, but the policy pins plugins.{}.sha256 to sha256:{pinned}",
                decl.content_hash, decl.name
            )));
        }
        parent_group_verdict(&decl.name, rules, &decl.parent.group).map_err(refuse)?;
        let mut warnings = Vec::new();
        for kind in &decl.children {
            if let Err(problem) = kind_verdict(&decl.name, rules, kind) {
                warnings.push(format!("{kind} will not be watched or applied: {problem}"));
            }
        }
        if !decl.children.is_empty() && warnings.len() == decl.children.len() {
            return Err(refuse(format!(
                "none of the child kinds it declares is allowed ({})",
                warnings.join("; ")
            )));
        }
        for listed in rules.kinds.iter().flatten() {
            if !decl.children.iter().any(|k| listed.matches(k)) {
                warnings.push(format!(
                    "the policy allows {listed}, which the plugin does not declare"
                ));
            }
        }
        // What a plugin reads decides what it sees: a declaration the policy does not allow
        // refuses the plugin, rather than serving it blind to what it asked for.
        for related in &decl.related {
            related_verdict(&decl.name, rules, related)
                .map_err(|problem| refuse(format!("related {:?}: {problem}", related.name)))?;
        }
        Ok(warnings)
    }

    /// Checks a plan of `plugin` for `parent` before anything is written: the parent's
    /// namespace, the number of children, each child's kind, service-account tokens, and
    /// each pod template's Secret and ServiceAccount references and Pod Security level.
    /// What [`check_child`](crate::plan::check_child) already validated is not repeated.
    pub fn check(
        &self,
        plugin: &Declaration,
        parent: &Value,
        plan: &Plan,
    ) -> Result<(), PolicyViolation> {
        let rules = self.rules(&plugin.name);
        let name = &plugin.name;
        check_namespace(name, rules, parent)?;
        if plan.apply.len() > rules.max_children {
            return Err(PolicyViolation(format!(
                "plugin {name} returned {} children, the policy allows at most {}",
                plan.apply.len(),
                rules.max_children
            )));
        }
        let references = pods::Allowed::new(rules, parent, plan.objects());
        for child in plan.objects() {
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
            kind_verdict(name, rules, kind)
                .map_err(|p| PolicyViolation(format!("{label}: {p}")))?;
            if !rules.allow_service_account_tokens
                && let Some(problem) = token_problem(kind, child)
            {
                return Err(PolicyViolation(format!(
                    "{label} {problem}, and allowServiceAccountTokens is false for plugin {name}"
                )));
            }
            for template in pods::templates(kind, child) {
                pods::check_template(name, rules, &references, &template)
                    .map_err(|problem| PolicyViolation(format!("{label}: {problem}")))?;
            }
        }
        Ok(())
    }

    /// Checks that `plugin` may act on `parent` at all (its namespace): what a finalizer
    /// step must pass before the plugin is called or its finalizer is touched.
    pub fn check_parent(&self, plugin: &str, parent: &Value) -> Result<(), PolicyViolation> {
        check_namespace(plugin, self.rules(plugin), parent)
    }
}

fn check_namespace(plugin: &str, rules: &Effective, parent: &Value) -> Result<(), PolicyViolation> {
    let namespace = parent["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    if !rules.namespaces.is_empty() && !rules.namespaces.iter().any(|n| n == namespace) {
        return Err(PolicyViolation(format!(
            "plugin {plugin} may not reconcile parents in namespace {namespace:?} \
             (the policy allows: {})",
            rules.namespaces.join(", ")
        )));
    }
    Ok(())
}

/// Validates the rules of `defaults` or of one plugin's entry (`field` names it in errors)
/// and types what needs it.
fn typed(
    rules: Rules,
    field: &str,
    invalid: &dyn Fn(&str, String, &str) -> Error,
) -> Result<Typed, Error> {
    let kind_names = |list: &str, written: &Option<Vec<String>>| -> Result<_, Error> {
        let Some(written) = written else {
            return Ok(None);
        };
        let mut parsed = Vec::with_capacity(written.len());
        for (index, kind) in written.iter().enumerate() {
            parsed.push(KindName::parse(kind).ok_or_else(|| {
                invalid(
                    &format!("{field}.{list}[{index}]"),
                    format!("{kind:?}"),
                    "group/version/Kind, or version/Kind for the core group (e.g. apps/v1/Deployment, v1/Service)",
                )
            })?);
        }
        Ok(Some(parsed))
    };
    let kinds = kind_names("kinds", &rules.kinds)?;
    let related = kind_names("related", &rules.related)?;
    for (index, namespace) in rules.namespaces.iter().flatten().enumerate() {
        if check_dns_label(namespace).is_err() {
            return Err(invalid(
                &format!("{field}.namespaces[{index}]"),
                format!("{namespace:?}"),
                "a namespace name (a DNS-1123 label)",
            ));
        }
    }
    let mut parent_groups = None;
    if let Some(written) = &rules.parent_groups {
        let mut parsed = Vec::with_capacity(written.len());
        for (index, group) in written.iter().enumerate() {
            let pattern = GroupPattern::parse(group).ok_or_else(|| {
                invalid(
                    &format!("{field}.parentGroups[{index}]"),
                    format!("{group:?}"),
                    "an API group with a dot (example.com), or *.example.com for its subdomains",
                )
            })?;
            parsed.push(pattern);
        }
        parent_groups = Some(parsed);
    }
    let mut sha256 = None;
    if let Some(pin) = &rules.sha256 {
        let hex = pin.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid(
                &format!("{field}.sha256"),
                format!("{pin:?}"),
                "sha256: followed by 64 lower-case hex digits (operator-host inspect prints it)",
            ));
        }
        sha256 = Some(hex.to_string());
    }
    for (index, pem) in rules.signature_keys.iter().flatten().enumerate() {
        let what = format!("{field}.signatureKeys[{index}]");
        if let Err(error) = crate::signature::PublicKey::from_pem(pem, &what) {
            return Err(invalid(
                &what,
                error.to_string(),
                "a PEM public key of ECDSA P-256 (cosign.pub, or what `operator-host generate-key` writes)",
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
    let budget = rules.write_budget.clone().unwrap_or_default();
    let limits = rules.limits.clone().unwrap_or_default();
    let guard = rules.prune_guard.clone().unwrap_or_default();
    if let Some(percent) = guard.max_percent
        && !(1..=100).contains(&percent)
    {
        return Err(invalid(
            &format!("{field}.pruneGuard.maxPercent"),
            percent.to_string(),
            "a percentage from 1 to 100 (100 turns the guard off)",
        ));
    }
    let rollout = rules.rollout.clone().unwrap_or_default();
    for (name, percent) in [
        ("maxDeletePercent", rollout.max_delete_percent),
        ("canaryPercent", rollout.canary_percent),
    ] {
        if let Some(percent) = percent
            && !(1..=100).contains(&percent)
        {
            return Err(invalid(
                &format!("{field}.rollout.{name}"),
                percent.to_string(),
                "a percentage from 1 to 100",
            ));
        }
    }
    if let Some(selector) = &rollout.canary_selector
        && let Err(problem) = crate::labels::parse(selector)
    {
        return Err(invalid(
            &format!("{field}.rollout.canarySelector"),
            selector.clone(),
            &format!("a label selector such as tier=canary ({problem})"),
        ));
    }
    let positive = [
        ("limits.callTimeoutMs", limits.call_timeout_ms),
        ("limits.memoryMiB", limits.memory_mib.map(|v| v as u64)),
        (
            "limits.maxResponseMiB",
            limits.max_response_mib.map(|v| v as u64),
        ),
        (
            "limits.maxConcurrentCalls",
            limits.max_concurrent_calls.map(|v| v as u64),
        ),
        ("writeBudget.perSecond", budget.per_second.map(u64::from)),
        ("writeBudget.burst", budget.burst.map(u64::from)),
        ("statusChurnLimit", rules.status_churn_limit.map(u64::from)),
        ("pruneGuard.windowSeconds", guard.window_seconds),
    ];
    for (name, value) in positive {
        if value == Some(0) {
            return Err(invalid(
                &format!("{field}.{name}"),
                "0".into(),
                "a number greater than 0",
            ));
        }
    }
    Ok(Typed {
        rules,
        kinds,
        related,
        parent_groups,
        sha256,
    })
}

/// `kinds` for a message: `apps/v1/Deployment, v1/Service`, or `none`.
fn listed(kinds: &[KindName]) -> String {
    if kinds.is_empty() {
        return "none".to_string();
    }
    kinds
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `rules` allow children of `kind`; `Err` says why not.
fn kind_verdict(plugin: &str, rules: &Effective, kind: &Kind) -> Result<(), String> {
    if !kind.namespaced {
        return Err("cluster-scoped kinds are never allowed as children".into());
    }
    if let Some(kinds) = &rules.kinds
        && !kinds.iter().any(|k| k.matches(kind))
    {
        return Err(format!(
            "the policy's kinds for plugin {plugin} do not include it (allowed: {})",
            listed(kinds)
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

/// Whether `rules` let `plugin` read the objects `related` declares; `Err` says why not.
fn related_verdict(plugin: &str, rules: &Effective, related: &Related) -> Result<(), String> {
    let kind = &related.kind;
    if let Some(allowed) = &rules.related
        && !allowed.iter().any(|k| k.matches(kind))
    {
        return Err(format!(
            "the policy's related kinds for plugin {plugin} do not include {kind} (allowed: {})",
            listed(allowed)
        ));
    }
    if related.is_secret() {
        if !rules.allow_secrets {
            return Err(format!(
                "it reads Secrets, and allowSecrets is false for plugin {plugin}"
            ));
        }
        if related.secret_view == SecretView::Full && !rules.allow_secret_data {
            return Err(format!(
                "it asks for the Secrets' data in clear, and allowSecretData is false for \
                 plugin {plugin} (a plugin that only needs to know a key exists or changed \
                 asks for data-hash)"
            ));
        }
    }
    Ok(())
}

/// Whether `plugin` may reconcile a parent kind of API group `group`; `Err` says why not.
fn parent_group_verdict(plugin: &str, rules: &Effective, group: &str) -> Result<(), String> {
    if group.is_empty() {
        return Err("the core API group belongs to Kubernetes".into());
    }
    if let Some(suffix) = KUBERNETES_GROUP_SUFFIXES
        .iter()
        .find(|s| group == **s || is_subdomain_of(group, s))
    {
        return Err(format!(
            "the API group {group:?} belongs to Kubernetes (*.{suffix}); no plugin may own its kinds"
        ));
    }
    if group == HOST_GROUP {
        return Err(format!(
            "the API group {HOST_GROUP:?} is operator-host's own; no plugin may own its kinds"
        ));
    }
    if let Some(allowed) = &rules.parent_groups
        && !allowed.iter().any(|p| p.matches(group))
    {
        let listed: Vec<String> = allowed.iter().map(ToString::to_string).collect();
        return Err(format!(
            "the policy's parentGroups for plugin {plugin} do not include {group:?} (allowed: {})",
            if listed.is_empty() {
                "none".to_string()
            } else {
                listed.join(", ")
            }
        ));
    }
    Ok(())
}

/// How `child` of `kind` would give pods a service-account token, if it would.
fn token_problem(kind: &Kind, child: &Value) -> Option<String> {
    if kind.group.is_empty() && kind.kind == "Secret" {
        return (child["type"] == SERVICE_ACCOUNT_TOKEN_TYPE)
            .then(|| "is a Secret of type kubernetes.io/service-account-token".into());
    }
    if kind.group.is_empty() && kind.kind == "ServiceAccount" {
        return (child["automountServiceAccountToken"] != false)
            .then(|| "does not set automountServiceAccountToken: false".into());
    }
    pods::templates(kind, child)
        .iter()
        .find_map(pods::token_problem)
}

#[cfg(test)]
mod tests;
