//! The policy in the run loop: a plan it forbids writes nothing and reports `PolicyViolation`.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{create, memcached_resource, reconciled_condition};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

fn policy(body: &str) -> Policy {
    Policy::parse(
        &format!("apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"),
        Path::new("policy.yaml"),
    )
    .unwrap()
}

/// Runs the Memcached plugin under `policy`, creates a Memcached and returns its
/// `Reconciled=False` condition once the host reports it; checks that nothing was applied
/// and that a Warning event was published.
async fn violation(test: &str, policy: Policy) -> Value {
    let ns = TestNamespace::new(test).await.unwrap();
    let host =
        Host::start_with_policy(plugin_path("plugins", "memcached"), ns.name(), policy).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    create(&api, &memcached_resource(), "cache", json!({"size": 1})).await;
    let condition = wait_for("Reconciled=False", TIMEOUT, || async {
        let condition = reconciled_condition(&api.get("cache").await?);
        Ok((condition["status"] == "False").then_some(condition))
    })
    .await
    .unwrap();
    ns.wait_for_event("a PolicyViolation event", |e| {
        e.reason.as_deref() == Some("PolicyViolation")
    })
    .await;
    let deployments = ns.api::<Deployment>().list(&ListParams::default()).await;
    assert!(deployments.unwrap().items.is_empty());
    let services = ns.api::<Service>().list(&ListParams::default()).await;
    assert!(services.unwrap().items.is_empty());
    assert!(host.reconciles("PolicyViolation") > 0);
    host.stop().await;
    ns.cleanup().await.unwrap();
    condition
}

#[tokio::test]
async fn too_many_children_are_a_policy_violation() {
    let condition = violation(
        "policy-children",
        policy("plugins:\n  memcached:\n    maxChildren: 1\n"),
    )
    .await;
    assert_eq!(condition["reason"], "PolicyViolation", "{condition}");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("2 children") && message.contains("at most 1"),
        "{message}"
    );
}

#[tokio::test]
async fn a_parent_outside_the_policys_namespaces_is_a_policy_violation() {
    let condition = violation(
        "policy-namespace",
        policy("plugins:\n  memcached:\n    namespaces: [somewhere-else]\n"),
    )
    .await;
    assert_eq!(condition["reason"], "PolicyViolation", "{condition}");
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains("somewhere-else"), "{message}");
}
