//! The policy at plugin load: the registry admits plugins under it and gives them its limits.

use crate::util;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use operator_host::metrics::Metrics;
use operator_host::policy::Policy;
use operator_host::registry::{Proposal, Registry};
use operator_host::runtime::Limits;
use tokio::sync::mpsc::unbounded_channel;
use util::{runtime_with, test_plugin};

fn policy(body: &str) -> Policy {
    Policy::parse(
        &format!("apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"),
        Path::new("policy.yaml"),
    )
    .unwrap()
}

/// Scans a directory holding the memcached plugin with a registry under `policy`.
fn scan(policy: Policy) -> Vec<Proposal> {
    let runtime = runtime_with(Limits::default());
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        test_plugin("memcached-v1"),
        dir.path().join("memcached.wasm"),
    )
    .unwrap();
    let (sender, _receiver) = unbounded_channel();
    let mut registry = Registry::new(runtime, dir.path(), Arc::new(Metrics::new()), sender)
        .with_policy(Arc::new(policy));
    registry.scan().unwrap()
}

#[test]
fn plugins_get_the_limits_of_the_policy() {
    let base = Limits {
        max_memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let policy = policy("plugins:\n  memcached:\n    limits: {callTimeoutMs: 250}\n")
        .with_default_limits(&base);
    let proposals = scan(policy);
    let [Proposal::Add { plugin }] = proposals.as_slice() else {
        panic!("expected one added plugin, got {proposals:?}");
    };
    let limits = plugin.compiled.limits();
    assert_eq!(limits.call_timeout, Duration::from_millis(250));
    assert_eq!(limits.max_memory_bytes, 32 << 20);
    assert_eq!(
        limits.max_response_bytes,
        Limits::default().max_response_bytes
    );
}

#[test]
fn a_plugin_whose_child_kinds_are_all_forbidden_is_refused() {
    let proposals = scan(policy(
        "plugins:\n  memcached:\n    kinds: [v1/ConfigMap]\n",
    ));
    assert!(proposals.is_empty(), "{proposals:?}");
    // Another plugin's entry does not concern it.
    let proposals = scan(policy("plugins:\n  other:\n    kinds: [v1/ConfigMap]\n"));
    assert_eq!(proposals.len(), 1);
}

/// `render --policy` checks the plan as `run` does; exit code 1 for a violation.
#[test]
fn render_checks_the_plan_against_a_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    let render = |body: &str| {
        std::fs::write(
            &path,
            format!("apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"),
        )
        .unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_operator-host"))
            .arg("render")
            .arg(util::example_plugin("memcached"))
            .arg(util::repo_root().join("examples/memcached.yaml"))
            .arg("--policy")
            .arg(&path)
            .arg("--cache-dir")
            .arg(util::shared_cache_dir())
            .output()
            .unwrap()
    };
    let output = render("defaults:\n  maxChildren: 2\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = render("defaults:\n  maxChildren: 1\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("policy violation") && stderr.contains("at most 1"),
        "{stderr}"
    );
    let output = render("defaults:\n  maxChildren: nope\n");
    assert_eq!(output.status.code(), Some(2));
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// A policy entry may pin content: other content is refused, and the previous version keeps
/// serving when a new file does not match the pin.
#[test]
fn a_pinned_sha256_admits_only_that_content() {
    let v1 = test_plugin("memcached-v1");
    let v2 = test_plugin("memcached-v2");
    let pinned = policy(&format!(
        "plugins:\n  memcached:\n    sha256: \"sha256:{}\"\n",
        sha256_of(&v1)
    ));
    let runtime = runtime_with(Limits::default());
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("memcached.wasm");
    std::fs::copy(&v1, &live).unwrap();
    let (sender, _receiver) = unbounded_channel();
    let metrics = Arc::new(Metrics::new());
    let mut registry =
        Registry::new(runtime, dir.path(), metrics.clone(), sender).with_policy(Arc::new(pinned));
    let proposals = registry.scan().unwrap();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Add { .. }]),
        "{proposals:?}"
    );
    registry.commit(&proposals[0]);

    std::fs::copy(&v2, &live).unwrap();
    assert!(
        registry.scan().unwrap().is_empty(),
        "other content is refused"
    );
    let served = registry.served(&live).unwrap();
    assert_eq!(served.decl.content_hash, sha256_of(&v1), "v1 keeps serving");
    assert!(
        metrics
            .encode()
            .lines()
            .any(|l| l.contains("result=\"rejected\"") && l.ends_with(" 1")),
        "the refusal is counted"
    );
}

/// The staged test plugin reads a ConfigMap and a Secret (as hashes) named in its spec, and
/// ConfigMaps by label: what the policy says of each decides whether it loads.
fn admit_staged(body: &str) -> Result<Vec<String>, String> {
    let runtime = runtime_with(Limits::default());
    let plugin = operator_host::plugin::Plugin::load(&runtime, &test_plugin("staged")).unwrap();
    policy(body).admit(&plugin.decl).map_err(|e| e.to_string())
}

#[test]
fn a_related_kind_the_policy_does_not_allow_refuses_the_plugin() {
    let err =
        admit_staged("defaults:\n  allowSecrets: true\n  related: [v1/ConfigMap]\n").unwrap_err();
    for expected in [
        "staged",
        "related \"secret\"",
        "v1/Secret",
        "allowed: v1/ConfigMap",
    ] {
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }
    // Secrets need allowSecrets, whatever `related` lists.
    let err = admit_staged("defaults:\n  related: [v1/ConfigMap, v1/Secret]\n").unwrap_err();
    assert!(err.contains("allowSecrets is false"), "{err}");
    // Listed, and Secrets allowed: the hashes the plugin asks for need nothing more.
    admit_staged("defaults:\n  allowSecrets: true\n  related: [v1/ConfigMap, v1/Secret]\n")
        .unwrap();
    admit_staged("defaults:\n  allowSecrets: true\n").unwrap();
}

#[test]
fn a_policy_names_related_kinds_as_it_names_child_kinds() {
    let err = Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  related: [Secret]\n",
        Path::new("policy.yaml"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("defaults.related[0]"), "{err}");
}
