//! The fault campaigns' scenario: one plugin in one namespace, the host run as a process
//! (`operator-host-faulty`) through a fault proxy, the oracle, and a bystander the host must
//! never touch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use operator_host::plugin::Plugin;
use serde_json::{Value, json};

use crate::devcluster::{self, TestNamespace};
use crate::fault_proxy::{FaultProxy, Matcher};
use crate::host::{plugin_path, runtime};
use crate::oracle::{Bystanders, Oracle};
use crate::process_host::{Launch, ProcessHost};

/// How long the host may take to reach a crash point, and the state to converge after a fault.
pub const BOUND: Duration = Duration::from_secs(60);
/// How long the host must make no write once the state has converged.
pub const QUIET: Duration = Duration::from_secs(3);

/// One plugin in one namespace, the host run as a process through a fault proxy, and a
/// bystander the host must never touch.
pub struct Scenario {
    binary: PathBuf,
    pub ns: TestNamespace,
    pub plugins: tempfile::TempDir,
    pub plugin: Arc<Plugin>,
    pub proxy: FaultProxy,
    pub parents: Api<DynamicObject>,
    resource: ApiResource,
    bystanders: Bystanders,
}

impl Scenario {
    /// `binary` is the calling test's `env!("CARGO_BIN_EXE_operator-host-faulty")`; `dir` and
    /// `plugin` name a plugin built by `make test-plugins`, `resource` its parent kind.
    pub async fn new(
        binary: &str,
        test: &str,
        dir: &str,
        plugin: &str,
        resource: ApiResource,
    ) -> Scenario {
        let ns = TestNamespace::new(test).await.unwrap();
        let plugins = tempfile::tempdir().unwrap();
        let path = plugins.path().join(format!("{plugin}.wasm"));
        std::fs::copy(plugin_path(dir, plugin), &path).unwrap();
        let plugin = Arc::new(Plugin::load(&runtime(), &path).unwrap());
        // The parents are created before any host runs: their CRD must exist first (installed
        // as `run --install-crds` does, so the hosts of the scenario may update it).
        operator_host::controller::install_crd(&ns.client(), &plugin)
            .await
            .unwrap();
        let upstream = devcluster::cluster().config().await.unwrap();
        let proxy = FaultProxy::start(upstream).await.unwrap();
        // An object of a child kind, labelled like the host's children but owned by nobody.
        let config_maps: Api<DynamicObject> = Api::namespaced_with(
            ns.client(),
            ns.name(),
            &ApiResource::erase::<ConfigMap>(&()),
        );
        let bystander: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "bystander", "labels": {
                "app.kubernetes.io/managed-by": "operator-host",
                "operator-host.dev/plugin": plugin.decl.name,
            }},
            "data": {"k": "v"},
        }))
        .unwrap();
        let bystander = config_maps
            .create(&PostParams::default(), &bystander)
            .await
            .unwrap();
        let mut bystanders = Bystanders::default();
        bystanders.remember(&config_maps, &bystander);
        let parents = Api::namespaced_with(ns.client(), ns.name(), &resource);
        Scenario {
            binary: PathBuf::from(binary),
            ns,
            plugins,
            plugin,
            proxy,
            parents,
            resource,
            bystanders,
        }
    }

    /// The oracle of this scenario's plugin and namespace.
    pub fn oracle(&self) -> Oracle<'_> {
        Oracle {
            client: self.ns.client(),
            plugin: &self.plugin,
            namespace: self.ns.name(),
        }
    }

    /// Starts a host process (armed to abort after `crash_after`, if given), under the
    /// examples' policy (which lets the MySQL plugin read its root Secret, as hashes).
    pub fn host(&self, crash_after: Option<&str>) -> ProcessHost {
        let policy = devcluster::repo_root().join("examples/policy.yaml");
        let policy = policy.to_str().expect("a UTF-8 path");
        ProcessHost::start(&Launch {
            binary: &self.binary,
            plugins: self.plugins.path(),
            kubeconfig: &self.proxy.kubeconfig(),
            namespace: Some(self.ns.name()),
            crash_after,
            metrics_addr: None,
            install_crds: true,
            args: &["--policy", policy],
        })
    }

    /// Creates parent `name` with `spec`.
    pub async fn create(&self, name: &str, spec: Value) {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": {"name": name},
            "spec": spec,
        }))
        .unwrap();
        self.parents
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// Merges `spec` into parent `name`'s spec.
    pub async fn patch_spec(&self, name: &str, spec: Value) {
        crate::memcached::patch_spec(&self.parents, name, spec).await;
    }

    /// Runs a host that must abort at `step`, then one without crash points, and checks the
    /// oracle's verdict on parent `name`. Returns the time to converge after the restart.
    pub async fn crash_and_recover(&self, step: &str, name: &str) -> Duration {
        let mut crashing = self.host(Some(step));
        crashing.crashed(BOUND).await;
        let at_crash = self.oracle().child_uids(name).await.unwrap();
        let host = self.host(None);
        let converged = match self.oracle().converges(name, BOUND).await {
            Ok(took) => took,
            Err(error) => panic!(
                "after a crash at {step}, {name} did not converge within {BOUND:?}: {error}\nhost log:\n{}",
                host.log()
            ),
        };
        let after = self.oracle().child_uids(name).await.unwrap();
        for (child, uid) in &at_crash {
            assert_eq!(
                after.get(child),
                Some(uid),
                "{child} existed at the crash at {step} and must have survived it"
            );
        }
        self.assert_quiet(&host, step).await;
        host.kill().await;
        converged
    }

    /// No object the host does not own changed, and within [`BOUND`] the host falls quiet: a
    /// window of [`QUIET`] without a write, at whose end the oracle still holds. (Writes that
    /// follow the world, e.g. a status as pods become ready, may come first; a host in a loop
    /// never falls quiet.)
    pub async fn assert_quiet(&self, host: &ProcessHost, step: &str) {
        let touched = self.bystanders.touched().await;
        assert!(
            touched.is_empty(),
            "after a crash at {step}, touched: {touched:?}"
        );
        let writes = Matcher::writes();
        let started = std::time::Instant::now();
        let mut seen = Vec::new();
        while started.elapsed() < BOUND {
            let before = self.proxy.requests().len();
            tokio::time::sleep(QUIET).await;
            let during: Vec<String> = self.proxy.requests()[before..]
                .iter()
                .filter(|r| writes.matches(&r.method, &r.path, r.watch))
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            if during.is_empty() && self.converged().await {
                return;
            }
            seen.extend(during);
        }
        panic!(
            "after a crash at {step}, the host did not fall quiet within {BOUND:?}; its writes: \
             {seen:?}; log:\n{}",
            host.log()
        );
    }

    /// Whether every parent of the scenario is at the plugin's fixed point now.
    pub async fn converged(&self) -> bool {
        let parents = self.parents.list(&Default::default()).await.unwrap();
        for parent in &parents.items {
            if self.oracle().check(&parent.name_any()).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Deletes the namespace.
    pub async fn cleanup(self) {
        self.ns.cleanup().await.unwrap();
    }
}
