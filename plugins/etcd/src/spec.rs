//! The `EtcdCluster` custom resource: its spec, defaults, CRD schema and the checks the schema cannot express.

use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{Error, is_dns_label, is_dns_subdomain};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::members::Version;
use crate::status::EtcdClusterStatus;

/// Longest `metadata.name` accepted: the StatefulSet's pods carry a `controller-revision-hash`
/// label of the form `<name>-<hash>` that must stay within 63 characters, and member DNS names
/// `<name>-<ordinal>.<name>-peer` within a label's 63.
pub const MAX_NAME_LEN: usize = 40;
/// Most members: etcd's own guidance is 3, 5 or 7; above that writes slow down for nothing.
pub const MAX_MEMBERS: i32 = 7;
/// The etcd version used when `spec.version` is not set.
pub const DEFAULT_VERSION: &str = "3.5.17";
/// The image repository of the members; the tag is `v<version>`. The official images are
/// distroless: members need no shell (their flags are expanded by the kubelet).
pub const DEFAULT_REPOSITORY: &str = "gcr.io/etcd-development/etcd";
/// The image repository of the membership Jobs, which need a shell and `etcdctl`; the tag is
/// the version.
pub const DEFAULT_MEMBERSHIP_REPOSITORY: &str = "docker.io/bitnami/etcd";
/// The data directory size used when `spec.storage` is not set.
pub const DEFAULT_STORAGE: &str = "1Gi";

/// The desired state of an etcd cluster.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "etcd.operator-host.dev",
    version = "v1alpha1",
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
    /// Number of members. A change adds or removes one member at a time, each after a
    /// membership change (`etcdctl member add/remove`) in a Job.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 7))]
    pub replicas: i32,
    /// etcd version, e.g. `3.5.17`. A change rolls the members one at a time; a downgrade
    /// or a skipped minor version is refused (etcd upgrades one minor at a time).
    #[serde(default = "default_version")]
    #[schemars(pattern(r"^\d+\.\d+\.\d+$"))]
    pub version: String,
    /// Image repository of the members; the tag is `v<version>`.
    #[serde(default = "default_repository")]
    #[schemars(length(min = 1, max = 255))]
    pub repository: String,
    /// Image repository of the membership Jobs (needs `sh` and `etcdctl`); the tag is
    /// `<version>`.
    #[serde(default = "default_membership_repository")]
    #[schemars(length(min = 1, max = 255))]
    pub membership_repository: String,
    /// Size of each member's data volume, a Kubernetes quantity such as `1Gi`. Immutable.
    #[serde(default = "default_storage")]
    #[schemars(pattern(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"))]
    pub storage: String,
    /// TLS for peers and clients, from a Secret in the cluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

/// TLS material of the members.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// A Secret with `ca.crt`, `tls.crt` and `tls.key`, whose certificate is valid for
    /// `*.<name>-peer.<namespace>.svc` and `<name>-client.<namespace>.svc`. Members use it
    /// for peers and clients; a change of it rolls the members.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

/// The keys a TLS Secret must hold.
pub const TLS_KEYS: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

pub(crate) fn default_replicas() -> i32 {
    3
}

pub(crate) fn default_version() -> String {
    DEFAULT_VERSION.to_string()
}

pub(crate) fn default_repository() -> String {
    DEFAULT_REPOSITORY.to_string()
}

pub(crate) fn default_membership_repository() -> String {
    DEFAULT_MEMBERSHIP_REPOSITORY.to_string()
}

pub(crate) fn default_storage() -> String {
    DEFAULT_STORAGE.to_string()
}

/// The spec of `cluster`, checked beyond what the CRD schema says (the host may be handed a
/// CR the API server did not validate, by `render` for example).
pub fn validate(cluster: &EtcdCluster) -> Result<EtcdClusterSpec, Error> {
    let name = cluster.name_any();
    if name.len() > MAX_NAME_LEN || !is_dns_label(&name) {
        return Err(Error::invalid_at(
            "metadata.name",
            format!("must be a DNS-1123 label of at most {MAX_NAME_LEN} characters, got {name:?}"),
        ));
    }
    let spec = &cluster.spec;
    if !(1..=MAX_MEMBERS).contains(&spec.replicas) {
        return Err(Error::invalid_field(
            "replicas",
            format!("must be between 1 and {MAX_MEMBERS}, got {}", spec.replicas),
        ));
    }
    if Version::parse(&spec.version).is_none() {
        return Err(Error::invalid_field(
            "version",
            format!(
                "must be an etcd version MAJOR.MINOR.PATCH such as {DEFAULT_VERSION}, got {:?}",
                spec.version
            ),
        ));
    }
    for (field, repository) in [
        ("repository", &spec.repository),
        ("membershipRepository", &spec.membership_repository),
    ] {
        if !is_repository(repository) {
            return Err(Error::invalid_field(
                field,
                format!("must be an image repository without a tag or digest, got {repository:?}"),
            ));
        }
    }
    if let Some(tls) = &spec.tls
        && !is_dns_subdomain(&tls.secret_name)
    {
        return Err(Error::invalid_field(
            "tls.secretName",
            format!(
                "must name a Secret (lower-case letters, digits, '-' and '.', at most 253), got {:?}",
                tls.secret_name
            ),
        ));
    }
    Ok(spec.clone())
}

/// Whether `repository` names an image without a tag or digest (a registry port, as in
/// `registry:5000/etcd`, is not a tag).
fn is_repository(repository: &str) -> bool {
    let last = repository.rsplit('/').next().unwrap_or(repository);
    !last.is_empty() && !repository.contains(['@', ' ']) && !last.contains(':')
}
