//! The threads sandboxed calls run on: one pool at the host's priority, one below everything.

use std::sync::OnceLock;

use thread_priority::{
    NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
    set_thread_priority_and_policy, thread_native_id,
};
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// Where a plugin's calls are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallPriority {
    /// The host's own priority: a well-behaved plugin's calls take a millisecond or so, and
    /// making them wait behind the API server costs convergence throughput.
    Normal,
    /// `SCHED_IDLE`: for a plugin that recently hit a CPU, memory or response limit. Such a
    /// call only gets a core nothing else wants, and any waking thread of the host or the
    /// API server preempts it at once (a niced thread would keep its slice).
    Demoted,
}

/// Runs `call` (a sandboxed call) on a thread of the pool for `priority`; await the handle
/// from any runtime.
pub fn spawn_call<R, F>(priority: CallPriority, call: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    static NORMAL: OnceLock<Runtime> = OnceLock::new();
    static DEMOTED: OnceLock<Runtime> = OnceLock::new();
    let pool = match priority {
        CallPriority::Normal => NORMAL.get_or_init(|| call_pool("plugin-call", || {})),
        CallPriority::Demoted => DEMOTED.get_or_init(|| call_pool("plugin-call-idle", demote)),
    };
    pool.spawn_blocking(call)
}

/// A runtime used only for its blocking threads, each started with `on_start`.
fn call_pool(name: &str, on_start: fn()) -> Runtime {
    Builder::new_multi_thread()
        // Only blocking threads do work here; one worker is the minimum tokio allows.
        .worker_threads(1)
        .thread_name(name)
        .on_thread_start(on_start)
        .enable_all()
        .build()
        .expect("a plugin call pool starts")
}

/// Moves the calling thread to `SCHED_IDLE`. Failing is harmless: the demoted calls then
/// run at the host's priority.
fn demote() {
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    if let Err(error) =
        set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
    {
        tracing::debug!(
            ?error,
            "demoted plugin call thread keeps the host's priority"
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use thread_priority::thread_schedule_policy;

    #[tokio::test]
    async fn demoted_calls_run_at_idle_policy_and_normal_ones_do_not() {
        let policy_of = |priority| spawn_call(priority, || thread_schedule_policy().unwrap());
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        assert_eq!(policy_of(CallPriority::Demoted).await.unwrap(), idle);
        assert_ne!(policy_of(CallPriority::Normal).await.unwrap(), idle);
    }
}
