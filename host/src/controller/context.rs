//! What every reconcile of one plugin shares: its version, caches, budget and events.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use tokio::sync::Semaphore;

use super::{canary, reconcile};
use crate::kinds::Kind;
use crate::labels::FIELD_MANAGER;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::plugin::Plugin;
use crate::policy::Effective;

/// The cache of one child kind (what a reconcile presents to the plugin as observed), or of
/// the objects of one related declaration.
pub struct ChildCache {
    pub kind: Kind,
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
pub(super) fn write_budget(rules: &Effective) -> governor::DefaultDirectRateLimiter {
    let per_second = NonZeroU32::new(rules.writes_per_second).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(rules.write_burst).unwrap_or(NonZeroU32::MIN);
    governor::RateLimiter::direct(governor::Quota::per_second(per_second).allow_burst(burst))
}

/// The recorder of the host's events (the pod's name, if it has one, as the instance).
pub(super) fn recorder(client: &Client) -> Recorder {
    Recorder::new(
        client.clone(),
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        },
    )
}
