//! Views of observed children: the few fields a status is computed from, without the rest.

use serde::Deserialize;

/// The replica counts of an observed Deployment or StatefulSet (any kind with `spec.replicas`
/// and the usual status counters), for [`crate::Observed::view`].
///
/// Most operators compute their status from these fields alone; decoding them instead of a
/// whole k8s-openapi type leaves the pod template's deserializers out of the plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct WorkloadView {
    /// `metadata`: only the generation.
    pub metadata: GenerationView,
    /// `spec`: only the replica count.
    pub spec: ReplicasView,
    /// `status`: the counters and the generation they describe.
    pub status: WorkloadStatusView,
}

/// `metadata.generation` of an observed object.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct GenerationView {
    /// Incremented by the API server on every change of `spec`.
    pub generation: Option<i64>,
}

/// `spec.replicas` of an observed workload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ReplicasView {
    /// The desired number of pods.
    pub replicas: Option<i32>,
}

/// The status counters of an observed Deployment or StatefulSet.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadStatusView {
    /// Pods created by the controller.
    pub replicas: Option<i32>,
    /// Pods that are ready.
    pub ready_replicas: Option<i32>,
    /// Pods of the current revision.
    pub updated_replicas: Option<i32>,
    /// Pods ready for at least `minReadySeconds`.
    pub available_replicas: Option<i32>,
    /// The generation the controller has acted on.
    pub observed_generation: Option<i64>,
}
