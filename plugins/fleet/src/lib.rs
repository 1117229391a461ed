//! Test-only plugin: the Memcached operator under a kind chosen at build time (`FLEET_INDEX`).
//!
//! A scale benchmark builds it ten times (`make scale-plugins`) and runs the builds in one
//! host: ten operands, each with a parent kind, CRD and plugin name of its own, all with
//! Memcached's children and status. build.rs generates the kind ([`Fleet`], [`FleetSpec`])
//! and [`NAME`]; the logic is Memcached's, reused as a library.

use kube::CustomResource;
use memcached::{Memcached, MemcachedOperator};
use operator_host_sdk::{Desired, Error, Kind, Observed, Reconciler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

include!(concat!(env!("OUT_DIR"), "/kind.rs"));

/// The reconciler: Memcached's, applied to the `Fleet<i>` parent.
pub struct FleetOperator;

impl Reconciler for FleetOperator {
    type Parent = Fleet;
    const NAME: &'static str = NAME;

    fn children() -> Vec<Kind> {
        MemcachedOperator::children()
    }

    fn reconcile(parent: &Fleet, observed: &Observed) -> Result<Desired, Error> {
        MemcachedOperator::reconcile(&as_memcached(parent), observed)
    }
}

operator_host_sdk::export_reconciler!(FleetOperator);

/// `parent` as the Memcached it stands for: its metadata and spec. The status is left out,
/// as Memcached's reconcile computes it from the observed children only.
pub fn as_memcached(parent: &Fleet) -> Memcached {
    Memcached {
        metadata: parent.metadata.clone(),
        spec: parent.spec.memcached.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests;
