//! Watches the plugin directory and says, debounced, when its contents may have changed.
//!
//! The signal carries no paths on purpose: the registry rescans the directory and compares
//! content hashes. That is what makes every way of replacing a file work the same, including
//! the one a naive per-file watcher misses: Kubernetes updates a ConfigMap or Secret volume
//! by pointing the `..data` symlink at a new directory, so `plugin.wasm -> ..data/plugin.wasm`
//! changes content while no event names `plugin.wasm`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::RecursiveMode;
use notify::event::{AccessKind, AccessMode, EventKind};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::mpsc;

/// How long the directory must be quiet before a burst of events (an editor's temp file and
/// rename, `cp` writing in chunks) counts as one change.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(50);

/// Why the directory cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot watch the plugin directory {}: {source}", dir.display())]
    Watch { dir: PathBuf, source: notify::Error },
}

/// Watches a directory while it is alive.
pub struct DirWatcher {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

impl std::fmt::Debug for DirWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatcher").finish_non_exhaustive()
    }
}

/// Starts watching `dir` (not its subdirectories); the receiver gets `()` after each quiet
/// period that followed changes, and also when the watcher reported an error (a lost event
/// must not leave the registry stale, so it rescans).
pub fn watch_dir(
    dir: &Path,
    debounce: Duration,
) -> Result<(DirWatcher, mpsc::UnboundedReceiver<()>), Error> {
    let (changed, receiver) = mpsc::unbounded_channel();
    let watch_error = |source| Error::Watch {
        dir: dir.to_path_buf(),
        source,
    };
    let mut debouncer = new_debouncer(
        debounce,
        Some(debounce / 5),
        move |result: DebounceEventResult| {
            match result {
                Ok(events) => {
                    let changes = events.iter().filter(|e| is_change(&e.event.kind)).count();
                    if changes == 0 {
                        return;
                    }
                    tracing::trace!(changes, "plugin directory changed");
                }
                Err(errors) => {
                    for error in errors {
                        tracing::warn!(%error, "watching the plugin directory");
                    }
                }
            }
            let _ = changed.send(());
        },
    )
    .map_err(watch_error)?;
    debouncer
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(watch_error)?;
    Ok((
        DirWatcher {
            _debouncer: debouncer,
        },
        receiver,
    ))
}

/// Whether an event can mean new content. Reads are not changes: the registry's own reads
/// of the files it scans would otherwise trigger the next scan, forever.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}
