//! The etcd plugin through `operator-host render`: golden output of the example, of a scale-up's membership Job behind its barrier, and of a missing TLS Secret.

use crate::util;

use std::path::PathBuf;

use serde_json::{Value, json};
use util::{example, example_plugin, operator_host, path_str, stderr, stdout};

const NOW: &str = "2026-01-01T00:00:00Z";

fn write(dir: &tempfile::TempDir, name: &str, document: &Value) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_yaml::to_string(document).unwrap()).unwrap();
    path
}

fn render(args: &[&str]) -> String {
    let plugin = example_plugin("etcd");
    let policy = example("policy.yaml");
    let mut all = vec!["render", path_str(&plugin)];
    all.extend(args);
    all.extend(["--now", NOW, "--policy", path_str(&policy)]);
    let output = operator_host(&all);
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

fn example_cluster(spec: Value) -> Value {
    let text = std::fs::read_to_string(example("etcd.yaml")).unwrap();
    let mut cluster: Value = serde_yaml::from_str(&text).unwrap();
    for (key, value) in spec.as_object().unwrap() {
        cluster["spec"][key] = value.clone();
    }
    cluster
}

#[test]
fn render_of_the_example_matches_the_golden_file() {
    let cr = example("etcd.yaml");
    util::assert_golden(&render(&[path_str(&cr)]), "etcd.yaml");
}

/// The children of the example, applied and settled: three ready members.
fn settled_three(dir: &tempfile::TempDir) -> PathBuf {
    let plugin = example_plugin("etcd");
    let output = operator_host(&[
        "render",
        path_str(&plugin),
        path_str(&example("etcd.yaml")),
        "-o",
        "json",
        "--policy",
        path_str(&example("policy.yaml")),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let desired: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut items: Vec<Value> = desired["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "StatefulSet" || c["kind"] == "ConfigMap")
        .cloned()
        .collect();
    for item in &mut items {
        if item["kind"] == "StatefulSet" {
            item["metadata"]["generation"] = 1.into();
            item["status"] = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3,
                "updatedReplicas": 3, "currentRevision": "r1", "updateRevision": "r1"});
        }
    }
    write(
        dir,
        "observed.yaml",
        &json!({"apiVersion": "v1", "kind": "List", "items": items}),
    )
}

#[test]
fn render_of_a_scale_up_shows_the_membership_job_as_a_barrier_before_the_resize() {
    let dir = tempfile::tempdir().unwrap();
    let observed = settled_three(&dir);
    let cr = write(&dir, "cr.yaml", &example_cluster(json!({"replicas": 5})));
    let rendered = render(&[path_str(&cr), "--observed", path_str(&observed)]);
    util::assert_golden(&rendered, "etcd-scale-up.yaml");
    // What the golden holds, said plainly: the Job closes the first stage, and the resize
    // is in the stage it holds.
    let barrier = rendered
        .find("# stage 0: update=recreate ready-when=condition Complete")
        .unwrap();
    let job = rendered.find("name: example-add-3").unwrap();
    let held = rendered.find("# stage 1").unwrap();
    let resize = rendered.find("replicas: 4").unwrap();
    assert!(barrier < job && job < held && held < resize, "{rendered}");
}

#[test]
fn render_with_a_missing_tls_secret_creates_no_member_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let cr = write(
        &dir,
        "cr.yaml",
        &example_cluster(json!({"tls": {"secretName": "example-tls"}})),
    );
    let rendered = render(&[path_str(&cr), "-o", "json"]);
    let plan: Value = serde_json::from_str(&rendered).unwrap();
    let kinds: Vec<&str> = plan["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Service", "Service"]);
    assert_eq!(plan["status"]["phase"], "Pending");
    let ready = plan["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["reason"], "SecretNotFound");

    // The same CR beside its Secret (render takes the stream's other documents as the
    // cluster's objects): the members are created, and the template carries the hash.
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "example-tls", "namespace": "default"},
        "data": {"ca.crt": "Y2E=", "tls.crt": "Y3J0", "tls.key": "a2V5"}});
    let stream = dir.path().join("stream.yaml");
    std::fs::write(
        &stream,
        format!(
            "{}---\n{}",
            serde_yaml::to_string(&secret).unwrap(),
            std::fs::read_to_string(&cr).unwrap()
        ),
    )
    .unwrap();
    let rendered = render(&[path_str(&stream), "-o", "json"]);
    let plan: Value = serde_json::from_str(&rendered).unwrap();
    let set = plan["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "StatefulSet")
        .expect("the members, once the Secret exists");
    assert!(
        set["spec"]["template"]["metadata"]["annotations"]["etcd.operator-host.dev/tls-hash"]
            .is_string()
    );
    assert!(
        !rendered.contains("Y2E="),
        "the plugin never sees the Secret's data"
    );
}
