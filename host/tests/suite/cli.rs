//! The `operator-host` binary: golden `render` output, and a clear error and exit code for each bad input.

use crate::util;

use std::path::{Path, PathBuf};
use std::process::Output;

use util::{
    assert_golden, example, example_plugin, operator_host, path_str, stderr, stdout, test_plugin,
};

const NOW: &str = "2026-01-01T00:00:00Z";

/// Writes `text` to a temporary YAML file.
fn yaml_file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("cr.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn render(plugin: &Path, cr: &Path) -> Output {
    operator_host(&["render", path_str(plugin), path_str(cr), "--now", NOW])
}

fn assert_fails(output: &Output, code: i32, message_parts: &[&str]) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for part in message_parts {
        assert!(err.contains(part), "expected {part:?} in: {err}");
    }
}

#[test]
fn render_of_the_memcached_example_matches_the_golden_file() {
    let output = render(&example_plugin("memcached"), &example("memcached.yaml"));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_golden(&stdout(&output), "memcached.yaml");
}

#[test]
fn render_defaults_and_validates_as_the_api_server_calls_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(
        &dir,
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: x}\nspec: {size: 0, image: memcached}\n",
    );
    let output = render(&example_plugin("memcached"), &cr);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("image: memcached:1.6.39-alpine"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains("warning: default/x: Memcached x: spec.size is 0"),
        "{}",
        stderr(&output)
    );
    // As a host without webhooks serves it: as written.
    let output = operator_host(&[
        "render",
        path_str(&example_plugin("memcached")),
        path_str(&cr),
        "--now",
        NOW,
        "--no-admission",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("image: memcached\n"),
        "{}",
        stdout(&output)
    );
    let bad = yaml_file(
        &dir,
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: x}\nspec: {size: 1, image: 'not an image'}\n",
    );
    assert_fails(
        &render(&example_plugin("memcached"), &bad),
        3,
        &[
            "default/x: refused at admission: spec.image: Invalid value: must be a container image reference",
        ],
    );
}

#[test]
fn render_output_has_replicas_equal_to_size_and_a_service() {
    let output = operator_host(&[
        "render",
        path_str(&example_plugin("memcached")),
        path_str(&example("memcached.yaml")),
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let children = plan["children"].as_array().unwrap();
    let deployment = children.iter().find(|c| c["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert!(children.iter().any(|c| c["kind"] == "Service"));
}

#[test]
fn render_with_observed_children_reports_their_state() {
    let (plugin, cr) = (example_plugin("memcached"), example("memcached.yaml"));
    let render_json = |observed: Option<&Path>| {
        let mut args = vec!["render", path_str(&plugin), path_str(&cr), "-o", "json"];
        if let Some(observed) = observed {
            args.extend(["--observed", path_str(observed)]);
        }
        let output = operator_host(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    // The Deployment the plugin desires (with the SDK's spec hash), applied and rolled out;
    // one of another spec (a hand-made one, without the hash) is not the current one.
    let desired = render_json(None);
    let mut deployment = desired["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "Deployment")
        .unwrap()
        .clone();
    deployment["metadata"]["generation"] = 1.into();
    deployment["status"] = serde_json::json!({"observedGeneration": 1, "replicas": 3,
        "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3});
    let dir = tempfile::tempdir().unwrap();
    let observed = dir.path().join("observed.yaml");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [deployment]});
    std::fs::write(&observed, serde_yaml::to_string(&list).unwrap()).unwrap();
    let plan = render_json(Some(&observed));
    assert_eq!(plan["status"]["readyReplicas"], 3);
    assert_eq!(plan["status"]["conditions"][0]["status"], "True");
    std::fs::write(
        &observed,
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  \
         metadata: {name: memcached-sample, generation: 1}\n  \
         spec: {replicas: 3, selector: {}, template: {}}\n  \
         status: {observedGeneration: 1, replicas: 3, readyReplicas: 3, updatedReplicas: 3, \
         availableReplicas: 3}\n",
    )
    .unwrap();
    let plan = render_json(Some(&observed));
    assert_eq!(plan["status"]["readyReplicas"], 3);
    assert_eq!(plan["status"]["conditions"][0]["status"], "False");
    assert_eq!(plan["status"]["conditions"][0]["reason"], "SpecNotApplied");
}

#[test]
fn crd_prints_the_plugins_custom_resource_definition() {
    let output = operator_host(&["crd", path_str(&example_plugin("memcached"))]);
    assert!(output.status.success(), "{}", stderr(&output));
    let crd: serde_json::Value = serde_yaml::from_slice(&output.stdout).unwrap();
    assert_eq!(crd["kind"], "CustomResourceDefinition");
    assert_eq!(crd["metadata"]["name"], "memcacheds.cache.example.com");
}

#[test]
fn inspect_prints_the_declaration_size_and_hash() {
    let output = operator_host(&[
        "inspect",
        path_str(&example_plugin("memcached")),
        "-o",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(info["name"], "memcached");
    assert_eq!(info["parent"], "cache.example.com/v1alpha1/Memcached");
    assert_eq!(
        info["children"],
        serde_json::json!(["apps/v1/Deployment", "v1/Service"])
    );
    assert_eq!(info["contract"], "operator-host:reconciler@0.3.0");
    assert_eq!(
        info["implements"],
        serde_json::json!(["validate", "default"])
    );
    assert_eq!(info["sha256"].as_str().unwrap().len(), 64);
    assert!(info["size"].as_u64().unwrap() > 0);
}

#[test]
fn a_missing_plugin_file_is_a_load_error() {
    let output = render(Path::new("/nonexistent.wasm"), &example("memcached.yaml"));
    assert_fails(&output, 2, &["/nonexistent.wasm", "cannot read plugin"]);
}

#[test]
fn a_plugin_file_that_is_not_wasm_is_a_load_error() {
    let output = render(&example("memcached.yaml"), &example("memcached.yaml"));
    assert_fails(&output, 2, &["memcached.yaml", "not a WebAssembly file"]);
}

#[test]
fn a_core_module_is_a_load_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    std::fs::write(&path, wat::parse_str("(module)").unwrap()).unwrap();
    let output = operator_host(&["inspect", path_str(&path)]);
    assert_fails(
        &output,
        2,
        &["core.wasm", "not a component", "wasm32-wasip2"],
    );
}

#[test]
fn a_plugin_of_another_contract_version_is_a_load_error() {
    let output = operator_host(&["inspect", path_str(&test_plugin("wrong-contract"))]);
    assert_fails(
        &output,
        2,
        &[
            "wrong-contract.wasm",
            "plugin@9.0.0",
            "reconciler@0.3.0",
            "reconciler@0.2.0",
            "reconciler@0.1.0",
        ],
    );
}

#[test]
fn malformed_yaml_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(&dir, "apiVersion: [unclosed\nkind: Memcached\n");
    let output = render(&example_plugin("memcached"), &cr);
    assert_fails(&output, 2, &["cr.yaml", "not valid YAML"]);
}

#[test]
fn every_cr_of_a_stream_is_rendered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let one = std::fs::read_to_string(example("memcached.yaml")).unwrap();
    let two = one.replace("name: memcached-sample", "name: second");
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: unrelated}\n";
    let cr = yaml_file(&dir, &format!("{one}\n---\n{secret}---\n{two}"));
    let output = render(&example_plugin("memcached"), &cr);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    let first = out
        .find("# status of default/memcached-sample:")
        .expect(&out);
    let second = out.find("# status of default/second:").expect(&out);
    assert!(first < second, "{out}");
    assert!(out[first..].contains("name: second"), "{out}");
    assert!(
        stderr(&output).contains("v1 Secret \"unrelated\" is not a cache.example.com/v1alpha1/Memcached: not rendered, read as an object of the cluster"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_file_without_a_cr_of_the_kind_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(&dir, "");
    let output = render(&example_plugin("memcached"), &cr);
    assert_fails(&output, 2, &["cr.yaml", "holds no", "no documents"]);
}

#[test]
fn an_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(
        &dir,
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: x}\nspec: {size: 1000}\n",
    );
    let output = render(&example_plugin("memcached"), &cr);
    let err = stderr(&output);
    assert_eq!(err.matches("between 0 and 100").count(), 1, "{err}");
    let missing = operator_host(&[
        "render",
        path_str(&example_plugin("memcached")),
        "/nonexistent.yaml",
    ]);
    let err = stderr(&missing);
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

#[test]
fn a_cr_of_another_kind_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(
        &dir,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    let output = render(&example_plugin("memcached"), &cr);
    assert_fails(
        &output,
        2,
        &[
            "cr.yaml",
            "cache.example.com/v1alpha1/Memcached",
            "ConfigMap",
        ],
    );
}

#[test]
fn a_spec_the_plugin_rejects_exits_with_the_rejected_code() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(
        &dir,
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: x}\nspec: {size: 1000}\n",
    );
    let output = render(&example_plugin("memcached"), &cr);
    assert_fails(
        &output,
        3,
        &["cr.yaml", "spec.size", "between 0 and 100", "1000"],
    );
}

#[test]
fn a_spec_of_the_wrong_type_is_rejected_with_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cr = yaml_file(
        &dir,
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: x}\nspec: {size: three}\n",
    );
    let output = render(&example_plugin("memcached"), &cr);
    // Refused at admission, with the field, as the API server would have it refused.
    assert_fails(
        &output,
        3,
        &[
            "cr.yaml",
            "refused at admission: spec.size: Invalid value: invalid type: string \"three\"",
        ],
    );
}

#[test]
fn logs_written_to_a_file_or_pipe_carry_no_colour_codes() {
    let plugins = tempfile::tempdir().unwrap();
    // `run` logs its start before it reads the kubeconfig, which then fails.
    let output = operator_host(&[
        "run",
        "--plugins",
        path_str(plugins.path()),
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    let err = stderr(&output);
    assert!(err.contains("operator-host starting"), "{err}");
    assert!(!err.contains('\u{1b}'), "escape sequences in: {err:?}");
}
