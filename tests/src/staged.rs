//! The staged test plugin (contract 0.2.0): its parent kind, and a host serving it under a policy that lets it read the Secret it declares.

use std::path::Path;
use std::time::Duration;

use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use operator_host::policy::Policy;
use serde_json::Value;

use crate::devcluster::{TestNamespace, wait_for};
use crate::host::{Host, plugin_path};
use crate::memcached::reconciled_condition;

/// How long the staged tests wait for one step (kwok completes Jobs within seconds).
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// `Staged`, `staged.operator-host.dev/v1alpha1`.
pub fn staged_resource() -> ApiResource {
    ApiResource {
        group: "staged.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "staged.operator-host.dev/v1alpha1".into(),
        kind: "Staged".into(),
        plural: "stageds".into(),
    }
}

/// A host serving the staged plugin in a namespace of its own, under a policy that allows
/// Secrets (the plugin reads one, as hashes).
pub async fn staged_host(test: &str) -> (TestNamespace, Host, Api<DynamicObject>) {
    let ns = TestNamespace::new(test).await.unwrap();
    let policy = Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  allowSecrets: true\n",
        Path::new("policy.yaml"),
    )
    .unwrap();
    let host =
        Host::start_with_policy(plugin_path("test-plugins", "staged"), ns.name(), policy).await;
    let api = Api::namespaced_with(ns.client(), ns.name(), &staged_resource());
    (ns, host, api)
}

/// Waits until the CR's current generation is reconciled with `Reconciled` of `reason`;
/// returns the condition.
pub async fn wait_reason(api: &Api<DynamicObject>, name: &str, reason: &str) -> Value {
    wait_for(
        &format!("{name} to be reconciled with reason {reason}"),
        TIMEOUT,
        || async {
            let cr = api.get(name).await?;
            let condition = reconciled_condition(&cr);
            Ok((condition["reason"] == reason
                && condition["observedGeneration"].as_i64() == cr.metadata.generation)
                .then_some(condition))
        },
    )
    .await
    .unwrap()
}
