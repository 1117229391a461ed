//! Runs the operator host in-process for a test, confined to the test's namespaces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use operator_host::controller::{self, ControllerConfig, RunConfig};
use operator_host::metrics::Metrics;
use operator_host::policy::Policy;
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

/// The runtime configuration of tests: defaults, with a compile cache shared by the test run.
fn runtime_config() -> RuntimeConfig {
    RuntimeConfig {
        cache_dir: Some(repo_root().join("target/test-compile-cache")),
        ..RuntimeConfig::default()
    }
}

/// One wasm runtime per test binary.
pub fn runtime() -> Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| Runtime::new(runtime_config()).expect("the wasm runtime starts"))
        .clone()
}

/// The policy fitted to the runtime as `operator-host run` does it, and a runtime whose
/// instance slots hold the policy's largest memory limit: the shared one when they do,
/// otherwise one per slot size, kept for the test binary's later hosts.
fn fitted(policy: Policy) -> (Policy, Arc<Runtime>) {
    static LARGER: Mutex<BTreeMap<usize, Arc<Runtime>>> = Mutex::new(BTreeMap::new());
    let mut config = runtime_config();
    let policy = policy.fit_limits(&mut config.limits);
    let slot = config.limits.max_memory_bytes;
    if slot <= runtime().limits().max_memory_bytes {
        return (policy, runtime());
    }
    let mut larger = LARGER.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = larger
        .entry(slot)
        .or_insert_with(|| Runtime::new(config).expect("the wasm runtime starts"))
        .clone();
    (policy, runtime)
}

/// Puts `build` in place as `file` the way a release does: written aside, renamed over, so a
/// watching host never reads half of it.
pub fn publish(build: &Path, file: &Path) {
    let staged = file.with_extension("staged");
    std::fs::copy(build, &staged).unwrap();
    std::fs::rename(&staged, file).unwrap();
}

/// The host's run loop (`operator-host run`) over a plugin directory, confined to the given
/// namespaces; stopped (gracefully) by [`Host::stop`].
pub struct Host {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    pub metrics: Arc<Metrics>,
    /// The plugin directory when the host made it (see [`Host::start`]).
    _plugins_dir: Option<tempfile::TempDir>,
}

impl Host {
    /// Serves one plugin in `namespace` only, so tests in other namespaces (and other test
    /// binaries) never see each other's objects. The plugin is copied into a directory of
    /// its own; panics if it is not served.
    pub async fn start(plugin: PathBuf, namespace: &str) -> Host {
        Host::start_with_policy(plugin, namespace, Policy::default()).await
    }

    /// [`Host::start`] under the examples' policy (`examples/policy.yaml`), which lets the
    /// example plugins read the Secrets they declare, as hashes.
    pub async fn start_with_examples_policy(plugin: PathBuf, namespace: &str) -> Host {
        let path = repo_root().join("examples/policy.yaml");
        let text = std::fs::read_to_string(&path).expect("examples/policy.yaml is readable");
        let policy = Policy::parse(&text, &path).expect("examples/policy.yaml is a policy");
        Host::start_with_policy(plugin, namespace, policy).await
    }

    /// [`Host::start`] under `policy`.
    pub async fn start_with_policy(plugin: PathBuf, namespace: &str, policy: Policy) -> Host {
        let dir = tempfile::tempdir().expect("a temporary plugin directory");
        let name = plugin.file_name().expect("the plugin path names a file");
        std::fs::copy(&plugin, dir.path().join(name)).expect("the plugin is copied");
        let mut host =
            Host::start_dir_with_policy(dir.path().to_path_buf(), &[namespace], policy).await;
        host._plugins_dir = Some(dir);
        let served = host.metrics.encode();
        assert!(
            served.contains("operator_host_plugin{"),
            "{} was not loaded (see the log above); metrics:\n{served}",
            plugin.display()
        );
        host
    }

    /// Runs the host over `plugins_dir` (installing CRDs) in `namespaces`; returns once the
    /// plugins present at start are served.
    pub async fn start_dir(plugins_dir: PathBuf, namespaces: &[&str]) -> Host {
        Host::start_dir_with_policy(plugins_dir, namespaces, Policy::default()).await
    }

    /// [`Host::start_dir`] under `policy`.
    pub async fn start_dir_with_policy(
        plugins_dir: PathBuf,
        namespaces: &[&str],
        policy: Policy,
    ) -> Host {
        let client = crate::devcluster::client().await;
        Host::start_as(client, plugins_dir, namespaces, policy).await
    }

    /// [`Host::start_dir_with_policy`] with the credentials of `client` (e.g. a
    /// ServiceAccount's, to prove the host works under a given role).
    pub async fn start_as(
        client: kube::Client,
        plugins_dir: PathBuf,
        namespaces: &[&str],
        policy: Policy,
    ) -> Host {
        Host::start_as_with_install_crds(client, plugins_dir, namespaces, policy, true).await
    }

    /// [`Host::start_as`], installing the plugins' CRDs (`run --install-crds`) or not.
    pub async fn start_as_with_install_crds(
        client: kube::Client,
        plugins_dir: PathBuf,
        namespaces: &[&str],
        policy: Policy,
        install_crds: bool,
    ) -> Host {
        // The host's logs appear in the output of a failing test (RUST_LOG to change the filter).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("operator_host=debug")),
            )
            .with_test_writer()
            .try_init();
        let (policy, runtime) = fitted(policy);
        let config = RunConfig {
            plugins_dir,
            install_crds,
            metrics_addr: None,
            controllers: ControllerConfig {
                namespaces: namespaces.iter().map(|ns| ns.to_string()).collect(),
                resync: Duration::from_secs(300),
                concurrency: 16,
                leadership: operator_host::leader::Leadership::unelected(),
                shard: None,
                record: None,
                canary_failed: Default::default(),
            },
            policy: Arc::new(policy),
            leader_election: None,
            cluster_plugins: None,
            sharding: None,
            report: None,
            webhooks: None,
        };
        let metrics = Arc::new(Metrics::new());
        let (stop, stopped) = oneshot::channel::<()>();
        let task_metrics = metrics.clone();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            controller::run_with_metrics(client, runtime, config, task_metrics, shutdown)
                .await
                .expect("the host runs");
        });
        while !metrics.is_ready() {
            assert!(!task.is_finished(), "the host stopped while starting");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Host {
            stop: Some(stop),
            task,
            metrics,
            _plugins_dir: None,
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
        self.counter("operator_host_reconciles_total", |labels| {
            labels.contains(&format!("result=\"{result}\""))
        })
    }

    /// The count of reconciles of `plugin`, whatever their result.
    pub fn reconciles_of(&self, plugin: &str) -> u64 {
        self.counter("operator_host_reconciles_total", |labels| {
            labels.contains(&format!("plugin=\"{plugin}\""))
        })
    }

    /// The count of reconciles that did not succeed.
    pub fn reconciles_failed(&self) -> u64 {
        self.counter("operator_host_reconciles_total", |labels| {
            !labels.contains("result=\"success\"")
        })
    }

    /// The count of reconciles of `plugin` that did not succeed.
    pub fn reconciles_failed_of(&self, plugin: &str) -> u64 {
        self.counter("operator_host_reconciles_total", |labels| {
            labels.contains(&format!("plugin=\"{plugin}\""))
                && !labels.contains("result=\"success\"")
        })
    }

    /// The count of children applied (`operator_host_applies_total`) and of applies skipped
    /// because the cached child already held the body last applied.
    pub fn applies(&self) -> (u64, u64) {
        (
            self.counter("operator_host_applies_total", |_| true),
            self.counter("operator_host_applies_skipped_total", |_| true),
        )
    }

    /// The count of children pruned (`operator_host_prunes_total`) and of deletions the prune
    /// guard held (`operator_host_prunes_held_total`).
    pub fn prunes(&self) -> (u64, u64) {
        (
            self.counter("operator_host_prunes_total", |_| true),
            self.counter("operator_host_prunes_held_total", |_| true),
        )
    }

    /// The compiler tier (`baseline` or `optimized`) of the code `plugin` runs now.
    pub fn serving_tier(&self, plugin: &str) -> Option<String> {
        let encoded = self.metrics.encode();
        let line = encoded.lines().find(|l| {
            l.starts_with("operator_host_plugin{")
                && l.contains(&format!("plugin=\"{plugin}\""))
                && l.ends_with(" 1")
        })?;
        let tier = line.split("tier=\"").nth(1)?.split('"').next()?;
        Some(tier.to_string())
    }

    /// Whether the run loop is still going (it ends only on `stop` or an error).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// The count of plugin file changes that ended with `result` (`added`, `replaced`,
    /// `removed`, `rejected`).
    pub fn reloads(&self, result: &str) -> u64 {
        self.counter("operator_host_plugin_reloads_total", |labels| {
            labels.contains(&format!("result=\"{result}\""))
        })
    }

    /// The sum of the counter or gauge `name` over the label sets `labels` accepts.
    pub fn counter(&self, name: &str, labels: impl Fn(&str) -> bool) -> u64 {
        self.sum(name, labels) as u64
    }

    /// [`Host::counter`] of a metric whose values are not whole (a histogram's `_sum`).
    pub fn sum(&self, name: &str, labels: impl Fn(&str) -> bool) -> f64 {
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with(name) && labels(l))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}
