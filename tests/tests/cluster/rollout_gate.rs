//! The rollout gate on the control plane, under the default policy: the Memcached release
//! with a bug (it returns no children) is planned on the live parents and held before it
//! serves, so it writes nothing, not even a status; `/readyz` and the metrics say so and how
//! to approve it; once its content is approved it serves, and its deletions pass the prune
//! guard; the next good release passes the gate on its own.

use std::time::Duration;

use kube::Api;
use kube::api::{DynamicObject, ListParams};
use operator_host::plugin::Plugin;
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path, publish, runtime};
use operator_host_tests::memcached::{
    VARIANT_ANNOTATION, all_reconciled, create, managed_children, memcached_resource,
};
use operator_host_tests::oracle::{Oracle, all_converge};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);
const PARENTS: usize = 4;

/// Each parent's name and resourceVersion: what changes with any write to it.
async fn versions(parents: &Api<DynamicObject>) -> Vec<(String, String)> {
    let listed = parents.list(&ListParams::default()).await.unwrap();
    let mut versions: Vec<(String, String)> = listed
        .items
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            (
                name,
                p.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    versions.sort();
    versions
}

#[tokio::test]
async fn a_release_that_would_delete_workloads_is_held_until_approved() {
    let ns = TestNamespace::new("rollout-gate").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memcached.wasm");
    publish(&plugin_path("test-plugins", "memcached-v1"), &file);
    let host = Host::start_dir(dir.path().to_path_buf(), &[ns.name()]).await;
    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    for i in 0..PARENTS {
        let name = format!("m-{i}");
        create(&parents, &memcached_resource(), &name, json!({"size": 1})).await;
    }
    all_reconciled(&parents, PARENTS, TIMEOUT).await.unwrap();
    // Converged: children and statuses as v1 computes them, so nothing of v1 is written again.
    let v1 = Plugin::load(&runtime(), &plugin_path("test-plugins", "memcached-v1")).unwrap();
    let names: Vec<String> = (0..PARENTS).map(|i| format!("m-{i}")).collect();
    let oracle = Oracle {
        client: ns.client(),
        plugin: &v1,
        namespace: ns.name(),
    };
    all_converge(&oracle, &names, TIMEOUT).await.unwrap();
    let children = managed_children(&ns, "").await.0;
    assert_eq!(children.len(), 2 * PARENTS);
    let written = versions(&parents).await;

    // The buggy release: held before it serves.
    let buggy = plugin_path("test-plugins", "memcached-no-children");
    let buggy_hash = Plugin::load(&runtime(), &buggy).unwrap().decl.content_hash;
    publish(&buggy, &file);
    wait_for("the buggy release held", TIMEOUT, || async {
        Ok((host.reloads("held") > 0).then_some(()))
    })
    .await
    .unwrap();
    let (ready, said) = host.metrics.readiness();
    assert!(!ready, "{said}");
    let approve = format!("echo {buggy_hash} > {}.approved", file.display());
    assert!(
        said.contains("held before serving")
            && said.contains("Deployment 4, Service 4")
            && said.contains(&approve),
        "/readyz says why and how to approve: {said}"
    );
    assert!(
        host.metrics
            .encode()
            .contains("operator_host_rollouts_held_total{plugin=\"memcached\"}"),
        "the hold is counted"
    );
    // Planned again with backoff, it is held again; nothing of it is ever written.
    let held = host.reloads("held");
    wait_for("the hold planned again", TIMEOUT, || async {
        Ok((host.reloads("held") > held).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(host.reloads("replaced"), 0);
    assert_eq!(managed_children(&ns, "").await.0, children);
    assert_eq!(versions(&parents).await, written, "a parent was written");
    assert_eq!(host.prunes(), (0, 0));

    // Approved: it serves, and its deletions (which its plans showed) go through.
    std::fs::write(format!("{}.approved", file.display()), &buggy_hash).unwrap();
    wait_for("the approved release's deletions", TIMEOUT, || async {
        Ok(managed_children(&ns, "").await.0.is_empty().then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(host.reloads("replaced"), 1);
    assert!(host.metrics.readiness().0, "{}", host.metrics.readiness().1);

    // A good release (v2 annotates the children it creates) passes the gate by itself.
    publish(&plugin_path("test-plugins", "memcached-v2"), &file);
    wait_for("v2's children", TIMEOUT, || async {
        let (uids, annotated) = managed_children(&ns, VARIANT_ANNOTATION).await;
        Ok((uids.len() == 2 * PARENTS && annotated == 2 * PARENTS).then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}
