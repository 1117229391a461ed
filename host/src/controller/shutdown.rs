//! The shutdown signal: SIGTERM or SIGINT, caught as soon as `run` starts.

/// SIGTERM and SIGINT, caught from the moment [`ShutdownSignal::install`] returns: a signal
/// that arrives while the host is still starting (loading plugins, reaching the API server)
/// is kept and ends the host as soon as it can stop, instead of killing it with the default
/// action before the handler would otherwise be in place.
pub struct ShutdownSignal {
    pub(super) terminate: tokio::signal::unix::Signal,
    pub(super) interrupt: tokio::signal::unix::Signal,
}

impl ShutdownSignal {
    /// Replaces the default actions of SIGTERM and SIGINT; needs a Tokio runtime context.
    pub fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves once either signal has arrived, also one that arrived before this was polled.
    pub async fn received(mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}
