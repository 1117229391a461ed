//! Leader-election fixtures: host processes with `--leader-elect` in one namespace, each behind
//! a fault proxy of its own that records every request it makes, so tests and benchmarks know
//! which host wrote what, and when (all hosts use the same credentials and field manager, so the
//! API server cannot tell them apart). The Lease's own requests are the election's and are not
//! counted as a host's writes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use operator_host::plugin::Plugin;
use serde_json::json;

use crate::devcluster::{self, TestNamespace};
use crate::fault_proxy::{FaultProxy, Matcher};
use crate::host::{plugin_path, runtime};
use crate::memcached::{create, memcached_resource, patch_spec};
use crate::oracle::{Oracle, all_converge};
use crate::process_host::{Launch, ProcessHost, free_local_addr, http_get};

/// controller-runtime's lease duration, the host's default.
pub const LEASE: Duration = Duration::from_secs(15);
/// How long convergences of the tests' CRs may take (2 cores, two hosts, the control plane).
pub const CONVERGE: Duration = Duration::from_secs(120);

/// A namespace with the Memcached CRD installed, a plugin directory per plugin version, and
/// the parents' API.
pub struct Election {
    /// `env!("CARGO_BIN_EXE_operator-host-faulty")` of the calling test or benchmark.
    binary: std::path::PathBuf,
    pub ns: TestNamespace,
    /// A plugin directory holding the Memcached plugin.
    pub v1: tempfile::TempDir,
    pub plugin: Arc<Plugin>,
    pub parents: Api<DynamicObject>,
}

/// One host process of the election, behind its own proxy.
pub struct Candidate {
    pub name: String,
    pub proxy: FaultProxy,
    pub host: ProcessHost,
    pub metrics: std::net::SocketAddr,
}

/// A policy file (`run --policy`) whose rollouts are canaries on half the parents, held there
/// until approved: their analysis outlasts any test.
pub fn held_canary_policy() -> tempfile::NamedTempFile {
    let policy = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        policy.path(),
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  rollout: \
         {strategy: Canary, canaryPercent: 50, analysisSeconds: 3600}\n",
    )
    .unwrap();
    policy
}

/// A directory holding `plugin` (of `make test-plugins`' `dir`) as `memcached.wasm`.
pub fn plugin_dir(dir: &str, plugin: &str) -> tempfile::TempDir {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_path(dir, plugin),
        plugins.path().join("memcached.wasm"),
    )
    .unwrap();
    plugins
}

impl Election {
    pub async fn new(binary: &str, test: &str) -> Election {
        let ns = TestNamespace::new(test).await.unwrap();
        let v1 = plugin_dir("plugins", "memcached");
        let plugin = Arc::new(Plugin::load(&runtime(), &v1.path().join("memcached.wasm")).unwrap());
        // The CRs are created before the first host leads: their CRD must exist first.
        operator_host::controller::install_crd(&ns.client(), &plugin)
            .await
            .unwrap();
        let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
        Election {
            binary: binary.into(),
            ns,
            v1,
            plugin,
            parents,
        }
    }

    /// Starts host `name` serving the plugins in `plugins`, with leader election on.
    pub async fn candidate(&self, name: &str, plugins: &Path) -> Candidate {
        self.candidate_with(name, plugins, &[]).await
    }

    /// [`Election::candidate`] with more arguments of `run` (`--shard`).
    pub async fn candidate_with(&self, name: &str, plugins: &Path, more: &[&str]) -> Candidate {
        let proxy = FaultProxy::start(devcluster::cluster().config().await.unwrap())
            .await
            .unwrap();
        let metrics = free_local_addr();
        let mut args = vec![
            "--leader-elect",
            "--leader-elect-namespace",
            self.ns.name(),
            "--leader-elect-identity",
            name,
        ];
        args.extend_from_slice(more);
        let host = ProcessHost::start(&Launch {
            binary: &self.binary,
            plugins,
            kubeconfig: &proxy.kubeconfig(),
            namespace: Some(self.ns.name()),
            crash_after: None,
            metrics_addr: Some(metrics),
            install_crds: true,
            args: &args,
        });
        Candidate {
            name: name.into(),
            proxy,
            host,
            metrics,
        }
    }

    pub fn oracle<'a>(&'a self, plugin: &'a Plugin) -> Oracle<'a> {
        Oracle {
            client: self.ns.client(),
            plugin,
            namespace: self.ns.name(),
        }
    }

    /// Creates `count` Memcached CRs `m-<first>` .. with `size`; returns their names.
    pub async fn create_many(&self, first: usize, count: usize, size: u32) -> Vec<String> {
        let names: Vec<String> = (first..first + count).map(|i| format!("m-{i}")).collect();
        futures::stream::iter(&names)
            .for_each_concurrent(8, |name| async move {
                create(
                    &self.parents,
                    &memcached_resource(),
                    name,
                    json!({"size": size}),
                )
                .await;
            })
            .await;
        names
    }

    pub async fn resize(&self, names: &[String], size: u32) {
        futures::stream::iter(names)
            .for_each_concurrent(8, |name| async move {
                patch_spec(&self.parents, name, json!({"size": size})).await;
            })
            .await;
    }

    pub async fn converge(&self, plugin: &Plugin, names: &[String], when: &str) -> Duration {
        all_converge(&self.oracle(plugin), names, CONVERGE)
            .await
            .unwrap_or_else(|e| panic!("{when}: {e}"))
    }
}

impl Candidate {
    /// What `/readyz` says (`ready: leader`, `ready: standby (the leader is ...)`).
    pub async fn role(&self) -> String {
        http_get(self.metrics, "/readyz")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// Polls `/readyz` every 50 ms until it starts with `said`; returns how long that took.
    pub async fn wait_role(&mut self, said: &str, bound: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.role().await.starts_with(said) {
                return started.elapsed();
            }
            if started.elapsed() > bound {
                panic!(
                    "host {} did not say {said:?} within {bound:?} (it says {:?}); log tail:\n{}",
                    self.name,
                    self.role().await,
                    self.host.log_tail(60)
                );
            }
            self.host
                .assert_running(&format!("waiting for {said:?}"))
                .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// When the host's writes (anything but the Lease's) reached its proxy, in order.
    pub fn write_times(&self) -> Vec<(Instant, String)> {
        let writes = Matcher::writes();
        self.proxy
            .requests()
            .into_iter()
            .filter(|r| writes.matches(&r.method, &r.path, r.watch) && !r.path.contains("/leases"))
            .map(|r| (r.at, format!("{} {}", r.method, r.path)))
            .collect()
    }

    pub fn writes_since(&self, since: Instant) -> Vec<String> {
        self.write_times()
            .into_iter()
            .filter(|(at, _)| *at >= since)
            .map(|(_, write)| write)
            .collect()
    }
}
