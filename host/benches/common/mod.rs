//! What the host's benchmarks share: where the built plugins and the examples are.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The workspace root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// A built plugin file; a missing one stops the benchmark saying how to build it.
pub fn built(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} does not exist: run `make plugins` first",
        path.display()
    );
    path
}

/// `examples/memcached.yaml`, the parent every benchmark reconciles.
pub fn memcached_example() -> Value {
    let text = std::fs::read_to_string(repo_root().join("examples/memcached.yaml"))
        .expect("reading examples/memcached.yaml");
    serde_yaml::from_str(&text).expect("examples/memcached.yaml is YAML")
}
