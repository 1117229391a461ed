//! Canary rollouts (`rollout.strategy: Canary`): a new version serves a stable share of the
//! parents first, beside the serving version; it is promoted once every canary parent has
//! reconciled on it and the analysis window has passed, and rolled back at the first failure
//! of a canary parent.
//!
//! Every replica and every shard must serve the same split and reach the same verdict, so
//! both come from the API server rather than from a replica's caches (a shard caches only its
//! own parents, a standby reconciles none): the share is chosen from a list of every parent
//! the host serves (the `canaryPercent` whose UIDs hash lowest, SHA-256, at least one; or
//! those `canarySelector` matches), and
//! the verdict is read from the canary parents' own `Reconciled` conditions, which name the
//! version that wrote them. A canary parent that moves to another shard stays in the split.
//! A replica's own failed reconcile of a canary parent counts at once. The share is taken
//! from the parents that are not failing when it begins (one that failed before is no
//! evidence on the new version), and taken again if every canary parent is deleted.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::core::SelectorExt;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::PluginController;
use crate::metrics::ContentLabels;
use crate::plan;
use crate::plugin::Plugin;

/// A canary under way.
#[derive(Debug)]
struct Canary {
    plugin: Arc<Plugin>,
    split: Split,
    started: Instant,
    /// The first failure of a canary parent this replica saw: which, and why.
    failure: Option<String>,
}

/// Which parents a canary serves.
#[derive(Debug, Default)]
struct Split {
    /// The canary parents (`namespace/name`).
    parents: HashSet<String>,
    /// Canary parents whose `Reconciled` condition was already False when it began.
    already_failing: HashSet<String>,
}

/// The canary of a plugin's controllers, if one is under way; shared by their reconciles.
#[derive(Debug)]
pub struct CanarySlot {
    canary: Mutex<Option<Canary>>,
    /// Woken at a canary parent's first failure (the run loop's
    /// [`super::ControllerConfig::canary_failed`]).
    failed: Arc<tokio::sync::Notify>,
}

impl CanarySlot {
    pub fn new(failed: Arc<tokio::sync::Notify>) -> CanarySlot {
        CanarySlot {
            canary: Mutex::new(None),
            failed,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Canary>> {
        self.canary.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The canary version, if `parent` (`namespace/name`) is a canary parent.
    pub fn version_for(&self, parent: &str) -> Option<Arc<Plugin>> {
        let canary = self.lock();
        let canary = canary.as_ref()?;
        canary
            .split
            .parents
            .contains(parent)
            .then(|| canary.plugin.clone())
    }

    /// Records that a reconcile of canary parent `parent` on `version` (content hash) failed,
    /// and why.
    pub fn record_failure(&self, parent: &str, version: &str, reason: &str) {
        let mut canary = self.lock();
        let Some(canary) = canary.as_mut() else {
            return;
        };
        // A reconcile that started on an earlier canary, or a parent that was failing before.
        if canary.plugin.decl.content_hash != version
            || canary.split.already_failing.contains(parent)
        {
            return;
        }
        if canary.failure.is_none() {
            canary.failure = Some(format!("{parent}: {reason}"));
            // Judged now: the rollback need not wait for the canary's next retry.
            self.failed.notify_one();
        }
    }
}

/// Where a canary stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Under way: `succeeded` of the `parents` canary parents reconciled on it so far.
    Analysing { parents: usize, succeeded: usize },
    /// Every canary parent reconciled on it for the analysis window.
    Promote,
    /// A canary parent failed: which, and why.
    RollBack(String),
}

/// Which parents a canary serves (`rollout.canaryPercent` or `rollout.canarySelector`).
#[derive(Debug, Clone)]
pub enum Share {
    /// This percentage of them, by [`choose`].
    Percent(u32),
    /// Those whose labels match.
    Selector(kube::core::Selector),
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

/// `namespace/name` of a parent as JSON, as [`super::reconcile::parent_key`] names it.
fn key_of(parent: &Value) -> String {
    let metadata = &parent["metadata"];
    format!(
        "{}/{}",
        metadata["namespace"].as_str().unwrap_or_default(),
        metadata["name"].as_str().unwrap_or_default()
    )
}

fn reconciled_condition(parent: &Value) -> Option<&Value> {
    parent["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == plan::RECONCILED)
}

/// Reasons of a False `Reconciled` that are not failures: a barrier not yet passed, a pause.
const NOT_FAILURES: [&str; 2] = [plan::WAITING_FOR_READINESS, plan::PAUSED];

impl Split {
    /// The verdict on the canary of version `identity` (as its `Reconciled` messages name it)
    /// from the `parents` listed now, once its analysis `window_passed`.
    fn judge(&self, identity: &str, parents: &[Value], window_passed: bool) -> Verdict {
        let (mut judged, mut succeeded) = (0, 0);
        for parent in parents {
            let key = key_of(parent);
            if !self.parents.contains(&key) {
                continue;
            }
            let condition = reconciled_condition(parent).unwrap_or(&Value::Null);
            let status = condition["status"].as_str();
            let reason = condition["reason"].as_str().unwrap_or_default();
            if status == Some("False") && self.already_failing.contains(&key) {
                continue;
            }
            judged += 1;
            match status {
                Some("True") => {
                    let by_canary = condition["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with(identity));
                    let current =
                        condition["observedGeneration"] == parent["metadata"]["generation"];
                    succeeded += usize::from(by_canary && current);
                }
                Some("False") if !NOT_FAILURES.contains(&reason) => {
                    let message = condition["message"].as_str().unwrap_or_default();
                    return Verdict::RollBack(format!("{key}: {reason}: {message}"));
                }
                _ => {}
            }
        }
        // A split of no parent (a selector that matches none) has nothing to show: it waits
        // for an approval.
        if succeeded >= judged && window_passed && !self.parents.is_empty() {
            Verdict::Promote
        } else {
            Verdict::Analysing {
                parents: judged,
                succeeded,
            }
        }
    }
}

fn canary_labels(version: &Plugin) -> ContentLabels {
    ContentLabels {
        plugin: version.decl.name.clone(),
        sha256: version.decl.content_hash.clone(),
    }
}

impl PluginController {
    /// The verdict on the canary of `new` (content hash); starts it (on every parent the host
    /// serves now, each canary parent reconciled at once) if another or none is under way.
    pub(super) async fn canary(
        &self,
        new: &Arc<Plugin>,
        share: &Share,
        analysis: Duration,
    ) -> Result<Verdict, crate::diff::live::Error> {
        let parents = self.list_parents().await?;
        let mut slot = self.canary.lock();
        let listed: HashSet<String> = parents.iter().map(key_of).collect();
        if let Some(canary) = slot.as_ref()
            && canary.plugin.decl.content_hash == new.decl.content_hash
        {
            if let Some(failure) = &canary.failure {
                return Ok(Verdict::RollBack(failure.clone()));
            }
            // With every canary parent deleted there is nothing to judge it on: it starts
            // again on the parents there are now.
            if listed.is_empty() || canary.split.parents.iter().any(|k| listed.contains(k)) {
                let identity = plan::version_identity(&canary.plugin.decl);
                let window_passed = canary.started.elapsed() >= analysis;
                return Ok(canary.split.judge(&identity, &parents, window_passed));
            }
        }
        let failing =
            |parent: &Value| reconciled_condition(parent).is_some_and(|c| c["status"] == "False");
        // The share is taken from the parents that are not failing, if there are any: a
        // parent that failed before is no evidence on the new version.
        let healthy: Vec<&Value> = parents.iter().filter(|p| !failing(p)).collect();
        let candidates: Vec<&Value> = if healthy.is_empty() {
            parents.iter().collect()
        } else {
            healthy
        };
        let chosen = match share {
            Share::Percent(percent) => {
                let keyed: Vec<(String, String)> = candidates
                    .iter()
                    .map(|parent| {
                        let uid = parent["metadata"]["uid"].as_str().unwrap_or_default();
                        (key_of(parent), uid.to_string())
                    })
                    .collect();
                choose(&keyed, *percent)
            }
            Share::Selector(selector) => parents
                .iter()
                .filter(|parent| selector.matches(&crate::labels::of_object(parent)))
                .map(key_of)
                .collect(),
        };
        let already_failing = parents
            .iter()
            .filter(|parent| failing(parent))
            .map(key_of)
            .filter(|key| chosen.contains(key))
            .collect();
        if chosen.is_empty() && matches!(share, Share::Percent(_)) {
            // No parent at all: nothing for a canary to put at risk.
            return Ok(Verdict::Promote);
        }
        tracing::info!(plugin = %new.decl.name, sha256 = %new.decl.content_hash, canary = chosen.len(), parents = parents.len(), "canary started: the new version serves these parents first");
        if let Some(replaced) = slot.as_ref() {
            self.metrics
                .canary_parents
                .get_or_create(&canary_labels(&replaced.plugin))
                .set(0);
        }
        let count = chosen.len();
        self.metrics
            .canary_parents
            .get_or_create(&canary_labels(new))
            .set(count as i64);
        *slot = Some(Canary {
            plugin: new.clone(),
            split: Split {
                parents: chosen,
                already_failing,
            },
            started: Instant::now(),
            failure: None,
        });
        drop(slot);
        self.reconcile_all();
        Ok(Verdict::Analysing {
            parents: count,
            succeeded: 0,
        })
    }

    /// Every parent of the plugin's kind the host serves (each controller's namespace, every
    /// shard's), from the API server.
    async fn list_parents(&self) -> Result<Vec<Value>, crate::diff::live::Error> {
        let kind = self.current().decl.parent.clone();
        self.list_served(&kind, &ListParams::default(), "parents")
            .await
    }

    /// Ends the canary under way, if any; its parents are reconciled again by whatever
    /// serves next. Returns the content hash it served.
    pub(super) fn end_canary(&self) -> Option<String> {
        let ended = self.canary.lock().take()?;
        self.metrics
            .canary_parents
            .get_or_create(&canary_labels(&ended.plugin))
            .set(0);
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

    #[test]
    fn a_selector_share_reads_the_parents_labels() {
        let parent = serde_json::json!({"metadata": {"labels": {"tier": "canary", "n": "1"}}});
        let selector = crate::labels::parse("tier=canary").unwrap();
        assert!(selector.matches(&crate::labels::of_object(&parent)));
        let unlabelled = serde_json::json!({"metadata": {}});
        assert!(!selector.matches(&crate::labels::of_object(&unlabelled)));
    }

    const CANARY: &str = "plugin memcached@0.2.0 (sha256:0123456789ab)";
    const SERVING: &str = "plugin memcached@0.1.0 (sha256:ba9876543210)";

    /// A listed parent `name` at `generation` whose `Reconciled` condition is `status`
    /// (`reason`, `message`) as of `observed`.
    fn listed(name: &str, generation: i64, condition: Option<(&str, &str, &str, i64)>) -> Value {
        let conditions: Vec<Value> = condition
            .into_iter()
            .map(|(status, reason, message, observed)| {
                serde_json::json!({"type": "Reconciled", "status": status, "reason": reason,
                                   "message": message, "observedGeneration": observed})
            })
            .collect();
        serde_json::json!({
            "metadata": {"namespace": "ns", "name": name, "generation": generation},
            "status": {"conditions": conditions},
        })
    }

    fn split(parents: &[&str], already_failing: &[&str]) -> Split {
        let keys = |names: &[&str]| names.iter().map(|n| format!("ns/{n}")).collect();
        Split {
            parents: keys(parents),
            already_failing: keys(already_failing),
        }
    }

    #[test]
    fn a_canary_is_judged_by_its_parents_reconciled_conditions() {
        let ok = |name, message| listed(name, 2, Some(("True", "ReconcileSucceeded", message, 2)));
        let canary = split(&["a", "b"], &[]);
        // Only the canary parents count; each must be reconciled by the canary version at
        // its current generation, and the window must have passed.
        let all_done = [ok("a", CANARY), ok("b", CANARY), ok("c", SERVING)];
        assert_eq!(canary.judge(CANARY, &all_done, true), Verdict::Promote);
        assert_eq!(
            canary.judge(CANARY, &all_done, false),
            Verdict::Analysing {
                parents: 2,
                succeeded: 2
            }
        );
        let one_on_serving = [ok("a", CANARY), ok("b", SERVING)];
        assert_eq!(
            canary.judge(CANARY, &one_on_serving, true),
            Verdict::Analysing {
                parents: 2,
                succeeded: 1
            }
        );
        let stale = [
            ok("a", CANARY),
            listed("b", 3, Some(("True", "ReconcileSucceeded", CANARY, 2))),
        ];
        assert!(matches!(
            canary.judge(CANARY, &stale, true),
            Verdict::Analysing { succeeded: 1, .. }
        ));
        // Waiting at a barrier, paused or not yet reconciled: not a failure, not done.
        let waiting = [
            listed("a", 2, Some(("False", "WaitingForReadiness", CANARY, 2))),
            listed("b", 2, None),
        ];
        assert!(matches!(
            canary.judge(CANARY, &waiting, true),
            Verdict::Analysing { succeeded: 0, .. }
        ));
        // A failure rolls it back, naming the parent and the reason.
        let failed = [
            ok("a", CANARY),
            listed("b", 2, Some(("False", "PruneHeld", "held 2 deletions", 2))),
        ];
        assert_eq!(
            canary.judge(CANARY, &failed, false),
            Verdict::RollBack("ns/b: PruneHeld: held 2 deletions".into())
        );
        // A parent that was failing before the canary is no evidence either way.
        let before = split(&["a", "b"], &["b"]);
        assert_eq!(before.judge(CANARY, &failed, true), Verdict::Promote);
        // A selector that matched no parent waits for an approval, whatever the window.
        assert!(matches!(
            split(&[], &[]).judge(CANARY, &all_done, true),
            Verdict::Analysing { parents: 0, .. }
        ));
    }
}
