//! Runs the operator host in-process for a test: one plugin, confined to the test's namespace.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use operator_host::controller::{self, RunConfig};
use operator_host::metrics::Metrics;
use operator_host::plugin::Plugin;
use operator_host::runtime::{Runtime, RuntimeConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::devcluster::repo_root;

/// A plugin built by `make test-plugins`; panics (never skips) when it is missing.
pub fn plugin_path(dir: &str, name: &str) -> PathBuf {
    let path = repo_root()
        .join("target")
        .join(dir)
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make test-plugins` first (`make test` does)",
        path.display()
    );
    path
}

/// One wasm runtime per test binary, with a compile cache shared by the test run.
pub fn runtime() -> Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Runtime::new(RuntimeConfig {
                cache_dir: Some(repo_root().join("target/test-compile-cache")),
                ..RuntimeConfig::default()
            })
            .expect("the wasm runtime starts")
        })
        .clone()
}

/// A running controller for one plugin; stopped (gracefully) by [`Host::stop`].
pub struct Host {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    pub metrics: Arc<Metrics>,
}

impl Host {
    /// Installs the plugin's CRD and starts its controller for `namespace` only, so tests in
    /// other namespaces (and other test binaries) never see each other's objects.
    pub async fn start(plugin: PathBuf, namespace: &str) -> Host {
        // The host's logs appear in the output of a failing test (RUST_LOG to change the filter).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("operator_host=debug")),
            )
            .with_test_writer()
            .try_init();
        let client = crate::devcluster::client().await;
        let plugin = Plugin::load(&runtime(), &plugin).expect("the plugin loads");
        controller::install_crd(&client, &plugin)
            .await
            .expect("the plugin's CRD installs");
        let config = RunConfig {
            plugins_dir: plugin.path.clone(),
            namespace: Some(namespace.to_string()),
            install_crds: false,
            metrics_addr: None,
            resync: Duration::from_secs(300),
            concurrency: 16,
        };
        let metrics = Arc::new(Metrics::new());
        let (stop, stopped) = oneshot::channel::<()>();
        let task_metrics = metrics.clone();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            controller::run_plugin(client, plugin, &config, task_metrics, shutdown).await;
        });
        Host {
            stop: Some(stop),
            task,
            metrics,
        }
    }

    /// Stops taking new work and waits for in-flight reconciles.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// The count of reconciles that ended with `result` (`success` or a reason).
    pub fn reconciles(&self, result: &str) -> u64 {
        let text = self.metrics.encode();
        text.lines()
            .filter(|l| {
                l.starts_with("operator_host_reconciles_total")
                    && l.contains(&format!("result=\"{result}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}
