//! Contract 0.2.0's apply options against the real API server: readiness barriers held until kwok completes each Job, create-only, recreate on an immutable change, in-place refusals reported, orphan on prune.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::memcached::{create, patch_spec, reconciled_condition};
use operator_host_tests::staged::{TIMEOUT, staged_host, staged_resource, wait_reason};
use serde_json::{Value, json};

/// Every `Reconciled` condition the CR's watch shows, in order.
fn record_conditions(api: &Api<DynamicObject>, name: &str) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stream = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .applied_objects();
    let sink = seen.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(cr)) = stream.next().await {
            let condition = reconciled_condition(&cr);
            let mut seen = sink.lock().unwrap();
            if !condition.is_null() && seen.last() != Some(&condition) {
                seen.push(condition);
            }
        }
    });
    seen
}

fn time_of(value: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Timestamp {
    value.expect("a timestamp").0
}

async fn completed_at(jobs: &Api<Job>, name: &str) -> Timestamp {
    let job = jobs.get(name).await.unwrap();
    time_of(job.status.as_ref().and_then(|s| s.completion_time.as_ref()))
}

async fn has_event(ns: &TestNamespace, reason: &str) -> bool {
    let events: Api<Event> = ns.api();
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason))
}

#[tokio::test]
async fn each_stage_is_applied_only_after_the_barrier_before_it_is_ready() {
    let (ns, host, api) = staged_host("barriers").await;
    let conditions = record_conditions(&api, "s");
    create(&api, &staged_resource(), "s", json!({"steps": ["a", "b"]})).await;
    wait_reason(&api, "s", "ReconcileSucceeded").await;

    let jobs: Api<Job> = ns.api();
    let config_maps: Api<ConfigMap> = ns.api();
    // Each stage was created no earlier than the Job before it completed (the API server's
    // times are to the second, so equal is allowed).
    let a_done = completed_at(&jobs, "s-step-a").await;
    let b = jobs.get("s-step-b").await.unwrap();
    assert!(
        time_of(b.metadata.creation_timestamp.as_ref()) >= a_done,
        "step b created before step a completed"
    );
    let b_done = completed_at(&jobs, "s-step-b").await;
    let done = config_maps.get("s-done").await.unwrap();
    assert!(time_of(done.metadata.creation_timestamp.as_ref()) >= b_done);
    assert_eq!(done.data.unwrap()["steps"], "a,b");

    // Meanwhile the parent said what it waited for, step by step.
    let seen = conditions.lock().unwrap().clone();
    let waits: Vec<&str> = seen
        .iter()
        .filter(|c| c["reason"] == "WaitingForReadiness")
        .filter_map(|c| c["message"].as_str())
        .collect();
    for job in ["s-step-a", "s-step-b"] {
        assert!(
            waits.iter().any(|m| m.contains(&format!(
                "Job \"{job}\" to have the condition Complete=True"
            ))),
            "no wait for {job} among {seen:#?}"
        );
    }
    assert!(
        seen.iter().all(|c| c["reason"] != "ApplyFailed"),
        "{seen:#?}"
    );
    let cr = api.get("s").await.unwrap();
    assert_eq!(cr.data["status"]["completedSteps"], 2);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn create_only_is_not_updated_recreate_replaces_and_orphan_releases() {
    let (ns, host, api) = staged_host("options").await;
    create(
        &api,
        &staged_resource(),
        "s",
        json!({"steps": ["a"], "seed": "one"}),
    )
    .await;
    wait_reason(&api, "s", "ReconcileSucceeded").await;
    let jobs: Api<Job> = ns.api();
    let config_maps: Api<ConfigMap> = ns.api();

    // create-only: a new seed does not reach the existing ConfigMap.
    patch_spec(&api, "s", json!({"seed": "two"})).await;
    wait_reason(&api, "s", "ReconcileSucceeded").await;
    let seed = config_maps.get("s-seed").await.unwrap();
    assert_eq!(seed.data.unwrap()["seed"], "one");

    // recreate: a new image is a change of the Job's immutable template.
    let before = jobs.get("s-step-a").await.unwrap().uid();
    patch_spec(&api, "s", json!({"image": "registry.k8s.io/pause:3.9"})).await;
    wait_for(
        "the Job to be recreated with the new image",
        TIMEOUT,
        || async {
            let job = jobs.get("s-step-a").await?;
            let image = job
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref()?.containers[0].image.clone());
            Ok(
                (job.uid() != before && image.as_deref() == Some("registry.k8s.io/pause:3.9"))
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap();
    wait_reason(&api, "s", "ReconcileSucceeded").await;
    assert!(has_event(&ns, "Recreating").await);

    // orphan: no longer returned, the ConfigMap stays, released from the host.
    let kept_uid = config_maps.get("s-kept").await.unwrap().uid();
    patch_spec(&api, "s", json!({"keep": false})).await;
    let kept = wait_for("the kept ConfigMap to be released", TIMEOUT, || async {
        let kept = config_maps.get("s-kept").await?;
        Ok((!kept.labels().contains_key("app.kubernetes.io/managed-by")).then_some(kept))
    })
    .await
    .unwrap();
    assert_eq!(kept.uid(), kept_uid);
    assert!(kept.owner_references().is_empty(), "{kept:?}");
    assert!(
        kept.labels()
            .keys()
            .all(|k| !k.starts_with("operator-host.dev/")),
        "{kept:?}"
    );
    assert!(
        !kept
            .annotations()
            .contains_key("operator-host.dev/on-prune")
    );
    assert_eq!(kept.data.as_ref().unwrap()["kept"], "yes");
    assert!(has_event(&ns, "Orphaned").await);

    // Deleting the parent takes its children (the garbage collector), not the orphan.
    api.delete("s", &DeleteParams::default()).await.unwrap();
    wait_for("the owned children to be collected", TIMEOUT, || async {
        Ok(config_maps.get_opt("s-seed").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(config_maps.get("s-kept").await.unwrap().uid(), kept_uid);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_immutable_change_in_place_is_reported_and_not_retried() {
    let (ns, host, api) = staged_host("immutable").await;
    create(
        &api,
        &staged_resource(),
        "s",
        json!({"pinnedImage": "registry.k8s.io/pause:3.10"}),
    )
    .await;
    wait_reason(&api, "s", "ReconcileSucceeded").await;
    let jobs: Api<Job> = ns.api();
    // Once complete, the Job changes no more: nothing but a retry could reconcile again.
    wait_for("the pinned Job to complete", TIMEOUT, || async {
        let job = jobs.get("s-pinned").await?;
        Ok(job
            .status
            .and_then(|s| s.completion_time)
            .map(|_| job.metadata.uid))
    })
    .await
    .unwrap();
    let before = jobs.get("s-pinned").await.unwrap().uid();

    patch_spec(
        &api,
        "s",
        json!({"pinnedImage": "registry.k8s.io/pause:3.9"}),
    )
    .await;
    let condition = wait_reason(&api, "s", "ImmutableField").await;
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains("Job \"s-pinned\""), "{message}");
    assert!(message.contains("recreate"), "{message}");
    // Not retried on a timer: only a change of the parent or the Job calls again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let refused = host.reconciles("ImmutableField");
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(host.reconciles("ImmutableField"), refused);
    assert_eq!(jobs.get("s-pinned").await.unwrap().uid(), before);

    // Going back to what the Job holds reconciles again.
    patch_spec(
        &api,
        "s",
        json!({"pinnedImage": "registry.k8s.io/pause:3.10"}),
    )
    .await;
    wait_reason(&api, "s", "ReconcileSucceeded").await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}
