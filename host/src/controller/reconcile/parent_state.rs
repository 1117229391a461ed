//! What the host remembers about each parent between reconciles (failures, status and child
//! churn, settling after a shard move, its share of the write budget), and
//! the retry policy built on it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;

use super::{Error, PluginContext};

/// What the host remembers about one parent between its reconciles, keyed by the parent's
/// UID (a parent recreated under the same name starts afresh).
#[derive(Debug, Default)]
pub struct ParentState {
    /// When the parent's spec was last seen changing (its generation ahead of its status's),
    /// and by which plugin version: the prune guard lets that version's deletions of the
    /// window after it through.
    pub(super) spec_changed: super::prune_guard::SpecChange,
    /// The reason of the last failures and how many in a row: the backoff grows while the
    /// reason stays the same, whatever the messages say.
    pub(super) failures: Option<(&'static str, u32)>,
    /// Hash of the inputs (generation, labels, annotations, observed children) of the last
    /// status written, the hash of that status, and how many status changes in a row had
    /// those same inputs.
    pub(super) inputs: u64,
    pub(super) last_status: Option<u64>,
    pub(super) status_changes: u32,
    /// Hash of the status this host last wrote onto the parent. The parent cache may not
    /// have seen that write yet (status changes do not reconcile, so nothing corrects a skip
    /// later): a status equal to the cached one is skipped only if it is also this one.
    pub(super) written_status: Option<u64>,
    /// With sharding: a reconcile on this replica succeeded since it was given the parent, so
    /// its children carry this shard's label and its caches hold them.
    pub(super) settled: bool,
    /// By child (`group/Kind/name`): the hash of the body this host last applied. A child
    /// whose body is the same again, and whose cached object still holds every field of it,
    /// needs no apply.
    pub(super) applied: HashMap<String, u64>,
    /// By child: the resourceVersion this host's last apply left it at. A cached child still
    /// at it was changed by no one else since.
    pub(super) written: HashMap<String, String>,
    /// The children's churn: how many reconciles in a row wanted another body for a child
    /// that only this host had changed since, with the parent's generation, labels and
    /// annotations unchanged (their hash).
    pub(super) child_churn: ChildChurn,
    /// The parent's own share of its plugin's write budget, so that one parent whose writes
    /// never end cannot hold up the others.
    pub(super) write_budget: Option<Arc<governor::DefaultDirectRateLimiter>>,
}

/// The churn of a parent's children (see [`ParentState::child_churn`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ChildChurn {
    pub inputs: u64,
    pub changes: u32,
}

impl ChildChurn {
    /// The churn after a reconcile of a parent whose inputs hash to `inputs` and that
    /// `churned` (wanted another body for a child only this host had changed since).
    pub fn next(self, inputs: u64, churned: bool) -> ChildChurn {
        let changes = match (churned, inputs == self.inputs) {
            (false, _) => 0,
            (true, true) => self.changes.saturating_add(1),
            (true, false) => 1,
        };
        ChildChurn { inputs, changes }
    }
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

pub(super) fn state_key(parent: &DynamicObject) -> String {
    parent.uid().unwrap_or_else(|| super::parent_key(parent))
}

pub(super) fn lock(
    states: &ParentStates,
) -> std::sync::MutexGuard<'_, HashMap<String, ParentState>> {
    states.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forgets the failures of `parent` after a reconcile that succeeded; with sharding, also
/// marks it settled on this replica.
pub(super) fn record_success(states: &ParentStates, parent: &DynamicObject, sharded: bool) {
    let mut states = lock(states);
    if sharded {
        states.entry(state_key(parent)).or_default().settled = true;
    }
    if let Some(state) = states.get_mut(&state_key(parent)) {
        state.failures = None;
    }
}

/// Whether a reconcile of `parent` succeeded on this replica since it was given the parent.
pub(super) fn is_settled(states: &ParentStates, parent: &DynamicObject) -> bool {
    lock(states)
        .get(&state_key(parent))
        .is_some_and(|state| state.settled)
}

/// A parent's share of its plugin's write budget: a tenth of it (at least 1 write a second
/// and a burst of 10), so one parent's writes can never use up the budget of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteShare {
    pub per_second: u32,
    pub burst: u32,
}

impl WriteShare {
    pub fn of(plugin_per_second: u32, plugin_burst: u32) -> WriteShare {
        WriteShare {
            per_second: (plugin_per_second / 10).max(1),
            burst: (plugin_burst / 10).max(10),
        }
    }
}

/// The rate limiter of `parent`'s share of the write budget, made on its first write.
pub(super) fn parent_write_budget(
    states: &ParentStates,
    parent: &DynamicObject,
    share: &WriteShare,
) -> Arc<governor::DefaultDirectRateLimiter> {
    use std::num::NonZeroU32;
    lock(states)
        .entry(state_key(parent))
        .or_default()
        .write_budget
        .get_or_insert_with(|| {
            let per_second = NonZeroU32::new(share.per_second).unwrap_or(NonZeroU32::MIN);
            let burst = NonZeroU32::new(share.burst).unwrap_or(NonZeroU32::MIN);
            Arc::new(governor::RateLimiter::direct(
                governor::Quota::per_second(per_second).allow_burst(burst),
            ))
        })
        .clone()
}

/// Forgets everything about `parent` (its deletion completed).
pub(super) fn forget(states: &ParentStates, parent: &DynamicObject) {
    lock(states).remove(&state_key(parent));
}

/// Backoff policy: an invalid spec waits for the parent to change; everything else retries
/// with exponential backoff per parent and reason (1 s doubling to 5 min; a failure of
/// another reason starts again at 1 s), at least as long as the API server asked for with
/// `retryAfterSeconds`.
pub fn error_policy(parent: Arc<DynamicObject>, error: &Error, ctx: Arc<PluginContext>) -> Action {
    retry_after(&ctx.parents, &parent, error)
}

/// The decision of [`error_policy`], on the per-parent state alone (no cluster needed).
pub(super) fn retry_after(states: &ParentStates, parent: &DynamicObject, error: &Error) -> Action {
    if let Error::Plan(plan_error) = error
        && !plan_error.is_retryable()
    {
        return Action::await_change();
    }
    // The same apply would be refused again: only a change of the parent or the child helps.
    if let Error::ImmutableField { .. } = error {
        return Action::await_change();
    }
    let failures = {
        let mut states = lock(states);
        let state = states.entry(state_key(parent)).or_default();
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
pub(super) fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1)
        .saturating_mul(1u32 << failures.saturating_sub(1).min(9))
        .min(Duration::from_secs(300))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanError;
    use crate::test_support::memcached_resource;

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
    fn child_churn_counts_only_changes_in_a_row_with_the_same_parent_inputs() {
        let start = ChildChurn::default();
        let once = start.next(7, true);
        assert_eq!(once.changes, 1);
        let thrice = once.next(7, true).next(7, true);
        assert_eq!(thrice.changes, 3);
        assert_eq!(
            thrice.next(8, true).changes,
            1,
            "a changed parent starts again"
        );
        assert_eq!(
            thrice.next(7, false).changes,
            0,
            "a reconcile that changes no child ends the run"
        );
    }

    #[test]
    fn backoff_doubles_from_one_second_to_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(10), Duration::from_secs(300));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
    }

    fn retry(message: &str) -> Error {
        Error::Plan(PlanError::PluginRetry(message.into()))
    }

    #[test]
    fn backoff_grows_per_parent_and_reason_and_restarts_on_success_or_a_new_reason() {
        let states = ParentStates::default();
        let (a, b) = (parent("a", "1"), parent("b", "2"));
        let delays = |parent: &DynamicObject, error: &Error, n: usize| -> Vec<Action> {
            (0..n)
                .map(|_| retry_after(&states, parent, error))
                .collect()
        };
        // Messages differ, the reason is the same: the backoff grows.
        assert_eq!(
            [retry("x"), retry("y"), retry("z")]
                .iter()
                .map(|e| retry_after(&states, &a, e))
                .collect::<Vec<_>>(),
            [1, 2, 4].map(|s| Action::requeue(Duration::from_secs(s)))
        );
        // Another parent has a backoff of its own.
        assert_eq!(
            delays(&b, &retry("x"), 1),
            [Action::requeue(Duration::from_secs(1))]
        );
        // Another reason starts again at 1 s.
        let other = Error::PluginTask("gone".into());
        assert_eq!(
            delays(&a, &other, 1),
            [Action::requeue(Duration::from_secs(1))]
        );
        // A success forgets the failures.
        record_success(&states, &a, false);
        assert_eq!(
            delays(&a, &other, 1),
            [Action::requeue(Duration::from_secs(1))]
        );
        // An invalid spec waits for a change instead.
        let invalid = Error::Plan(PlanError::InvalidSpec("no".into()));
        assert_eq!(delays(&a, &invalid, 1), [Action::await_change()]);
    }
}
