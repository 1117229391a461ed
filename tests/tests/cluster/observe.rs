//! Observe mode on the control plane: Memcached under `mode: Observe` applies, prunes and
//! finalizes nothing; each parent's `Drifted` condition says what differs from the cluster:
//! every child missing at first, then a Deployment someone else made under the name the plugin
//! would use, compared field by field and said not to be the parent's. The API writes the host
//! counts are the parents' status writes alone.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::host::Host;
use operator_host_tests::memcached::{condition, create, managed_children, memcached_resource};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Waits until parent `name`'s `Drifted` condition satisfies `holds`; returns it.
async fn wait_drifted(
    parents: &Api<DynamicObject>,
    name: &str,
    what: &str,
    holds: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(what, TIMEOUT, || async {
        let drifted = condition(&parents.get(name).await?, "Drifted");
        Ok(holds(&drifted).then_some(drifted))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn observe_mode_writes_nothing_but_the_drift() {
    let ns = TestNamespace::new("observe").await.unwrap();
    let policy = Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  mode: Observe\n",
        std::path::Path::new("observe-test-policy.yaml"),
    )
    .unwrap();
    let plugins = plugin_dir("test-plugins", "memcached-v1");
    let host =
        Host::start_dir_with_policy(plugins.path().to_path_buf(), &[ns.name()], policy).await;
    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    create(&parents, &memcached_resource(), "m-0", json!({"size": 1})).await;
    let drifted = wait_drifted(&parents, "m-0", "Drifted=True: nothing exists", |c| {
        c["status"] == "True"
    })
    .await;
    let message = drifted["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Deployment/m-0 is missing") && message.contains("Service/m-0 is missing"),
        "{message}"
    );

    // A Deployment someone else made, under the name the plugin would give its own.
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "m-0", "labels": {"app": "theirs"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.5"}]}
            }
        }
    }))
    .unwrap();
    let deployments: Api<Deployment> = ns.api();
    let theirs = deployments
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    // An unmanaged object is not in the host's caches: a change of the parent observes again.
    parents
        .patch(
            "m-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"example.com/touch": "1"}}})),
        )
        .await
        .unwrap();
    let drifted = wait_drifted(&parents, "m-0", "the Deployment compared", |c| {
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("Deployment/m-0 exists"))
    })
    .await;
    let message = drifted["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("is not this parent's")
            && message.contains("spec.replicas")
            && message.contains("Service/m-0 is missing"),
        "{message}"
    );

    // Nothing but the parent's status was written.
    // (Its status is the deployment controller's to write.)
    let after = deployments.get("m-0").await.unwrap();
    assert_eq!(
        after.spec, theirs.spec,
        "their Deployment's spec was written"
    );
    assert_eq!(after.metadata.labels, theirs.metadata.labels);
    assert_eq!(after.metadata.owner_references, None);
    let managers: Vec<String> = after
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|entry| entry.manager)
        .collect();
    assert!(
        !managers.contains(&operator_host::labels::FIELD_MANAGER.to_string()),
        "{managers:?}"
    );
    assert!(managed_children(&ns, "").await.0.is_empty());
    assert_eq!(host.applies(), (0, 0));
    assert_eq!(host.prunes(), (0, 0));
    let parent = parents.get("m-0").await.unwrap();
    assert!(
        parent.metadata.finalizers.unwrap_or_default().is_empty(),
        "observe mode added a finalizer"
    );
    let metrics = host.metrics.encode();
    let writes: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("operator_host_api_writes_total{"))
        .collect();
    assert!(
        writes.iter().all(|l| l.contains("write=\"status\"")),
        "only status writes: {writes:?}"
    );
    assert!(
        metrics.contains("operator_host_drifted_parents{plugin=\"memcached\"} 1"),
        "{metrics}"
    );
    assert!(host.reconciles("observed") > 0);
    host.stop().await;
    ns.cleanup().await.unwrap();
}
