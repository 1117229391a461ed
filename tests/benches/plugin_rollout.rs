//! Benchmark: how long a new plugin version takes to reach the cluster through an
//! OperatorPlugin (the apply of a new reference -> the first child written by the new
//! version), on a compile-cache miss and on a hit, against the same swap through the plugin
//! directory (a file renamed into place), measured in the same run.
//!
//! Two host processes: one serves the OperatorPlugin `memcached` (from a registry on
//! loopback), the other a plugin directory, each with one Memcached CR of its own namespace.
//! Each round builds a version never seen before (the v2 plugin with a custom section naming
//! the round: new content, so a compile-cache miss), swaps to it and measures, swaps back to
//! v1, then swaps to it again (now pulled and compiled: a hit). The new version is seen when
//! the CR's Deployment carries v2's annotation. Every version is pushed before the clock starts;
//! a hit is served from the host's store of pulled artifacts and its compile cache.
//!
//! `cargo bench -p operator-host-tests --bench plugin_rollout [-- ROUNDS]` (default 5).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use operator_host_tests::devcluster::{self, TestNamespace};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::host::plugin_path;
use operator_host_tests::memcached::{create, memcached_resource};
use operator_host_tests::oci_registry::TestRegistry;
use operator_host_tests::operator_plugins;
use operator_host_tests::process_host::{Launch, ProcessHost};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const BOUND: Duration = Duration::from_secs(120);
const V2_ANNOTATION: &str = "cache.example.com/plugin-variant";

/// `bytes` with a custom section naming `round`: the same component, new content.
fn variant(bytes: &[u8], round: &str) -> Vec<u8> {
    let mut out = bytes.to_vec();
    wasm_encoder::Section::append_to(
        &wasm_encoder::CustomSection {
            name: "operator-host-bench".into(),
            data: round.as_bytes().into(),
        },
        &mut out,
    );
    out
}

fn push(plugin: &Path, reference: &str) -> String {
    operator_plugins::push(BINARY, plugin, reference)
}

fn host(ns: &TestNamespace, plugins: &Path, args: &[&str]) -> ProcessHost {
    ProcessHost::start(&Launch {
        binary: BINARY.as_ref(),
        plugins,
        kubeconfig: &devcluster::cluster().kubeconfig,
        namespace: Some(ns.name()),
        install_crds: true,
        crash_after: None,
        metrics_addr: None,
        args,
    })
}

/// Waits until CR "m"'s Deployment in `ns` carries v2's annotation (`v2`) or not; how long.
async fn wait_variant(ns: &TestNamespace, v2: bool, since: Instant) -> Duration {
    let deployments: Api<Deployment> = ns.api();
    loop {
        if let Ok(deployment) = deployments.get("m").await {
            let has = deployment
                .metadata
                .annotations
                .is_some_and(|a| a.contains_key(V2_ANNOTATION));
            if has == v2 {
                return since.elapsed();
            }
        }
        assert!(
            since.elapsed() < BOUND,
            "the version did not reach the Deployment within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One way of delivering a version: returns when it is delivered (the clock starts before).
trait Delivery {
    async fn deliver(&self, plugin: &Path);
}

/// The apply of a new reference; every version was pushed before (not timed).
struct ThroughRegistry {
    api: Api<DynamicObject>,
    /// The reference of each version's artifact, by its file.
    references: std::collections::HashMap<PathBuf, String>,
}

impl Delivery for ThroughRegistry {
    async fn deliver(&self, plugin: &Path) {
        let source = &self.references[plugin];
        self.api
            .patch(
                "memcached",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"source": source}})),
            )
            .await
            .unwrap();
    }
}

struct ThroughDirectory {
    dir: PathBuf,
}

impl Delivery for ThroughDirectory {
    async fn deliver(&self, plugin: &Path) {
        let staged = self.dir.join(".memcached.wasm.tmp");
        std::fs::copy(plugin, &staged).unwrap();
        std::fs::rename(&staged, self.dir.join("memcached.wasm")).unwrap();
    }
}

/// Delivers `plugin` and waits until the CR's Deployment shows it (`v2` or not); how long.
async fn swap(delivery: &impl Delivery, ns: &TestNamespace, plugin: &Path, v2: bool) -> Duration {
    let started = Instant::now();
    delivery.deliver(plugin).await;
    wait_variant(ns, v2, started).await
}

/// (miss, hit) per round: a new version, back to v1, the same version again.
async fn measure(
    delivery: &impl Delivery,
    ns: &TestNamespace,
    v1: &Path,
    versions: &[PathBuf],
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut misses, mut hits) = (Vec::new(), Vec::new());
    for version in versions {
        misses.push(swap(delivery, ns, version, true).await);
        swap(delivery, ns, v1, false).await;
        hits.push(swap(delivery, ns, version, true).await);
        swap(delivery, ns, v1, false).await;
    }
    (misses, hits)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let work = tempfile::tempdir().unwrap();
    let v1 = plugin_path("plugins", "memcached");
    let v2_dir = plugin_dir("test-plugins", "memcached-v2");
    let v2 = std::fs::read(v2_dir.path().join("memcached.wasm")).unwrap();
    let stamp = format!("{:?}", std::time::SystemTime::now());
    // Versions never compiled before, one per round and per way (a miss each first time).
    let versions = |way: &str| -> Vec<PathBuf> {
        (0..rounds)
            .map(|round| {
                let dir = work.path().join(format!("{way}-{round}"));
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join("memcached.wasm");
                std::fs::write(&path, variant(&v2, &format!("{way} {round} {stamp}"))).unwrap();
                path
            })
            .collect()
    };

    // Through the registry.
    let registry = TestRegistry::start().await;
    let ns = TestNamespace::new("bench-rollout").await.unwrap();
    let store = work.path().join("store");
    let _registry_host = operator_plugins::start_host(BINARY, &ns, &store, &[], None);
    let api = operator_plugins::api(ns.client());
    let registry_versions = versions("registry");
    let references: std::collections::HashMap<PathBuf, String> = std::iter::once(&v1)
        .chain(&registry_versions)
        .enumerate()
        .map(|(i, path)| {
            let digest = push(path, &registry.reference(&format!("bench/memcached:{i}")));
            (
                path.clone(),
                registry.reference(&format!("bench/memcached@{digest}")),
            )
        })
        .collect();
    let spec = json!({"source": references[&v1], "plainHTTP": true});
    operator_plugins::create(&api, &ns, "memcached", spec, BOUND).await;
    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    create(&parents, &memcached_resource(), "m", json!({"size": 1})).await;
    wait_variant(&ns, false, Instant::now()).await;
    let through_registry = ThroughRegistry {
        api: api.clone(),
        references,
    };
    let (registry_misses, registry_hits) =
        measure(&through_registry, &ns, &v1, &registry_versions).await;

    // Through the plugin directory: the baseline.
    let dir_ns = TestNamespace::new("bench-rollout-dir").await.unwrap();
    let dir = work.path().join("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&v1, dir.join("memcached.wasm")).unwrap();
    let _dir_host = host(&dir_ns, &dir, &[]);
    let dir_parents = Api::namespaced_with(dir_ns.client(), dir_ns.name(), &memcached_resource());
    create(&dir_parents, &memcached_resource(), "m", json!({"size": 1})).await;
    wait_variant(&dir_ns, false, Instant::now()).await;
    let (dir_misses, dir_hits) = measure(
        &ThroughDirectory { dir },
        &dir_ns,
        &v1,
        &versions("directory"),
    )
    .await;

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (what, registry, directory) in [
        (
            "compile-cache miss",
            median(registry_misses),
            median(dir_misses),
        ),
        ("compile-cache hit", median(registry_hits), median(dir_hits)),
    ] {
        println!(
            "{what}: OperatorPlugin {:.0} ms, plugin directory {:.0} ms, ratio {:.2} (median of {rounds})",
            ms(registry),
            ms(directory),
            registry.as_secs_f64() / directory.as_secs_f64()
        );
    }
    let _ = api.delete("memcached", &Default::default()).await;
    ns.cleanup().await.unwrap();
    dir_ns.cleanup().await.unwrap();
}
