//! The policies the target checks every plan against, each with this crate's model of it.
//!
//! For each policy, [`check_policies`] compares `Policy::check` with the model: an `Ok` the
//! model refuses is a bypass, an `Err` the model accepts is a false refusal, and a refusal of
//! one child must name the first child the model refuses (and, for a pod template, a field
//! of that template).

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::LazyLock;

use operator_host::plan::Plan;
use operator_host::policy::Policy;
use serde_json::Value;

use super::pod_security::{self, Level};
use crate::scenario::{DECLARATION, pod_template_path};

/// Which Secrets a pod template may reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SecretReferences {
    /// Names that are string values of the parent's spec, or Secrets of the plan.
    ParentSpec,
    Any,
    None,
}

/// A policy's rules as this crate understands them, next to the document that says them.
#[derive(Debug)]
struct Model {
    name: &'static str,
    /// `None`: `Policy::default()`.
    document: Option<&'static str>,
    /// Empty: any namespace.
    namespaces: &'static [&'static str],
    max_children: usize,
    /// `(apiVersion, kind)`; `None`: every declared kind.
    kinds: Option<&'static [(&'static str, &'static str)]>,
    allow_rbac: bool,
    allow_secrets: bool,
    allow_tokens: bool,
    pod_security: Level,
    secret_references: SecretReferences,
    any_service_account: bool,
}

/// The safe defaults every policy starts from.
const DEFAULT: Model = Model {
    name: "default",
    document: None,
    namespaces: &[],
    max_children: 1000,
    kinds: None,
    allow_rbac: false,
    allow_secrets: false,
    allow_tokens: false,
    pod_security: Level::Baseline,
    secret_references: SecretReferences::ParentSpec,
    any_service_account: false,
};

/// The plugin's entry overrides `defaults`: kinds narrowed; namespaces, maxChildren,
/// podSecurity and secretReferences replaced; allowSecrets turned off again. allowRbac and
/// tokens come from `defaults`, serviceAccountReferences from the safe default.
const STRICT_DOCUMENT: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  namespaces: [other]
  allowSecrets: true
  allowRbac: true
  allowServiceAccountTokens: true
  podSecurity: privileged
  secretReferences: any
plugins:
  memcached:
    kinds: [apps/v1/Deployment, v1/Service, v1/ConfigMap, v1/Secret, rbac.authorization.k8s.io/v1/Role, v1/Pod, batch/v1/CronJob]
    namespaces: [ns, default]
    maxChildren: 3
    allowSecrets: false
    podSecurity: restricted
    secretReferences: none
";

const PERMISSIVE_DOCUMENT: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  allowSecrets: true
  allowRbac: true
  allowServiceAccountTokens: true
  podSecurity: privileged
  secretReferences: any
  serviceAccountReferences: any
";

/// The defaults but for Secrets, so the plugin's own Secrets count under `parentSpec`.
const OWN_SECRETS_DOCUMENT: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  allowSecrets: true
";

static MODELS: [Model; 4] = [
    DEFAULT,
    Model {
        name: "strict",
        document: Some(STRICT_DOCUMENT),
        namespaces: &["ns", "default"],
        max_children: 3,
        kinds: Some(&[
            ("apps/v1", "Deployment"),
            ("v1", "Service"),
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("v1", "Pod"),
            ("batch/v1", "CronJob"),
        ]),
        allow_rbac: true,
        allow_secrets: false,
        allow_tokens: true,
        pod_security: Level::Restricted,
        secret_references: SecretReferences::None,
        any_service_account: false,
    },
    Model {
        name: "permissive",
        document: Some(PERMISSIVE_DOCUMENT),
        allow_rbac: true,
        allow_secrets: true,
        allow_tokens: true,
        pod_security: Level::Privileged,
        secret_references: SecretReferences::Any,
        any_service_account: true,
        ..DEFAULT
    },
    Model {
        name: "own-secrets",
        document: Some(OWN_SECRETS_DOCUMENT),
        allow_secrets: true,
        ..DEFAULT
    },
];

static POLICIES: LazyLock<Vec<(&'static Model, Policy)>> = LazyLock::new(|| {
    MODELS
        .iter()
        .map(|model| {
            let policy = match model.document {
                None => Policy::default(),
                Some(text) => Policy::parse(text, Path::new(model.name))
                    .unwrap_or_else(|e| panic!("the {} policy is invalid: {e}", model.name)),
            };
            (model, policy)
        })
        .collect()
});

/// Why a model refuses a plan: what the host's message must then say.
#[derive(Debug)]
enum Refusal {
    Namespace(String),
    TooManyChildren(usize),
    Child {
        /// `apiVersion/Kind "name"`, as the host names a child.
        label: String,
        problem: Problem,
    },
}

#[derive(Debug)]
enum Problem {
    Kind(&'static str),
    Token,
    /// A pod template rule, with the template's path prefix (`spec.template.`, or `` for a
    /// Pod): the message must name a field under it.
    Template {
        prefix: String,
        rule: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Namespace(namespace) => write!(f, "namespace {namespace:?}"),
            Refusal::TooManyChildren(count) => write!(f, "{count} children"),
            Refusal::Child { label, problem } => match problem {
                Problem::Kind(rule) => write!(f, "{label}: {rule}"),
                Problem::Token => write!(f, "{label}: a service-account token"),
                Problem::Template { rule, .. } => write!(f, "{label}: pod template: {rule}"),
            },
        }
    }
}

/// Each policy's verdict on `plan` for `parent` (in `namespace`) against its model.
pub fn check_policies(parent: &Value, plan: &Plan, namespace: &str) {
    for (model, policy) in POLICIES.iter() {
        let verdict = policy.check(&DECLARATION, parent, plan);
        let expected = model.refusal(parent, plan, namespace);
        let name = model.name;
        match (verdict, expected) {
            (Ok(()), None) => {}
            (Ok(()), Some(refusal)) => {
                panic!("{name} policy: Ok(()) for a plan it must refuse ({refusal}): {plan:?}")
            }
            (Err(violation), None) => {
                panic!("{name} policy refused a plan it must accept: {violation}")
            }
            (Err(violation), Some(refusal)) => check_message(name, &violation.0, &refusal),
        }
    }
}

fn check_message(policy: &str, message: &str, refusal: &Refusal) {
    let named = match refusal {
        Refusal::Namespace(namespace) => message.contains(&format!("{namespace:?}")),
        Refusal::TooManyChildren(count) => message.contains(&count.to_string()),
        Refusal::Child { label, problem } => match message.strip_prefix(label.as_str()) {
            None => false,
            Some(rest) => match problem {
                Problem::Template { prefix, .. } => rest.strip_prefix(": ").is_some_and(|field| {
                    field.starts_with(&format!("{prefix}spec"))
                        || field.starts_with(&format!("{prefix}metadata"))
                }),
                Problem::Kind(_) | Problem::Token => true,
            },
        },
    };
    assert!(
        named,
        "{policy} policy: the message does not name what the model refuses ({refusal}): {message}"
    );
}

impl Model {
    /// Why this policy must refuse `plan`, as the first reason the host meets; `None` if it
    /// must accept it. The host checks the namespace, then the count, then each child in
    /// apply order: its kind, its tokens, then its pod template.
    fn refusal(&self, parent: &Value, plan: &Plan, namespace: &str) -> Option<Refusal> {
        if !self.namespaces.is_empty() && !self.namespaces.contains(&namespace) {
            return Some(Refusal::Namespace(namespace.into()));
        }
        if plan.apply.len() > self.max_children {
            return Some(Refusal::TooManyChildren(plan.apply.len()));
        }
        let mut allowed_secrets = names_of(plan, "Secret");
        if self.secret_references == SecretReferences::ParentSpec {
            collect_strings(&parent["spec"], &mut allowed_secrets);
        }
        let own_service_accounts = names_of(plan, "ServiceAccount");
        plan.objects().find_map(|child| {
            let problem = self.child_problem(child, &allowed_secrets, &own_service_accounts)?;
            let label = format!(
                "{}/{} {:?}",
                child["apiVersion"].as_str().unwrap_or_default(),
                child["kind"].as_str().unwrap_or_default(),
                child["metadata"]["name"].as_str().unwrap_or_default()
            );
            Some(Refusal::Child { label, problem })
        })
    }

    fn child_problem(
        &self,
        child: &Value,
        allowed_secrets: &BTreeSet<String>,
        own_service_accounts: &BTreeSet<String>,
    ) -> Option<Problem> {
        let api_version = child["apiVersion"].as_str().unwrap_or_default();
        let kind = child["kind"].as_str().unwrap_or_default();
        if self
            .kinds
            .is_some_and(|kinds| !kinds.contains(&(api_version, kind)))
        {
            return Some(Problem::Kind("not one of the policy's kinds"));
        }
        let rbac_kinds = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
        if api_version == "rbac.authorization.k8s.io/v1"
            && rbac_kinds.contains(&kind)
            && !self.allow_rbac
        {
            return Some(Problem::Kind("RBAC is not allowed"));
        }
        if (api_version, kind) == ("v1", "Secret") && !self.allow_secrets {
            return Some(Problem::Kind("Secrets are not allowed"));
        }
        let template_path = pod_template_path(api_version, kind);
        // A template is where its kind keeps it; a missing step is an empty template.
        let template = template_path.map(|path| {
            path.split('.')
                .filter(|key| !key.is_empty())
                .fold(child, |value, key| &value[key])
        });
        if !self.allow_tokens && gives_token(child, template) {
            return Some(Problem::Token);
        }
        let (path, template) = template_path.zip(template)?;
        let rule = self
            .secret_reference_problem(&template["spec"], allowed_secrets)
            .or_else(|| self.service_account_problem(&template["spec"], own_service_accounts))
            .or_else(|| {
                pod_security::refusing_control(
                    self.pod_security,
                    &template["metadata"],
                    &template["spec"],
                )
                .map(|control| format!("Pod Security control {control}"))
            })?;
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}.")
        };
        Some(Problem::Template { prefix, rule })
    }

    fn secret_reference_problem(&self, spec: &Value, allowed: &BTreeSet<String>) -> Option<String> {
        let permitted = |name: &Value| match self.secret_references {
            SecretReferences::Any => true,
            SecretReferences::None => false,
            SecretReferences::ParentSpec => name.as_str().is_some_and(|n| allowed.contains(n)),
        };
        secret_references(spec)
            .into_iter()
            .find(|name| !permitted(name))
            .map(|name| format!("Secret {name} referenced"))
    }

    fn service_account_problem(&self, spec: &Value, own: &BTreeSet<String>) -> Option<String> {
        if self.any_service_account {
            return None;
        }
        // `serviceAccount` is the deprecated alias the API server still honours.
        ["serviceAccountName", "serviceAccount"]
            .into_iter()
            .find(|field| match &spec[field] {
                Value::Null => false,
                Value::String(name) => {
                    !(name.is_empty() || name == "default" || own.contains(name))
                }
                _ => true,
            })
            .map(|field| format!("{field} {}", spec[field]))
    }
}

/// Names of the plan's children of the core kind `kind`.
fn names_of(plan: &Plan, kind: &str) -> BTreeSet<String> {
    plan.objects()
        .filter(|c| c["apiVersion"] == "v1" && c["kind"] == kind)
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Every string value in `value`, at any depth.
fn collect_strings(value: &Value, into: &mut BTreeSet<String>) {
    match value {
        Value::String(text) => {
            into.insert(text.clone());
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, into)),
        Value::Object(fields) => fields.values().for_each(|v| collect_strings(v, into)),
        _ => {}
    }
}

fn list(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

/// Every place a pod spec names a Secret (Kubernetes' `VisitPodSecretNames`), as the
/// values found there. Lists that are not lists hold none: the API server rejects them.
fn secret_references(spec: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    for volume in list(&spec["volumes"]) {
        found.push(&volume["secret"]["secretName"]);
        found.push(&volume["azureFile"]["secretName"]);
        found.push(&volume["csi"]["nodePublishSecretRef"]["name"]);
        for plugin in [
            "cephfs",
            "cinder",
            "flexVolume",
            "iscsi",
            "rbd",
            "scaleIO",
            "storageos",
        ] {
            found.push(&volume[plugin]["secretRef"]["name"]);
        }
        for source in list(&volume["projected"]["sources"]) {
            found.push(&source["secret"]["name"]);
        }
    }
    for pull in list(&spec["imagePullSecrets"]) {
        found.push(&pull["name"]);
    }
    for containers in ["initContainers", "containers", "ephemeralContainers"] {
        for container in list(&spec[containers]) {
            for env in list(&container["env"]) {
                found.push(&env["valueFrom"]["secretKeyRef"]["name"]);
            }
            for from in list(&container["envFrom"]) {
                found.push(&from["secretRef"]["name"]);
            }
        }
    }
    found.retain(|name| !name.is_null());
    found
}

/// Whether `child` would give pods a service-account token the policy must know of: a token
/// Secret, a ServiceAccount that does not turn automounting off, or a pod template that
/// turns it on or mounts a projected token.
fn gives_token(child: &Value, template: Option<&Value>) -> bool {
    match (child["apiVersion"].as_str(), child["kind"].as_str()) {
        (Some("v1"), Some("Secret")) => child["type"] == "kubernetes.io/service-account-token",
        (Some("v1"), Some("ServiceAccount")) => child["automountServiceAccountToken"] != false,
        _ => template.is_some_and(|template| {
            let spec = &template["spec"];
            spec["automountServiceAccountToken"] == true
                || list(&spec["volumes"])
                    .flat_map(|volume| list(&volume["projected"]["sources"]))
                    .any(|source| !source["serviceAccountToken"].is_null())
        }),
    }
}
