//! OperatorPlugin fixtures: the resource's API, plugins pushed with the host's CLI, and hosts
//! that serve only their test's OperatorPlugins (a label selector: the resources are
//! cluster-scoped, and other tests' hosts must not serve or write them).

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::devcluster::{self, TestNamespace, wait_for};
use crate::oci_registry::output_of;
use crate::process_host::{Launch, ProcessHost};

/// The label whose value, the test's namespace, selects a test's OperatorPlugins.
const SELECTOR_LABEL: &str = "operator-host.dev/test";

/// The OperatorPlugins of the cluster.
pub fn api(client: kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operator-host.dev", "v1alpha1", "OperatorPlugin"),
        "operatorplugins",
    );
    Api::all_with(client, &resource)
}

/// `binary push` of `plugin` to `reference` (a registry on loopback); the digest it printed.
pub fn push(binary: &str, plugin: &Path, reference: &str) -> String {
    let printed = output_of(
        std::process::Command::new(binary)
            .args(["push", "--plain-http"])
            .arg(plugin)
            .arg(reference),
    );
    printed.trim().rsplit('@').next().unwrap().to_string()
}

/// `binary run` serving only the cluster's plugins labelled for `ns` (an empty plugin
/// directory), with its store of pulled artifacts in `store`, and `extra` arguments.
pub fn start_host(
    binary: &str,
    ns: &TestNamespace,
    store: &Path,
    extra: &[&str],
    metrics_addr: Option<std::net::SocketAddr>,
) -> ProcessHost {
    let plugins = tempfile::tempdir().unwrap().keep();
    let selector = format!("{SELECTOR_LABEL}={}", ns.name());
    let mut args = vec![
        "--plugins-from-cluster",
        "--plugin-store",
        store.to_str().unwrap(),
        "--operator-plugin-selector",
        &selector,
    ];
    args.extend_from_slice(extra);
    ProcessHost::start(&Launch {
        binary: binary.as_ref(),
        plugins: &plugins,
        kubeconfig: &devcluster::cluster().kubeconfig,
        namespace: Some(ns.name()),
        crash_after: None,
        metrics_addr,
        install_crds: true,
        args: &args,
    })
}

/// Creates OperatorPlugin `name` with `spec`, labelled for `ns`'s host. Retried until the
/// host has installed the CRD, and until the API server keeps the whole spec: a CRD another
/// host is still updating may prune fields it does not know yet.
pub async fn create(
    api: &Api<DynamicObject>,
    ns: &TestNamespace,
    name: &str,
    spec: Value,
    bound: Duration,
) {
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operator-host.dev/v1alpha1",
        "kind": "OperatorPlugin",
        "metadata": {"name": name, "labels": {SELECTOR_LABEL: ns.name()}},
        "spec": spec,
    }))
    .unwrap();
    wait_for("the OperatorPlugin to be created whole", bound, || async {
        let _ = api.delete(name, &Default::default()).await;
        let Ok(created) = api.create(&PostParams::default(), &resource).await else {
            return Ok(None);
        };
        Ok((created.data["spec"] == resource.data["spec"]).then_some(()))
    })
    .await
    .unwrap();
}
