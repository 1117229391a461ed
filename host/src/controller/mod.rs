//! The run loop: kube-runtime controllers for every plugin, kept in step with the plugin
//! directory, sharing one client, runtime and metrics.
//!
//! Each plugin gets one controller per configured namespace (or one for the whole cluster).
//! A controller watches its plugin's parent kind, and each declared child kind through a
//! reflector restricted (by label selector) to objects this host manages for that plugin.
//! The reflector caches are what a reconcile presents to the plugin as "observed"; their
//! watch events also re-trigger the owning parent, which is how status follows the
//! children's current state.
//!
//! The [`Supervisor`] follows the [`Registry`]: a new plugin file starts its controllers, new
//! content is swapped in under the running controllers (or restarts them when the watched
//! kinds changed), and a removed file stops them without touching what they manage.

mod canary;
mod crd;
mod discovery;
mod handover;
mod reconcile;
mod rollout_gate;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use tokio::sync::Semaphore;

use crate::leader::{self, Leadership};
use crate::metrics::Metrics;
use crate::operator_plugin;
use crate::plan::{MANAGED_BY, MANAGED_BY_LABEL, PLUGIN_LABEL};
use crate::plugin::{KindRef, Plugin, Related};
use crate::policy::{Effective, Policy};
use crate::registry::{Proposal, Registry};
use crate::runtime::{RelatedSelector, Runtime};
use crate::shard::{self, Sharding};
use crate::watch;

pub use crd::install_crd;
pub use discovery::check_served_kinds;
pub use handover::PLUGIN_REMOVED;
pub use reconcile::{Error, FINALIZER};

/// The field manager of every write the host makes.
pub const FIELD_MANAGER: &str = "operator-host";

/// Why the run loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Watch(#[from] watch::Error),
    #[error(transparent)]
    Crd(#[from] crd::Error),
    #[error(transparent)]
    Metrics(#[from] crate::metrics::Error),
    #[error(
        "standing by: the CRD {crd} of plugin {plugin} is not installed yet; the leader \
         installs it (or this host, once it leads)"
    )]
    CrdAwaitsLeader { plugin: String, crd: String },
    #[error(transparent)]
    OperatorPlugin(#[from] operator_plugin::Error),
    #[error(transparent)]
    Kinds(#[from] discovery::Error),
    #[error(
        "plugin {plugin}: the new version (sha256 {sha256}) is held before serving: {hold}; \
         the serving version goes on. `operator-host diff` prints its plans parent by parent; \
         to let it serve, approve it: {approve}"
    )]
    RolloutHeld {
        plugin: String,
        sha256: String,
        hold: String,
        approve: String,
    },
    #[error(
        "plugin {plugin}: the new version (sha256 {sha256}) serves its canary parents: \
         {succeeded} of {parents} reconciled on it so far"
    )]
    CanaryAnalysing {
        plugin: String,
        sha256: String,
        parents: usize,
        succeeded: usize,
    },
    #[error(
        "plugin {plugin}: the new version (sha256 {sha256}) failed on a canary parent and was \
         rolled back; the serving version serves every parent again ({failure})"
    )]
    CanaryFailed {
        plugin: String,
        sha256: String,
        failure: String,
    },
    #[error(
        "plugin {plugin}: the canary of the new version (sha256 {sha256}) cannot be chosen or \
         judged now: {source}"
    )]
    CanaryUnjudged {
        plugin: String,
        sha256: String,
        source: crate::diff::live::Error,
    },
}

impl RunError {
    /// Whether the failure is about the plugin's content (remembered by content hash until
    /// the file changes) rather than about the cluster (retried with backoff).
    fn is_about_content(&self) -> bool {
        match self {
            RunError::Crd(error) => error.is_about_content(),
            RunError::Kinds(error) => error.is_about_content(),
            RunError::Watch(_)
            | RunError::Metrics(_)
            | RunError::CrdAwaitsLeader { .. }
            | RunError::OperatorPlugin(_)
            | RunError::RolloutHeld { .. }
            | RunError::CanaryAnalysing { .. }
            | RunError::CanaryUnjudged { .. } => false,
            // Remembered: the same content is not tried again until it changes.
            RunError::CanaryFailed { .. } => true,
        }
    }
}

/// The first retry of plugin changes that could not take effect; doubled up to
/// [`LOAD_RETRY_MAX`].
const LOAD_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between retries of plugin changes that could not take effect.
const LOAD_RETRY_MAX: Duration = Duration::from_secs(60);

/// When to rescan the plugin directory because a change could not take effect for a
/// reason outside the plugin (the API server, a CRD someone else owns, permissions).
#[derive(Debug, Default)]
struct LoadRetry {
    delay: Option<Duration>,
    at: Option<tokio::time::Instant>,
}

impl LoadRetry {
    /// After a sync: schedule the next retry (backing off) if something was deferred,
    /// forget the backoff otherwise.
    fn after_sync(&mut self, deferred: bool) {
        if !deferred {
            *self = LoadRetry::default();
            return;
        }
        let delay = self
            .delay
            .map_or(LOAD_RETRY_FIRST, |d| (d * 2).min(LOAD_RETRY_MAX));
        self.delay = Some(delay);
        self.at = Some(tokio::time::Instant::now() + delay);
    }

    /// Resolves when the retry is due; never when none is scheduled.
    async fn due(&self) {
        match self.at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }
}

/// How long a shutdown waits for reconciles in flight: a Kubernetes pod gets 30 s after
/// SIGTERM by default, and the host promises to exit within 10 s whatever it is doing.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// How `operator-host run` is configured.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub plugins_dir: PathBuf,
    pub install_crds: bool,
    pub metrics_addr: Option<SocketAddr>,
    pub controllers: ControllerConfig,
    /// What each plugin may produce, and its limits ([`Policy::default`]: the safe defaults).
    pub policy: Arc<Policy>,
    /// Leader election; `controllers.leadership` must be the one it drives.
    pub leader_election: Option<leader::LeaderElection>,
    /// Also serve the plugins the cluster declares as `OperatorPlugin`s.
    pub cluster_plugins: Option<ClusterPluginsConfig>,
    /// Share the parents with the other replicas (`run --shard`; needs `leader_election`,
    /// whose leader assigns them).
    pub sharding: Option<Sharding>,
}

/// Where the plugins of `OperatorPlugin`s are kept, and where their pull Secrets are read.
#[derive(Debug, Clone)]
pub struct ClusterPluginsConfig {
    /// Pulled artifacts by digest (a volume that outlives the container, to serve through a
    /// registry outage after a restart).
    pub store_dir: PathBuf,
    /// The host's namespace.
    pub namespace: String,
    /// Only the OperatorPlugins with these labels (one host deployment of several).
    pub selector: Option<String>,
}

/// How each plugin's controllers run.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The namespaces to reconcile in; empty means all.
    pub namespaces: Vec<String>,
    /// Reconcile every parent at least this often.
    pub resync: Duration,
    /// Most reconciles running at once, per plugin and namespace.
    pub concurrency: u16,
    /// Whether this host may write now ([`Leadership::unelected`] without leader election).
    pub leadership: Leadership,
    /// With sharding: this replica's shard (set by [`run`] from [`RunConfig::sharding`]).
    pub shard: Option<ShardScope>,
    /// The flight recorder (`run --record`), if on: each reconcile's inputs are kept.
    pub record: Option<crate::recording::FlightRecorder>,
    /// Woken when a canary parent fails: the run loop judges the canary at once rather than
    /// at its next retry.
    pub canary_failed: Arc<tokio::sync::Notify>,
}

/// What the controllers of a sharded replica need to know of the ring.
#[derive(Debug, Clone)]
pub struct ShardScope {
    /// This replica's shard: it watches and reconciles only the parents labelled with it.
    pub shard: String,
    /// Open while its shard Lease is fresh: what gates its reconciles.
    pub fence: Leadership,
    /// The ring, for the leader's sharders.
    pub members: tokio::sync::watch::Receiver<shard::Members>,
}

/// The cache of one child kind (what a reconcile presents to the plugin as observed), or of
/// the objects of one related declaration.
pub struct ChildCache {
    pub kind: KindRef,
    pub store: reflector::Store<DynamicObject>,
    /// The watch's last error while it has not (re)synced, e.g. a 403 for a missing
    /// permission or a 404 for a kind the API server does not serve.
    pub last_error: Arc<Mutex<Option<String>>>,
}

/// Everything a reconcile of one plugin in one namespace (or all) needs; shared by its
/// controller's tasks.
pub struct PluginContext {
    /// The live version; a reload swaps it, and each reconcile uses the one it started with.
    pub plugin: Arc<ArcSwap<Plugin>>,
    pub client: Client,
    pub child_caches: Vec<ChildCache>,
    /// One per related declaration of the plugin (contract 0.2.0), in its order.
    pub related_caches: Vec<ChildCache>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub resync: Duration,
    /// Bounds concurrent sandboxed calls of this plugin across its namespaces (its share of
    /// the CPU).
    pub call_slots: Arc<Semaphore>,
    /// What the host remembers per parent: backoff, status churn.
    pub parents: Arc<reconcile::ParentStates>,
    /// The plugin's write budget (`writeBudget`), shared by all its parents in every
    /// namespace: each API write a reconcile causes waits for a token.
    pub write_budget: Arc<governor::DefaultDirectRateLimiter>,
    /// Each parent's share of it.
    pub write_share: reconcile::WriteShare,
    /// The deletions this controller's plugin made unasked, and the version it holds
    /// (`pruneGuard`): per controller, like the children it counts them against.
    pub prune_guard: reconcile::PruneGuard,
    /// In observe mode: the parents whose last observation found drift.
    pub drifted: reconcile::DriftedParents,
    /// The canary of a new version under way, if any: its parents are reconciled by it.
    pub canary: Arc<canary::CanarySlot>,
    /// The flight recorder, if on.
    pub flight_recorder: Option<crate::recording::FlightRecorder>,
    /// Becomes true when the controller stops: a reconcile waiting for caches then gives up
    /// (the watches that would fill them are no longer polled).
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// A standby reconciles nothing (its caches stay warm); the fence refuses its writes.
    /// With sharding, the replica's shard fence.
    pub leadership: Leadership,
    /// With sharding: this replica's shard; a reconcile goes on only for its own parents.
    pub shard: Option<String>,
}

/// The token bucket of `rules.writeBudget`.
fn write_budget(rules: &Effective) -> governor::DefaultDirectRateLimiter {
    let per_second = NonZeroU32::new(rules.writes_per_second).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(rules.write_burst).unwrap_or(NonZeroU32::MIN);
    governor::RateLimiter::direct(governor::Quota::per_second(per_second).allow_burst(burst))
}

/// The recorder of the host's events (the pod's name, if it has one, as the instance).
fn recorder(client: &Client) -> Recorder {
    Recorder::new(
        client.clone(),
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        },
    )
}

/// How `/readyz` names what of `plugin` cannot be served.
fn unavailable_prefix(plugin: &str) -> String {
    format!("plugin {plugin}: ")
}

/// How `/readyz` names a plugin file whose change could not take effect (then its path).
const UNAVAILABLE_FILE: &str = "plugin file ";

/// Label selector of the children this host manages for `plugin`.
pub fn managed_children_selector(plugin: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY},{PLUGIN_LABEL}={plugin}")
}

fn api_for(client: &Client, kind: &KindRef, namespace: Option<&str>) -> Api<DynamicObject> {
    kind.api(client, namespace)
}

/// The controllers of one plugin (one per configured namespace, or one for all), serving
/// whichever version of the plugin is current.
pub struct PluginController {
    current: Arc<ArcSwap<Plugin>>,
    metrics: Arc<Metrics>,
    stop: tokio::sync::watch::Sender<bool>,
    reconcile_all: Vec<futures::channel::mpsc::UnboundedSender<()>>,
    /// Each controller's task and its parent cache.
    tasks: Vec<(tokio::task::JoinHandle<()>, reflector::Store<DynamicObject>)>,
    /// Each controller's context: its caches and prune guard.
    contexts: Vec<Arc<PluginContext>>,
    /// The canary under way, shared with the contexts.
    canary: Arc<canary::CanarySlot>,
    /// With sharding: the sharder of each controller's parents (active while leading).
    sharders: Vec<tokio::task::JoinHandle<()>>,
    /// The namespace each controller serves (`None`: all).
    scopes: Vec<Option<String>>,
}

impl std::fmt::Debug for PluginController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginController")
            .field("plugin", &self.current.load().decl.name)
            .field("controllers", &self.tasks.len())
            .finish()
    }
}

impl PluginController {
    /// Starts the controllers of `plugin` under the policy it carries: only the child kinds
    /// it allows are watched, and every plan is checked against it.
    pub fn start(
        client: &Client,
        plugin: Arc<Plugin>,
        config: &ControllerConfig,
        metrics: &Arc<Metrics>,
    ) -> Self {
        let policy = plugin.policy.clone();
        let current = Arc::new(ArcSwap::new(plugin.clone()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let rules = policy.rules(&plugin.decl.name);
        let write_budget = Arc::new(write_budget(rules));
        let write_share = reconcile::WriteShare::of(rules.writes_per_second, rules.write_burst);
        let call_slots = Arc::new(Semaphore::new(
            policy
                .max_concurrent_calls(&plugin.decl.name)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() * 2)),
        ));
        let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
            vec![None]
        } else {
            config.namespaces.iter().cloned().map(Some).collect()
        };
        // A sharded replica writes while its shard Lease is fresh, whoever leads.
        let write_gate = config
            .shard
            .as_ref()
            .map_or_else(|| config.leadership.clone(), |s| s.fence.clone());
        let shard_name = config.shard.as_ref().map(|s| s.shard.clone());
        let mut reconcile_all = Vec::new();
        let mut tasks = Vec::new();
        let mut contexts = Vec::new();
        let canary_slot = Arc::new(canary::CanarySlot::new(config.canary_failed.clone()));
        let mut sharders = Vec::new();
        for namespace in scopes.clone() {
            let (trigger, triggered) = futures::channel::mpsc::unbounded();
            let stopping = stopped.clone();
            let shutdown = {
                let mut stopped = stopped.clone();
                async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                }
            };
            let plugin = current.load_full();
            let parents = Arc::new(reconcile::ParentStates::default());
            let (controller, parent_cache, child_caches, related_caches) = build_controller(
                client,
                &plugin,
                &policy.allowed_children(&plugin.decl),
                Scope {
                    namespace: namespace.as_deref(),
                    shard: shard_name.as_deref(),
                },
                config.concurrency,
                metrics,
                &parents,
            );
            if let Some(scope) = &config.shard {
                let sharder = shard::Sharder::new(
                    client,
                    &plugin.decl.name,
                    &plugin.decl.parent,
                    namespace.as_deref(),
                    scope.members.clone(),
                    config.leadership.clone(),
                    metrics.clone(),
                    format!(
                        "{}sharding {}",
                        unavailable_prefix(&plugin.decl.name),
                        namespace.as_deref().unwrap_or("all namespaces")
                    ),
                );
                let mut stopped = stopped.clone();
                sharders.push(tokio::spawn(sharder.run(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })));
            }
            let context = Arc::new(PluginContext {
                plugin: current.clone(),
                client: client.clone(),
                child_caches,
                related_caches,
                recorder: recorder(client),
                metrics: metrics.clone(),
                resync: config.resync,
                call_slots: call_slots.clone(),
                parents,
                write_budget: write_budget.clone(),
                write_share,
                prune_guard: reconcile::PruneGuard::default(),
                drifted: reconcile::DriftedParents::default(),
                canary: canary_slot.clone(),
                flight_recorder: config.record.clone(),
                stopping,
                leadership: write_gate.clone(),
                shard: shard_name.clone(),
            });
            contexts.push(context.clone());
            let scope = namespace.unwrap_or_else(|| "all namespaces".into());
            tracing::info!(plugin = %plugin.decl.name, parent = %plugin.decl.parent, children = plugin.decl.children.len(), %scope, "controller starting");
            // A host that becomes the leader reconciles every parent: as a standby it did not.
            let triggered = futures::stream::select(triggered, write_gate.gained());
            // The name only: the task outlives this version, which must go once replaced.
            let name = plugin.decl.name.clone();
            drop(plugin);
            let task = tokio::spawn(async move {
                controller
                    .reconcile_all_on(triggered)
                    .graceful_shutdown_on(shutdown)
                    .run(reconcile::reconcile, reconcile::error_policy, context)
                    .for_each(|result| async move {
                        if let Err(error) = result {
                            tracing::debug!(error = %error, "reconcile failed");
                        }
                    })
                    .await;
                tracing::info!(plugin = %name, %scope, "controller stopped");
            });
            tasks.push((task, parent_cache));
            reconcile_all.push(trigger);
        }
        PluginController {
            current,
            metrics: metrics.clone(),
            stop,
            reconcile_all,
            tasks,
            contexts,
            canary: canary_slot,
            sharders,
            scopes,
        }
    }

    /// Every object of `kind` in the namespaces these controllers serve (every shard's), from
    /// the API server: what the canary and the rollout gate need beyond the caches.
    async fn list_served(
        &self,
        kind: &KindRef,
        params: &kube::api::ListParams,
        what: &'static str,
    ) -> Result<Vec<serde_json::Value>, crate::diff::live::Error> {
        let Some(context) = self.contexts.first() else {
            return Ok(Vec::new());
        };
        let namespaces: Vec<Option<&str>> = self.scopes.iter().map(Option::as_deref).collect();
        crate::diff::live::list(&context.client, kind, &namespaces, params, what).await
    }

    /// The version being served.
    pub fn current(&self) -> Arc<Plugin> {
        self.current.load_full()
    }

    /// Serves `plugin` from now on: reconciles already running finish on the version they
    /// started with. With `reconcile_all`, every parent is reconciled again by the new
    /// version (a new build); without, the code changed but not the logic (a tier-up).
    pub fn swap(&self, plugin: Arc<Plugin>, reconcile_all: bool) {
        self.current.store(plugin);
        if reconcile_all {
            self.reconcile_all();
        }
    }

    /// Has every parent reconciled again.
    fn reconcile_all(&self) {
        for trigger in &self.reconcile_all {
            let _ = trigger.unbounded_send(());
        }
    }

    /// Stops taking new work and waits for the reconciles in flight. A controller whose parent
    /// cache has not synced yet has none (kube-runtime holds every reconcile until it has), and
    /// would wait for a cache nobody feeds any more: it is ended at once.
    pub async fn stop(self) {
        use futures::FutureExt;
        let _ = self.stop.send(true);
        for (task, parent_cache) in self.tasks {
            if parent_cache.wait_until_ready().now_or_never().is_none() {
                task.abort();
            }
            let _ = task.await;
        }
        for sharder in self.sharders {
            let _ = sharder.await;
        }
        let name = &self.current.load().decl.name;
        self.metrics.clear_unavailable(&unavailable_prefix(name));
    }
}

/// Which parents one controller serves: those of a namespace (or all), and with sharding only
/// those labelled with its shard.
#[derive(Debug, Clone, Copy)]
struct Scope<'a> {
    namespace: Option<&'a str>,
    shard: Option<&'a str>,
}

/// A controller of `plugin`'s parent kind in `scope`, fed by the watches of its `children`
/// kinds (only objects the host manages for this plugin, in its shard) and of its related
/// objects (a change reconciles the parents that refer to the object); its parent cache, the
/// children's caches and the related ones.
fn build_controller(
    client: &Client,
    plugin: &Plugin,
    children: &[KindRef],
    scope: Scope<'_>,
    concurrency: u16,
    metrics: &Arc<Metrics>,
    parent_states: &Arc<reconcile::ParentStates>,
) -> (
    Controller<DynamicObject>,
    reflector::Store<DynamicObject>,
    Vec<ChildCache>,
    Vec<ChildCache>,
) {
    let decl = &plugin.decl;
    let namespace = scope.namespace;
    let shard_selector = scope
        .shard
        .map(|shard| format!("{}={shard}", shard::SHARD_LABEL));
    let mut parent_watch = watcher::Config::default();
    if let Some(selector) = &shard_selector {
        parent_watch = parent_watch.labels(selector);
    }
    let shard_parents = scope.shard.map(|_| {
        metrics
            .shard_parents
            .get_or_create(&crate::metrics::NamespaceLabels {
                plugin: decl.name.clone(),
                namespace: namespace.unwrap_or_default().to_string(),
            })
            .clone()
    });
    let parent_writer = Writer::new(decl.parent.api_resource());
    let parents = parent_writer.as_reader();
    // Changes of a parent's status alone do not trigger a reconcile: the host writes the
    // status itself, and a plugin whose status changes on every call would otherwise be
    // called again after every write. Resyncs and child changes still reconcile.
    let parent_changes = watcher(api_for(client, &decl.parent, namespace), parent_watch)
        .default_backoff()
        .modify(strip_unread_fields)
        .reflect(parent_writer)
        .inspect({
            let states = parent_states.clone();
            let parents = parents.clone();
            move |event| {
                reconcile::forget_gone_parents(&states, &parents, event);
                if let Some(gauge) = &shard_parents {
                    gauge.set(i64::try_from(parents.len()).unwrap_or(i64::MAX));
                }
            }
        })
        .touched_objects()
        .predicate_filter(desired_state, PredicateConfig::default());
    let mut controller =
        Controller::for_stream_with(parent_changes, parents.clone(), decl.parent.api_resource())
            .with_config(controller::Config::default().concurrency(concurrency));
    let selector = match &shard_selector {
        Some(shard) => format!("{},{shard}", managed_children_selector(&decl.name)),
        None => managed_children_selector(&decl.name),
    };
    let cache = |kind: &KindRef, config: watcher::Config, what: String| {
        let writer = Writer::new(kind.api_resource());
        let store = writer.as_reader();
        let last_error = Arc::new(Mutex::new(None));
        let recorded = last_error.clone();
        let metrics = metrics.clone();
        let stream = reflector::reflector(
            writer,
            watcher(api_for(client, kind, namespace), config).modify(strip_unread_fields),
        )
        .default_backoff()
        .inspect(move |event| {
            let problem = event.as_ref().err().map(ToString::to_string);
            metrics.set_unavailable(&what, problem.clone());
            *recorded.lock().unwrap_or_else(|e| e.into_inner()) = problem;
        })
        .touched_objects();
        let cache = ChildCache {
            kind: kind.clone(),
            store,
            last_error,
        };
        (stream, cache)
    };
    let scope = namespace.unwrap_or("all namespaces");
    let mut child_caches = Vec::new();
    for kind in children {
        let what = format!(
            "{}child kind {kind} in {scope}",
            unavailable_prefix(&decl.name)
        );
        let (stream, child_cache) = cache(kind, watcher::Config::default().labels(&selector), what);
        controller = controller.owns_stream_with(stream, kind.api_resource());
        child_caches.push(child_cache);
    }
    let mut related_caches = Vec::new();
    for related in &decl.related {
        let kind = &related.kind;
        let what = format!(
            "{}related kind {kind} ({:?}) in {scope}",
            unavailable_prefix(&decl.name),
            related.name,
        );
        // A selector narrows the watch on the API server; by name, any object of the kind
        // may be named by some parent.
        let mut config = watcher::Config::default();
        if let RelatedSelector::LabelSelector(selector) = &related.selector
            && let Ok(selector) = crate::labels::parse(selector)
        {
            config = config.labels(&selector.to_string());
        }
        let (stream, related_cache) = cache(kind, config, what);
        let mapper = {
            let parents = parents.clone();
            let parent_kind = decl.parent.api_resource();
            let related = related.clone();
            move |object: DynamicObject| {
                referring_parents(&parents, &parent_kind, &related, &object)
            }
        };
        controller = controller.watches_stream_with(stream, mapper, kind.api_resource());
        related_caches.push(related_cache);
    }
    (controller, parents, child_caches, related_caches)
}

/// The parents in `parents` that refer to `object` through `related`.
fn referring_parents(
    parents: &reflector::Store<DynamicObject>,
    parent_kind: &kube::core::ApiResource,
    related: &Related,
    object: &DynamicObject,
) -> Vec<reflector::ObjectRef<DynamicObject>> {
    let Some(object_json) = related.kind.to_json(object) else {
        return Vec::new();
    };
    let namespace = object.metadata.namespace.clone();
    parents
        .state()
        .into_iter()
        .filter(|parent| parent.metadata.namespace == namespace)
        .filter(|parent| {
            serde_json::to_value(&**parent)
                .is_ok_and(|p| crate::related::refers_to(related, &p, &object_json))
        })
        .map(|parent| reflector::ObjectRef::from_obj_with(&*parent, parent_kind.clone()))
        .collect()
}

/// Drops what neither the host nor a plugin reads before an object enters a cache, as
/// controller-runtime's cache transforms do: `managedFields`, often the largest part of an
/// object, which plugins are never shown and server-side apply never needs client-side.
fn strip_unread_fields(object: &mut DynamicObject) {
    object.metadata.managed_fields = None;
}

/// A hash of what a parent's reconcile follows from, other than its status: generation
/// (spec), labels, annotations, finalizers and deletion.
fn desired_state(parent: &DynamicObject) -> Option<u64> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parent.metadata.generation.hash(&mut hasher);
    parent.metadata.labels.hash(&mut hasher);
    parent.metadata.annotations.hash(&mut hasher);
    parent.metadata.finalizers.hash(&mut hasher);
    parent
        .metadata
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// What the CRD step of a plugin's start did.
enum CrdStep {
    /// Without `--install-crds`: nothing.
    NotInstalling,
    /// The CRD is installed (created, updated or found as it should be).
    Installed,
    /// A standby found the leader's CRD and serves it as it is.
    LeftToLeader,
}

/// The controllers of every served plugin file, kept in step with the registry.
struct Supervisor {
    client: Client,
    config: RunConfig,
    metrics: Arc<Metrics>,
    controllers: HashMap<PathBuf, PluginController>,
    /// Plugin files started as a standby without installing their CRD (the leader's was
    /// there): installed when this host takes over.
    crds_left_to_leader: std::collections::HashSet<PathBuf>,
    /// The cluster's plugins, whose OperatorPlugins approve held rollouts.
    cluster: Option<crate::registry::ClusterPlugins>,
}

impl Supervisor {
    /// Scans the plugin directory and carries out what changed; returns whether a change
    /// could not take effect for a reason outside the plugin, so that it is retried.
    async fn sync(&mut self, registry: &Arc<Mutex<Registry>>) -> bool {
        // Reading, hashing and compiling is blocking work.
        let scanning = registry.clone();
        let scanned = tokio::task::spawn_blocking(move || lock(&scanning).scan()).await;
        let proposals = match scanned {
            Ok(Ok(proposals)) => proposals,
            Ok(Err(error)) => {
                tracing::error!(%error, "cannot rescan the plugin directory");
                return true;
            }
            Err(error) => {
                tracing::error!(%error, "scanning the plugin directory did not complete");
                return true;
            }
        };
        // A deferred change is proposed again by every scan: its entry stays until its
        // outcome below (so /readyz does not flap while a held version is planned again); a
        // file no longer proposed (removed, or its change took effect) is available again.
        let unavailable =
            |proposal: &Proposal| format!("{UNAVAILABLE_FILE}{}", proposal.path().display());
        let proposed: std::collections::HashSet<String> =
            proposals.iter().map(unavailable).collect();
        self.metrics
            .clear_unavailable_but(UNAVAILABLE_FILE, |what| proposed.contains(what));
        let mut deferred = false;
        // The CRD steps first, all at once: on a start with many plugins their round trips to
        // the API server overlap instead of adding up.
        let crd_steps = futures::future::join_all(proposals.iter().map(|proposal| async {
            match proposal {
                Proposal::Add { plugin } | Proposal::Replace { new: plugin, .. } => {
                    Some(self.crd_step(plugin).await)
                }
                Proposal::Remove { .. } => None,
            }
        }))
        .await;
        let changed = !proposals.is_empty();
        // A canary whose version is no longer proposed (the file changed back, or again to
        // what serves) ends: its parents go back to the serving version.
        for (path, controller) in &self.controllers {
            let replaced = proposals.iter().any(|proposal| match proposal {
                Proposal::Replace { new, .. } => {
                    new.path == *path
                        && controller.canary_version().as_deref()
                            == Some(new.decl.content_hash.as_str())
                }
                _ => false,
            });
            if !replaced && let Some(version) = controller.end_canary() {
                tracing::info!(path = %path.display(), sha256 = %version, "canary ended: its version is no longer offered");
            }
        }
        for (proposal, crd_step) in proposals.into_iter().zip(crd_steps) {
            let what = unavailable(&proposal);
            match self.carry_out(&proposal, crd_step).await {
                Ok(()) => {
                    self.metrics.set_unavailable(&what, None);
                    lock(registry).commit(&proposal);
                }
                Err(error @ RunError::CanaryFailed { .. }) => {
                    self.metrics.set_unavailable(&what, None);
                    lock(registry).roll_back(&proposal, &error);
                }
                Err(error) if error.is_about_content() => {
                    self.metrics.set_unavailable(&what, None);
                    lock(registry).reject(&proposal, &error);
                }
                Err(error @ RunError::CanaryAnalysing { .. }) => {
                    // Judged again at the next retry.
                    deferred = true;
                    tracing::debug!(%error, "canary under way");
                    lock(registry).canary(&proposal, &error);
                }
                Err(error @ RunError::RolloutHeld { .. }) => {
                    deferred = true;
                    self.metrics.set_unavailable(&what, Some(error.to_string()));
                    lock(registry).hold(&proposal, &error);
                }
                Err(error) => {
                    deferred = true;
                    self.metrics.set_unavailable(&what, Some(error.to_string()));
                    lock(registry).defer(&proposal, &error);
                }
            }
        }
        if changed {
            // What loading and compiling freed, and the versions replaced: given back now, not
            // kept by the allocator as if they were still loaded.
            crate::runtime::release_free_memory();
        }
        deferred
    }

    /// Carries out `proposal`, whose plugin's CRD step (for an addition or a replacement) has
    /// had the outcome `crd_step`.
    async fn carry_out(
        &mut self,
        proposal: &Proposal,
        crd_step: Option<Result<CrdStep, RunError>>,
    ) -> Result<(), RunError> {
        let path = proposal.path().to_path_buf();
        if let Some(step) = crd_step {
            self.record_crd_step(&path, step?);
        }
        if let Proposal::Add { plugin } | Proposal::Replace { new: plugin, .. } = proposal {
            discovery::check_served_kinds(&self.client, &plugin.decl).await?;
        }
        match proposal {
            Proposal::Add { plugin } => {
                self.start(path, plugin.clone());
            }
            Proposal::Replace { old, new } => {
                // Planned on the parents the serving version has, before anything changes.
                let approval = rollout_gate::Approval::of(new, &path, self.cluster.as_ref());
                if let Some(controller) = self.controllers.get(&path)
                    && new.decl.parent == old.decl.parent
                {
                    // A canary under way passed the gate when it started.
                    let in_canary = controller.canary_version().as_deref()
                        == Some(new.decl.content_hash.as_str());
                    if !in_canary {
                        rollout_gate::check(controller, new, &approval).await?;
                    }
                    // A version that needs a new controller (other watches, another
                    // policy) has its canary on this one too: its canary parents read what
                    // these caches lack from the API server, and the restart comes with the
                    // promotion. The same content under another policy has no canary.
                    if new.decl.content_hash != old.decl.content_hash {
                        canary_step(controller, new, approval.approved()).await?;
                    }
                }
                match self.controllers.get(&path) {
                    Some(controller) if !proposal.needs_restart() => {
                        controller.swap(new.clone(), true);
                    }
                    _ => {
                        if let Some(running) = self.controllers.remove(&path) {
                            running.stop().await;
                        }
                        self.start(path.clone(), new.clone());
                        if approval.approved()
                            && let Some(started) = self.controllers.get(&path)
                        {
                            started.approve_prunes(&new.decl.content_hash);
                        }
                    }
                }
                self.hand_over(old, Some(new)).await;
            }
            Proposal::Remove { old } => {
                if let Some(running) = self.controllers.remove(&path) {
                    running.stop().await;
                }
                self.hand_over(old, None).await;
            }
        }
        Ok(())
    }

    /// Deals with what `old` leaves behind now that `new` (or nothing) serves its file: its
    /// parents holding the finalizer when nothing serves their kind any more, and the
    /// children of kinds `new` no longer declares (see [`handover`]).
    async fn hand_over(&self, old: &Plugin, new: Option<&Arc<Plugin>>) {
        if !self.config.controllers.leadership.may_write() {
            tracing::info!(plugin = %old.decl.name, "standing by: the leader hands over what the old version leaves behind");
            return;
        }
        let namespaces = &self.config.controllers.namespaces;
        match new {
            None => {
                let why = "was removed from the host";
                handover::mark_parents_without_plugin(&self.client, old, namespaces, why).await;
            }
            Some(new) if !new.decl.parent.same_kind(&old.decl.parent) => {
                let why = format!("now reconciles {} instead", new.decl.parent);
                handover::mark_parents_without_plugin(&self.client, old, namespaces, &why).await;
            }
            Some(new) => {
                let dropped = handover::dropped_kinds(&old.decl, &new.decl);
                if !dropped.is_empty() {
                    handover::prune_dropped_kinds(&self.client, old, &dropped, namespaces).await;
                }
            }
        }
    }

    /// Installs the plugin's CRD (with `--install-crds`); a standby does not write, and
    /// starts the plugin once the CRD exists (the leader's, until this host leads).
    async fn install_crd(&mut self, plugin: &Plugin) -> Result<(), RunError> {
        let step = self.crd_step(plugin).await?;
        self.record_crd_step(&plugin.path, step);
        Ok(())
    }

    /// The CRD step of [`Supervisor::install_crd`], without its bookkeeping (so that the
    /// steps of several plugins can run at once).
    async fn crd_step(&self, plugin: &Plugin) -> Result<CrdStep, RunError> {
        if !self.config.install_crds {
            return Ok(CrdStep::NotInstalling);
        }
        if self.config.controllers.leadership.may_write() {
            install_crd(&self.client, plugin).await?;
            return Ok(CrdStep::Installed);
        }
        if !crd::crd_exists(&self.client, plugin).await? {
            return Err(RunError::CrdAwaitsLeader {
                plugin: plugin.decl.name.clone(),
                crd: plugin.decl.crd.metadata.name.clone().unwrap_or_default(),
            });
        }
        Ok(CrdStep::LeftToLeader)
    }

    fn record_crd_step(&mut self, path: &std::path::Path, step: CrdStep) {
        match step {
            CrdStep::NotInstalling => {}
            CrdStep::Installed => {
                self.crds_left_to_leader.remove(path);
            }
            CrdStep::LeftToLeader => {
                self.crds_left_to_leader.insert(path.to_path_buf());
            }
        }
    }

    /// On becoming the leader: installs the CRDs of the plugins it serves (a standby took
    /// the leader's as they were).
    async fn take_over(&mut self) {
        if self.config.install_crds
            && self.config.cluster_plugins.is_some()
            && let Err(error) = operator_plugin::install_crd(&self.client).await
        {
            tracing::warn!(%error, "cannot install the OperatorPlugin CRD after taking over");
        }
        let left: Vec<PathBuf> = self.crds_left_to_leader.drain().collect();
        for path in left {
            let Some(plugin) = self.controllers.get(&path).map(PluginController::current) else {
                continue;
            };
            if let Err(error) = self.install_crd(&plugin).await {
                tracing::warn!(plugin = %plugin.decl.name, %error, "cannot install the CRD after taking over; the plugin keeps serving the installed one");
            }
        }
    }

    fn start(&mut self, path: PathBuf, plugin: Arc<Plugin>) {
        let controller = PluginController::start(
            &self.client,
            plugin,
            &self.config.controllers,
            &self.metrics,
        );
        self.controllers.insert(path, controller);
    }

    /// Swaps in the optimized build of a plugin (same content, so no re-reconcile).
    fn tier_up(&self, plugin: Arc<Plugin>) {
        if let Some(controller) = self.controllers.get(&plugin.path) {
            controller.swap(plugin, false);
        }
    }

    async fn stop_all(self) {
        futures::future::join_all(self.controllers.into_values().map(PluginController::stop)).await;
    }
}

/// A canary's step in the swap of `new` into `controller` (`rollout.strategy: Canary`): start
/// or judge it; `Ok` once it is promoted (the swap goes on), an error while it is under way
/// (retried) or once it failed (rolled back, and the content refused). An approved version
/// is promoted at once: approving is how a canary is promoted by hand.
async fn canary_step(
    controller: &PluginController,
    new: &Arc<Plugin>,
    approved: bool,
) -> Result<(), RunError> {
    let rules = new.policy.rules(&new.decl.name);
    if rules.rollout_strategy != crate::policy::RolloutStrategy::Canary
        || !crate::rollout::gates(rules)
    {
        return Ok(());
    }
    if approved {
        if controller.end_canary().is_some() {
            tracing::info!(plugin = %new.decl.name, sha256 = %new.decl.content_hash, "canary promoted by approval");
        }
        return Ok(());
    }
    let (plugin, sha256) = (new.decl.name.clone(), new.decl.content_hash.clone());
    // Validated when the policy was read.
    let share = match rules
        .rollout_canary_selector
        .as_deref()
        .map(crate::labels::parse)
    {
        Some(Ok(selector)) => canary::Share::Selector(selector),
        _ => canary::Share::Percent(rules.rollout_canary_percent),
    };
    let verdict = controller
        .canary(new, &share, rules.rollout_analysis)
        .await
        .map_err(|source| RunError::CanaryUnjudged {
            plugin: plugin.clone(),
            sha256: sha256.clone(),
            source,
        })?;
    match verdict {
        canary::Verdict::Analysing { parents, succeeded } => Err(RunError::CanaryAnalysing {
            plugin,
            sha256,
            parents,
            succeeded,
        }),
        canary::Verdict::Promote => {
            controller.end_canary();
            tracing::info!(%plugin, %sha256, "canary promoted: the new version serves every parent");
            Ok(())
        }
        canary::Verdict::RollBack(failure) => {
            controller.end_canary();
            Err(RunError::CanaryFailed {
                plugin,
                sha256,
                failure,
            })
        }
    }
}

/// Serves every plugin in `config.plugins_dir`, following changes to the directory, until
/// `shutdown` has received SIGTERM or SIGINT.
pub async fn run(
    client: Client,
    runtime: Arc<Runtime>,
    config: RunConfig,
    shutdown: ShutdownSignal,
) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::new());
    if let Some(addr) = config.metrics_addr {
        let bound = metrics.clone().serve(addr).await?;
        tracing::info!(%bound, "serving /metrics, /healthz and /readyz");
    }
    run_with_metrics(client, runtime, config, metrics, shutdown.received()).await
}

/// [`run`] with the caller's metrics, until `shutdown` resolves (tests use both).
pub async fn run_with_metrics(
    client: Client,
    runtime: Arc<Runtime>,
    config: RunConfig,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let mut config = config;
    let dir = config.plugins_dir.clone();
    let sharding = config
        .sharding
        .clone()
        .map(|sharding| start_sharding(sharding, &config, &metrics));
    if let Some(sharding) = &sharding {
        config.controllers.shard = Some(sharding.scope.clone());
    }
    // Watch before the first scan, so a change made during it is not missed.
    let (_watcher, mut dir_changed) = watch::watch_dir(&dir, watch::DEFAULT_DEBOUNCE)?;
    let (tier_ups, mut tiered_up) = tokio::sync::mpsc::unbounded_channel();
    let mut registry =
        Registry::new(runtime, &dir, metrics.clone(), tier_ups).with_policy(config.policy.clone());
    let cluster = config
        .cluster_plugins
        .as_ref()
        .map(|_| crate::registry::ClusterPlugins::default());
    if let Some(cluster) = &cluster {
        registry = registry.with_cluster_plugins(cluster.clone());
    }
    let registry = Arc::new(Mutex::new(registry));
    let leadership = config.controllers.leadership.clone();
    let election = config.leader_election.clone().map(|election| {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(leader::run(election, leadership.clone(), async {
            let _ = stopped.await;
        }));
        (stop, task)
    });
    let role_metrics = tokio::spawn({
        let metrics = metrics.clone();
        let mut changes = leadership.changes();
        async move {
            loop {
                metrics.set_role(&changes.borrow_and_update().clone());
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
    });
    let (stop_cluster_plugins, cluster_plugins_stopped) = tokio::sync::watch::channel(false);
    let cluster_task = match (&config.cluster_plugins, &cluster) {
        (Some(cluster_config), Some(cluster)) => {
            if config.install_crds && leadership.may_write() {
                operator_plugin::install_crd(&client).await?;
            }
            let mut stopped = cluster_plugins_stopped.clone();
            Some(tokio::spawn(operator_plugin::run(
                operator_plugin::Config {
                    client: client.clone(),
                    cluster: cluster.clone(),
                    store: operator_plugin::DigestStore::new(&cluster_config.store_dir),
                    namespace: cluster_config.namespace.clone(),
                    leadership: leadership.clone(),
                    policy: config.policy.clone(),
                    selector: cluster_config.selector.clone(),
                    replica: this_replica(&config, &client),
                },
                cluster.synced(),
                async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                },
            )))
        }
        _ => None,
    };
    let mut gained = leadership.gained();
    let canary_failed = config.controllers.canary_failed.clone();
    let mut supervisor = Supervisor {
        client,
        config,
        metrics: metrics.clone(),
        controllers: HashMap::new(),
        crds_left_to_leader: Default::default(),
        cluster: cluster.clone(),
    };
    tokio::pin!(shutdown);
    let mut retry = LoadRetry::default();
    // The first pass scans the directory; later ones wait for a reason to scan again.
    let mut rescan = true;
    loop {
        if rescan {
            // A sync can wait on the API server (a CRD install, a controller that stops):
            // shutdown interrupts it rather than waiting behind it.
            tokio::select! {
                deferred = supervisor.sync(&registry) => retry.after_sync(deferred),
                () = &mut shutdown => break,
            }
            lock(&registry).report_cluster_outcomes();
            if !metrics.is_ready() {
                if supervisor.controllers.is_empty() {
                    tracing::warn!(dir = %dir.display(), "no plugin is being served yet; watching the directory for plugins");
                }
                metrics.set_ready(true);
            }
        }
        rescan = tokio::select! {
            () = &mut shutdown => break,
            Some(()) = dir_changed.recv() => true,
            // A change offered meanwhile is kept by the notifier until this waits again.
            () = cluster_changed(cluster.as_ref()) => true,
            () = retry.due() => true,
            () = canary_failed.notified() => true,
            Some(()) = gained.next() => {
                supervisor.take_over().await;
                true
            }
            Some(tier_up) = tiered_up.recv() => {
                if let Some(optimized) = lock(&registry).finish_tier_up(tier_up) {
                    supervisor.tier_up(optimized);
                    crate::runtime::release_free_memory();
                }
                false
            }
        };
    }
    tracing::info!("shutting down: no new reconciles; waiting for those in flight");
    metrics.set_ready(false);
    let _ = stop_cluster_plugins.send(true);
    if tokio::time::timeout(SHUTDOWN_GRACE, supervisor.stop_all())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "reconciles still in flight after the shutdown grace period are abandoned"
        );
    }
    if let Some(task) = cluster_task {
        let _ = task.await;
    }
    // Only now that nothing reconciles any more are the Leases given up: the shard's first
    // (the leader then moves its parents at once), then the leader's.
    if let Some(sharding) = sharding {
        sharding.stop().await;
    }
    if let Some((stop, task)) = election {
        let _ = stop.send(());
        let _ = task.await;
    }
    role_metrics.abort();
    Ok(())
}

/// The tasks of a sharded replica: its shard Lease, and the ring it follows.
struct ShardTasks {
    scope: ShardScope,
    stop: tokio::sync::watch::Sender<bool>,
    membership: tokio::task::JoinHandle<()>,
    ring: tokio::task::JoinHandle<()>,
    readiness: tokio::task::JoinHandle<()>,
}

impl ShardTasks {
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.membership.await;
        let _ = self.ring.await;
        self.readiness.abort();
    }
}

/// Takes this replica's shard Lease and follows the ring (the leader also tidies it).
fn start_sharding(sharding: Sharding, config: &RunConfig, metrics: &Arc<Metrics>) -> ShardTasks {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let identity = sharding.membership.config.identity.clone();
    let shards = shard::Shards::new(
        sharding.membership.lease_client.clone(),
        &sharding.membership.config.namespace,
        &sharding.ring,
        &identity,
        config.controllers.leadership.clone(),
    );
    let members = shards.members();
    tracing::info!(shard = %sharding.shard, ring = %sharding.ring, "sharding on: reconciling the parents the leader assigns to this shard");
    let ring = tokio::spawn(shards.run(until_stopped(stopped.clone())));
    let membership = tokio::spawn(leader::run(
        sharding.membership.clone(),
        sharding.fence.clone(),
        until_stopped(stopped),
    ));
    let readiness = tokio::spawn({
        let metrics = metrics.clone();
        let shard = sharding.shard.clone();
        let mut changes = sharding.fence.changes();
        async move {
            loop {
                let member = *changes.borrow_and_update() == leader::Role::Leader;
                metrics.set_shard(&shard, member);
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
    });
    ShardTasks {
        scope: ShardScope {
            shard: sharding.shard,
            fence: sharding.fence,
            members,
        },
        stop,
        membership,
        ring,
        readiness,
    }
}

/// This host as `status.replicas` of OperatorPlugins names it: its identity in the election
/// (or the one it would have), writing with the Lease's unfenced client when it has one.
fn this_replica(config: &RunConfig, client: &Client) -> operator_plugin::Replica {
    match &config.leader_election {
        Some(election) => operator_plugin::Replica {
            name: election.config.identity.clone(),
            client: election.lease_client.clone(),
        },
        None => operator_plugin::Replica {
            name: leader::default_identity(),
            client: client.clone(),
        },
    }
}

async fn cluster_changed(cluster: Option<&crate::registry::ClusterPlugins>) {
    match cluster {
        Some(cluster) => cluster.changed().await,
        None => std::future::pending().await,
    }
}

fn lock(registry: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    // A panic while holding the lock leaves the registry as it was before that change.
    registry
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// SIGTERM and SIGINT, caught from the moment [`ShutdownSignal::install`] returns: a signal
/// that arrives while the host is still starting (loading plugins, reaching the API server)
/// is kept and ends the host as soon as it can stop, instead of killing it with the default
/// action before the handler would otherwise be in place.
pub struct ShutdownSignal {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl ShutdownSignal {
    /// Replaces the default actions of SIGTERM and SIGINT; needs a Tokio runtime context.
    pub fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves once either signal has arrived, also one that arrived before this was polled.
    pub async fn received(mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_related_object_maps_to_exactly_the_parents_that_refer_to_it() {
        let parent_kind = crate::test_support::memcached_kind().api_resource();
        let mut writer = Writer::new(parent_kind.clone());
        let parent = |name: &str, namespace: &str, config: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"configName": config}
            }))
            .unwrap()
        };
        for object in [
            parent("a", "ns", "c1"),
            parent("b", "ns", "c2"),
            parent("c", "ns", "c1"),
            parent("d", "other", "c1"),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(object));
        }
        let parents = writer.as_reader();
        let config_map = KindRef {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
        };
        let by_name = Related {
            name: "config".into(),
            kind: config_map.clone(),
            selector: RelatedSelector::NameFromPath("spec.configName".into()),
            secret_view: crate::runtime::SecretView::Full,
        };
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c1", "namespace": "ns", "labels": {"tier": "web"}}
        }))
        .unwrap();
        let names = |refs: Vec<reflector::ObjectRef<DynamicObject>>| {
            let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        assert_eq!(
            names(referring_parents(&parents, &parent_kind, &by_name, &object)),
            ["a", "c"]
        );
        // By selector: every parent of the object's namespace that declares it.
        let by_labels = Related {
            selector: RelatedSelector::LabelSelector("tier=web".into()),
            ..by_name
        };
        assert_eq!(
            names(referring_parents(
                &parents,
                &parent_kind,
                &by_labels,
                &object
            )),
            ["a", "b", "c"]
        );
    }

    #[tokio::test]
    async fn plugin_changes_that_could_not_take_effect_are_retried_with_backoff() {
        let mut retry = LoadRetry::default();
        assert_eq!(retry.at, None, "nothing to retry: never due");
        let delays: Vec<Duration> = (0..8)
            .map(|_| {
                retry.after_sync(true);
                retry.delay.unwrap()
            })
            .collect();
        let seconds: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert!(retry.at.is_some());
        retry.after_sync(false);
        assert_eq!((retry.delay, retry.at), (None, None));
    }
}
