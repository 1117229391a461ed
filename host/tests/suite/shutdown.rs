//! Shutdown is prompt whatever the host is doing: even when the API server never answers.

use crate::util;

use std::sync::Arc;
use std::time::{Duration, Instant};

use operator_host::controller::{ControllerConfig, RunConfig, run_with_metrics};
use operator_host::metrics::Metrics;
use operator_host::policy::Policy;
use operator_host::runtime::Limits;
use util::{example_plugin, runtime_with};

/// An "API server" on loopback that accepts connections and never answers: every request
/// of the host, and every watch, hangs.
async fn hung_api_server() -> (kube::Client, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    let config = kube::Config::new(format!("http://{address}").parse().unwrap());
    (kube::Client::try_from(config).unwrap(), server)
}

/// Runs the host over the Memcached plugin against a hung API server, asks it to stop after
/// `running`, and returns how long it took to return.
async fn stop_against_a_hung_api_server(install_crds: bool) -> Duration {
    let (client, server) = hung_api_server().await;
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        example_plugin("memcached"),
        plugins.path().join("memcached.wasm"),
    )
    .unwrap();
    let config = RunConfig {
        plugins_dir: plugins.path().to_path_buf(),
        install_crds,
        metrics_addr: None,
        controllers: ControllerConfig {
            namespaces: Vec::new(),
            resync: Duration::from_secs(300),
            concurrency: 4,
            leadership: operator_host::leader::Leadership::unelected(),
            shard: None,
            record: None,
            canary_failed: Default::default(),
        },
        policy: Arc::new(Policy::default()),
        leader_election: None,
        cluster_plugins: None,
        sharding: None,
        // As `run` ships: the replica's report is written too, and hangs as well.
        report: Some(operator_host::controller::ReportTarget {
            namespace: "default".into(),
            lease: operator_host::leader::DEFAULT_LEASE_NAME.into(),
        }),
        webhooks: None,
    };
    let metrics = Arc::new(Metrics::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let host = tokio::spawn(run_with_metrics(
        client,
        runtime_with(Limits::default()),
        config,
        metrics,
        async move {
            let _ = stopped.await;
        },
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!host.is_finished(), "the host stopped by itself");
    let asked = Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), host)
        .await
        .expect("the host returns")
        .unwrap()
        .unwrap();
    server.abort();
    asked.elapsed()
}

#[tokio::test]
async fn stopping_while_a_crd_install_hangs_takes_less_than_ten_seconds() {
    let took = stop_against_a_hung_api_server(true).await;
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn stopping_while_every_watch_hangs_takes_less_than_ten_seconds() {
    let took = stop_against_a_hung_api_server(false).await;
    assert!(took < Duration::from_secs(10), "took {took:?}");
}
