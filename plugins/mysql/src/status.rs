//! The InnoDBCluster status, computed only from the observed StatefulSet and router Deployment.
//!
//! `status.cluster.status` follows these rules, first match wins (`ready` is the
//! StatefulSet's `readyReplicas`, `instances` is `spec.instances`):
//!
//! | status | when |
//! |---|---|
//! | `ONLINE` | `ready >= instances` and the StatefulSet has rolled out the spec this reconcile desires (see below) |
//! | `ONLINE_PARTIAL` | `ready > 0` otherwise (some instances online, or the StatefulSet is still scaling or rolling out) |
//! | `OFFLINE` | `ready == 0` and the previous status was `ONLINE`, `ONLINE_PARTIAL` or `OFFLINE` (it had been online) |
//! | `INITIALIZING` | `ready == 0`, the StatefulSet is observed and has created pods (`status.replicas > 0`) |
//! | `PENDING` | otherwise: the StatefulSet is not observed yet, or has no pods yet |
//!
//! "Rolled out" is the SDK's [`WorkloadView::rollout_of`]: the observed StatefulSet carries the
//! spec in this reconcile's answer (a new version or `mycnf` changes it, and the StatefulSet
//! observed is the one before the host applies the answer) and `kubectl rollout status`
//! would call its rollout complete. The router's `RouterReady` follows the same rule.

use operator_host_sdk::{Condition, Desired, Rollout, WorkloadView};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::InnoDBCluster;

/// The observed state of an InnoDBCluster.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InnoDBClusterStatus {
    /// The MySQL servers.
    #[serde(default)]
    pub cluster: ClusterStatus,
    /// MySQL Router.
    #[serde(default)]
    pub router: RouterStatus,
    /// `Ready` (every instance online) and `RouterReady` (every router ready).
    #[serde(default)]
    #[schemars(schema_with = "operator_host_sdk::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// The state of the MySQL servers.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// PENDING, INITIALIZING, ONLINE_PARTIAL, ONLINE or OFFLINE.
    #[serde(default)]
    pub status: String,
    /// MySQL pods that are ready.
    #[serde(default)]
    pub online_instances: i32,
}

/// The state of MySQL Router.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouterStatus {
    /// Router pods that are ready.
    #[serde(default)]
    pub ready_instances: i32,
}

/// The cluster states, as the upstream operator spells them.
pub const PENDING: &str = "PENDING";
/// Pods exist, none ready yet.
pub const INITIALIZING: &str = "INITIALIZING";
/// Some instances ready.
pub const ONLINE_PARTIAL: &str = "ONLINE_PARTIAL";
/// Every instance ready.
pub const ONLINE: &str = "ONLINE";
/// No instance ready after having been online.
pub const OFFLINE: &str = "OFFLINE";

/// The status from what was observed; `cluster.status` of the parent's current status is the
/// only memory (to tell OFFLINE from PENDING). `desired` is this reconcile's answer: the
/// observed children are current only if they carry its specs.
pub fn status(
    parent: &InnoDBCluster,
    stateful_set: Option<&WorkloadView>,
    router: Option<&WorkloadView>,
    desired: &Desired,
) -> InnoDBClusterStatus {
    let generation = parent.metadata.generation;
    let instances = parent.spec.instances;
    let previous = parent
        .status
        .as_ref()
        .map(|s| s.cluster.status.as_str())
        .unwrap_or("");
    let ready = stateful_set
        .and_then(|s| s.status.ready_replicas)
        .unwrap_or(0);
    let pods = stateful_set.and_then(|s| s.status.replicas).unwrap_or(0);
    let scaled = stateful_set.is_some_and(|s| s.spec.replicas == Some(instances));
    let rollout = stateful_set.map(|s| s.rollout_of(desired));
    let caught_up = scaled && rollout.as_ref().is_some_and(Rollout::is_complete);
    let state = if ready >= instances && caught_up {
        ONLINE
    } else if ready > 0 {
        ONLINE_PARTIAL
    } else if matches!(previous, ONLINE | ONLINE_PARTIAL | OFFLINE) {
        OFFLINE
    } else if stateful_set.is_some() && pods > 0 {
        INITIALIZING
    } else {
        PENDING
    };
    let (reason, message) = match state {
        ONLINE => (
            "Online",
            format!("{ready} of {instances} instances are online"),
        ),
        ONLINE_PARTIAL if !scaled => (
            "Scaling",
            format!("the StatefulSet is being scaled to {instances} instances ({ready} online)"),
        ),
        ONLINE_PARTIAL if ready >= instances => (
            "RollingOut",
            format!(
                "{ready} of {instances} instances are online; rollout: {}",
                rollout.as_ref().map_or("", Rollout::message)
            ),
        ),
        ONLINE_PARTIAL => (
            "OnlinePartial",
            format!("{ready} of {instances} instances are online"),
        ),
        OFFLINE => (
            "Offline",
            format!("no instance is online (0 of {instances})"),
        ),
        INITIALIZING => (
            "Initializing",
            format!("{pods} pods created, none ready yet (0 of {instances} online)"),
        ),
        _ if stateful_set.is_none() => (
            "Pending",
            "the StatefulSet has not been observed yet".to_string(),
        ),
        _ => (
            "Pending",
            format!("waiting for the StatefulSet to create pods (0 of {instances} online)"),
        ),
    };
    let ready_condition = Condition::new("Ready", state == ONLINE, reason, message, generation);

    let wanted_routers = parent.spec.router.instances;
    let routers_ready = router.and_then(|d| d.status.ready_replicas).unwrap_or(0);
    let router_replicas = router.and_then(|d| d.spec.replicas);
    let router_rollout = router.map(|r| r.rollout_of(desired));
    let router_condition = if wanted_routers == 0 {
        Condition::new(
            "RouterReady",
            true,
            "NoRouters",
            "router.instances is 0: no router is deployed",
            generation,
        )
    } else if router.is_none() {
        Condition::new(
            "RouterReady",
            false,
            "DeploymentNotFound",
            "the router Deployment has not been observed yet",
            generation,
        )
    } else if router_replicas == Some(wanted_routers)
        && routers_ready >= wanted_routers
        && router_rollout.as_ref().is_some_and(Rollout::is_complete)
    {
        Condition::new(
            "RouterReady",
            true,
            "RoutersReady",
            format!("{routers_ready} of {wanted_routers} routers are ready"),
            generation,
        )
    } else {
        Condition::new(
            "RouterReady",
            false,
            "RoutersNotReady",
            // The rollout is worth naming when it, not the count, is what is missing.
            match router_rollout.filter(|r| routers_ready >= wanted_routers && !r.is_complete()) {
                Some(r) => format!(
                    "{routers_ready} of {wanted_routers} routers are ready; rollout: {}",
                    r.message()
                ),
                None => format!("{routers_ready} of {wanted_routers} routers are ready"),
            },
            generation,
        )
    };
    InnoDBClusterStatus {
        cluster: ClusterStatus {
            status: state.to_string(),
            online_instances: ready,
        },
        router: RouterStatus {
            ready_instances: routers_ready,
        },
        conditions: vec![ready_condition, router_condition],
    }
}
