//! Helpers shared by the host's tests: where the built plugins are, and a runtime for them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use operator_host::runtime::{Limits, ReconcileRequest, Runtime, RuntimeConfig};

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

/// Runs the `operator-host` binary with `args` and the shared compile cache.
pub fn operator_host(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_operator-host"))
        .args(args)
        .arg("--cache-dir")
        .arg(shared_cache_dir())
        .output()
        .expect("the binary runs")
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A file of `examples/`.
pub fn example(name: &str) -> PathBuf {
    repo_root().join("examples").join(name)
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Compares `rendered` with `host/tests/golden/<golden>`, the plugin's content hash masked
/// (it changes with every build); `UPDATE_GOLDEN=1` accepts a deliberate change.
pub fn assert_golden(rendered: &str, golden: &str) {
    let rendered = mask_plugin_hash(rendered);
    let golden_path = repo_root().join("host/tests/golden").join(golden);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden_path, &rendered).unwrap();
    }
    let expected = std::fs::read_to_string(&golden_path).unwrap();
    assert_eq!(
        rendered, expected,
        "set UPDATE_GOLDEN=1 to accept a deliberate change"
    );
}

/// Replaces `sha256:<hex>` with a fixed marker.
pub fn mask_plugin_hash(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(index) = rest.find("sha256:") {
        out.push_str(&rest[..index + 7]);
        out.push_str("<hash>");
        rest = rest[index + 7..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// A `reconcile` request for an `Attack` of the hostile plugins (any language): `attack` with
/// its `count`.
pub fn attack(attack: &str, count: u64) -> ReconcileRequest {
    ReconcileRequest {
        parent: serde_json::json!({
            "apiVersion": "hostile.operator-host.dev/v1alpha1",
            "kind": "Attack",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"attack": attack, "count": count},
        })
        .to_string(),
        observed: vec![],
        related: vec![],
    }
}
