//! The Memcached custom resource as the integration tests create and read it.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

/// The API resource of `Memcached` (group `cache.example.com`).
pub fn memcached_resource() -> ApiResource {
    ApiResource {
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        plural: "memcacheds".into(),
    }
}

/// Creates a custom resource of `resource` named `name` with `spec`.
pub async fn create(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
    spec: Value,
) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// The host's `Reconciled` condition of `cr`, or null.
pub fn reconciled_condition(cr: &DynamicObject) -> Value {
    cr.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Reconciled").cloned())
        .unwrap_or(Value::Null)
}
