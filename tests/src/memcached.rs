//! The Memcached custom resource as the integration tests create and read it.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};

use crate::devcluster::TestNamespace;

/// The annotation the v2 build of the Memcached plugin puts on every child.
pub const VARIANT_ANNOTATION: &str = "cache.example.com/plugin-variant";
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

/// A custom resource of `resource` named `name` with `spec`, to create.
pub fn custom_resource(resource: &ApiResource, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// Creates a custom resource of `resource` named `name` with `spec`.
pub async fn create(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
    spec: Value,
) -> DynamicObject {
    let object = custom_resource(resource, name, spec);
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// Waits until the Memcached plugin's webhook refuses, in `api`'s namespace, a Memcached with
/// an image it refuses (`spec.image`) and returns the API server's message. One created before
/// the leader registered the webhooks is deleted and tried again, as is a request the API
/// server could not deliver to a webhook yet.
pub async fn wait_for_webhook_refusal(
    api: &Api<DynamicObject>,
    timeout: std::time::Duration,
) -> Result<String, crate::devcluster::Error> {
    let invalid = custom_resource(
        &memcached_resource(),
        "bad-image",
        json!({"size": 1, "image": "bad image"}),
    );
    crate::devcluster::wait_for(
        "the webhook to refuse an invalid Memcached",
        timeout,
        || async {
            match api.create(&PostParams::default(), &invalid).await {
                Err(kube::Error::Api(status)) if status.message.contains("spec.image") => {
                    Ok(Some(status.message))
                }
                Err(kube::Error::Api(status)) if status.message.contains("webhook") => Ok(None),
                Ok(_) => {
                    api.delete("bad-image", &Default::default()).await?;
                    Ok(None)
                }
                Err(other) => Err(other.into()),
            }
        },
    )
    .await
}

/// The condition of `type_` in `cr`'s status, or null.
pub fn condition(cr: &DynamicObject, type_: &str) -> Value {
    cr.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_).cloned())
        .unwrap_or(Value::Null)
}

/// The host's `Reconciled` condition of `cr`, or null.
pub fn reconciled_condition(cr: &DynamicObject) -> Value {
    condition(cr, "Reconciled")
}

/// The UIDs of the Memcached plugin's Deployments and Services in `ns` (by `Kind/name`), and
/// how many of them carry `annotation`.
pub async fn managed_children(
    ns: &TestNamespace,
    annotation: &str,
) -> (BTreeMap<String, String>, usize) {
    let mut uids = BTreeMap::new();
    let mut annotated = 0;
    let params = ListParams::default()
        .labels("app.kubernetes.io/managed-by=operator-host,operator-host.dev/plugin=memcached");
    for deployment in ns.api::<Deployment>().list(&params).await.unwrap() {
        annotated += usize::from(deployment.annotations().contains_key(annotation));
        uids.insert(
            format!("Deployment/{}", deployment.name_any()),
            deployment.uid().unwrap_or_default(),
        );
    }
    for service in ns.api::<Service>().list(&params).await.unwrap() {
        annotated += usize::from(service.annotations().contains_key(annotation));
        uids.insert(
            format!("Service/{}", service.name_any()),
            service.uid().unwrap_or_default(),
        );
    }
    (uids, annotated)
}

/// Whether each parent's Deployment in `ns` carries v2's annotation, by parent.
pub async fn on_v2(ns: &TestNamespace) -> BTreeMap<String, bool> {
    let params = ListParams::default().labels("operator-host.dev/plugin=memcached");
    ns.api::<Deployment>()
        .list(&params)
        .await
        .unwrap()
        .items
        .iter()
        .map(|d| {
            (
                d.name_any(),
                d.annotations().contains_key(VARIANT_ANNOTATION),
            )
        })
        .collect()
}

/// Merges `spec` into parent `name`'s spec.
pub async fn patch_spec(api: &Api<DynamicObject>, name: &str, spec: Value) {
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": spec})),
    )
    .await
    .unwrap();
}

/// Waits (at most `timeout`) until parent `name`'s `Reconciled` condition has `reason`;
/// returns the condition, or panics naming the reason.
pub async fn wait_for_reason(
    api: &Api<DynamicObject>,
    name: &str,
    reason: &str,
    timeout: std::time::Duration,
) -> Value {
    crate::devcluster::wait_for(&format!("Reconciled reason {reason}"), timeout, || async {
        let condition = reconciled_condition(&api.get(name).await?);
        Ok((condition["reason"] == reason).then_some(condition))
    })
    .await
    .unwrap()
}

/// Waits (at most `timeout`) until parent `name` is `Reconciled=True` for its first generation.
pub async fn wait_for_first_reconcile(
    api: &Api<DynamicObject>,
    name: &str,
    timeout: std::time::Duration,
) -> Result<(), crate::devcluster::Error> {
    crate::devcluster::wait_for("Reconciled=True", timeout, || async {
        let cr = api.get(name).await?;
        let reconciled = reconciled_condition(&cr)["status"] == "True"
            && cr.data["status"]["observedGeneration"] == json!(1);
        Ok(reconciled.then_some(()))
    })
    .await
}

/// Waits until `parents` holds `count` parents and every one says `Reconciled=True`.
pub async fn all_reconciled(
    parents: &Api<DynamicObject>,
    count: usize,
    bound: std::time::Duration,
) -> Result<(), crate::devcluster::Error> {
    crate::devcluster::wait_for("every parent Reconciled=True", bound, || async {
        let listed = parents.list(&ListParams::default()).await?;
        Ok((listed.items.len() == count
            && listed
                .items
                .iter()
                .all(|parent| reconciled_condition(parent)["status"] == "True"))
        .then_some(()))
    })
    .await
}

/// Creates `n` Memcached parents `cache-0`.. with `spec.size: 0` (no pods) in `ns`,
/// `in_flight` at a time, and waits until each has its Deployment and Service: how long the
/// host took to converge them from scratch, the benchmarks' baseline.
pub async fn converge_from_scratch(
    ns: &TestNamespace,
    n: usize,
    in_flight: usize,
    bound: std::time::Duration,
) -> Result<std::time::Duration, crate::devcluster::Error> {
    let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let started = std::time::Instant::now();
    let names: Vec<String> = (0..n).map(|i| format!("cache-{i}")).collect();
    create_all(&api, &names, json!({"size": 0}), in_flight).await;
    crate::devcluster::wait_for("every parent's children", bound, || async {
        Ok((managed_children(ns, VARIANT_ANNOTATION).await.0.len() == 2 * n).then_some(()))
    })
    .await?;
    Ok(started.elapsed())
}

/// Creates Memcached parents `names` (all with `spec`), `in_flight` at a time.
pub async fn create_all(api: &Api<DynamicObject>, names: &[String], spec: Value, in_flight: usize) {
    let resource = memcached_resource();
    for batch in names.chunks(in_flight) {
        futures::future::join_all(
            batch
                .iter()
                .map(|name| create(api, &resource, name, spec.clone())),
        )
        .await;
    }
}
