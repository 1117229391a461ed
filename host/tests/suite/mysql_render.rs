//! The MySQL plugin through `operator-host render`: golden output of both examples, status from observed children, rejections.

use crate::util;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde::Deserialize;
use serde_json::Value;
use util::{example, example_plugin, operator_host, path_str, stderr, stdout};

const NOW: &str = "2026-01-01T00:00:00Z";

/// The InnoDBCluster document of an example (the examples also hold the Secret), to edit.
fn cluster_document(example_name: &str) -> Value {
    let text = std::fs::read_to_string(example(example_name)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "InnoDBCluster")
        .unwrap_or_else(|| panic!("{example_name} has no InnoDBCluster"))
}

/// The root Secret the examples hold beside their cluster.
fn root_secret_document() -> Value {
    let text = std::fs::read_to_string(example("mysql.yaml")).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "Secret")
        .unwrap()
}

/// Writes `document` to `cr.yaml` in `dir`, after the examples' root Secret (which `render`
/// takes as a cluster object: the plugin reads it as a related resource).
fn cr_file(dir: &tempfile::TempDir, document: &Value) -> PathBuf {
    let path = dir.path().join("cr.yaml");
    let text = format!(
        "{}---\n{}",
        serde_yaml::to_string(&root_secret_document()).unwrap(),
        serde_yaml::to_string(document).unwrap()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Renders the example's InnoDBCluster and compares with `host/tests/golden/<golden>`;
/// `UPDATE_GOLDEN=1` accepts a deliberate change.
fn assert_golden(example_name: &str, golden: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cr = cr_file(&dir, &cluster_document(example_name));
    let output = operator_host(&[
        "render",
        path_str(&example_plugin("mysql")),
        path_str(&cr),
        "--now",
        NOW,
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    util::assert_golden(&stdout(&output), golden);
}

fn render_json(cr: &Path, observed: Option<&Path>) -> Output {
    let mut args = vec![
        "render".to_string(),
        path_str(&example_plugin("mysql")).to_string(),
        path_str(cr).to_string(),
        "-o".to_string(),
        "json".to_string(),
        "--policy".to_string(),
        path_str(&example("policy.yaml")).to_string(),
    ];
    if let Some(observed) = observed {
        args.extend(["--observed".to_string(), path_str(observed).to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    operator_host(&args)
}

#[test]
fn render_of_the_one_instance_example_matches_the_golden_file() {
    assert_golden("mysql.yaml", "mysql.yaml");
}

#[test]
fn render_of_the_three_instance_example_matches_the_golden_file() {
    assert_golden("mysql-3.yaml", "mysql-3.yaml");
}

#[test]
fn the_example_file_renders_its_cluster_and_skips_the_secret() {
    let output = operator_host(&[
        "render",
        path_str(&example_plugin("mysql")),
        path_str(&example("mysql.yaml")),
        "--now",
        NOW,
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    util::assert_golden(&stdout(&output), "mysql.yaml");
    assert!(
        stderr(&output).contains("v1 Secret \"mysql-root\" is not a mysql.operator-host.dev/v1alpha1/InnoDBCluster: not rendered, read as an object of the cluster"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn render_with_an_observed_ready_statefulset_reports_online() {
    let dir = tempfile::tempdir().unwrap();
    let cr = cr_file(&dir, &cluster_document("mysql-3.yaml"));
    // The workloads the plugin desires (with the SDK's spec hash), applied and rolled out.
    let output = render_json(&cr, None);
    assert!(output.status.success(), "{}", stderr(&output));
    let desired: Value = serde_json::from_slice(&output.stdout).unwrap();
    let workload = |kind: &str, status: Value| {
        let mut object = desired["children"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == kind)
            .unwrap()
            .clone();
        object["metadata"]["generation"] = 1.into();
        object["status"] = status;
        object
    };
    let items = [
        workload(
            "StatefulSet",
            serde_json::json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3,
                "updatedReplicas": 3, "currentRevision": "r1", "updateRevision": "r1"}),
        ),
        workload(
            "Deployment",
            serde_json::json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                "updatedReplicas": 2, "availableReplicas": 2}),
        ),
        // The group exists: the Job that created it is Complete.
        workload(
            "Job",
            serde_json::json!({"conditions": [{"type": "Complete", "status": "True"}]}),
        ),
    ];
    let observed = dir.path().join("observed.yaml");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&observed, serde_yaml::to_string(&list).unwrap()).unwrap();
    let output = render_json(&cr, Some(&observed));
    assert!(output.status.success(), "{}", stderr(&output));
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(plan["status"]["cluster"]["status"], "ONLINE");
    assert_eq!(plan["status"]["cluster"]["onlineInstances"], 3);
    assert_eq!(plan["status"]["router"]["readyInstances"], 2);
    let conditions = plan["status"]["conditions"].as_array().unwrap();
    for type_ in ["Ready", "RouterReady", "SecretReady", "Reconciled"] {
        let condition = conditions.iter().find(|c| c["type"] == type_).unwrap();
        assert_eq!(condition["status"], "True", "{condition}");
    }
}

#[test]
fn a_mycnf_without_a_mysqld_section_exits_with_the_rejected_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut document = cluster_document("mysql.yaml");
    document["spec"]["mycnf"] = "max_connections=10\n".into();
    let output = render_json(&cr_file(&dir, &document), None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("spec.mycnf"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("[mysqld]"), "{}", stderr(&output));
}

#[test]
fn a_name_longer_than_40_characters_exits_with_the_rejected_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut document = cluster_document("mysql.yaml");
    document["metadata"]["name"] = "a".repeat(41).into();
    let output = render_json(&cr_file(&dir, &document), None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        // Refused at admission, as the API server would refuse it through the plugin.
        stderr(&output).contains("metadata.name: Invalid value: must be at most 40 characters"),
        "{}",
        stderr(&output)
    );
}

/// The examples' policy (`examples/policy.yaml`) asks `restricted` of both example plugins:
/// their pod templates meet it, and their references (the Secret named in the spec, their own
/// ServiceAccount) pass the default reference rules.
#[test]
fn both_examples_pass_the_example_policy_at_pod_security_restricted() {
    let dir = tempfile::tempdir().unwrap();
    for example_name in ["mysql.yaml", "mysql-3.yaml"] {
        let cr = cr_file(&dir, &cluster_document(example_name));
        let output = operator_host(&[
            "render",
            path_str(&example_plugin("mysql")),
            path_str(&cr),
            "--policy",
            path_str(&example("policy.yaml")),
        ]);
        assert!(
            output.status.success(),
            "{example_name}: {}",
            stderr(&output)
        );
    }
    let output = operator_host(&[
        "render",
        path_str(&example_plugin("memcached")),
        path_str(&example("memcached.yaml")),
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert!(output.status.success(), "memcached: {}", stderr(&output));
}
