//! Control-plane faults while the host converges: a kube-apiserver restart, an etcd restart, windows of 503 and 429 on writes, dropped connections.
//!
//! The host runs as a process (`operator-host-faulty run --install-crds`) serving the Memcached
//! plugin in one namespace. The apiserver and etcd restarts happen on a cluster of this area's
//! own (`target/devcluster-faults`), never on the shared one; the host talks to it directly, so it
//! sees refused connections and an apiserver without etcd as they come. The write faults and the
//! dropped connections go through a fault proxy in front of the shared cluster (the test's own
//! client goes around it, so the CRs are created and edited while the host's writes fail).
//!
//! After each fault: the host never exits, the oracle (the plugin's `plan` on the live state)
//! holds for every CR within a bound, and every child keeps the UID it had when first seen, before
//! and during the fault (nothing was deleted and recreated). Each test prints its figures.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use http::StatusCode;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use operator_host::plugin::Plugin;
use operator_host_tests::campaign::{BOUND, Scenario};
use operator_host_tests::devcluster::{self, Cluster, wait_for, wait_for_crd_established};
use operator_host_tests::fault_proxy::{Matcher, Outcome, StatusFault};
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::memcached::{memcached_resource, patch_spec};
use operator_host_tests::oracle::{Oracle, Uids, all_converge, list_children};
use operator_host_tests::process_host::{Launch, ProcessHost};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

/// This area's isolated cluster (its apiserver and etcd get restarted).
const ISOLATED: &str = "faults";

/// One control-plane fault at a time: a restart would break the other test's assertions.
static FAULTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The CRs of the big convergence.
const MANY: usize = 200;

/// How long 200 CRs may take to converge once the apiserver is back (2 cores, the host and the
/// whole control plane on them).
const MANY_BOUND: Duration = Duration::from_secs(150);

const CRD: &str = "memcacheds.cache.example.com";

/// The Memcached plugin, and a directory holding only it, for a host process.
fn memcached_plugin() -> (tempfile::TempDir, Arc<Plugin>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memcached.wasm");
    std::fs::copy(plugin_path("plugins", "memcached"), &path).unwrap();
    let plugin = Arc::new(Plugin::load(&runtime(), &path).unwrap());
    (dir, plugin)
}

/// A namespace of the isolated cluster, with a host process serving Memcached in it
/// (directly against the cluster: the faults are the cluster's own).
struct Isolated {
    cluster: &'static Cluster,
    client: Client,
    ns: String,
    plugins: tempfile::TempDir,
    plugin: Arc<Plugin>,
    parents: Api<DynamicObject>,
}

impl Isolated {
    async fn new(cluster: &'static Cluster, test: &str) -> Isolated {
        let client = cluster.client().await.unwrap();
        let ns = devcluster::unique_name(test);
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        let (plugins, plugin) = memcached_plugin();
        let parents = Api::namespaced_with(client.clone(), &ns, &memcached_resource());
        Isolated {
            cluster,
            client,
            ns,
            plugins,
            plugin,
            parents,
        }
    }

    fn host(&self) -> ProcessHost {
        ProcessHost::start(&Launch {
            binary: &PathBuf::from(BINARY),
            plugins: self.plugins.path(),
            kubeconfig: &self.cluster.kubeconfig,
            namespace: Some(&self.ns[..]),
            crash_after: None,
            metrics_addr: None,
            install_crds: true,
            args: &[],
        })
    }

    fn oracle(&self) -> Oracle<'_> {
        Oracle {
            client: self.client.clone(),
            plugin: &self.plugin,
            namespace: &self.ns,
        }
    }

    /// Waits for the CRD the host installs (CRs cannot be created before).
    async fn crd_served(&self, host: &ProcessHost) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        if let Err(e) = wait_for_crd_established(&crds, CRD, BOUND).await {
            panic!(
                "the host did not install {CRD}: {e}; log tail:\n{}",
                host.log_tail(80)
            );
        }
    }
}

/// A Memcached CR named `name` with `spec`.
fn memcached(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// Creates `name`, retrying while the control plane settles after a fault (a retry after a
/// create that did land finds it there) or while the CRD is not served yet.
async fn create_retrying(api: &Api<DynamicObject>, name: &str, spec: Value) {
    wait_for(&format!("creating {name}"), BOUND, || async {
        match api
            .create(&PostParams::default(), &memcached(name, spec.clone()))
            .await
        {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some(())),
            Err(e) => Err(e.into()),
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_crs_converge_through_an_apiserver_restart() {
    let _one_fault = FAULTS.lock().await;
    let cluster = devcluster::isolated_cluster(ISOLATED).await;
    let setup = Isolated::new(cluster.get(), "apiserver-restart").await;
    let mut host = setup.host();
    setup.crd_served(&host).await;
    let uids = Uids::start(setup.client.clone(), setup.ns.clone());

    let started = Instant::now();
    let names: Vec<String> = (0..MANY).map(|i| format!("mc-{i:03}")).collect();
    futures::stream::iter(&names)
        .map(|name| {
            let api = &setup.parents;
            async move {
                api.create(&PostParams::default(), &memcached(name, json!({"size": 1})))
                    .await
            }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let created = started.elapsed();

    // The restart lands in the middle: a quarter of the children exist, most do not yet.
    wait_for("a quarter of the children", BOUND, || async {
        Ok((uids.seen() >= MANY / 2).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log tail:\n{}", host.log_tail(80)));
    let at_fault = uids.seen();
    let fault = cluster
        .restart_apiserver(Duration::from_secs(2))
        .await
        .unwrap();
    let back = Instant::now();
    host.assert_running("during the apiserver restart").await;

    let oracle = setup.oracle();
    if let Err(e) = all_converge(&oracle, &names, MANY_BOUND).await {
        panic!(
            "after the apiserver restart: {e}; host log tail:\n{}",
            host.log_tail(80)
        );
    }
    let after_back = back.elapsed();
    let total = started.elapsed();
    host.assert_running("after convergence").await;
    let children = uids
        .assert_none_recreated(&setup.client, &setup.ns, &host.log_tail(80))
        .await;
    assert_eq!(children, 2 * MANY, "a Deployment and a Service per CR");
    eprintln!(
        "apiserver restart (2 s down, {fault:?} until ready) with {at_fault} of {} children \
         made: {MANY} CRs created in {created:?}, converged {after_back:?} after the apiserver \
         was back, {total:?} in all",
        2 * MANY
    );
    host.kill().await;
    // The namespace goes with the isolated cluster when this process exits: deleting 200 CRs
    // and their pods here would only load the control plane the next test uses.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_survives_an_etcd_restart_and_serves_a_cr_created_after_it() {
    let _one_fault = FAULTS.lock().await;
    let cluster = devcluster::isolated_cluster(ISOLATED).await;
    let setup = Isolated::new(cluster.get(), "etcd-restart").await;
    let mut host = setup.host();
    setup.crd_served(&host).await;
    let mut names: Vec<String> = (0..3).map(|i| format!("before-{i}")).collect();
    for name in &names {
        create_retrying(&setup.parents, name, json!({"size": 1})).await;
    }
    let oracle = setup.oracle();
    let before = all_converge(&oracle, &names, BOUND)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "before etcd restarts: {e}; log tail:\n{}",
                host.log_tail(80)
            )
        });
    let uids = Uids::start(setup.client.clone(), setup.ns.clone());
    wait_for("the children seen", BOUND, || async {
        Ok((uids.seen() == 2 * names.len()).then_some(()))
    })
    .await
    .unwrap();

    let fault = cluster.restart_etcd(Duration::from_secs(2)).await.unwrap();
    let back = Instant::now();
    host.assert_running("during the etcd restart").await;
    create_retrying(&setup.parents, "after", json!({"size": 1})).await;
    names.push("after".into());
    let after = all_converge(&oracle, &names, BOUND)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "after etcd restarted: {e}; host log tail:\n{}",
                host.log_tail(80)
            )
        });
    host.assert_running("after convergence").await;
    uids.assert_none_recreated(&setup.client, &setup.ns, &host.log_tail(80))
        .await;
    eprintln!(
        "etcd restart (2 s down, {fault:?} until the apiserver was ready): 3 CRs converged in \
         {before:?} before; a CR created after it converged {after:?} after etcd was back \
         ({:?} in all)",
        back.elapsed()
    );
    host.kill().await;
}

/// Creates `name` in the scenario once its CRD is served (the host installs it).
async fn scenario_create(scenario: &Scenario, name: &str, spec: Value) {
    create_retrying(&scenario.parents, name, spec).await;
}

/// How many of the host's requests the proxy answered with `code` itself.
fn injected(scenario: &Scenario, code: u16) -> usize {
    scenario
        .proxy
        .requests()
        .iter()
        .filter(|r| r.outcome == Outcome::Injected(code))
        .count()
}

/// Waits for every parent of the scenario to converge; panics with the host's log otherwise.
async fn scenario_converges(scenario: &Scenario, host: &ProcessHost, what: &str) -> Duration {
    let names: Vec<String> = scenario
        .parents
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    all_converge(&scenario.oracle(), &names, BOUND)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}; host log tail:\n{}", host.log_tail(80)))
}

/// The children of every parent of the scenario, by `Kind/name`.
async fn scenario_children(scenario: &Scenario) -> BTreeMap<String, String> {
    list_children(&scenario.ns.client(), scenario.ns.name())
        .await
        .unwrap()
}

/// Panics naming every child of `before` whose UID is not the same now.
async fn assert_same_uids(
    scenario: &Scenario,
    before: &BTreeMap<String, String>,
    host: &ProcessHost,
    what: &str,
) {
    let now = scenario_children(scenario).await;
    let changed: Vec<String> = before
        .iter()
        .filter(|(child, uid)| now.get(*child) != Some(uid))
        .map(|(child, uid)| format!("{child}: {uid} -> {:?}", now.get(child)))
        .collect();
    assert!(
        changed.is_empty(),
        "{what}: children recreated or gone: {changed:?}; host log tail:\n{}",
        host.log_tail(80)
    );
}

/// A window of `fault` on every write of the host, while CRs are created and edited; the
/// window's requests answered by the proxy, and how long the state took to converge after it.
async fn write_window(
    scenario: &Scenario,
    host: &mut ProcessHost,
    fault: StatusFault,
    code: u16,
    edits: &[(&str, Value)],
) -> (usize, Duration) {
    const WINDOW: Duration = Duration::from_secs(6);
    let before = injected(scenario, code);
    let guard = scenario
        .proxy
        .respond_status(Matcher::writes(), fault.lasting(WINDOW));
    let opened = Instant::now();
    for (name, spec) in edits {
        if scenario.parents.get_opt(name).await.unwrap().is_some() {
            patch_spec(&scenario.parents, name, spec.clone()).await;
        } else {
            scenario_create(scenario, name, spec.clone()).await;
        }
    }
    tokio::time::sleep(WINDOW.saturating_sub(opened.elapsed())).await;
    guard.release();
    let answered = injected(scenario, code) - before;
    // The window must have met writes of the host, or it tested nothing.
    assert!(
        answered > 0,
        "the host made no write during the {code} window; host log tail:\n{}",
        host.log_tail(80)
    );
    host.assert_running(&format!("during the {code} window"))
        .await;
    let took = scenario_converges(scenario, host, &format!("after the {code} window")).await;
    (answered, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_failing_with_503_then_429_converge_once_the_window_ends() {
    let scenario = Scenario::new(
        BINARY,
        "write-faults",
        "plugins",
        "memcached",
        memcached_resource(),
    )
    .await;
    let mut host = scenario.host(None);
    for name in ["a", "b"] {
        scenario_create(&scenario, name, json!({"size": 1})).await;
    }
    scenario_converges(&scenario, &host, "before the faults").await;
    let before = scenario_children(&scenario).await;

    let unavailable = StatusFault::new(StatusCode::SERVICE_UNAVAILABLE);
    let (answered_503, after_503) = write_window(
        &scenario,
        &mut host,
        unavailable,
        503,
        &[("a", json!({"size": 2})), ("c", json!({"size": 1}))],
    )
    .await;
    assert_same_uids(&scenario, &before, &host, "after the 503 window").await;
    let before = scenario_children(&scenario).await;

    let throttled =
        StatusFault::new(StatusCode::TOO_MANY_REQUESTS).retry_after(Duration::from_secs(1));
    let (answered_429, after_429) = write_window(
        &scenario,
        &mut host,
        throttled,
        429,
        &[
            ("a", json!({"size": 1})),
            ("c", json!({"size": 2})),
            ("d", json!({"size": 1})),
        ],
    )
    .await;
    assert_same_uids(&scenario, &before, &host, "after the 429 window").await;
    scenario.assert_quiet(&host, "the write windows").await;
    host.assert_running("after the write windows").await;
    eprintln!(
        "writes failing 6 s: 503 ({answered_503} writes refused) converged {after_503:?} after \
         the window; 429 with Retry-After 1 s ({answered_429} refused) converged {after_429:?} \
         after it"
    );
    host.kill().await;
    scenario.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_every_connection_mid_convergence_converges() {
    let scenario = Scenario::new(
        BINARY,
        "drop-connections",
        "plugins",
        "memcached",
        memcached_resource(),
    )
    .await;
    let mut host = scenario.host(None);
    scenario_create(&scenario, "first", json!({"size": 1})).await;
    scenario_converges(&scenario, &host, "before the drop").await;
    let uids = Uids::start(scenario.ns.client(), scenario.ns.name().to_string());

    let names: Vec<String> = (0..20).map(|i| format!("mc-{i:02}")).collect();
    let writes = Matcher::writes();
    let writes_before = scenario.proxy.count(&writes);
    for name in &names {
        scenario_create(&scenario, name, json!({"size": 1})).await;
    }
    // Mid-convergence: the host has started writing the new CRs' children.
    wait_for("the host's first writes", BOUND, || async {
        Ok((scenario.proxy.count(&writes) >= writes_before + 5).then_some(()))
    })
    .await
    .unwrap();
    let connections = scenario.proxy.connections_accepted();
    scenario.proxy.drop_connections();
    let dropped = Instant::now();
    let took = scenario_converges(&scenario, &host, "after the drop").await;
    host.assert_running("after the drop").await;
    assert!(
        scenario.proxy.connections_accepted() > connections,
        "the host never reconnected after the drop"
    );
    uids.assert_none_recreated(
        &scenario.ns.client(),
        scenario.ns.name(),
        &host.log_tail(80),
    )
    .await;
    scenario
        .assert_quiet(&host, "the dropped connections")
        .await;
    eprintln!(
        "every connection dropped with 20 CRs converging: converged {took:?} after the drop \
         ({:?} until quiet)",
        dropped.elapsed()
    );
    host.kill().await;
    scenario.cleanup().await;
}
