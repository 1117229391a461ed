//! `operator-host diff` on the control plane: its report of a new Memcached version, made on
//! the live parents, matches what swapping that version in then writes, parent for parent
//! and field for field (a changed annotation; every child deleted; every child created); a
//! version diffed against itself changes nothing; the whole cluster is read when no namespace
//! is given.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{TestNamespace, cluster, wait_for};
use operator_host_tests::host::{Host, plugin_path, publish};
use operator_host_tests::memcached::{all_reconciled, memcached_resource};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const TIMEOUT: Duration = Duration::from_secs(90);
const PARENTS: usize = 3;
/// The label that picks this test's parents out of the whole cluster.
const RUN_LABEL: &str = "diff-test";

/// Runs `operator-host diff ARGS -o json`; its exit code and report.
fn diff(args: &[&str]) -> (i32, Value) {
    let output = std::process::Command::new(BINARY)
        .arg("diff")
        .args(args)
        .args(["-o", "json", "--kubeconfig"])
        .arg(&cluster().kubeconfig)
        .output()
        .expect("operator-host runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "diff {args:?} printed no JSON report ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap_or(-1), report)
}

/// The Memcached plugin's children in `ns`, whole, by `Kind/name`.
async fn children(ns: &TestNamespace) -> BTreeMap<String, Value> {
    let params = ListParams::default()
        .labels("app.kubernetes.io/managed-by=operator-host,operator-host.dev/plugin=memcached");
    let mut children = BTreeMap::new();
    for deployment in ns.api::<Deployment>().list(&params).await.unwrap() {
        let key = format!("Deployment/{}", deployment.name_any());
        children.insert(key, serde_json::to_value(deployment).unwrap());
    }
    for service in ns.api::<Service>().list(&params).await.unwrap() {
        let key = format!("Service/{}", service.name_any());
        children.insert(key, serde_json::to_value(service).unwrap());
    }
    children
}

/// What the host writes of a child: its labels, annotations and spec (not the annotations
/// the deployment controller writes, whenever it gets to them).
fn written(child: &Value) -> Value {
    let mut annotations = child["metadata"]["annotations"].clone();
    if let Some(map) = annotations.as_object_mut() {
        map.retain(|key, _| !key.starts_with("deployment.kubernetes.io/"));
    }
    json!([child["metadata"]["labels"], annotations, child["spec"]])
}

/// `Kind/name` of each child a parent's report lists under `field`.
fn listed(parent: &Value, field: &str) -> BTreeSet<String> {
    parent[field]
        .as_array()
        .into_iter()
        .flatten()
        .map(|child| format!("{}/{}", child["kind"], child["name"]).replace('"', ""))
        .collect()
}

/// The report's parents by name, each with the children it creates, changes and deletes.
fn predicted(report: &Value) -> BTreeMap<String, [BTreeSet<String>; 3]> {
    report["parents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|parent| {
            let name = parent["parent"].as_str().unwrap();
            let name = name.rsplit('/').next().unwrap().to_string();
            let sets = [
                listed(parent, "created"),
                listed(parent, "changed"),
                listed(parent, "deleted"),
            ];
            (name, sets)
        })
        .collect()
}

/// What happened to the children between `before` and `after`, by the parent they belong to
/// (Memcached names each child after its parent): created, changed (what the host writes),
/// deleted.
fn happened(
    before: &BTreeMap<String, Value>,
    after: &BTreeMap<String, Value>,
) -> BTreeMap<String, [BTreeSet<String>; 3]> {
    let mut by_parent: BTreeMap<String, [BTreeSet<String>; 3]> = BTreeMap::new();
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for key in keys {
        let parent = key.split('/').nth(1).unwrap().to_string();
        let which = match (before.get(key), after.get(key)) {
            (None, Some(_)) => 0,
            (Some(old), Some(new)) if written(old) != written(new) => 1,
            (Some(_), None) => 2,
            _ => continue,
        };
        by_parent.entry(parent).or_default()[which].insert(key.clone());
    }
    by_parent
}

/// Every field change the report predicts holds in `after` (new values) and held in
/// `before` (old ones).
fn check_fields(report: &Value, before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) {
    for parent in report["parents"].as_array().unwrap() {
        for child in parent["changed"].as_array().into_iter().flatten() {
            let key = format!("{}/{}", child["kind"], child["name"]).replace('"', "");
            for field in child["fields"].as_array().unwrap() {
                let pointer = field["pointer"].as_str().unwrap();
                let now = after[&key].pointer(pointer).unwrap_or(&Value::Null);
                let then = before[&key].pointer(pointer).unwrap_or(&Value::Null);
                assert!(
                    operator_host::plan::holds(now, &field["new"]),
                    "{key} {pointer}: predicted {}, the swap wrote {now}",
                    field["new"]
                );
                assert!(
                    operator_host::plan::holds(then, &field["old"]),
                    "{key} {pointer}: the report says it was {}, it was {then}",
                    field["old"]
                );
            }
        }
    }
}

/// Swaps `version` in as `file` and waits until the children settle as `settled` says.
async fn swap(
    host: &Host,
    version: &Path,
    file: &Path,
    ns: &TestNamespace,
    what: &str,
    settled: impl Fn(&BTreeMap<String, Value>) -> bool,
) -> BTreeMap<String, Value> {
    let replaced = host.reloads("replaced");
    publish(version, file);
    wait_for("the swap", TIMEOUT, || async {
        Ok((host.reloads("replaced") > replaced).then_some(()))
    })
    .await
    .unwrap();
    wait_for(what, TIMEOUT, || async {
        let now = children(ns).await;
        Ok(settled(&now).then_some(now))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_diff_of_a_version_is_what_swapping_it_in_writes() {
    let ns = TestNamespace::new("diff").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memcached.wasm");
    let v1 = plugin_path("test-plugins", "memcached-v1");
    let v2 = plugin_path("test-plugins", "memcached-v2");
    let no_children = plugin_path("test-plugins", "memcached-no-children");
    publish(&v1, &file);
    // The rollout gate and the prune guard would hold the release that deletes everything;
    // here the swap must write what it asks for, to be compared with the report.
    let policy = Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  pruneGuard:\n    maxPercent: 100\n  rollout:\n    strategy: Immediate\n",
        Path::new("diff-test-policy.yaml"),
    )
    .unwrap();
    let host = Host::start_dir_with_policy(dir.path().to_path_buf(), &[ns.name()], policy).await;
    let parents: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    for i in 0..PARENTS {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": format!("m-{i}"), "labels": {RUN_LABEL: ns.name()}},
            "spec": {"size": 1},
        }))
        .unwrap();
        parents
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    all_reconciled(&parents, PARENTS, TIMEOUT).await.unwrap();
    let before = wait_for("every parent's children", TIMEOUT, || async {
        let now = children(&ns).await;
        Ok((now.len() == 2 * PARENTS).then_some(now))
    })
    .await
    .unwrap();
    let v1_arg = v1.to_str().unwrap();
    let selector = format!("{RUN_LABEL}={}", ns.name());

    // Against itself, over all namespaces (the selector picks this test's parents).
    let (code, report) = diff(&[v1_arg, "--against", v1_arg, "--selector", &selector]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["summary"]["parents"], PARENTS, "{report:#}");
    assert_eq!(report["summary"]["children"], 2 * PARENTS, "{report:#}");
    assert_eq!(report["parents"], json!([]));

    // v2 annotates every child: predicted, then swapped in and compared.
    let (code, report) = diff(&[v2.to_str().unwrap(), "--against", v1_arg, "-n", ns.name()]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["summary"]["parentsChanged"], PARENTS, "{report:#}");
    let after = swap(&host, &v2, &file, &ns, "every child annotated", |now| {
        now.values().all(|child| {
            child["metadata"]["annotations"]["cache.example.com/plugin-variant"] == "v2"
        })
    })
    .await;
    assert_eq!(predicted(&report), happened(&before, &after), "{report:#}");
    check_fields(&report, &before, &after);

    // The release with a bug: every child deleted.
    let v2_arg = v2.to_str().unwrap();
    let (code, report) = diff(&[
        no_children.to_str().unwrap(),
        "--against",
        v2_arg,
        "-n",
        ns.name(),
    ]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        report["summary"]["deleted"],
        json!({"Deployment": PARENTS, "Service": PARENTS}),
        "{report:#}"
    );
    assert_eq!(
        report["summary"]["pruneGuardHolds"], true,
        "under the default policy: {report:#}"
    );
    let before = after;
    let after = swap(
        &host,
        &no_children,
        &file,
        &ns,
        "every child deleted",
        |now| now.is_empty(),
    )
    .await;
    assert_eq!(predicted(&report), happened(&before, &after), "{report:#}");

    // Back to v1: every child created.
    let (code, report) = diff(&[
        v1_arg,
        "--against",
        no_children.to_str().unwrap(),
        "-n",
        ns.name(),
    ]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        report["summary"]["created"],
        json!({"Deployment": PARENTS, "Service": PARENTS}),
        "{report:#}"
    );
    let before = after;
    let after = swap(&host, &v1, &file, &ns, "every child created", |now| {
        now.len() == 2 * PARENTS
    })
    .await;
    assert_eq!(predicted(&report), happened(&before, &after), "{report:#}");

    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_diff_that_cannot_be_made_says_why_and_exits_2() {
    // A plugin no OperatorPlugin of the other tests names.
    let staged = plugin_path("test-plugins", "staged");
    let output = std::process::Command::new(BINARY)
        .args(["diff", staged.to_str().unwrap(), "--kubeconfig"])
        .arg(&cluster().kubeconfig)
        .output()
        .expect("operator-host runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no OperatorPlugin named \"staged\"") && stderr.contains("--against"),
        "{stderr}"
    );
}
