//! A native kube-rs controller that runs an SDK reconciler's logic the way the host does: the
//! baseline of the devcluster benchmarks.
//!
//! It uses the default kube-rs client, typed reflector-backed child caches (as a hand-written
//! kube-rs controller would), the host's labels, owner references, apply order, events and
//! status rules, and calls the plugin's Rust logic directly.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::object::Object;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use operator_host::labels::{MANAGED_BY, MANAGED_BY_LABEL, PARENT_UID_LABEL, PLUGIN_LABEL};
use operator_host_sdk::{Desired, Observed};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A parent: the plugin's typed spec, and the status as JSON (the host adds
/// `observedGeneration` and a `Reconciled` condition that plugin status types do not model,
/// and comparing the full status is what lets both skip unchanged status writes).
pub type Parent<P> = Object<P, Value>;

/// The plugin logic a native controller runs.
pub struct Operand<P: Clone> {
    /// The plugin's name: the `plugin` label of its children.
    pub name: String,
    pub parent: ApiResource,
    pub logic: fn(&Parent<P>, &Observed) -> Result<Desired, operator_host_sdk::Error>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the child caches stopped: {0}")]
    Cache(String),
    #[error("the plugin logic failed: {0:?}")]
    Logic(operator_host_sdk::Error),
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("writing the status: {0}")]
    Status(kube::Error),
}

/// One child kind's typed cache, seen through what a reconcile needs of it.
trait ChildCache: Send + Sync {
    fn api_resource(&self) -> &ApiResource;
    fn ready(&self) -> BoxFuture<'_, Result<(), String>>;
    /// `(name, resourceVersion, object)` of the cached children controlled by `uid`.
    fn controlled_by(&self, uid: &str) -> Vec<(String, String, Value)>;
}

struct TypedCache<K: Resource<DynamicType = ()> + 'static> {
    resource: ApiResource,
    store: Store<K>,
}

impl<K> ChildCache for TypedCache<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + Send + Sync + 'static,
{
    fn api_resource(&self) -> &ApiResource {
        &self.resource
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.store
                .wait_until_ready()
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn controlled_by(&self, uid: &str) -> Vec<(String, String, Value)> {
        self.store
            .state_filter(|o| controlled_by(o.meta(), uid))
            .into_iter()
            .map(|o| {
                (
                    o.name_any(),
                    o.resource_version().unwrap_or_default(),
                    serde_json::to_value(&*o).unwrap_or(Value::Null),
                )
            })
            .collect()
    }
}

fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == uid && r.controller == Some(true))
}

struct Context<P: Clone> {
    client: Client,
    operand: Operand<P>,
    children: Vec<Box<dyn ChildCache>>,
    recorder: Recorder,
    field_manager: String,
    resync: Duration,
    reconciles: Arc<AtomicU64>,
}

/// A native controller of one operand in one namespace, built up with its child kinds.
pub struct NativeController<P: Clone + DeserializeOwned + Debug + Send + Sync + 'static> {
    client: Client,
    namespace: String,
    operand: Operand<P>,
    controller: Controller<Parent<P>>,
    children: Vec<Box<dyn ChildCache>>,
}

impl<P> NativeController<P>
where
    P: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    pub fn new(client: Client, namespace: &str, operand: Operand<P>, concurrency: u16) -> Self {
        let parents: Api<Parent<P>> =
            Api::namespaced_with(client.clone(), namespace, &operand.parent);
        let controller = Controller::new_with(
            parents,
            watcher::Config::default().any_semantic(),
            operand.parent.clone(),
        )
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency));
        NativeController {
            client,
            namespace: namespace.to_string(),
            operand,
            controller,
            children: Vec::new(),
        }
    }

    /// Watches and caches the children of kind `K` this operand manages.
    pub fn owns<K>(mut self) -> Self
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + Serialize
            + Send
            + Sync
            + 'static,
    {
        let selector = format!(
            "{MANAGED_BY_LABEL}={MANAGED_BY},{PLUGIN_LABEL}={}",
            self.operand.name
        );
        let (store, writer) = reflector::store::<K>();
        let stream = reflector::reflector(
            writer,
            watcher(
                Api::<K>::namespaced(self.client.clone(), &self.namespace),
                watcher::Config::default().labels(&selector).any_semantic(),
            ),
        )
        .default_backoff()
        .touched_objects();
        self.controller = self.controller.owns_stream(stream);
        self.children.push(Box::new(TypedCache {
            resource: ApiResource::erase::<K>(&()),
            store,
        }));
        self
    }

    /// Runs until `shutdown` resolves, counting reconciles in `reconciles`.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
        reconciles: Arc<AtomicU64>,
    ) {
        let field_manager = format!("{}-native", self.operand.name);
        let context = Arc::new(Context {
            recorder: Recorder::new(
                self.client.clone(),
                Reporter {
                    controller: field_manager.clone(),
                    instance: None,
                },
            ),
            client: self.client,
            operand: self.operand,
            children: self.children,
            field_manager,
            resync: Duration::from_secs(300),
            reconciles,
        });
        self.controller
            .graceful_shutdown_on(shutdown)
            .run(reconcile, error_policy, context)
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "native reconcile failed");
                }
            })
            .await;
    }
}

fn error_policy<P: Clone>(_: Arc<Parent<P>>, error: &Error, _: Arc<Context<P>>) -> Action {
    tracing::warn!(%error, "native reconcile failed");
    Action::requeue(Duration::from_secs(1))
}

fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(now)
        .to_string()
}

async fn reconcile<P>(parent: Arc<Parent<P>>, ctx: Arc<Context<P>>) -> Result<Action, Error>
where
    P: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    if parent.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    for child in &ctx.children {
        child.ready().await.map_err(Error::Cache)?;
    }
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let namespace = parent.namespace().unwrap_or_default();
    let name = parent.name_any();

    // Observed children from the caches, as the host presents them to the plugin.
    let mut observed = Vec::new();
    let mut versions: HashMap<(String, String), String> = HashMap::new();
    for child in &ctx.children {
        for (child_name, version, object) in child.controlled_by(&uid) {
            versions.insert((child.api_resource().kind.clone(), child_name), version);
            observed.push(object);
        }
    }
    let desired = (ctx.operand.logic)(&parent, &Observed::new(observed)).map_err(Error::Logic)?;

    // Children: the host's metadata, then server-side apply in the host's order.
    let mut children = desired.children;
    children.sort_by_key(|c| operator_host::plan::apply_rank(c["kind"].as_str().unwrap_or("")));
    let parent_resource = &ctx.operand.parent;
    let owner = OwnerReference {
        api_version: parent_resource.api_version.clone(),
        kind: parent_resource.kind.clone(),
        name: name.clone(),
        uid: uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let params = PatchParams::apply(&ctx.field_manager).force();
    let reference = parent.object_ref(parent_resource);
    let child_count = children.len();
    for mut child in children {
        let kind = child["kind"].as_str().unwrap_or_default().to_string();
        let child_name = child["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let metadata = &mut child["metadata"];
        metadata["namespace"] = namespace.clone().into();
        let labels = &mut metadata["labels"];
        labels[MANAGED_BY_LABEL] = MANAGED_BY.into();
        labels[PLUGIN_LABEL] = ctx.operand.name.clone().into();
        labels[PARENT_UID_LABEL] = uid.clone().into();
        metadata["ownerReferences"] = json!([owner]);
        if let Some(object) = child.as_object_mut() {
            object.remove("status");
        }
        let Some(cache) = ctx.children.iter().find(|c| c.api_resource().kind == kind) else {
            return Err(Error::Cache(format!("no cache of the child kind {kind}")));
        };
        let after = Api::<DynamicObject>::namespaced_with(
            ctx.client.clone(),
            &namespace,
            cache.api_resource(),
        )
        .patch(&child_name, &params, &Patch::Apply(&child))
        .await
        .map_err(|source| Error::Apply {
            kind: kind.clone(),
            name: child_name.clone(),
            source,
        })?
        .resource_version();
        let reason = match versions.get(&(kind.clone(), child_name.clone())) {
            None => "Created",
            Some(before) if after.as_ref() != Some(before) => "Updated",
            Some(_) => continue,
        };
        let event = KubeEvent {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(format!("{reason} {kind} {child_name}")),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(error) = ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "cannot publish event");
        }
    }

    // Status: the logic's status, observedGeneration and a Reconciled condition, with
    // transition times kept while a condition's status is unchanged; unchanged: no write.
    let now = now_rfc3339();
    let previous = parent.status.clone().unwrap_or(Value::Null);
    let mut status = desired.status;
    let generation = parent.metadata.generation;
    if let Some(generation) = generation {
        status["observedGeneration"] = generation.into();
    }
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    if let Some(conditions) = status["conditions"].as_array_mut() {
        conditions.retain(|c| c["type"] != "Reconciled");
        conditions.push(json!({
            "type": "Reconciled", "status": "True", "reason": "ReconcileSucceeded",
            "message": format!("native {} produced {child_count} children", ctx.operand.name),
            "observedGeneration": generation,
        }));
        for condition in conditions.iter_mut() {
            operator_host::plan::stamp_transition(condition, &previous, &now);
        }
    }
    if parent.status.as_ref() != Some(&status) {
        let api: Api<Parent<P>> =
            Api::namespaced_with(ctx.client.clone(), &namespace, parent_resource);
        let patch = json!({
            "apiVersion": parent_resource.api_version,
            "kind": parent_resource.kind,
            "status": status,
        });
        api.patch_status(&name, &params, &Patch::Apply(&patch))
            .await
            .map_err(Error::Status)?;
    }
    Ok(Action::requeue(desired.requeue_after.unwrap_or(ctx.resync)))
}
