//! The threads sandboxed calls run on: a pool of their own, below the host's priority.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// How much lower than the host's threads plugin calls are scheduled (a nice increment): a
/// plugin that burns its whole CPU deadline yields the cores to the watches, the applies and
/// the API server instead of competing with them as an equal.
pub const CALL_NICENESS: i32 = 10;

/// Runs `call` (a sandboxed call) on a thread of the call pool; await the handle from any
/// runtime.
pub fn spawn_call<R, F>(call: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    call_pool().spawn_blocking(call)
}

fn call_pool() -> &'static Runtime {
    static POOL: OnceLock<Runtime> = OnceLock::new();
    POOL.get_or_init(|| {
        Builder::new_multi_thread()
            // Only blocking threads do work here; one worker is the minimum tokio allows.
            .worker_threads(1)
            .thread_name("plugin-call")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
            .expect("the plugin call pool starts")
    })
}

/// Lowers the calling thread's priority (on Linux, a TID names one thread). Failing is
/// harmless: the calls then run at the host's priority, as before.
fn lower_priority() {
    let tid = rustix::thread::gettid();
    let current = rustix::process::getpriority_process(Some(tid)).unwrap_or(0);
    if let Err(error) = rustix::process::setpriority_process(Some(tid), current + CALL_NICENESS) {
        tracing::debug!(%error, "plugin call thread keeps the host's priority");
    }
}
