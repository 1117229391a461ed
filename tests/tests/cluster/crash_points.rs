//! The crash campaign: the host aborts right after each write step (its crash points), is
//! started again, and the oracle checks that the live state becomes the plugin's fixed point
//! within a bound, that children which existed at the crash kept their UIDs, that nothing the
//! host does not own was touched, and that the host then stays quiet (no writes through the
//! proxy for a quiet window).
//!
//! `OPERATOR_HOST_CAMPAIGN=long` also crashes at every later apply of each plugin (not just
//! the first and the last).

use kube::ResourceExt;
use kube::api::DeleteParams;
use operator_host_tests::campaign::{BOUND, Scenario};
use operator_host_tests::hostile::attack_resource;
use operator_host_tests::memcached::memcached_resource;
use operator_host_tests::mysql;
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

/// The apply counts to crash after, for a plugin that applies `children` objects per parent:
/// the first and the last (every one with `OPERATOR_HOST_CAMPAIGN=long`).
fn apply_steps(children: usize) -> Vec<String> {
    let long = std::env::var("OPERATOR_HOST_CAMPAIGN").as_deref() == Ok("long");
    let mut counts: Vec<usize> = if long {
        (1..=children).collect()
    } else {
        vec![1, children]
    };
    counts.dedup();
    counts.into_iter().map(|n| format!("apply:{n}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_converges_after_a_crash_at_every_write_step() {
    for step in apply_steps(2).into_iter().chain(["status".into()]) {
        let scenario = Scenario::new(
            BINARY,
            "crash-memcached",
            "plugins",
            "memcached",
            memcached_resource(),
        )
        .await;
        scenario.create("cache", json!({"size": 2})).await;
        let took = scenario.crash_and_recover(&step, "cache").await;
        eprintln!("memcached, crash after {step}: converged {took:?} after the restart");
        scenario.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_converges_after_a_crash_right_after_its_crd_is_installed() {
    let scenario = Scenario::new(
        BINARY,
        "crash-crd",
        "plugins",
        "memcached",
        memcached_resource(),
    )
    .await;
    scenario.create("cache", json!({"size": 1})).await;
    let took = scenario.crash_and_recover("crd-install", "cache").await;
    eprintln!("memcached, crash after crd-install: converged {took:?} after the restart");
    scenario.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_converges_after_a_crash_at_every_write_step() {
    // ServiceAccount, ConfigMap, two Services, StatefulSet, the router Deployment, PDB.
    let children = 7;
    for step in apply_steps(children).into_iter().chain(["status".into()]) {
        let scenario =
            Scenario::new(BINARY, "crash-mysql", "plugins", "mysql", mysql::resource()).await;
        mysql::create_root_secret(&scenario.ns).await;
        scenario
            .create("db", json!({"secretName": mysql::ROOT_SECRET}))
            .await;
        let took = scenario.crash_and_recover(&step, "db").await;
        eprintln!("mysql, crash after {step}: converged {took:?} after the restart");
        scenario.cleanup().await;
    }
}

/// The hostile plugin's finalizer and prune steps: `none` makes a ConfigMap, `idle` none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizer_and_prune_steps_converge_after_a_crash() {
    // Adding the finalizer.
    let scenario = Scenario::new(
        BINARY,
        "crash-finalizer",
        "test-plugins",
        "hostile",
        attack_resource(),
    )
    .await;
    scenario.create("a", json!({"attack": "none"})).await;
    let took = scenario.crash_and_recover("finalizer-add", "a").await;
    eprintln!("hostile, crash after finalizer-add: converged {took:?} after the restart");
    let finalizers = scenario
        .parents
        .get("a")
        .await
        .unwrap()
        .finalizers()
        .to_vec();
    assert!(finalizers.contains(&operator_host::controller::FINALIZER.to_string()));

    // Pruning the ConfigMap no longer desired.
    scenario.patch_spec("a", json!({"attack": "idle"})).await;
    let took = scenario.crash_and_recover("prune", "a").await;
    eprintln!("hostile, crash after prune: converged {took:?} after the restart");

    // Removing the finalizer: the parent and its children are gone after the restart.
    scenario.patch_spec("a", json!({"attack": "none"})).await;
    let host = scenario.host(None);
    scenario.oracle().converges("a", BOUND).await.unwrap();
    host.kill().await;
    let uid = scenario.parents.get("a").await.unwrap().uid().unwrap();
    scenario
        .parents
        .delete("a", &DeleteParams::background())
        .await
        .unwrap();
    let mut crashing = scenario.host(Some("finalizer-remove"));
    crashing.crashed(BOUND).await;
    let host = scenario.host(None);
    let took = scenario.oracle().gone("a", &uid, BOUND).await.unwrap();
    eprintln!("hostile, crash after finalizer-remove: gone {took:?} after the restart");
    scenario.assert_quiet(&host, "finalizer-remove").await;
    host.kill().await;
    scenario.cleanup().await;
}
