//! operator-host plugin for MySQL: an InnoDB Cluster (servers, router, Services, PDB) per `InnoDBCluster` CR.
//!
//! Modelled on Oracle's MySQL Operator for Kubernetes, within what a pure function can do:
//! it declares the Kubernetes objects of a cluster and reports their state. It does not talk
//! to MySQL (plugins have no network), so it does not create the Group Replication group
//! (`dba.createCluster()`), and `ONLINE` means "every server pod is ready", not "every
//! member is ONLINE in the group".

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use operator_host_sdk::{Desired, Error, Kind, Observed, Reconciler, WorkloadView, kind_of};

pub mod children;
pub mod config;
pub mod spec;
pub mod status;

pub use spec::{
    AccessMode, CONFIG_HASH_ANNOTATION, DEFAULT_STORAGE, DEFAULT_VERSION, DatadirSpec, DefaultPort,
    InnoDBCluster, InnoDBClusterSpec, MAX_INSTANCES, MAX_NAME_LEN, RouterSpec, ServiceSpec,
    ServiceType,
};
pub use status::{ClusterStatus, InnoDBClusterStatus, RouterStatus};

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
        ]
    }

    fn reconcile(parent: &InnoDBCluster, observed: &Observed) -> Result<Desired, Error> {
        let spec = &spec::validate(parent)?;
        let name = parent.name_any();
        let namespace = parent.namespace().unwrap_or_else(|| "default".to_string());
        let data = config::initconf(&namespace, &name, spec.mycnf.as_deref());
        let hash = config::config_hash(&data);

        let mut desired = Desired::new();
        desired.child(&children::service_account(&name))?;
        desired.child(&children::initconf(&name, &data))?;
        desired.child(&children::instances(&name))?;
        desired.child(&children::router_service(&name, spec))?;
        desired.child(&children::stateful_set(&name, spec, &hash))?;
        // No Deployment at all for 0 routers: the host prunes the one that exists.
        if spec.router.instances > 0 {
            desired.child(&children::router_deployment(&name, spec))?;
        }
        desired.child(&children::pdb(&name))?;

        // Views, not whole objects: the pod templates' deserializers stay out of the plugin.
        let stateful_set = observed.view::<StatefulSet, WorkloadView>(&name)?;
        let router = observed.view::<Deployment, WorkloadView>(&children::router_name(&name))?;
        let status = status::status(parent, stateful_set.as_ref(), router.as_ref(), &desired);
        desired.status(&status)?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(MySqlOperator);

#[cfg(test)]
mod tests;
