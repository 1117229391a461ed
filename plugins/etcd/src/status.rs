//! The status of an EtcdCluster: phase, member counts, version, the membership change under way, and conditions.

use operator_host_sdk::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// No cluster yet, or its first members are still starting.
pub const CREATING: &str = "Creating";
/// Every member is ready, at the desired size and version.
pub const RUNNING: &str = "Running";
/// A member is being added or removed.
pub const SCALING: &str = "Scaling";
/// Members are rolling to another version or template.
pub const UPGRADING: &str = "Upgrading";
/// Some member is not ready, with nothing under way that explains it.
pub const DEGRADED: &str = "Degraded";
/// A membership Job failed; nothing changes until it is deleted.
pub const FAILED: &str = "Failed";
/// The TLS Secret is missing or incomplete, so no member can be started.
pub const PENDING: &str = "Pending";

/// What the plugin observed of the cluster, written by the host as the CR's status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterStatus {
    /// One of `Creating`, `Running`, `Scaling`, `Upgrading`, `Degraded`, `Failed`, `Pending`.
    #[serde(default)]
    pub phase: String,
    /// Members the StatefulSet runs.
    #[serde(default)]
    pub members: i32,
    /// Members that are ready (they serve linearizable reads).
    #[serde(default)]
    pub ready_members: i32,
    /// The etcd version of the members' template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The membership change under way, e.g. `adding example-3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership_change: Option<String>,
    /// `Ready` (the cluster is at its spec and every member is ready) and, with TLS,
    /// `TLSSecretReady`.
    #[serde(default)]
    #[schemars(schema_with = "operator_host_sdk::conditions_schema")]
    pub conditions: Vec<Condition>,
}
