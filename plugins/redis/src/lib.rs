//! operator-host plugin for Redis: a StatefulSet with a volume per server, its config, two Services and a PodDisruptionBudget per `Redis` CR.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{
    CONTENT_HASH_ANNOTATION, Condition, Desired, Error, Kind, Observed, Reconciler, Rollout,
    WorkloadView, app_labels, content_hash, from_json, kind_of,
    restricted_container_security_context, restricted_pod_security_context,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A Redis server with replicas.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "redis.operator-host.dev",
    version = "v1alpha1",
    kind = "Redis",
    plural = "redises",
    namespaced,
    status = "RedisStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RedisSpec {
    /// Redis servers (pods of the StatefulSet).
    #[schemars(range(min = 1, max = 9))]
    pub replicas: i32,
    /// Container image.
    #[serde(default = "default_image")]
    pub image: String,
    /// Size of each server's data volume.
    #[serde(default = "default_storage")]
    pub storage: String,
    /// Redis's `maxmemory` (e.g. `256mb`).
    #[serde(default = "default_max_memory")]
    pub max_memory: String,
}

fn default_image() -> String {
    "redis:7.4-alpine".into()
}
fn default_storage() -> String {
    "1Gi".into()
}
fn default_max_memory() -> String {
    "256mb".into()
}

/// What the plugin observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RedisStatus {
    /// `Pending`, `Rolling` or `Ready`.
    #[serde(default)]
    pub phase: String,
    /// Ready servers.
    #[serde(default)]
    pub ready_replicas: i32,
    /// `Ready`: every server runs the current spec and is ready.
    #[serde(default)]
    #[schemars(schema_with = "operator_host_sdk::conditions_schema")]
    pub conditions: Vec<Condition>,
}

pub struct RedisOperator;

impl Reconciler for RedisOperator {
    type Parent = Redis;
    const NAME: &'static str = "redis";

    fn children() -> Vec<Kind> {
        vec![
            kind_of::<ConfigMap>(),
            kind_of::<Service>(),
            kind_of::<StatefulSet>(),
            kind_of::<PodDisruptionBudget>(),
        ]
    }

    fn reconcile(parent: &Redis, observed: &Observed) -> Result<Desired, Error> {
        let spec = &parent.spec;
        if !(1..=9).contains(&spec.replicas) {
            return Err(Error::invalid_field("replicas", "must be between 1 and 9"));
        }
        let name = parent.name_any();
        let labels = app_labels("redis", &name);
        let config = BTreeMap::from([(
            "redis.conf".to_string(),
            format!("maxmemory {}\nappendonly yes\ndir /data\n", spec.max_memory),
        )]);
        let mut desired = Desired::new();
        desired.child(&from_json::<ConfigMap>(json!({
            "metadata": {"name": format!("{name}-config"), "labels": labels},
            "data": config,
        }))?)?;
        let port = json!([{"name": "redis", "port": 6379, "targetPort": "redis"}]);
        desired.child(&from_json::<Service>(json!({
            "metadata": {"name": format!("{name}-headless"), "labels": labels},
            "spec": {"clusterIP": "None", "selector": labels, "ports": port},
        }))?)?;
        desired.child(&from_json::<Service>(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"selector": labels, "ports": port},
        }))?)?;
        desired.child(&from_json::<StatefulSet>(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": spec.replicas,
                "serviceName": format!("{name}-headless"),
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {
                        "labels": labels,
                        // A config change rolls the pods.
                        "annotations": {CONTENT_HASH_ANNOTATION: content_hash(&config)?},
                    },
                    "spec": {
                        "securityContext": restricted_pod_security_context(Some(999)),
                        "containers": [{
                            "name": "redis",
                            "image": spec.image,
                            "args": ["/etc/redis/redis.conf"],
                            "ports": [{"name": "redis", "containerPort": 6379}],
                            "readinessProbe": {"exec": {"command": ["redis-cli", "ping"]}},
                            "securityContext": restricted_container_security_context(),
                            "volumeMounts": [
                                {"name": "data", "mountPath": "/data"},
                                {"name": "config", "mountPath": "/etc/redis"},
                            ],
                        }],
                        "volumes": [{"name": "config", "configMap": {"name": format!("{name}-config")}}],
                    },
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": spec.storage}},
                    },
                }],
            },
        }))?)?;
        desired.child(&from_json::<PodDisruptionBudget>(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        }))?)?;
        let rollout = observed.rollout_of::<StatefulSet>(&name, &desired)?;
        let phase = match &rollout {
            Rollout::Complete => "Ready",
            Rollout::Pending {
                reason: "NotCreated",
                ..
            } => "Pending",
            _ => "Rolling",
        };
        let workload = observed.view::<StatefulSet, WorkloadView>(&name)?;
        desired.status(&RedisStatus {
            phase: phase.into(),
            ready_replicas: workload.and_then(|w| w.status.ready_replicas).unwrap_or(0),
            conditions: vec![Condition::ready_from_phase(
                phase,
                rollout.is_complete(),
                rollout.message(),
                parent.metadata.generation,
            )],
        })?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(RedisOperator);

#[cfg(test)]
mod tests;
