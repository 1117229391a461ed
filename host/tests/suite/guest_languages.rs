//! Plugins in other guest languages (Python, JavaScript, Go) against the Rust ones: the same `render` output, the same CRD, the conformance kit, and the sandbox's limits.

use crate::util;

use std::path::{Path, PathBuf};
use std::time::Duration;

use operator_host::runtime::{CallError, Limits};
use serde_json::Value;
use util::{
    attack, example, example_plugin, mask_plugin_hash, operator_host, path_str, plugin_path,
    repo_root, runtime_with, stderr, stdout,
};

/// Each guest language other than Rust and the directory `make plugins` builds its plugins in.
const LANGUAGES: [(&str, &str); 3] = [
    ("Python", "plugins-python"),
    ("JavaScript", "plugins-js"),
    ("Go", "plugins-go"),
];

/// The Memcached plugin written in `dir`'s language.
fn memcached_in(dir: &str) -> PathBuf {
    plugin_path(dir, "memcached")
}

fn fixture(name: &str) -> PathBuf {
    repo_root().join("host/tests/fixtures/memcached").join(name)
}

/// Every sample CR: the example, and the fixtures (valid ones and each kind of spec
/// `validate` refuses).
fn sample_crs() -> Vec<PathBuf> {
    let mut crs = vec![example("memcached.yaml")];
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| !path_str(path).contains("/observed-"))
        .collect();
    fixtures.sort();
    crs.extend(fixtures);
    crs
}

/// `render` of `cr` (with `observed` children) by `plugin`, with admission (the plugin's
/// `default` and `validate`, as the API server calls them) unless `admission` is false: the
/// exit code, stdout and stderr, with the plugin's hash and path masked, the only things that
/// may differ between languages.
fn rendered(plugin: &Path, cr: &Path, observed: Option<&Path>, admission: bool) -> String {
    let mut args = vec![
        "render",
        path_str(plugin),
        path_str(cr),
        "--now",
        "2026-01-01T00:00:00Z",
    ];
    if !admission {
        args.push("--no-admission");
    }
    if let Some(observed) = observed {
        args.extend(["--observed", path_str(observed)]);
    }
    let output = operator_host(&args);
    let text = format!(
        "exit {:?}\n{}\n{}",
        output.status.code(),
        stdout(&output),
        stderr(&output)
    );
    mask_plugin_hash(&text).replace(path_str(plugin), "PLUGIN")
}

#[test]
fn every_language_renders_what_the_rust_memcached_plugin_renders() {
    let rust = example_plugin("memcached");
    let mut cases: Vec<(PathBuf, Option<PathBuf>)> =
        sample_crs().into_iter().map(|cr| (cr, None)).collect();
    for observed in [
        "observed-rolled-out.yaml",
        "observed-rolling.yaml",
        "observed-scaling.yaml",
        "observed-hand-made.yaml",
    ] {
        for cr in [example("memcached.yaml"), fixture("image-change.yaml")] {
            cases.push((cr, Some(fixture(observed))));
        }
    }
    for (language, dir) in LANGUAGES {
        let plugin = memcached_in(dir);
        for (cr, observed) in &cases {
            // With admission (what `kubectl apply` meets), and without (what `reconcile`
            // reports of an object stored before the plugin validated).
            for admission in [true, false] {
                let expected = rendered(&rust, cr, observed.as_deref(), admission);
                assert_eq!(
                    rendered(&plugin, cr, observed.as_deref(), admission),
                    expected,
                    "{language}: render of {} with {observed:?} (admission: {admission}) \
                     differs from the Rust plugin's",
                    cr.display()
                );
            }
        }
    }
}

/// Every SDK builds the newest contract, and each Memcached says it validates and defaults.
#[test]
fn every_language_builds_contract_0_3_with_validate_and_default() {
    let info = |plugin: &Path| -> Value {
        let output = operator_host(&["inspect", path_str(plugin), "-o", "json"]);
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let rust = info(&example_plugin("memcached"));
    assert_eq!(rust["contract"], "operator-host:reconciler@0.3.0");
    assert_eq!(
        rust["implements"],
        serde_json::json!(["validate", "default"])
    );
    for (language, dir) in LANGUAGES {
        let info = info(&memcached_in(dir));
        assert_eq!(info["contract"], rust["contract"], "{language}");
        assert_eq!(info["implements"], rust["implements"], "{language}");
    }
}

#[test]
fn the_samples_cover_success_every_refusal_and_every_status() {
    let rust = example_plugin("memcached");
    let outputs: Vec<String> = sample_crs()
        .iter()
        .map(|cr| rendered(&rust, cr, None, false))
        .collect();
    assert!(
        outputs
            .iter()
            .filter(|o| o.starts_with("exit Some(0)"))
            .count()
            >= 4
    );
    for field in [
        "spec.size",
        "spec.containerPort",
        "spec.image",
        "spec.resources.requests",
        "spec.resources.limits",
    ] {
        assert!(
            outputs.iter().any(|o| o.contains(field)),
            "no sample refused for {field}"
        );
    }
    for (observed, reason) in [
        ("observed-rolled-out.yaml", "MinimumReplicasReady"),
        ("observed-rolling.yaml", "RolloutInProgress"),
        ("observed-scaling.yaml", "Scaling"),
        ("observed-hand-made.yaml", "SpecNotApplied"),
    ] {
        let output = rendered(
            &rust,
            &example("memcached.yaml"),
            Some(&fixture(observed)),
            true,
        );
        assert!(
            output.contains(&format!("reason: {reason}")),
            "{observed}: {output}"
        );
    }
}

/// The plugin's CRD as JSON, without its `description`s.
fn crd_without_descriptions(plugin: &Path) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("description");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let output = operator_host(&["crd", path_str(plugin)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let mut crd: Value = serde_yaml::from_slice(&output.stdout).unwrap();
    strip(&mut crd);
    crd
}

#[test]
fn every_language_declares_the_rust_crd_modulo_descriptions() {
    let expected = crd_without_descriptions(&example_plugin("memcached"));
    for (language, dir) in LANGUAGES {
        assert_eq!(
            crd_without_descriptions(&memcached_in(dir)),
            expected,
            "{language}"
        );
    }
}

#[test]
fn every_language_passes_the_conformance_kit() {
    for (language, dir) in LANGUAGES {
        let output = operator_host(&[
            "conformance",
            path_str(&memcached_in(dir)),
            path_str(&example("memcached.yaml")),
            path_str(&fixture("odd-quantities.yaml")),
            "--policy",
            path_str(&example("policy.yaml")),
        ]);
        let out = stdout(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{language}: {out}\n{}",
            stderr(&output)
        );
        assert!(!out.contains("FAIL"), "{language}: {out}");
        for check in [
            "PASS no state between calls default/odd-quantities",
            "PASS defaulting idempotent default/memcached-sample",
            "PASS validation deterministic default/odd-quantities",
        ] {
            assert!(out.contains(check), "{language}: {check}: {out}");
        }
    }
}

/// The hostile plugins of the other languages, from `make test-plugins`.
const HOSTILE: [(&str, &str); 3] = [
    ("Python", "test-plugins-python"),
    ("JavaScript", "test-plugins-js"),
    ("Go", "test-plugins-go"),
];

#[test]
fn resource_attacks_in_every_language_are_contained() {
    // A deadline well above a JavaScript guest's time to serialize a response of 4 MiB
    // (about 1.5 s in the interpreter), so that attack meets the response cap, not the clock.
    let limits = Limits {
        call_timeout: Duration::from_secs(4),
        ..Limits::default()
    };
    let runtime = runtime_with(limits.clone());
    for (language, dir) in HOSTILE {
        let plugin = runtime.load(&plugin_path(dir, "hostile")).unwrap();
        let call = |name: &str, count: u64| plugin.reconcile(&attack(name, count), "test");
        assert_eq!(
            call("loop", 0).unwrap_err(),
            CallError::Timeout {
                limit: limits.call_timeout
            },
            "{language}"
        );
        assert_eq!(
            call("memory", 0).unwrap_err(),
            CallError::OutOfMemory {
                limit: limits.max_memory_bytes
            },
            "{language}"
        );
        let big = call("big-response", limits.max_response_bytes as u64 + 1024).unwrap_err();
        assert!(
            matches!(
                big,
                CallError::ResponseTooLarge { limit, .. } if limit == limits.max_response_bytes
            ),
            "{language}: {big:?}"
        );
        // A counter kept in a module global starts from zero again in each call's instance.
        for _ in 0..2 {
            let response = call("counter", 0).unwrap().unwrap();
            assert_eq!(response.status, r#"{"calls":1}"#, "{language}");
        }
        // Containment does not break the plugin: the next call answers.
        assert!(call("none", 0).unwrap().is_ok(), "{language}");
    }
}
