//! The host serving every namespace (no `--namespace`), as the install manifests run it: sharded
//! replicas label and reconcile the parents of several namespaces, a leader election hands
//! over, every combination of the flags the README and the manifests document converges a
//! parent, and a removed plugin's parents are marked in their own namespaces.
//!
//! A host that serves every namespace of the shared cluster would reconcile the other tests'
//! parents, so these run on a cluster of this area's own, and take turns on it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use operator_host::plugin::Plugin;
use operator_host::shard::{RING_LABEL, SHARD_LABEL};
use operator_host_tests::devcluster::{self, IsolatedCluster, TestNamespace, wait_for};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::hostile::{attack_resource, release_attacks, wait_for_finalizer};
use operator_host_tests::memcached::{
    create, memcached_resource, patch_spec, wait_for_reason, wait_for_webhook_refusal,
};
use operator_host_tests::oracle::{Oracle, all_converge};
use operator_host_tests::process_host::{Launch, ProcessHost, free_local_addr, http_get};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
/// This area's cluster: its hosts serve every namespace of it.
const ISOLATED: &str = "all-namespaces";
/// How long a host may take to become ready, and parents to converge (2 cores, several hosts).
const BOUND: Duration = Duration::from_secs(120);
/// Each test serves every namespace of the cluster: one at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The cluster, the Memcached plugin, and a directory serving it.
struct Setup {
    cluster: IsolatedCluster,
    client: Client,
    plugin: Arc<Plugin>,
    plugins: tempfile::TempDir,
}

impl Setup {
    async fn new() -> Setup {
        let cluster = devcluster::isolated_cluster(ISOLATED).await;
        let client = cluster.client().await.unwrap();
        let plugins = plugin_dir("plugins", "memcached");
        let plugin =
            Arc::new(Plugin::load(&runtime(), &plugins.path().join("memcached.wasm")).unwrap());
        Setup {
            cluster,
            client,
            plugin,
            plugins,
        }
    }

    async fn namespace(&self, test: &str) -> TestNamespace {
        TestNamespace::in_cluster(&self.cluster, test)
            .await
            .unwrap()
    }

    /// Creates Memcached CRs `m-0`.. in `ns` (the CRD first, as the CRs may come before any
    /// host); returns their names.
    async fn parents(&self, ns: &TestNamespace, count: usize) -> Vec<String> {
        operator_host::controller::install_crd(&self.client, &self.plugin)
            .await
            .unwrap();
        let api = Api::namespaced_with(self.client.clone(), ns.name(), &memcached_resource());
        let mut names = Vec::new();
        for i in 0..count {
            let name = format!("m-{i}");
            create(&api, &memcached_resource(), &name, json!({"size": 1})).await;
            names.push(name);
        }
        names
    }

    async fn converge(&self, ns: &TestNamespace, names: &[String], when: &str) {
        let oracle = Oracle {
            client: self.client.clone(),
            plugin: &self.plugin,
            namespace: ns.name(),
        };
        all_converge(&oracle, names, BOUND)
            .await
            .unwrap_or_else(|e| panic!("{when}: {e}"));
    }
}

/// A host process and where it serves `/metrics` and `/readyz`.
struct Served {
    host: ProcessHost,
    metrics: SocketAddr,
}

impl Served {
    /// Starts `run` on `setup`'s cluster with `args` (besides `--plugins`, `--kubeconfig` and
    /// `--metrics-addr`) and `env`; `namespace` is `--namespace`.
    fn start(
        setup: &Setup,
        namespace: Option<&str>,
        install_crds: bool,
        args: &[&str],
        env: &[(&str, Option<&str>)],
    ) -> Served {
        let metrics = free_local_addr();
        let host = ProcessHost::start_with_env(
            &Launch {
                binary: Path::new(BINARY),
                plugins: setup.plugins.path(),
                kubeconfig: &setup.cluster.kubeconfig,
                namespace,
                install_crds,
                crash_after: None,
                metrics_addr: Some(metrics),
                args,
            },
            env,
        );
        Served { host, metrics }
    }

    /// What `/readyz` says, once it says `ready`; panics with the log if it does not in time.
    async fn ready(&mut self, what: &str) -> String {
        let metrics = self.metrics;
        let outcome = wait_for(what, BOUND, || async {
            Ok(http_get(metrics, "/readyz")
                .await
                .filter(|(status, body)| *status == 200 && body.starts_with("ready"))
                .map(|(_, body)| body))
        })
        .await;
        self.host.assert_running(what).await;
        outcome.unwrap_or_else(|e| panic!("{e}; log tail:\n{}", self.host.log_tail(40)))
    }

    async fn metrics_text(&self) -> String {
        http_get(self.metrics, "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

/// The live shards of `ring` (their Leases' shard labels) in `namespace`.
async fn ring_shards(client: &Client, namespace: &str, ring: &str) -> BTreeSet<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let listed = leases
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={ring}")))
        .await
        .unwrap();
    listed
        .items
        .iter()
        .filter_map(|lease| lease.labels().get(SHARD_LABEL).cloned())
        .collect()
}

/// The shard label of every Memcached of the namespaces `namespaces`, by `namespace/name`.
async fn shard_labels(client: &Client, namespaces: &[&str]) -> BTreeMap<String, Option<String>> {
    let mut labels = BTreeMap::new();
    for ns in namespaces {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &memcached_resource());
        for parent in api.list_metadata(&ListParams::default()).await.unwrap() {
            labels.insert(
                format!("{ns}/{}", parent.name_any()),
                parent.labels().get(SHARD_LABEL).cloned(),
            );
        }
    }
    labels
}

/// The value of the metric line that starts with `prefix` (a name and its labels).
fn metric(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix(prefix))
        .map(|value| value.trim().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_serving_every_namespace_label_and_reconcile_the_parents_of_all() {
    let _turn = TURN.lock().await;
    let setup = Setup::new().await;
    let (one, two) = (
        setup.namespace("shard-all-a").await,
        setup.namespace("shard-all-b").await,
    );
    let leases = setup.namespace("shard-all-leases").await;
    let mut names = setup.parents(&one, 10).await;
    names.extend(setup.parents(&two, 10).await);
    let ring = "sharded-everywhere";
    let args = ["--leader-elect", "--leader-elect-lease", ring, "--shard"];
    // As the sharded overlay runs them: the Lease namespace from POD_NAMESPACE; one identity
    // from POD_NAME (a pod's), the other from the hostname and process id.
    let mut pod = Served::start(
        &setup,
        None,
        true,
        &args,
        &[
            ("POD_NAMESPACE", Some(leases.name())),
            ("POD_NAME", Some("operator-host-7d9f8b6c4-x2vqz")),
        ],
    );
    let mut process = Served::start(
        &setup,
        None,
        true,
        &args,
        &[("POD_NAMESPACE", Some(leases.name())), ("POD_NAME", None)],
    );
    pod.ready("the POD_NAME replica ready as a shard").await;
    process.ready("the hostname replica ready as a shard").await;

    let namespaces = [one.name(), two.name()];
    let spread = wait_for(
        "every parent of both namespaces labelled with a live shard, both shards holding some",
        BOUND,
        || async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let shards = ring_shards(&setup.client, leases.name(), ring).await;
            let labels = shard_labels(&setup.client, &namespaces).await;
            let held: BTreeSet<&String> = labels.values().flatten().collect();
            let done = shards.len() == 2
                && labels.len() == names.len()
                && labels
                    .values()
                    .all(|shard| shard.as_ref().is_some_and(|s| shards.contains(s)))
                && held.len() == 2;
            Ok(done.then_some(labels))
        },
    )
    .await;
    let labels = spread.unwrap_or_else(|e| {
        panic!(
            "{e}\n--- POD_NAME replica:\n{}\n--- hostname replica:\n{}",
            pod.host.log_tail(30),
            process.host.log_tail(30)
        )
    });
    println!("parents by shard: {labels:?}");
    setup
        .converge(&one, &names[..10], "the first namespace's parents")
        .await;
    setup
        .converge(&two, &names[10..], "the second namespace's parents")
        .await;

    // The leader counts every parent on a real shard, none unassigned.
    let mut counted = false;
    for replica in [&pod, &process] {
        let text = replica.metrics_text().await;
        if metric(&text, "operator_host_leader ").as_deref() != Some("1") {
            continue;
        }
        counted = true;
        assert_eq!(
            metric(
                &text,
                "operator_host_shard_unassigned_parents{plugin=\"memcached\"} "
            )
            .as_deref(),
            Some("0"),
            "{text}"
        );
        assert!(
            !text.contains("shard=\"\""),
            "no parent is counted on a shard without a name: {text}"
        );
    }
    assert!(counted, "one replica leads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_serving_every_namespace_hands_over_to_its_standby() {
    let _turn = TURN.lock().await;
    let setup = Setup::new().await;
    let (one, two) = (
        setup.namespace("elect-all-a").await,
        setup.namespace("elect-all-b").await,
    );
    let leases = setup.namespace("elect-all-leases").await;
    let first = setup.parents(&one, 2).await;
    let second = setup.parents(&two, 2).await;
    let args = [
        "--leader-elect",
        "--leader-elect-lease",
        "elected-everywhere",
    ];
    let env = [("POD_NAMESPACE", Some(leases.name())), ("POD_NAME", None)];
    let mut a = Served::start(&setup, None, true, &args, &env);
    let said = a.ready("the first host ready").await;
    assert!(said.starts_with("ready: leader"), "{said}");
    let mut b = Served::start(&setup, None, true, &args, &env);
    let said = b.ready("the second host ready").await;
    assert!(said.starts_with("ready: standby"), "{said}");
    setup.converge(&one, &first, "under the first leader").await;
    setup
        .converge(&two, &second, "under the first leader")
        .await;

    a.host.kill().await;
    for (ns, names) in [(&one, &first), (&two, &second)] {
        let api = Api::namespaced_with(setup.client.clone(), ns.name(), &memcached_resource());
        for name in names.iter() {
            patch_spec(&api, name, json!({"size": 2})).await;
        }
    }
    setup.converge(&one, &first, "under the new leader").await;
    setup.converge(&two, &second, "under the new leader").await;
    let said = b.ready("the second host leading").await;
    assert!(said.starts_with("ready: leader"), "{said}");
}

/// One way to start the host, as the README or a manifest documents it.
struct Flags {
    name: &'static str,
    namespace: bool,
    install_crds: bool,
    /// `--leader-elect`, and `--shard` with it.
    leader_elect: bool,
    shard: bool,
    plugins_from_cluster: bool,
    /// `--webhook-addr` (with the default URL the API server calls, as beside the cluster).
    webhooks: bool,
    /// `--policy`, a path in the repository.
    policy: Option<&'static str>,
}

const COMBINATIONS: &[Flags] = &[
    // README: one namespace, the CRDs installed by the host.
    Flags {
        name: "namespace",
        namespace: true,
        install_crds: true,
        leader_elect: false,
        shard: false,
        plugins_from_cluster: false,
        webhooks: false,
        policy: None,
    },
    // `make demo`: every namespace.
    Flags {
        name: "demo",
        namespace: false,
        install_crds: true,
        leader_elect: false,
        shard: false,
        plugins_from_cluster: false,
        webhooks: false,
        policy: Some("examples/policy.yaml"),
    },
    // deploy/install/base.
    Flags {
        name: "base",
        namespace: false,
        install_crds: true,
        leader_elect: true,
        shard: false,
        plugins_from_cluster: true,
        webhooks: true,
        policy: Some("deploy/install/base/policy.yaml"),
    },
    // deploy/install/overlays/sharded.
    Flags {
        name: "sharded",
        namespace: false,
        install_crds: true,
        leader_elect: true,
        shard: true,
        plugins_from_cluster: true,
        webhooks: true,
        policy: Some("deploy/install/base/policy.yaml"),
    },
    // The CRDs installed by an administrator, one namespace, each election mode.
    Flags {
        name: "ns-elect",
        namespace: true,
        install_crds: false,
        leader_elect: true,
        shard: false,
        plugins_from_cluster: true,
        webhooks: false,
        policy: None,
    },
    Flags {
        name: "ns-shard",
        namespace: true,
        install_crds: false,
        leader_elect: true,
        shard: true,
        plugins_from_cluster: false,
        webhooks: false,
        policy: None,
    },
    Flags {
        name: "all-cluster-plugins",
        namespace: false,
        install_crds: false,
        leader_elect: false,
        shard: false,
        plugins_from_cluster: true,
        webhooks: false,
        policy: None,
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_flag_combination_converges_a_parent() {
    let _turn = TURN.lock().await;
    let setup = Setup::new().await;
    // What an administrator installs when the host does not (--install-crds off).
    operator_host::operator_plugin::install_crd(&setup.client)
        .await
        .unwrap();
    let leases = setup.namespace("flags-leases").await;
    let mut broken = Vec::new();
    for flags in COMBINATIONS {
        let ns = setup.namespace(&format!("flags-{}", flags.name)).await;
        let names = setup.parents(&ns, 1).await;
        let lease = format!("flags-{}", flags.name);
        let mut args: Vec<&str> = Vec::new();
        if flags.leader_elect {
            args.extend(["--leader-elect", "--leader-elect-lease", &lease]);
        }
        if flags.shard {
            args.push("--shard");
        }
        if flags.plugins_from_cluster {
            args.push("--plugins-from-cluster");
        }
        let policy = flags.policy.map(|path| devcluster::repo_root().join(path));
        if let Some(policy) = &policy {
            args.extend(["--policy", policy.to_str().unwrap()]);
        }
        let webhook_addr = flags
            .webhooks
            .then(|| format!("--webhook-addr={}", free_local_addr()));
        args.extend(webhook_addr.as_deref());
        let mut host = Served::start(
            &setup,
            flags.namespace.then_some(ns.name()),
            flags.install_crds,
            &args,
            &[("POD_NAMESPACE", Some(leases.name())), ("POD_NAME", None)],
        );
        host.ready(&format!("the host with the {} flags ready", flags.name))
            .await;
        let oracle = Oracle {
            client: setup.client.clone(),
            plugin: &setup.plugin,
            namespace: ns.name(),
        };
        match all_converge(&oracle, &names, BOUND).await {
            Ok(took) => println!("{}: {args:?} converged in {took:?}", flags.name),
            Err(e) => broken.push(format!(
                "{} ({args:?}): {e}; log tail:\n{}",
                flags.name,
                host.host.log_tail(20)
            )),
        }
        let memcacheds =
            Api::namespaced_with(setup.client.clone(), ns.name(), &memcached_resource());
        if flags.webhooks
            && let Err(e) = wait_for_webhook_refusal(&memcacheds, BOUND).await
        {
            broken.push(format!(
                "{} ({args:?}): {e}; log tail:\n{}",
                flags.name,
                host.host.log_tail(20)
            ));
        }
        host.host.kill().await;
        if flags.webhooks {
            // They outlive the host (as a deployment's outlive its restarts): without it,
            // they would refuse the next combination's parents.
            operator_host_tests::webhooks::remove_configurations(
                &setup.client,
                leases.name(),
                &lease,
            )
            .await;
        }
        ns.cleanup().await.unwrap();
    }
    assert!(
        broken.is_empty(),
        "combinations that did not converge:\n{}",
        broken.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_removed_while_serving_every_namespace_marks_the_parents_holding_its_finalizer() {
    let _turn = TURN.lock().await;
    let setup = Setup::new().await;
    let ns = setup.namespace("removed-all").await;
    let plugins = tempfile::tempdir().unwrap();
    let file = plugins.path().join("hostile.wasm");
    std::fs::copy(plugin_path("test-plugins", "hostile"), &file).unwrap();
    let hostile = Plugin::load(&runtime(), &file).unwrap();
    operator_host::controller::install_crd(&setup.client, &hostile)
        .await
        .unwrap();
    let metrics = free_local_addr();
    let mut host = Served {
        host: ProcessHost::start(&Launch {
            binary: Path::new(BINARY),
            plugins: plugins.path(),
            kubeconfig: &setup.cluster.kubeconfig,
            namespace: None,
            install_crds: true,
            crash_after: None,
            metrics_addr: Some(metrics),
            args: &[],
        }),
        metrics,
    };
    host.ready("the host serving the hostile plugin ready")
        .await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(setup.client.clone(), ns.name(), &attack_resource());
    create(
        &api,
        &attack_resource(),
        "held",
        json!({"attack": "hold-finalizer"}),
    )
    .await;
    wait_for_finalizer(&api, "held", BOUND).await;
    api.delete("held", &DeleteParams::background())
        .await
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    let condition = wait_for_reason(
        &api,
        "held",
        operator_host::controller::PLUGIN_REMOVED,
        BOUND,
    )
    .await;
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.contains("plugin hostile was removed")),
        "{condition}"
    );
    host.host.kill().await;
    release_attacks(&ns).await;
    ns.cleanup().await.unwrap();
}
