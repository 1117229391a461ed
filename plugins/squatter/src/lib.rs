//! Test-only plugin whose parent kind, `Squat`, no other test uses: one ConfigMap per `Squat`.
//!
//! The CRD-ownership tests (`tests/tests/cluster/crd_ownership.rs`) install its CRD by hand, as
//! another operator would have, mark it for other plugins or delete it, and check what the
//! host does with it; a kind of its own keeps them from disturbing tests that run meanwhile.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{Desired, Error, Kind, Observed, Reconciler, child_meta, kind_of};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the ConfigMap of a `Squat` holds.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "squatter.operator-host.dev",
    version = "v1alpha1",
    kind = "Squat",
    namespaced
)]
pub struct SquatSpec {
    /// Copied into the ConfigMap's `data.value`.
    #[serde(default)]
    pub value: String,
}

/// The reconciler: a ConfigMap named after the `Squat`.
pub struct Squatter;

impl Reconciler for Squatter {
    type Parent = Squat;
    const NAME: &'static str = "squatter";

    fn children() -> Vec<Kind> {
        vec![kind_of::<ConfigMap>()]
    }

    fn reconcile(parent: &Squat, _observed: &Observed) -> Result<Desired, Error> {
        let mut desired = Desired::new();
        desired.child(&ConfigMap {
            metadata: child_meta(parent.name_any(), BTreeMap::new()),
            data: Some(BTreeMap::from([(
                "value".to_string(),
                parent.spec.value.clone(),
            )])),
            ..ConfigMap::default()
        })?;
        Ok(desired)
    }
}

operator_host_sdk::export_reconciler!(Squatter);
