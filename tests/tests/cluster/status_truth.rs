//! A Memcached status says Available for a generation only once the Deployment has rolled out that generation's spec.
//!
//! The plugin sees the Deployment as it was before the host applies its answer, and the host
//! stamps the parent's current generation on the status: a plugin that reads "every pod
//! ready" from the old Deployment claims the new generation is available before a single new
//! pod exists. These tests judge every status the API server shows against the Deployment
//! at that moment, with `kubectl rollout status`'s rules written out here (not the SDK's).

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DynamicObject, Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{create, memcached_resource};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
const NAME: &str = "cache";
const NEW_IMAGE: &str = "memcached:1.6.40-alpine";

async fn memcached_host(test: &str) -> (TestNamespace, Host, Api<DynamicObject>) {
    let ns = TestNamespace::new(test).await.unwrap();
    let host = Host::start(plugin_path("plugins", "memcached"), ns.name()).await;
    let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    (ns, host, api)
}

/// `status.observedGeneration` and whether `Available` is `True`.
fn availability(cr: &DynamicObject) -> (Option<i64>, bool) {
    let status = &cr.data["status"];
    let available = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
        .is_some_and(|c| c["status"] == "True");
    (status["observedGeneration"].as_i64(), available)
}

/// Why `deployment` has not finished rolling out a template with `image`, or `None` once it
/// has: kubectl's rules (spec observed, every replica updated, none old, all available).
fn incomplete_rollout(deployment: &Deployment, image: &str) -> Option<String> {
    let spec = deployment.spec.as_ref()?;
    let current = spec.template.spec.as_ref()?.containers[0].image.as_deref();
    if current != Some(image) {
        return Some(format!("the template has image {current:?}, not {image:?}"));
    }
    let status = deployment.status.clone().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(0);
    let wanted = spec.replicas.unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let total = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        Some(format!("generation {generation} is not observed yet"))
    } else if updated < wanted {
        Some(format!("{updated} of {wanted} replicas updated"))
    } else if total > updated {
        Some(format!("{} old replicas left", total - updated))
    } else if available < updated {
        Some(format!(
            "{available} of {updated} updated replicas available"
        ))
    } else {
        None
    }
}

/// Waits until the CR says Available for its current generation.
async fn wait_available(api: &Api<DynamicObject>) -> DynamicObject {
    wait_for("Available for the current generation", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        let (observed, available) = availability(&cr);
        Ok((available && observed == cr.metadata.generation).then_some(cr))
    })
    .await
    .unwrap()
}

/// Merge-patches the CR's spec; returns the new generation and the resource version.
async fn patch_spec(api: &Api<DynamicObject>, spec: Value) -> (i64, String) {
    let cr = api
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .unwrap();
    (
        cr.metadata.generation.unwrap(),
        cr.resource_version().unwrap(),
    )
}

/// Every version of the CR after `resource_version`, as the API server writes it.
async fn cr_versions(
    api: &Api<DynamicObject>,
    resource_version: &str,
) -> impl futures::Stream<Item = DynamicObject> + Unpin {
    let params = WatchParams::default().fields(&format!("metadata.name={NAME}"));
    api.watch(&params, resource_version)
        .await
        .unwrap()
        .map_ok(|event| match event {
            WatchEvent::Added(cr) | WatchEvent::Modified(cr) => Some(cr),
            WatchEvent::Error(e) => panic!("the CR watch failed: {e}"),
            _ => None,
        })
        .filter_map(|item| async move { item.unwrap() })
        .boxed()
}

#[tokio::test]
async fn an_image_change_is_not_available_until_the_new_pods_are_rolled_out() {
    let (ns, host, api) = memcached_host("truth-image").await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), NAME, json!({"size": 2})).await;
    wait_available(&api).await;

    let (generation, version) = patch_spec(&api, json!({"image": NEW_IMAGE})).await;
    let mut versions = cr_versions(&api, &version).await;
    let deadline = Instant::now() + TIMEOUT;
    let mut not_available_seen = 0;
    loop {
        let cr = tokio::time::timeout_at(deadline.into(), versions.next())
            .await
            .expect("Available for the new generation in time")
            .expect("the watch goes on");
        let (observed, available) = availability(&cr);
        if observed != Some(generation) {
            continue;
        }
        if !available {
            not_available_seen += 1;
            continue;
        }
        // The status says Available for the new generation: the Deployment, read after it,
        // can only be further along, so an incomplete rollout now means the status lied.
        let deployment = deployments.get(NAME).await.unwrap();
        assert_eq!(
            incomplete_rollout(&deployment, NEW_IMAGE),
            None,
            "Available for generation {generation} while the rollout is incomplete: {:?}",
            cr.data["status"]
        );
        break;
    }
    // The first status of the new generation is computed from the old Deployment, which
    // cannot be the new one rolled out.
    assert!(
        not_available_seen > 0,
        "the new generation was never reported not Available before it was"
    );
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_rollout_that_cannot_finish_is_never_available() {
    let (ns, host, api) = memcached_host("truth-stuck").await;
    let deployments: Api<Deployment> = ns.api();
    // One replica: the rolling update surges one new pod and keeps the old one until the new
    // one is ready, so "size pods ready and size pods updated" holds all along; only the
    // rollout rules tell the new template is not running.
    create(&api, &memcached_resource(), NAME, json!({"size": 1})).await;
    wait_available(&api).await;

    // No fake node has a thousand cores: the new pod stays Pending.
    let unschedulable = json!({"image": NEW_IMAGE, "resources": {"requests": {"cpu": "1000"}}});
    let (generation, version) = patch_spec(&api, unschedulable).await;
    let mut versions = cr_versions(&api, &version).await;
    // From the first status of the new generation on, every status for 15 s (the pending
    // pod's events and the Deployment's status changes make the host reconcile meanwhile).
    let hold = Duration::from_secs(15);
    let mut until = Instant::now() + TIMEOUT;
    let mut held = false;
    loop {
        let Ok(cr) = tokio::time::timeout_at(until.into(), versions.next()).await else {
            assert!(held, "no status for generation {generation} in time");
            break;
        };
        let cr = cr.expect("the watch goes on");
        let (observed, available) = availability(&cr);
        if observed != Some(generation) {
            continue;
        }
        assert!(
            !available,
            "Available for generation {generation}, whose pods cannot be scheduled: {:?}",
            cr.data["status"]
        );
        if !held {
            held = true;
            until = Instant::now() + hold;
        }
    }
    // And that was an intermediate state: the new template applied, its rollout stuck.
    let deployment = deployments.get(NAME).await.unwrap();
    let why = incomplete_rollout(&deployment, NEW_IMAGE);
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("old replicas") || w.contains("available")),
        "the rollout should be stuck with the old pod serving: {why:?}"
    );
    let status = deployment.status.unwrap();
    assert_eq!(
        (status.updated_replicas, status.ready_replicas),
        (Some(1), Some(1)),
        "one new (pending) pod and one old ready pod"
    );

    // Schedulable again: the rollout completes and the status follows.
    let (generation, _) = patch_spec(&api, json!({"resources": null})).await;
    let cr = wait_available(&api).await;
    assert_eq!(cr.metadata.generation, Some(generation));
    let deployment = deployments.get(NAME).await.unwrap();
    assert_eq!(incomplete_rollout(&deployment, NEW_IMAGE), None);
    assert_eq!(availability(&cr), (Some(generation), true));
    host.stop().await;
    ns.cleanup().await.unwrap();
}
