//! `kubectl operator-host`, run by the real kubectl as a plugin on PATH, against two replicas of
//! a leader-elected host: the plugins each replica serves, and a healthy, a failing and a
//! paused parent as `failing` and `explain` show them.

use std::path::Path;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use operator_host_tests::devcluster::wait_for;
use operator_host_tests::election::{CONVERGE, Election};
use operator_host_tests::kubectl_plugin::{KubectlPlugin, rows_with};
use operator_host_tests::memcached::{create, memcached_resource, reconciled_condition};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

#[tokio::test]
async fn kubectl_shows_what_each_replica_serves_and_which_parents_fail_and_why() {
    let election = Election::new(BINARY, "kubectl-view").await;
    let ns = election.ns.name().to_string();
    let a = election.candidate("replica-a", election.v1.path()).await;
    let b = election.candidate("replica-b", election.v1.path()).await;
    let parents = &election.parents;
    let resource = memcached_resource();
    create(parents, &resource, "healthy", json!({"size": 1})).await;
    // The CRD schema takes any string; the plugin refuses an image with whitespace.
    create(
        parents,
        &resource,
        "broken",
        json!({"size": 1, "image": "not an image"}),
    )
    .await;
    create(parents, &resource, "resting", json!({"size": 1})).await;
    let paused = json!({"metadata": {"annotations": {"operator-host.dev/paused": "true"}}});
    parents
        .patch("resting", &PatchParams::default(), &Patch::Merge(&paused))
        .await
        .unwrap();
    for (name, reason) in [
        ("healthy", "ReconcileSucceeded"),
        ("broken", "InvalidSpec"),
        ("resting", "Paused"),
    ] {
        wait_for(
            &format!("{name}: Reconciled reason {reason}"),
            CONVERGE,
            || async {
                let parent = parents.get(name).await?;
                Ok((reconciled_condition(&parent)["reason"] == reason).then_some(()))
            },
        )
        .await
        .unwrap();
    }

    let kubectl = KubectlPlugin::new(Path::new(BINARY));
    let view = |args: &[&str]| kubectl.run(args);

    // Both replicas, the leader and the standby, say they serve the same build.
    let sha = &election.plugin.decl.content_hash[..12];
    let plugins = wait_for("both replicas' reports", CONVERGE, || async {
        let table = view(&["plugins", "--host-namespace", &ns]);
        let mut roles: Vec<String> = rows_with(&table, "memcached")
            .iter()
            .map(|row| row[2].to_string())
            .collect();
        roles.sort();
        Ok((roles == ["leader", "standby"]).then_some(table))
    })
    .await
    .unwrap();
    assert!(plugins.starts_with("HOST "), "{plugins}");
    for row in rows_with(&plugins, "memcached") {
        assert_eq!(row[0], format!("{ns}/operator-host"), "{plugins}");
        assert!(row[1] == "replica-a" || row[1] == "replica-b", "{plugins}");
        assert_eq!(
            &row[3..8],
            [
                "memcached",
                election.plugin.decl.version.as_str(),
                &format!("sha256:{sha}"),
                "0.3.0",
                "Serving",
            ],
            "{plugins}"
        );
    }

    // Only the broken parent fails; the paused one is not a failure.
    let failing = view(&["failing", "-n", &ns, "--host-namespace", &ns]);
    let rows = rows_with(&failing, "memcached");
    assert_eq!(rows.len(), 1, "{failing}");
    assert_eq!(
        &rows[0][..3],
        ["memcached", "broken", "InvalidSpec"],
        "{failing}"
    );
    assert!(rows[0][4].contains("not an image"), "{failing}");
    // Naming the plugin lists the same rows; the age (FAILING FOR) may have ticked between.
    let named = view(&["failing", "memcached", "-n", &ns, "--host-namespace", &ns]);
    let without_age = |text: &str| {
        let mut rows = rows_with(text, "memcached");
        for row in &mut rows {
            row.remove(3);
        }
        format!("{rows:?}")
    };
    assert_eq!(without_age(&named), without_age(&failing), "{named}");

    let explain = |name: &str| view(&["explain", &format!("memcached/{name}"), "-n", &ns]);
    let healthy = explain("healthy");
    for expected in [
        "Name:       healthy",
        "Kind:       Memcached (cache.example.com/v1alpha1)",
        "Paused:     no",
        "on replica-a (",
        "on replica-b (",
    ] {
        assert!(healthy.contains(expected), "{expected:?} in:\n{healthy}");
    }
    assert_eq!(
        rows_with(&healthy, "Reconciled")[0][..3],
        ["Reconciled", "True", "ReconcileSucceeded"],
        "{healthy}"
    );
    assert_eq!(
        rows_with(&healthy, "Deployment")[0][..2],
        ["Deployment", "healthy"],
        "{healthy}"
    );
    assert_eq!(
        rows_with(&healthy, "Service")[0][..2],
        ["Service", "healthy"],
        "{healthy}"
    );

    let broken = explain("broken");
    assert_eq!(
        rows_with(&broken, "Reconciled")[0][..3],
        ["Reconciled", "False", "InvalidSpec"],
        "{broken}"
    );
    assert!(broken.contains("Children: <none>"), "{broken}");
    assert_eq!(
        rows_with(&broken, "Warning")[0][1..3],
        ["Warning", "InvalidSpec"],
        "{broken}"
    );

    // By kind as well as by plugin.
    let resting = view(&["explain", "Memcached/resting", "-n", &ns]);
    assert!(resting.contains("Paused:     yes"), "{resting}");
    assert_eq!(
        rows_with(&resting, "Reconciled")[0][..3],
        ["Reconciled", "False", "Paused"],
        "{resting}"
    );

    // A replica that stops takes its report away.
    b.host.signal("TERM");
    wait_for(
        "replica-b's report to go",
        Duration::from_secs(30),
        || async {
            let table = view(&["plugins", "--host-namespace", &ns]);
            Ok((!table.contains("replica-b") && table.contains("replica-a")).then_some(()))
        },
    )
    .await
    .unwrap();
    drop(a);
    election.ns.cleanup().await.unwrap();
}
