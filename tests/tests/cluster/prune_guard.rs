//! The prune guard on the control plane: a Memcached release with a bug (it returns no
//! children) swapped in under the defaults deletes nothing; every parent says `PruneHeld`
//! with a Warning event; an approved parent's children go; the next good release serves.

use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path, publish};
use operator_host_tests::memcached::{
    all_reconciled, create, managed_children, memcached_resource, reconciled_condition,
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);
const PARENTS: usize = 4;

/// The Memcached plugin's Deployments and Services in `ns`, as `Kind/name`.
async fn children(ns: &TestNamespace) -> Vec<String> {
    managed_children(ns, "").await.0.into_keys().collect()
}

#[tokio::test]
async fn a_release_that_drops_every_child_deletes_nothing_until_approved() {
    let ns = TestNamespace::new("prune-guard").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memcached.wasm");
    publish(&plugin_path("test-plugins", "memcached-v1"), &file);
    // The rollout gate would hold the buggy release before it serves (tests/tests/cluster/
    // rollout_gate.rs); here it serves, so that the prune guard meets its deletions.
    let policy = operator_host::policy::Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  rollout:\n    strategy: Immediate\n",
        std::path::Path::new("prune-guard-test-policy.yaml"),
    )
    .unwrap();
    let host = Host::start_dir_with_policy(dir.path().to_path_buf(), &[ns.name()], policy).await;
    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    for i in 0..PARENTS {
        create(
            &parents,
            &memcached_resource(),
            &format!("m-{i}"),
            json!({"size": 1}),
        )
        .await;
    }
    let before = wait_for("every parent's Deployment and Service", TIMEOUT, || async {
        let names = children(&ns).await;
        Ok((names.len() == 2 * PARENTS).then_some(names))
    })
    .await
    .unwrap();

    // The buggy release: every parent's plan deletes its Deployment and Service.
    let replaced = host.reloads("replaced");
    publish(&plugin_path("test-plugins", "memcached-no-children"), &file);
    wait_for("the buggy release served", TIMEOUT, || async {
        Ok((host.reloads("replaced") > replaced).then_some(()))
    })
    .await
    .unwrap();
    for i in 0..PARENTS {
        let name = format!("m-{i}");
        let held = wait_for(
            &format!("{name} Reconciled=False PruneHeld"),
            TIMEOUT,
            || async {
                let parent = parents.get(&name).await?;
                Ok((reconciled_condition(&parent)["reason"] == "PruneHeld").then_some(parent))
            },
        )
        .await
        .unwrap();
        let message = reconciled_condition(&held)["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            message.contains("operator-host.dev/approve-prune=true"),
            "the condition says how to release it: {message}"
        );
    }
    ns.wait_for_event("a PruneHeld Warning", |event| {
        event.reason.as_deref() == Some("PruneHeld") && event.type_.as_deref() == Some("Warning")
    })
    .await;
    assert_eq!(
        children(&ns).await,
        before,
        "the buggy release deleted children"
    );
    let (pruned, held) = host.prunes();
    assert_eq!(pruned, 0);
    assert!(
        held >= 2 * PARENTS as u64,
        "{held} deletions counted as held"
    );

    // Approved, one parent's deletions go ahead; the others' stay held.
    parents
        .patch(
            "m-0",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"operator-host.dev/approve-prune": "true"}}}),
            ),
        )
        .await
        .unwrap();
    let left = wait_for("m-0's children deleted", TIMEOUT, || async {
        let names = children(&ns).await;
        Ok((names.len() == 2 * (PARENTS - 1)).then_some(names))
    })
    .await
    .unwrap();
    assert!(left.iter().all(|name| !name.ends_with("/m-0")), "{left:?}");

    // The fix: another version serves, and every parent converges on it.
    publish(&plugin_path("test-plugins", "memcached-v2"), &file);
    all_reconciled(&parents, PARENTS, TIMEOUT).await.unwrap();
    wait_for("m-0's children back", TIMEOUT, || async {
        Ok((children(&ns).await.len() == 2 * PARENTS).then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}
