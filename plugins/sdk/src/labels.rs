//! The recommended labels of a parent's children, and selectors of one component's pods only.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Error;

/// `app.kubernetes.io/name: app` and `app.kubernetes.io/instance: instance` (the parent's
/// name): labels every child of one parent can carry, and a selector of that parent's pods
/// when it has one kind of pod.
pub fn app_labels(app: &str, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), app.to_string()),
        (
            "app.kubernetes.io/instance".to_string(),
            instance.to_string(),
        ),
    ])
}

/// [`app_labels`] and `app.kubernetes.io/component: component`. Give each kind of pod of a
/// parent (the server's, a migration Job's, ...) a component of its own, and a Service's or a
/// PodDisruptionBudget's selector made of these labels matches that component's pods only,
/// never another child's (`render` and `conformance` warn when two children's selectors do).
pub fn component_labels(app: &str, instance: &str, component: &str) -> BTreeMap<String, String> {
    let mut labels = app_labels(app, instance);
    labels.insert(
        "app.kubernetes.io/component".to_string(),
        component.to_string(),
    );
    labels
}

/// `value` (a child written as JSON, e.g. with `serde_json::json!`) as the typed `K`, for
/// [`crate::Desired::child`]: the JSON is checked against the type here, where a mismatch is a
/// bug of the plugin (a retry naming the kind and the field), not an invalid spec.
pub fn from_json<K>(value: Value) -> Result<K, Error>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    serde_path_to_error::deserialize(value).map_err(|e| {
        Error::Retry(format!(
            "a {} written by the plugin does not decode at {}: {}",
            K::KIND,
            e.path(),
            e.inner()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use serde_json::json;

    #[test]
    fn component_labels_add_the_component_to_the_app_labels() {
        let labels = component_labels("webapp", "shop", "server");
        assert_eq!(
            labels,
            BTreeMap::from([
                ("app.kubernetes.io/component".into(), "server".into()),
                ("app.kubernetes.io/instance".into(), "shop".into()),
                ("app.kubernetes.io/name".into(), "webapp".into()),
            ])
        );
        assert!(
            app_labels("webapp", "shop")
                .iter()
                .all(|(k, v)| labels[k] == *v)
        );
    }

    #[test]
    fn from_json_names_the_kind_and_field_that_does_not_decode() {
        let service: Service = from_json(json!({"metadata": {"name": "a"}})).unwrap();
        assert_eq!(service.metadata.name.as_deref(), Some("a"));
        let Err(Error::Retry(message)) =
            from_json::<Service>(json!({"spec": {"ports": [{"port": "http"}]}}))
        else {
            panic!("a port that is not a number does not decode");
        };
        assert!(
            message.starts_with(
                "a Service written by the plugin does not decode at spec.ports[0].port: "
            ),
            "{message}"
        );
    }
}
