//! operator-host plugin for a web application: its config, a database Secret whose rotation rolls it, a migration Job before it, a Service and a PodDisruptionBudget per `WebApp` CR.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{
    CONTENT_HASH_ANNOTATION, Condition, Desired, Error, Kind, Observed, Reconciler, Related,
    Rollout, WorkloadView, component_labels, content_hash, from_json, kind_of,
    restricted_container_security_context, restricted_pod_security_context,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A web application: a Deployment of `image` behind a Service, configured by `config` and
/// the database Secret, with its schema migrated by `migration` before it rolls out.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "webapp.operator-host.dev",
    version = "v1alpha1",
    kind = "WebApp",
    namespaced,
    status = "WebAppStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// The application's image.
    pub image: String,
    /// Pods serving it; above one, a PodDisruptionBudget keeps one up through node drains.
    #[schemars(range(min = 0, max = 50))]
    pub replicas: i32,
    /// The port the application listens on.
    #[serde(default = "default_port")]
    pub port: i32,
    /// Environment of the application (a ConfigMap); a change rolls the pods.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The Secret with the database's credentials, given to the application and the migration
    /// as environment; its rotation rolls the pods.
    pub database_secret: String,
    /// The command that migrates the schema (in the application's image), run once per image
    /// before the application rolls out; none: no migration.
    #[serde(default)]
    pub migration: Vec<String>,
}

fn default_port() -> i32 {
    8080
}

/// What the plugin observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppStatus {
    /// `Pending`, `Migrating`, `RollingOut`, `Ready` or `Failed`.
    #[serde(default)]
    pub phase: String,
    /// Ready pods.
    #[serde(default)]
    pub ready_replicas: i32,
    /// `Ready`, `MigrationComplete` (with a migration) and `Available`, each of the current spec.
    #[serde(default)]
    #[schemars(schema_with = "operator_host_sdk::conditions_schema")]
    pub conditions: Vec<Condition>,
}

pub struct WebAppOperator;

impl Reconciler for WebAppOperator {
    type Parent = WebApp;
    const NAME: &'static str = "webapp";

    fn children() -> Vec<Kind> {
        vec![
            kind_of::<ConfigMap>(),
            kind_of::<Job>(),
            kind_of::<Deployment>(),
            kind_of::<Service>(),
            kind_of::<PodDisruptionBudget>(),
        ]
    }

    fn related() -> Vec<Related> {
        // Hashes of the values (the default view): enough to roll the pods on a rotation.
        vec![Related::by_name_at(
            "database",
            kind_of::<Secret>(),
            "spec.databaseSecret",
        )]
    }

    fn reconcile(parent: &WebApp, observed: &Observed) -> Result<Desired, Error> {
        let spec = &parent.spec;
        if spec.image.trim().is_empty() || spec.image.contains(char::is_whitespace) {
            return Err(Error::invalid_field("image", "must be an image reference"));
        }
        if !(1..=65535).contains(&spec.port) {
            return Err(Error::invalid_field("port", "must be between 1 and 65535"));
        }
        let name = parent.name_any();
        let config_name = format!("{name}-config");
        let env_from = json!([{"configMapRef": {"name": config_name}},
                              {"secretRef": {"name": spec.database_secret}}]);
        // Each kind of pod a component of its own: the Service and the budget select the
        // server's pods only, never the migration Job's.
        let labels = |component| component_labels(Self::NAME, &name, component);
        let mut desired = Desired::new();
        desired.child(&from_json::<ConfigMap>(json!({
            "metadata": {"name": config_name, "labels": labels("config")},
            "data": spec.config,
        }))?)?;
        let migrate = format!("{name}-migrate");
        if !spec.migration.is_empty() {
            // Once per image and command; the children below wait for it (a barrier).
            let migration = labels("migration");
            desired.run_once(
                &from_json::<Job>(json!({
                    "metadata": {"name": migrate, "labels": migration},
                    "spec": {"backoffLimit": 3, "template": {
                        "metadata": {"labels": migration},
                        "spec": pod(&spec.image, Some(&spec.migration), &env_from, None),
                    }},
                }))?,
                &(&spec.image, &spec.migration),
            )?;
        }
        let secret = observed.related::<Secret>("database")?.into_iter().next();
        let server = labels("server");
        // What the pods read but do not embed: a change of either rolls them.
        let read_hash = content_hash(&(&spec.config, secret.as_ref().map(|s| &s.data)))?;
        desired.child(&from_json::<Deployment>(json!({
            "metadata": {"name": name, "labels": server},
            "spec": {"replicas": spec.replicas, "selector": {"matchLabels": server}, "template": {
                "metadata": {"labels": server, "annotations": {CONTENT_HASH_ANNOTATION: read_hash}},
                "spec": pod(&spec.image, None, &env_from, Some(spec.port)),
            }},
        }))?)?;
        desired.child(&from_json::<Service>(json!({
            "metadata": {"name": name, "labels": server},
            "spec": {"selector": server, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        }))?)?;
        if spec.replicas > 1 {
            desired.child(&from_json::<PodDisruptionBudget>(json!({
                "metadata": {"name": name, "labels": server},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": server}},
            }))?)?;
        }
        let status = status(parent, observed, &desired, secret.is_some())?;
        desired.status(&status)?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(WebAppOperator);

/// The status of what `desired` asks, from what was observed: each condition is of the
/// current spec (an old Job's completion or an old Deployment's rollout is not).
fn status(
    parent: &WebApp,
    observed: &Observed,
    desired: &Desired,
    has_secret: bool,
) -> Result<WebAppStatus, Error> {
    let (generation, name) = (parent.metadata.generation, parent.name_any());
    let migration = match parent.spec.migration.is_empty() {
        true => None,
        false => Some(observed.rollout_of::<Job>(&format!("{name}-migrate"), desired)?),
    };
    let rollout = observed.rollout_of::<Deployment>(&name, desired)?;
    // The first step not done is the phase.
    let (phase, message) = match (&migration, &rollout) {
        _ if !has_secret => (
            "Pending",
            format!("waiting for the Secret {:?}", parent.spec.database_secret),
        ),
        (Some(failed @ Rollout::Failed { .. }), _) | (_, failed @ Rollout::Failed { .. }) => {
            ("Failed", failed.message().into())
        }
        (Some(run @ Rollout::Pending { .. }), _) => ("Migrating", run.message().into()),
        (_, Rollout::Pending { message, .. }) => ("RollingOut", message.clone()),
        (_, Rollout::Complete) => ("Ready", "rolled out".into()),
    };
    let mut conditions = vec![Condition::ready_from_phase(
        phase,
        phase == "Ready",
        message,
        generation,
    )];
    conditions.extend(migration.map(|run| run.condition("MigrationComplete", generation)));
    conditions.push(rollout.condition("Available", generation));
    let ready_replicas = observed
        .view::<Deployment, WorkloadView>(&name)?
        .and_then(|w| w.status.ready_replicas);
    Ok(WebAppStatus {
        phase: phase.into(),
        ready_replicas: ready_replicas.unwrap_or(0),
        conditions,
    })
}

/// A restricted pod of `image` with `env_from`: the server (listening on `port`) or, with
/// `command`, a run to completion.
fn pod(image: &str, command: Option<&[String]>, env_from: &Value, port: Option<i32>) -> Value {
    let mut container = json!({
        "name": "app", "image": image, "envFrom": env_from,
        "securityContext": restricted_container_security_context(),
    });
    if let Some(command) = command {
        container["command"] = json!(command);
    }
    if let Some(port) = port {
        container["ports"] = json!([{"name": "http", "containerPort": port}]);
        container["readinessProbe"] = json!({"tcpSocket": {"port": "http"}});
    }
    let restart = if command.is_some() { "Never" } else { "Always" };
    json!({"securityContext": restricted_pod_security_context(Some(1000)),
           "restartPolicy": restart, "containers": [container]})
}

#[cfg(test)]
mod tests;
