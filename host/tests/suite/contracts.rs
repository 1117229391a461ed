//! Every contract the host serves, side by side: a 0.2.0 component runs unchanged, and the
//! webhooks of 0.3.0 answer the API server's reviews, refusing what is not a review of theirs.

use std::sync::Arc;

use operator_host::metrics::Metrics;
use operator_host::plugin::Plugin;
use operator_host::runtime::{AdmissionRequest, CallError, Contract, Operation, UpdateStrategy};
use operator_host::webhook::{self, FailurePolicy, Hook, ReviewError};
use serde_json::{Value, json};

use crate::util::{example_plugin, runtime_with, test_plugin};

fn load(path: &std::path::Path) -> Arc<Plugin> {
    Arc::new(Plugin::load(&runtime_with(Default::default()), path).unwrap())
}

#[test]
fn a_component_of_contract_0_2_runs_unchanged_with_its_child_options() {
    let plugin = load(&test_plugin("contract-v0-2"));
    assert_eq!(plugin.compiled.contract(), Contract::V0_2);
    assert_eq!(plugin.decl.implements, Default::default());
    let parent = json!({"apiVersion": "legacy.example.com/v1", "kind": "Legacy",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u"}, "spec": {"greeting": "hi"}});
    let plan = plugin
        .plan(&parent, &[], Vec::new(), "2026-01-01T00:00:00Z")
        .unwrap();
    assert_eq!(plan.apply.len(), 1);
    assert_eq!(plan.apply[0].update, UpdateStrategy::CreateOnly);
    // The delete policy travels in the object, for the prune that may come.
    assert_eq!(
        plan.apply[0].object["metadata"]["annotations"][operator_host::labels::ON_PRUNE_ANNOTATION],
        "orphan"
    );
    // What came in 0.3.0 is not there to call.
    let error = plugin
        .compiled
        .validate(
            &AdmissionRequest {
                operation: Operation::Create,
                object: Some(parent.to_string()),
                old_object: None,
                user: "u".into(),
                dry_run: false,
            },
            "test",
        )
        .unwrap_err();
    assert!(matches!(error, CallError::NotInContract { .. }), "{error}");
}

/// An AdmissionReview of the API server for a Memcached.
fn review(operation: &str, object: Value, old: Option<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7d1d4b43-0000-4000-8000-000000000001",
            "kind": {"group": "cache.example.com", "version": "v1alpha1", "kind": "Memcached"},
            "resource": {"group": "cache.example.com", "version": "v1alpha1", "resource": "memcacheds"},
            "name": "mc",
            "namespace": "ns",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        },
    }))
    .unwrap()
}

fn memcached(spec: Value) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
           "metadata": {"name": "mc", "namespace": "ns"}, "spec": spec})
}

async fn answer(plugin: &Arc<Plugin>, hook: Hook, body: &[u8]) -> Value {
    let review = webhook::admit(
        plugin.clone(),
        hook,
        body,
        FailurePolicy::Fail,
        &Metrics::new(),
    )
    .await
    .unwrap();
    serde_json::to_value(review).unwrap()["response"].clone()
}

#[tokio::test]
async fn validate_refuses_with_the_api_servers_invalid_status_and_its_causes() {
    let plugin = load(&example_plugin("memcached"));
    let bad = memcached(json!({"size": 1, "image": "not an image", "containerPort": 11211}));
    let response = answer(&plugin, Hook::Validate, &review("CREATE", bad, None)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["uid"], "7d1d4b43-0000-4000-8000-000000000001");
    let status = &response["status"];
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert!(
        status["message"].as_str().unwrap().starts_with(
            "Memcached.cache.example.com \"mc\" is invalid: spec.image: Invalid value"
        ),
        "{status}"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "spec.image");
    // A webhook's call counts in the plugin's call metrics, as a reconcile's does.
    let metrics = Metrics::new();
    let bad = memcached(json!({"size": 1, "image": "not an image", "containerPort": 11211}));
    webhook::admit(
        plugin.clone(),
        Hook::Validate,
        &review("CREATE", bad, None),
        FailurePolicy::Fail,
        &metrics,
    )
    .await
    .unwrap();
    let encoded = metrics.encode();
    assert!(
        encoded.contains("operator_host_plugin_cpu_seconds_total{plugin=\"memcached\"}"),
        "{encoded}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );

    // An update that leaves the spec alone is not the plugin's to refuse, however invalid
    // the object stored before it validated.
    let old = memcached(json!({"size": 1, "image": "not an image", "containerPort": 11211}));
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    let response = answer(
        &plugin,
        Hook::Validate,
        &review("UPDATE", relabelled, Some(old)),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn default_answers_a_json_patch_of_the_spec() {
    let plugin = load(&example_plugin("memcached"));
    let untagged = memcached(json!({"size": 1, "image": "memcached", "containerPort": 11211}));
    let response = answer(&plugin, Hook::Default, &review("CREATE", untagged, None)).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    // kube's AdmissionResponse writes the bytes as a list of numbers, which the API server
    // reads as it reads base64.
    let patch: Vec<u8> = serde_json::from_value(response["patch"].clone()).unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "replace", "path": "/spec/image", "value": "memcached:1.6.39-alpine"}])
    );
    // Defaulting a defaulted object changes nothing: no patch.
    let pinned =
        memcached(json!({"size": 1, "image": "memcached:1.6.39-alpine", "containerPort": 11211}));
    let response = answer(&plugin, Hook::Default, &review("CREATE", pinned, None)).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
}

#[tokio::test]
async fn a_malformed_review_or_one_of_another_kind_is_refused_with_what_was_expected() {
    let plugin = load(&example_plugin("memcached"));
    let metrics = Metrics::new();
    let error = webhook::admit(
        plugin.clone(),
        Hook::Validate,
        b"{not json",
        FailurePolicy::Fail,
        &metrics,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, ReviewError::NotAdmissionReview(_)),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("AdmissionReview of admission.k8s.io/v1"),
        "{error}"
    );

    let mut other: Value =
        serde_json::from_slice(&review("CREATE", memcached(json!({"size": 1})), None)).unwrap();
    other["request"]["resource"] =
        json!({"group": "apps", "version": "v1", "resource": "deployments"});
    let error = webhook::admit(
        plugin.clone(),
        Hook::Validate,
        &serde_json::to_vec(&other).unwrap(),
        FailurePolicy::Fail,
        &metrics,
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "plugin memcached reconciles memcacheds.cache.example.com, not deployments.apps: this \
         webhook is not for that kind"
    );

    let conversion = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "cache.example.com/v9",
                    "objects": [memcached(json!({"size": 1}))]},
    });
    let answered = webhook::convert(plugin, &serde_json::to_vec(&conversion).unwrap(), &metrics)
        .await
        .unwrap();
    let response = serde_json::to_value(answered).unwrap()["response"].clone();
    assert_eq!(response["result"]["status"], "Failure");
    assert!(
        response["result"]["message"].as_str().unwrap().contains(
            "cannot convert to cache.example.com/v9: the CRD of plugin memcached serves v1alpha1"
        ),
        "{response}"
    );
}
