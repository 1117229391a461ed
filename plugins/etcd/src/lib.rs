//! operator-host plugin for etcd: a cluster of members (StatefulSet, Services, PDB) per `EtcdCluster` CR, resized one membership change at a time.
//!
//! The plugin cannot reach etcd (plugins have no network). What talks to etcd runs in the
//! Jobs it asks for: scaling adds or removes one member at a time, first the membership
//! change (`etcdctl member add/remove` in a Job behind a readiness barrier: the host applies
//! nothing after it until the Job is `Complete`), then the StatefulSet's new size. A changed
//! version rolls the members one at a time through the StatefulSet's rolling update. The
//! TLS Secret is a related resource seen as hashes only: the plugin checks its keys and rolls
//! the members when it changes, without ever seeing a key. See `members` for the rules.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use operator_host_sdk::{
    ChildOptions, Condition, Desired, Error, Kind, Observed, Reconciler, Related, Validation,
    WorkloadView, content_hash, job_condition_holds, kind_of,
};
use serde::Deserialize;

pub mod children;
pub mod members;
pub mod spec;
pub mod status;
pub mod v1beta1;

use children::{TLS_HASH_ANNOTATION, VERSION_ANNOTATION, membership_name, membership_of};
use members::{
    Change, ClusterState, JobState, Membership, ObservedCluster, Step, Topology, Version, next_step,
};
pub use spec::{EtcdCluster, EtcdClusterSpec, TLS_KEYS, TlsSpec};
pub use status::EtcdClusterStatus;

/// The EtcdCluster reconciler.
pub struct EtcdOperator;

impl Reconciler for EtcdOperator {
    type Parent = EtcdCluster;
    const NAME: &'static str = "etcd";

    fn children() -> Vec<Kind> {
        vec![
            kind_of::<Service>(),
            kind_of::<ConfigMap>(),
            kind_of::<Job>(),
            kind_of::<StatefulSet>(),
            kind_of::<PodDisruptionBudget>(),
        ]
    }

    fn related() -> Vec<Related> {
        // Hashes of the values only (the default): enough to check the keys and to roll the
        // members when the certificate changes.
        vec![Related::by_name_at(
            "tls",
            kind_of::<Secret>(),
            "spec.tls.secretName",
        )]
    }

    const VALIDATE: bool = true;
    const CONVERT: bool = true;

    /// Both versions, `v1alpha1` reconciled, stored as [`v1beta1::STORAGE_VERSION`] says.
    fn crd() -> CustomResourceDefinition {
        v1beta1::crd()
    }

    fn convert(object: serde_json::Value, to_version: &str) -> Result<serde_json::Value, Error> {
        v1beta1::convert(object, to_version)
    }

    /// Refuses at `kubectl apply` what `reconcile` would report as an invalid spec, and the
    /// updates etcd cannot carry out: a new volume size (a StatefulSet's volume claims are
    /// immutable) and a version change that skips a minor version or goes down.
    fn validate(parent: &EtcdCluster, old: Option<&EtcdCluster>) -> Validation {
        let mut validation = Validation::new();
        validation.check(spec::validate(parent));
        let Some(old) = old else {
            return validation;
        };
        if parent.spec.storage != old.spec.storage {
            validation.immutable("spec.storage", &parent.spec.storage);
        }
        if let (Some(from), Some(to)) = (
            Version::parse(&old.spec.version),
            Version::parse(&parent.spec.version),
        ) && let Err(why) = from.may_roll_to(to)
        {
            validation.invalid("spec.version", &parent.spec.version, why);
        }
        validation
    }

    fn reconcile(parent: &EtcdCluster, observed: &Observed) -> Result<Desired, Error> {
        let spec = &spec::validate(parent)?;
        let name = parent.name_any();
        let namespace = parent.namespace().unwrap_or_else(|| "default".to_string());
        let topology = Topology {
            name: &name,
            namespace: &namespace,
            tls: spec.tls.is_some(),
        };
        let wanted_version = Version::parse(&spec.version)
            .ok_or_else(|| Error::invalid_field("version", "MAJOR.MINOR.PATCH"))?;

        let workload = observed.view::<StatefulSet, WorkloadView>(&name)?;
        let marks = observed.view::<StatefulSet, MemberSetMarks>(&name)?;
        let cluster = match (&workload, &marks) {
            (Some(workload), Some(marks)) => Some(ObservedCluster {
                replicas: workload.spec.replicas.unwrap_or(1),
                version: marks.version().unwrap_or(wanted_version),
                rolled_out: workload.rollout().is_complete(),
                jobs: membership_jobs(&name, observed)?,
            }),
            _ => None,
        };
        let tls = tls_check(spec, observed)?;
        let tls_unusable = matches!(tls, TlsCheck::Unusable { .. });
        let step = match next_step(spec.replicas, wanted_version, cluster.as_ref()) {
            // Without its certificate no new member could start: the cluster stays as it is
            // (a failed membership change is still reported as such).
            Step::Stuck(change) => Step::Stuck(change),
            _ if tls_unusable && cluster.is_some() => Step::Wait,
            step => step,
        };
        let observed_membership = observed
            .get::<ConfigMap>(&membership_name(&name))?
            .as_ref()
            .and_then(membership_of);

        let mut desired = Desired::new();
        desired.child(&children::peer_service(&topology))?;
        desired.child(&children::client_service(&topology))?;
        let tls_hash = match &tls {
            TlsCheck::Off => None,
            TlsCheck::Ready(hash) => Some(hash.clone()),
            // Keep what the members run: a Secret that went missing must not roll them.
            TlsCheck::Unusable { .. } => marks.as_ref().and_then(|m| m.tls_hash()),
        };
        match &cluster {
            None if tls_unusable => {}
            None => add_members(
                &mut desired,
                &topology,
                spec,
                Membership {
                    state: ClusterState::New,
                    members: spec.replicas,
                },
                wanted_version,
                tls_hash.as_deref(),
            )?,
            Some(cluster) => {
                let running = Membership {
                    state: ClusterState::Existing,
                    members: cluster.replicas,
                };
                let (membership, version) = match step {
                    Step::Bootstrap | Step::Steady => (running, cluster.version),
                    Step::Wait | Step::VersionRefused(_) => {
                        (observed_membership.unwrap_or(running), cluster.version)
                    }
                    Step::Roll(version) => (running, version),
                    Step::Add(ordinal) | Step::Stuck(Change::Add(ordinal)) => (
                        Membership {
                            state: ClusterState::Existing,
                            members: ordinal + 1,
                        },
                        cluster.version,
                    ),
                    Step::Remove(ordinal) | Step::Stuck(Change::Remove(ordinal)) => (
                        Membership {
                            state: ClusterState::Existing,
                            members: ordinal,
                        },
                        cluster.version,
                    ),
                };
                if let Some(change) = step.change() {
                    // The membership change first: nothing after this Job is applied until
                    // it is Complete. A Job's template is immutable: recreate it if it changes.
                    desired.child_with(
                        &children::membership_job(&topology, spec, cluster.version, change),
                        ChildOptions::new()
                            .recreate()
                            .ready_when_condition("Complete"),
                    )?;
                }
                add_members(
                    &mut desired,
                    &topology,
                    spec,
                    membership,
                    version,
                    tls_hash.as_deref(),
                )?;
            }
        }
        desired.status(&status(
            parent,
            &topology,
            &step,
            cluster.as_ref(),
            workload.as_ref(),
            observed_membership,
            &tls,
        ))?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(EtcdOperator);

/// The membership ConfigMap, the StatefulSet and its PDB, for `membership.members` members
/// running `version` (a new cluster, or one after a membership change).
fn add_members(
    desired: &mut Desired,
    topology: &Topology,
    spec: &EtcdClusterSpec,
    membership: Membership,
    version: Version,
    tls_hash: Option<&str>,
) -> Result<(), Error> {
    desired.child(&children::membership(topology, membership))?;
    desired.child(&children::stateful_set(
        topology,
        spec,
        membership.members,
        version,
        tls_hash,
    ))?;
    desired.child(&children::pdb(topology, membership.members))?;
    Ok(())
}

/// The marks the plugin leaves on its StatefulSet: the version its template runs and the
/// TLS hash its pods were started with.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MemberSetMarks {
    metadata: Annotated,
    spec: MarksSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MarksSpec {
    template: MarksTemplate,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MarksTemplate {
    metadata: Annotated,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Annotated {
    annotations: std::collections::BTreeMap<String, String>,
}

impl MemberSetMarks {
    fn version(&self) -> Option<Version> {
        Version::parse(self.metadata.annotations.get(VERSION_ANNOTATION)?)
    }

    fn tls_hash(&self) -> Option<String> {
        self.spec
            .template
            .metadata
            .annotations
            .get(TLS_HASH_ANNOTATION)
            .cloned()
    }
}

/// The membership Jobs of cluster `name` that exist, with their state.
fn membership_jobs(name: &str, observed: &Observed) -> Result<Vec<(Change, JobState)>, Error> {
    Ok(observed
        .all::<Job>()?
        .iter()
        .filter_map(|job| Some((Change::of_job(name, &job.name_any())?, job_state(job))))
        .collect())
}

fn job_state(job: &Job) -> JobState {
    if job_condition_holds(job, "Complete") {
        JobState::Complete
    } else if job_condition_holds(job, "Failed") {
        JobState::Failed
    } else {
        JobState::Running
    }
}

/// What the TLS Secret allows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TlsCheck {
    /// No TLS asked for.
    Off,
    /// The Secret has every key; the hash of its values' hashes.
    Ready(String),
    /// Missing, or without some key.
    Unusable {
        reason: &'static str,
        message: String,
    },
}

fn tls_check(spec: &EtcdClusterSpec, observed: &Observed) -> Result<TlsCheck, Error> {
    let Some(tls) = &spec.tls else {
        return Ok(TlsCheck::Off);
    };
    let Some(secret) = observed.related::<Secret>("tls")?.into_iter().next() else {
        return Ok(TlsCheck::Unusable {
            reason: "SecretNotFound",
            message: format!(
                "the Secret {:?} (spec.tls.secretName) does not exist",
                tls.secret_name
            ),
        });
    };
    let data = secret.data.unwrap_or_default();
    let missing: Vec<&str> = TLS_KEYS
        .into_iter()
        .filter(|key| !data.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Ok(TlsCheck::Unusable {
            reason: "KeysMissing",
            message: format!(
                "the Secret {:?} lacks {} (it needs {})",
                tls.secret_name,
                missing.join(", "),
                TLS_KEYS.join(", ")
            ),
        });
    }
    // Under the data-hash view each value is already a digest: hash them together.
    let digests: std::collections::BTreeMap<&str, String> = TLS_KEYS
        .into_iter()
        .map(|key| (key, String::from_utf8_lossy(&data[key].0).into_owned()))
        .collect();
    Ok(TlsCheck::Ready(content_hash(&digests)?))
}

/// The status from the step taken and what was observed.
fn status(
    parent: &EtcdCluster,
    topology: &Topology,
    step: &Step,
    cluster: Option<&ObservedCluster>,
    workload: Option<&WorkloadView>,
    observed_membership: Option<Membership>,
    tls: &TlsCheck,
) -> EtcdClusterStatus {
    let generation = parent.metadata.generation;
    let members = cluster.map_or(0, |c| c.replicas);
    let ready = workload.map_or(0, |w| w.status.ready_replicas.unwrap_or(0));
    let bootstrapping = observed_membership.is_none_or(|m| m.state == ClusterState::New);
    let rolling = workload.is_some_and(|w| {
        w.status.update_revision.is_some() && w.status.update_revision != w.status.current_revision
    });
    let (phase, reason, message): (&str, &str, String) = match step {
        Step::Bootstrap => (
            status::CREATING,
            "Creating",
            format!("creating {} members", parent.spec.replicas),
        ),
        Step::Steady => (
            status::RUNNING,
            "Running",
            format!(
                "{ready}/{members} members ready, version {}",
                cluster.map_or_else(String::new, |c| c.version.to_string())
            ),
        ),
        Step::Wait => {
            let waiting = workload.map_or_else(String::new, |w| w.rollout().message().to_string());
            // The previous phase is the only memory: a member added by the last step is
            // starting, not failing.
            let previous = parent.status.as_ref().map(|s| s.phase.as_str());
            if bootstrapping {
                (status::CREATING, "Creating", waiting)
            } else if rolling {
                (status::UPGRADING, "Upgrading", waiting)
            } else if previous == Some(status::SCALING) {
                (status::SCALING, "MemberStarting", waiting)
            } else {
                (status::DEGRADED, "MembersNotReady", waiting)
            }
        }
        Step::Add(ordinal) => (
            status::SCALING,
            "AddingMember",
            format!(
                "adding member {} ({members} -> {} of {})",
                topology.member(*ordinal),
                ordinal + 1,
                parent.spec.replicas
            ),
        ),
        Step::Remove(ordinal) => (
            status::SCALING,
            "RemovingMember",
            format!(
                "removing member {} ({members} -> {ordinal} of {})",
                topology.member(*ordinal),
                parent.spec.replicas
            ),
        ),
        Step::Roll(version) => (
            status::UPGRADING,
            "Upgrading",
            format!("rolling the members to {version}, one at a time"),
        ),
        Step::VersionRefused(why) => (status::RUNNING, "VersionChangeRefused", why.clone()),
        Step::Stuck(change) => (
            status::FAILED,
            "MembershipChangeFailed",
            format!(
                "the Job {} failed; read its logs, then delete it to try again",
                change.job_name(topology.name)
            ),
        ),
    };
    let (phase, reason, message) = match (tls, cluster) {
        (TlsCheck::Unusable { reason, message }, None) => {
            (status::PENDING, *reason, message.clone())
        }
        (TlsCheck::Unusable { reason, message }, Some(_)) => (phase, *reason, message.clone()),
        _ => (phase, reason, message),
    };
    let at_spec = matches!(step, Step::Steady) && !matches!(tls, TlsCheck::Unusable { .. });
    let mut conditions = vec![Condition::new(
        "Ready", at_spec, reason, message, generation,
    )];
    match tls {
        TlsCheck::Off => {}
        TlsCheck::Ready(_) => conditions.push(Condition::new(
            "TLSSecretReady",
            true,
            "SecretFound",
            "the Secret has ca.crt, tls.crt and tls.key",
            generation,
        )),
        TlsCheck::Unusable { reason, message } => conditions.push(Condition::new(
            "TLSSecretReady",
            false,
            reason,
            message.clone(),
            generation,
        )),
    }
    EtcdClusterStatus {
        phase: phase.to_string(),
        members,
        ready_members: ready,
        version: cluster.map(|c| c.version.to_string()),
        membership_change: step.change().map(|change| match change {
            Change::Add(ordinal) => format!("adding {}", topology.member(ordinal)),
            Change::Remove(ordinal) => format!("removing {}", topology.member(ordinal)),
        }),
        conditions,
    }
}

#[cfg(test)]
mod tests;
