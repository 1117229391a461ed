//! The prune guard: deletions of children that no change of their parent's spec asked for are
//! held once they would take more than the policy's share of a plugin's children in a window.
//!
//! A plugin release with a bug that returns no children, a related object that vanished, a
//! plan that changes for any reason but the parent's own spec: each makes the host delete
//! children nobody asked to delete, across every parent within seconds. A deletion is
//! *asked for* when the parent's spec changed within the window (its generation was ahead of
//! the one its status reports when the host last saw it change) and the plugin version that
//! made it is the one that saw the change: a scale-down, and the clean-up steps after it, are
//! never held, while a new version's deletions on a spec it did not see change are. Every
//! other deletion counts against
//! `max(1, maxPercent% of the plugin's children)` per window; a reconcile that would go beyond
//! is held whole, and so is every such deletion of that plugin version after it, until the
//! parent is annotated [`APPROVE_PRUNE_ANNOTATION`] or another version serves.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;

/// The annotation that lets a parent's held deletions go ahead (`"true"`).
pub const APPROVE_PRUNE_ANNOTATION: &str = "operator-host.dev/approve-prune";

/// What the guard decided about one reconcile's deletions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Held: `count` deletions, beyond `limit` per window (or the version was held before).
    Held {
        count: usize,
        limit: usize,
    },
}

/// The prune guard of one controller: the unasked-for deletions of its window, and the
/// version it holds.
#[derive(Debug, Default)]
pub struct PruneGuard {
    state: Mutex<GuardState>,
}

#[derive(Debug, Default)]
struct GuardState {
    /// When each unasked-for deletion of the window was let through.
    recent: VecDeque<Instant>,
    /// The content hash of the plugin version held: all its unasked-for deletions wait.
    held_version: Option<String>,
    /// The content hash of a version whose rollout someone approved after seeing its plans:
    /// its deletions are not held.
    approved_version: Option<String>,
}

impl PruneGuard {
    /// Decides about `count` unasked-for deletions by `version` of a plugin that has
    /// `children` children now, under `percent` per `window`; lets them through (and counts
    /// them) or holds them.
    pub fn admit(
        &self,
        version: &str,
        count: usize,
        children: usize,
        percent: u32,
        window: Duration,
        now: Instant,
    ) -> Verdict {
        let limit = crate::policy::prune_guard_limit(children, percent);
        if percent >= 100 || count == 0 {
            return Verdict::Allow;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.approved_version.as_deref() == Some(version) {
            return Verdict::Allow;
        }
        while state
            .recent
            .front()
            .is_some_and(|at| now.duration_since(*at) >= window)
        {
            state.recent.pop_front();
        }
        if state.held_version.as_deref() == Some(version) {
            return Verdict::Held { count, limit };
        }
        if state.recent.len() + count > limit {
            state.held_version = Some(version.to_string());
            return Verdict::Held { count, limit };
        }
        state.recent.extend(std::iter::repeat_n(now, count));
        Verdict::Allow
    }

    /// Lets the deletions of `version` through from now on: its rollout was approved.
    pub fn approve(&self, version: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.approved_version = Some(version.to_string());
        if state.held_version.as_deref() == Some(version) {
            state.held_version = None;
        }
    }
}

/// When a parent's spec was last seen changing, and by which plugin version (content hash).
pub type SpecChange = Option<(Instant, String)>;

/// Whether the parent's own spec asks for the deletions `version` makes: it changed within
/// `window` before `now`, seen by that version (`changed`, which this updates when the spec's
/// generation is ahead of the one the status reports).
pub fn asked_for(
    parent: &DynamicObject,
    changed: &mut SpecChange,
    version: &str,
    window: Duration,
    now: Instant,
) -> bool {
    let observed = parent.data["status"]["observedGeneration"].as_i64();
    if parent.metadata.generation != observed {
        *changed = Some((now, version.to_string()));
    }
    changed
        .as_ref()
        .is_some_and(|(at, seen_by)| seen_by == version && now.duration_since(*at) < window)
}

/// Whether the parent carries [`APPROVE_PRUNE_ANNOTATION`] set to `"true"`.
pub fn approved(parent: &DynamicObject) -> bool {
    parent
        .annotations()
        .get(APPROVE_PRUNE_ANNOTATION)
        .is_some_and(|value| value == "true")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WINDOW: Duration = Duration::from_secs(600);

    #[test]
    fn a_burst_beyond_the_share_is_held_and_the_version_stays_held() {
        let guard = PruneGuard::default();
        let now = Instant::now();
        // 20 parents of one ConfigMap each: 10% is 2.
        assert_eq!(guard.admit("v2", 1, 20, 10, WINDOW, now), Verdict::Allow);
        assert_eq!(guard.admit("v2", 1, 20, 10, WINDOW, now), Verdict::Allow);
        assert_eq!(
            guard.admit("v2", 1, 20, 10, WINDOW, now),
            Verdict::Held { count: 1, limit: 2 }
        );
        // Held for good, even once the window has passed: slowly is still all of them.
        let later = now + WINDOW * 2;
        assert!(matches!(
            guard.admit("v2", 1, 20, 10, WINDOW, later),
            Verdict::Held { .. }
        ));
        // Another version starts afresh.
        assert_eq!(guard.admit("v3", 1, 20, 10, WINDOW, later), Verdict::Allow);
    }

    #[test]
    fn an_approved_rollout_deletes_what_its_plans_said() {
        let guard = PruneGuard::default();
        let now = Instant::now();
        assert!(matches!(
            guard.admit("v2", 2, 2, 10, WINDOW, now),
            Verdict::Held { .. }
        ));
        guard.approve("v2");
        assert_eq!(guard.admit("v2", 2, 2, 10, WINDOW, now), Verdict::Allow);
        assert!(matches!(
            guard.admit("v3", 2, 2, 10, WINDOW, now),
            Verdict::Held { .. }
        ));
    }

    #[test]
    fn one_reconcile_deleting_more_than_the_share_is_held_whole() {
        let guard = PruneGuard::default();
        let now = Instant::now();
        // One parent with a Deployment and a Service: both at once is beyond one.
        assert_eq!(
            guard.admit("v2", 2, 2, 10, WINDOW, now),
            Verdict::Held { count: 2, limit: 1 }
        );
    }

    #[test]
    fn deletions_spread_over_windows_are_not_held_and_100_percent_turns_it_off() {
        let guard = PruneGuard::default();
        let now = Instant::now();
        for i in 0..5 {
            let at = now + WINDOW * i;
            assert_eq!(guard.admit("v1", 1, 10, 10, WINDOW, at), Verdict::Allow);
        }
        assert_eq!(guard.admit("v1", 10, 10, 100, WINDOW, now), Verdict::Allow);
    }

    fn parent(generation: i64, observed: Option<i64>) -> DynamicObject {
        let mut parent: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "m", "generation": generation},
            "status": {"observedGeneration": observed},
        }))
        .unwrap();
        parent.metadata.generation = Some(generation);
        parent
    }

    #[test]
    fn a_spec_change_asks_for_the_deletions_of_the_version_that_saw_it_within_the_window() {
        let now = Instant::now();
        let mut changed = None;
        // Settled and never seen changing: deletions are unasked for.
        assert!(!asked_for(
            &parent(3, Some(3)),
            &mut changed,
            "v1",
            WINDOW,
            now
        ));
        // Scaled down: asked for, and so are the clean-up steps after the status caught up.
        assert!(asked_for(
            &parent(4, Some(3)),
            &mut changed,
            "v1",
            WINDOW,
            now
        ));
        let soon = now + Duration::from_secs(60);
        assert!(asked_for(
            &parent(4, Some(4)),
            &mut changed,
            "v1",
            WINDOW,
            soon
        ));
        // A new version's deletions on that spec are its own, not the spec's.
        assert!(!asked_for(
            &parent(4, Some(4)),
            &mut changed,
            "v2",
            WINDOW,
            soon
        ));
        assert!(!asked_for(
            &parent(4, Some(4)),
            &mut changed,
            "v1",
            WINDOW,
            now + WINDOW
        ));
        // A parent whose status has no observedGeneration yet has a spec not reconciled.
        assert!(asked_for(&parent(1, None), &mut None, "v1", WINDOW, now));
    }
}
