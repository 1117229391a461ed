//! `operator-host conformance` on every bundled plugin (they pass) and on hostile guests (each failure is named).

use crate::util;

use std::path::PathBuf;
use std::process::Output;

use util::{
    example, example_plugin, operator_host, path_str, plugin_path, stderr, stdout, test_plugin,
};

fn conformance(args: &[&str]) -> Output {
    let mut all = vec!["conformance"];
    all.extend_from_slice(args);
    operator_host(&all)
}

fn assert_passes(output: &Output, expected_checks: &[&str]) {
    let out = stdout(output);
    assert_eq!(output.status.code(), Some(0), "{out}\n{}", stderr(output));
    assert!(!out.contains("FAIL"), "{out}");
    for check in expected_checks {
        assert!(
            out.contains(&format!("PASS {check}")),
            "no PASS {check:?} in:\n{out}"
        );
    }
}

/// An `Attack` CR of the hostile plugin in a file of `dir`.
fn attack(dir: &tempfile::TempDir, attack: &str, extra: &str) -> PathBuf {
    let path = dir.path().join(format!("{attack}.yaml"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: hostile.operator-host.dev/v1alpha1\nkind: Attack\nmetadata: {{name: a}}\nspec: {{attack: {attack}{extra}}}\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn the_memcached_plugin_conforms() {
    let policy = example("policy.yaml");
    let output = conformance(&[
        path_str(&example_plugin("memcached")),
        path_str(&example("memcached.yaml")),
        "--policy",
        path_str(&policy),
    ]);
    assert_passes(
        &output,
        &[
            "info",
            "policy admits it",
            "deterministic default/memcached-sample",
            "no state between calls default/memcached-sample",
            "answer accepted default/memcached-sample",
            "invalid spec refused default/memcached-sample (spec is a string)",
            "invalid spec refused default/memcached-sample (spec.",
            "admitted default/memcached-sample",
            "defaulting idempotent default/memcached-sample",
            "validation deterministic default/memcached-sample",
            "within limits",
        ],
    );
}

#[test]
fn etcd_converts_both_ways_and_a_default_that_renames_fails_admission() {
    let output = conformance(&[
        path_str(&example_plugin("etcd")),
        path_str(&example("etcd.yaml")),
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert_passes(
        &output,
        &[
            "admitted default/example",
            "validation deterministic default/example",
            "conversion round trip via v1alpha1 default/example",
            "conversion round trip via v1beta1 default/example",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let output = conformance(&[
        path_str(&test_plugin("hostile")),
        path_str(&attack(&dir, "default-rename", "")),
    ]);
    let out = stdout(&output);
    assert!(
        out.contains(
            "FAIL admitted default/a: plugin hostile's default changes /metadata/name, where a \
             default may change only the spec, labels and annotations"
        ),
        "{out}"
    );
}

#[test]
fn the_mysql_plugin_conforms_on_both_examples() {
    let output = conformance(&[
        path_str(&example_plugin("mysql")),
        path_str(&example("mysql.yaml")),
        path_str(&example("mysql-3.yaml")),
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert_passes(
        &output,
        &[
            "answer accepted default/mycluster",
            "answer accepted default/mycluster-3",
        ],
    );
}

#[test]
fn the_redis_example_conforms() {
    let output = conformance(&[
        path_str(&plugin_path("example-plugins", "redis")),
        path_str(&example("redis.yaml")),
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert_passes(
        &output,
        &[
            "answer accepted default/cache",
            "no state between calls default/cache",
        ],
    );
}

#[test]
fn without_samples_the_declaration_and_invalid_specs_are_checked() {
    let output = conformance(&[path_str(&example_plugin("memcached"))]);
    assert_passes(
        &output,
        &["info", "invalid spec refused (spec is a string)"],
    );
}

#[test]
fn a_counter_in_the_guest_does_not_survive_between_calls() {
    let dir = tempfile::tempdir().unwrap();
    let output = conformance(&[
        path_str(&test_plugin("hostile")),
        path_str(&attack(&dir, "counter", "")),
    ]);
    assert_passes(
        &output,
        &[
            "deterministic default/a",
            "no state between calls default/a",
        ],
    );
}

#[test]
fn a_plugin_that_loops_fails_the_limits_and_is_not_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let output = operator_host(&[
        "--call-timeout-ms",
        "200",
        "conformance",
        path_str(&test_plugin("hostile")),
        path_str(&attack(&dir, "loop", "")),
    ]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    assert!(out.contains("FAIL within limits"), "{out}");
    assert!(out.contains("FAIL answer accepted default/a"), "{out}");
    assert!(stderr(&output).contains("checks of"), "{}", stderr(&output));
}

#[test]
fn the_policys_limits_for_the_plugin_are_the_ones_checked() {
    // The plugin's policy entry, not the command line, sets its call timeout, as under `run`.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\nplugins:\n  hostile:\n    limits: {callTimeoutMs: 200}\n",
    )
    .unwrap();
    let output = conformance(&[
        path_str(&test_plugin("hostile")),
        path_str(&attack(&dir, "loop", "")),
        "--policy",
        path_str(&policy),
    ]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    assert!(
        out.lines()
            .any(|l| l.starts_with("FAIL within limits") && l.ends_with("call timeout of 200 ms")),
        "{out}"
    );
}

#[test]
fn children_the_host_refuses_fail_the_answer_check() {
    let dir = tempfile::tempdir().unwrap();
    for (name, extra, expected) in [
        ("other-namespace", ", target: kube-system", "namespace"),
        ("forged-labels", "", "label"),
        ("undeclared-kind", "", "declare"),
    ] {
        let output = conformance(&[
            path_str(&test_plugin("hostile")),
            path_str(&attack(&dir, name, extra)),
        ]);
        let out = stdout(&output);
        assert_eq!(output.status.code(), Some(1), "{name}: {out}");
        let line = out
            .lines()
            .find(|l| l.starts_with("FAIL answer accepted"))
            .unwrap_or_else(|| panic!("{name}: no failed answer check in:\n{out}"));
        assert!(line.contains(expected), "{name}: {line}");
    }
}

#[test]
fn a_plugin_of_another_contract_is_a_load_error() {
    let output = conformance(&[path_str(&test_plugin("wrong-contract"))]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// `conformance` reads a sample file as `render` does: the documents of other kinds are the
/// cluster's objects, so an etcd CR beside its TLS Secret is checked on the path that creates
/// the members, not on the one that waits for a missing Secret.
#[test]
fn the_samples_other_documents_are_the_cluster_as_render_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let example_text = std::fs::read_to_string(example("etcd.yaml")).unwrap();
    let mut cluster: serde_json::Value = serde_yaml::from_str(&example_text).unwrap();
    cluster["spec"]["tls"] = serde_json::json!({"secretName": "example-tls"});
    let cr = serde_yaml::to_string(&cluster).unwrap();
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: example-tls}\n\
                  data: {ca.crt: Y2E=, tls.crt: Y3J0, tls.key: a2V5}\n";
    let accepted_line = |file: &str, text: String| {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        let output = conformance(&[
            path_str(&example_plugin("etcd")),
            path_str(&path),
            "--policy",
            path_str(&example("policy.yaml")),
        ]);
        assert_passes(&output, &["answer accepted default/example"]);
        let line = stdout(&output)
            .lines()
            .find(|l| l.starts_with("PASS answer accepted"))
            .unwrap()
            .to_string();
        (line, stderr(&output))
    };
    let (without_secret, _) = accepted_line("alone.yaml", cr.clone());
    assert!(without_secret.contains(": 2 children"), "{without_secret}");
    let (with_secret, notes) = accepted_line("with-secret.yaml", format!("{secret}---\n{cr}"));
    assert!(!with_secret.contains(": 2 children"), "{with_secret}");
    assert!(
        notes.contains("v1 Secret \"example-tls\" is not a")
            && notes.contains("read as an object of the cluster"),
        "{notes}"
    );
}

#[test]
fn a_sample_the_plugin_refuses_fails_as_an_invalid_sample() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("too-big.yaml");
    std::fs::write(
        &path,
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: mc}\n\
         spec: {size: 1000000}\n",
    )
    .unwrap();
    let output = conformance(&[path_str(&example_plugin("memcached")), path_str(&path)]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stdout(&output).contains(
            "FAIL answer accepted default/mc: a sample must be a valid \
             cache.example.com/v1alpha1/Memcached that reconciles"
        ),
        "{}",
        stdout(&output)
    );
}

#[test]
fn the_webapp_example_conforms_beside_its_secret() {
    let output = conformance(&[
        path_str(&plugin_path("example-plugins", "webapp")),
        path_str(&example("webapp.yaml")),
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert_passes(
        &output,
        &[
            "answer accepted default/shop: 5 children",
            "no state between calls default/shop",
            "invalid spec refused default/shop (spec is a string)",
        ],
    );
    assert!(!stdout(&output).contains("WARN"), "{}", stdout(&output));
}
