//! The InnoDBCluster status, computed only from the observed StatefulSet and router Deployment.
//!
//! `status.cluster.status` follows these rules, first match wins (`ready` is the
//! StatefulSet's `readyReplicas`, `instances` is `spec.instances`):
//!
//! | status | when |
//! |---|---|
//! | `ONLINE` | `ready >= instances`, the StatefulSet has rolled out the spec this reconcile desires (see below), and the group Job is Complete: `<name>-create-cluster` (the group exists), or for a cluster grown after its creation `<name>-add-instances-<instances>` (every instance is a member) |
//! | `INITIALIZING` | `ready >= instances` and rolled out, but the group is not created yet |
//! | `ONLINE_PARTIAL` | `ready >= instances` and rolled out, the group exists, but the instances added since are not members yet |
//! | `ONLINE_PARTIAL` | `ready > 0` otherwise (some instances online, or the StatefulSet is still scaling or rolling out) |
//! | `OFFLINE` | `ready == 0` and the previous status was `ONLINE`, `ONLINE_PARTIAL` or `OFFLINE` (it had been online) |
//! | `INITIALIZING` | `ready == 0`, the StatefulSet is observed and has created pods (`status.replicas > 0`) |
//! | `PENDING` | otherwise: the StatefulSet is not observed yet (a new cluster waits for its root Secret), or has no pods yet |
//!
//! "Rolled out" is the SDK's [`WorkloadView::rollout_of`]: the observed StatefulSet carries the
//! spec in this reconcile's answer (a new version or `mycnf` changes it, and the StatefulSet
//! observed is the one before the host applies the answer) and `kubectl rollout status`
//! would call its rollout complete. The router's `RouterReady` follows the same rule.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use operator_host_sdk::{Condition, Desired, Rollout, WorkloadView, job_condition_holds};
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
    /// `Ready` (every instance online in a created group), `RouterReady` (every router
    /// ready) and `SecretReady` (the root Secret has its keys).
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

/// The keys the root Secret must hold.
pub const ROOT_KEYS: [&str; 3] = ["rootUser", "rootHost", "rootPassword"];

/// What the plugin saw of the root Secret (a related resource, as hashes of its values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootSecret {
    /// It has every key.
    Usable,
    /// It does not exist (its name).
    Missing(String),
    /// It lacks these keys (its name, the keys).
    KeysMissing(String, Vec<&'static str>),
}

impl RootSecret {
    /// The state of `secret`, the Secret `spec.secretName` names, if it exists.
    pub fn of(secret: Option<&Secret>, name: &str) -> Self {
        let Some(secret) = secret else {
            return RootSecret::Missing(name.to_string());
        };
        let missing: Vec<&'static str> = ROOT_KEYS
            .into_iter()
            .filter(|key| !secret.data.as_ref().is_some_and(|d| d.contains_key(*key)))
            .collect();
        if missing.is_empty() {
            RootSecret::Usable
        } else {
            RootSecret::KeysMissing(name.to_string(), missing)
        }
    }

    /// Whether pods that read it can start.
    pub fn is_usable(&self) -> bool {
        *self == RootSecret::Usable
    }

    /// CamelCase, for a condition.
    pub fn reason(&self) -> &'static str {
        match self {
            RootSecret::Usable => "SecretFound",
            RootSecret::Missing(_) => "SecretNotFound",
            RootSecret::KeysMissing(..) => "KeysMissing",
        }
    }

    /// What is wrong with it, or that nothing is.
    pub fn message(&self) -> String {
        match self {
            RootSecret::Usable => format!("the root Secret has {}", ROOT_KEYS.join(", ")),
            RootSecret::Missing(name) => {
                format!("the Secret {name:?} (spec.secretName) does not exist")
            }
            RootSecret::KeysMissing(name, keys) => format!(
                "the Secret {name:?} lacks {} (it needs {})",
                keys.join(", "),
                ROOT_KEYS.join(", ")
            ),
        }
    }

    fn condition(&self, generation: Option<i64>) -> Condition {
        Condition::new(
            "SecretReady",
            self.is_usable(),
            self.reason(),
            self.message(),
            generation,
        )
    }
}

/// The Job whose completion makes the group what the spec asks, as observed (if it was).
#[derive(Clone, Debug)]
pub enum GroupJob {
    /// `<name>-create-cluster`: `dba.createCluster()` and the first instances.
    CreateCluster(Option<Job>),
    /// `<name>-add-instances-<n>` (its name) for a cluster grown after its creation.
    AddInstances(String, Option<Job>),
    /// `<name>-remove-instances-<n>` (its name) for a cluster shrunk: before its StatefulSet.
    RemoveInstances(String, Option<Job>),
}

impl GroupJob {
    fn observed(&self) -> Option<&Job> {
        match self {
            GroupJob::CreateCluster(job)
            | GroupJob::AddInstances(_, job)
            | GroupJob::RemoveInstances(_, job) => job.as_ref(),
        }
    }

    fn holds(&self, type_: &str) -> bool {
        self.observed()
            .is_some_and(|job| job_condition_holds(job, type_))
    }
}

/// The status from what was observed; `cluster.status` of the parent's current status is the
/// only memory (to tell OFFLINE from PENDING). `desired` is this reconcile's answer: the
/// observed children are current only if they carry its specs.
pub fn status(
    parent: &InnoDBCluster,
    stateful_set: Option<&WorkloadView>,
    router: Option<&WorkloadView>,
    group_job: &GroupJob,
    root: &RootSecret,
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
    let group_complete = group_job.holds("Complete");
    let growing = matches!(group_job, GroupJob::AddInstances(..));
    let state = if ready >= instances && caught_up && group_complete {
        ONLINE
    } else if ready >= instances && caught_up && !growing {
        INITIALIZING
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
        ONLINE_PARTIAL if !scaled => match group_job {
            GroupJob::RemoveInstances(job, _) if group_job.holds("Failed") => (
                "RemoveInstancesFailed",
                format!(
                    "the Job {job} that removes the instances beyond {instances} from the group \
                     failed, so the StatefulSet keeps them; read its logs, then delete it to \
                     try again"
                ),
            ),
            GroupJob::RemoveInstances(..) => (
                "RemovingInstances",
                format!(
                    "{ready} instances are online; the StatefulSet shrinks to {instances} once \
                     the Job that removes the others from the group (removeInstance) completes"
                ),
            ),
            _ => (
                "Scaling",
                format!(
                    "the StatefulSet is being scaled to {instances} instances ({ready} online)"
                ),
            ),
        },
        ONLINE_PARTIAL if ready >= instances && caught_up => match group_job {
            GroupJob::AddInstances(job, _) if group_job.holds("Failed") => (
                "AddInstancesFailed",
                format!(
                    "every instance is online, but the Job {job} that adds them to the group \
                     failed; read its logs, then delete it to try again"
                ),
            ),
            _ => (
                "AddingInstances",
                format!(
                    "{ready} of {instances} instances are online; waiting for the Job that \
                     adds the new ones to the group (addInstance)"
                ),
            ),
        },
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
        INITIALIZING if ready > 0 => match group_job.observed() {
            Some(job) if job_condition_holds(job, "Failed") => (
                "CreateClusterFailed",
                format!(
                    "every instance is online, but the Job {} failed; read its logs, then \
                     delete it to try again",
                    job.metadata.name.as_deref().unwrap_or_default()
                ),
            ),
            _ => (
                "CreatingCluster",
                format!(
                    "{ready} of {instances} instances are online; waiting for the Job that \
                     creates the group (dba.createCluster())"
                ),
            ),
        },
        INITIALIZING => (
            "Initializing",
            format!("{pods} pods created, none ready yet (0 of {instances} online)"),
        ),
        _ if stateful_set.is_none() && !root.is_usable() => (root.reason(), root.message()),
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
        conditions: vec![
            ready_condition,
            router_condition,
            root.condition(generation),
        ],
    }
}
