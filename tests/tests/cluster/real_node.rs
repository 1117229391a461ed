//! The devcluster's real node (`deploy/devcluster/node.sh`): containerd, runc and a kubelet of the
//! pinned release on this machine, attached to a cluster of this area's own
//! (`target/devcluster-realnode`). An image imported from an OCI archive runs in a hostNetwork
//! pod and in a pod on the node's bridge network with the Pod Security "restricted" settings
//! (non-root, read-only root filesystem, RuntimeDefault seccomp, an emptyDir) in a namespace
//! that enforces them; both reach Running, both reach the apiserver as in-cluster clients
//! (through the `kubernetes` Service IP), and their logs come back through the apiserver from
//! the kubelet.
//!
//! Needs root and `apt-get install -y --no-install-recommends containerd runc
//! containernetworking-plugins`: without them the tests fail saying so, they never skip.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{DeleteParams, LogParams, PostParams};
use kube::{Api, Client};
use operator_host_tests::devcluster::{self, IsolatedCluster, wait_for};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// This area's isolated cluster, the one the real node joins.
const ISOLATED: &str = "realnode";

/// The image `real_node_test_image` holds.
const TEST_IMAGE: &str = "localhost/devcluster/testpod:1";

/// From creating a pod to Running: the image is local and the sandbox a tiny pause.
const POD_TIMEOUT: Duration = Duration::from_secs(60);

/// The cluster with its real node, the test image imported once for both tests.
async fn cluster() -> IsolatedCluster {
    static IMPORTED: OnceCell<()> = OnceCell::const_new();
    let started = Instant::now();
    let cluster = devcluster::isolated_cluster_with_real_node(ISOLATED).await;
    IMPORTED
        .get_or_init(|| async {
            eprintln!(
                "isolated cluster and real node ready in {:?}; node.json: {}",
                started.elapsed(),
                std::fs::read_to_string(
                    devcluster::isolated_state_dir(ISOLATED).join("node/node.json")
                )
                .unwrap_or_default()
            );
            let archive = devcluster::real_node_test_image(&cluster);
            let t = Instant::now();
            let out = devcluster::real_node_import(&cluster, &archive)
                .await
                .unwrap_or_else(|e| panic!("importing {}: {e:#}", archive.display()));
            assert!(out.contains(TEST_IMAGE), "node.sh import said: {out}");
            eprintln!("imported {TEST_IMAGE} in {:?}", t.elapsed());
        })
        .await;
    cluster
}

/// A namespace of its own on the isolated cluster, with `labels`; waits for its ServiceAccount.
async fn namespace(client: &Client, prefix: &str, labels: Value) -> String {
    let name = devcluster::unique_name(prefix);
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
    )
    .await
    .unwrap();
    name
}

/// A pod of the test image on the real node: `spec` is merged into a spec that selects the
/// node and tolerates its taint.
fn pod(name: &str, spec: Value) -> Pod {
    let (selector, tolerations) = devcluster::real_node_placement();
    let mut base = json!({
        "nodeSelector": selector,
        "tolerations": tolerations,
        "terminationGracePeriodSeconds": 5,
    });
    base.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": base})).unwrap()
}

/// Creates the pod, waits until it is Running and its log has the line `testpod ready`;
/// returns the log and how long the pod took to be Running.
async fn run_and_read_log(pods: &Api<Pod>, pod: Pod) -> (Pod, String, Duration) {
    let name = pod.metadata.name.clone().unwrap();
    let created = Instant::now();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = wait_for(&format!("pod {name} Running"), POD_TIMEOUT, || async {
        let p = pods.get(&name).await?;
        let phase = p.status.as_ref().and_then(|s| s.phase.clone());
        anyhow::ensure!(
            phase.as_deref() != Some("Failed"),
            "pod failed: {:?}",
            p.status
        );
        Ok((phase.as_deref() == Some("Running")).then_some(p))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; events and node logs: target/devcluster-{ISOLATED}/logs"));
    let took = created.elapsed();
    let log = wait_for(
        &format!("the log of pod {name} through the apiserver"),
        Duration::from_secs(30),
        || async {
            let log = pods.logs(&name, &LogParams::default()).await?;
            Ok(log.contains("testpod ready").then_some(log))
        },
    )
    .await
    .unwrap();
    (running, log, took)
}

#[tokio::test]
async fn an_imported_image_runs_on_the_real_node_and_its_log_is_readable() {
    let cluster = cluster().await;
    let client = cluster.client().await.unwrap();

    let node = Api::<Node>::all(client.clone())
        .get(devcluster::real_node_name())
        .await
        .unwrap();
    let info = node.status.as_ref().unwrap().node_info.as_ref().unwrap();
    assert_eq!(
        info.kubelet_version,
        devcluster::pinned_kubernetes_version()
    );
    assert!(
        info.container_runtime_version.starts_with("containerd://"),
        "{info:?}"
    );
    let taints = node
        .spec
        .as_ref()
        .unwrap()
        .taints
        .clone()
        .unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "operator-host.dev/real-node" && t.effect == "NoSchedule"),
        "{taints:?}"
    );

    let ns = namespace(&client, "real-node-hostnet", json!({})).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let (running, log, took) = run_and_read_log(
        &pods,
        pod(
            "hostnet",
            json!({
                "hostNetwork": true,
                "containers": [{
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["-say", "hello from the real node", "-apiserver"],
                }],
            }),
        ),
    )
    .await;
    eprintln!("hostNetwork pod Running in {took:?}; log:\n{log}");
    assert_eq!(
        running.spec.as_ref().unwrap().node_name.as_deref(),
        Some(devcluster::real_node_name())
    );
    assert!(log.contains("hello from the real node"), "{log}");
    // In-cluster clients work unchanged: KUBERNETES_SERVICE_HOST is the Service IP, which the
    // node forwards to the apiserver; the service account token is accepted.
    assert!(
        log.lines()
            .any(|l| l.starts_with("testpod apiserver: 200 OK")
                && l.contains(&devcluster::pinned_kubernetes_version())),
        "{log}"
    );

    Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::background())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_pod_security_restricted_pod_with_an_empty_dir_runs_on_the_real_node() {
    let cluster = cluster().await;
    let client = cluster.client().await.unwrap();
    let ns = namespace(
        &client,
        "real-node-restricted",
        json!({"pod-security.kubernetes.io/enforce": "restricted"}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let (_, log, took) = run_and_read_log(
        &pods,
        pod(
            "restricted",
            json!({
                "securityContext": {
                    "runAsNonRoot": true,
                    "runAsUser": 65532,
                    "runAsGroup": 65532,
                    "fsGroup": 65532,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [{
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["-write", "/data", "-apiserver"],
                    "securityContext": {
                        "readOnlyRootFilesystem": true,
                        "allowPrivilegeEscalation": false,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }],
                "volumes": [{"name": "data", "emptyDir": {}}],
            }),
        ),
    )
    .await;
    eprintln!("restricted pod Running in {took:?}; log:\n{log}");
    assert!(log.contains("testpod uid=65532 gid=65532"), "{log}");
    assert!(
        log.contains("testpod write /: ") && log.contains("read-only file system"),
        "{log}"
    );
    assert!(log.contains("testpod write /data: ok"), "{log}");
    // From the bridge network too: the Service IP reaches the apiserver, as the host's
    // Deployment (restricted, so no hostNetwork) needs.
    assert!(
        log.lines()
            .any(|l| l.starts_with("testpod apiserver: 200 OK")),
        "{log}"
    );

    Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::background())
        .await
        .unwrap();
}
