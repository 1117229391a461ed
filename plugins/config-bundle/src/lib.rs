//! Test-only plugin: one ConfigMap per `ConfigBundle` CR, so a benchmark can hold many parents without pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{
    Condition, Desired, Error, Kind, Observed, Reconciler, child_meta, kind_of,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most keys `spec.data` may hold (the CRD schema says the same).
pub const MAX_KEYS: usize = 64;
/// Longest ConfigMap key the API server accepts.
const MAX_KEY_LEN: usize = 253;

/// What the ConfigMap of a `ConfigBundle` holds.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "bundle.bench.example.com",
    version = "v1alpha1",
    kind = "ConfigBundle",
    plural = "configbundles",
    namespaced,
    status = "ConfigBundleStatus",
    printcolumn = r#"{"name":"Keys","type":"integer","jsonPath":".status.keys"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct ConfigBundleSpec {
    /// The ConfigMap's `data`, key for key.
    #[serde(default)]
    #[schemars(extend("maxProperties" = MAX_KEYS))]
    pub data: BTreeMap<String, String>,
}

/// The observed state of a `ConfigBundle`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigBundleStatus {
    /// Keys in the ConfigMap as observed (0 before it is).
    #[serde(default)]
    pub keys: i32,
    /// `Ready`: whether the observed ConfigMap holds exactly `spec.data`.
    #[serde(default)]
    #[schemars(schema_with = "operator_host_sdk::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// The reconciler: a ConfigMap named after the `ConfigBundle`.
pub struct ConfigBundleOperator;

impl Reconciler for ConfigBundleOperator {
    type Parent = ConfigBundle;
    const NAME: &'static str = "config-bundle";

    fn children() -> Vec<Kind> {
        vec![kind_of::<ConfigMap>()]
    }

    fn reconcile(parent: &ConfigBundle, observed: &Observed) -> Result<Desired, Error> {
        validate(&parent.spec)?;
        let name = parent.name_any();
        let mut desired = Desired::new();
        desired.child(&config_map(&name, &parent.spec.data))?;
        // A ConfigMap has no big fields to skip, so it is decoded whole.
        let observed = observed.get::<ConfigMap>(&name)?;
        desired.status(&status(parent, observed.as_ref()))?;
        Ok(desired)
    }
}

// Behind a feature, as in memcached, so a crate reusing this one exports only itself.
#[cfg(feature = "export")]
operator_host_sdk::export_reconciler!(ConfigBundleOperator);

/// Checks what the API server would refuse in the ConfigMap's apply (a 422 the host could
/// only retry), and the key limit.
pub fn validate(spec: &ConfigBundleSpec) -> Result<(), Error> {
    if spec.data.len() > MAX_KEYS {
        return Err(Error::invalid_field(
            "data",
            format!("must have at most {MAX_KEYS} keys, got {}", spec.data.len()),
        ));
    }
    for key in spec.data.keys() {
        if !is_config_map_key(key) {
            return Err(Error::invalid_field(
                &format!("data[{key:?}]"),
                format!(
                    "a ConfigMap key must be 1 to {MAX_KEY_LEN} characters of letters, digits, \
                     '-', '_' and '.', and not '.' or start with '..'"
                ),
            ));
        }
    }
    Ok(())
}

/// The API server's rule for ConfigMap keys (IsConfigMapKey).
fn is_config_map_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && key != "."
        && !key.starts_with("..")
}

fn config_map(name: &str, data: &BTreeMap<String, String>) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(name, BTreeMap::new()),
        // An empty map is left out, not written for the API server to drop.
        data: (!data.is_empty()).then(|| data.clone()),
        ..ConfigMap::default()
    }
}

/// Status from the observed ConfigMap: `Ready` once it holds exactly the wanted data.
fn status(parent: &ConfigBundle, observed: Option<&ConfigMap>) -> ConfigBundleStatus {
    let generation = parent.metadata.generation;
    let empty = BTreeMap::new();
    let observed_data = observed.map(|cm| cm.data.as_ref().unwrap_or(&empty));
    let ready = match observed_data {
        None => Condition::new(
            "Ready",
            false,
            "Pending",
            "the ConfigMap has not been observed yet",
            generation,
        ),
        Some(data) if *data != parent.spec.data => Condition::new(
            "Ready",
            false,
            "Pending",
            "the observed ConfigMap does not hold spec.data yet",
            generation,
        ),
        Some(data) => Condition::new(
            "Ready",
            true,
            "DataApplied",
            format!("the ConfigMap holds {} keys", data.len()),
            generation,
        ),
    };
    ConfigBundleStatus {
        // At most MAX_KEYS in what this plugin writes; saturate whatever else is observed.
        keys: observed_data.map_or(0, |d| i32::try_from(d.len()).unwrap_or(i32::MAX)),
        conditions: vec![ready],
    }
}

#[cfg(test)]
mod tests;
