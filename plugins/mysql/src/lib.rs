//! operator-host plugin for MySQL: an InnoDB Cluster (servers, router, Services, PDB) per `InnoDBCluster` CR.
//!
//! Modelled on Oracle's MySQL Operator for Kubernetes, within what a pure function can do:
//! it declares the Kubernetes objects of a cluster and reports their state. It does not talk
//! to MySQL (plugins have no network): the Job `<name>-create-cluster` does
//! (`dba.createCluster()`), behind a readiness barrier that holds the router until the group
//! exists; a cluster grown later gets `<name>-add-instances-<k>`, and one shrunk gets
//! `<name>-remove-instances-<k>` (`removeInstance` and `rescan`) before its StatefulSet shrinks.
//! `ONLINE` means every server pod is ready and the current one of those Jobs completed. The root
//! Secret is a related resource seen as hashes: a missing Secret or key is a condition, not a
//! pod that cannot start.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use operator_host_sdk::{
    ChildOptions, Desired, Error, Kind, Observed, Reconciler, Related, Validation, WorkloadView,
    job_condition_holds, kind_of,
};

pub mod children;
pub mod config;
pub mod spec;
pub mod status;

pub use spec::{
    AccessMode, CONFIG_HASH_ANNOTATION, DEFAULT_STORAGE, DEFAULT_VERSION, DatadirSpec, DefaultPort,
    InnoDBCluster, InnoDBClusterSpec, MAX_INSTANCES, MAX_NAME_LEN, RouterSpec, ServiceSpec,
    ServiceType,
};
pub use status::{ClusterStatus, GroupJob, InnoDBClusterStatus, RootSecret, RouterStatus};

/// The InnoDBCluster reconciler.
pub struct MySqlOperator;

impl Reconciler for MySqlOperator {
    type Parent = InnoDBCluster;
    const NAME: &'static str = "mysql";

    fn children() -> Vec<Kind> {
        vec![
            kind_of::<ServiceAccount>(),
            kind_of::<ConfigMap>(),
            kind_of::<Service>(),
            kind_of::<StatefulSet>(),
            kind_of::<Deployment>(),
            kind_of::<PodDisruptionBudget>(),
            kind_of::<Job>(),
        ]
    }

    fn related() -> Vec<Related> {
        // Hashes of the values (the default): enough to tell that each key is there.
        vec![Related::by_name_at(
            "root",
            kind_of::<Secret>(),
            "spec.secretName",
        )]
    }

    const VALIDATE: bool = true;

    /// Refuses at `kubectl apply` what `reconcile` would report as an invalid spec (the name,
    /// the Secret's name, the instances, `mycnf`); the CRD's own rules keep the volume claim
    /// immutable.
    fn validate(parent: &InnoDBCluster, _old: Option<&InnoDBCluster>) -> Validation {
        let mut validation = Validation::new();
        validation.check(spec::validate(parent));
        validation
    }

    fn reconcile(parent: &InnoDBCluster, observed: &Observed) -> Result<Desired, Error> {
        let spec = &spec::validate(parent)?;
        let name = parent.name_any();
        let namespace = parent.namespace().unwrap_or_else(|| "default".to_string());
        let data = config::initconf(&namespace, &name, spec.mycnf.as_deref());
        let hash = config::config_hash(&data);

        let root = RootSecret::of(
            observed.related::<Secret>("root")?.first(),
            &spec.secret_name,
        );
        let stateful_set = observed.view::<StatefulSet, WorkloadView>(&name)?;
        // The size the servers run at now.
        let running = stateful_set.as_ref().and_then(|s| s.spec.replicas);
        let completed = |job: &Job| job_condition_holds(job, "Complete");
        // A Job that exists and has not completed: it stays desired, so that no later
        // reconcile prunes it half-way.
        let under_way = |job: &Option<Job>| job.as_ref().is_some_and(|job| !completed(job));
        // A cluster shrunk below the size it runs at removes the instances it drops from the
        // group first (a Job behind a barrier before the StatefulSet): a pod that went away
        // while a member would stay in the group's view, counted against its quorum.
        let remove_name = children::remove_instances_name(&name, spec.instances);
        let remove_job = observed.get::<Job>(&remove_name)?;
        let removing =
            running.is_some_and(|running| spec.instances < running) || under_way(&remove_job);
        let create_cluster = observed.get::<Job>(&children::create_cluster_name(&name))?;
        // A cluster grown past what its completed create-cluster Job made members, or past the
        // size it runs at (after a shrink), needs a Job that adds the rest (one per size: a
        // later growth runs anew).
        let created_with = create_cluster
            .as_ref()
            .filter(|job| completed(job))
            .and_then(children::group_instances_of);
        let add_name = children::add_instances_name(&name, spec.instances);
        let add_job = observed.get::<Job>(&add_name)?;
        let grown = !removing
            && (created_with.is_some_and(|created_with| {
                spec.instances > created_with
                    || running.is_some_and(|running| spec.instances > running)
            }) || under_way(&add_job));
        let group_job = if removing {
            GroupJob::RemoveInstances(remove_name, remove_job)
        } else if grown {
            GroupJob::AddInstances(add_name, add_job)
        } else {
            GroupJob::CreateCluster(create_cluster)
        };

        let mut desired = Desired::new();
        desired.child(&children::service_account(&name))?;
        desired.child(&children::initconf(&name, &data))?;
        desired.child(&children::instances(&name))?;
        desired.child(&children::router_service(&name, spec))?;
        // A new cluster waits for its Secret: its pods could not start without it.
        if root.is_usable() || stateful_set.is_some() {
            // Everything after it waits for the group to have let the instances go.
            if let (true, Some(running)) = (removing, running) {
                desired.child_with(
                    &children::remove_instances_job(&name, spec, running),
                    ChildOptions::new()
                        .create_only()
                        .ready_when_condition("Complete"),
                )?;
            }
            desired.child(&children::stateful_set(&name, spec, &hash))?;
            desired.child(&children::pdb(&name))?;
            // The group first: the router bootstraps from its metadata, so it is applied only
            // once the Job is Complete. Create-only: once the group exists, a new version or
            // size does not run it again.
            desired.child_with(
                &children::create_cluster_job(&name, spec),
                ChildOptions::new()
                    .create_only()
                    .ready_when_condition("Complete"),
            )?;
            // No Deployment at all for 0 routers: the host prunes the one that exists.
            if spec.router.instances > 0 {
                desired.child(&children::router_deployment(&name, spec))?;
            }
            // After the barrier (the group exists); create-only too. Once it has completed and
            // the cluster is no larger than it was made, it is pruned, and a new growth to
            // that size runs it anew.
            if grown {
                desired.child_with(
                    &children::add_instances_job(&name, spec),
                    ChildOptions::new().create_only(),
                )?;
            }
        }

        // Views, not whole objects: the pod templates' deserializers stay out of the plugin.
        let router = observed.view::<Deployment, WorkloadView>(&children::router_name(&name))?;
        let status = status::status(
            parent,
            stateful_set.as_ref(),
            router.as_ref(),
            &group_job,
            &root,
            &desired,
        );
        desired.status(&status)?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(MySqlOperator);

#[cfg(test)]
mod tests;
