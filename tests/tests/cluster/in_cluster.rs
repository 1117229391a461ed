//! The install manifests for real: `kubectl apply -k` of `deploy/install` (its PVC overlay: the
//! real node's containerd 1.6 cannot mount image volumes) on a cluster of this area's own with
//! the devcluster's real node, running the host image `make image` builds. Two leader-elected
//! pods become Ready, one holds the Lease, a Memcached CR converges; deleting the leader pod
//! (SIGTERM) and SIGKILLing the leader's process each hand the Lease to the other pod, which
//! converges an edit of the CR. Then the sharded overlay as shipped (with the PVC overlay's
//! plugin volume): three hosts serving every namespace share the parents, which converge.
//!
//! The base itself, with its image volume, needs containerd 2 (image volumes); the real node
//! has Debian bookworm's 1.6, so the base's flags are run through the PVC overlay, which
//! changes nothing but that volume.
//!
//! Needs what the real node needs (root, `apt-get install -y --no-install-recommends containerd
//! runc containernetworking-plugins`) and what `make image` needs (the musl target, musl-gcc).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use operator_host::plugin::Plugin;
use operator_host::shard::SHARD_LABEL;
use operator_host_tests::devcluster::{
    self, Cluster, real_node_import, real_node_placement, repo_root, wait_for,
};
use operator_host_tests::host::runtime;
use operator_host_tests::memcached::{create, custom_resource, memcached_resource, patch_spec};
use operator_host_tests::oracle::{Oracle, all_converge};
use serde_json::json;

/// This area's isolated cluster, the one its real node joins.
const ISOLATED: &str = "incluster";
const NAMESPACE: &str = "operator-host";
const TIMEOUT: Duration = Duration::from_secs(120);
/// The hosts' lease duration (the manifests keep the default).
const LEASE: Duration = Duration::from_secs(15);

/// Runs `kubectl ARGS` against `cluster`; panics with its output unless it succeeds.
fn kubectl(cluster: &Cluster, args: &[&str]) -> String {
    let output = Command::new(devcluster::kubectl_path())
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success(),
        "kubectl {args:?}: {stdout}{stderr}"
    );
    stdout.into_owned()
}

/// Builds both images (`deploy/image/build.sh`) into `out`.
fn build_images(out: &Path) {
    let output = Command::new(repo_root().join("deploy/image/build.sh"))
        .args(["memcached", "mysql"])
        .env("IMAGE_OUT", out)
        .output()
        .expect("deploy/image/build.sh runs");
    assert!(
        output.status.success(),
        "deploy/image/build.sh: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An overlay (in `dir`, a directory of the repository's `target/`) of the PVC overlay that puts
/// the host pods on the real node.
fn real_node_overlay(dir: &Path) {
    // kustomize takes only relative paths to other kustomizations.
    real_node_overlay_of(dir, "../../deploy/install/overlays/pvc", &[], &[]);
}

/// An overlay of the sharded overlay as shipped, with the PVC overlay's plugin volume (the real
/// node's containerd 1.6 cannot mount the base's image volume), on the real node.
fn real_node_sharded_overlay(dir: &Path) {
    let pvc = repo_root().join("deploy/install/overlays/pvc");
    for file in ["pvc.yaml", "plugins-volume.yaml"] {
        std::fs::copy(pvc.join(file), dir.join(file)).unwrap();
    }
    real_node_overlay_of(
        dir,
        "../../deploy/install/overlays/sharded",
        &["pvc.yaml"],
        &["plugins-volume.yaml"],
    );
}

/// Writes a kustomization in `dir` of `base` (relative to `dir`) and `resources`, patched with
/// `patches` and the real node's placement.
fn real_node_overlay_of(dir: &Path, base: &str, resources: &[&str], patches: &[&str]) {
    let (selector, tolerations) = real_node_placement();
    let patch = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "operator-host", "namespace": NAMESPACE},
        "spec": {"template": {"spec": {
            "nodeSelector": selector,
            "tolerations": tolerations,
        }}},
    });
    std::fs::write(
        dir.join("real-node.yaml"),
        serde_yaml::to_string(&patch).unwrap(),
    )
    .unwrap();
    let list =
        |items: Vec<&str>| -> String { items.iter().map(|item| format!("  - {item}\n")).collect() };
    let resources = list(
        [base]
            .into_iter()
            .chain(resources.iter().copied())
            .collect(),
    );
    let patches: String = patches
        .iter()
        .chain(&["real-node.yaml"])
        .map(|path| format!("  - path: {path}\n"))
        .collect();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}patches:\n{patches}"
        ),
    )
    .unwrap();
}

/// Copies the bundled plugins into the claim's volume (a hostPath volume of the devcluster's
/// provisioner, on this machine), as the plugin image lays them out: `plugins/*.wasm`.
async fn publish_plugins(client: &Client) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NAMESPACE);
    let volume = wait_for("the plugins claim to be bound", TIMEOUT, || async {
        let claim = claims.get("operator-host-plugins").await?;
        Ok(claim.spec.and_then(|s| s.volume_name))
    })
    .await
    .unwrap();
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .unwrap();
    let path = volume
        .spec
        .and_then(|s| s.host_path)
        .map(|h| h.path)
        .expect("a hostPath volume");
    let plugins = Path::new(&path).join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for plugin in ["memcached", "mysql"] {
        let staged = plugins.join(format!(".{plugin}.wasm"));
        std::fs::copy(
            repo_root().join(format!("target/plugins/{plugin}.wasm")),
            &staged,
        )
        .unwrap();
        std::fs::rename(&staged, plugins.join(format!("{plugin}.wasm"))).unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    for dir in [Path::new(&path), plugins.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// The Lease's holder identity (`<pod>_<pid>`).
async fn holder(client: &Client) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get_opt("operator-host")
        .await
        .ok()??;
    lease.spec?.holder_identity
}

/// The pod part of a holder identity.
fn pod_of(holder: &str) -> String {
    holder.split('_').next().unwrap_or(holder).to_string()
}

/// The pod of the Lease's holder.
async fn leader(client: &Client) -> Option<String> {
    Some(pod_of(&holder(client).await?))
}

/// Waits until the Lease is held by another process than the holder `previous` (a restarted
/// container in the same pod is another process, and may win the expired Lease); returns the
/// new holder's pod and how long it took from `since`.
async fn new_leader(
    client: &Client,
    previous: &str,
    since: Instant,
    bound: Duration,
) -> (String, Duration) {
    let holder = wait_for("another process to hold the Lease", bound, || async {
        Ok(holder(client).await.filter(|h| h != previous))
    })
    .await
    .unwrap();
    (pod_of(&holder), since.elapsed())
}

async fn two_ready_pods(client: &Client) {
    ready_pods(client, 2).await;
}

async fn ready_pods(client: &Client, count: i32) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(&format!("{count} ready host pods"), TIMEOUT, || async {
        let deployment = deployments.get("operator-host").await?;
        let status = deployment.status.unwrap_or_default();
        let ready = status.ready_replicas == Some(count)
            && status.updated_replicas == Some(count)
            && status.replicas == Some(count);
        Ok(ready.then_some(()))
    })
    .await
    .unwrap();
}

/// The pid, on this machine, of the host process in pod `pod` (its environment names the pod).
fn host_pid(pod: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            if !cmdline.starts_with(b"/operator-host\0run") {
                return None;
            }
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ
                .split(|b| *b == 0)
                .any(|var| var == format!("POD_NAME={pod}").as_bytes())
                .then_some(pid)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifests_run_on_a_real_node_fail_over_and_shard() {
    let cluster = devcluster::isolated_cluster_with_real_node(ISOLATED).await;
    let client = cluster.client().await.unwrap();
    let images = tempfile::tempdir().unwrap();
    build_images(images.path());
    real_node_import(&cluster, &images.path().join("operator-host.oci.tar"))
        .await
        .unwrap();
    let overlay = tempfile::tempdir_in(repo_root().join("target")).unwrap();
    real_node_overlay(overlay.path());
    let started = Instant::now();
    kubectl(
        &cluster,
        &["apply", "-k", &overlay.path().to_string_lossy()],
    );
    publish_plugins(&client).await;
    two_ready_pods(&client).await;
    let first = wait_for("a pod to hold the Lease", TIMEOUT, || async {
        Ok(leader(&client).await)
    })
    .await
    .unwrap();
    println!(
        "in cluster: 2 pods ready and {first} leading {:?} after kubectl apply -k",
        started.elapsed()
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let on_node = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=operator-host"))
        .await
        .unwrap();
    for pod in &on_node.items {
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some(devcluster::real_node_name()),
            "{} is not on the real node",
            pod.name_any()
        );
    }

    // The leader installed the CRD; a Memcached CR converges.
    let ns = "default";
    devcluster::wait_for_crd_established(
        &Api::all(client.clone()),
        "memcacheds.cache.example.com",
        TIMEOUT,
    )
    .await
    .unwrap();
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &memcached_resource());
    create(
        &memcacheds,
        &memcached_resource(),
        "sample",
        json!({"size": 1}),
    )
    .await;
    let plugin = Plugin::load(
        &runtime(),
        &repo_root().join("target/plugins/memcached.wasm"),
    )
    .unwrap();
    let oracle = Oracle {
        client: client.clone(),
        plugin: &plugin,
        namespace: ns,
    };
    oracle.converges("sample", TIMEOUT).await.unwrap();
    // The API server calls the plugin's webhooks through the Service in front of the pods.
    webhooks_refuse_and_default(&memcacheds, "leader-elected").await;

    // SIGTERM: the Deployment's pod is deleted; the other takes over within 3 s.
    let first_holder = holder(&client).await.expect("the Lease has a holder");
    let deleted = Instant::now();
    pods.delete(&first, &DeleteParams::default()).await.unwrap();
    let (second, took) = new_leader(&client, &first_holder, deleted, Duration::from_secs(10)).await;
    println!("in cluster: pod {first} deleted, {second} leads {took:?} later");
    assert!(
        took <= Duration::from_secs(3),
        "takeover after SIGTERM took {took:?}"
    );
    patch_spec(&memcacheds, "sample", json!({"size": 2})).await;
    oracle.converges("sample", TIMEOUT).await.unwrap();
    two_ready_pods(&client).await;

    // SIGKILL of the leader's process: another process (the other pod's, or the killed
    // container restarted by the kubelet) takes over once the lease expires.
    let pid = host_pid(&second).unwrap_or_else(|| panic!("the host process of pod {second}"));
    let second_holder = holder(&client).await.expect("the Lease has a holder");
    let killed = Instant::now();
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (third, took) = new_leader(
        &client,
        &second_holder,
        killed,
        LEASE + Duration::from_secs(10),
    )
    .await;
    println!("in cluster: the host of pod {second} killed, {third} leads {took:?} later");
    assert!(
        took <= LEASE + Duration::from_secs(2),
        "takeover after SIGKILL took {took:?}"
    );
    patch_spec(&memcacheds, "sample", json!({"size": 3})).await;
    oracle.converges("sample", TIMEOUT).await.unwrap();
    // The killed container is restarted by the kubelet: two pods ready again, one leading.
    two_ready_pods(&client).await;
    assert_eq!(leader(&client).await.as_deref(), Some(third.as_str()));

    // The sharded overlay, as shipped: three hosts serving every namespace, each reconciling the
    // parents the leader labels with its shard.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    deployments
        .delete("operator-host", &DeleteParams::foreground())
        .await
        .unwrap();
    wait_for("the leader-elected hosts gone", TIMEOUT, || async {
        let left = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=operator-host"))
            .await?;
        Ok(left.items.is_empty().then_some(()))
    })
    .await
    .unwrap();
    let sharded = tempfile::tempdir_in(repo_root().join("target")).unwrap();
    real_node_sharded_overlay(sharded.path());
    let started = Instant::now();
    kubectl(
        &cluster,
        &["apply", "-k", &sharded.path().to_string_lossy()],
    );
    ready_pods(&client, 3).await;
    println!(
        "in cluster, sharded: 3 pods ready {:?} after kubectl apply -k",
        started.elapsed()
    );
    let mut names = vec!["sample".to_string()];
    for i in 0..11 {
        let name = format!("sharded-{i}");
        create(
            &memcacheds,
            &memcached_resource(),
            &name,
            json!({"size": 1}),
        )
        .await;
        names.push(name);
    }
    let shards = wait_for(
        "every parent labelled with a shard, spread over more than one",
        TIMEOUT,
        || async {
            let listed = memcacheds.list_metadata(&ListParams::default()).await?;
            let labels: Vec<Option<String>> = listed
                .items
                .iter()
                .map(|parent| parent.labels().get(SHARD_LABEL).cloned())
                .collect();
            let held: std::collections::BTreeSet<String> =
                labels.iter().flatten().cloned().collect();
            let done = labels.len() == names.len() && labels.iter().all(Option::is_some);
            Ok((done && held.len() > 1).then_some(held))
        },
    )
    .await
    .unwrap();
    let pod_names: Vec<String> = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=operator-host"))
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    // A shard is named after its replica's identity: the pod's name, then its process.
    for shard in &shards {
        assert!(
            pod_names.iter().any(|pod| shard.starts_with(pod.as_str())),
            "shard {shard} is none of the host pods {pod_names:?}"
        );
    }
    println!("in cluster, sharded: parents on shards {shards:?}");
    all_converge(&oracle, &names, TIMEOUT).await.unwrap();
    webhooks_refuse_and_default(&memcacheds, "sharded").await;
}

/// Through the install's webhooks (the Service `operator-host-webhooks`, every Ready pod
/// behind it): a Memcached the plugin refuses is refused at creation with its field error, and
/// an untagged `memcached` image is stored with the tag the plugin defaults it to. `name` keeps
/// the objects of each call apart; the defaulted one is deleted again.
async fn webhooks_refuse_and_default(memcacheds: &Api<DynamicObject>, name: &str) {
    let object = |name: &str, image: &str| {
        custom_resource(
            &memcached_resource(),
            name,
            json!({"size": 1, "image": image}),
        )
    };
    let refused = memcacheds
        .create(
            &PostParams::default(),
            &object(&format!("{name}-bad-image"), "bad image"),
        )
        .await;
    match refused {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains("denied the request") && status.message.contains("spec.image"),
            "{status:?}"
        ),
        other => panic!("an invalid Memcached was not refused by the webhook: {other:?}"),
    }
    let defaulted = memcacheds
        .create(
            &PostParams::default(),
            &object(&format!("{name}-untagged"), "memcached"),
        )
        .await
        .unwrap();
    assert_eq!(
        defaulted.data["spec"]["image"],
        json!(format!("memcached:{}", memcached_tag())),
        "{defaulted:?}"
    );
    memcacheds
        .delete(&defaulted.name_any(), &DeleteParams::default())
        .await
        .unwrap();
}

/// The tag the Memcached plugin pins an untagged image to: its default image's.
fn memcached_tag() -> &'static str {
    memcached::DEFAULT_IMAGE
        .split_once(':')
        .expect("the default image has a tag")
        .1
}
