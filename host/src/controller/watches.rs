//! The controllers of one plugin: the watches of its parent, children and related kinds.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use futures::StreamExt;
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{PredicateConfig, WatchStreamExt, controller, reflector, watcher};
use tokio::sync::Semaphore;

use super::config::ControllerConfig;
use super::context::{ChildCache, PluginContext, recorder, write_budget};
use super::{canary, reconcile};
use crate::api::api_for;
use crate::declaration::Related;
use crate::kinds::Kind;
use crate::labels::managed_children_selector;
use crate::metrics::Metrics;
use crate::plugin::Plugin;
use crate::runtime::RelatedSelector;
use crate::shard;

/// How `/readyz` names what of `plugin` cannot be served.
pub(super) fn unavailable_prefix(plugin: &str) -> String {
    format!("plugin {plugin}: ")
}

/// How `/readyz` names a plugin file whose change could not take effect (then its path).
pub(super) const UNAVAILABLE_FILE: &str = "plugin file ";

/// The controllers of one plugin (one per configured namespace, or one for all), serving
/// whichever version of the plugin is current.
pub struct PluginController {
    pub(super) current: Arc<ArcSwap<Plugin>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) reconcile_all: Vec<futures::channel::mpsc::UnboundedSender<()>>,
    /// Each controller's task and its parent cache.
    pub(super) tasks: Vec<(tokio::task::JoinHandle<()>, reflector::Store<DynamicObject>)>,
    /// Each controller's context: its caches and prune guard.
    pub(super) contexts: Vec<Arc<PluginContext>>,
    /// The canary under way, shared with the contexts.
    pub(super) canary: Arc<canary::CanarySlot>,
    /// With sharding: the sharder of each controller's parents (active while leading).
    pub(super) sharders: Vec<tokio::task::JoinHandle<()>>,
    /// The namespace each controller serves (`None`: all).
    pub(super) scopes: Vec<Option<String>>,
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
    pub(super) async fn list_served(
        &self,
        kind: &Kind,
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
    pub(super) fn reconcile_all(&self) {
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
pub(super) struct Scope<'a> {
    pub(super) namespace: Option<&'a str>,
    pub(super) shard: Option<&'a str>,
}

/// A controller of `plugin`'s parent kind in `scope`, fed by the watches of its `children`
/// kinds (only objects the host manages for this plugin, in its shard) and of its related
/// objects (a change reconciles the parents that refer to the object); its parent cache, the
/// children's caches and the related ones.
pub(super) fn build_controller(
    client: &Client,
    plugin: &Plugin,
    children: &[Kind],
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
    let cache = |kind: &Kind, config: watcher::Config, what: String| {
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
pub(super) fn referring_parents(
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
pub(super) fn strip_unread_fields(object: &mut DynamicObject) {
    object.metadata.managed_fields = None;
}

/// A hash of what a parent's reconcile follows from, other than its status: generation
/// (spec), labels, annotations, finalizers and deletion.
pub(super) fn desired_state(parent: &DynamicObject) -> Option<u64> {
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
        let config_map = Kind {
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
}
