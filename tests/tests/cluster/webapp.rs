//! The WebApp example plugin against the real API server: the migration Job completes before the Deployment exists, the status is Ready only for a migrated and rolled-out spec, a rotated Secret rolls the pods without migrating again, a new image migrates again first, and the Service and budget select only the app's pods.
//!
//! Recorders watch from before the app exists, so orders are read from what the API server
//! stored (one etcd: its revisions order every write of every kind), not from polls.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{ApiResource, DynamicObject, ListParams, ObjectMeta, PostParams, WatchParams};
use kube::{Api, ResourceExt};
use operator_host_sdk::{CONTENT_HASH_ANNOTATION, job_condition_holds};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{condition, patch_spec};
use operator_host_tests::recorder::{Recorder, Seen};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);

fn resource() -> ApiResource {
    ApiResource {
        group: "webapp.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "webapp.operator-host.dev/v1alpha1".into(),
        kind: "WebApp".into(),
        plural: "webapps".into(),
    }
}

fn database_secret(url: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("shop-db".into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [(
                "DATABASE_URL".to_string(),
                ByteString(url.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Secret::default()
    }
}

/// Waits until the status of the app's current generation is `Ready`; returns the app.
async fn wait_ready(api: &Api<DynamicObject>) -> DynamicObject {
    wait_for("shop to be Ready", TIMEOUT, || async {
        let app = api.get("shop").await?;
        let ready = condition(&app, "Ready");
        Ok((ready["status"] == "True"
            && ready["observedGeneration"].as_i64() == app.metadata.generation)
            .then_some(app))
    })
    .await
    .unwrap()
}

/// The revision at which the migration Job of `uid` was first stored Complete.
fn completed(jobs: &[Seen<Job>], uid: &str) -> u64 {
    jobs.iter()
        .find(|s| {
            s.object.uid().as_deref() == Some(uid) && job_condition_holds(&s.object, "Complete")
        })
        .map(|s| s.revision)
        .expect("the migration Job completed")
}

/// The first revision at which the Deployment's pods were of `image`.
fn first_with_image(deployments: &[Seen<Deployment>], image: &str) -> u64 {
    deployments
        .iter()
        .find(|s| {
            s.object.spec.as_ref().is_some_and(|spec| {
                spec.template.spec.as_ref().unwrap().containers[0]
                    .image
                    .as_deref()
                    == Some(image)
            })
        })
        .map(|s| s.revision)
        .expect("the Deployment ran the image")
}

/// The first revision at which the app was stored Ready for `generation`.
fn first_ready(apps: &[Seen<DynamicObject>], generation: i64) -> u64 {
    apps.iter()
        .find(|s| {
            let ready = condition(&s.object, "Ready");
            ready["status"] == "True" && ready["observedGeneration"] == generation
        })
        .map(|s| s.revision)
        .expect("the app was Ready")
}

fn template_hash(deployment: &Deployment) -> String {
    deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()[CONTENT_HASH_ANNOTATION]
        .clone()
}

#[tokio::test]
async fn the_migration_of_each_image_runs_before_the_app_and_a_rotation_only_rolls_the_pods() {
    let ns = TestNamespace::new("webapp").await.unwrap();
    let host =
        Host::start_with_examples_policy(plugin_path("example-plugins", "webapp"), ns.name()).await;
    let api = Api::<DynamicObject>::namespaced_with(ns.client(), ns.name(), &resource());
    let (jobs_api, deployments_api) = (ns.api::<Job>(), ns.api::<Deployment>());
    let jobs = Recorder::start(&jobs_api, WatchParams::default()).await;
    let deployments = Recorder::start(&deployments_api, WatchParams::default()).await;
    let apps = Recorder::start(&api, WatchParams::default()).await;
    let secrets = ns.api::<Secret>();
    secrets
        .create(
            &PostParams::default(),
            &database_secret("postgres://shop@db/1"),
        )
        .await
        .unwrap();
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "webapp.operator-host.dev/v1alpha1", "kind": "WebApp",
        "metadata": {"name": "shop"},
        "spec": {"image": "registry.example/shop:1", "replicas": 2,
                 "config": {"LOG_LEVEL": "info"}, "databaseSecret": "shop-db",
                 "migration": ["/app/shop", "migrate"]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &app).await.unwrap();
    wait_ready(&api).await;

    // The Deployment exists only once the migration completed, and the app is Ready only
    // once both are done.
    let first_job = jobs_api.get("shop-migrate").await.unwrap().uid().unwrap();
    let migrated = completed(&jobs.seen(), &first_job);
    let created = deployments.seen().first().map(|s| s.revision).unwrap();
    assert!(
        migrated < created,
        "the Deployment ({created}) came before the migration ({migrated})"
    );
    assert!(first_ready(&apps.seen(), 1) > created);

    // Only the app's pods are selected by its Service and budget: none of the Job's.
    let selected = ns
        .api::<Pod>()
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/instance=shop,app.kubernetes.io/component=server"),
        )
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 2);
    assert!(selected.items.iter().all(|pod| {
        pod.owner_references()
            .iter()
            .all(|owner| owner.kind == "ReplicaSet")
    }));

    // A rotated Secret rolls the pods; the migration of this image is not run again.
    let before = template_hash(&deployments_api.get("shop").await.unwrap());
    secrets
        .replace("shop-db", &PostParams::default(), &{
            let mut rotated = secrets.get("shop-db").await.unwrap();
            rotated.data = database_secret("postgres://shop@db/2").data;
            rotated
        })
        .await
        .unwrap();
    wait_for("the rotation to roll the pods", TIMEOUT, || async {
        let hash = template_hash(&deployments_api.get("shop").await?);
        Ok((hash != before).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(
        jobs_api.get("shop-migrate").await.unwrap().uid().unwrap(),
        first_job
    );

    // A new image: migrated again first, then rolled out; Ready only after both.
    patch_spec(&api, "shop", json!({"image": "registry.example/shop:2"})).await;
    let app = wait_ready(&api).await;
    assert_eq!(app.metadata.generation, Some(2));
    let second_job = jobs_api.get("shop-migrate").await.unwrap().uid().unwrap();
    assert_ne!(
        second_job, first_job,
        "the Job of the new image is a new Job"
    );
    let migrated = completed(&jobs.seen(), &second_job);
    let rolled = first_with_image(&deployments.seen(), "registry.example/shop:2");
    assert!(
        migrated < rolled,
        "shop:2 ran ({rolled}) before its migration ({migrated})"
    );
    assert!(first_ready(&apps.seen(), 2) > rolled);
    host.stop().await;
    ns.cleanup().await.unwrap();
}
