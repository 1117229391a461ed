//! Test-only plugin of contract 0.2.0: every apply option, on objects kwok can complete.
//!
//! A `Staged` CR asks for:
//! - one Job per entry of `spec.steps`, run one after the other: each is a barrier (ready when
//!   its `Complete` condition is `True`) for the next, and updated by `recreate` (a Job's
//!   template is immutable, so a new `spec.image` deletes and recreates them);
//! - a ConfigMap `<name>-done` after the last step, listing the steps;
//! - a ConfigMap `<name>-seed` holding `spec.seed`, `create-only`: a later seed changes nothing;
//! - while `spec.keep` is true, a ConfigMap `<name>-kept` whose delete policy is `orphan`;
//! - when `spec.pinnedImage` is set, a Job `<name>-pinned` updated in place: changing the
//!   image then is an immutable-field refusal the host reports instead of retrying.
//!
//! And it reads related objects: the ConfigMap `spec.configName` names, the Secret
//! `spec.secretName` names (as hashes of its values), and every ConfigMap labelled
//! `staged.operator-host.dev/extra=true`; its status reports what it saw of them.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec, Secret};
use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{
    ChildOptions, Desired, Error, Kind, Observed, Reconciler, Related, child_meta,
    job_condition_holds, kind_of, restricted_container_security_context,
    restricted_pod_security_context,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a `Staged` CR asks for.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "staged.operator-host.dev",
    version = "v1alpha1",
    kind = "Staged",
    plural = "stageds",
    namespaced,
    status = "StagedStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct StagedSpec {
    /// Jobs run one after the other, by name (DNS-1123 labels).
    #[serde(default)]
    pub steps: Vec<String>,
    /// The image of the step Jobs.
    #[serde(default = "default_image")]
    pub image: String,
    /// What the create-only ConfigMap holds.
    #[serde(default)]
    pub seed: String,
    /// Whether the orphan-on-prune ConfigMap is still wanted.
    #[serde(default = "default_keep")]
    pub keep: bool,
    /// When set, a Job of this image updated in place.
    #[serde(default)]
    pub pinned_image: Option<String>,
    /// A ConfigMap whose data the status reports.
    #[serde(default)]
    pub config_name: Option<String>,
    /// A Secret whose values' hashes the status reports.
    #[serde(default)]
    pub secret_name: Option<String>,
}

fn default_image() -> String {
    "registry.k8s.io/pause:3.10".into()
}

fn default_keep() -> bool {
    true
}

/// What the plugin observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StagedStatus {
    /// Step Jobs observed complete.
    #[serde(default)]
    pub completed_steps: i32,
    /// The data of the ConfigMap `spec.configName` names, as the plugin saw it.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The values of the Secret `spec.secretName` names, as the plugin saw them (hashes).
    #[serde(default)]
    pub secret: BTreeMap<String, String>,
    /// The names of the ConfigMaps labelled `staged.operator-host.dev/extra=true`.
    #[serde(default)]
    pub extras: Vec<String>,
}

/// The reconciler.
pub struct StagedOperator;

impl Reconciler for StagedOperator {
    type Parent = Staged;
    const NAME: &'static str = "staged";

    fn children() -> Vec<Kind> {
        vec![kind_of::<ConfigMap>(), kind_of::<Job>()]
    }

    fn related() -> Vec<Related> {
        vec![
            Related::by_name_at("config", kind_of::<ConfigMap>(), "spec.configName"),
            Related::by_name_at("secret", kind_of::<Secret>(), "spec.secretName"),
            Related::by_labels(
                "extras",
                kind_of::<ConfigMap>(),
                "staged.operator-host.dev/extra=true",
            ),
        ]
    }

    fn reconcile(parent: &Staged, observed: &Observed) -> Result<Desired, Error> {
        let name = parent.name_any();
        let spec = &parent.spec;
        for step in &spec.steps {
            check_step(step)?;
        }
        let mut desired = Desired::new();
        desired.child_with(
            &config_map(&format!("{name}-seed"), [("seed", spec.seed.clone())]),
            ChildOptions::new().create_only(),
        )?;
        if spec.keep {
            desired.child_with(
                &config_map(&format!("{name}-kept"), [("kept", "yes".to_string())]),
                ChildOptions::new().orphan_on_prune(),
            )?;
        }
        if let Some(image) = &spec.pinned_image {
            desired.child(&job(&format!("{name}-pinned"), image))?;
        }
        for step in &spec.steps {
            desired.child_with(
                &job(&step_job(&name, step), &spec.image),
                ChildOptions::new()
                    .recreate()
                    .ready_when_condition("Complete"),
            )?;
        }
        desired.child(&config_map(
            &format!("{name}-done"),
            [("steps", spec.steps.join(","))],
        ))?;
        let completed = spec
            .steps
            .iter()
            .filter_map(|step| observed.get::<Job>(&step_job(&name, step)).transpose())
            .collect::<Result<Vec<_>, _>>()?
            .iter()
            .filter(|job| job_condition_holds(job, "Complete"))
            .count();
        let config = observed
            .related::<ConfigMap>("config")?
            .into_iter()
            .next()
            .and_then(|c| c.data)
            .unwrap_or_default();
        // Under data-hash the values are hex SHA-256s, which are valid UTF-8.
        let secret = observed
            .related::<Secret>("secret")?
            .into_iter()
            .next()
            .and_then(|s| s.data)
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, String::from_utf8_lossy(&value.0).into_owned()))
            .collect();
        let extras = observed
            .related::<ConfigMap>("extras")?
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        desired.status(&StagedStatus {
            completed_steps: i32::try_from(completed).unwrap_or(i32::MAX),
            config,
            secret,
            extras,
        })?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(StagedOperator);

/// The Job of `step` for the CR `name`.
pub fn step_job(name: &str, step: &str) -> String {
    format!("{name}-step-{step}")
}

fn check_step(step: &str) -> Result<(), Error> {
    let valid = !step.is_empty()
        && step.len() <= 40
        && step
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !step.starts_with('-')
        && !step.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(Error::invalid_field(
            "steps",
            format!("{step:?} is not a DNS-1123 label of at most 40 characters"),
        ))
    }
}

fn config_map<const N: usize>(name: &str, data: [(&str, String); N]) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(name, BTreeMap::new()),
        data: Some(data.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        ..ConfigMap::default()
    }
}

fn job(name: &str, image: &str) -> Job {
    Job {
        metadata: child_meta(name, BTreeMap::new()),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    security_context: Some(restricted_pod_security_context(None)),
                    containers: vec![Container {
                        name: "step".into(),
                        image: Some(image.to_string()),
                        security_context: Some(restricted_container_security_context()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

#[cfg(test)]
mod tests;
