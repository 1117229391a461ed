//! The `InnoDBCluster` custom resource: its spec, defaults, CRD schema and the checks the schema cannot express.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::{CustomResource, KubeSchema, ResourceExt};
use operator_host_sdk::{Error, validate_container_resources};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::InnoDBClusterStatus;

/// Longest `metadata.name` accepted: pod names, the `-instances` Service and the
/// `app.kubernetes.io/instance` label value (`mysql-innodbcluster-<name>`) must stay within 63.
pub const MAX_NAME_LEN: usize = 40;
/// Most MySQL instances in one cluster (a Group Replication group has at most 9 members).
pub const MAX_INSTANCES: i32 = 9;
/// The MySQL Server and Router version used when `spec.version` is not set (8.4 LTS).
pub const DEFAULT_VERSION: &str = "8.4.6";
/// The data directory size used when `spec.datadirVolumeClaimTemplate.storage` is not set.
pub const DEFAULT_STORAGE: &str = "2Gi";
/// The annotation on the MySQL pod template holding the configuration hash.
pub const CONFIG_HASH_ANNOTATION: &str = "mysql.operator-host.dev/config-hash";

/// The desired state of a MySQL InnoDB Cluster: MySQL servers in a Group Replication group
/// behind MySQL Router.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq)]
#[kube(
    group = "mysql.operator-host.dev",
    version = "v1alpha1",
    kind = "InnoDBCluster",
    plural = "innodbclusters",
    shortname = "ic",
    namespaced,
    status = "InnoDBClusterStatus",
    validation = kube::core::Rule::new("self.metadata.name.size() <= 40")
        .message("metadata.name must be at most 40 characters (it prefixes pod, Service and label names)"),
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.cluster.status"}"#,
    printcolumn = r#"{"name":"Online","type":"integer","jsonPath":".status.cluster.onlineInstances"}"#,
    printcolumn = r#"{"name":"Instances","type":"integer","jsonPath":".spec.instances"}"#,
    printcolumn = r#"{"name":"Routers","type":"integer","jsonPath":".status.router.readyInstances"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InnoDBClusterSpec {
    /// Name of a Secret in the cluster's namespace with the keys `rootUser`, `rootHost` and
    /// `rootPassword`. Its data is only referenced, never copied.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// Number of MySQL server instances (Group Replication members).
    #[serde(default = "default_instances")]
    #[schemars(range(min = 1, max = 9))]
    pub instances: i32,
    /// MySQL Server and Router version, e.g. `8.4.6`.
    #[serde(default = "default_version")]
    #[schemars(pattern(r"^\d+\.\d+\.\d+$"))]
    pub version: String,
    /// MySQL Router.
    #[serde(default)]
    pub router: RouterSpec,
    /// Extra server configuration appended to the generated my.cnf; must have a `[mysqld]` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mycnf: Option<String>,
    /// The data directory claim of each instance. Immutable: a StatefulSet's claim templates
    /// cannot change after creation.
    #[serde(default)]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf")
        .message("datadirVolumeClaimTemplate is immutable once the cluster exists"))]
    pub datadir_volume_claim_template: DatadirSpec,
    /// The Service `<name>` in front of MySQL Router.
    #[serde(default)]
    pub service: ServiceSpec,
    /// Extra labels on the MySQL pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
    /// Extra annotations on the MySQL pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,
    /// Compute resources of the MySQL server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

fn default_instances() -> i32 {
    1
}

fn default_version() -> String {
    DEFAULT_VERSION.to_string()
}

/// MySQL Router settings.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouterSpec {
    /// Number of MySQL Router pods; 0 removes the router Deployment (the Service stays).
    #[serde(default = "default_router_instances")]
    #[schemars(range(min = 0))]
    pub instances: i32,
}

fn default_router_instances() -> i32 {
    1
}

impl Default for RouterSpec {
    fn default() -> Self {
        RouterSpec {
            instances: default_router_instances(),
        }
    }
}

/// The persistent volume claim template of each instance's data directory.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DatadirSpec {
    /// Requested size, a Kubernetes quantity such as `2Gi`.
    #[serde(default = "default_storage")]
    #[schemars(pattern(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"))]
    pub storage: String,
    /// StorageClass of the claims; the cluster's default class when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// Access modes of the claims.
    #[serde(default = "default_access_modes")]
    #[schemars(length(min = 1))]
    pub access_modes: Vec<AccessMode>,
}

fn default_storage() -> String {
    DEFAULT_STORAGE.to_string()
}

fn default_access_modes() -> Vec<AccessMode> {
    vec![AccessMode::ReadWriteOnce]
}

impl Default for DatadirSpec {
    fn default() -> Self {
        DatadirSpec {
            storage: default_storage(),
            storage_class_name: None,
            access_modes: default_access_modes(),
        }
    }
}

/// A persistent volume access mode. (No doc comments on the variants: they would turn the
/// schema's `enum` into a `oneOf`.)
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    ReadWriteOncePod,
}

impl AccessMode {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadOnlyMany => "ReadOnlyMany",
            AccessMode::ReadWriteMany => "ReadWriteMany",
            AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
        }
    }
}

/// The router Service.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// Service type.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// What port 3306 of the Service leads to: read-write, read-only or read-write splitting.
    #[serde(default)]
    pub default_port: DefaultPort,
}

/// The type of the router Service.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// The router port behind the Service's port 3306.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DefaultPort {
    #[default]
    MysqlRw,
    MysqlRo,
    MysqlRwSplit,
}

impl DefaultPort {
    /// The router port that serves this kind of connection.
    pub fn router_port(self) -> i32 {
        match self {
            DefaultPort::MysqlRw => crate::children::ROUTER_RW_PORT,
            DefaultPort::MysqlRo => crate::children::ROUTER_RO_PORT,
            DefaultPort::MysqlRwSplit => crate::children::ROUTER_RW_SPLIT_PORT,
        }
    }
}

/// Label and annotation keys the plugin sets on the MySQL pods itself; a user's
/// `podLabels`/`podAnnotations` may not override them (the selector depends on the labels).
const OWN_LABEL_KEYS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
    "mysql.oracle.com/cluster",
    "tier",
];

/// Checks what the CRD schema cannot express, and what `render` sees without an API server;
/// returns the spec the children are made from: `resources` as the API server stores them
/// (see [`validate_container_resources`]), so the applied StatefulSet is the one observed.
pub fn validate(cluster: &InnoDBCluster) -> Result<InnoDBClusterSpec, Error> {
    let name = cluster.name_any();
    validate_name(&name)?;
    let spec = &cluster.spec;
    if !is_dns_subdomain(&spec.secret_name) {
        return Err(Error::invalid_field(
            "secretName",
            format!(
                "must name a Secret (lower-case letters, digits, '-' and '.', at most 253), got {:?}",
                spec.secret_name
            ),
        ));
    }
    if !(1..=MAX_INSTANCES).contains(&spec.instances) {
        return Err(Error::invalid_field(
            "instances",
            format!(
                "must be between 1 and {MAX_INSTANCES}, got {}",
                spec.instances
            ),
        ));
    }
    if !is_version(&spec.version) {
        return Err(Error::invalid_field(
            "version",
            format!(
                "must be a MySQL version MAJOR.MINOR.PATCH such as {DEFAULT_VERSION}, got {:?}",
                spec.version
            ),
        ));
    }
    if spec.router.instances < 0 {
        return Err(Error::invalid_field(
            "router.instances",
            format!("must be 0 or more, got {}", spec.router.instances),
        ));
    }
    if let Some(mycnf) = &spec.mycnf
        && !has_mysqld_section(mycnf)
    {
        return Err(Error::invalid_field(
            "mycnf",
            "must contain a [mysqld] section: a line \"[mysqld]\" before the server options",
        ));
    }
    validate_datadir(&spec.datadir_volume_claim_template)?;
    for (key, value) in &spec.pod_labels {
        check_own_key("podLabels", key)?;
        check_label_key("podLabels", key)?;
        if !is_label_value(value) {
            return Err(Error::invalid_field(
                &format!("podLabels[{key:?}]"),
                format!(
                    "must be a label value (at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit), got {value:?}"
                ),
            ));
        }
    }
    for key in spec.pod_annotations.keys() {
        if key == CONFIG_HASH_ANNOTATION {
            return Err(Error::invalid_field(
                "podAnnotations",
                format!("the key {key:?} is set by the operator (the configuration hash)"),
            ));
        }
        check_label_key("podAnnotations", key)?;
    }
    let resources = spec
        .resources
        .as_ref()
        .map(|r| validate_container_resources("resources", r))
        .transpose()?;
    Ok(InnoDBClusterSpec {
        resources,
        ..spec.clone()
    })
}

/// `metadata.name`: a DNS-1035 label (the Services are named after it) of at most 40 characters.
fn validate_name(name: &str) -> Result<(), Error> {
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidSpec(format!(
            "metadata.name: must be at most {MAX_NAME_LEN} characters (it prefixes pod, Service and label names), got {} ({name:?})",
            name.len()
        )));
    }
    let bytes = name.as_bytes();
    let ok = bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !name.ends_with('-');
    if !ok {
        return Err(Error::InvalidSpec(format!(
            "metadata.name: must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter) because Services are named after it, got {name:?}"
        )));
    }
    Ok(())
}

fn validate_datadir(datadir: &DatadirSpec) -> Result<(), Error> {
    if !is_positive_quantity(&datadir.storage) {
        return Err(Error::invalid_field(
            "datadirVolumeClaimTemplate.storage",
            format!(
                "must be a positive quantity such as {DEFAULT_STORAGE} or 500Mi, got {:?}",
                datadir.storage
            ),
        ));
    }
    if let Some(class) = &datadir.storage_class_name
        && !is_dns_subdomain(class)
    {
        return Err(Error::invalid_field(
            "datadirVolumeClaimTemplate.storageClassName",
            format!("must name a StorageClass, got {class:?}"),
        ));
    }
    if datadir.access_modes.is_empty() {
        return Err(Error::invalid_field(
            "datadirVolumeClaimTemplate.accessModes",
            "must list at least one access mode, e.g. [ReadWriteOnce]",
        ));
    }
    Ok(())
}

fn check_own_key(field: &str, key: &str) -> Result<(), Error> {
    if OWN_LABEL_KEYS.contains(&key) || key.starts_with("operator-host.dev/") {
        return Err(Error::invalid_field(
            field,
            format!("the key {key:?} is set by the operator (it selects the cluster's pods)"),
        ));
    }
    Ok(())
}

/// A label or annotation key: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 characters.
fn check_label_key(field: &str, key: &str) -> Result<(), Error> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let ok = prefix.is_none_or(is_dns_subdomain) && !name.is_empty() && is_label_value(name);
    if !ok {
        return Err(Error::invalid_field(
            field,
            format!(
                "{key:?} is not a valid key (an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.')"
            ),
        ));
    }
    Ok(())
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_`, `.`, alphanumeric at both ends.
fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.is_empty()
        || (value.len() <= 63
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
}

fn is_dns_subdomain(name: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)
}

/// `MAJOR.MINOR.PATCH`, digits only (what the CRD's pattern says).
fn is_version(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A positive decimal quantity with an optional binary or decimal suffix (the CRD's pattern).
fn is_positive_quantity(quantity: &str) -> bool {
    let suffixes = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
    ];
    let number = suffixes
        .iter()
        .find_map(|s| quantity.strip_suffix(s))
        .unwrap_or(quantity);
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(whole)
        && fraction.is_none_or(digits)
        && number.bytes().any(|b| (b'1'..=b'9').contains(&b))
}

/// Whether an option file has a `[mysqld]` group header on a line of its own.
pub fn has_mysqld_section(mycnf: &str) -> bool {
    mycnf.lines().any(|l| l.trim() == "[mysqld]")
}
