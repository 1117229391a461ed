//! Contract 0.2.0's related resources against the real API server: objects a parent names or selects reach the plugin, a change of one reconciles the parents that refer to it, and a Secret under data-hash never reaches the plugin in clear.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use operator_host_tests::devcluster::wait_for;
use operator_host_tests::memcached::create;
use operator_host_tests::staged::{TIMEOUT, staged_host, staged_resource};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(map(labels)),
            ..ObjectMeta::default()
        },
        data: Some(map(data)),
        ..ConfigMap::default()
    }
}

fn secret(name: &str, password: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "password".to_string(),
            ByteString(password.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Waits until `name`'s status satisfies `check`; returns the status.
async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(&format!("{name}: {what}"), TIMEOUT, || async {
        let status = api.get(name).await?.data["status"].clone();
        Ok(check(&status).then_some(status))
    })
    .await
    .unwrap()
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[tokio::test]
async fn related_objects_reach_the_plugin_and_their_changes_reconcile_who_refers_to_them() {
    let (ns, host, api) = staged_host("related").await;
    let config_maps: Api<ConfigMap> = ns.api();
    let secrets: Api<Secret> = ns.api();
    let post = PostParams::default();
    config_maps
        .create(&post, &config_map("c1", &[], &[("mode", "fast")]))
        .await
        .unwrap();
    config_maps
        .create(&post, &config_map("c2", &[], &[("mode", "slow")]))
        .await
        .unwrap();
    let extra = [("staged.operator-host.dev/extra", "true")];
    config_maps
        .create(&post, &config_map("e1", &extra, &[]))
        .await
        .unwrap();
    secrets
        .create(&post, &secret("s1", "hunter2"))
        .await
        .unwrap();
    create(
        &api,
        &staged_resource(),
        "p1",
        json!({"configName": "c1", "secretName": "s1"}),
    )
    .await;
    create(&api, &staged_resource(), "p2", json!({"configName": "c2"})).await;

    let status = wait_status(&api, "p1", "sees c1, s1 and e1", |s| {
        s["config"]["mode"] == "fast" && s["extras"] == json!(["e1"])
    })
    .await;
    assert_eq!(status["secret"]["password"], sha256_hex("hunter2"));
    // Neither the value nor its base64 is anywhere in what the plugin wrote.
    let text = status.to_string();
    assert!(
        !text.contains("hunter2") && !text.contains("aHVudGVyMg"),
        "{text}"
    );
    wait_status(&api, "p2", "sees c2", |s| s["config"]["mode"] == "slow").await;

    // A change of c1 reconciles p1 (the test host resyncs every 5 minutes: this is the watch).
    config_maps
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"mode": "faster"}})),
        )
        .await
        .unwrap();
    wait_status(&api, "p1", "sees the new c1", |s| {
        s["config"]["mode"] == "faster"
    })
    .await;
    // So does a change of the Secret, still as a hash.
    secrets
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "correct horse"}})),
        )
        .await
        .unwrap();
    wait_status(&api, "p1", "sees the new s1's hash", |s| {
        s["secret"]["password"] == sha256_hex("correct horse")
    })
    .await;
    // A new object that a selector matches reconciles every parent that declares it.
    config_maps
        .create(&post, &config_map("e2", &extra, &[]))
        .await
        .unwrap();
    for parent in ["p1", "p2"] {
        wait_status(&api, parent, "sees e2", |s| {
            s["extras"] == json!(["e1", "e2"])
        })
        .await;
    }
    // p2 never saw c1: what it refers to is still what it reports.
    let p2 = api.get("p2").await.unwrap();
    assert_eq!(p2.data["status"]["config"]["mode"], "slow");
    // The deletion of a named object reaches its parent as well.
    config_maps.delete("c1", &Default::default()).await.unwrap();
    wait_status(&api, "p1", "sees c1 gone", |s| s["config"] == json!({})).await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}
