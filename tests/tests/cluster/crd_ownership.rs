//! `run --install-crds` against the real API server: the host creates a plugin's CRD when it
//! is absent, marked for that plugin, updates only a CRD it marked for the same plugin, and
//! leaves any other CRD of that name alone (the plugin is then not served).
//!
//! The host-level tests use the squatter test plugin, whose CRD no other test touches; they
//! take turns ([`SQUAT_CRD_TURN`]) since they all install, mark and delete that one CRD. The
//! rules themselves are also checked on a CRD of the test's own, by calling `install_crd`.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionSpec,
};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use operator_host::controller::install_crd;
use operator_host::plugin::Plugin;
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{TestNamespace, wait_for, wait_for_crd_established};
use operator_host_tests::host::{Host, plugin_path, runtime};
use operator_host_tests::memcached::create;
use operator_host_tests::squatter::{SQUAT_CRD, squat_resource};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a plugin that is not served is given to (wrongly) create children anyway.
const GRACE: Duration = Duration::from_secs(3);
/// The annotation the host marks its CRDs with (`controller::crd::INSTALLED_FOR_ANNOTATION`).
const INSTALLED_FOR: &str = "operator-host.dev/installed-for";
/// What a CRD "installed by hand" says where the plugin's CRD says something else.
const BY_HAND: &str = "installed by hand, not by operator-host";

/// Held by every test that touches [`SQUAT_CRD`].
static SQUAT_CRD_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn squatter() -> Plugin {
    Plugin::load(&runtime(), &plugin_path("test-plugins", "squatter")).unwrap()
}

/// A plugin directory holding only the squatter plugin.
fn squatter_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_path("test-plugins", "squatter"),
        dir.path().join("squatter.wasm"),
    )
    .unwrap();
    dir
}

fn crd_api(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

/// Deletes the CRD `name` if it exists and waits until it is gone.
async fn delete_crd(crds: &Api<CustomResourceDefinition>, name: &str) {
    match crds.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(error) => panic!("deleting the CRD {name}: {error}"),
    }
    wait_for(&format!("the CRD {name} to be gone"), TIMEOUT, || async {
        Ok(crds.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

async fn wait_established(crds: &Api<CustomResourceDefinition>, name: &str) {
    wait_for_crd_established(crds, name, TIMEOUT).await.unwrap();
}

/// Replaces the Squat CRD by [`by_hand`]'s, as another operator would have installed it.
async fn install_by_hand(crds: &Api<CustomResourceDefinition>, plugin: &Plugin) {
    delete_crd(crds, SQUAT_CRD).await;
    crds.create(&PostParams::default(), &by_hand(plugin))
        .await
        .unwrap();
    wait_established(crds, SQUAT_CRD).await;
}

/// The plugin's CRD as another operator would have installed it: no annotation, and a
/// schema description of its own (which an update by the host would overwrite).
fn by_hand(plugin: &Plugin) -> CustomResourceDefinition {
    let mut crd = plugin.decl.crd.clone();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema.description = Some(BY_HAND.into());
        }
    }
    crd
}

fn description(crd: &CustomResourceDefinition) -> Option<String> {
    crd.spec.versions[0]
        .schema
        .as_ref()?
        .open_api_v3_schema
        .as_ref()?
        .description
        .clone()
}

fn installed_for(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.metadata
        .annotations
        .as_ref()?
        .get(INSTALLED_FOR)
        .map(String::as_str)
}

/// Sets (or with `None` removes) the annotation, as `kubectl annotate` would.
async fn annotate(crds: &Api<CustomResourceDefinition>, name: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {INSTALLED_FOR: value}}});
    crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The resourceVersion and spec of the CRD `name`: equal before and after means untouched.
async fn snapshot(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
) -> (Option<String>, CustomResourceDefinitionSpec) {
    let crd = crds.get(name).await.unwrap();
    (crd.metadata.resource_version, crd.spec)
}

/// Waits for the ConfigMap the squatter plugin makes for the `Squat` `name`.
async fn wait_for_child(ns: &TestNamespace, name: &str) {
    let config_maps: Api<ConfigMap> = ns.api();
    wait_for(
        &format!("the ConfigMap of Squat {name}"),
        TIMEOUT,
        || async { Ok(config_maps.get_opt(name).await?.map(|_| ())) },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_crd_the_host_did_not_install_is_left_alone_and_its_plugin_is_not_served() {
    let _turn = SQUAT_CRD_TURN.lock().await;
    let ns = TestNamespace::new("crd-not-ours").await.unwrap();
    let client = ns.client();
    let crds = crd_api(&client);
    let plugin = squatter();
    install_by_hand(&crds, &plugin).await;
    let before = snapshot(&crds, SQUAT_CRD).await;
    let squats: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &squat_resource());
    create(&squats, &squat_resource(), "first", json!({"value": "a"})).await;

    // Unannotated: refused, with what to do.
    let plugins = squatter_dir();
    let host = Host::start_dir(plugins.path().to_path_buf(), &[ns.name()]).await;
    assert!(host.reloads("rejected") >= 1, "{}", host.metrics.encode());
    assert_eq!(host.serving_tier("squatter"), None, "the plugin is served");
    assert!(host.is_running());
    let refused = install_crd(&client, &plugin).await.unwrap_err().to_string();
    assert_eq!(
        refused,
        format!(
            "the CRD {SQUAT_CRD} exists and was not installed by operator-host for plugin \
             squatter (annotation {INSTALLED_FOR} is absent); operator-host will not take over a \
             CRD it did not install: delete the CRD, or mark it for this plugin with kubectl \
             annotate crd {SQUAT_CRD} {INSTALLED_FOR}=squatter, or run without --install-crds"
        )
    );
    tokio::time::sleep(GRACE).await;
    let config_maps: Api<ConfigMap> = ns.api();
    assert!(
        config_maps.get_opt("first").await.unwrap().is_none(),
        "a plugin that is not served made a child"
    );
    assert_eq!(
        snapshot(&crds, SQUAT_CRD).await,
        before,
        "the CRD was changed"
    );
    host.stop().await;

    // Annotated for another plugin: refused too.
    annotate(&crds, SQUAT_CRD, Some("someone-else")).await;
    let before = snapshot(&crds, SQUAT_CRD).await;
    let host = Host::start_dir(plugins.path().to_path_buf(), &[ns.name()]).await;
    assert!(host.reloads("rejected") >= 1, "{}", host.metrics.encode());
    assert_eq!(host.serving_tier("squatter"), None, "the plugin is served");
    let refused = install_crd(&client, &plugin).await.unwrap_err().to_string();
    assert!(
        refused.contains(&format!("(it is annotated {INSTALLED_FOR}=someone-else)"))
            && refused.contains(&format!(
                "kubectl annotate --overwrite crd {SQUAT_CRD} {INSTALLED_FOR}=squatter"
            )),
        "{refused}"
    );
    tokio::time::sleep(GRACE).await;
    assert!(config_maps.get_opt("first").await.unwrap().is_none());
    assert_eq!(
        snapshot(&crds, SQUAT_CRD).await,
        before,
        "the CRD was changed"
    );
    let crd = crds.get(SQUAT_CRD).await.unwrap();
    assert_eq!(installed_for(&crd), Some("someone-else"));
    host.stop().await;

    // Handed over as the refusal says: the host updates it and serves the plugin.
    annotate(&crds, SQUAT_CRD, Some("squatter")).await;
    let host = Host::start_dir(plugins.path().to_path_buf(), &[ns.name()]).await;
    assert_eq!(host.reloads("rejected"), 0, "{}", host.metrics.encode());
    assert!(
        host.serving_tier("squatter").is_some(),
        "the plugin is not served"
    );
    wait_for_child(&ns, "first").await;
    let crd = crds.get(SQUAT_CRD).await.unwrap();
    assert_eq!(installed_for(&crd), Some("squatter"));
    assert_eq!(
        description(&crd),
        description(&plugin.decl.crd),
        "the host did not update the CRD handed over to it"
    );
    host.stop().await;

    delete_crd(&crds, SQUAT_CRD).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_host_creates_an_absent_crd_marked_for_its_plugin_and_updates_it_on_restart() {
    let _turn = SQUAT_CRD_TURN.lock().await;
    let ns = TestNamespace::new("crd-created").await.unwrap();
    let client = ns.client();
    let crds = crd_api(&client);
    let plugin = squatter();
    delete_crd(&crds, SQUAT_CRD).await;

    let host = Host::start(plugin_path("test-plugins", "squatter"), ns.name()).await;
    let crd = crds.get(SQUAT_CRD).await.unwrap();
    assert_eq!(installed_for(&crd), Some("squatter"));
    assert_eq!(crd.spec.group, plugin.decl.crd.spec.group);
    assert_eq!(description(&crd), description(&plugin.decl.crd));
    let squats: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &squat_resource());
    create(&squats, &squat_resource(), "first", json!({"value": "a"})).await;
    wait_for_child(&ns, "first").await;
    host.stop().await;

    // Changed meanwhile (by hand): a restart puts the plugin's CRD back, still marked.
    // A merge patch replaces the whole list of versions.
    let patch = json!({"spec": {"versions": by_hand(&plugin).spec.versions}});
    crds.patch(SQUAT_CRD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        description(&crds.get(SQUAT_CRD).await.unwrap()).as_deref(),
        Some(BY_HAND)
    );
    let changed = snapshot(&crds, SQUAT_CRD).await;
    let host = Host::start(plugin_path("test-plugins", "squatter"), ns.name()).await;
    let crd = crds.get(SQUAT_CRD).await.unwrap();
    assert_eq!(installed_for(&crd), Some("squatter"));
    assert_eq!(description(&crd), description(&plugin.decl.crd));
    assert_ne!(crd.metadata.resource_version, changed.0);
    create(&squats, &squat_resource(), "second", json!({"value": "b"})).await;
    wait_for_child(&ns, "second").await;
    host.stop().await;

    delete_crd(&crds, SQUAT_CRD).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn without_install_crds_the_host_writes_no_crd() {
    let _turn = SQUAT_CRD_TURN.lock().await;
    let ns = TestNamespace::new("crd-no-install").await.unwrap();
    let client = ns.client();
    let crds = crd_api(&client);
    let plugin = squatter();
    install_by_hand(&crds, &plugin).await;
    let before = snapshot(&crds, SQUAT_CRD).await;

    let plugins = squatter_dir();
    let host = Host::start_as_with_install_crds(
        client.clone(),
        plugins.path().to_path_buf(),
        &[ns.name()],
        Policy::default(),
        false,
    )
    .await;
    assert_eq!(host.reloads("rejected"), 0, "{}", host.metrics.encode());
    assert!(
        host.serving_tier("squatter").is_some(),
        "the plugin is not served"
    );
    let squats: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &squat_resource());
    create(&squats, &squat_resource(), "first", json!({"value": "a"})).await;
    wait_for_child(&ns, "first").await;
    assert_eq!(
        snapshot(&crds, SQUAT_CRD).await,
        before,
        "the CRD was changed"
    );
    host.stop().await;

    delete_crd(&crds, SQUAT_CRD).await;
    ns.cleanup().await.unwrap();
}

/// The squatter plugin with a parent kind (and CRD) in a group of the test's own.
fn with_group_of_its_own(mut plugin: Plugin, group: &str) -> (Plugin, String) {
    let name = format!("{}.{group}", plugin.decl.parent.plural);
    plugin.decl.parent.group = group.to_string();
    plugin.decl.crd.metadata.name = Some(name.clone());
    plugin.decl.crd.spec.group = group.to_string();
    (plugin, name)
}

#[tokio::test]
async fn install_crd_creates_updates_and_refuses_by_the_annotation() {
    let ns = TestNamespace::new("install-crd-rules").await.unwrap();
    let client = ns.client();
    let crds = crd_api(&client);
    let (plugin, name) =
        with_group_of_its_own(squatter(), &format!("{}.crd-ownership.test", ns.name()));

    // Hosts starting at once: one creates, the others find it theirs and update it.
    let installs = (0..4).map(|_| install_crd(&client, &plugin));
    for result in futures::future::join_all(installs).await {
        result.unwrap_or_else(|e| panic!("a concurrent install failed: {e}"));
    }
    let crd = crds.get(&name).await.unwrap();
    assert_eq!(installed_for(&crd), Some("squatter"));
    let managers: Vec<_> = crd
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.manager.as_deref())
        .collect();
    assert!(managers.contains(&"operator-host"), "{managers:?}");
    install_crd(&client, &plugin).await.unwrap();

    // Another plugin's, then nobody's: refused, untouched.
    annotate(&crds, &name, Some("other")).await;
    let before = snapshot(&crds, &name).await;
    let refused = install_crd(&client, &plugin).await.unwrap_err().to_string();
    assert!(
        refused.contains(&format!(
            "the CRD {name} exists and was not installed by operator-host for plugin squatter \
             (it is annotated {INSTALLED_FOR}=other)"
        )),
        "{refused}"
    );
    assert_eq!(snapshot(&crds, &name).await, before);
    annotate(&crds, &name, None).await;
    let before = snapshot(&crds, &name).await;
    let refused = install_crd(&client, &plugin).await.unwrap_err().to_string();
    assert!(
        refused.contains(&format!("(annotation {INSTALLED_FOR} is absent)")),
        "{refused}"
    );
    assert_eq!(snapshot(&crds, &name).await, before);

    delete_crd(&crds, &name).await;
    ns.cleanup().await.unwrap();
}

/// A refusal that is about the cluster, not the plugin, is retried: annotating the CRD as the
/// refusal says serves the plugin without a restart or a change of its file.
#[tokio::test]
async fn handing_the_crd_over_while_the_host_runs_serves_the_plugin() {
    let _turn = SQUAT_CRD_TURN.lock().await;
    let ns = TestNamespace::new("crd-handed-over").await.unwrap();
    let client = ns.client();
    let crds = crd_api(&client);
    let plugin = squatter();
    install_by_hand(&crds, &plugin).await;
    let squats: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &squat_resource());
    create(&squats, &squat_resource(), "first", json!({"value": "a"})).await;

    let plugins = squatter_dir();
    let host = Host::start_dir(plugins.path().to_path_buf(), &[ns.name()]).await;
    assert_eq!(host.serving_tier("squatter"), None, "the plugin is served");
    // Not ready, and /readyz says why.
    let (ready, body) = host.metrics.readiness();
    assert!(!ready, "{body}");
    assert!(
        body.contains("squatter.wasm") && body.contains("was not installed by operator-host"),
        "{body}"
    );
    annotate(&crds, SQUAT_CRD, Some("squatter")).await;
    wait_for("the plugin to be served", TIMEOUT, || async {
        Ok(host.serving_tier("squatter").map(|_| ()))
    })
    .await
    .unwrap();
    assert_eq!(host.metrics.readiness(), (true, "ready".to_string()));
    wait_for_child(&ns, "first").await;
    host.stop().await;

    delete_crd(&crds, SQUAT_CRD).await;
    ns.cleanup().await.unwrap();
}
