//! Views of observed children: the few fields a status is computed from, borrowed, without the rest.
//!
//! # Is the observed workload the one the plugin is about to apply?
//!
//! A plugin sees its children as they were *before* the host applies its answer, and the
//! host stamps the parent's current generation on the status it returns. So a plugin that
//! has just changed a pod template (a new image, say) observes the old Deployment, fully
//! rolled out, and must not call that "ready" for the new generation. The workload's own
//! `metadata.generation` cannot tell it: that counts the workload's spec changes, not the
//! parent's, and the API server assigns it only once the new spec is applied.
//!
//! The SDK therefore marks every workload a plugin returns ([`crate::Desired::child`] of a
//! Deployment, StatefulSet, DaemonSet, ReplicaSet or Job) with [`SPEC_HASH_ANNOTATION`]: a SHA-256
//! of the workload's `spec` exactly as the plugin wrote it (canonical JSON), so the annotation
//! changes exactly when the desired spec does. The host applies the annotation in the same
//! server-side apply as the spec, so an observed workload whose annotation equals the hash the
//! plugin desires now carries the desired spec, and its `metadata.generation` is the
//! generation of that spec; [`WorkloadView::rollout_of`] then applies `kubectl rollout
//! status`'s rules to that generation. Why a hash of what the plugin wrote, not a comparison
//! with what was observed: the API server defaults and normalizes fields (`imagePullPolicy`,
//! quantities, probes' defaults, ...), so an observed spec never equals a desired one field for
//! field, and comparing a few fields (the image) misses the others (arguments, ports,
//! resources, a config hash). Hashing the desired side only is immune to defaulting, covers
//! every field, and costs one annotation on the workload (not on its pod template, so it
//! never rolls the pods). A workload applied before the SDK stamped it has no annotation and
//! reads as not current until the next apply adds it (one reconcile later).

use k8s_openapi::api::batch::v1::Job;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The annotation the SDK puts on every workload a plugin returns: the SHA-256 (hex) of its
/// `spec` as the plugin wrote it. See the module documentation.
pub const SPEC_HASH_ANNOTATION: &str = "sdk.operator-host.dev/spec-hash";

/// The kinds whose children get [`SPEC_HASH_ANNOTATION`] (`apiVersion`, `kind`): those that
/// roll pods out, and the Job, whose run is of one spec.
const WORKLOAD_KINDS: [(&str, &str); 5] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
];

/// Marks `child` (a JSON object with `apiVersion`, `kind`, `metadata`) with the hash of its
/// `spec` when it is a workload with a spec.
pub(crate) fn stamp_spec_hash(child: &mut Value) {
    let is_workload = WORKLOAD_KINDS
        .iter()
        .any(|(api_version, kind)| child["apiVersion"] == *api_version && child["kind"] == *kind);
    let Some(spec) = child.get("spec").filter(|_| is_workload) else {
        return;
    };
    let hash = spec_hash(spec);
    let Value::Object(object) = child else { return };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Value::Object(metadata) = metadata else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Value::Object(annotations) = annotations {
        annotations.insert(SPEC_HASH_ANNOTATION.to_string(), Value::String(hash));
    }
}

/// SHA-256 (hex) of `spec`'s JSON text. `serde_json`'s maps are sorted (no `preserve_order`
/// in this build), so equal values give equal texts.
fn spec_hash(spec: &Value) -> String {
    let digest = Sha256::digest(spec.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The annotation for a pod template that must change, and so roll the pods, when content
/// they read but do not embed changes (a ConfigMap's data, say): set it to [`content_hash`]
/// of that content.
pub const CONTENT_HASH_ANNOTATION: &str = "sdk.operator-host.dev/content-hash";

/// A stable hash of `content`: SHA-256 (hex) of its canonical JSON (maps sorted by key), the
/// same for equal values on every build and Rust version (std's `Hasher`s promise neither).
/// For [`CONTENT_HASH_ANNOTATION`].
pub fn content_hash<T: serde::Serialize + ?Sized>(content: &T) -> Result<String, crate::Error> {
    let value = serde_json::to_value(content)
        .map_err(|e| crate::Error::Retry(format!("cannot serialize the hashed content: {e}")))?;
    Ok(spec_hash(&value))
}

/// An observed Deployment, StatefulSet, DaemonSet or Job, reduced to what a status needs: its
/// replica counts, and whether the spec the plugin desires is rolled out (or, for a Job, has
/// run to completion; see the module documentation), for [`crate::Observed::view`].
///
/// Strings are borrowed from the observed object; decoding these fields instead of a whole
/// k8s-openapi type leaves the pod template's deserializers out of the plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadView<'a> {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: &'a str,
    /// `kind`: which rollout rules apply.
    pub kind: &'a str,
    /// `metadata`: name, generation, and the SDK's spec hash.
    #[serde(borrow)]
    pub metadata: MetadataView<'a>,
    /// `spec`: the replica count and the update strategy.
    #[serde(borrow)]
    pub spec: WorkloadSpecView<'a>,
    /// `status`: the counters, revisions and conditions, and the generation they describe.
    #[serde(borrow)]
    pub status: WorkloadStatusView<'a>,
}

/// `metadata` of an observed workload: what identifies it and the spec it carries.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MetadataView<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// Incremented by the API server on every change of `spec`.
    pub generation: Option<i64>,
    /// Only the annotation the SDK stamps.
    #[serde(borrow)]
    pub annotations: SpecHashView<'a>,
}

/// The one annotation of [`MetadataView`] the SDK reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SpecHashView<'a> {
    /// [`SPEC_HASH_ANNOTATION`].
    #[serde(rename = "sdk.operator-host.dev/spec-hash", borrow)]
    pub spec_hash: Option<&'a str>,
}

/// `spec` of an observed workload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadSpecView<'a> {
    /// The desired number of pods.
    pub replicas: Option<i32>,
    /// A StatefulSet's `updateStrategy` (Deployments call theirs `strategy`: not needed).
    #[serde(borrow)]
    pub update_strategy: UpdateStrategyView<'a>,
}

/// A StatefulSet's `spec.updateStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateStrategyView<'a> {
    /// `RollingUpdate` (the default) or `OnDelete`.
    #[serde(rename = "type", borrow)]
    pub type_: Option<&'a str>,
    /// Present for `RollingUpdate` (the API server defaults it to `{partition: 0}`).
    pub rolling_update: Option<RollingUpdateView>,
}

/// A StatefulSet's `spec.updateStrategy.rollingUpdate`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct RollingUpdateView {
    /// Pods with an ordinal below this keep the old revision.
    pub partition: Option<i32>,
}

/// The status of an observed workload (the fields of each kind it has).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadStatusView<'a> {
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
    /// A StatefulSet's revision of the pods it has not updated yet.
    #[serde(borrow)]
    pub current_revision: Option<&'a str>,
    /// A StatefulSet's revision of its current spec.
    #[serde(borrow)]
    pub update_revision: Option<&'a str>,
    /// A DaemonSet's nodes that should run its pod.
    pub desired_number_scheduled: Option<i32>,
    /// A DaemonSet's nodes running its current pod template.
    pub updated_number_scheduled: Option<i32>,
    /// A DaemonSet's nodes whose pod is available.
    pub number_available: Option<i32>,
    /// A Deployment's conditions (`Progressing` says when its progress deadline passed), a
    /// Job's (`Complete`, `Failed`).
    #[serde(borrow)]
    pub conditions: Vec<WorkloadConditionView<'a>>,
}

/// One of a workload's `status.conditions`: type, status and reason.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct WorkloadConditionView<'a> {
    /// E.g. `Progressing`, `Available`, `Complete`.
    #[serde(rename = "type")]
    pub type_: &'a str,
    /// `True`, `False` or `Unknown`.
    pub status: &'a str,
    /// E.g. `ProgressDeadlineExceeded`.
    #[serde(borrow)]
    pub reason: Option<&'a str>,
}

/// Where the rollout of a workload stands, by `kubectl rollout status`'s rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// Every pod runs the workload's current spec and is ready (available, for Deployments).
    Complete,
    /// Not yet: `reason` is CamelCase (for a condition), `message` says what is awaited.
    Pending {
        /// CamelCase, e.g. `RolloutInProgress`.
        reason: &'static str,
        /// What the rollout waits for.
        message: String,
    },
    /// It will not complete by itself: the Deployment's progress deadline passed, or the
    /// kind has no rollout rules here.
    Failed {
        /// CamelCase, e.g. `ProgressDeadlineExceeded`.
        reason: &'static str,
        /// Why.
        message: String,
    },
}

impl Rollout {
    /// Whether the rollout is complete.
    pub fn is_complete(&self) -> bool {
        matches!(self, Rollout::Complete)
    }

    /// A CamelCase reason: `RolloutComplete`, or the pending or failed reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Rollout::Complete => "RolloutComplete",
            Rollout::Pending { reason, .. } | Rollout::Failed { reason, .. } => reason,
        }
    }

    /// The condition `type_` (`Available`, `MigrationComplete`, ...) of this rollout, of the
    /// parent's `generation`: `True` when complete, with the rollout's reason and message.
    pub fn condition(&self, type_: &str, generation: Option<i64>) -> crate::Condition {
        crate::Condition::new(
            type_,
            self.is_complete(),
            self.reason(),
            self.message(),
            generation,
        )
    }

    /// What is awaited, or why it failed; `rolled out` when complete.
    pub fn message(&self) -> &str {
        match self {
            Rollout::Complete => "rolled out",
            Rollout::Pending { message, .. } | Rollout::Failed { message, .. } => message,
        }
    }

    fn pending(reason: &'static str, message: String) -> Self {
        Rollout::Pending { reason, message }
    }
}

impl<'a> WorkloadView<'a> {
    /// The spec hash the SDK stamped on this workload when the plugin returned it, if any.
    pub fn spec_hash(&self) -> Option<&'a str> {
        self.metadata.annotations.spec_hash
    }

    /// Whether this observed workload carries the spec that `desired` holds for it (the child
    /// of the same kind and name): false when the plugin just changed it, until the host
    /// has applied it. See the module documentation.
    pub fn is_current(&self, desired: &crate::Desired) -> bool {
        let wanted = desired
            .children
            .iter()
            .find(|c| {
                c["apiVersion"] == self.api_version
                    && c["kind"] == self.kind
                    && c["metadata"]["name"] == self.metadata.name
            })
            .and_then(|c| c["metadata"]["annotations"][SPEC_HASH_ANNOTATION].as_str());
        wanted.is_some() && wanted == self.spec_hash()
    }

    /// The rollout of the spec `desired` holds for this workload: [`Rollout::Pending`] with
    /// reason `SpecNotApplied` while the observed workload carries another spec (see
    /// [`WorkloadView::is_current`]), else [`WorkloadView::rollout`]. A status that says
    /// "ready" only when this is complete tells the truth about the parent's generation.
    pub fn rollout_of(&self, desired: &crate::Desired) -> Rollout {
        if self.is_current(desired) {
            self.rollout()
        } else {
            Rollout::pending(
                "SpecNotApplied",
                format!(
                    "the {} does not carry the desired spec yet",
                    self.kind_name()
                ),
            )
        }
    }

    /// The rollout of this workload's own current spec, by `kubectl rollout status`'s rules
    /// for its kind (Deployment, StatefulSet, DaemonSet), or for a Job its run: complete once
    /// its `Complete` condition holds, failed once its `Failed` one does. It knows nothing of
    /// what the plugin desires: see [`WorkloadView::rollout_of`].
    pub fn rollout(&self) -> Rollout {
        match self.kind {
            "Deployment" => self.deployment_rollout(),
            "StatefulSet" => self.stateful_set_rollout(),
            "DaemonSet" => self.daemon_set_rollout(),
            "Job" => self.job_run(),
            other => Rollout::Failed {
                reason: "UnsupportedKind",
                message: format!("no rollout rules for kind {other:?}"),
            },
        }
    }

    fn kind_name(&self) -> String {
        format!("{} {:?}", self.kind, self.metadata.name)
    }

    /// The observed generation, when the controller has acted on the current spec.
    fn spec_observed(&self) -> bool {
        let observed = self.status.observed_generation.unwrap_or(0);
        observed > 0 && self.metadata.generation.is_some_and(|g| g <= observed)
    }

    fn not_observed(&self) -> Rollout {
        Rollout::pending(
            "SpecNotObserved",
            format!(
                "waiting for the {} controller to observe its spec",
                self.kind
            ),
        )
    }

    /// kubectl's `DeploymentStatusViewer`.
    fn deployment_rollout(&self) -> Rollout {
        if !self.spec_observed() {
            return self.not_observed();
        }
        let status = &self.status;
        let progressing = status.conditions.iter().find(|c| c.type_ == "Progressing");
        if progressing.is_some_and(|c| c.reason == Some("ProgressDeadlineExceeded")) {
            return Rollout::Failed {
                reason: "ProgressDeadlineExceeded",
                message: format!("{} exceeded its progress deadline", self.kind_name()),
            };
        }
        let updated = status.updated_replicas.unwrap_or(0);
        let total = status.replicas.unwrap_or(0);
        let available = status.available_replicas.unwrap_or(0);
        if let Some(wanted) = self.spec.replicas.filter(|&wanted| updated < wanted) {
            return Rollout::pending(
                "RolloutInProgress",
                format!("{updated} of {wanted} new replicas have been updated"),
            );
        }
        if total > updated {
            return Rollout::pending(
                "RolloutInProgress",
                format!("{} old replicas are pending termination", total - updated),
            );
        }
        if available < updated {
            return Rollout::pending(
                "RolloutInProgress",
                format!("{available} of {updated} updated replicas are available"),
            );
        }
        Rollout::Complete
    }

    /// kubectl's `DaemonSetStatusViewer`.
    fn daemon_set_rollout(&self) -> Rollout {
        if !self.spec_observed() {
            return self.not_observed();
        }
        let status = &self.status;
        let wanted = status.desired_number_scheduled.unwrap_or(0);
        let updated = status.updated_number_scheduled.unwrap_or(0);
        let available = status.number_available.unwrap_or(0);
        if updated < wanted {
            return Rollout::pending(
                "RolloutInProgress",
                format!("{updated} of {wanted} new pods have been updated"),
            );
        }
        if available < wanted {
            return Rollout::pending(
                "RolloutInProgress",
                format!("{available} of {wanted} updated pods are available"),
            );
        }
        Rollout::Complete
    }

    /// A Job's run (a Job has no observed generation: its spec cannot change once created).
    fn job_run(&self) -> Rollout {
        let holds = |type_| {
            self.status
                .conditions
                .iter()
                .find(|c| c.type_ == type_ && c.status == "True")
        };
        if holds("Complete").is_some() {
            return Rollout::Complete;
        }
        if let Some(failed) = holds("Failed") {
            return Rollout::Failed {
                reason: "JobFailed",
                message: format!(
                    "{} failed ({})",
                    self.kind_name(),
                    failed.reason.unwrap_or("no reason given")
                ),
            };
        }
        Rollout::pending(
            "JobRunning",
            format!("waiting for {} to complete", self.kind_name()),
        )
    }

    /// kubectl's `StatefulSetStatusViewer`, with a missing partition read as 0 (the API
    /// server's default) and, for `OnDelete` (where kubectl has no rule), the same as an
    /// unpartitioned rolling update: every pod updated and ready.
    fn stateful_set_rollout(&self) -> Rollout {
        if !self.spec_observed() {
            return self.not_observed();
        }
        let status = &self.status;
        let ready = status.ready_replicas.unwrap_or(0);
        let updated = status.updated_replicas.unwrap_or(0);
        if let Some(wanted) = self.spec.replicas.filter(|&wanted| ready < wanted) {
            return Rollout::pending(
                "RolloutInProgress",
                format!("waiting for {} pods to be ready", wanted - ready),
            );
        }
        let strategy = &self.spec.update_strategy;
        let on_delete = strategy.type_ == Some("OnDelete");
        let partition = match (&strategy.rolling_update, on_delete) {
            (_, true) => Some(0),
            (Some(rolling), false) => Some(rolling.partition.unwrap_or(0)),
            (None, false) => None,
        };
        match (partition, self.spec.replicas) {
            (Some(partition), Some(wanted)) if updated < wanted - partition => Rollout::pending(
                "RolloutInProgress",
                format!(
                    "{updated} of {} new pods have been updated",
                    wanted - partition
                ),
            ),
            (Some(_), _) => Rollout::Complete,
            (None, _) if status.update_revision != status.current_revision => Rollout::pending(
                "RolloutInProgress",
                format!(
                    "waiting for the rolling update to revision {} ({updated} pods updated)",
                    status.update_revision.unwrap_or("")
                ),
            ),
            (None, _) => Rollout::Complete,
        }
    }
}

/// Whether the Job has the condition `type_` (`Complete`, `Failed`) with status `True`: how a
/// plugin, which cannot run anything itself, learns that a Job it asked for has finished.
pub fn job_condition_holds(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desired, Observed, child_meta};
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet};
    use k8s_openapi::api::core::v1::Service;
    use serde_json::json;

    #[test]
    fn content_hash_is_stable_and_follows_the_content() {
        let data: std::collections::BTreeMap<&str, &str> = [("a", "1"), ("b", "2")].into();
        // Pinned: a hash that changed between builds would roll every pod that carries it.
        assert_eq!(
            content_hash(&data).unwrap(),
            "21f76dfbfe6dfe21f762080ef484112cf2952974cef30741fd1931e1c6d92112"
        );
        assert_eq!(
            content_hash(&json!({"b": "2", "a": "1"})).unwrap(),
            content_hash(&data).unwrap()
        );
        assert_ne!(
            content_hash(&json!({"a": "1", "b": "3"})).unwrap(),
            content_hash(&data).unwrap()
        );
    }

    /// A Deployment of generation 2 with `spec.replicas` and the given status.
    fn deployment(replicas: i32, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "d", "generation": 2},
               "spec": {"replicas": replicas}, "status": status})
    }

    fn rollout(object: &Value) -> Rollout {
        WorkloadView::deserialize(object).unwrap().rollout()
    }

    fn pending_reason(object: &Value) -> &'static str {
        let rollout = rollout(object);
        assert!(!rollout.is_complete(), "{rollout:?}");
        rollout.reason()
    }

    #[test]
    fn a_deployment_is_complete_when_every_replica_is_updated_and_available() {
        let done = deployment(
            2,
            json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                   "availableReplicas": 2, "readyReplicas": 2}),
        );
        assert_eq!(rollout(&done), Rollout::Complete);
    }

    #[test]
    fn a_daemon_set_is_complete_when_every_node_runs_an_available_updated_pod() {
        let daemon_set = |status: Value| {
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                   "metadata": {"name": "agent", "generation": 3}, "spec": {}, "status": status})
        };
        let done = daemon_set(json!({"observedGeneration": 3, "desiredNumberScheduled": 2,
            "updatedNumberScheduled": 2, "numberAvailable": 2}));
        assert_eq!(rollout(&done), Rollout::Complete);
        let updating = daemon_set(json!({"observedGeneration": 3, "desiredNumberScheduled": 2,
            "updatedNumberScheduled": 1, "numberAvailable": 2}));
        assert_eq!(pending_reason(&updating), "RolloutInProgress");
        let unavailable = daemon_set(json!({"observedGeneration": 3,
            "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 1}));
        assert_eq!(pending_reason(&unavailable), "RolloutInProgress");
        let unobserved = daemon_set(json!({"observedGeneration": 2, "desiredNumberScheduled": 2,
            "updatedNumberScheduled": 2, "numberAvailable": 2}));
        assert_eq!(pending_reason(&unobserved), "SpecNotObserved");
    }

    #[test]
    fn a_job_is_complete_once_its_complete_condition_holds_and_failed_once_failed_does() {
        let job = |conditions: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
                   "spec": {}, "status": {"conditions": conditions}})
        };
        assert_eq!(pending_reason(&job(json!([]))), "JobRunning");
        let complete = job(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(rollout(&complete), Rollout::Complete);
        let not_yet = job(json!([{"type": "Complete", "status": "False"}]));
        assert_eq!(pending_reason(&not_yet), "JobRunning");
        let failed = job(json!([{"type": "Failed", "status": "True",
                                 "reason": "BackoffLimitExceeded"}]));
        let rollout = rollout(&failed);
        assert_eq!(rollout.reason(), "JobFailed");
        assert!(
            rollout.message().contains("BackoffLimitExceeded"),
            "{rollout:?}"
        );
    }

    #[test]
    fn an_old_jobs_completion_is_not_the_desired_jobs() {
        use k8s_openapi::api::batch::v1::{Job, JobSpec};
        let job = |command: &str| Job {
            metadata: child_meta("migrate", Default::default()),
            spec: Some(JobSpec {
                template: k8s_openapi::api::core::v1::PodTemplateSpec {
                    metadata: Some(child_meta(
                        "migrate",
                        [("run".into(), command.into())].into(),
                    )),
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut old = Desired::new();
        old.child(&job("v1")).unwrap();
        let mut observed = old.children[0].clone();
        observed["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        let view = WorkloadView::deserialize(&observed).unwrap();
        assert_eq!(view.rollout_of(&old), Rollout::Complete);
        // The plugin now wants the Job of new inputs: the old one's completion says nothing.
        let mut new = Desired::new();
        new.child(&job("v2")).unwrap();
        assert_eq!(view.rollout_of(&new).reason(), "SpecNotApplied");
    }

    #[test]
    fn a_deployment_whose_spec_is_not_observed_is_pending() {
        // The counters describe generation 1: they say nothing of generation 2.
        let stale = deployment(
            2,
            json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                   "availableReplicas": 2}),
        );
        assert_eq!(pending_reason(&stale), "SpecNotObserved");
        let never = deployment(
            2,
            json!({"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
        );
        assert_eq!(pending_reason(&never), "SpecNotObserved");
    }

    #[test]
    fn a_deployment_past_its_progress_deadline_has_failed() {
        let stuck = deployment(
            2,
            json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                   "availableReplicas": 2,
                   "conditions": [{"type": "Available", "reason": "MinimumReplicasAvailable"},
                                  {"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]}),
        );
        let rollout = rollout(&stuck);
        assert!(matches!(rollout, Rollout::Failed { .. }), "{rollout:?}");
        assert_eq!(rollout.reason(), "ProgressDeadlineExceeded");
    }

    #[test]
    fn a_deployment_with_fewer_updated_replicas_than_desired_is_pending() {
        // Scaling up: nothing old remains and all are available, but 2 of 3 exist.
        let short = deployment(
            3,
            json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                   "availableReplicas": 2}),
        );
        assert_eq!(pending_reason(&short), "RolloutInProgress");
        assert!(rollout(&short).message().contains("2 of 3 new replicas"));
    }

    #[test]
    fn a_deployment_with_old_replicas_left_is_pending() {
        // Every new replica is there and available; one old pod has not terminated yet.
        let surge = deployment(
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2,
                   "availableReplicas": 3}),
        );
        assert_eq!(pending_reason(&surge), "RolloutInProgress");
        assert!(rollout(&surge).message().contains("1 old replicas"));
    }

    #[test]
    fn a_deployment_with_updated_replicas_not_available_is_pending() {
        let starting = deployment(
            2,
            json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                   "availableReplicas": 1, "readyReplicas": 2}),
        );
        assert_eq!(pending_reason(&starting), "RolloutInProgress");
        assert!(rollout(&starting).message().contains("1 of 2 updated"));
    }

    /// A StatefulSet of generation 5 with 3 replicas, `strategy` and the given status.
    fn stateful_set(strategy: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "s", "generation": 5},
               "spec": {"replicas": 3, "updateStrategy": strategy}, "status": status})
    }

    fn rolling(partition: i32) -> Value {
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": partition}})
    }

    #[test]
    fn a_stateful_set_is_complete_when_every_pod_is_updated_and_ready() {
        let done = stateful_set(
            rolling(0),
            json!({"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
                   "updatedReplicas": 3, "currentRevision": "s-2", "updateRevision": "s-2"}),
        );
        assert_eq!(rollout(&done), Rollout::Complete);
    }

    #[test]
    fn a_stateful_set_whose_spec_is_not_observed_is_pending() {
        let stale = stateful_set(
            rolling(0),
            json!({"observedGeneration": 4, "replicas": 3, "readyReplicas": 3,
                   "updatedReplicas": 3}),
        );
        assert_eq!(pending_reason(&stale), "SpecNotObserved");
    }

    #[test]
    fn a_stateful_set_with_pods_not_ready_is_pending() {
        // Every pod is of the new revision, one is not ready yet.
        let starting = stateful_set(
            rolling(0),
            json!({"observedGeneration": 5, "replicas": 3, "readyReplicas": 2,
                   "updatedReplicas": 3, "currentRevision": "s-2", "updateRevision": "s-2"}),
        );
        assert_eq!(pending_reason(&starting), "RolloutInProgress");
        assert!(rollout(&starting).message().contains("1 pods to be ready"));
    }

    #[test]
    fn a_stateful_set_counts_updated_pods_above_its_partition() {
        // All ready, but only 2 of 3 pods run the new revision.
        let status = json!({"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
                            "updatedReplicas": 2, "currentRevision": "s-1",
                            "updateRevision": "s-2"});
        let unpartitioned = stateful_set(rolling(0), status.clone());
        assert_eq!(pending_reason(&unpartitioned), "RolloutInProgress");
        // With partition 1, pod 0 keeps the old revision by design.
        assert_eq!(
            rollout(&stateful_set(rolling(1), status)),
            Rollout::Complete
        );
        // A missing partition is the API server's default, 0.
        let defaulted = stateful_set(
            json!({"type": "RollingUpdate", "rollingUpdate": {}}),
            json!({"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
                   "updatedReplicas": 2}),
        );
        assert_eq!(pending_reason(&defaulted), "RolloutInProgress");
    }

    #[test]
    fn a_stateful_set_without_rolling_update_settings_compares_revisions() {
        let status = |current: &str| {
            json!({"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
                   "updatedReplicas": 3, "currentRevision": current, "updateRevision": "s-2"})
        };
        let strategy = json!({"type": "RollingUpdate"});
        assert_eq!(
            pending_reason(&stateful_set(strategy.clone(), status("s-1"))),
            "RolloutInProgress"
        );
        assert_eq!(
            rollout(&stateful_set(strategy, status("s-2"))),
            Rollout::Complete
        );
    }

    #[test]
    fn an_on_delete_stateful_set_is_complete_only_once_every_pod_is_updated() {
        let status = |updated: i32| {
            json!({"observedGeneration": 5, "replicas": 3, "readyReplicas": 3,
                   "updatedReplicas": updated})
        };
        let on_delete = json!({"type": "OnDelete"});
        assert_eq!(
            pending_reason(&stateful_set(on_delete.clone(), status(2))),
            "RolloutInProgress"
        );
        assert_eq!(
            rollout(&stateful_set(on_delete, status(3))),
            Rollout::Complete
        );
    }

    #[test]
    fn kinds_without_rollout_rules_are_not_complete() {
        let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "metadata": {"name": "x", "generation": 1},
                                 "status": {"observedGeneration": 1}});
        assert_eq!(rollout(&replica_set).reason(), "UnsupportedKind");
    }

    fn desired_deployment(image: &str) -> Desired {
        let mut desired = Desired::new();
        desired
            .child(&Deployment {
                metadata: child_meta("d", Default::default()),
                spec: Some(DeploymentSpec {
                    replicas: Some(2),
                    template: serde_json::from_value(
                        json!({"spec": {"containers": [{"name": "c", "image": image}]}}),
                    )
                    .unwrap(),
                    ..DeploymentSpec::default()
                }),
                status: None,
            })
            .unwrap();
        desired
    }

    /// What the API server would hold after applying `desired`'s Deployment: its spec (plus a
    /// defaulted field), its annotations, generation 2, and a complete rollout.
    fn applied(desired: &Desired) -> Value {
        let mut object = desired.children[0].clone();
        object["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] =
            json!("IfNotPresent");
        object["metadata"]["generation"] = json!(2);
        object["status"] = json!({"observedGeneration": 2, "replicas": 2,
                                  "updatedReplicas": 2, "availableReplicas": 2});
        object
    }

    #[test]
    fn workloads_are_stamped_with_the_hash_of_their_spec_and_nothing_else_is() {
        let a = desired_deployment("memcached:1");
        let hash = |d: &Desired| {
            d.children[0]["metadata"]["annotations"][SPEC_HASH_ANNOTATION]
                .as_str()
                .map(str::to_string)
        };
        assert_eq!(hash(&a).unwrap().len(), 64);
        assert_eq!(hash(&a), hash(&desired_deployment("memcached:1")));
        assert_ne!(hash(&a), hash(&desired_deployment("memcached:2")));
        // The pod template is not annotated: stamping must never roll the pods.
        assert!(a.children[0]["spec"]["template"].get("metadata").is_none());
        let mut service = Desired::new();
        service
            .child(&Service {
                metadata: child_meta("d", Default::default()),
                ..Service::default()
            })
            .unwrap();
        assert!(service.children[0]["metadata"].get("annotations").is_none());
    }

    #[test]
    fn the_rollout_of_a_changed_spec_is_pending_until_the_workload_carries_it() {
        let old = desired_deployment("memcached:1");
        let new = desired_deployment("memcached:2");
        let observed = Observed::new(vec![applied(&old)]);
        let view = observed
            .view::<Deployment, WorkloadView>("d")
            .unwrap()
            .unwrap();
        // Fully rolled out, and defaulted by the API server: current for what was applied...
        assert_eq!(view.rollout(), Rollout::Complete);
        assert!(view.is_current(&old));
        assert_eq!(view.rollout_of(&old), Rollout::Complete);
        // ...but not for the spec the plugin is about to apply.
        assert!(!view.is_current(&new));
        assert_eq!(view.rollout_of(&new).reason(), "SpecNotApplied");
        // A workload applied before the SDK stamped it is not current either.
        let mut unstamped = applied(&old);
        unstamped["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        let observed = Observed::new(vec![unstamped]);
        let view = observed
            .view::<Deployment, WorkloadView>("d")
            .unwrap()
            .unwrap();
        assert_eq!(view.rollout_of(&old).reason(), "SpecNotApplied");
        // Nor is a workload the plugin does not desire (another kind of the same name).
        let mut other_kind = applied(&old);
        other_kind["kind"] = json!("StatefulSet");
        let observed = Observed::new(vec![other_kind]);
        let view = observed
            .view::<StatefulSet, WorkloadView>("d")
            .unwrap()
            .unwrap();
        assert!(!view.is_current(&old));
    }

    #[test]
    fn a_job_condition_holds_only_when_its_status_is_true() {
        let job = |conditions: Value| -> Job {
            serde_json::from_value(json!({"status": {"conditions": conditions}})).unwrap()
        };
        let complete = job(json!([{"type": "Complete", "status": "True"}]));
        assert!(job_condition_holds(&complete, "Complete"));
        assert!(!job_condition_holds(&complete, "Failed"));
        let not_yet = job(json!([{"type": "Complete", "status": "False"}]));
        assert!(!job_condition_holds(&not_yet, "Complete"));
        assert!(!job_condition_holds(&Job::default(), "Complete"));
    }
}
