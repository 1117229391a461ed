//! Canary rollouts on the control plane (`rollout.strategy: Canary`, half the parents, a
//! 3-second analysis): a good release (v2 annotates every child) serves the canary parents
//! first while the others stay on v1, then every parent; a release with a bug (no children,
//! let past the rollout gate's thresholds here) fails on its canary parents, whose deletions
//! the prune guard holds, and is rolled back: no child anywhere was deleted, every parent is
//! served by v2 again, and the same content is not tried again. Approving a canary's content
//! promotes it by hand, before its analysis ends. A release that adds a child kind (a
//! PodDisruptionBudget), which needs a new controller rather than a swap, has its canary too:
//! the canary parents read what the running controller does not watch from the API server,
//! and the new controller comes with the promotion. A `canarySelector` names the canary
//! parents by their labels.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::ResourceExt;
use kube::api::ListParams;
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path, publish};
use operator_host_tests::memcached::{
    all_reconciled, create, managed_children, memcached_resource, on_v2,
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);
const PARENTS: usize = 4;

/// Waits until exactly `count` parents' Deployments carry v2's annotation; returns which do.
async fn wait_for_parents_on_v2(ns: &TestNamespace, count: usize) -> BTreeMap<String, bool> {
    wait_for(&format!("{count} parents on v2"), TIMEOUT, || async {
        let now = on_v2(ns).await;
        Ok((now.values().filter(|on_v2| **on_v2).count() == count).then_some(now))
    })
    .await
    .unwrap()
}

/// What each test serves from: its namespace, the plugin file (v1 at first) in a directory of
/// its own, the host under `rollout` (a policy's YAML), and the parents, converged.
struct Setup {
    ns: TestNamespace,
    /// Holds the plugin directory while the test runs.
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    host: Host,
    parents: Api<kube::api::DynamicObject>,
}

impl Setup {
    async fn new(test: &str, rollout: &str) -> Setup {
        let ns = TestNamespace::new(test).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memcached.wasm");
        publish(&plugin_path("test-plugins", "memcached-v1"), &file);
        let policy = Policy::parse(
            &format!(
                "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  rollout: {rollout}\n"
            ),
            std::path::Path::new("canary-test-policy.yaml"),
        )
        .unwrap();
        let host =
            Host::start_dir_with_policy(dir.path().to_path_buf(), &[ns.name()], policy).await;
        let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
        for i in 0..PARENTS {
            let name = format!("m-{i}");
            create(&parents, &memcached_resource(), &name, json!({"size": 1})).await;
        }
        all_reconciled(&parents, PARENTS, TIMEOUT).await.unwrap();
        wait_for("every parent's children", TIMEOUT, || async {
            Ok((managed_children(&ns, "").await.0.len() == 2 * PARENTS).then_some(()))
        })
        .await
        .unwrap();
        Setup {
            ns,
            _dir: dir,
            file,
            host,
            parents,
        }
    }
}

#[tokio::test]
async fn a_canary_serves_part_of_the_parents_first_and_a_failing_one_is_rolled_back() {
    let Setup {
        ns,
        _dir,
        file,
        host,
        parents,
    } = Setup::new(
        "canary",
        "{strategy: Canary, canaryPercent: 50, analysisSeconds: 3, holdWorkloadDeletes: false, \
         maxDeletePercent: 100}",
    )
    .await;

    // The good release: half the parents first, counted apart in the metrics.
    let v2 = plugin_path("test-plugins", "memcached-v2");
    let v2_hash = operator_host::plugin::Plugin::load(&operator_host_tests::host::runtime(), &v2)
        .unwrap()
        .decl
        .content_hash;
    let of_v2 = |labels: &str| labels.contains(&format!("sha256=\"{v2_hash}\""));
    publish(&v2, &file);
    let split = wait_for_parents_on_v2(&ns, PARENTS / 2).await;
    assert_eq!(
        host.reloads("replaced"),
        0,
        "promoted before its analysis: {split:?}"
    );
    assert_eq!(
        host.counter("operator_host_canary_parents", of_v2),
        PARENTS as u64 / 2
    );
    wait_for_parents_on_v2(&ns, PARENTS).await;
    assert_eq!(host.reloads("replaced"), 1);
    assert_eq!(host.counter("operator_host_canary_parents", of_v2), 0);
    assert!(
        host.counter("operator_host_version_reconciles_total", |labels| of_v2(
            labels
        )
            && labels.contains("result=\"success\""))
            >= PARENTS as u64,
        "{}",
        host.counter("operator_host_version_reconciles_total", of_v2)
    );
    let children = managed_children(&ns, "").await.0;
    assert_eq!(children.len(), 2 * PARENTS);

    // The release with a bug: its canary parents fail (PruneHeld); rolled back.
    let rejected = host.reloads("rejected");
    publish(&plugin_path("test-plugins", "memcached-no-children"), &file);
    wait_for("the canary rolled back", TIMEOUT, || async {
        Ok((host.reloads("rejected") > rejected).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(
        host.reloads("replaced"),
        1,
        "the failing canary was promoted"
    );
    assert_eq!(
        managed_children(&ns, "").await.0,
        children,
        "a child was deleted"
    );
    assert_eq!(host.prunes().0, 0);
    // Every parent is v2's again: Reconciled=True by v2, and v2's annotation everywhere.
    all_reconciled(&parents, PARENTS, TIMEOUT).await.unwrap();
    assert!(on_v2(&ns).await.values().all(|v2| *v2));
    // Not tried again while the file holds the same content.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(host.reloads("rejected"), rejected + 1);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn approving_a_canary_promotes_it_before_its_analysis_ends() {
    let Setup {
        ns,
        _dir,
        file,
        host,
        ..
    } = Setup::new(
        "canary-promote",
        "{strategy: Canary, canaryPercent: 50, analysisSeconds: 3600}",
    )
    .await;
    let v2 = plugin_path("test-plugins", "memcached-v2");
    publish(&v2, &file);
    wait_for_parents_on_v2(&ns, PARENTS / 2).await;
    // An hour of analysis is not waited for: approving the content promotes it.
    let hash = operator_host::plugin::Plugin::load(&operator_host_tests::host::runtime(), &v2)
        .unwrap()
        .decl
        .content_hash;
    std::fs::write(format!("{}.approved", file.display()), hash).unwrap();
    wait_for_parents_on_v2(&ns, PARENTS).await;
    assert_eq!(host.reloads("replaced"), 1);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

/// The parents with a PodDisruptionBudget (the `pdb` release's extra child).
async fn parents_with_budgets(ns: &TestNamespace) -> Vec<String> {
    let params = ListParams::default().labels("operator-host.dev/plugin=memcached");
    let mut names: Vec<String> = ns
        .api::<PodDisruptionBudget>()
        .list(&params)
        .await
        .unwrap()
        .items
        .iter()
        .map(|budget| budget.name_any())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_release_that_adds_a_child_kind_serves_its_canary_first_then_restarts() {
    let Setup {
        ns,
        _dir,
        file,
        host,
        parents,
    } = Setup::new(
        "canary-kinds",
        "{strategy: Canary, canaryPercent: 50, analysisSeconds: 3}",
    )
    .await;
    let children = managed_children(&ns, "").await.0;
    publish(&plugin_path("test-plugins", "memcached-pdb"), &file);
    let canary = wait_for("the canary parents' budgets", TIMEOUT, || async {
        let budgets = parents_with_budgets(&ns).await;
        Ok((budgets.len() == PARENTS / 2).then_some(budgets))
    })
    .await
    .unwrap();
    assert_eq!(
        host.reloads("replaced"),
        0,
        "promoted before its analysis: {canary:?}"
    );
    wait_for("every parent's budget", TIMEOUT, || async {
        Ok((parents_with_budgets(&ns).await.len() == PARENTS).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(host.reloads("replaced"), 1);
    // The new controller took over the children: none recreated, every parent reconciled
    // by it, and the budgets are its own children (each parent's has its controller reference).
    all_reconciled(&parents, PARENTS, TIMEOUT).await.unwrap();
    assert_eq!(managed_children(&ns, "").await.0, children);
    for budget in ns
        .api::<PodDisruptionBudget>()
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let owner = budget.owner_references().first().cloned().unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("Memcached", Some(true))
        );
    }
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_canary_selector_names_the_canary_parents() {
    let Setup {
        ns,
        _dir,
        file,
        host,
        parents,
    } = Setup::new(
        "canary-selector",
        "{strategy: Canary, canarySelector: tier=canary, analysisSeconds: 3}",
    )
    .await;
    parents
        .patch(
            "m-2",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"tier": "canary"}}})),
        )
        .await
        .unwrap();
    publish(&plugin_path("test-plugins", "memcached-v2"), &file);
    let split = wait_for_parents_on_v2(&ns, 1).await;
    assert_eq!(split.get("m-2"), Some(&true), "{split:?}");
    assert_eq!(host.reloads("replaced"), 0);
    wait_for_parents_on_v2(&ns, PARENTS).await;
    assert_eq!(host.reloads("replaced"), 1);
    host.stop().await;
    ns.cleanup().await.unwrap();
}
