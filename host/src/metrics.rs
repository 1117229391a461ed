//! Prometheus metrics of the host, and the HTTP endpoints `/metrics`, `/healthz` and `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr} for metrics: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    pub plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub plugin: String,
    pub result: String,
}

/// A version of a plugin by its content, and how a reconcile on it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionResultLabels {
    pub plugin: String,
    pub sha256: String,
    pub result: String,
}

/// A version of a plugin by its content.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ContentLabels {
    pub plugin: String,
    pub sha256: String,
}

/// A webhook request: the plugin, which webhook (`validate`, `default`, `convert`) and how it
/// was answered (`allowed`, `refused`, `failed`: the call failed and the failure policy
/// decided, `bad-request`, `not-served`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    pub plugin: String,
    pub webhook: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub plugin: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub plugin: String,
    /// `apply`, `prune`, `status`, `finalizer` or `event`.
    pub write: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabels {
    pub plugin: String,
    pub version: String,
    pub sha256: String,
    /// `baseline` (Winch, while Cranelift compiles) or `optimized`.
    pub tier: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub plugin: String,
    /// `added`, `replaced`, `removed` or `rejected`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    pub plugin: String,
    /// The namespace a controller serves; empty for all.
    pub namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AssignmentLabels {
    pub plugin: String,
    /// `unassigned` (a new or drained parent), `shard-gone` (its shard died), `drain` (its
    /// shard was asked to give it up), `undrain`, or `moved` (fault injection only).
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabels {
    pub plugin: String,
    /// The shard name.
    pub shard: String,
}

/// Every metric the host exports.
pub struct Metrics {
    registry: Registry,
    /// Reconciles by plugin and result (`success` or a condition reason).
    pub reconciles: Family<ResultLabels, Counter>,
    /// Reconciles by the version that ran them: during a canary, the canary's beside the
    /// serving version's.
    pub version_reconciles: Family<VersionResultLabels, Counter>,
    /// The parents a canary under way serves, by plugin and canary version (0 once it ends).
    pub canary_parents: Family<ContentLabels, Gauge>,
    /// Duration of a whole reconcile, seconds.
    pub reconcile_duration: Family<PluginLabels, Histogram>,
    /// Duration of the sandboxed plugin call, seconds.
    pub plugin_call_duration: Family<PluginLabels, Histogram>,
    /// CPU time the plugin's sandboxed calls used, seconds: what each operand costs.
    pub plugin_cpu: Family<PluginLabels, Counter<f64, AtomicU64>>,
    /// Memory (linear memories and tables) each sandboxed call of the plugin held at its
    /// peak, bytes.
    pub plugin_call_memory: Family<PluginLabels, Histogram>,
    /// The instances the plugin's calls may hold at once: its share of the instance pool.
    pub plugin_instance_slots: Family<PluginLabels, Gauge>,
    /// Admission and conversion requests the webhooks answered (contract 0.3.0); their plugin
    /// calls count in the plugin call metrics above, with the reconciles'.
    pub webhook_requests: Family<WebhookLabels, Counter>,
    /// Children applied (server-side apply calls) by plugin and kind.
    pub applies: Family<KindLabels, Counter>,
    /// Children not applied, by plugin and kind: the plugin wanted what it was last applied,
    /// and the cached child still held it.
    pub applies_skipped: Family<KindLabels, Counter>,
    /// Children pruned by plugin and kind.
    pub prunes: Family<KindLabels, Counter>,
    /// Deletions the prune guard held, by plugin (each reconcile that was held counts the
    /// children it would have deleted).
    pub prunes_held: Family<PluginLabels, Counter>,
    /// New plugin versions held before they served (`rollout`), by plugin: each time the
    /// host planned a held version and held it again counts.
    pub rollouts_held: Family<PluginLabels, Counter>,
    /// In observe mode: the parents whose last observation found drift, by plugin.
    pub drifted_parents: Family<PluginLabels, Gauge>,
    /// API writes caused by a plugin's reconciles, by plugin and what was written: what
    /// its write budget limits.
    pub api_writes: Family<WriteLabels, Counter>,
    /// Time the plugin's writes waited for a token of its write budget or of their parent's
    /// share of it, seconds.
    pub write_budget_wait: Family<PluginLabels, Counter<f64, AtomicU64>>,
    /// Reconciles running or waiting for a plugin slot.
    pub in_flight: Family<PluginLabels, Gauge>,
    /// 1 for the version of each plugin that is live.
    pub plugin_info: Family<VersionLabels, Gauge>,
    /// Changes of the plugin directory by plugin and result.
    pub reloads: Family<ReloadLabels, Counter>,
    /// 1 while this host leads (or runs without an election), 0 while it stands by.
    pub leader: Gauge,
    /// With `--shard`: the parents this replica holds, by plugin.
    pub shard_parents: Family<NamespaceLabels, Gauge>,
    /// With `--shard`: drains this replica acknowledged (parents it gave up), by plugin.
    pub shard_drains: Family<PluginLabels, Counter>,
    /// With `--shard`, on the leader: label changes it made to parents, by plugin and reason.
    pub shard_assignments: Family<AssignmentLabels, Counter>,
    /// With `--shard`, on the leader: the parents assigned to each shard, by plugin.
    pub shard_assigned: Family<ShardLabels, Gauge>,
    /// With `--shard`, on the leader: the parents not on a live shard (new ones for a moment;
    /// any that stay so are also logged and listed by `/readyz`), by plugin.
    pub shard_unassigned: Family<PluginLabels, Gauge>,
    /// With `--shard`: this replica's shard, and whether it holds its shard Lease.
    shard: std::sync::Mutex<Option<(String, bool)>>,
    /// The election role as `/readyz` says it (`None` without an election).
    role: std::sync::Mutex<Option<String>>,
    ready: AtomicBool,
    /// Why the host cannot serve what it should, by what is affected: `/readyz` is not ready
    /// while any is listed.
    unavailable: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("operator_host");
        let reconciles = Family::<ResultLabels, Counter>::default();
        let version_reconciles = Family::<VersionResultLabels, Counter>::default();
        let canary_parents = Family::<ContentLabels, Gauge>::default();
        let reconcile_duration = Family::<PluginLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        let plugin_call_duration = Family::<PluginLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_01, 2.0, 20))
        });
        let plugin_cpu = Family::<PluginLabels, Counter<f64, AtomicU64>>::default();
        // From 256 KiB to the largest memory limit a policy may give (4 GiB).
        let plugin_call_memory = Family::<PluginLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(f64::from(1 << 18), 2.0, 15))
        });
        let plugin_instance_slots = Family::<PluginLabels, Gauge>::default();
        let webhook_requests = Family::<WebhookLabels, Counter>::default();
        let applies = Family::<KindLabels, Counter>::default();
        let applies_skipped = Family::<KindLabels, Counter>::default();
        let prunes = Family::<KindLabels, Counter>::default();
        let prunes_held = Family::<PluginLabels, Counter>::default();
        let rollouts_held = Family::<PluginLabels, Counter>::default();
        let drifted_parents = Family::<PluginLabels, Gauge>::default();
        let api_writes = Family::<WriteLabels, Counter>::default();
        let write_budget_wait = Family::<PluginLabels, Counter<f64, AtomicU64>>::default();
        let in_flight = Family::<PluginLabels, Gauge>::default();
        let plugin_info = Family::<VersionLabels, Gauge>::default();
        let reloads = Family::<ReloadLabels, Counter>::default();
        let leader = Gauge::default();
        leader.set(1);
        let shard_parents = Family::<NamespaceLabels, Gauge>::default();
        let shard_drains = Family::<PluginLabels, Counter>::default();
        let shard_assignments = Family::<AssignmentLabels, Counter>::default();
        let shard_assigned = Family::<ShardLabels, Gauge>::default();
        let shard_unassigned = Family::<PluginLabels, Gauge>::default();
        registry.register(
            "shard_parents",
            "Parents this replica holds (run --shard)",
            shard_parents.clone(),
        );
        registry.register(
            "shard_drains",
            "Parents this replica gave up when asked to (run --shard)",
            shard_drains.clone(),
        );
        registry.register(
            "shard_assignments",
            "Shard label changes the leader made to parents, by reason (run --shard)",
            shard_assignments.clone(),
        );
        registry.register(
            "shard_assigned_parents",
            "Parents assigned to each shard, as the leader sees them (run --shard)",
            shard_assigned.clone(),
        );
        registry.register(
            "shard_unassigned_parents",
            "Parents on no live shard, as the leader sees them (run --shard)",
            shard_unassigned.clone(),
        );
        registry.register(
            "leader",
            "1 while this host leads (or runs without leader election), 0 on standby",
            leader.clone(),
        );
        registry.register(
            "reconciles",
            "Reconciles by plugin and result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of a reconcile",
            reconcile_duration.clone(),
        );
        registry.register(
            "plugin_call_duration_seconds",
            "Duration of a sandboxed plugin call",
            plugin_call_duration.clone(),
        );
        registry.register(
            "plugin_cpu_seconds",
            "CPU time of a plugin's sandboxed calls",
            plugin_cpu.clone(),
        );
        registry.register(
            "plugin_call_memory_bytes",
            "Memory a sandboxed plugin call held at its peak",
            plugin_call_memory.clone(),
        );
        registry.register(
            "plugin_instance_slots",
            "Instances a plugin's calls may hold at once: its share of the instance pool",
            plugin_instance_slots.clone(),
        );
        registry.register(
            "webhook_requests",
            "Admission and conversion requests the plugins' webhooks answered",
            webhook_requests.clone(),
        );
        registry.register("applies", "Children applied", applies.clone());
        registry.register(
            "applies_skipped",
            "Children not applied: the cached child already held what was last applied",
            applies_skipped.clone(),
        );
        registry.register("prunes", "Children pruned", prunes.clone());
        registry.register(
            "prunes_held",
            "Deletions of children the prune guard held",
            prunes_held.clone(),
        );
        registry.register(
            "rollouts_held",
            "New plugin versions held before serving: their plans would delete too much",
            rollouts_held.clone(),
        );
        registry.register(
            "version_reconciles",
            "Reconciles by plugin version (content) and result: a canary's beside the serving one's",
            version_reconciles.clone(),
        );
        registry.register(
            "canary_parents",
            "Parents a canary of a new plugin version serves (0 once it is promoted or rolled back)",
            canary_parents.clone(),
        );
        registry.register(
            "drifted_parents",
            "Parents whose children differ from the plan (observe mode)",
            drifted_parents.clone(),
        );
        registry.register(
            "api_writes",
            "API writes caused by a plugin's reconciles (its write budget)",
            api_writes.clone(),
        );
        registry.register(
            "write_budget_wait_seconds",
            "Time a plugin's writes waited for its write budget",
            write_budget_wait.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Reconciles running or queued for a plugin slot",
            in_flight.clone(),
        );
        registry.register(
            "plugin",
            "The live version of each plugin",
            plugin_info.clone(),
        );
        registry.register(
            "plugin_reloads",
            "Plugin files loaded, replaced, removed or rejected",
            reloads.clone(),
        );
        Metrics {
            registry,
            reconciles,
            version_reconciles,
            canary_parents,
            reconcile_duration,
            plugin_call_duration,
            plugin_cpu,
            plugin_call_memory,
            plugin_instance_slots,
            webhook_requests,
            applies,
            applies_skipped,
            prunes,
            prunes_held,
            rollouts_held,
            drifted_parents,
            api_writes,
            write_budget_wait,
            in_flight,
            plugin_info,
            reloads,
            leader,
            shard_parents,
            shard_drains,
            shard_assignments,
            shard_assigned,
            shard_unassigned,
            shard: Default::default(),
            role: Default::default(),
            ready: AtomicBool::new(false),
            unavailable: Default::default(),
        }
    }

    /// Whether the host is ready: the plugins present at start are loaded and their
    /// controllers started.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Marks the host ready (every controller started and its caches synced).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Records this replica's shard and whether it holds its Lease: `/readyz` is not ready
    /// while it does not (the leader gives parents only to shards it sees live).
    pub fn set_shard(&self, shard: &str, member: bool) {
        *self.shard.lock().unwrap_or_else(|e| e.into_inner()) = Some((shard.to_string(), member));
    }

    /// Records the election role: the `leader` gauge and the line `/readyz` adds. A standby is
    /// ready (it can take over at once), so a rolling update is not held up by it.
    pub fn set_role(&self, role: &crate::leader::Role) {
        use crate::leader::Role;
        let (leading, said) = match role {
            Role::Unelected => (true, None),
            Role::Leader => (true, Some("leader".to_string())),
            Role::Standby {
                leader: Some(leader),
            } => (false, Some(format!("standby (the leader is {leader})"))),
            Role::Standby { leader: None } => (false, Some("standby".to_string())),
        };
        self.leader.set(i64::from(leading));
        *self.role.lock().unwrap_or_else(|e| e.into_inner()) = said;
    }

    /// Records that `what` (e.g. a plugin's child kind) cannot be served, and why; `None`
    /// clears it.
    pub fn set_unavailable(&self, what: &str, problem: Option<String>) {
        let mut unavailable = self.unavailable.lock().unwrap_or_else(|e| e.into_inner());
        match problem {
            Some(problem) => {
                unavailable.insert(what.to_string(), problem);
            }
            None => {
                unavailable.remove(what);
            }
        }
    }

    /// Clears everything recorded unavailable under `prefix` (a plugin that stopped).
    pub fn clear_unavailable(&self, prefix: &str) {
        self.clear_unavailable_but(prefix, |_| false);
    }

    /// Clears what is recorded unavailable under `prefix`, but what `keep` names.
    pub fn clear_unavailable_but(&self, prefix: &str, keep: impl Fn(&str) -> bool) {
        let mut unavailable = self.unavailable.lock().unwrap_or_else(|e| e.into_inner());
        unavailable.retain(|what, _| !what.starts_with(prefix) || keep(what));
    }

    /// The body and status of `/readyz`: ready once started, unless something the host
    /// should serve cannot be served (each listed with its reason).
    pub fn readiness(&self) -> (bool, String) {
        if !self.is_ready() {
            return (false, "starting".into());
        }
        let shard = self.shard.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((shard, false)) = &shard {
            return (
                false,
                format!("not ready: shard {shard} does not hold its shard Lease yet\n"),
            );
        }
        let unavailable = self.unavailable.lock().unwrap_or_else(|e| e.into_inner());
        if unavailable.is_empty() {
            let role = self.role.lock().unwrap_or_else(|e| e.into_inner());
            let said = match (role.as_deref(), shard) {
                (Some(role), Some((shard, _))) => format!("ready: {role}, shard {shard}"),
                (None, Some((shard, _))) => format!("ready: shard {shard}"),
                (Some(role), None) => format!("ready: {role}"),
                (None, None) => "ready".into(),
            };
            return (true, said);
        }
        let lines: Vec<String> = unavailable
            .iter()
            .map(|(what, problem)| format!("{what}: {problem}"))
            .collect();
        (false, format!("not ready:\n{}\n", lines.join("\n")))
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the process ends.
    /// Returns the bound address (useful with port 0).
    pub async fn serve(self: Arc<Self>, addr: SocketAddr) -> Result<SocketAddr, Error> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(readyz))
            .with_state(self);
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "metrics server stopped");
            }
        });
        Ok(bound)
    }
}

async fn metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

async fn readyz(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.readiness() {
        (true, body) => (StatusCode::OK, body),
        (false, body) => (StatusCode::SERVICE_UNAVAILABLE, body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_lists_what_cannot_be_served() {
        let metrics = Metrics::new();
        assert_eq!(metrics.readiness(), (false, "starting".into()));
        metrics.set_ready(true);
        assert_eq!(metrics.readiness(), (true, "ready".into()));
        metrics.set_unavailable("plugin a: child kind v1/X", Some("404".into()));
        metrics.set_unavailable("plugin b", Some("CRD not ours".into()));
        let (ready, body) = metrics.readiness();
        assert!(!ready);
        assert!(
            body.contains("plugin a: child kind v1/X: 404")
                && body.contains("plugin b: CRD not ours"),
            "{body}"
        );
        metrics.set_unavailable("plugin b", None);
        metrics.clear_unavailable("plugin a:");
        assert_eq!(metrics.readiness(), (true, "ready".into()));
    }

    #[test]
    fn readiness_and_the_leader_gauge_say_the_election_role() {
        use crate::leader::Role;
        let metrics = Metrics::new();
        metrics.set_ready(true);
        metrics.set_role(&Role::Standby {
            leader: Some("host-a_1".into()),
        });
        assert_eq!(
            metrics.readiness(),
            (true, "ready: standby (the leader is host-a_1)".into())
        );
        assert_eq!(metrics.leader.get(), 0);
        metrics.set_role(&Role::Leader);
        assert_eq!(metrics.readiness(), (true, "ready: leader".into()));
        assert_eq!(metrics.leader.get(), 1);
    }
}
