//! Test-only plugin: a `Gadget` served as `v1` and `v2` with conversion between them, an immutable field and a range check, for the webhooks' tests (its API group is its own, so its CRD's conversion touches no other test).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResourceExt, ResourceExt};
use operator_host_sdk::{
    Desired, Error, Kind, Observed, Reconciler, Validation, child_meta, kind_of,
};
use serde_json::{Value, json};

/// The API group.
pub const GROUP: &str = "versioned.operator-host.dev";
/// The version stored: `v1`, or `v2` in the build with the feature `storage-v2`.
pub const STORAGE_VERSION: &str = if cfg!(feature = "storage-v2") {
    "v2"
} else {
    "v1"
};

/// `v1`: `replicas` is a number.
pub mod v1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
    #[kube(
        group = "versioned.operator-host.dev",
        version = "v1",
        kind = "Gadget",
        namespaced
    )]
    #[kube(status = "GadgetStatus")]
    pub struct GadgetSpec {
        /// How many; 1 to 10.
        pub replicas: i32,
        /// Where it runs. Immutable.
        pub zone: String,
    }

    #[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
    pub struct GadgetStatus {
        #[serde(default)]
        pub replicas: i32,
    }
}

/// `v2`: `replicas` is a structure (`{count: 3}`).
pub mod v2 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
    #[kube(
        group = "versioned.operator-host.dev",
        version = "v2",
        kind = "Gadget",
        namespaced
    )]
    #[kube(status = "super::v1::GadgetStatus")]
    pub struct GadgetSpec {
        pub replicas: Replicas,
        /// Where it runs. Immutable.
        pub zone: String,
    }

    #[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
    pub struct Replicas {
        pub count: i32,
    }
}

pub struct Versioned;

impl Reconciler for Versioned {
    type Parent = v1::Gadget;
    const NAME: &'static str = "versioned";
    const VALIDATE: bool = true;
    const CONVERT: bool = true;

    fn children() -> Vec<Kind> {
        vec![kind_of::<ConfigMap>()]
    }

    fn crd() -> CustomResourceDefinition {
        kube::core::crd::merge_crds(vec![v1::Gadget::crd(), v2::Gadget::crd()], STORAGE_VERSION)
            .expect("the two versions of Gadget merge")
    }

    fn reconcile(parent: &v1::Gadget, _observed: &Observed) -> Result<Desired, Error> {
        Self::validate(parent, None).into_result()?;
        let config = ConfigMap {
            metadata: child_meta(parent.name_any(), BTreeMap::new()),
            data: Some(BTreeMap::from([
                ("replicas".to_string(), parent.spec.replicas.to_string()),
                ("zone".to_string(), parent.spec.zone.clone()),
            ])),
            ..ConfigMap::default()
        };
        let mut desired = Desired::new();
        desired.child(&config)?;
        desired.status(&v1::GadgetStatus {
            replicas: parent.spec.replicas,
        })?;
        Ok(desired)
    }

    fn validate(parent: &v1::Gadget, old: Option<&v1::Gadget>) -> Validation {
        let mut validation = Validation::new();
        if !(1..=10).contains(&parent.spec.replicas) {
            validation.invalid(
                "spec.replicas",
                parent.spec.replicas,
                "must be between 1 and 10",
            );
        }
        if let Some(old) = old
            && old.spec.zone != parent.spec.zone
        {
            validation.immutable("spec.zone", &parent.spec.zone);
        }
        validation
    }

    fn convert(object: Value, to_version: &str) -> Result<Value, Error> {
        convert(object, to_version)
    }
}

/// `object` as `to_version`: only `spec.replicas` changes shape.
pub fn convert(mut object: Value, to_version: &str) -> Result<Value, Error> {
    let from = object["apiVersion"]
        .as_str()
        .and_then(|v| v.strip_prefix(&format!("{GROUP}/")))
        .unwrap_or_default()
        .to_string();
    let replicas = &mut object["spec"]["replicas"];
    match (from.as_str(), to_version) {
        (from, to) if from == to => {}
        ("v1", "v2") => *replicas = json!({"count": replicas.clone()}),
        ("v2", "v1") => *replicas = replicas["count"].clone(),
        (from, to) => {
            return Err(Error::InvalidSpec(format!(
                "cannot convert a Gadget from {from:?} to {to:?}: the versions are v1 and v2"
            )));
        }
    }
    object["apiVersion"] = Value::String(format!("{GROUP}/{to_version}"));
    Ok(object)
}

#[cfg(feature = "export")]
operator_host_sdk::export_reconciler!(Versioned);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips() {
        let one = json!({"apiVersion": "versioned.operator-host.dev/v1", "kind": "Gadget",
            "metadata": {"name": "g"}, "spec": {"replicas": 3, "zone": "a"}});
        let two = convert(one.clone(), "v2").unwrap();
        assert_eq!(two["spec"]["replicas"], json!({"count": 3}));
        assert_eq!(convert(two, "v1").unwrap(), one);
    }
}
