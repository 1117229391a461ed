//! The run loop: one kube-runtime controller per plugin, sharing one client, runtime and metrics.
//!
//! Each controller watches its plugin's parent kind, and each declared child kind through a
//! reflector restricted (by label selector) to objects this host manages for that plugin.
//! The reflector caches are what a reconcile presents to the plugin as "observed"; their
//! watch events also re-trigger the owning parent, which is how status follows the
//! children's current state.

mod reconcile;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Semaphore;

use crate::metrics::{Metrics, VersionLabels};
use crate::plan::{MANAGED_BY, MANAGED_BY_LABEL, PLUGIN_LABEL};
use crate::plugin::{KindRef, Plugin};
use crate::runtime::Runtime;

pub use reconcile::Error;

/// The field manager of every write the host makes.
pub const FIELD_MANAGER: &str = "operator-host";

/// Why the run loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read the plugin directory {}: {source}", dir.display())]
    ReadPluginDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("no plugin in {} could be loaded", dir.display())]
    NoPlugins { dir: PathBuf },
    #[error("two plugins reconcile {kind}: {first} and {second}")]
    DuplicateParent {
        kind: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("cannot install the CRD {name} of plugin {plugin}: {source}")]
    InstallCrd {
        plugin: String,
        name: String,
        source: kube::Error,
    },
    #[error("the CRD {name} of plugin {plugin} did not become Established within {timeout:?}")]
    CrdNotEstablished {
        plugin: String,
        name: String,
        timeout: Duration,
    },
    #[error(transparent)]
    Metrics(#[from] crate::metrics::Error),
}

/// How `operator-host run` is configured.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub plugins_dir: PathBuf,
    pub namespace: Option<String>,
    pub install_crds: bool,
    pub metrics_addr: Option<SocketAddr>,
    /// Reconcile every parent at least this often.
    pub resync: Duration,
    /// Most reconciles running at once, per plugin.
    pub concurrency: u16,
}

/// Everything a reconcile of one plugin needs; shared by its controller's tasks.
pub struct PluginContext {
    pub plugin: Arc<Plugin>,
    pub client: Client,
    pub namespace: Option<String>,
    pub child_stores: Vec<(KindRef, reflector::Store<DynamicObject>)>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub resync: Duration,
    /// Bounds concurrent sandboxed calls of this plugin (its share of the CPU).
    pub call_slots: Semaphore,
    /// Consecutive failures per parent, for exponential backoff.
    pub failures: std::sync::Mutex<HashMap<String, u32>>,
}

/// Loads every `*.wasm` in `dir`; a plugin that fails to load is reported and skipped.
pub fn load_plugins(runtime: &Arc<Runtime>, dir: &Path) -> Result<Vec<Plugin>, RunError> {
    let entries = std::fs::read_dir(dir).map_err(|source| RunError::ReadPluginDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    paths.sort();
    let mut plugins: Vec<Plugin> = Vec::new();
    for path in paths {
        match Plugin::load(runtime, &path) {
            Ok(plugin) => {
                if let Some(other) = plugins.iter().find(|p| p.decl.parent == plugin.decl.parent) {
                    return Err(RunError::DuplicateParent {
                        kind: plugin.decl.parent.to_string(),
                        first: other.path.clone(),
                        second: path,
                    });
                }
                tracing::info!(
                    plugin = %plugin.decl.name,
                    version = %plugin.decl.version,
                    sha256 = %plugin.decl.content_hash,
                    parent = %plugin.decl.parent,
                    cache = ?plugin.compiled.cache_outcome(),
                    "loaded plugin"
                );
                plugins.push(plugin);
            }
            Err(error) => tracing::error!(path = %path.display(), %error, "plugin not loaded"),
        }
    }
    if plugins.is_empty() {
        return Err(RunError::NoPlugins {
            dir: dir.to_path_buf(),
        });
    }
    Ok(plugins)
}

/// Applies the plugin's CRD and waits until the API server serves it.
pub async fn install_crd(client: &Client, plugin: &Plugin) -> Result<(), RunError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = plugin.decl.crd.metadata.name.clone().unwrap_or_default();
    let install_error = |source| RunError::InstallCrd {
        plugin: plugin.decl.name.clone(),
        name: name.clone(),
        source,
    };
    crds.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&plugin.decl.crd),
    )
    .await
    .map_err(install_error)?;
    let timeout = Duration::from_secs(30);
    tokio::time::timeout(
        timeout,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| RunError::CrdNotEstablished {
        plugin: plugin.decl.name.clone(),
        name: name.clone(),
        timeout,
    })?
    .map_err(|e| RunError::CrdNotEstablished {
        plugin: format!("{} ({e})", plugin.decl.name),
        name: name.clone(),
        timeout,
    })?;
    tracing::info!(plugin = %plugin.decl.name, crd = %name, "CRD installed and established");
    Ok(())
}

/// Label selector of the children this host manages for `plugin`.
pub fn managed_children_selector(plugin: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY},{PLUGIN_LABEL}={plugin}")
}

fn api_for(client: &Client, kind: &KindRef, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = kind.api_resource();
    match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

/// Runs the controller of one plugin until `shutdown` resolves; in-flight reconciles finish.
pub async fn run_plugin(
    client: Client,
    plugin: Plugin,
    config: &RunConfig,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let plugin = Arc::new(plugin);
    let decl = &plugin.decl;
    metrics
        .plugin_info
        .get_or_create(&VersionLabels {
            plugin: decl.name.clone(),
            version: decl.version.clone(),
            sha256: decl.content_hash.clone(),
        })
        .set(1);
    let namespace = config.namespace.as_deref();
    let parent_api = api_for(&client, &decl.parent, namespace);
    let mut controller = Controller::new_with(
        parent_api,
        watcher::Config::default(),
        decl.parent.api_resource(),
    )
    .with_config(controller::Config::default().concurrency(config.concurrency));

    let selector = managed_children_selector(&decl.name);
    let mut child_stores = Vec::new();
    for kind in &decl.children {
        let writer = Writer::new(kind.api_resource());
        let store = writer.as_reader();
        let stream = reflector::reflector(
            writer,
            watcher(
                api_for(&client, kind, namespace),
                watcher::Config::default().labels(&selector),
            ),
        )
        .default_backoff()
        .touched_objects();
        controller = controller.owns_stream_with(stream, kind.api_resource());
        child_stores.push((kind.clone(), store));
    }

    let context = Arc::new(PluginContext {
        plugin: plugin.clone(),
        client: client.clone(),
        namespace: config.namespace.clone(),
        child_stores,
        recorder: Recorder::new(
            client,
            Reporter {
                controller: FIELD_MANAGER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
        metrics,
        resync: config.resync,
        call_slots: Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get() * 2)),
        failures: Default::default(),
    });
    tracing::info!(plugin = %decl.name, parent = %decl.parent, children = decl.children.len(), "controller starting");
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(error = %error, "reconcile failed");
            }
        })
        .await;
    tracing::info!(plugin = %plugin.decl.name, "controller stopped");
}

/// Runs every plugin in `config.plugins_dir` until SIGTERM or SIGINT.
pub async fn run(client: Client, runtime: Arc<Runtime>, config: RunConfig) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::new());
    if let Some(addr) = config.metrics_addr {
        let bound = metrics.clone().serve(addr).await?;
        tracing::info!(%bound, "serving /metrics, /healthz and /readyz");
    }
    let plugins = load_plugins(&runtime, &config.plugins_dir)?;
    let mut startable = Vec::new();
    for plugin in plugins {
        if config.install_crds
            && let Err(error) = install_crd(&client, &plugin).await
        {
            tracing::error!(%error, "plugin not started");
            continue;
        }
        startable.push(plugin);
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for plugin in startable {
        let mut stop = stop_rx.clone();
        let shutdown = async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        };
        let (client, config, metrics) = (client.clone(), config.clone(), metrics.clone());
        tasks.push(tokio::spawn(async move {
            run_plugin(client, plugin, &config, metrics, shutdown).await;
        }));
    }
    metrics.set_ready(true);
    shutdown_signal().await;
    tracing::info!("shutting down: no new reconciles; waiting for those in flight");
    metrics.set_ready(false);
    let _ = stop_tx.send(true);
    for task in tasks {
        let _ = task.await;
    }
    Ok(())
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
