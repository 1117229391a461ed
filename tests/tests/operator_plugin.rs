//! Plugins shipped through the cluster: an `OperatorPlugin` names an artifact in a real
//! registry on loopback; the host pulls, serves and swaps it (by digest, by tag, by a tag that
//! moves), keeps the previous version serving through a missing artifact and a registry
//! outage, and after a restart during the outage serves what it pulled before.
//!
//! OperatorPlugins are cluster-scoped and named as their plugin, so this file's scenario is
//! one test: another test of the same plugin name would be served by both hosts.

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use operator_host::plugin::Plugin;
use operator_host_tests::devcluster::{self, TestNamespace, wait_for};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::memcached::{create, memcached_resource, patch_spec};
use operator_host_tests::oci_registry::{TestRegistry, output_of};
use operator_host_tests::oracle::{Oracle, all_converge};
use operator_host_tests::process_host::{Launch, ProcessHost};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const BOUND: Duration = Duration::from_secs(90);

fn operator_plugins(client: kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operator-host.dev", "v1alpha1", "OperatorPlugin"),
        "operatorplugins",
    );
    Api::all_with(client, &resource)
}

/// `host push` of `plugin` to `reference`; the digest it printed.
fn push(plugin: &std::path::Path, reference: &str) -> String {
    let printed = output_of(
        std::process::Command::new(BINARY)
            .args(["push", "--plain-http"])
            .arg(plugin)
            .arg(reference),
    );
    printed.trim().rsplit('@').next().unwrap().to_string()
}

/// Waits until the resource's status says `digest` serves (or, with `pulled: false`, that
/// the last pull failed while `digest` still serves); returns the status.
async fn wait_status(api: &Api<DynamicObject>, digest: &str, pulled: bool, when: &str) -> Value {
    let condition = |status: &Value, kind: &str| {
        status["conditions"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == kind))
            .map(|c| c["status"].as_str().unwrap_or_default().to_string())
    };
    let last = std::sync::Mutex::new(Value::Null);
    wait_for(when, BOUND, || async {
        let status = api.get("memcached").await?.data["status"].clone();
        *last.lock().unwrap() = status.clone();
        let holds = status["digest"] == digest
            && condition(&status, "Serving").as_deref() == Some("True")
            && condition(&status, "Pulled").as_deref()
                == Some(if pulled { "True" } else { "False" });
        Ok(holds.then_some(status))
    })
    .await
    .unwrap_or_else(|e| panic!("{when}: {e}; the status: {}", last.lock().unwrap()))
}

async fn set_source(api: &Api<DynamicObject>, source: &str) {
    api.patch(
        "memcached",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": source}})),
    )
    .await
    .unwrap();
}

fn start_host(
    ns: &TestNamespace,
    plugins: &std::path::Path,
    store: &std::path::Path,
) -> ProcessHost {
    let store = store.to_str().unwrap();
    ProcessHost::start(&Launch {
        binary: BINARY.as_ref(),
        plugins,
        kubeconfig: &devcluster::cluster().kubeconfig,
        namespace: ns.name(),
        crash_after: None,
        metrics_addr: None,
        args: &["--plugins-from-cluster", "--plugin-store", store],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_plugin_is_pulled_swapped_and_kept_serving_through_registry_outages() {
    let mut registry = TestRegistry::start().await;
    let v1 = plugin_path("plugins", "memcached");
    let v2_dir = plugin_dir("test-plugins", "memcached-v2");
    let v2 = v2_dir.path().join("memcached.wasm");
    let v1_digest = push(&v1, &registry.reference("plugins/memcached:1"));
    let v2_digest = push(&v2, &registry.reference("plugins/memcached:2"));
    assert_ne!(v1_digest, v2_digest);
    let plugin_v1 = Plugin::load(&runtime(), &v1).unwrap();
    let plugin_v2 = Plugin::load(&runtime(), &v2).unwrap();

    let ns = TestNamespace::new("oplugin").await.unwrap();
    let empty_dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let host = start_host(&ns, empty_dir.path(), store.path());
    let api = operator_plugins(ns.client());
    // The host installs the CRD; the first create may come before it is served.
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operator-host.dev/v1alpha1",
        "kind": "OperatorPlugin",
        "metadata": {"name": "memcached"},
        "spec": {
            "source": registry.reference("plugins/memcached:1"),
            "plainHTTP": true,
            "pollInterval": "2s",
        },
    }))
    .unwrap();
    let _ = api.delete("memcached", &Default::default()).await;
    wait_for("the OperatorPlugin to be created", BOUND, || async {
        Ok(api.create(&PostParams::default(), &resource).await.ok())
    })
    .await
    .unwrap();
    let status = wait_status(&api, &v1_digest, true, "v1 serving").await;
    assert_eq!(status["plugin"], "memcached");
    assert_eq!(status["shortDigest"], v1_digest[7..19]);

    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let names: Vec<String> = (0..5).map(|i| format!("m-{i}")).collect();
    for name in &names {
        create(&parents, &memcached_resource(), name, json!({"size": 1})).await;
    }
    let oracle = |plugin| Oracle {
        client: ns.client(),
        plugin,
        namespace: ns.name(),
    };
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();
    let children_before = oracle(&plugin_v1).child_uids("m-0").await.unwrap();

    // A new version by digest: a hot swap, no child recreated.
    set_source(
        &api,
        &registry.reference(&format!("plugins/memcached@{v2_digest}")),
    )
    .await;
    wait_status(&api, &v2_digest, true, "v2 by digest").await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();
    assert_eq!(
        oracle(&plugin_v2).child_uids("m-0").await.unwrap(),
        children_before
    );

    // Back to v1 by a tag, which then moves to v2: picked up at the next poll.
    // (Each push stamps its time, so a push of the same plugin is another digest.)
    let stable = push(&v1, &registry.reference("plugins/memcached:stable"));
    set_source(&api, &registry.reference("plugins/memcached:stable")).await;
    wait_status(&api, &stable, true, "v1 by tag").await;
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();
    let stable = push(&v2, &registry.reference("plugins/memcached:stable"));
    wait_status(&api, &stable, true, "the moved tag").await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();

    // A missing artifact: refused, v2 keeps serving.
    set_source(&api, &registry.reference("plugins/memcached:missing")).await;
    let status = wait_status(&api, &stable, false, "a missing artifact").await;
    let pulled = status["conditions"].to_string();
    assert!(
        pulled.contains("PullFailed") && pulled.contains("keeps serving"),
        "{pulled}"
    );
    patch_spec(&parents, "m-1", json!({"size": 2})).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();

    // The registry goes down during a swap: v2 keeps serving.
    registry.stop().await;
    set_source(&api, &registry.reference("plugins/memcached:1")).await;
    wait_status(&api, &stable, false, "the registry down during a swap").await;
    patch_spec(&parents, "m-2", json!({"size": 2})).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();

    // A restart while the registry is still down serves what was pulled before.
    host.kill().await;
    let mut host = start_host(&ns, empty_dir.path(), store.path());
    patch_spec(&parents, "m-3", json!({"size": 2})).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "after a restart with the registry down: {e}\n{}",
                host.log_tail(40)
            )
        });
    host.assert_running("with the registry down").await;

    // The registry is back (empty): once v1 is pushed again, the source resolves.
    registry.restart().await;
    let again = push(&v1, &registry.reference("plugins/memcached:1"));
    wait_status(&api, &again, true, "the registry back").await;
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();

    api.delete("memcached", &Default::default()).await.unwrap();
    host.kill().await;
    ns.cleanup().await.unwrap();
}
