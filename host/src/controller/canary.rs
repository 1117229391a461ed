//! Canary rollouts (`rollout.strategy: Canary`): a new version serves a stable share of the
//! parents first, beside the serving version; it is promoted once every canary parent
//! reconciled on it and none failed for the analysis window, and rolled back at the first
//! failure of a canary parent.
//!
//! The share is chosen when the canary starts, from the controller's parent caches: the
//! parents whose UIDs hash lowest (SHA-256), `canaryPercent` of them and at least one. The
//! hash does not depend on the replica, so replicas with the same caches choose the same
//! parents; each replica judges the canary on the reconciles it ran itself.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use sha2::{Digest, Sha256};

use super::PluginController;
use crate::plugin::Plugin;

/// A canary under way.
#[derive(Debug)]
struct Canary {
    plugin: Arc<Plugin>,
    /// The canary parents (`namespace/name`).
    parents: HashSet<String>,
    started: Instant,
    /// Canary parents that reconciled on the new version without a failure.
    succeeded: HashSet<String>,
    /// The first failure of a canary parent: which, and why.
    failure: Option<String>,
}

/// The canary of a plugin's controllers, if one is under way; shared by their reconciles.
#[derive(Debug, Default)]
pub struct CanarySlot(Mutex<Option<Canary>>);

impl CanarySlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Canary>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The canary version, if `parent` (`namespace/name`) is a canary parent.
    pub fn version_for(&self, parent: &str) -> Option<Arc<Plugin>> {
        let canary = self.lock();
        let canary = canary.as_ref()?;
        canary
            .parents
            .contains(parent)
            .then(|| canary.plugin.clone())
    }

    /// Records how a reconcile of canary parent `parent` on `version` (content hash) ended:
    /// `Err(reason)` for a failure.
    pub fn record(&self, parent: &str, version: &str, result: Result<(), String>) {
        let mut canary = self.lock();
        let Some(canary) = canary.as_mut() else {
            return;
        };
        if canary.plugin.decl.content_hash != version {
            return; // a reconcile that started on an earlier canary
        }
        match result {
            Ok(()) => {
                canary.succeeded.insert(parent.to_string());
            }
            Err(reason) => {
                canary
                    .failure
                    .get_or_insert_with(|| format!("{parent}: {reason}"));
            }
        }
    }
}

/// Where a canary stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Under way: `succeeded` of the `parents` canary parents reconciled on it so far.
    Analysing { parents: usize, succeeded: usize },
    /// Every canary parent reconciled on it, none failed, for the analysis window.
    Promote,
    /// A canary parent failed: which, and why.
    RollBack(String),
}

/// The canary share of `parents` (`namespace/name` and UID): the `percent` whose UIDs hash
/// lowest, at least one.
pub fn choose(parents: &[(String, String)], percent: u32) -> HashSet<String> {
    let mut ranked: Vec<([u8; 32], &String)> = parents
        .iter()
        .map(|(key, uid)| (Sha256::digest(uid.as_bytes()).into(), key))
        .collect();
    ranked.sort();
    let count = (parents.len() * percent as usize).div_ceil(100).max(1);
    ranked
        .into_iter()
        .take(count)
        .map(|(_, key)| key.clone())
        .collect()
}

impl PluginController {
    /// The verdict on the canary of `new` (content hash); starts it (on the parents cached
    /// now, each reconciled at once) if another or none is under way.
    pub(super) fn canary(&self, new: &Arc<Plugin>, percent: u32, analysis: Duration) -> Verdict {
        let cached: HashSet<String> = self
            .tasks
            .iter()
            .flat_map(|(_, store)| store.state())
            .map(|parent| super::reconcile::parent_key(&parent))
            .collect();
        let mut slot = self.canary.lock();
        if let Some(canary) = slot.as_mut()
            && canary.plugin.decl.content_hash == new.decl.content_hash
        {
            // A canary parent deleted meanwhile has nothing more to show.
            canary.parents.retain(|parent| cached.contains(parent));
            canary.succeeded.retain(|parent| cached.contains(parent));
            if let Some(failure) = &canary.failure {
                return Verdict::RollBack(failure.clone());
            }
            if canary.succeeded.len() >= canary.parents.len()
                && canary.started.elapsed() >= analysis
            {
                return Verdict::Promote;
            }
            return Verdict::Analysing {
                parents: canary.parents.len(),
                succeeded: canary.succeeded.len(),
            };
        }
        let parents: Vec<(String, String)> = self
            .tasks
            .iter()
            .flat_map(|(_, store)| store.state())
            .map(|parent| {
                (
                    super::reconcile::parent_key(&parent),
                    parent.uid().unwrap_or_default(),
                )
            })
            .collect();
        let chosen = choose(&parents, percent);
        tracing::info!(plugin = %new.decl.name, sha256 = %new.decl.content_hash, canary = chosen.len(), parents = parents.len(), "canary started: the new version serves these parents first");
        *slot = Some(Canary {
            plugin: new.clone(),
            parents: chosen,
            started: Instant::now(),
            succeeded: HashSet::new(),
            failure: None,
        });
        drop(slot);
        self.reconcile_all();
        Verdict::Analysing {
            parents: self.canary.lock().as_ref().map_or(0, |c| c.parents.len()),
            succeeded: 0,
        }
    }

    /// Ends the canary under way, if any; its parents are reconciled again by whatever
    /// serves next. Returns the content hash it served.
    pub(super) fn end_canary(&self) -> Option<String> {
        let ended = self.canary.lock().take()?;
        self.reconcile_all();
        Some(ended.plugin.decl.content_hash.clone())
    }

    /// The content hash of the canary under way, if any.
    pub(super) fn canary_version(&self) -> Option<String> {
        self.canary
            .lock()
            .as_ref()
            .map(|c| c.plugin.decl.content_hash.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents(n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("ns/p-{i}"), format!("uid-{i}")))
            .collect()
    }

    #[test]
    fn the_share_is_stable_and_at_least_one() {
        let all = parents(20);
        let chosen = choose(&all, 10);
        assert_eq!(chosen.len(), 2);
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(
            choose(&reversed, 10),
            chosen,
            "the order of the caches does not matter"
        );
        assert_eq!(choose(&parents(3), 10).len(), 1);
        assert_eq!(choose(&parents(4), 50).len(), 2);
        assert_eq!(choose(&parents(4), 100).len(), 4);
    }
}
