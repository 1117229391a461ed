//! `EtcdCluster` of `v1beta1`: v1alpha1's spec with the data volume as a structure
//! (`storage: {size: 1Gi}`, room for a storage class later), and the conversions of the
//! CRD's conversion webhook between the two versions.
//!
//! The plugin reconciles `v1alpha1` (the API server converts what it stores); both versions
//! are served, and which one is stored is the CRD's choice ([`STORAGE_VERSION`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use operator_host_sdk::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::TlsSpec;
use crate::status::EtcdClusterStatus;

/// The version the API server stores: `v1alpha1`, or `v1beta1` in the build that moves the
/// storage (feature `storage-v1beta1`), which has the host migrate every stored object.
pub const STORAGE_VERSION: &str = if cfg!(feature = "storage-v1beta1") {
    "v1beta1"
} else {
    "v1alpha1"
};

/// The desired state of an etcd cluster, as `v1beta1` has it.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "etcd.operator-host.dev",
    version = "v1beta1",
    kind = "EtcdCluster",
    plural = "etcdclusters",
    shortname = "etcd",
    namespaced,
    status = "EtcdClusterStatus",
    validation = kube::core::Rule::new("self.metadata.name.size() <= 40")
        .message("metadata.name must be at most 40 characters (it prefixes member DNS names and pod labels)"),
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyMembers"}"#,
    printcolumn = r#"{"name":"Members","type":"integer","jsonPath":".status.members"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterSpec {
    /// Number of members.
    #[serde(default = "crate::spec::default_replicas")]
    #[schemars(range(min = 1, max = 7))]
    pub replicas: i32,
    /// etcd version, e.g. `3.5.17`.
    #[serde(default = "crate::spec::default_version")]
    #[schemars(pattern(r"^\d+\.\d+\.\d+$"))]
    pub version: String,
    /// Image repository of the members; the tag is `v<version>`.
    #[serde(default = "crate::spec::default_repository")]
    #[schemars(length(min = 1, max = 255))]
    pub repository: String,
    /// Image repository of the membership Jobs; the tag is `<version>`.
    #[serde(default = "crate::spec::default_membership_repository")]
    #[schemars(length(min = 1, max = 255))]
    pub membership_repository: String,
    /// Each member's data volume. Immutable.
    #[serde(default)]
    pub storage: Storage,
    /// TLS for peers and clients, from a Secret in the cluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

/// A member's data volume.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Its size, a Kubernetes quantity such as `1Gi`.
    #[serde(default = "default_size")]
    #[schemars(pattern(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"))]
    pub size: String,
}

impl Default for Storage {
    fn default() -> Self {
        Storage {
            size: default_size(),
        }
    }
}

fn default_size() -> String {
    crate::spec::default_storage()
}

/// The CRD of both versions, storing [`STORAGE_VERSION`].
pub fn crd() -> CustomResourceDefinition {
    // Both versions derive from types of this crate: they merge.
    kube::core::crd::merge_crds(
        vec![crate::spec::EtcdCluster::crd(), EtcdCluster::crd()],
        STORAGE_VERSION,
    )
    .expect("the two versions of EtcdCluster merge")
}

/// `object` (an EtcdCluster of either version, as JSON) as `to_version`. Only the spec's
/// `storage` differs; everything else, unknown fields included, is carried as it is, so a
/// round trip gives the object back.
pub fn convert(mut object: Value, to_version: &str) -> Result<Value, Error> {
    let group = "etcd.operator-host.dev";
    let from = object["apiVersion"]
        .as_str()
        .and_then(|v| v.strip_prefix(&format!("{group}/")))
        .unwrap_or_default()
        .to_string();
    let storage = &mut object["spec"]["storage"];
    match (from.as_str(), to_version) {
        (from, to) if from == to => {}
        ("v1alpha1", "v1beta1") => {
            if let Some(size) = storage.as_str().map(str::to_string) {
                *storage = serde_json::json!({"size": size});
            }
        }
        ("v1beta1", "v1alpha1") => {
            if let Some(size) = storage.get("size").cloned() {
                *storage = size;
            } else if storage.is_object() {
                // `storage: {}`: the default size, as v1alpha1 spells it.
                *storage = Value::Null;
            }
        }
        (from, to) => {
            return Err(Error::InvalidSpec(format!(
                "cannot convert an EtcdCluster from {from:?} to {to:?}: the versions are \
                 v1alpha1 and v1beta1"
            )));
        }
    }
    if object["spec"]["storage"].is_null()
        && let Some(spec) = object["spec"].as_object_mut()
    {
        spec.remove("storage");
    }
    object["apiVersion"] = Value::String(format!("{group}/{to_version}"));
    Ok(object)
}
