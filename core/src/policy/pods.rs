//! The pod templates in a plugin's output, and the rules about what they reference.
//!
//! A workload child runs the plugin author's pod template with the permissions of the
//! namespace it lands in. So besides its Pod Security level, a template may only name
//! Secrets the parent's author chose (or the plugin itself creates) and run as the
//! namespace's `default` ServiceAccount or one the plugin creates for the same parent;
//! otherwise a plugin could mount any Secret or borrow any identity of the namespace.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Effective, SecretReferences, ServiceAccountReferences, pod_security};
use crate::kinds::Kind;

/// One pod template of a child: where it is, and its metadata and spec.
#[derive(Debug)]
pub struct Template<'a> {
    /// The path of the object that holds `metadata` and `spec` (`""` for a Pod itself,
    /// `spec.template` for a Deployment).
    pub path: &'static str,
    pub metadata: &'a Value,
    pub spec: &'a Value,
}

impl Template<'_> {
    fn field(&self, rest: &str) -> String {
        if self.path.is_empty() {
            format!("spec.{rest}")
        } else {
            format!("{}.spec.{rest}", self.path)
        }
    }
}

/// The pod templates of `child` (a Pod; a PodTemplate; the `spec.template` of a Deployment,
/// StatefulSet, DaemonSet, ReplicaSet, ReplicationController or Job; a CronJob's
/// `spec.jobTemplate.spec.template`). Other kinds have none that the host knows of.
pub fn templates<'a>(kind: &Kind, child: &'a Value) -> Vec<Template<'a>> {
    let path = match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Pod") => "",
        ("", "PodTemplate") => "template",
        ("", "ReplicationController")
        | ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job") => "spec.template",
        ("batch", "CronJob") => "spec.jobTemplate.spec.template",
        _ => return Vec::new(),
    };
    let holder = path
        .split('.')
        .filter(|p| !p.is_empty())
        .fold(child, |value, key| &value[key]);
    vec![Template {
        path,
        metadata: &holder["metadata"],
        spec: &holder["spec"],
    }]
}

/// What the templates of one plan may reference, gathered once per plan.
#[derive(Debug)]
pub struct Allowed {
    /// Every string value in the parent's spec: the Secrets its author may have chosen.
    parent_spec_strings: BTreeSet<String>,
    /// Secrets the plan itself creates.
    own_secrets: BTreeSet<String>,
    /// ServiceAccounts the plan itself creates.
    own_service_accounts: BTreeSet<String>,
}

impl Allowed {
    pub fn new<'a>(
        rules: &Effective,
        parent: &Value,
        children: impl Iterator<Item = &'a Value> + Clone,
    ) -> Allowed {
        let mut parent_spec_strings = BTreeSet::new();
        if rules.secret_references == SecretReferences::ParentSpec {
            collect_strings(&parent["spec"], &mut parent_spec_strings);
        }
        let names_of = |kind: &str| -> BTreeSet<String> {
            children
                .clone()
                .filter(|c| c["apiVersion"] == "v1" && c["kind"] == kind)
                .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        };
        Allowed {
            parent_spec_strings,
            own_secrets: names_of("Secret"),
            own_service_accounts: names_of("ServiceAccount"),
        }
    }
}

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

/// Checks one template against the plugin's rules: Secret and ServiceAccount references,
/// then Pod Security. `Err` names the field, what it references and the rule.
pub fn check_template(
    plugin: &str,
    rules: &Effective,
    allowed: &Allowed,
    template: &Template<'_>,
) -> Result<(), String> {
    check_secret_references(plugin, rules, allowed, template)?;
    check_service_account(plugin, rules, allowed, template)?;
    let violations = pod_security::check_pod(
        rules.pod_security,
        template.metadata,
        template.spec,
        template.path,
    );
    if let Some(first) = violations.first() {
        let more = match violations.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(format!(
            "{}: {} (Pod Security control {}; podSecurity is {} for plugin {plugin}){more}",
            first.path, first.message, first.control, rules.pod_security
        ));
    }
    Ok(())
}

fn check_secret_references(
    plugin: &str,
    rules: &Effective,
    allowed: &Allowed,
    template: &Template<'_>,
) -> Result<(), String> {
    if rules.secret_references == SecretReferences::Any {
        return Ok(());
    }
    for (field, name) in secret_references(template) {
        let Some(name) = name else {
            return Err(format!(
                "{field} is not a Secret name (a string was expected)"
            ));
        };
        let permitted = match rules.secret_references {
            SecretReferences::Any => true,
            SecretReferences::None => false,
            SecretReferences::ParentSpec => {
                allowed.parent_spec_strings.contains(name) || allowed.own_secrets.contains(name)
            }
        };
        if !permitted {
            let rule = match rules.secret_references {
                SecretReferences::None => "secretReferences is none".to_string(),
                _ => "it is neither named in the parent's spec nor created by the plugin, \
                      and secretReferences is parentSpec"
                    .to_string(),
            };
            return Err(format!(
                "{field} references Secret {name:?}: {rule} for plugin {plugin}"
            ));
        }
    }
    Ok(())
}

/// Every Secret reference of a template: its field path and the name (`None` when the
/// name is not a string, which is refused rather than skipped).
fn secret_references<'a>(template: &Template<'a>) -> Vec<(String, Option<&'a str>)> {
    let spec = template.spec;
    let mut found = Vec::new();
    let mut add = |field: String, value: &'a Value| {
        if !value.is_null() {
            found.push((field, value.as_str()));
        }
    };
    for (i, volume) in items(&spec["volumes"]) {
        let at = |rest: &str| template.field(&format!("volumes[{i}].{rest}"));
        add(at("secret.secretName"), &volume["secret"]["secretName"]);
        add(
            at("azureFile.secretName"),
            &volume["azureFile"]["secretName"],
        );
        add(
            at("csi.nodePublishSecretRef.name"),
            &volume["csi"]["nodePublishSecretRef"]["name"],
        );
        for source in [
            "cephfs",
            "cinder",
            "flexVolume",
            "iscsi",
            "rbd",
            "scaleIO",
            "storageos",
        ] {
            add(
                at(&format!("{source}.secretRef.name")),
                &volume[source]["secretRef"]["name"],
            );
        }
        for (j, projected) in items(&volume["projected"]["sources"]) {
            add(
                at(&format!("projected.sources[{j}].secret.name")),
                &projected["secret"]["name"],
            );
        }
    }
    for (i, pull) in items(&spec["imagePullSecrets"]) {
        add(
            template.field(&format!("imagePullSecrets[{i}].name")),
            &pull["name"],
        );
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (c, container) in items(&spec[list]) {
            for (e, env) in items(&container["env"]) {
                add(
                    template.field(&format!("{list}[{c}].env[{e}].valueFrom.secretKeyRef.name")),
                    &env["valueFrom"]["secretKeyRef"]["name"],
                );
            }
            for (e, from) in items(&container["envFrom"]) {
                add(
                    template.field(&format!("{list}[{c}].envFrom[{e}].secretRef.name")),
                    &from["secretRef"]["name"],
                );
            }
        }
    }
    found
}

fn check_service_account(
    plugin: &str,
    rules: &Effective,
    allowed: &Allowed,
    template: &Template<'_>,
) -> Result<(), String> {
    if rules.service_account_references == ServiceAccountReferences::Any {
        return Ok(());
    }
    // `serviceAccount` is the deprecated alias the API server still honours.
    for field in ["serviceAccountName", "serviceAccount"] {
        let value = &template.spec[field];
        let permitted = match value {
            Value::Null => true,
            Value::String(name) => {
                name.is_empty() || name == "default" || allowed.own_service_accounts.contains(name)
            }
            _ => false,
        };
        if !permitted {
            return Err(format!(
                "{} is {value}: a pod template may run as the namespace's default \
                 ServiceAccount or one the plugin creates for this parent \
                 (serviceAccountReferences is defaultOrOwn for plugin {plugin})",
                template.field(field)
            ));
        }
    }
    Ok(())
}

/// How a template would give its pods a service-account token beyond what its
/// ServiceAccount's own `automountServiceAccountToken` decides, if it would.
pub fn token_problem(template: &Template<'_>) -> Option<String> {
    if template.spec["automountServiceAccountToken"] == true {
        return Some(format!(
            "sets {} to true in its pod spec",
            template.field("automountServiceAccountToken")
        ));
    }
    for (i, volume) in items(&template.spec["volumes"]) {
        for (j, source) in items(&volume["projected"]["sources"]) {
            if !source["serviceAccountToken"].is_null() {
                return Some(format!(
                    "mounts a projected service-account token at {}",
                    template.field(&format!(
                        "volumes[{i}].projected.sources[{j}].serviceAccountToken"
                    ))
                ));
            }
        }
    }
    None
}

fn items(value: &Value) -> impl Iterator<Item = (usize, &Value)> {
    value.as_array().into_iter().flatten().enumerate()
}
