//! The sandbox enforces its limits and refuses what is not a plugin of this contract.

mod util;

use std::path::Path;
use std::time::{Duration, Instant};

use operator_host::runtime::{
    CacheOutcome, CallError, CallPriority, Error, Limits, ReconcileRequest, ReconcileResponse,
    Runtime, RuntimeConfig,
};
use serde_json::{Value, json};
use util::{runtime_with, test_plugin};

fn attack(attack: &str, count: u64) -> ReconcileRequest {
    ReconcileRequest {
        parent: json!({
            "apiVersion": "hostile.operator-host.dev/v1alpha1",
            "kind": "Attack",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"attack": attack, "count": count},
        })
        .to_string(),
        observed: vec![],
    }
}

fn call(limits: Limits, attack_name: &str, count: u64) -> Result<ReconcileResponse, CallError> {
    let plugin = runtime_with(limits).load(&test_plugin("hostile")).unwrap();
    Ok(plugin
        .reconcile(&attack(attack_name, count), "test")?
        .expect("the plugin accepts the request"))
}

#[test]
fn a_guest_that_loops_forever_is_cut_off_at_the_deadline() {
    let limits = Limits {
        call_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let plugin = runtime_with(limits).load(&test_plugin("hostile")).unwrap();
    let started = Instant::now();
    let error = plugin.reconcile(&attack("loop", 0), "test").unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(
        error,
        CallError::Timeout {
            limit: Duration::from_millis(200)
        }
    );
    assert!(elapsed < Duration::from_millis(400), "took {elapsed:?}");
}

#[test]
fn hitting_a_resource_limit_demotes_the_plugin_and_a_trap_does_not() {
    let limits = Limits {
        call_timeout: Duration::from_millis(50),
        max_memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let runtime = runtime_with(limits);
    for (attack_name, demoted) in [
        ("none", false),
        ("panic", false),
        ("loop", true),
        ("memory", true),
        ("big-response", true),
    ] {
        let plugin = runtime.load(&test_plugin("hostile")).unwrap();
        assert_eq!(plugin.call_priority(), CallPriority::Normal);
        let _ = plugin.reconcile(&attack(attack_name, 8 << 20), "test");
        let expected = if demoted {
            CallPriority::Demoted
        } else {
            CallPriority::Normal
        };
        assert_eq!(plugin.call_priority(), expected, "after {attack_name}");
    }
}

#[test]
fn a_guest_that_grows_memory_past_the_cap_fails_cleanly() {
    let limits = Limits {
        max_memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let error = call(limits, "memory", 0).unwrap_err();
    assert_eq!(error, CallError::OutOfMemory { limit: 32 << 20 });
}

#[test]
fn an_oversized_response_is_rejected() {
    let limits = Limits {
        max_response_bytes: 1 << 20,
        ..Limits::default()
    };
    let error = call(limits, "big-response", 2 << 20).unwrap_err();
    assert!(
        matches!(error, CallError::ResponseTooLarge { size, limit } if size > 2 << 20 && limit == 1 << 20),
        "{error:?}"
    );
}

#[test]
fn a_response_far_over_the_limit_is_refused_before_the_host_copies_it() {
    let limits = Limits {
        max_response_bytes: 1 << 20,
        ..Limits::default()
    };
    let error = call(limits, "big-response", 32 << 20).unwrap_err();
    // Refused once the copy passed the limit plus slack: the host never held 32 MiB.
    assert!(
        matches!(error, CallError::ResponseTooLarge { size, limit } if size < 4 << 20 && limit == 1 << 20),
        "{error:?}"
    );
}

#[test]
fn a_panic_is_a_trap_that_carries_the_panic_message() {
    let error = call(Limits::default(), "panic", 0).unwrap_err();
    let CallError::Trap { message } = error else {
        panic!("expected a trap, got {error:?}");
    };
    assert!(message.contains("panics on purpose"), "{message}");
}

#[test]
fn deep_recursion_is_a_stack_overflow_trap() {
    let error = call(Limits::default(), "stack-overflow", 0).unwrap_err();
    assert!(
        matches!(&error, CallError::Trap { message } if message.contains("call stack exhausted")),
        "{error:?}"
    );
}

#[test]
fn flooding_stdout_is_capped_without_failing_the_call() {
    // A generous deadline: this is about the output cap, not speed (debug builds, busy CI).
    let limits = Limits {
        call_timeout: Duration::from_secs(20),
        ..Limits::default()
    };
    let response = call(limits, "stdout-flood", 20_000).unwrap();
    assert_eq!(response.children.len(), 1);
}

#[test]
fn the_guest_sees_no_files_environment_network_or_clock() {
    let response = call(Limits::default(), "capabilities", 0).unwrap();
    let seen: Value = serde_json::from_str(&response.status).unwrap();
    assert_eq!(
        seen,
        json!({
            "readRoot": false, "readEtcPasswd": false, "envVars": 0, "args": 0,
            "tcpConnect": false, "tcpBind": false, "dnsLookup": false, "wallClockSecs": 0,
        })
    );
}

#[test]
fn no_state_survives_between_calls() {
    let plugin = runtime_with(Limits::default())
        .load(&test_plugin("hostile"))
        .unwrap();
    for _ in 0..3 {
        let response = plugin
            .reconcile(&attack("counter", 0), "test")
            .unwrap()
            .unwrap();
        assert_eq!(response.status, r#"{"calls":1}"#);
    }
}

#[test]
fn a_restart_loads_the_compiled_artifact_instead_of_recompiling() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = || {
        Runtime::new(RuntimeConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            ..RuntimeConfig::default()
        })
        .unwrap()
    };
    let path = test_plugin("wrong-contract");
    // The wrong-contract plugin compiles fine; that is all the cache is about.
    let first = runtime().load(&util::example_plugin("memcached")).unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Miss);
    let second = runtime().load(&util::example_plugin("memcached")).unwrap();
    assert_eq!(second.cache_outcome(), CacheOutcome::Hit);
    assert_eq!(first.content_hash(), second.content_hash());
    assert!(runtime().load(&path).is_err());
}

fn load_error(path: &Path) -> Error {
    runtime_with(Limits::default()).load(path).unwrap_err()
}

#[test]
fn a_missing_file_is_named_in_the_error() {
    let error = load_error(Path::new("/nonexistent/plugin.wasm"));
    assert!(matches!(error, Error::ReadPlugin { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/plugin.wasm"));
}

#[test]
fn a_file_that_is_not_wasm_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.wasm");
    std::fs::write(&path, "#!/bin/sh\necho not wasm\n").unwrap();
    let error = load_error(&path);
    assert!(matches!(error, Error::NotWasm { .. }), "{error:?}");
}

#[test]
fn a_core_module_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    std::fs::write(
        &path,
        wat::parse_str("(module (func (export \"f\")))").unwrap(),
    )
    .unwrap();
    let error = load_error(&path);
    assert!(matches!(error, Error::CoreModule { .. }), "{error:?}");
    assert!(error.to_string().contains("wasm32-wasip2"), "{error}");
}

#[test]
fn a_component_of_another_contract_version_is_refused() {
    let error = load_error(&test_plugin("wrong-contract"));
    let Error::WrongContract { detail, .. } = &error else {
        panic!("expected WrongContract, got {error:?}");
    };
    assert!(detail.contains("plugin@0.2.0"), "{detail}");
    assert!(
        error.to_string().contains("operator-host:reconciler@0.1.0"),
        "{error}"
    );
}

#[test]
fn a_component_of_another_contract_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.wasm");
    let component = wat::parse_str(
        r#"(component
             (core module $m (func (export "run")))
             (core instance $i (instantiate $m))
             (func (export "run") (canon lift (core func $i "run"))))"#,
    )
    .unwrap();
    std::fs::write(&path, component).unwrap();
    let error = load_error(&path);
    let Error::WrongContract { detail, .. } = &error else {
        panic!("expected WrongContract, got {error:?}");
    };
    assert!(detail.contains("does not export"), "{detail}");
}
