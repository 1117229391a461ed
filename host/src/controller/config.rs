//! The configuration of the run loop and of each plugin's controllers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::leader::Leadership;
use crate::policy::Policy;
use crate::shard::Sharding;
use crate::{leader, shard};

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
    /// Say what this replica serves, for `kubectl operator-host`, in the report Lease of this
    /// namespace and election Lease name (see [`crate::replicas`]).
    pub report: Option<ReportTarget>,
    /// Serve the admission and conversion webhooks of the plugins that implement them (and,
    /// with `install_crds`, register them with the API server).
    pub webhooks: Option<crate::webhook::WebhookConfig>,
}

/// Where a replica reports what it serves.
#[derive(Debug, Clone)]
pub struct ReportTarget {
    /// The host's namespace.
    pub namespace: String,
    /// The election Lease's name (also without an election: the name it would have).
    pub lease: String,
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
