//! A paused parent (`operator-host.dev/paused: "true"`) is not written: a spec change reaches
//! no child while the annotation is on, the status says `Paused`, and removing it resumes.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{create, memcached_resource, reconciled_condition};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
/// How long a paused parent is watched for writes that must not come.
const QUIET: Duration = Duration::from_secs(5);
const NAME: &str = "paused";

async fn annotate(api: &Api<DynamicObject>, value: Value) {
    let patch = json!({"metadata": {"annotations": {"operator-host.dev/paused": value}}});
    api.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn replicas(deployments: &Api<Deployment>) -> Option<i32> {
    let deployment = deployments.get_opt(NAME).await.unwrap()?;
    deployment.spec.and_then(|spec| spec.replicas)
}

#[tokio::test]
async fn a_paused_parent_gets_no_writes_until_the_annotation_goes() {
    let ns = TestNamespace::new("pause").await.unwrap();
    let _host = Host::start(plugin_path("plugins", "memcached"), ns.name()).await;
    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    create(&parents, &memcached_resource(), NAME, json!({"size": 1})).await;
    wait_for("the Deployment with 1 replica", TIMEOUT, || async {
        Ok((replicas(&deployments).await == Some(1)).then_some(()))
    })
    .await
    .unwrap();

    annotate(&parents, json!("true")).await;
    let paused = wait_for("Reconciled=False reason Paused", TIMEOUT, || async {
        let parent = parents.get(NAME).await?;
        Ok((reconciled_condition(&parent)["reason"] == "Paused").then_some(parent))
    })
    .await
    .unwrap();
    assert_eq!(reconciled_condition(&paused)["status"], "False");
    let deployment_version = deployments.get(NAME).await.unwrap().resource_version();
    parents
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap();
    let parent_version = parents.get(NAME).await.unwrap().resource_version();
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        deployments.get(NAME).await.unwrap().resource_version(),
        deployment_version,
        "the Deployment of a paused parent was written"
    );
    assert_eq!(
        parents.get(NAME).await.unwrap().resource_version(),
        parent_version,
        "the paused parent was written again"
    );

    // Any other value resumes, as removing the annotation does.
    annotate(&parents, json!("false")).await;
    wait_for("the Deployment with 3 replicas", TIMEOUT, || async {
        Ok((replicas(&deployments).await == Some(3)).then_some(()))
    })
    .await
    .unwrap();
    wait_for("Reconciled=True again", TIMEOUT, || async {
        let parent = parents.get(NAME).await?;
        Ok((reconciled_condition(&parent)["status"] == "True").then_some(()))
    })
    .await
    .unwrap();
    ns.cleanup().await.unwrap();
}
