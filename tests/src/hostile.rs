//! The hostile test plugin's parent kind, `Attack` (see `plugins/hostile`).

use kube::api::ApiResource;

/// `attacks.hostile.operator-host.dev`, the parent kind of the hostile plugin.
pub fn attack_resource() -> ApiResource {
    ApiResource {
        group: "hostile.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "hostile.operator-host.dev/v1alpha1".into(),
        kind: "Attack".into(),
        plural: "attacks".into(),
    }
}

/// Drops every finalizer of the Attacks in `ns`, for a test that stops its host before the
/// namespace is deleted: the host's finalizer would otherwise hold the namespace (and the CRD)
/// in Terminating for good.
pub async fn release_attacks(ns: &crate::devcluster::TestNamespace) {
    use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
    let attacks: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    let release = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    for attack in attacks.list(&ListParams::default()).await.unwrap() {
        let name = kube::ResourceExt::name_any(&attack);
        attacks
            .patch(&name, &PatchParams::default(), &release)
            .await
            .unwrap();
    }
}

/// Waits (at most `timeout`) until the host's finalizer is on Attack `name`.
pub async fn wait_for_finalizer(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    timeout: std::time::Duration,
) {
    crate::devcluster::wait_for("the host's finalizer", timeout, || async {
        let finalizers = kube::ResourceExt::finalizers(&api.get(name).await?).to_vec();
        Ok(finalizers
            .contains(&operator_host::controller::FINALIZER.to_string())
            .then_some(()))
    })
    .await
    .unwrap();
}
