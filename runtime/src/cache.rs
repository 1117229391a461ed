//! On-disk cache of compiled components, keyed by content hash and engine compatibility.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::Error;

/// Where compiled artifacts live; a restart reuses them instead of recompiling.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
}

/// How a component was obtained, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a precompiled artifact.
    Hit,
    /// Compiled now (and stored, when the cache is enabled).
    Miss,
}

impl CompileCache {
    /// A cache in `dir`; `None` disables caching.
    pub fn new(dir: Option<PathBuf>) -> Self {
        CompileCache { dir }
    }

    /// The default cache directory: `$XDG_CACHE_HOME/operator-host/compiled`.
    pub fn default_dir() -> Option<PathBuf> {
        dirs::cache_dir().map(|d| d.join("operator-host").join("compiled"))
    }

    fn artifact_path(&self, engine: &Engine, content_hash: &str) -> Option<PathBuf> {
        // Artifacts are only valid for an engine with the same version and settings.
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hasher.finish();
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{content_hash}-{engine_key:016x}.cwasm")))
    }

    /// The compiled component for `bytes`, from the cache or compiled now.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        source: &Path,
        bytes: &[u8],
        content_hash: &str,
    ) -> Result<(Component, CacheOutcome), Error> {
        if let Some(component) = self.lookup(engine, content_hash) {
            return Ok((component, CacheOutcome::Hit));
        }
        Ok((
            self.compile(engine, source, bytes, content_hash)?,
            CacheOutcome::Miss,
        ))
    }

    /// The cached artifact of `content_hash` for `engine`, if there is a usable one.
    pub fn lookup(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        let path = self.artifact_path(engine, content_hash)?;
        if !path.exists() {
            return None;
        }
        match deserialize(engine, &path) {
            Ok(component) => Some(component),
            // A stale or truncated artifact is not fatal: the caller recompiles and overwrites it.
            Err(error) => {
                tracing::warn!(
                    artifact = %path.display(),
                    error = %format!("{error:#}"),
                    "ignoring unusable compiled artifact"
                );
                None
            }
        }
    }

    /// Compiles `bytes` with `engine` and stores the artifact.
    pub fn compile(
        &self,
        engine: &Engine,
        source: &Path,
        bytes: &[u8],
        content_hash: &str,
    ) -> Result<Component, Error> {
        let component = Component::new(engine, bytes).map_err(|source_error| Error::Compile {
            path: source.to_path_buf(),
            source: source_error,
        })?;
        if let Some(path) = self.artifact_path(engine, content_hash)
            && let Err(error) = store(&component, &path)
        {
            tracing::warn!(artifact = %path.display(), %error, "cannot store compiled artifact");
        }
        Ok(component)
    }
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: the artifact was produced by `Component::serialize` of this program into a
    // cache directory it owns, and its name includes the engine's compatibility hash;
    // wasmtime additionally checks the header's version and settings before using it.
    unsafe { Component::deserialize_file(engine, path) }
}

fn store(component: &Component, path: &Path) -> std::io::Result<()> {
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    // Whole, so a concurrent reader never sees a half-written artifact.
    crate::files::write_whole(path, &bytes)
}
