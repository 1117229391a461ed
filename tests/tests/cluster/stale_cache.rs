//! Stale state (Sieve): the host's caches lag behind the API server, held back by the fault
//! proxy, while the objects they hold are deleted and recreated under the same names. Every
//! write carries the UID the host believes in, so a lagging cache makes a refused write and a
//! re-read (or, for a child it believes holds what it last applied, no write at all), never a
//! takeover of the namesake or a write to the new object.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{self, TestNamespace, wait_for};
use operator_host_tests::fault_proxy::{FaultGuard, FaultProxy, Matcher};
use operator_host_tests::host::{Host, plugin_path, runtime};
use operator_host_tests::hostile::{attack_resource, release_attacks};
use operator_host_tests::memcached::{create, memcached_resource, wait_for_reason};
use operator_host_tests::oracle::Oracle;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

/// A host in `ns` serving `plugin` through a fresh fault proxy.
async fn host_behind_proxy(ns: &TestNamespace, dir: &str, plugin: &str) -> (FaultProxy, Host) {
    let proxy = FaultProxy::start(devcluster::cluster().config().await.unwrap())
        .await
        .unwrap();
    let plugins = tempfile::tempdir().unwrap().keep();
    std::fs::copy(
        plugin_path(dir, plugin),
        plugins.join(format!("{plugin}.wasm")),
    )
    .unwrap();
    let host = Host::start_as(
        proxy.client().unwrap(),
        plugins,
        &[ns.name()],
        Policy::default(),
    )
    .await;
    (proxy, host)
}

/// Waits until Memcached `name` of `ns` is the plugin's fixed point.
async fn memcached_converges(ns: &TestNamespace, name: &str) {
    let plugin =
        operator_host::plugin::Plugin::load(&runtime(), &plugin_path("plugins", "memcached"))
            .unwrap();
    let oracle = Oracle {
        client: ns.client(),
        plugin: &plugin,
        namespace: ns.name(),
    };
    oracle.converges(name, TIMEOUT).await.unwrap();
}

/// Memcached "m" once the host made its Deployment, replaced by a new "m" while the host's
/// parent watch is held: the host still believes in the first one.
struct Replaced {
    memcacheds: Api<DynamicObject>,
    deployments: Api<Deployment>,
    new: DynamicObject,
    /// Releasing it lets the host see the replacement.
    held: FaultGuard,
}

async fn replace_parent_unseen(
    ns: &TestNamespace,
    proxy: &FaultProxy,
    delete: DeleteParams,
) -> Replaced {
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let old = create(&memcacheds, &memcached_resource(), "m", json!({"size": 1})).await;
    let deployments: Api<Deployment> = ns.api();
    wait_for("the first parent's Deployment", TIMEOUT, || async {
        Ok(deployments.get_opt("m").await?)
    })
    .await
    .unwrap();
    let held = proxy.hold_watch(Matcher::any().path_contains("/memcacheds"));
    memcacheds.delete("m", &delete).await.unwrap();
    wait_for("the first parent to be gone", TIMEOUT, || async {
        Ok(memcacheds.get_opt("m").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    let new = create(&memcacheds, &memcached_resource(), "m", json!({"size": 0})).await;
    assert_ne!(new.uid(), old.uid());
    Replaced {
        memcacheds,
        deployments,
        new,
        held,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namesake_created_while_the_child_cache_lags_is_not_taken_over() {
    let ns = TestNamespace::new("stale-child").await.unwrap();
    let (proxy, host) = host_behind_proxy(&ns, "test-plugins", "hostile").await;
    let attacks: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    create(&attacks, &attack_resource(), "a", json!({"attack": "none"})).await;
    let config_maps: Api<ConfigMap> = ns.api();
    wait_for("the plugin's ConfigMap", TIMEOUT, || async {
        Ok(config_maps.get_opt("a").await?)
    })
    .await
    .unwrap();
    // The host's ConfigMap cache stops seeing changes; the owned child is replaced by a
    // namesake of someone else's.
    let held = proxy.hold_watch(Matcher::any().path_contains("/configmaps"));
    config_maps
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let mut namesake = ConfigMap::default();
    namesake.metadata.name = Some("a".into());
    namesake.data = Some([("owner".to_string(), "someone else".to_string())].into());
    let namesake = config_maps
        .create(&PostParams::default(), &namesake)
        .await
        .unwrap();
    // A change of the parent makes the host reconcile it with the stale child in its cache:
    // it believes its own child is there as last applied, so it writes nothing at all.
    let reconciled = host.reconciles("success");
    attacks
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    wait_for("a reconcile with the stale child", TIMEOUT, || async {
        Ok((host.reconciles("success") > reconciled).then_some(()))
    })
    .await
    .unwrap();
    let untouched = |live: &ConfigMap| {
        live.uid() == namesake.uid()
            && live.resource_version() == namesake.resource_version()
            && live.owner_references().is_empty()
    };
    let live = config_maps.get("a").await.unwrap();
    assert!(untouched(&live), "written with a stale cache: {live:?}");
    // Once the cache sees its child gone, the host reads what has the name now: someone
    // else's, left as it is and said so.
    held.release();
    let condition = wait_for_reason(&attacks, "a", "ChildNotOwned", TIMEOUT).await;
    assert!(
        condition["message"]
            .as_str()
            .unwrap_or_default()
            .contains("ConfigMap \"a\""),
        "{condition}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let live = config_maps.get("a").await.unwrap();
    assert!(untouched(&live), "taken over: {live:?}");
    host.stop().await;
    release_attacks(&ns).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_view_of_a_deleted_parent_writes_nothing_for_it_or_its_successor() {
    let ns = TestNamespace::new("stale-parent").await.unwrap();
    let (proxy, host) = host_behind_proxy(&ns, "plugins", "memcached").await;
    let Replaced {
        memcacheds,
        deployments,
        new,
        held,
    } = replace_parent_unseen(&ns, &proxy, DeleteParams::foreground()).await;
    // The garbage collector's deletion of the first parent's children reaches the host (their
    // watch is not held) and makes it reconcile its stale "m": it finds the parent gone
    // before it creates anything.
    wait_for("a reconcile of the stale parent", TIMEOUT, || async {
        Ok((host.reconciles("StaleParent") > 0).then_some(()))
    })
    .await
    .unwrap();
    let writes_before = proxy.count(&Matcher::writes().path_contains(ns.name()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let children_written = proxy.count(&Matcher::writes().path_contains(ns.name())) - writes_before;
    assert_eq!(
        children_written,
        0,
        "the host wrote for a parent that is gone: {:?}",
        proxy.counts()
    );
    let live = memcacheds.get("m").await.unwrap();
    assert_eq!(live.uid(), new.uid());
    assert!(
        live.data
            .get("status")
            .is_none_or(serde_json::Value::is_null),
        "the new parent got a status from the stale view of the old one: {}",
        live.data["status"]
    );
    assert!(
        deployments.get_opt("m").await.unwrap().is_none(),
        "a Deployment was made for the deleted parent"
    );
    held.release();
    // Once the host sees the new parent, it converges on it.
    memcached_converges(&ns, "m").await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_computed_for_a_deleted_parent_is_not_written_onto_its_successor() {
    let ns = TestNamespace::new("stale-status").await.unwrap();
    let (proxy, host) = host_behind_proxy(&ns, "plugins", "memcached").await;
    // Every status write of "m" takes long enough for "m" to be replaced while it is on its way.
    let status_writes = Matcher::writes().path_contains("/memcacheds/m/status");
    let slow = proxy.delay(status_writes.clone(), Duration::from_secs(5));
    let Replaced {
        memcacheds,
        new,
        held,
        ..
    } = replace_parent_unseen(&ns, &proxy, DeleteParams::default()).await;
    // The status computed for the first "m", and then the failure report of its refusal, reach
    // the API server after the second "m" exists; both test the first one's UID.
    for writes in 1..=2 {
        wait_for("a status write of \"m\" to arrive", TIMEOUT, || async {
            Ok((proxy.forwarded(&status_writes) >= writes).then_some(()))
        })
        .await
        .unwrap();
        let live = memcacheds.get("m").await.unwrap();
        assert_eq!(live.uid(), new.uid());
        assert!(
            live.data
                .get("status")
                .is_none_or(serde_json::Value::is_null),
            "the new parent got the status of the old one: {}",
            live.data["status"]
        );
    }
    assert!(host.reconciles("StatusWriteFailed") > 0);
    slow.release();
    held.release();
    memcached_converges(&ns, "m").await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_the_parent_cache_has_not_seen_written_is_still_corrected() {
    let ns = TestNamespace::new("stale-status-read").await.unwrap();
    let (proxy, host) = host_behind_proxy(&ns, "plugins", "memcached").await;
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    create(&memcacheds, &memcached_resource(), "m", json!({"size": 1})).await;
    memcached_converges(&ns, "m").await;
    let ready = memcacheds.get("m").await.unwrap().data["status"].clone();
    // The host's parent cache stops seeing changes: it keeps the ready status while the host
    // writes others. Deleting the Deployment takes the status through "no Deployment" and
    // "not observed yet" back to the ready one, which the stale cache holds already.
    let held = proxy.hold_watch(Matcher::any().path_contains("/memcacheds"));
    let deployments: Api<Deployment> = ns.api();
    let first = deployments.get("m").await.unwrap();
    let status_writes = Matcher::writes().path_contains("/memcacheds/m/status");
    let writes_before = proxy.forwarded(&status_writes);
    deployments
        .delete("m", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Deployment to be made again", TIMEOUT, || async {
        let again = deployments.get_opt("m").await?;
        Ok(again.filter(|d| d.uid() != first.uid()))
    })
    .await
    .unwrap();
    wait_for(
        "a status write for the missing Deployment",
        TIMEOUT,
        || async { Ok((proxy.forwarded(&status_writes) > writes_before).then_some(())) },
    )
    .await
    .unwrap();
    // Up to the conditions' transition times: the parent cache may have stopped before it saw
    // the ready status (its watch lags the API server), and a condition that turns True from
    // what the host's view holds is stamped with the time it does.
    let ready = without_transition_times(&ready);
    wait_for("the status to be the ready one again", TIMEOUT, || async {
        let live = memcacheds.get("m").await?;
        Ok((without_transition_times(&live.data["status"]) == ready).then_some(()))
    })
    .await
    .unwrap_or_else(|error| panic!("{error}: the host took its stale cache for the stored status"));
    held.release();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

/// `status` without its conditions' `lastTransitionTime`s.
fn without_transition_times(status: &serde_json::Value) -> serde_json::Value {
    let mut status = status.clone();
    if let Some(conditions) = status["conditions"].as_array_mut() {
        for condition in conditions.iter_mut().filter_map(|c| c.as_object_mut()) {
            condition.remove("lastTransitionTime");
        }
    }
    status
}
