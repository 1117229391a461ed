//! The host under exactly the ClusterRole `operator-host rbac` prints, as a ServiceAccount.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use operator_host::plugin::Plugin;
use operator_host::policy::Policy;
use operator_host::rbac;
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path, runtime};
use operator_host_tests::memcached::{
    create, memcached_resource, reconciled_condition, wait_for_first_reconcile, wait_for_reason,
};
use operator_host_tests::service_account;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The ClusterRole `operator-host rbac --install-crds --name NAME` prints for `plugin`.
fn printed_role(plugin: &Plugin, name: &str) -> ClusterRole {
    let options = rbac::Options {
        name: name.to_string(),
        install_crds: true,
        lease: None,
        plugins_from_cluster: None,
        // The in-process host reports nothing and serves no webhooks.
        replica_report: None,
        webhooks: None,
    };
    let printed = rbac::to_yaml(
        &rbac::cluster_role(
            std::slice::from_ref(&plugin.decl),
            &Policy::default(),
            &options,
        ),
        &options,
        std::slice::from_ref(&plugin.decl),
    )
    .unwrap();
    serde_yaml::from_str(&printed).unwrap()
}

/// A host serving `plugin` in `ns` with the credentials of `client`, and its plugin directory.
async fn serve_as(
    client: Client,
    plugin: &Plugin,
    ns: &TestNamespace,
) -> (tempfile::TempDir, Host) {
    let plugins = tempfile::tempdir().unwrap();
    let file = plugin.path.file_name().expect("a plugin file");
    std::fs::copy(&plugin.path, plugins.path().join(file)).unwrap();
    let host = Host::start_as(
        client,
        plugins.path().to_path_buf(),
        &[ns.name()],
        Policy::default(),
    )
    .await;
    (plugins, host)
}

#[tokio::test]
async fn the_host_works_under_exactly_the_role_that_rbac_prints() {
    let ns = TestNamespace::new("rbac-least-privilege").await.unwrap();
    let admin = ns.client();
    let plugin = Plugin::load(&runtime(), &plugin_path("plugins", "memcached")).unwrap();
    // What `operator-host rbac --install-crds --name NAME memcached.wasm` prints, applied as is;
    // once the binding takes effect, the account can do what the role allows and nothing else.
    let role_name = format!("operator-host-{}", ns.name());
    let restricted = service_account::bind(&ns, &printed_role(&plugin, &role_name), &[])
        .await
        .client;
    let secrets: Api<Secret> = Api::namespaced(restricted.clone(), ns.name());
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("the account may read Secrets, which the role does not grant: {other:?}"),
    }
    // It may change only the plugin's own CRD: authorization comes before the object is
    // looked up, so another name (existing or not) is forbidden, not missing.
    let crds: Api<CustomResourceDefinition> = Api::all(restricted.clone());
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
    match crds
        .patch("widgets.example.com", &PatchParams::default(), &relabel)
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("the account may patch a CRD of no plugin it serves: {other:?}"),
    }

    // The host with that kubeconfig: installs the CRD, watches, applies, writes status and
    // events, all as the ServiceAccount.
    let (_plugins, host) = serve_as(restricted, &plugin, &ns).await;
    let resource = memcached_resource();
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns.name(), &resource);
    create(&memcacheds, &resource, "cache", json!({"size": 2})).await;
    wait_for_first_reconcile(&memcacheds, "cache", TIMEOUT)
        .await
        .unwrap();
    let admin_deployments: Api<Deployment> = ns.api();
    let deployment = admin_deployments.get("cache").await.unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(2));
    ns.api::<Service>().get("cache").await.unwrap();

    // A spec change reaches the Deployment through the account's watch and patch.
    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap();
    wait_for("the Deployment to scale to 3", TIMEOUT, || async {
        let replicas = admin_deployments
            .get("cache")
            .await?
            .spec
            .and_then(|s| s.replicas);
        Ok((replicas == Some(3)).then_some(()))
    })
    .await
    .unwrap();
    ns.wait_for_event("an event published by the host", |e| {
        e.involved_object.name.as_deref() == Some("cache")
    })
    .await;
    assert_eq!(
        host.reconciles_failed(),
        0,
        "a reconcile failed under the computed role (see the log for the forbidden request)"
    );

    host.stop().await;
    service_account::delete_cluster_role(&admin, &role_name).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_child_kind_the_host_may_not_watch_recovers_once_the_permission_is_granted() {
    let ns = TestNamespace::new("rbac-granted-later").await.unwrap();
    let admin = ns.client();
    let plugin = Plugin::load(&runtime(), &plugin_path("plugins", "memcached")).unwrap();
    let role_name = format!("operator-host-{}", ns.name());
    let full = printed_role(&plugin, &role_name);
    // The printed role without its Service rule: the host cannot list Services.
    let mut partial = full.clone();
    for rule in partial.rules.iter_mut().flatten() {
        if let Some(resources) = rule.resources.as_mut() {
            resources.retain(|r| r != "services");
        }
    }
    partial
        .rules
        .get_or_insert_default()
        .retain(|r| r.resources.as_ref().is_none_or(|rs| !rs.is_empty()));
    assert_ne!(
        partial.rules, full.rules,
        "the role had a Service rule to take away"
    );
    let restricted = service_account::bind(&ns, &partial, &[]).await.client;
    let (_plugins, host) = serve_as(restricted, &plugin, &ns).await;
    let resource = memcached_resource();
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns.name(), &resource);
    create(&memcacheds, &resource, "cache", json!({"size": 1})).await;
    let condition = wait_for_reason(&memcacheds, "cache", "ChildKindUnavailable", TIMEOUT).await;
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Service") && message.contains("403"),
        "{condition}"
    );
    let (ready, body) = host.metrics.readiness();
    assert!(!ready && body.contains("v1/Service"), "{body}");
    // Granted: the host recovers by itself, without a restart.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .patch(
            &role_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": full.rules})),
        )
        .await
        .unwrap();
    wait_for(
        "Reconciled=True once Services may be listed",
        TIMEOUT,
        || async {
            let cr = memcacheds.get("cache").await?;
            Ok((reconciled_condition(&cr)["status"] == "True").then_some(()))
        },
    )
    .await
    .unwrap();
    ns.api::<Service>().get("cache").await.unwrap();
    wait_for("/readyz to be ready again", TIMEOUT, || async {
        Ok(host.metrics.readiness().0.then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    service_account::delete_cluster_role(&admin, &role_name).await;
    ns.cleanup().await.unwrap();
}
