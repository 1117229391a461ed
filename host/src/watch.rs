//! Watches the plugin directory and says, debounced, when its contents may have changed.
//!
//! An event that says a write is complete (the writer closed the file, a rename or the
//! `..data` swap put it in place, it was removed) is signalled at once; everything else waits
//! for the debounce. The 50 ms quiet period is most of a cache-hit reload, and waiting it
//! out after the kernel said the writer is done only delays the new version.
//!
//! The signal carries no paths on purpose: the registry rescans the directory and compares
//! content hashes. That is what makes every way of replacing a file work the same, including
//! the one a naive per-file watcher misses: Kubernetes updates a ConfigMap or Secret volume
//! by pointing the `..data` symlink at a new directory, so `plugin.wasm -> ..data/plugin.wasm`
//! changes content while no event names `plugin.wasm`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher};
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
    /// Sees the same events undebounced, for the ones that say a write is complete.
    _completions: notify::RecommendedWatcher,
}

impl std::fmt::Debug for DirWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatcher").finish_non_exhaustive()
    }
}

/// Starts watching `dir` (not its subdirectories); the receiver gets `()` as soon as a write
/// is complete, after each quiet period that followed changes, and when the watcher reported
/// an error (a lost event must not leave the registry stale, so it rescans). One change may
/// be signalled twice (complete, then quiet): a rescan that finds the same content is cheap.
pub fn watch_dir(
    dir: &Path,
    debounce: Duration,
) -> Result<(DirWatcher, mpsc::UnboundedReceiver<()>), Error> {
    let (changed, receiver) = mpsc::unbounded_channel();
    let watch_error = |source| Error::Watch {
        dir: dir.to_path_buf(),
        source,
    };
    let completed = changed.clone();
    let mut completions = notify::recommended_watcher(move |result: notify::Result<_>| {
        if let Ok(notify::Event { kind, .. }) = result
            && is_complete(&kind)
        {
            let _ = completed.send(());
        }
    })
    .map_err(watch_error)?;
    completions
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(watch_error)?;
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
            _completions: completions,
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

/// Whether an event says that a file's new content is in place: its writer closed it, a
/// rename put it (or the `..data` symlink) there, or it was removed.
fn is_complete(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Access(AccessKind::Close(AccessMode::Write))
            | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
            | EventKind::Remove(_)
    )
}
