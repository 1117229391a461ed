//! One reconcile: plan, policy, finalizer, apply in order, prune, status, events.
//!
//! This module runs the steps in order; each step is a module of its own whose decisions are
//! pure functions with unit tests ([`parent_state`]: what the host remembers per parent, retries and write shares, [`finalizer`]:
//! when to add, call `finalize` or release, [`apply`]: ownership, preconditions and which
//! changes make events, [`prune`], [`status`]: the churn guard and the status write).
//!
//! Deletion goes through the same function as reconciling ([`reconcile`]), so a `finalize`
//! call takes a call slot, waits for the caches, passes the policy and is counted exactly
//! like a `reconcile` call. Every API write a reconcile causes (applies, prunes, the status,
//! finalizer edits, events) first takes a token from the plugin's write budget.

mod apply;
mod finalizer;
mod observe;
mod parent_state;
mod prune;
mod prune_guard;
mod status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::Value;
use tracing::Instrument;

use super::{ChildCache, PluginContext};
use crate::api::api_for;
use crate::kinds::Kind;
use crate::labels::managed_children_selector;
use crate::metrics::{PluginLabels, ResultLabels, VersionResultLabels, WriteLabels};
use crate::plan::{self, Plan, PlanError};
use crate::plugin::Plugin;
use finalizer::DeletionStep;
use parent_state::{forget, record_success};

pub use finalizer::{FINALIZER, holds as holds_finalizer};
pub use observe::DriftedParents;
pub use parent_state::{ParentStates, WriteShare, error_policy, forget_gone_parents};
pub(crate) use prune::delete_target;
pub use prune_guard::PruneGuard;
pub(crate) use status::patch_parent_status;

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
        "{kind} {name:?} cannot be updated in place: the API server refuses the change as \
         immutable ({message}); the host tries again when the parent or the child changes \
         (a plugin that wants it deleted and created again returns it with the update \
         strategy `recreate`)"
    )]
    ImmutableField {
        kind: String,
        name: String,
        message: String,
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
        "the plugin wanted another {child} on {changes} reconciles in a row while the \
         parent's generation, labels and annotations stayed the same and nothing but the host \
         changed the child; what a child holds must follow from its inputs (fields that keep \
         changing: {fields}; statusChurnLimit is {changes} for plugin {plugin})"
    )]
    ChildrenNotConverging {
        plugin: String,
        child: String,
        fields: String,
        changes: u32,
    },
    #[error(
        "{name:?} was changed, deleted or replaced since the host's cache saw it; nothing \
         is written from that view, and what the cache has next is reconciled"
    )]
    StaleParent { name: String },
    #[error("the host is shutting down")]
    ShuttingDown,
    #[error(
        "the child kind {kind} cannot be listed or watched: {problem}; the host retries, and \
         the plugin's parents are reconciled once it can (check the host's RBAC, see \
         `operator-host rbac`, and that the API server serves the kind)"
    )]
    ChildKindUnavailable { kind: String, problem: String },
    #[error(
        "the related kind {kind} cannot be listed or watched: {problem}; the host retries, \
         and the plugin's parents are reconciled once it can (check the host's RBAC, see \
         `operator-host rbac`, and that the API server serves the kind)"
    )]
    RelatedKindUnavailable { kind: String, problem: String },
    #[error(
        "held the deletion of {count} children that no change of this parent's spec asked \
         for: with what this version already deleted, that is more than {limit} ({percent}% of \
         the plugin's {children} children) within {window:?}; once held, this version deletes \
         nothing unasked. To let this parent's deletions go ahead, annotate it \
         operator-host.dev/approve-prune=true; to stop them, serve another version (pruneGuard \
         in the policy sets the share and the window)"
    )]
    PruneHeld {
        count: usize,
        limit: usize,
        children: usize,
        percent: u32,
        window: Duration,
    },
}

impl Error {
    /// The `Reconciled=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Plan(error) => error.reason(),
            Error::Apply { .. } | Error::Read { .. } => "ApplyFailed",
            Error::NotOwned { .. } => "ChildNotOwned",
            Error::ImmutableField { .. } => "ImmutableField",
            Error::Prune { .. } => "PruneFailed",
            Error::WriteStatus(_) => "StatusWriteFailed",
            Error::Finalizer(_) => "FinalizerFailed",
            Error::PluginTask(_) => "PluginUnavailable",
            Error::StatusNotConverging { .. } => "StatusNotConverging",
            Error::ChildrenNotConverging { .. } => "ChildrenNotConverging",
            Error::ChildKindUnavailable { .. } => "ChildKindUnavailable",
            Error::RelatedKindUnavailable { .. } => "RelatedKindUnavailable",
            Error::PruneHeld { .. } => "PruneHeld",
            Error::StaleParent { .. } => "StaleParent",
            Error::ShuttingDown => "ShuttingDown",
        }
    }

    pub(super) fn api_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Apply { source, .. }
            | Error::Prune { source, .. }
            | Error::Read { source, .. } => Some(source),
            Error::WriteStatus(source) | Error::Finalizer(source) => Some(source),
            _ => None,
        }
    }
}

/// Now, to the second, for condition transitions (plugins have no clock).
pub(crate) fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(now)
        .to_string()
}

pub(super) fn parent_key(parent: &DynamicObject) -> String {
    format!(
        "{}/{}",
        parent.namespace().unwrap_or_default(),
        parent.name_any()
    )
}

/// The controller's reconcile function, for live parents and parents being deleted alike.
pub async fn reconcile(
    parent: Arc<DynamicObject>,
    ctx: Arc<PluginContext>,
) -> Result<Action, Error> {
    // A standby keeps its caches warm and calls no plugin; it reconciles every parent once it
    // leads (the controller's reconcile-all trigger).
    if !ctx.leadership.may_write() {
        return Ok(Action::await_change());
    }
    if let Some(shard) = &ctx.shard {
        match crate::shard::ownership(&parent, shard) {
            crate::shard::Ownership::Owned => {}
            // Another shard's (a cache that lags may still show it): not ours to touch.
            crate::shard::Ownership::NotOwned => return Ok(Action::await_change()),
            crate::shard::Ownership::Draining => return Ok(give_up(&parent, &ctx).await),
        }
    }
    // The version live now serves this whole reconcile, even if a reload swaps it meanwhile:
    // the canary version for a canary parent, the serving one for the others.
    let key = parent_key(&parent);
    let canary = ctx.canary.version_for(&key);
    let plugin = canary.clone().unwrap_or_else(|| ctx.plugin.load_full());
    // One trace per reconcile: this span, its steps' and their requests' under it; its trace
    // id is a field of every log line of the reconcile.
    let span = tracing::info_span!(
        "reconcile",
        plugin = %plugin.decl.name,
        parent = %key,
        version = %plugin.decl.version,
        canary = canary.is_some(),
        trace_id = tracing::field::Empty,
    );
    if let Some(trace_id) = crate::telemetry::trace_id(&span) {
        span.record("trace_id", tracing::field::display(trace_id));
    }
    reconcile_with(parent, ctx, plugin, canary, key)
        .instrument(span)
        .await
}

/// [`reconcile`] once the version that serves the parent is chosen.
async fn reconcile_with(
    parent: Arc<DynamicObject>,
    ctx: Arc<PluginContext>,
    plugin: Arc<Plugin>,
    canary: Option<Arc<Plugin>>,
    key: String,
) -> Result<Action, Error> {
    let labels = PluginLabels {
        plugin: plugin.decl.name.clone(),
    };
    let started = Instant::now();
    let gauge = ctx.metrics.in_flight.get_or_create(&labels).clone();
    gauge.inc();
    let paused = is_paused(&parent);
    let observing =
        plugin.policy.rules(&plugin.decl.name).mode == crate::policy::PluginMode::Observe;
    let result = if paused {
        report_paused(&parent, &ctx, &plugin).await
    } else if observing && parent.metadata.deletion_timestamp.is_some() {
        // Observe mode neither calls `finalize` nor releases a finalizer.
        ctx.drifted.mark(&parent, false);
        Ok(Action::await_change())
    } else if observing {
        observe::observe_parent(&parent, &ctx, &plugin).await
    } else if parent.metadata.deletion_timestamp.is_some() {
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
        Ok(_) if paused => "paused".to_string(),
        Ok(_) if observing => "observed".to_string(),
        Ok(_) => "success".to_string(),
        Err(error) => error.reason().to_string(),
    };
    ctx.metrics
        .version_reconciles
        .get_or_create(&VersionResultLabels {
            plugin: labels.plugin.clone(),
            sha256: plugin.decl.content_hash.clone(),
            result: result_label.clone(),
        })
        .inc();
    ctx.metrics
        .reconciles
        .get_or_create(&ResultLabels {
            plugin: labels.plugin,
            result: result_label,
        })
        .inc();
    if let Some(canary) = &canary {
        match &result {
            Ok(_) | Err(Error::StaleParent { .. } | Error::ShuttingDown) => {}
            Err(error) => {
                let reason = format!("{}: {error}", error.reason());
                ctx.canary
                    .record_failure(&key, &canary.decl.content_hash, &reason);
            }
        }
    }
    match &result {
        Ok(_) => record_success(&ctx.parents, &parent, ctx.shard.is_some()),
        Err(error) => status::report_failure(&parent, &ctx, &plugin, error).await,
    }
    result
}

/// The annotation that pauses a parent: while it says `"true"`, the host neither calls the
/// plugin for it nor writes its children or its finalizer (a deletion waits too); it only
/// says so in the parent's status. Removing it (or any other value) resumes at once.
pub const PAUSED_ANNOTATION: &str = "operator-host.dev/paused";

/// Whether `parent` carries [`PAUSED_ANNOTATION`] set to `"true"`.
fn is_paused(parent: &DynamicObject) -> bool {
    parent
        .annotations()
        .get(PAUSED_ANNOTATION)
        .is_some_and(|value| value == "true")
}

/// A paused parent's one write: `Reconciled=False` with reason `Paused`, unless it says so
/// already (for whatever generation: a spec change while paused is not written either). The
/// annotation's removal is a change the controller sees, so nothing requeues.
async fn report_paused(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
) -> Result<Action, Error> {
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let says_paused = parent_json["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == plan::RECONCILED && c["reason"] == plan::PAUSED)
        });
    if says_paused {
        return Ok(Action::await_change());
    }
    let message = format!(
        "paused by the annotation {PAUSED_ANNOTATION}=\"true\": the host writes nothing for \
         this parent, its children or its finalizer until it is removed"
    );
    let status = plan::failure_status(&parent_json, plan::PAUSED, &message, &now_rfc3339());
    let api = api_for(
        &ctx.client,
        &plugin.decl.parent,
        parent.namespace().as_deref(),
    );
    status::write_status(parent, ctx, &api, &parent_json, status).await?;
    Ok(Action::await_change())
}

/// How soon a drain whose acknowledgement met a newer version of the parent is tried again.
const DRAIN_RETRY: Duration = Duration::from_millis(200);

/// The owner's half of the drain handshake: no reconcile of this parent runs now (the
/// controller runs one at a time per parent), so it is given up to the leader, which then
/// assigns it to its new shard.
async fn give_up(parent: &DynamicObject, ctx: &PluginContext) -> Action {
    let plugin = ctx.plugin.load();
    let api = api_for(
        &ctx.client,
        &plugin.decl.parent,
        parent.namespace().as_deref(),
    );
    match crate::shard::ack_drain(&api, parent).await {
        Ok(true) => {
            tracing::debug!(parent = %parent_key(parent), "drained: given up to another shard");
            forget(&ctx.parents, parent);
            ctx.metrics
                .shard_drains
                .get_or_create(&PluginLabels {
                    plugin: plugin.decl.name.clone(),
                })
                .inc();
            Action::await_change()
        }
        // The parent changed since the cache showed it (a status write, say, which does not
        // reconcile): try again on the version the cache has by then.
        Ok(false) => Action::requeue(DRAIN_RETRY),
        Err(error) => {
            tracing::warn!(%error, "cannot give up a drained parent; retrying");
            Action::requeue(Duration::from_secs(1))
        }
    }
}

async fn reconcile_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Arc<Plugin>,
) -> Result<Action, Error> {
    let decl = &plugin.decl;
    let rules = plugin.policy.rules(&decl.name);
    tracing::trace!(parent = %parent_key(parent), "reconcile starting");
    let api = api_for(&ctx.client, &decl.parent, parent.namespace().as_deref());
    // Before the plan: whether the spec asks for deletions follows from the parent as it came.
    let deletions_asked_for = spec_asks_for_deletions(parent, ctx, rules, &decl.content_hash);
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let (observed, related) = async {
        let observed = observed_children(parent, ctx, plugin).await?;
        let related = related_objects(&parent_json, ctx, plugin).await?;
        Ok::<_, Error>((observed, related))
    }
    .instrument(tracing::debug_span!("cache_wait"))
    .await?;
    record(ctx, plugin, &parent_json, &observed, &related);
    let inputs = apply::churn_inputs(parent, &related, &decl.name);
    let plan = call_plan(ctx, plugin, parent_json.clone(), observed.clone(), related).await?;
    tracing::debug_span!("policy_check", children = plan.apply.len())
        .in_scope(|| plugin.policy.check(decl, &parent_json, &plan))
        .map_err(PlanError::from)?;
    // Only a plan that passed the policy may hold up the parent's deletion.
    if decl.needs_finalize && !finalizer::holds(parent) {
        finalizer::add(parent, ctx, &api).await?;
    }
    let applied = apply::apply_children(parent, ctx, plugin, &plan, &observed, inputs).await?;
    let status = match &applied.waiting {
        // Held at a barrier: nothing is pruned until every stage is applied.
        Some(waiting) => {
            plan::waiting_status(&parent_json, plan.status.clone(), waiting, &now_rfc3339())
        }
        None => {
            if !deletions_asked_for {
                guard_prunes(parent, ctx, plugin, &plan)?;
            }
            prune::prune_children(parent, ctx, plugin, &plan).await?;
            plan.status.clone()
        }
    };
    status::check_status_churn(parent, ctx, rules, &parent_json, &observed, &status)?;
    status::write_status(parent, ctx, &api, &parent_json, status).await?;
    if applied.changed > 0 {
        tracing::debug!(parent = %parent_key(parent), applied = applied.changed, waiting = ?applied.waiting, "reconciled");
    }
    let requeue = plan.requeue_after.unwrap_or(ctx.resync);
    Ok(Action::requeue(requeue.max(rules.min_requeue)))
}

/// Keeps the inputs of this reconcile in the flight recorder, if it is on (written off the
/// reconcile's path; a failure to write is logged, never the reconcile's).
fn record(
    ctx: &PluginContext,
    plugin: &Plugin,
    parent: &Value,
    observed: &[Value],
    related: &[crate::runtime::RelatedObjects],
) {
    let Some(recorder) = ctx.flight_recorder.clone() else {
        return;
    };
    let inputs = crate::diff::ParentInputs {
        parent: parent.clone(),
        observed: observed.to_vec(),
        related: related.to_vec(),
    };
    let recording = crate::recording::Recording::of(&plugin.decl, &inputs, &now_rfc3339());
    tokio::task::spawn_blocking(move || {
        if let Err(error) = recorder.record(&recording) {
            tracing::warn!(%error, "the flight recorder cannot keep a reconcile's inputs");
        }
    });
}

/// Whether the deletions `version` makes for `parent` are its own spec's doing (it changed
/// within the prune guard's window, seen by that version) or approved by its annotation, so
/// the prune guard lets them through.
fn spec_asks_for_deletions(
    parent: &DynamicObject,
    ctx: &PluginContext,
    rules: &crate::policy::Effective,
    version: &str,
) -> bool {
    let mut states = parent_state::lock(&ctx.parents);
    let state = states.entry(parent_state::state_key(parent)).or_default();
    let asked = prune_guard::asked_for(
        parent,
        &mut state.spec_changed,
        version,
        rules.prune_guard_window,
        Instant::now(),
    );
    asked || prune_guard::approved(parent)
}

/// The prune guard's decision on the deletions of `plan` that no spec change asked for.
fn guard_prunes(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    plan: &Plan,
) -> Result<(), Error> {
    let count = plan
        .prune
        .iter()
        .filter(|target| target.policy == crate::runtime::DeletePolicy::Delete)
        .count();
    if count == 0 {
        return Ok(());
    }
    let rules = plugin.policy.rules(&plugin.decl.name);
    let children = ctx.child_caches.iter().map(|cache| cache.store.len()).sum();
    let verdict = ctx.prune_guard.admit(
        &plugin.decl.content_hash,
        count,
        children,
        rules.prune_guard_percent,
        rules.prune_guard_window,
        Instant::now(),
    );
    match verdict {
        prune_guard::Verdict::Allow => Ok(()),
        prune_guard::Verdict::Held { count, limit } => {
            ctx.metrics
                .prunes_held
                .get_or_create(&PluginLabels {
                    plugin: plugin.decl.name.clone(),
                })
                .inc_by(count as u64);
            tracing::warn!(parent = %parent_key(parent), count, limit, "prune guard held deletions");
            Err(Error::PruneHeld {
                count,
                limit,
                children,
                percent: rules.prune_guard_percent,
                window: rules.prune_guard_window,
            })
        }
    }
}

/// Calls the plugin's `finalize` for a parent being deleted; removes the host's finalizer
/// once it reports done. A parent in a namespace the policy does not allow the plugin is
/// released without calling it: the plugin may not act there, so it may not hold it either.
#[tracing::instrument(level = "debug", name = "finalize", skip_all)]
async fn finalize_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Arc<Plugin>,
) -> Result<Action, Error> {
    let decl = &plugin.decl;
    let api = api_for(&ctx.client, &decl.parent, parent.namespace().as_deref());
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let allowed = plugin
        .policy
        .check_parent(&decl.name, &parent_json)
        .map_err(|violation| violation.to_string());
    match finalizer::deletion_step(parent, allowed) {
        DeletionStep::Forget => {
            forget(&ctx.parents, parent);
            return Ok(Action::await_change());
        }
        DeletionStep::ReleaseWithoutCall(violation) => {
            let note = format!("finalizer released without calling the plugin: {violation}");
            publish(
                ctx,
                plugin,
                parent,
                EventType::Warning,
                "PolicyViolation",
                note,
                None,
            )
            .await;
            finalizer::remove(parent, ctx, &api).await?;
            return Ok(Action::await_change());
        }
        DeletionStep::CallFinalize => {}
    }
    let observed = observed_children(parent, ctx, plugin).await?;
    let related = related_objects(&parent_json, ctx, plugin).await?;
    let (request, seed) = plan::request("finalize", &parent_json, &observed, related);
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
            finalizer::remove(parent, ctx, &api).await?;
            forget(&ctx.parents, parent);
            Ok(Action::await_change())
        }
        Ok(response) => {
            let asked = Duration::from_millis(response.requeue_after_ms.unwrap_or(5_000));
            let rules = plugin.policy.rules(&decl.name);
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
async fn wait_for_cache(
    cache: &ChildCache,
    ctx: &PluginContext,
    unavailable: fn(String, String) -> Error,
) -> Result<(), Error> {
    let started = Instant::now();
    loop {
        if *ctx.stopping.borrow() {
            return Err(Error::ShuttingDown);
        }
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
                return Err(unavailable(
                    cache.kind.to_string(),
                    last_error.unwrap_or_else(|| {
                        format!("it did not sync within {CACHE_SYNC_TIMEOUT:?}")
                    }),
                ));
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
    plugin: &Plugin,
) -> Result<Vec<Value>, Error> {
    let Some(uid) = parent.uid() else {
        return Ok(Vec::new());
    };
    if !cached_for(ctx, plugin) {
        return live_children(parent, ctx, plugin, &uid).await;
    }
    for cache in &ctx.child_caches {
        wait_for_cache(cache, ctx, |kind, problem| Error::ChildKindUnavailable {
            kind,
            problem,
        })
        .await?;
    }
    if ctx.shard.is_some() && !parent_state::is_settled(&ctx.parents, parent) {
        return live_children(parent, ctx, plugin, &uid).await;
    }
    let mut observed = Vec::new();
    for ChildCache { kind, store, .. } in &ctx.child_caches {
        let owned = store.state_filter(|child| {
            child
                .owner_references()
                .iter()
                .any(|r| r.uid == uid && r.controller == Some(true))
        });
        observed.extend(owned.iter().filter_map(|child| kind.to_json(child)));
    }
    tracing::trace!(parent = %parent_key(parent), observed = observed.len(), "caches ready");
    Ok(observed)
}

/// The objects of each of the plugin's related declarations for `parent`, from the caches
/// once they have synced (a plan made before would see nothing related).
async fn related_objects(
    parent: &Value,
    ctx: &PluginContext,
    plugin: &Plugin,
) -> Result<Vec<crate::runtime::RelatedObjects>, Error> {
    if !cached_for(ctx, plugin) {
        return live_related_objects(parent, ctx, plugin).await;
    }
    for cache in &ctx.related_caches {
        wait_for_cache(cache, ctx, |kind, problem| Error::RelatedKindUnavailable {
            kind,
            problem,
        })
        .await?;
    }
    Ok(crate::related::objects_for(
        &plugin.decl.related,
        parent,
        |index| {
            let Some(ChildCache { kind, store, .. }) = ctx.related_caches.get(index) else {
                return Vec::new();
            };
            store
                .state()
                .iter()
                .filter_map(|object| kind.to_json(object))
                .collect()
        },
    ))
}

/// Whether the controller's caches hold what `plugin` reads: those of the serving version
/// do (a swap keeps the watches: see `Proposal::needs_restart`), those of a canary whose
/// child kinds or related declarations differ do not.
fn cached_for(ctx: &PluginContext, plugin: &Plugin) -> bool {
    let serving = ctx.plugin.load();
    (serving.decl.content_hash == plugin.decl.content_hash
        && Arc::ptr_eq(&serving.policy, &plugin.policy))
        || (serving.decl.related == plugin.decl.related
            && serving.policy.allowed_children(&serving.decl)
                == plugin.policy.allowed_children(&plugin.decl))
}

/// The objects of `plugin`'s related declarations for `parent`, read from the API server
/// (for a version whose declarations the caches do not follow).
async fn live_related_objects(
    parent: &Value,
    ctx: &PluginContext,
    plugin: &Plugin,
) -> Result<Vec<crate::runtime::RelatedObjects>, Error> {
    let namespace = parent["metadata"]["namespace"].as_str();
    let mut listed: Vec<(&Kind, Vec<Value>)> = Vec::new();
    for related in &plugin.decl.related {
        if listed.iter().any(|(kind, _)| **kind == related.kind) {
            continue;
        }
        let objects = crate::diff::live::list_kind(
            &ctx.client,
            &related.kind,
            namespace,
            &kube::api::ListParams::default(),
        )
        .await
        .map_err(|source| Error::Read {
            kind: related.kind.kind.clone(),
            name: format!(
                "related objects of {}/{}",
                namespace.unwrap_or_default(),
                parent["metadata"]["name"].as_str().unwrap_or_default()
            ),
            source,
        })?;
        listed.push((&related.kind, objects));
    }
    Ok(crate::related::objects_for(
        &plugin.decl.related,
        parent,
        |index| {
            let kind = &plugin.decl.related[index].kind;
            listed
                .iter()
                .find(|(listed, _)| *listed == kind)
                .map(|(_, objects)| objects.clone())
                .unwrap_or_default()
        },
    ))
}

/// The children of `parent` of the kinds `plugin` watches, read from the API server: for a
/// parent this shard has just been given (its caches select this shard's label, which the
/// children carry only once this shard has applied them, and a child the plugin no longer
/// wants must be seen to be pruned), and for a version the caches do not follow.
async fn live_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    uid: &str,
) -> Result<Vec<Value>, Error> {
    let selector = format!(
        "{},{}={uid}",
        managed_children_selector(&plugin.decl.name),
        crate::labels::PARENT_UID_LABEL
    );
    let mut observed = Vec::new();
    for kind in &plugin.policy.allowed_children(&plugin.decl) {
        let api = api_for(&ctx.client, kind, parent.namespace().as_deref());
        let listed = api
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::Read {
                kind: kind.kind.clone(),
                name: format!("children of {}", parent_key(parent)),
                source,
            })?;
        for child in listed.items {
            let controlled = child
                .owner_references()
                .iter()
                .any(|r| r.uid == uid && r.controller == Some(true));
            if !controlled {
                continue;
            }
            observed.extend(kind.to_json(&child));
        }
    }
    tracing::debug!(parent = %parent_key(parent), observed = observed.len(), "new to this shard: children read live");
    Ok(observed)
}

/// Runs `call` (a sandboxed call of `plugin`) on a blocking thread, within the plugin's
/// share of call slots, and records its duration and what it used.
#[tracing::instrument(
    level = "debug",
    name = "plugin_call",
    skip_all,
    fields(
        plugin = %plugin.decl.name,
        version = %plugin.decl.version,
        sha256 = %plugin.decl.content_hash,
        contract = plugin.compiled.contract().package(),
        cpu_seconds = tracing::field::Empty,
        peak_memory_bytes = tracing::field::Empty,
    )
)]
async fn call_in_slot<R: Send + 'static>(
    ctx: &PluginContext,
    plugin: &Plugin,
    call: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Error> {
    let _slot = ctx
        .call_slots
        .acquire()
        .instrument(tracing::debug_span!("call_slot_wait"))
        .await
        .map_err(|e| Error::PluginTask(e.to_string()))?;
    let started = Instant::now();
    let (result, usage) = crate::runtime::spawn_call(plugin.compiled.call_priority(), || {
        let result = call();
        (result, crate::runtime::take_last_call_usage())
    })
    .await
    .map_err(|e| Error::PluginTask(e.to_string()))?;
    let labels = PluginLabels {
        plugin: plugin.decl.name.clone(),
    };
    ctx.metrics
        .plugin_call_duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if let Some(usage) = usage {
        let span = tracing::Span::current();
        span.record("cpu_seconds", usage.cpu.as_secs_f64());
        span.record("peak_memory_bytes", usage.memory_bytes);
        ctx.metrics
            .plugin_cpu
            .get_or_create(&labels)
            .inc_by(usage.cpu.as_secs_f64());
        ctx.metrics
            .plugin_call_memory
            .get_or_create(&labels)
            .observe(usage.memory_bytes as f64);
    }
    Ok(result)
}

/// Makes the plan (the plugin's `reconcile` call and validation).
async fn call_plan(
    ctx: &PluginContext,
    plugin: &Arc<Plugin>,
    parent: Value,
    observed: Vec<Value>,
    related: Vec<crate::runtime::RelatedObjects>,
) -> Result<Plan, Error> {
    let call_plugin = plugin.clone();
    let plan = call_in_slot(ctx, plugin, move || {
        call_plugin.plan(&parent, &observed, related, &now_rfc3339())
    })
    .await?;
    Ok(plan?)
}

/// Waits for a token of the parent's share of the write budget and one of the plugin's
/// budget, then counts the write and the time it waited.
async fn spend_write(ctx: &PluginContext, parent: &DynamicObject, plugin: &str, write: &str) {
    let share = parent_state::parent_write_budget(&ctx.parents, parent, &ctx.write_share);
    let waiting = Instant::now();
    share.until_ready().await;
    ctx.write_budget.until_ready().await;
    ctx.metrics
        .write_budget_wait
        .get_or_create(&PluginLabels {
            plugin: plugin.to_string(),
        })
        .inc_by(waiting.elapsed().as_secs_f64());
    ctx.metrics
        .api_writes
        .get_or_create(&WriteLabels {
            plugin: plugin.to_string(),
            write: write.to_string(),
        })
        .inc();
}

/// Publishes an event about `parent`; `related` names the child it is about, so each child's
/// changes make a series of their own.
async fn publish(
    ctx: &PluginContext,
    plugin: &Plugin,
    parent: &DynamicObject,
    type_: EventType,
    reason: &str,
    note: String,
    related: Option<k8s_openapi::api::core::v1::ObjectReference>,
) {
    let reference = parent.object_ref(&plugin.decl.parent.api_resource());
    // The reconcile's trace, if traces are exported: `kubectl operator-host explain` shows it.
    let note = match crate::telemetry::trace_id(&tracing::Span::current()) {
        Some(trace_id) => crate::telemetry::note_with_trace(&note, &trace_id, EVENT_NOTE_LIMIT),
        None => note,
    };
    let event = event(type_, reason, &note, related);
    spend_write(ctx, parent, &plugin.decl.name, "event").await;
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::debug!(%error, "cannot publish event");
    }
}

/// The most characters of an event's note (the API server allows 1 KiB).
const EVENT_NOTE_LIMIT: usize = 1000;

/// An event of the host's about a parent (`related`: the child it is about, if any).
pub(crate) fn event(
    type_: EventType,
    reason: &str,
    note: &str,
    related: Option<k8s_openapi::api::core::v1::ObjectReference>,
) -> Event {
    Event {
        type_,
        reason: reason.to_string(),
        note: Some(note.chars().take(EVENT_NOTE_LIMIT).collect()),
        action: "Reconcile".into(),
        secondary: related,
    }
}

/// A child of `kind` as an event's related object.
fn child_reference(
    kind: &crate::kinds::Kind,
    namespace: &str,
    name: &str,
    uid: &str,
) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(kind.api_version()),
        kind: Some(kind.kind.clone()),
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        uid: Some(uid.to_string()),
        ..Default::default()
    }
}
