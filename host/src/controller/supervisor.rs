//! The supervisor: follows the registry, starting, swapping and stopping controllers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use tracing::Instrument;

use super::config::RunConfig;
use super::crd::install_crd_converting;
use super::watches::{PluginController, UNAVAILABLE_FILE};
use super::{RunError, canary, crd, discovery, handover, rollout_gate};
use crate::metrics::Metrics;
use crate::operator_plugin;
use crate::plugin::Plugin;
use crate::registry::{Proposal, Registry};

/// The first retry of plugin changes that could not take effect; doubled up to
/// [`LOAD_RETRY_MAX`].
pub(super) const LOAD_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between retries of plugin changes that could not take effect.
pub(super) const LOAD_RETRY_MAX: Duration = Duration::from_secs(60);

/// When to rescan the plugin directory because a change could not take effect for a
/// reason outside the plugin (the API server, a CRD someone else owns, permissions).
#[derive(Debug, Default)]
pub(super) struct LoadRetry {
    pub(super) delay: Option<Duration>,
    pub(super) at: Option<tokio::time::Instant>,
}

impl LoadRetry {
    /// After a sync: schedule the next retry (backing off) if something was deferred,
    /// forget the backoff otherwise.
    pub(super) fn after_sync(&mut self, deferred: bool) {
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
    pub(super) async fn due(&self) {
        match self.at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }
}

/// What the CRD step of a plugin's start did.
pub(super) enum CrdStep {
    /// Without `--install-crds`: nothing.
    NotInstalling,
    /// The CRD is installed (created, updated or found as it should be).
    Installed,
    /// A standby found the leader's CRD and serves it as it is.
    LeftToLeader,
}

/// The controllers of every served plugin file, kept in step with the registry.
pub(super) struct Supervisor {
    pub(super) client: Client,
    pub(super) config: RunConfig,
    pub(super) metrics: Arc<Metrics>,
    pub(super) controllers: HashMap<PathBuf, PluginController>,
    /// Plugin files started as a standby without installing their CRD (the leader's was
    /// there): installed when this host takes over.
    pub(super) crds_left_to_leader: std::collections::HashSet<PathBuf>,
    /// The cluster's plugins, whose OperatorPlugins approve held rollouts.
    pub(super) cluster: Option<crate::registry::ClusterPlugins>,
    /// The version of each plugin the webhooks call: the one its controller serves.
    pub(super) webhook_plugins: crate::webhook::ServedPlugins,
    /// This replica's webhooks, if it serves them: a CRD of several versions is installed
    /// with them as its conversion webhook.
    pub(super) webhooks: Option<crate::webhook::Webhooks>,
}

impl Supervisor {
    /// Scans the plugin directory and carries out what changed; returns whether a change
    /// could not take effect for a reason outside the plugin, so that it is retried.
    pub(super) async fn sync(&mut self, registry: &Arc<Mutex<Registry>>) -> bool {
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
        // Content whose load may pass when tried again is, after the backoff.
        let mut deferred = lock(registry).wants_load_again();
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
            // Each change of a plugin is a trace of its own: its gate, canary step, CRD
            // and discovery requests, and the swap.
            let (change, content) = match &proposal {
                Proposal::Add { plugin } => ("add", plugin.decl.content_hash.as_str()),
                Proposal::Replace { new, .. } => ("replace", new.decl.content_hash.as_str()),
                Proposal::Remove { old } => ("remove", old.decl.content_hash.as_str()),
            };
            let span = tracing::info_span!(
                "reload",
                path = %proposal.path().display(),
                change,
                sha256 = content,
                outcome = tracing::field::Empty,
            );
            let carried_out = self
                .carry_out(&proposal, crd_step)
                .instrument(span.clone())
                .await;
            span.record(
                "outcome",
                match &carried_out {
                    Ok(()) => "done",
                    Err(RunError::CanaryFailed { .. }) => "rolled back",
                    Err(error) if error.is_about_content() => "rejected",
                    Err(RunError::CanaryAnalysing { .. }) => "canary",
                    Err(RunError::RolloutHeld { .. }) => "held",
                    Err(_) => "deferred",
                },
            );
            match carried_out {
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
    pub(super) async fn carry_out(
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
                if new.decl.name != old.decl.name {
                    self.webhook_plugins.withdraw(&old.decl.name);
                }
                match self.controllers.get(&path) {
                    Some(controller) if !proposal.needs_restart() => {
                        controller.swap(new.clone(), true);
                        self.webhook_plugins.serve(new.clone());
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
                self.webhook_plugins.withdraw(&old.decl.name);
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
    pub(super) async fn hand_over(&self, old: &Plugin, new: Option<&Arc<Plugin>>) {
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
    pub(super) async fn install_crd(&mut self, plugin: &Arc<Plugin>) -> Result<(), RunError> {
        let step = self.crd_step(plugin).await?;
        self.record_crd_step(&plugin.path, step);
        Ok(())
    }

    /// The CRD step of [`Supervisor::install_crd`], without its bookkeeping (so that the
    /// steps of several plugins can run at once).
    pub(super) async fn crd_step(&self, plugin: &Arc<Plugin>) -> Result<CrdStep, RunError> {
        if !self.config.install_crds {
            return Ok(CrdStep::NotInstalling);
        }
        if self.config.controllers.leadership.may_write() {
            let conversion = self.webhooks.as_ref().and_then(|webhooks| {
                crate::webhook::crd_conversion(
                    &webhooks.endpoint,
                    &webhooks.ca_bundle(),
                    &plugin.decl,
                )
            });
            install_crd_converting(&self.client, plugin, conversion).await?;
            self.migrate_stored_versions(plugin);
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

    /// Moves the objects of `plugin`'s CRD still stored in an older version to the storage
    /// version, in the background at the plugin's write rate (see
    /// [`crd::migrate_stored_versions`]); a failure is logged and the next install of the CRD
    /// (a restart, a new version) tries again.
    fn migrate_stored_versions(&self, plugin: &Arc<Plugin>) {
        if plugin.decl.crd.spec.versions.len() < 2 {
            return;
        }
        let (client, plugin) = (self.client.clone(), plugin.clone());
        let writes_per_second = plugin.policy.rules(&plugin.decl.name).writes_per_second;
        tokio::spawn(async move {
            if let Err(error) =
                crd::migrate_stored_versions(&client, &plugin, writes_per_second).await
            {
                tracing::error!(plugin = %plugin.decl.name, %error, "stored objects not migrated; tried again at the next install of the CRD");
            }
        });
    }

    pub(super) fn record_crd_step(&mut self, path: &std::path::Path, step: CrdStep) {
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
    pub(super) async fn take_over(&mut self) {
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

    pub(super) fn start(&mut self, path: PathBuf, plugin: Arc<Plugin>) {
        let controller = PluginController::start(
            &self.client,
            plugin.clone(),
            &self.config.controllers,
            &self.metrics,
        );
        self.webhook_plugins.serve(plugin);
        self.controllers.insert(path, controller);
    }

    /// Swaps in the optimized build of a plugin (same content, so no re-reconcile).
    pub(super) fn tier_up(&self, plugin: Arc<Plugin>) {
        if let Some(controller) = self.controllers.get(&plugin.path) {
            controller.swap(plugin.clone(), false);
            self.webhook_plugins.serve(plugin);
        }
    }

    pub(super) async fn stop_all(self) {
        futures::future::join_all(self.controllers.into_values().map(PluginController::stop)).await;
    }
}

/// A canary's step in the swap of `new` into `controller` (`rollout.strategy: Canary`): start
/// or judge it; `Ok` once it is promoted (the swap goes on), an error while it is under way
/// (retried) or once it failed (rolled back, and the content refused). An approved version
/// is promoted at once: approving is how a canary is promoted by hand.
#[tracing::instrument(level = "debug", skip_all, fields(sha256 = %new.decl.content_hash, approved))]
pub(super) async fn canary_step(
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

pub(super) fn lock(registry: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    // A panic while holding the lock leaves the registry as it was before that change.
    registry
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

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
