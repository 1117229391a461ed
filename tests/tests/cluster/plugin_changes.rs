//! What a plugin change leaves behind, on the real API server: parents whose finalizer no
//! plugin serves, children of kinds a new version dropped; and events that name each child.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Service};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::hostile::{attack_resource, release_attacks, wait_for_finalizer};
use operator_host_tests::memcached::{
    create, memcached_resource, reconciled_condition, wait_for_reason,
};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A plugin directory holding the hostile plugin, and a host serving it in `ns`.
async fn hostile_host(ns: &TestNamespace) -> (tempfile::TempDir, Host) {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_path("test-plugins", "hostile"),
        plugins.path().join("hostile.wasm"),
    )
    .unwrap();
    let host = Host::start_dir(plugins.path().to_path_buf(), &[ns.name()]).await;
    (plugins, host)
}

#[tokio::test]
async fn a_removed_plugins_parents_keep_the_finalizer_and_say_how_to_release_them() {
    let ns = TestNamespace::new("plugin-removed").await.unwrap();
    let (plugins, host) = hostile_host(&ns).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    create(
        &api,
        &attack_resource(),
        "held",
        json!({"attack": "hold-finalizer"}),
    )
    .await;
    wait_for_finalizer(&api, "held", TIMEOUT).await;
    api.delete("held", &DeleteParams::background())
        .await
        .unwrap();
    std::fs::remove_file(plugins.path().join("hostile.wasm")).unwrap();
    let condition = wait_for_reason(
        &api,
        "held",
        operator_host::controller::PLUGIN_REMOVED,
        TIMEOUT,
    )
    .await;
    ns.wait_for_event("a PluginRemoved event", |e: &Event| {
        e.reason.as_deref() == Some("PluginRemoved")
    })
    .await;
    // Still held: nothing finalized it and the host did not drop its finalizer.
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains("plugin hostile was removed"), "{message}");
    // The command in the message releases it.
    let patch = message
        .split("-p '")
        .nth(1)
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or_else(|| panic!("no JSON patch in {message:?}"));
    let patch: json_patch::Patch = serde_json::from_str(patch).unwrap();
    api.patch("held", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .unwrap();
    wait_for("the Attack to be gone", TIMEOUT, || async {
        Ok(api.get_opt("held").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

/// The hostile plugin with its ConfigMap child kind renamed (same lengths, so the component
/// stays valid) to one the API server does not serve: a new version that no longer declares
/// ConfigMap.
fn hostile_without_config_maps() -> Vec<u8> {
    let bytes = std::fs::read(plugin_path("test-plugins", "hostile")).unwrap();
    let replace = |bytes: Vec<u8>, from: &[u8], to: &[u8]| -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let mut out = Vec::with_capacity(bytes.len());
        let mut rest = bytes.as_slice();
        let mut replaced = 0;
        while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(to);
            rest = &rest[at + from.len()..];
            replaced += 1;
        }
        out.extend_from_slice(rest);
        assert!(replaced > 0, "{} not found", String::from_utf8_lossy(from));
        out
    };
    let bytes = replace(bytes, b"ConfigMap", b"GhostKind");
    replace(bytes, b"configmaps", b"ghostkinds")
}

#[tokio::test]
async fn a_new_version_that_drops_a_child_kind_prunes_its_children_of_that_kind_once() {
    let ns = TestNamespace::new("dropped-kind").await.unwrap();
    let (plugins, host) = hostile_host(&ns).await;
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    create(&api, &attack_resource(), "a", json!({"attack": "none"})).await;
    let config_maps: Api<ConfigMap> = ns.api();
    let owned = wait_for("the plugin's ConfigMap", TIMEOUT, || async {
        Ok(config_maps.get_opt("a").await?)
    })
    .await
    .unwrap();
    // A ConfigMap with the host's labels but no controller reference: not proven owned.
    let mut lookalike = ConfigMap::default();
    lookalike.metadata.name = Some("lookalike".into());
    lookalike.metadata.labels = owned.metadata.labels.clone();
    config_maps
        .create(&PostParams::default(), &lookalike)
        .await
        .unwrap();
    let replaced = plugins.path().join("hostile.wasm.tmp");
    std::fs::write(&replaced, hostile_without_config_maps()).unwrap();
    std::fs::rename(&replaced, plugins.path().join("hostile.wasm")).unwrap();
    wait_for(
        "the ConfigMap of the dropped kind to be pruned",
        TIMEOUT,
        || async {
            let live = config_maps.get_opt("a").await?;
            Ok(live.is_none_or(|c| c.uid() != owned.uid()).then_some(()))
        },
    )
    .await
    .unwrap();
    assert!(
        config_maps.get_opt("lookalike").await.unwrap().is_some(),
        "an object not proven owned is never pruned"
    );
    host.stop().await;
    // The new version cannot finalize (its child kind is not served): release by hand.
    release_attacks(&ns).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn each_child_gets_events_of_its_own_and_an_unchanged_one_none() {
    let ns = TestNamespace::new("child-events").await.unwrap();
    let host = Host::start(plugin_path("plugins", "memcached"), ns.name()).await;
    let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let cr = create(&api, &memcached_resource(), "cache", json!({"size": 2})).await;
    let events: Api<Event> = ns.api();
    let for_the_cr = |listed: Vec<Event>| -> Vec<Event> {
        listed
            .into_iter()
            .filter(|e| e.involved_object.uid == cr.uid())
            .collect()
    };
    // Memcached's children (a Deployment and a Service), as the cluster has them.
    let children = wait_for("the CR to be reconciled", TIMEOUT, || async {
        let live = api.get("cache").await?;
        let ok = reconciled_condition(&live)["status"] == "True";
        let selector = format!(
            "app.kubernetes.io/managed-by=operator-host,operator-host.dev/parent-uid={}",
            cr.uid().unwrap()
        );
        let params = ListParams::default().labels(&selector);
        let mut children = BTreeSet::new();
        for s in ns.api::<Service>().list(&params).await? {
            children.insert(format!("Service/{}", s.name_any()));
        }
        for d in ns.api::<Deployment>().list(&params).await? {
            children.insert(format!("Deployment/{}", d.name_any()));
        }
        Ok((ok && children.len() == 2).then_some(children))
    })
    .await
    .unwrap();
    // The pods become ready meanwhile: the Deployment's status changes, the host's fields do not.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let listed = for_the_cr(events.list(&ListParams::default()).await.unwrap().items);
    let created: BTreeSet<String> = listed
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Created"))
        .filter_map(|e| {
            let related = e.related.as_ref()?;
            Some(format!(
                "{}/{}",
                related.kind.as_deref()?,
                related.name.as_deref()?
            ))
        })
        .collect();
    assert_eq!(
        created, children,
        "one Created event per child, naming it: {listed:#?}"
    );
    let updated: Vec<&Event> = listed
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Updated"))
        .collect();
    assert!(updated.is_empty(), "no change, no event: {updated:#?}");
    // A change of one child makes one event, about that child.
    api.patch(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 3}})),
    )
    .await
    .unwrap();
    let updated = wait_for("an Updated event", TIMEOUT, || async {
        let listed = for_the_cr(events.list(&ListParams::default()).await?.items);
        let updated: Vec<Value> = listed
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Updated"))
            .map(|e| json!([e.related.as_ref().and_then(|r| r.kind.clone()), e.message]))
            .collect();
        Ok((!updated.is_empty()).then_some(updated))
    })
    .await
    .unwrap();
    assert!(
        updated.iter().all(|u| u[0] == "Deployment"),
        "only the Deployment changed: {updated:?}"
    );
    host.stop().await;
    ns.cleanup().await.unwrap();
}
