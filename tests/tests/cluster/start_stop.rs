//! Starts and stops of the host as a process, with both example plugins, as an operator's
//! pod sees them: each start becomes ready within a bound, and SIGTERM, whether it comes right
//! after the start or once the host is ready, ends the process within 10 s.
//!
//! `OPERATOR_HOST_CAMPAIGN=long` makes 40 starts instead of 6.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::DynamicObject;
use operator_host::plugin::Plugin;
use operator_host_tests::devcluster::{self, TestNamespace};
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::memcached::{create, memcached_resource};
use operator_host_tests::process_host::{Launch, ProcessHost, free_local_addr, http_status};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
/// What the host promises after SIGTERM.
const EXIT_BOUND: Duration = Duration::from_secs(10);
/// The host's first log line, written once SIGTERM is handled.
const STARTING: &str = "operator-host starting";
/// How long a start may take to become ready (both plugins loaded, caches synced).
const READY_BOUND: Duration = Duration::from_secs(30);

fn starts() -> usize {
    if std::env::var("OPERATOR_HOST_CAMPAIGN").as_deref() == Ok("long") {
        40
    } else {
        6
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_start_becomes_ready_and_every_sigterm_ends_the_host_within_ten_seconds() {
    let ns = TestNamespace::new("start-stop").await.unwrap();
    let plugins = tempfile::tempdir().unwrap();
    for plugin in ["memcached", "mysql"] {
        std::fs::copy(
            plugin_path("plugins", plugin),
            plugins.path().join(format!("{plugin}.wasm")),
        )
        .unwrap();
    }
    // The CRs are created before any host runs, so their CRD must exist first.
    let memcached = Plugin::load(&runtime(), &plugins.path().join("memcached.wasm")).unwrap();
    operator_host::controller::install_crd(&ns.client(), &memcached)
        .await
        .unwrap();
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    for i in 0..5 {
        create(
            &memcacheds,
            &memcached_resource(),
            &format!("m{i}"),
            json!({"size": 1}),
        )
        .await;
    }
    let kubeconfig = devcluster::cluster().kubeconfig.clone();
    let (mut ready_times, mut exit_times) = (Vec::new(), Vec::new());
    for start in 0..starts() {
        let metrics = free_local_addr();
        let mut host = ProcessHost::start(&Launch {
            binary: Path::new(BINARY),
            plugins: plugins.path(),
            kubeconfig: &kubeconfig,
            namespace: Some(ns.name()),
            crash_after: None,
            metrics_addr: Some(metrics),
            install_crds: true,
            args: &[],
        });
        let started = Instant::now();
        // Every other start is stopped at once, in the middle of starting up.
        let at_once = start % 2 == 1;
        if at_once {
            // Before its handler is installed a process ends by SIGTERM's default action, as
            // any process does; the promise starts with the host's first log line.
            while !host.log().contains(STARTING) {
                assert!(
                    started.elapsed() < READY_BOUND,
                    "start {start} logged no {STARTING:?} within {READY_BOUND:?}; log:\n{}",
                    host.log()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(50 * start as u64)).await;
        } else {
            while http_status(metrics, "/readyz").await != Some(200) {
                assert!(
                    started.elapsed() < READY_BOUND,
                    "start {start} was not ready within {READY_BOUND:?}; log:\n{}",
                    host.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            ready_times.push(started.elapsed());
        }
        host.signal("TERM");
        let stopping = Instant::now();
        let status = host.exited(EXIT_BOUND).await;
        assert!(
            status.is_some_and(|s| s.success()),
            "start {start} (SIGTERM {}): the host did not exit cleanly within {EXIT_BOUND:?} \
             ({status:?}); log:\n{}",
            if at_once {
                "while starting"
            } else {
                "once ready"
            },
            host.log()
        );
        if stopping.elapsed() > Duration::from_secs(3) {
            eprintln!(
                "start {start}: exit took {:?} after SIGTERM; log:\n{}",
                stopping.elapsed(),
                host.log()
            );
        }
        exit_times.push(stopping.elapsed());
    }
    let max = |times: &[Duration]| times.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{} starts: ready in at most {:?}, exited after SIGTERM in at most {:?}",
        starts(),
        max(&ready_times),
        max(&exit_times)
    );
    ns.cleanup().await.unwrap();
}
