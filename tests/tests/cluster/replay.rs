//! The flight recorder and `replay`: `run --record DIR` keeps each parent's last inputs (its
//! Secret data only as hashes); `replay` runs the plugin on them offline and prints what it
//! did on the cluster; beside another version it prints what that version would change; a
//! recording of a spec the plugin rejects replays as the rejection (exit 3).

use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use operator_host_tests::devcluster::{TestNamespace, cluster, wait_for};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::host::plugin_path;
use operator_host_tests::memcached::{create, managed_children, memcached_resource};
use operator_host_tests::process_host::{Launch, ProcessHost};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const TIMEOUT: Duration = Duration::from_secs(90);

/// `operator-host replay ARGS`: exit code, stdout, stderr.
fn replay(args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(BINARY)
        .arg("replay")
        .args(args)
        .output()
        .expect("operator-host runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into(),
        String::from_utf8_lossy(&output.stderr).into(),
    )
}

#[tokio::test]
async fn a_recorded_reconcile_replays_offline_alone_and_against_another_version() {
    let ns = TestNamespace::new("replay").await.unwrap();
    let plugins = plugin_dir("test-plugins", "memcached-v1");
    let records = tempfile::tempdir().unwrap();
    let record_arg = records.path().to_str().unwrap().to_string();
    let host = ProcessHost::start(&Launch {
        binary: BINARY.as_ref(),
        plugins: plugins.path(),
        kubeconfig: &cluster().kubeconfig,
        namespace: Some(ns.name()),
        install_crds: true,
        crash_after: None,
        metrics_addr: None,
        args: &["--record", &record_arg],
    });
    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    create(&parents, &memcached_resource(), "m-0", json!({"size": 2})).await;
    wait_for("m-0's children", TIMEOUT, || async {
        Ok((managed_children(&ns, "").await.0.len() == 2).then_some(()))
    })
    .await
    .unwrap();
    let file = records
        .path()
        .join("memcached")
        .join(ns.name())
        .join("m-0.json");
    // The recording of the reconcile that saw both children (the first saw none).
    let recording: Value = wait_for("a recording with both children", TIMEOUT, || async {
        let Ok(text) = std::fs::read_to_string(&file) else {
            return Ok(None);
        };
        let recording: Value = serde_json::from_str(&text)?;
        Ok((recording["observed"].as_array().map(Vec::len) == Some(2)).then_some(recording))
    })
    .await
    .unwrap();
    assert_eq!(recording["plugin"], "memcached");
    assert_eq!(recording["parent"]["spec"]["size"], 2);
    let file_arg = file.to_str().unwrap();

    // Alone: what the plugin does for that parent, as `render` prints it.
    let v1 = plugin_path("test-plugins", "memcached-v1");
    let (code, stdout, stderr) = replay(&[v1.to_str().unwrap(), file_arg]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("kind: Deployment") && stdout.contains("replicas: 2"),
        "{stdout}"
    );
    // Against the version that serves: nothing; against v2: every child annotated.
    let v2 = plugin_path("test-plugins", "memcached-v2");
    let (code, _, stderr) = replay(&[
        v1.to_str().unwrap(),
        file_arg,
        "--against",
        v1.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = replay(&[
        v2.to_str().unwrap(),
        records.path().to_str().unwrap(),
        "--against",
        v1.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(code, 1, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["summary"]["changed"],
        json!({"Deployment": 1, "Service": 1}),
        "{report:#}"
    );

    // A spec the plugin rejects is recorded too, and replays as the rejection.
    parents
        .patch(
            "m-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": "two words"}})),
        )
        .await
        .unwrap();
    wait_for("the rejected spec recorded", TIMEOUT, || async {
        let text = std::fs::read_to_string(&file)?;
        Ok(text.contains("two words").then_some(()))
    })
    .await
    .unwrap();
    let (code, _, stderr) = replay(&[v1.to_str().unwrap(), file_arg]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("image"), "{stderr}");
    host.kill().await;
    ns.cleanup().await.unwrap();
}
