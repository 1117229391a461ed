//! One reconcile: plan, policy, finalizer, apply in order, prune, status, events; the retry policy.
//!
//! Deletion goes through the same function as reconciling ([`reconcile`]), so a `finalize`
//! call takes a call slot, waits for the caches, passes the policy and is counted exactly
//! like a `reconcile` call. Every API write a reconcile causes (applies, prunes, the status,
//! finalizer edits, events) first takes a token from the plugin's write budget.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::{ChildCache, FIELD_MANAGER, PluginContext, api_for};
use crate::metrics::{KindLabels, PluginLabels, ResultLabels, WriteLabels};
use crate::plan::{self, Plan, PlanError};
use crate::plugin::Plugin;
use crate::policy::Effective;

/// The finalizer the host puts on parents of plugins that declare `needs-finalize`.
pub const FINALIZER: &str = "operator-host.dev/finalize";

/// Why a reconcile failed; every variant names the step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("applying {kind} {name:?} failed: {source}")]
    Apply {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("pruning {kind} {name:?} failed: {source}")]
    Prune {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "{kind} {name:?} already exists and is not owned by this parent; \
         the host neither adopts nor overwrites it"
    )]
    NotOwned { kind: String, name: String },
    #[error("reading {kind} {name:?} failed: {source}")]
    Read {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("writing the status failed: {0}")]
    WriteStatus(#[source] kube::Error),
    #[error("updating the finalizer failed: {0}")]
    Finalizer(#[source] kube::Error),
    #[error("the plugin call did not complete: {0}")]
    PluginTask(String),
    #[error(
        "the plugin's status changed on {changes} reconciles in a row while the parent's \
         generation and its observed children stayed the same; a status must follow from \
         its inputs (statusChurnLimit is {changes} for plugin {plugin})"
    )]
    StatusNotConverging { plugin: String, changes: u32 },
    #[error(
        "the child kind {kind} cannot be listed or watched: {problem}; the host retries, and \
         the plugin's parents are reconciled once it can (check the host's RBAC, see \
         `operator-host rbac`, and that the API server serves the kind)"
    )]
    ChildKindUnavailable { kind: String, problem: String },
}

impl Error {
    /// The `Reconciled=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Plan(error) => error.reason(),
            Error::Apply { .. } | Error::Read { .. } => "ApplyFailed",
            Error::NotOwned { .. } => "ChildNotOwned",
            Error::Prune { .. } => "PruneFailed",
            Error::WriteStatus(_) => "StatusWriteFailed",
            Error::Finalizer(_) => "FinalizerFailed",
            Error::PluginTask(_) => "PluginUnavailable",
            Error::StatusNotConverging { .. } => "StatusNotConverging",
            Error::ChildKindUnavailable { .. } => "ChildKindUnavailable",
        }
    }

    fn api_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Apply { source, .. }
            | Error::Prune { source, .. }
            | Error::Read { source, .. } => Some(source),
            Error::WriteStatus(source) | Error::Finalizer(source) => Some(source),
            _ => None,
        }
    }
}

/// What the host remembers about one parent between its reconciles, keyed by the parent's
/// UID (a parent recreated under the same name starts afresh).
#[derive(Debug, Default)]
pub struct ParentState {
    /// The reason of the last failures and how many in a row: the backoff grows while the
    /// reason stays the same, whatever the messages say.
    failures: Option<(&'static str, u32)>,
    /// Hash of the inputs (generation, labels, annotations, observed children) of the last
    /// status written, the hash of that status, and how many status changes in a row had
    /// those same inputs.
    inputs: u64,
    last_status: Option<u64>,
    status_changes: u32,
}

/// Per-parent state of a controller.
pub type ParentStates = std::sync::Mutex<HashMap<String, ParentState>>;

/// Drops the state of parents that are gone, as the parent watch reports them: a deleted
/// parent at once, and after a relist (which a missed delete event leaves to) every parent the
/// cache no longer holds. A parent recreated under the same name has another UID anyway.
pub fn forget_gone_parents(
    states: &ParentStates,
    parents: &kube::runtime::reflector::Store<DynamicObject>,
    event: &Result<kube::runtime::watcher::Event<DynamicObject>, kube::runtime::watcher::Error>,
) {
    use kube::runtime::watcher::Event;
    match event {
        Ok(Event::Delete(parent)) => {
            lock(states).remove(&state_key(parent));
        }
        Ok(Event::InitDone) => {
            let live: std::collections::HashSet<String> =
                parents.state().iter().map(|p| state_key(p)).collect();
            lock(states).retain(|key, _| live.contains(key));
        }
        _ => {}
    }
}

fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(now)
        .to_string()
}

fn parent_key(parent: &DynamicObject) -> String {
    format!(
        "{}/{}",
        parent.namespace().unwrap_or_default(),
        parent.name_any()
    )
}

fn state_key(parent: &DynamicObject) -> String {
    parent.uid().unwrap_or_else(|| parent_key(parent))
}

fn lock(states: &ParentStates) -> std::sync::MutexGuard<'_, HashMap<String, ParentState>> {
    states.lock().unwrap_or_else(|e| e.into_inner())
}

/// The controller's reconcile function, for live parents and parents being deleted alike.
pub async fn reconcile(
    parent: Arc<DynamicObject>,
    ctx: Arc<PluginContext>,
) -> Result<Action, Error> {
    // The version live now serves this whole reconcile, even if a reload swaps it meanwhile.
    let plugin = ctx.plugin.load_full();
    let labels = PluginLabels {
        plugin: plugin.decl.name.clone(),
    };
    let started = Instant::now();
    let gauge = ctx.metrics.in_flight.get_or_create(&labels).clone();
    gauge.inc();
    let result = if parent.metadata.deletion_timestamp.is_some() {
        finalize_parent(&parent, &ctx, &plugin).await
    } else {
        reconcile_parent(&parent, &ctx, &plugin).await
    };
    gauge.dec();
    ctx.metrics
        .reconcile_duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    let result_label = match &result {
        Ok(_) => "success".to_string(),
        Err(error) => error.reason().to_string(),
    };
    ctx.metrics
        .reconciles
        .get_or_create(&ResultLabels {
            plugin: labels.plugin,
            result: result_label,
        })
        .inc();
    match &result {
        Ok(_) => {
            if let Some(state) = lock(&ctx.parents).get_mut(&state_key(&parent)) {
                state.failures = None;
            }
        }
        Err(error) => report_failure(&parent, &ctx, &plugin, error).await,
    }
    result
}

/// Backoff policy: an invalid spec waits for the parent to change; everything else retries
/// with exponential backoff per parent and reason (1 s doubling to 5 min; a failure of
/// another reason starts again at 1 s), at least as long as the API server asked for with
/// `retryAfterSeconds`.
pub fn error_policy(parent: Arc<DynamicObject>, error: &Error, ctx: Arc<PluginContext>) -> Action {
    if let Error::Plan(plan_error) = error
        && !plan_error.is_retryable()
    {
        return Action::await_change();
    }
    let failures = {
        let mut states = lock(&ctx.parents);
        let state = states.entry(state_key(&parent)).or_default();
        let count = match state.failures {
            Some((reason, count)) if reason == error.reason() => count.saturating_add(1),
            _ => 1,
        };
        state.failures = Some((error.reason(), count));
        count
    };
    let mut delay = backoff(failures);
    if let Some(kube::Error::Api(status)) = error.api_error()
        && let Some(after) = status.details.as_ref().map(|d| d.retry_after_seconds)
    {
        delay = delay.max(Duration::from_secs(u64::from(after)));
    }
    Action::requeue(delay)
}

/// The delay after `failures` failures in a row: 1 s doubling to 5 min.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1)
        .saturating_mul(1u32 << failures.saturating_sub(1).min(9))
        .min(Duration::from_secs(300))
}

async fn reconcile_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Arc<Plugin>,
) -> Result<Action, Error> {
    let decl = &plugin.decl;
    let rules = ctx.policy.rules(&decl.name);
    tracing::trace!(parent = %parent_key(parent), "reconcile starting");
    let api = api_for(&ctx.client, &decl.parent, parent.namespace().as_deref());
    let observed = observed_children(parent, ctx).await?;
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let plan = call_plan(ctx, plugin, parent_json.clone(), observed.clone()).await?;
    ctx.policy
        .check(decl, &parent_json, &plan)
        .map_err(PlanError::from)?;
    // Only a plan that passed the policy may hold up the parent's deletion.
    if decl.needs_finalize && !parent.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(parent, ctx, &api).await?;
    }
    let applied = apply_children(parent, ctx, plugin, &plan, &observed).await?;
    prune_children(parent, ctx, plugin, &plan).await?;
    check_status_churn(parent, ctx, rules, &parent_json, &observed, &plan.status)?;
    write_status(parent, ctx, &api, &parent_json, plan.status.clone()).await?;
    if applied > 0 {
        tracing::debug!(parent = %parent_key(parent), applied, "reconciled");
    }
    let requeue = plan.requeue_after.unwrap_or(ctx.resync);
    Ok(Action::requeue(requeue.max(rules.min_requeue)))
}

/// Calls the plugin's `finalize` for a parent being deleted; removes the host's finalizer
/// once it reports done. A parent in a namespace the policy does not allow the plugin is
/// released without calling it: the plugin may not act there, so it may not hold it either.
async fn finalize_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Arc<Plugin>,
) -> Result<Action, Error> {
    if !parent.finalizers().iter().any(|f| f == FINALIZER) {
        lock(&ctx.parents).remove(&state_key(parent));
        return Ok(Action::await_change());
    }
    let decl = &plugin.decl;
    let api = api_for(&ctx.client, &decl.parent, parent.namespace().as_deref());
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    if let Err(violation) = ctx.policy.check_parent(&decl.name, &parent_json) {
        publish(
            ctx,
            plugin,
            parent,
            EventType::Warning,
            "PolicyViolation",
            format!("finalizer released without calling the plugin: {violation}"),
        )
        .await;
        remove_finalizer(parent, ctx, &api).await?;
        return Ok(Action::await_change());
    }
    let observed = observed_children(parent, ctx).await?;
    let (request, seed) = plan::request("finalize", &parent_json, &observed);
    let context = format!("{}:{}", decl.name, parent_key(parent));
    let call_plugin = plugin.clone();
    let outcome = call_in_slot(ctx, plugin, move || {
        call_plugin
            .compiled
            .finalize_seeded(&request, &seed, &context)
    })
    .await?
    .map_err(PlanError::from)?;
    match outcome {
        Ok(response) if response.done => {
            remove_finalizer(parent, ctx, &api).await?;
            lock(&ctx.parents).remove(&state_key(parent));
            Ok(Action::await_change())
        }
        Ok(response) => {
            let asked = Duration::from_millis(response.requeue_after_ms.unwrap_or(5_000));
            let rules = ctx.policy.rules(&decl.name);
            Ok(Action::requeue(asked.max(rules.min_requeue)))
        }
        Err(crate::runtime::ReconcileError::InvalidSpec(m)) => {
            Err(PlanError::InvalidSpec(m).into())
        }
        Err(crate::runtime::ReconcileError::Retry(m)) => Err(PlanError::PluginRetry(m).into()),
    }
}

/// How long a reconcile waits for a child kind's cache to sync before it reports the kind
/// unavailable (a missing permission, a kind the API server does not serve): long enough for
/// a first list at start, short enough that a reconcile, and so a shutdown, never hangs.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until `cache` has synced, at most [`CACHE_SYNC_TIMEOUT`]. A waiter that starts
/// before the store is ready can miss the wake-up when several reconciles wait at once (seen
/// with kube-runtime 5), so each wait is bounded and retried with a fresh future.
async fn wait_for_cache(cache: &ChildCache) -> Result<(), Error> {
    let started = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_millis(100), cache.store.wait_until_ready()).await
        {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(stopped)) => {
                return Err(Error::PluginTask(format!(
                    "the {} cache stopped: {stopped}",
                    cache.kind
                )));
            }
            Err(_) if started.elapsed() < CACHE_SYNC_TIMEOUT => continue,
            Err(_) => {
                let last_error = cache
                    .last_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                return Err(Error::ChildKindUnavailable {
                    kind: cache.kind.to_string(),
                    problem: last_error.unwrap_or_else(|| {
                        format!("it did not sync within {CACHE_SYNC_TIMEOUT:?}")
                    }),
                });
            }
        }
    }
}

/// Children in the caches that belong to this parent (controller reference to its UID),
/// once every cache has synced: a plan made before would see no children and report a
/// status that is not true.
async fn observed_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
) -> Result<Vec<Value>, Error> {
    for cache in &ctx.child_caches {
        wait_for_cache(cache).await?;
    }
    let Some(uid) = parent.uid() else {
        return Ok(Vec::new());
    };
    let mut observed = Vec::new();
    for ChildCache { kind, store, .. } in &ctx.child_caches {
        let owned = store.state_filter(|child| {
            child
                .owner_references()
                .iter()
                .any(|r| r.uid == uid && r.controller == Some(true))
        });
        for child in owned {
            let Ok(mut value) = serde_json::to_value(&*child) else {
                continue;
            };
            // Objects from a LIST carry no apiVersion/kind; the plugin needs them.
            value["apiVersion"] = kind.api_version().into();
            value["kind"] = kind.kind.clone().into();
            observed.push(value);
        }
    }
    tracing::trace!(parent = %parent_key(parent), observed = observed.len(), "caches ready");
    Ok(observed)
}

/// Runs `call` (a sandboxed call of `plugin`) on a blocking thread, within the plugin's
/// share of call slots, and records its duration.
async fn call_in_slot<R: Send + 'static>(
    ctx: &PluginContext,
    plugin: &Plugin,
    call: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Error> {
    let _slot = ctx
        .call_slots
        .acquire()
        .await
        .map_err(|e| Error::PluginTask(e.to_string()))?;
    let started = Instant::now();
    let result = crate::runtime::spawn_call(plugin.compiled.call_priority(), call)
        .await
        .map_err(|e| Error::PluginTask(e.to_string()))?;
    ctx.metrics
        .plugin_call_duration
        .get_or_create(&PluginLabels {
            plugin: plugin.decl.name.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    Ok(result)
}

/// Makes the plan (the plugin's `reconcile` call and validation).
async fn call_plan(
    ctx: &PluginContext,
    plugin: &Arc<Plugin>,
    parent: Value,
    observed: Vec<Value>,
) -> Result<Plan, Error> {
    let call_plugin = plugin.clone();
    let plan = call_in_slot(ctx, plugin, move || {
        plan::plan(&call_plugin, &parent, &observed, &now_rfc3339())
    })
    .await?;
    Ok(plan?)
}

/// Waits for a token of the plugin's write budget, then counts the write.
async fn spend_write(ctx: &PluginContext, plugin: &str, write: &str) {
    ctx.write_budget.until_ready().await;
    ctx.metrics
        .api_writes
        .get_or_create(&WriteLabels {
            plugin: plugin.to_string(),
            write: write.to_string(),
        })
        .inc();
}

/// Server-side applies each child in plan order; returns how many changed.
async fn apply_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    plan: &Plan,
    observed: &[Value],
) -> Result<usize, Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut changed = 0;
    for child in &plan.apply {
        let kind_name = child["kind"].as_str().unwrap_or_default().to_string();
        let name = child["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Some(kind) = plugin.decl.children.iter().find(|k| k.matches(child)) else {
            continue; // the plan only contains declared kinds
        };
        let api = api_for(&ctx.client, kind, parent.namespace().as_deref());
        let mut before = observed
            .iter()
            .find(|o| kind.matches(o) && o["metadata"]["name"] == name.as_str())
            .and_then(|o| {
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string)
            });
        if before.is_none() {
            // Not in our caches: it must not exist, or be ours and not cached yet.
            let existing = api.get_opt(&name).await.map_err(|source| Error::Read {
                kind: kind_name.clone(),
                name: name.clone(),
                source,
            })?;
            if let Some(existing) = existing {
                if !is_controlled_by(&existing, parent) {
                    return Err(Error::NotOwned {
                        kind: kind_name,
                        name,
                    });
                }
                before = existing.resource_version();
            }
        }
        spend_write(ctx, &plugin.decl.name, "apply").await;
        let after = api
            .patch(&name, &params, &Patch::Apply(child))
            .await
            .map_err(|source| Error::Apply {
                kind: kind_name.clone(),
                name: name.clone(),
                source,
            })?;
        ctx.metrics
            .applies
            .get_or_create(&KindLabels {
                plugin: plugin.decl.name.clone(),
                kind: kind_name.clone(),
            })
            .inc();
        let reason = match before {
            None => "Created",
            Some(version) if after.resource_version().as_deref() != Some(version.as_str()) => {
                "Updated"
            }
            Some(_) => continue,
        };
        changed += 1;
        publish(
            ctx,
            plugin,
            parent,
            EventType::Normal,
            reason,
            format!("{reason} {kind_name} {name}"),
        )
        .await;
    }
    Ok(changed)
}

fn is_controlled_by(child: &DynamicObject, parent: &DynamicObject) -> bool {
    let uid = parent.uid();
    child
        .owner_references()
        .iter()
        .any(|r| Some(&r.uid) == uid.as_ref() && r.controller == Some(true))
}

async fn prune_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    plan: &Plan,
) -> Result<(), Error> {
    for target in &plan.prune {
        let api = api_for(&ctx.client, &target.kind, Some(&target.namespace));
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(target.uid.clone()),
                resource_version: None,
            }),
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        spend_write(ctx, &plugin.decl.name, "prune").await;
        match api.delete(&target.name, &params).await {
            Ok(_) => {}
            // Already gone, or replaced by another object of that name: nothing of ours to prune.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => continue,
            Err(source) => {
                return Err(Error::Prune {
                    kind: target.kind.kind.clone(),
                    name: target.name.clone(),
                    source,
                });
            }
        }
        ctx.metrics
            .prunes
            .get_or_create(&KindLabels {
                plugin: plugin.decl.name.clone(),
                kind: target.kind.kind.clone(),
            })
            .inc();
        let message = format!("Pruned {} {}", target.kind.kind, target.name);
        publish(ctx, plugin, parent, EventType::Normal, "Pruned", message).await;
    }
    Ok(())
}

/// A hash of what a parent's status may legitimately follow: its generation, labels and
/// annotations, and the observed children's identities and resource versions.
fn inputs_hash(parent: &DynamicObject, observed: &[Value]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parent.metadata.generation.hash(&mut hasher);
    parent.labels().hash(&mut hasher);
    parent.annotations().hash(&mut hasher);
    let mut children: Vec<(&str, &str, &str)> = observed
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default(),
            )
        })
        .collect();
    children.sort_unstable();
    children.hash(&mut hasher);
    hasher.finish()
}

fn value_hash(value: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Refuses a status that keeps changing while nothing it could follow from changed: a
/// counter, or anything else derived from the previous status, would otherwise be written
/// (and re-trigger the parent) on every reconcile.
fn check_status_churn(
    parent: &DynamicObject,
    ctx: &PluginContext,
    rules: &Effective,
    parent_json: &Value,
    observed: &[Value],
    status: &Value,
) -> Result<(), Error> {
    let inputs = inputs_hash(parent, observed);
    let status_hash = value_hash(status);
    let mut states = lock(&ctx.parents);
    let state = states.entry(state_key(parent)).or_default();
    if parent_json.get("status") == Some(status) || state.last_status == Some(status_hash) {
        // Unchanged, or what the host wrote last (a lagging cache): not a change.
        state.status_changes = 0;
        state.inputs = inputs;
        state.last_status = Some(status_hash);
        return Ok(());
    }
    if state.inputs == inputs {
        state.status_changes += 1;
    } else {
        state.inputs = inputs;
        state.status_changes = 1;
    }
    if state.status_changes >= rules.status_churn_limit {
        return Err(Error::StatusNotConverging {
            plugin: ctx.plugin.load().decl.name.clone(),
            changes: rules.status_churn_limit,
        });
    }
    state.last_status = Some(status_hash);
    Ok(())
}

/// Writes `status` unless it equals the current one (no hot loop on our own writes).
async fn write_status(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
    parent_json: &Value,
    status: Value,
) -> Result<(), Error> {
    if parent_json.get("status") == Some(&status) {
        return Ok(());
    }
    let types = parent.types.clone().unwrap_or_default();
    let patch = json!({
        "apiVersion": types.api_version,
        "kind": types.kind,
        "status": status,
    });
    spend_write(ctx, &ctx.plugin.load().decl.name, "status").await;
    api.patch_status(
        &parent.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::WriteStatus)?;
    Ok(())
}

/// Puts `Reconciled=False` on the parent and publishes a Warning event.
async fn report_failure(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    error: &Error,
) {
    tracing::warn!(plugin = %plugin.decl.name, parent = %parent_key(parent), reason = error.reason(), %error, "reconcile failed");
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let status = plan::failure_status(
        &parent_json,
        error.reason(),
        &error.to_string(),
        &now_rfc3339(),
    );
    if parent.metadata.deletion_timestamp.is_none() {
        let api = api_for(
            &ctx.client,
            &plugin.decl.parent,
            parent.namespace().as_deref(),
        );
        if let Err(e) = write_status(parent, ctx, &api, &parent_json, status).await {
            tracing::warn!(parent = %parent_key(parent), error = %e, "cannot write the failure status");
        }
    }
    publish(
        ctx,
        plugin,
        parent,
        EventType::Warning,
        error.reason(),
        error.to_string(),
    )
    .await;
}

async fn publish(
    ctx: &PluginContext,
    plugin: &Plugin,
    parent: &DynamicObject,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let reference = parent.object_ref(&plugin.decl.parent.api_resource());
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    spend_write(ctx, &plugin.decl.name, "event").await;
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::debug!(%error, "cannot publish event");
    }
}

async fn add_finalizer(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
) -> Result<(), Error> {
    // The resourceVersion test makes this a no-op on a stale copy instead of a duplicate.
    let guard = json!({"op": "test", "path": "/metadata/resourceVersion", "value": parent.resource_version()});
    let add = if parent.metadata.finalizers.is_none() {
        json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})
    } else {
        json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER})
    };
    json_patch_parent(parent, ctx, api, json!([guard, add])).await
}

async fn remove_finalizer(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
) -> Result<(), Error> {
    let index = parent
        .finalizers()
        .iter()
        .position(|f| f == FINALIZER)
        .unwrap_or(0);
    let operations = json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]);
    json_patch_parent(parent, ctx, api, operations).await
}

/// Applies the JSON patch `operations` to the parent's metadata.
async fn json_patch_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
    operations: Value,
) -> Result<(), Error> {
    // Built from literals above, so it always has the shape of a JSON patch.
    let patch: json_patch::Patch = serde_json::from_value(operations).unwrap_or_default();
    spend_write(ctx, &ctx.plugin.load().decl.name, "finalizer").await;
    api.patch(
        &parent.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
    .map_err(Error::Finalizer)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memcached_resource() -> kube::core::ApiResource {
        kube::core::ApiResource {
            group: "cache.example.com".into(),
            version: "v1alpha1".into(),
            api_version: "cache.example.com/v1alpha1".into(),
            kind: "Memcached".into(),
            plural: "memcacheds".into(),
        }
    }

    fn parent(name: &str, uid: &str) -> DynamicObject {
        let mut object = DynamicObject::new(name, &memcached_resource()).within("ns");
        object.metadata.uid = Some(uid.into());
        object
    }

    #[test]
    fn the_state_of_deleted_parents_is_forgotten() {
        use kube::runtime::reflector::store::Writer;
        use kube::runtime::watcher::Event;
        let mut writer: Writer<DynamicObject> = Writer::new(memcached_resource());
        let store = writer.as_reader();
        let states = ParentStates::default();
        for uid in ["1", "2", "3"] {
            lock(&states).insert(uid.to_string(), ParentState::default());
        }
        // A delete event forgets that parent at once.
        let deleted = Event::Delete(parent("a", "1"));
        writer.apply_watcher_event(&deleted);
        forget_gone_parents(&states, &store, &Ok(deleted));
        assert!(!lock(&states).contains_key("1"));
        // A relist that no longer holds a parent (its delete was missed) forgets it too.
        for event in [
            Event::Init,
            Event::InitApply(parent("b", "2")),
            Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
            forget_gone_parents(&states, &store, &Ok(event));
        }
        let mut left: Vec<String> = lock(&states).keys().cloned().collect();
        left.sort();
        assert_eq!(left, ["2"]);
    }

    #[test]
    fn backoff_doubles_from_one_second_to_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(10), Duration::from_secs(300));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
    }
}
