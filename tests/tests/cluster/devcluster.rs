//! Checks that the local control plane behaves like a real cluster: version, nodes, controllers, CRDs, clean stop.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{self, TestNamespace, wait_for, wait_for_crd_established};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn version_endpoint_reports_the_pinned_kubernetes_release() {
    let client = devcluster::client().await;
    let pinned = devcluster::pinned_kubernetes_version();
    let info = client.apiserver_version().await.unwrap();
    assert_eq!(info.git_version, pinned);
    let minor = pinned.split('.').nth(1).unwrap();
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", minor));

    // The kubectl next to it is the same release (the system one is too old).
    let out = devcluster::kubectl()
        .args(["version", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clientVersion"]["gitVersion"], json!(pinned));
    assert_eq!(v["serverVersion"]["gitVersion"], json!(pinned));
}

#[tokio::test]
async fn fake_nodes_are_listed_and_ready() {
    let client = devcluster::client().await;
    let nodes = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    let ready: Vec<String> = nodes
        .items
        .iter()
        .filter(|n| {
            n.annotations()
                .get("kwok.x-k8s.io/node")
                .map(String::as_str)
                == Some("fake")
        })
        .filter(|n| node_is_ready(n))
        .map(|n| n.name_any())
        .collect();
    assert!(ready.len() >= 3, "ready fake nodes: {ready:?}");
}

#[tokio::test]
async fn deployment_with_three_replicas_gets_three_running_ready_pods() {
    let ns = TestNamespace::new("deployment_with_three_replicas_gets_three_running_ready_pods")
        .await
        .unwrap();
    let deployments: Api<Deployment> = ns.api();
    deployments
        .create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();

    let pods: Api<Pod> = ns.api();
    wait_for("3 running, ready pods", TIMEOUT, || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await?;
        let ready = list
            .items
            .iter()
            .filter(|p| pod_is_running_and_ready(p))
            .count();
        Ok((ready == 3 && list.items.len() == 3).then_some(()))
    })
    .await
    .unwrap();
    wait_for(
        "the Deployment to report 3 ready replicas",
        TIMEOUT,
        || async {
            let d = deployments.get("web").await?;
            let status = d.status.unwrap_or_default();
            Ok(
                (status.ready_replicas == Some(3) && status.available_replicas == Some(3))
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap();
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn deleting_a_deployment_garbage_collects_its_replicaset_and_pods() {
    let ns = TestNamespace::new("deleting_a_deployment_garbage_collects_its_replicaset_and_pods")
        .await
        .unwrap();
    let deployments: Api<Deployment> = ns.api();
    let replicasets: Api<ReplicaSet> = ns.api();
    let pods: Api<Pod> = ns.api();
    let created = deployments
        .create(&PostParams::default(), &deployment("gc", 3))
        .await
        .unwrap();
    let uid = created.uid().unwrap();

    // The ReplicaSet is owned by the Deployment, the pods by the ReplicaSet.
    let rs_uid = wait_for("a ReplicaSet owned by the Deployment", TIMEOUT, || async {
        let list = replicasets.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .find(|rs| {
                rs.owner_references()
                    .iter()
                    .any(|o| o.uid == uid && o.controller == Some(true))
            })
            .and_then(|rs| rs.uid()))
    })
    .await
    .unwrap();
    wait_for("3 pods owned by the ReplicaSet", TIMEOUT, || async {
        let list = pods.list(&ListParams::default().labels("app=gc")).await?;
        let owned = list
            .items
            .iter()
            .filter(|p| p.owner_references().iter().any(|o| o.uid == rs_uid))
            .count();
        Ok((owned == 3).then_some(()))
    })
    .await
    .unwrap();

    deployments
        .delete("gc", &DeleteParams::background())
        .await
        .unwrap();
    wait_for(
        "the ReplicaSet and pods to be garbage-collected",
        TIMEOUT,
        || async {
            let rs = replicasets.list(&ListParams::default()).await?.items.len();
            let p = pods.list(&ListParams::default()).await?.items.len();
            Ok((rs == 0 && p == 0).then_some(()))
        },
    )
    .await
    .unwrap();
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn custom_resource_definition_becomes_established_and_its_objects_can_be_watched() {
    let ns = TestNamespace::new("crd_becomes_established_and_watchable")
        .await
        .unwrap();
    let client = ns.client();
    // CRDs are cluster-scoped: a group of this test's own keeps runs apart.
    let group = format!("{}.devcluster.test", ns.name());
    let crd_name = format!("widgets.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}
                }}
            }]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    wait_for_crd_established(&crds, &crd_name, TIMEOUT)
        .await
        .unwrap();

    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), &resource);
    // Watch first, then create: the object must arrive as a watch event.
    // A watch on a just-established CRD can be answered 410 Gone while the
    // API server's cache catches up: the watcher re-lists after such errors,
    // so they are skipped (with backoff) rather than failing the test.
    let mut events = watcher(widgets.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut widget = DynamicObject::new("first", &resource).within(ns.name());
    widget.data = json!({"spec": {"size": 3}});

    let seen = tokio::time::timeout(TIMEOUT, async {
        let mut created = false;
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    eprintln!("watch error, the watcher retries: {error}");
                    continue;
                }
            };
            match event {
                // The initial (empty) list is done: now create the object.
                watcher::Event::InitDone if !created => {
                    widgets.create(&PostParams::default(), &widget).await?;
                    created = true;
                }
                watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)
                    if obj.name_any() == "first" =>
                {
                    return anyhow::Ok(obj);
                }
                _ => {}
            }
        }
        anyhow::bail!("watch ended")
    })
    .await
    .expect("timed out watching for the Widget")
    .unwrap();
    assert_eq!(seen.data["spec"]["size"], json!(3));

    crds.delete(&crd_name, &DeleteParams::default())
        .await
        .unwrap();
    ns.cleanup().await.unwrap();
}

// The two tests below start clusters of their own (in temp dirs, on other
// ports) so they never stop the shared one; one at a time to spare the CPU.
static OWN_CLUSTER: Mutex<()> = Mutex::new(());

#[test]
fn stopping_a_devcluster_leaves_no_process_behind() {
    let _serial = OWN_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    devcluster::start_devcluster(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let tree = cluster_processes(dir.path());
    assert!(
        tree.len() >= 5,
        "devcluster and its 4 children expected, found {tree:?}"
    );

    let out = devcluster::stop_devcluster(dir.path()).unwrap();
    assert!(out.status.success(), "stop.sh: {out:?}");
    // stop.sh returns only once everything is gone: check without waiting.
    let left: Vec<_> = tree.iter().filter(|(pid, _)| is_running(**pid)).collect();
    assert!(left.is_empty(), "still running after stop.sh: {left:?}");
    assert!(!dir.path().join("kubeconfig").exists());
}

#[test]
fn killing_a_devcluster_with_sigkill_kills_its_children() {
    let _serial = OWN_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    devcluster::start_devcluster(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let tree = cluster_processes(dir.path());
    assert!(
        tree.len() >= 5,
        "devcluster and its 4 children expected, found {tree:?}"
    );

    let pid = read_pid(dir.path());
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Pdeathsig delivers SIGKILL to the children as the parent dies; allow
    // the kernel a moment to tear them down.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<_> = tree.iter().filter(|(p, _)| is_running(**p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after SIGKILL: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Nothing to stop any more; stop.sh must cope with the stale state.
    let out = devcluster::stop_devcluster(dir.path()).unwrap();
    assert!(out.status.success(), "stop.sh: {out:?}");
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/none:1"}]}
            }
        }
    }))
    .unwrap()
}

fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_is_running_and_ready(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn read_pid(dir: &Path) -> u32 {
    let text = std::fs::read_to_string(dir.join("devcluster.pid")).unwrap();
    text.trim().parse().unwrap()
}

/// The devcluster process of `dir` and all its descendants, pid -> command.
fn cluster_processes(dir: &Path) -> BTreeMap<u32, String> {
    let root = read_pid(dir);
    let mut parents = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some((_, ppid)) = proc_stat(pid) {
            parents.insert(pid, ppid);
        }
    }
    let mut tree = BTreeMap::new();
    tree.insert(root, cmdline(root));
    let mut grew = true;
    while grew {
        grew = false;
        for (&pid, &ppid) in &parents {
            if tree.contains_key(&ppid) && !tree.contains_key(&pid) {
                tree.insert(pid, cmdline(pid));
                grew = true;
            }
        }
    }
    tree
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// (state, ppid) from /proc/<pid>/stat; the command name may hold spaces
/// and parentheses, so parse after the last ')'.
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// A zombie has exited; only its parent has not reaped it yet.
fn is_running(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}
