//! The run loop against the real API server: apply, status, scaling, drift, deletion, pruning, ownership; the Memcached scenarios with the plugin in every guest language.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Service};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{TestNamespace, kubectl, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::hostile::attack_resource;
use operator_host_tests::memcached::{
    condition, create, memcached_resource, patch_spec, reconciled_condition,
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a scenario against the Memcached plugin of every guest language: the Rust one
/// (`target/plugins`) and the same operator in Python (`target/plugins-python`), JavaScript
/// (`target/plugins-js`) and Go (`target/plugins-go`), each a test of its own
/// (`SCENARIO::rust`, `SCENARIO::python`, `SCENARIO::javascript`, `SCENARIO::go`).
macro_rules! in_every_language {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test]
            async fn rust() {
                super::$scenario("plugins").await
            }

            #[tokio::test]
            async fn python() {
                super::$scenario("plugins-python").await
            }

            #[tokio::test]
            async fn javascript() {
                super::$scenario("plugins-js").await
            }

            #[tokio::test]
            async fn go() {
                super::$scenario("plugins-go").await
            }
        }
    };
}

/// A host serving the Memcached plugin of `target/<plugins_dir>` in a namespace of its own.
async fn memcached_host(
    test: &str,
    plugins_dir: &str,
) -> (TestNamespace, Host, Api<DynamicObject>) {
    let ns = TestNamespace::new(test).await.unwrap();
    let host = Host::start(plugin_path(plugins_dir, "memcached"), ns.name()).await;
    let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    (ns, host, api)
}

/// Waits until the CR's status says `ready` pods are ready for its current generation.
async fn wait_ready(api: &Api<DynamicObject>, name: &str, ready: i64) {
    wait_for(
        &format!("{name} to report {ready} ready"),
        TIMEOUT,
        || async {
            let cr = api.get(name).await?;
            let status = &cr.data["status"];
            let available = status["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
                .map(|c| c["status"] == "True")
                .unwrap_or(false);
            Ok((status["readyReplicas"] == ready
                && status["observedGeneration"].as_i64() == cr.metadata.generation
                && available)
                .then_some(()))
        },
    )
    .await
    .unwrap();
}

async fn deployment_replicas(deployments: &Api<Deployment>, name: &str) -> Option<i32> {
    deployments
        .get_opt(name)
        .await
        .ok()
        .flatten()?
        .spec?
        .replicas
}

in_every_language!(a_new_cr_gets_a_deployment_and_service_owned_and_labelled_by_the_host);
async fn a_new_cr_gets_a_deployment_and_service_owned_and_labelled_by_the_host(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("create", plugins_dir).await;
    let cr = create(&api, &memcached_resource(), "cache", json!({"size": 2})).await;
    let deployments: Api<Deployment> = ns.api();
    let deployment = wait_for("the Deployment", Duration::from_secs(10), || async {
        Ok(deployments.get_opt("cache").await?)
    })
    .await
    .unwrap();
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    let owner = &deployment.owner_references()[0];
    assert_eq!(Some(&owner.uid), cr.metadata.uid.as_ref());
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    let labels = deployment.labels();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "operator-host");
    assert_eq!(labels["operator-host.dev/plugin"], "memcached");
    assert_eq!(
        Some(&labels["operator-host.dev/parent-uid"]),
        cr.metadata.uid.as_ref()
    );
    let service = ns.api::<Service>().get("cache").await.unwrap();
    assert_eq!(
        Some(&service.owner_references()[0].uid),
        cr.metadata.uid.as_ref()
    );
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 11211);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

in_every_language!(status_reports_ready_pods_and_the_observed_generation);
async fn status_reports_ready_pods_and_the_observed_generation(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("status", plugins_dir).await;
    create(&api, &memcached_resource(), "cache", json!({"size": 2})).await;
    wait_ready(&api, "cache", 2).await;
    let cr = api.get("cache").await.unwrap();
    assert_eq!(reconciled_condition(&cr)["status"], "True");
    assert_eq!(host.reconciles("InvalidSpec"), 0);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

in_every_language!(scaling_up_and_down_is_followed_by_the_deployment_and_the_status);
async fn scaling_up_and_down_is_followed_by_the_deployment_and_the_status(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("scale", plugins_dir).await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 1})).await;
    wait_ready(&api, "cache", 1).await;
    for size in [3, 1] {
        patch_spec(&api, "cache", json!({"size": size})).await;
        wait_ready(&api, "cache", size).await;
        assert_eq!(
            deployment_replicas(&deployments, "cache").await,
            Some(size as i32)
        );
    }
    host.stop().await;
    ns.cleanup().await.unwrap();
}

in_every_language!(a_hand_edit_of_a_managed_field_is_put_back);
async fn a_hand_edit_of_a_managed_field_is_put_back(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("drift", plugins_dir).await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 2})).await;
    wait_ready(&api, "cache", 2).await;
    deployments
        .patch(
            "cache",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cache"},
                "spec": {"replicas": 5},
            })),
        )
        .await
        .unwrap();
    wait_for("the replicas to be put back", TIMEOUT, || async {
        Ok((deployment_replicas(&deployments, "cache").await == Some(2)).then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

/// A reconcile whose plan is what was applied last, onto children that still hold it,
/// writes no child (the Deployment controller's status updates reconcile the parent over and
/// over); a hand edit after that is still put back.
#[tokio::test]
async fn a_reconcile_that_changes_nothing_applies_no_child_and_drift_is_still_put_back() {
    let (ns, host, api) = memcached_host("noop", "plugins").await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 2})).await;
    wait_ready(&api, "cache", 2).await;
    let (applied, _) = host.applies();
    // Reconciles that change nothing: an annotation of the parent (the plugin ignores it).
    for round in 0..3 {
        let skipped_before = host.applies().1;
        api.patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": round.to_string()}}})),
        )
        .await
        .unwrap();
        wait_for("a reconcile that skips both children", TIMEOUT, || async {
            Ok((host.applies().1 >= skipped_before + 2).then_some(()))
        })
        .await
        .unwrap();
    }
    assert_eq!(
        host.applies().0,
        applied,
        "a reconcile that changed nothing applied"
    );
    deployments
        .patch(
            "cache",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cache"},
                "spec": {"replicas": 5},
            })),
        )
        .await
        .unwrap();
    wait_for("the replicas to be put back", TIMEOUT, || async {
        Ok((deployment_replicas(&deployments, "cache").await == Some(2)).then_some(()))
    })
    .await
    .unwrap();
    assert!(host.applies().0 > applied);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_deleted_deployment_is_recreated() {
    let (ns, host, api) = memcached_host("recreate", "plugins").await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 1})).await;
    wait_ready(&api, "cache", 1).await;
    let old_uid = deployments.get("cache").await.unwrap().uid();
    deployments
        .delete("cache", &DeleteParams::background())
        .await
        .unwrap();
    wait_for("a new Deployment", TIMEOUT, || async {
        let current = deployments.get_opt("cache").await?;
        Ok(current.filter(|d| d.uid() != old_uid && d.metadata.deletion_timestamp.is_none()))
    })
    .await
    .unwrap();
    wait_ready(&api, "cache", 1).await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}

in_every_language!(deleting_the_cr_garbage_collects_its_children);
async fn deleting_the_cr_garbage_collects_its_children(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("gc", plugins_dir).await;
    let deployments: Api<Deployment> = ns.api();
    let services: Api<Service> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 1})).await;
    wait_ready(&api, "cache", 1).await;
    api.delete("cache", &DeleteParams::background())
        .await
        .unwrap();
    wait_for("the children to be collected", TIMEOUT, || async {
        let gone = deployments.get_opt("cache").await?.is_none()
            && services.get_opt("cache").await?.is_none();
        Ok(gone.then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn two_crs_in_one_namespace_never_touch_each_others_children_or_pods() {
    let (ns, host, api) = memcached_host("two", "plugins").await;
    let pods: Api<Pod> = ns.api();
    create(&api, &memcached_resource(), "a", json!({"size": 1})).await;
    create(&api, &memcached_resource(), "b", json!({"size": 2})).await;
    wait_ready(&api, "a", 1).await;
    wait_ready(&api, "b", 2).await;
    let count = |instance: &'static str| {
        let pods = pods.clone();
        async move {
            let selector = format!("app.kubernetes.io/instance={instance}");
            pods.list(&ListParams::default().labels(&selector))
                .await
                .unwrap()
                .items
                .len()
        }
    };
    assert_eq!((count("a").await, count("b").await), (1, 2));
    let b_uid = ns.api::<Deployment>().get("b").await.unwrap().uid();
    api.delete("a", &DeleteParams::background()).await.unwrap();
    wait_for("a's pods to go", TIMEOUT, || async {
        Ok((count("a").await == 0).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(count("b").await, 2);
    assert_eq!(ns.api::<Deployment>().get("b").await.unwrap().uid(), b_uid);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

in_every_language!(an_invalid_spec_is_reported_and_leaves_the_children_as_they_were);
async fn an_invalid_spec_is_reported_and_leaves_the_children_as_they_were(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("invalid", plugins_dir).await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 1})).await;
    wait_ready(&api, "cache", 1).await;
    let before = deployments.get("cache").await.unwrap();
    // The CRD schema accepts any string; the plugin rejects an image with whitespace.
    patch_spec(&api, "cache", json!({"image": "not an image"})).await;
    let reconciled = wait_for("Reconciled=False", TIMEOUT, || async {
        let condition = reconciled_condition(&api.get("cache").await?);
        Ok((condition["status"] == "False").then_some(condition))
    })
    .await
    .unwrap();
    assert_eq!(reconciled["reason"], "InvalidSpec");
    assert!(
        reconciled["message"]
            .as_str()
            .unwrap()
            .contains("spec.image"),
        "{reconciled}"
    );
    // The plugin's Available was about the previous spec: it is not claimed of this one.
    let available = condition(&api.get("cache").await.unwrap(), "Available");
    assert_eq!(available["status"], "Unknown", "{available}");
    assert_eq!(available["reason"], "InvalidSpec", "{available}");
    let events: Api<Event> = ns.api();
    let warnings = events
        .list(&ListParams::default().fields("involvedObject.name=cache,type=Warning"))
        .await
        .unwrap();
    assert!(
        warnings
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("InvalidSpec"))
    );
    let after = deployments.get("cache").await.unwrap();
    assert_eq!(after.uid(), before.uid());
    assert_eq!(after.spec, before.spec);
    assert!(
        ns.api::<Service>()
            .get_opt("cache")
            .await
            .unwrap()
            .is_some()
    );
    // A valid spec again: the plugin's conditions are its own again.
    patch_spec(&api, "cache", json!({"image": null})).await;
    wait_ready(&api, "cache", 1).await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_child_no_longer_desired_is_pruned_and_an_unowned_namesake_is_left_alone() {
    let ns = TestNamespace::new("prune").await.unwrap();
    let host = Host::start(plugin_path("test-plugins", "hostile"), ns.name()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    let config_maps: Api<ConfigMap> = ns.api();

    create(&api, &attack_resource(), "x", json!({"attack": "none"})).await;
    wait_for("ConfigMap x", TIMEOUT, || async {
        Ok(config_maps.get_opt("x").await?)
    })
    .await
    .unwrap();
    patch_spec(&api, "x", json!({"attack": "many-children", "count": 0})).await;
    wait_for("ConfigMap x to be pruned", TIMEOUT, || async {
        Ok(config_maps.get_opt("x").await?.is_none().then_some(()))
    })
    .await
    .unwrap();

    let unowned: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "y-1"}, "data": {"owner": "a human"}
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &unowned)
        .await
        .unwrap();
    create(
        &api,
        &attack_resource(),
        "y",
        json!({"attack": "many-children", "count": 2}),
    )
    .await;
    let condition = wait_for("Reconciled=False on y", TIMEOUT, || async {
        let condition = reconciled_condition(&api.get("y").await?);
        Ok((condition["status"] == "False").then_some(condition))
    })
    .await
    .unwrap();
    assert_eq!(condition["reason"], "ChildNotOwned", "{condition}");
    let namesake = config_maps.get("y-1").await.unwrap();
    assert!(namesake.owner_references().is_empty());
    assert!(namesake.labels().is_empty());
    assert_eq!(namesake.data.unwrap()["owner"], "a human");
    // Attacks carry the host's finalizer: delete them while the host runs.
    for name in ["x", "y"] {
        api.delete(name, &DeleteParams::background()).await.unwrap();
    }
    wait_for("the Attacks to be finalized", TIMEOUT, || async {
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

in_every_language!(kubectl_get_shows_the_printer_columns_the_plugin_declares);
async fn kubectl_get_shows_the_printer_columns_the_plugin_declares(plugins_dir: &str) {
    let (ns, host, api) = memcached_host("kubectl", plugins_dir).await;
    create(&api, &memcached_resource(), "cache", json!({"size": 2})).await;
    wait_ready(&api, "cache", 2).await;
    let output = kubectl()
        .args(["get", "memcached", "-n", ns.name()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = table.lines();
    let header: Vec<_> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "READY", "AVAILABLE", "AGE"]);
    let row: Vec<_> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["cache", "2", "2", "True"]);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_plugin_that_needs_finalize_holds_deletion_until_it_is_done() {
    let ns = TestNamespace::new("finalize").await.unwrap();
    let host = Host::start(plugin_path("test-plugins", "hostile"), ns.name()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    create(
        &api,
        &attack_resource(),
        "f",
        json!({"attack": "hold-finalizer"}),
    )
    .await;
    wait_for("the host's finalizer", TIMEOUT, || async {
        let finalizers = api.get("f").await?.finalizers().to_vec();
        Ok(finalizers
            .contains(&"operator-host.dev/finalize".to_string())
            .then_some(()))
    })
    .await
    .unwrap();
    api.delete("f", &DeleteParams::background()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = api.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    // The plugin reports done once the spec no longer asks it to hold.
    patch_spec(&api, "f", json!({"attack": "none"})).await;
    wait_for("the Attack to be deleted", TIMEOUT, || async {
        Ok(api.get_opt("f").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn only_the_namespaces_given_are_reconciled() {
    let served = [
        TestNamespace::new("ns-served-a").await.unwrap(),
        TestNamespace::new("ns-served-b").await.unwrap(),
    ];
    let unserved = TestNamespace::new("ns-unserved").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_path("plugins", "memcached"),
        dir.path().join("memcached.wasm"),
    )
    .unwrap();
    let host = Host::start_dir(
        dir.path().to_path_buf(),
        &[served[0].name(), served[1].name()],
    )
    .await;
    for ns in served.iter().chain([&unserved]) {
        let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
        create(&api, &memcached_resource(), "cache", json!({"size": 0})).await;
    }
    for ns in &served {
        let deployments: Api<Deployment> = ns.api();
        wait_for(
            &format!("the Deployment in {}", ns.name()),
            TIMEOUT,
            || async { Ok(deployments.get_opt("cache").await?) },
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        unserved
            .api::<Deployment>()
            .get_opt("cache")
            .await
            .unwrap()
            .is_none(),
        "a namespace not given to --namespace is left alone"
    );
    host.stop().await;
    for ns in served.into_iter().chain([unserved]) {
        ns.cleanup().await.unwrap();
    }
}

/// Backoff is per parent, not per name: a parent deleted after many failures and created
/// again under the same name starts at the first step (1 s) again.
#[tokio::test]
async fn a_parent_recreated_under_the_same_name_does_not_inherit_the_old_ones_backoff() {
    let ns = TestNamespace::new("fresh-backoff").await.unwrap();
    let host = Host::start(plugin_path("test-plugins", "hostile"), ns.name()).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    let failing = json!({"attack": "panic"});
    create(&api, &attack_resource(), "a", failing.clone()).await;
    // Failures at 0, 1, 3, 7 and 15 s: the next retry would come 16 s later.
    wait_for("five failures", TIMEOUT, || async {
        Ok((host.reconciles("PluginTrap") >= 5).then_some(()))
    })
    .await
    .unwrap();
    api.delete("a", &DeleteParams::background()).await.unwrap();
    wait_for("the first Attack to be gone", TIMEOUT, || async {
        Ok(api.get_opt("a").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    let before = host.reconciles("PluginTrap");
    create(&api, &attack_resource(), "a", failing).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    // Fresh: failures at 0, 1 and 3 s; inherited, the first retry would be 16 s or more away.
    let failures = host.reconciles("PluginTrap") - before;
    assert!(failures >= 3, "{failures} failures in 6 s");
    api.delete("a", &DeleteParams::background()).await.unwrap();
    wait_for("the second Attack to be gone", TIMEOUT, || async {
        Ok(api.get_opt("a").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}
