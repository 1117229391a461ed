//! Hot reload against the real API server: swap v1 -> v2 under 100 parents, a corrupt file,
//! removing a plugin, and swapping the plugin's language.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{
    VARIANT_ANNOTATION, create, managed_children, memcached_resource, patch_spec,
    reconciled_condition,
};
use serde_json::json;

/// Replaces `path` the way `cp new.wasm path` does: truncate and write in place.
fn copy_over(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
}

/// A namespace of its own and a host serving it from a plugin directory whose `memcached.wasm`
/// (the returned path) starts as a copy of `plugin`; the directory lives as long as its guard.
async fn serving_from_a_directory(
    test: &str,
    plugin: &Path,
) -> (
    TestNamespace,
    tempfile::TempDir,
    PathBuf,
    Host,
    Api<DynamicObject>,
) {
    let ns = TestNamespace::new(test).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("memcached.wasm");
    copy_over(plugin, &live);
    let host = Host::start_dir(dir.path().to_path_buf(), &[ns.name()]).await;
    let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    (ns, dir, live, host, api)
}

/// The first 12 hex digits of the SHA-256 of `path`: how the `Reconciled` condition names the
/// plugin content that wrote it.
fn short_digest(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(std::fs::read(path).unwrap())[..6])
}

#[tokio::test]
async fn replacing_the_plugin_file_converges_every_parent_to_the_new_version_and_a_corrupt_file_changes_nothing()
 {
    const N: usize = 100;
    let (ns, _dir, live, host, api) =
        serving_from_a_directory("hot-swap", &plugin_path("test-plugins", "memcached-v1")).await;

    let started = Instant::now();
    for i in 0..N {
        create(
            &api,
            &memcached_resource(),
            &format!("cache-{i}"),
            json!({"size": 0}),
        )
        .await;
    }
    let v1_children = wait_for(
        "100 sets of v1 children",
        Duration::from_secs(120),
        || async {
            let (uids, v2) = managed_children(&ns, VARIANT_ANNOTATION).await;
            assert_eq!(v2, 0, "v1 does not annotate children");
            Ok((uids.len() == 2 * N).then_some(uids))
        },
    )
    .await
    .unwrap();
    let converged_from_scratch = started.elapsed();

    let swapped = Instant::now();
    copy_over(&plugin_path("test-plugins", "memcached-v2"), &live);
    let v2_children = wait_for(
        "100 sets of v2 children",
        Duration::from_secs(120),
        || async {
            let (uids, v2) = managed_children(&ns, VARIANT_ANNOTATION).await;
            Ok((v2 == 2 * N).then_some(uids))
        },
    )
    .await
    .unwrap();
    let converged_after_swap = swapped.elapsed();
    println!(
        "N = {N}: converged from scratch in {converged_from_scratch:?}, \
         re-converged to v2 in {converged_after_swap:?} after the file was replaced"
    );
    assert_eq!(
        v1_children, v2_children,
        "the swap updated children in place: none was deleted and recreated"
    );
    let v2_digest = short_digest(&live);
    wait_for(
        "every parent to say v2 produced its state",
        Duration::from_secs(60),
        || async {
            let parents = api.list(&ListParams::default()).await?;
            Ok(parents
                .iter()
                .all(|cr| {
                    reconciled_condition(cr)["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&v2_digest))
                })
                .then_some(()))
        },
    )
    .await
    .unwrap();
    assert_eq!(
        host.reconciles_failed(),
        0,
        "no reconcile failed across the swap"
    );

    // A corrupt file: v2 keeps serving, a new parent is reconciled by v2. It is renamed into
    // place, so that no scan sees it half written: the in-place copies above may each have
    // had a partial file rejected.
    let rejected_before = host.reloads("rejected");
    let corrupt = live.with_extension("tmp");
    std::fs::write(&corrupt, b"\0asm\x0d\0\x01\0 truncated garbage").unwrap();
    std::fs::rename(&corrupt, &live).unwrap();
    wait_for(
        "the corrupt file to be rejected",
        Duration::from_secs(10),
        || async { Ok((host.reloads("rejected") > rejected_before).then_some(())) },
    )
    .await
    .unwrap();
    create(
        &api,
        &memcached_resource(),
        "after-corruption",
        json!({"size": 0}),
    )
    .await;
    let deployments: Api<Deployment> = ns.api();
    let deployment = wait_for(
        "the new parent's Deployment",
        Duration::from_secs(30),
        || async { Ok(deployments.get_opt("after-corruption").await?) },
    )
    .await
    .unwrap();
    assert_eq!(
        deployment
            .annotations()
            .get(VARIANT_ANNOTATION)
            .map(String::as_str),
        Some("v2")
    );
    assert_eq!(
        host.reloads("rejected"),
        rejected_before + 1,
        "the corrupt content is rejected once, not again on later scans"
    );
    assert_eq!(host.reloads("replaced"), 1);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn removing_the_plugin_file_stops_its_controller_and_keeps_the_workloads() {
    let (ns, _dir, live, host, api) =
        serving_from_a_directory("remove-plugin", &plugin_path("plugins", "memcached")).await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "kept", json!({"size": 1})).await;
    wait_for("the Deployment", Duration::from_secs(30), || async {
        Ok(deployments.get_opt("kept").await?)
    })
    .await
    .unwrap();

    std::fs::remove_file(&live).unwrap();
    wait_for(
        "the plugin to be removed",
        Duration::from_secs(10),
        || async { Ok((host.reloads("removed") == 1).then_some(())) },
    )
    .await
    .unwrap();
    create(&api, &memcached_resource(), "unserved", json!({"size": 1})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        deployments.get_opt("unserved").await.unwrap().is_none(),
        "no controller serves Memcached any more"
    );
    assert!(
        deployments.get_opt("kept").await.unwrap().is_some(),
        "removing a plugin never deletes what it created"
    );

    // Putting the file back serves the kind again, and catches up on what was missed.
    copy_over(&plugin_path("plugins", "memcached"), &live);
    wait_for(
        "the missed parent's Deployment",
        Duration::from_secs(30),
        || async { Ok(deployments.get_opt("unserved").await?) },
    )
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

/// The Memcached operator swapped from Rust to Python to JavaScript under a running parent: each
/// language takes over (the parent's status names its content), applies no child (they desire
/// the same children, so both applies are skipped), and then serves a change of the spec.
#[tokio::test]
async fn swapping_the_plugins_language_under_a_parent_writes_no_child_and_keeps_serving() {
    let (ns, _dir, live, host, api) =
        serving_from_a_directory("swap-language", &plugin_path("plugins", "memcached")).await;
    let deployments: Api<Deployment> = ns.api();
    create(&api, &memcached_resource(), "cache", json!({"size": 1})).await;
    let mut size: i32 = 1;
    for (language, next) in [
        ("Python", plugin_path("plugins-python", "memcached")),
        ("JavaScript", plugin_path("plugins-js", "memcached")),
    ] {
        // Settled: the current size rolled out and reported, so no write is still due.
        wait_for(
            "the parent to report its size ready",
            Duration::from_secs(60),
            || async {
                let cr = api.get("cache").await?;
                let status = &cr.data["status"];
                let settled = status["readyReplicas"] == size
                    && status["observedGeneration"].as_i64() == cr.metadata.generation
                    && reconciled_condition(&cr)["status"] == "True";
                Ok(settled.then_some(()))
            },
        )
        .await
        .unwrap();
        let (applied, skipped) = host.applies();

        copy_over(&next, &live);
        let digest = short_digest(&next);
        wait_for(
            &format!("the {language} plugin to reconcile the parent"),
            Duration::from_secs(90),
            || async {
                let message = reconciled_condition(&api.get("cache").await?)["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                Ok(message.contains(&digest).then_some(()))
            },
        )
        .await
        .unwrap();
        let (applied_after, skipped_after) = host.applies();
        assert_eq!(
            applied_after, applied,
            "{language}: the swap applied a child that was already as desired"
        );
        assert!(
            skipped_after >= skipped + 2,
            "{language}: both applies skipped"
        );

        size += 1;
        patch_spec(&api, "cache", json!({"size": size})).await;
    }
    wait_for("the last size", Duration::from_secs(60), || async {
        let deployment = deployments.get_opt("cache").await?;
        Ok(deployment.filter(|d| d.spec.as_ref().and_then(|s| s.replicas) == Some(size)))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_swaps_leave_the_host_no_bigger_than_a_fresh_one() {
    let run = operator_host_tests::swap_memory::measure(
        Path::new(env!("CARGO_BIN_EXE_operator-host-faulty")),
        "swap-memory",
        [
            &plugin_path("test-plugins", "memcached-v1"),
            &plugin_path("test-plugins", "memcached-v2"),
        ],
        10,
        30,
        5,
        false,
    )
    .await;
    println!("30 swaps: {run:?}, {:.2}x a fresh host", run.ratio());
    assert!(
        run.ratio() <= 1.1,
        "after 30 swaps the host holds {:.1} MiB, a fresh host serving the last build {:.1} MiB \
         ({:.2}x; samples by swap: {:?})",
        run.after,
        run.fresh,
        run.ratio(),
        run.samples
    );
}
