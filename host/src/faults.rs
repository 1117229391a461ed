//! Crash points for fault-injection tests: built with the `fault-injection` feature, the host
//! aborts right after a chosen write step when `OPERATOR_HOST_CRASH_AFTER=<step>[:<n>]` is set
//! (the n-th time that step succeeds, default the first). Without the feature every crash
//! point is an empty function, so release builds carry none of this.

/// A write step a crash point follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A child's server-side apply.
    Apply,
    /// A child's deletion.
    Prune,
    /// The parent's status write.
    Status,
    /// Adding the host's finalizer to a parent.
    FinalizerAdd,
    /// Removing the host's finalizer from a parent.
    FinalizerRemove,
    /// Creating or updating a plugin's CRD.
    CrdInstall,
}

impl Step {
    /// Every step, for campaigns that crash at each in turn.
    pub const ALL: [Step; 6] = [
        Step::Apply,
        Step::Prune,
        Step::Status,
        Step::FinalizerAdd,
        Step::FinalizerRemove,
        Step::CrdInstall,
    ];

    /// The step's name in [`CRASH_AFTER_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            Step::Apply => "apply",
            Step::Prune => "prune",
            Step::Status => "status",
            Step::FinalizerAdd => "finalizer-add",
            Step::FinalizerRemove => "finalizer-remove",
            Step::CrdInstall => "crd-install",
        }
    }
}

/// The environment variable that arms a crash point: `<step>[:<n>]`.
pub const CRASH_AFTER_ENV: &str = "OPERATOR_HOST_CRASH_AFTER";

/// Whether this build has crash points at all.
pub const ENABLED: bool = cfg!(feature = "fault-injection");

/// Marks the end of a successful `step`: aborts the process if this is the armed crash point.
#[cfg(feature = "fault-injection")]
pub fn crash_point(step: Step) {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static ARMED: OnceLock<Option<(Step, u64)>> = OnceLock::new();
    static REACHED: AtomicU64 = AtomicU64::new(0);
    let armed = ARMED.get_or_init(|| {
        let value = std::env::var(CRASH_AFTER_ENV).ok()?;
        let (name, count) = value.split_once(':').unwrap_or((value.as_str(), "1"));
        let step = Step::ALL.into_iter().find(|s| s.name() == name);
        match (step, count.parse::<u64>()) {
            (Some(step), Ok(count)) if count > 0 => Some((step, count)),
            _ => panic!(
                "{CRASH_AFTER_ENV}={value:?}: expected <step>[:<n>] with a step of {:?} and n >= 1",
                Step::ALL.map(Step::name)
            ),
        }
    });
    if let Some((armed, count)) = *armed
        && armed == step
        && REACHED.fetch_add(1, Ordering::SeqCst) + 1 == count
    {
        eprintln!(
            "operator-host: crash point {} reached ({count}); aborting",
            step.name()
        );
        std::process::abort();
    }
}

/// Marks the end of a successful `step` (no crash points in this build).
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn crash_point(_step: Step) {}

/// The environment variable that, in fault-injection builds, makes the sharder move parents
/// off a live shard without the drain handshake: the tests show that two replicas then write
/// the same parent at once, which the handshake prevents.
pub const SKIP_DRAIN_ENV: &str = "OPERATOR_HOST_UNSAFE_SKIP_DRAIN";

/// Whether shard moves skip the drain handshake (never outside fault-injection builds).
pub fn shard_moves_skip_the_drain() -> bool {
    ENABLED && std::env::var_os(SKIP_DRAIN_ENV).is_some()
}
