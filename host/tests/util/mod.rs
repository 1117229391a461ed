//! Helpers shared by the host's tests: where the built plugins are, and a runtime for them.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use operator_host::runtime::{Limits, Runtime, RuntimeConfig};

/// The workspace root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A plugin built by `make test-plugins`; fails the test (never skips) when it is missing.
pub fn plugin_path(dir: &str, name: &str) -> PathBuf {
    let path = repo_root()
        .join("target")
        .join(dir)
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make test-plugins` first (the README's `make test` does)",
        path.display()
    );
    path
}

/// An example plugin, from `target/plugins`.
pub fn example_plugin(name: &str) -> PathBuf {
    plugin_path("plugins", name)
}

/// A test-only plugin, from `target/test-plugins`.
pub fn test_plugin(name: &str) -> PathBuf {
    plugin_path("test-plugins", name)
}

/// A compile cache shared by the tests, so each plugin is compiled once per test run.
pub fn shared_cache_dir() -> PathBuf {
    repo_root().join("target").join("test-compile-cache")
}

/// A runtime with `limits` and the shared compile cache.
pub fn runtime_with(limits: Limits) -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        limits,
        cache_dir: Some(shared_cache_dir()),
        ..RuntimeConfig::default()
    })
    .expect("the runtime starts")
}
