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
//! The supervisor follows the registry: a new plugin file starts its controllers, new
//! content is swapped in under the running controllers (or restarts them when the watched
//! kinds changed), and a removed file stops them without touching what they manage.
//!
//! One file per concept: `config` (what the run loop and the controllers are told),
//! `context` (what the reconciles of one plugin share), `watches` (one plugin's controllers
//! and their watches), `supervisor`, `run_loop` (the host's tasks until shutdown), `shutdown`
//! (the signal); `reconcile/` is one reconcile, a module per step; `crd`, `discovery`,
//! `handover`, `rollout_gate` and `canary` are the supervisor's steps.

mod canary;
mod config;
mod context;
mod crd;
mod discovery;
mod handover;
mod reconcile;
mod rollout_gate;
mod run_loop;
mod shutdown;
mod supervisor;
mod watches;

use crate::operator_plugin;
use crate::watch;

pub use crd::install_crd;
pub use discovery::check_served_kinds;
pub use handover::PLUGIN_REMOVED;
pub use reconcile::{Error, FINALIZER, PAUSED_ANNOTATION};

pub use config::{ClusterPluginsConfig, ControllerConfig, ReportTarget, RunConfig, ShardScope};
pub use context::{ChildCache, PluginContext};
pub use run_loop::{SHUTDOWN_GRACE, run, run_with_metrics};
pub use shutdown::ShutdownSignal;
pub use watches::PluginController;

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
    Webhooks(#[from] crate::webhook::Error),
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
            | RunError::Webhooks(_)
            | RunError::RolloutHeld { .. }
            | RunError::CanaryAnalysing { .. }
            | RunError::CanaryUnjudged { .. } => false,
            // Remembered: the same content is not tried again until it changes.
            RunError::CanaryFailed { .. } => true,
        }
    }
}
