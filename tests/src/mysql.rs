//! The MySQL plugin's parent kind and the root Secret its InnoDBClusters name.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, PostParams};
use serde_json::json;

use crate::devcluster::TestNamespace;

/// The name of the root Secret [`create_root_secret`] makes (`spec.secretName`).
pub const ROOT_SECRET: &str = "mysql-root";

/// The MySQL plugin's parent kind, InnoDBCluster.
pub fn resource() -> ApiResource {
    ApiResource {
        group: "mysql.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "mysql.operator-host.dev/v1alpha1".into(),
        kind: "InnoDBCluster".into(),
        plural: "innodbclusters".into(),
    }
}

/// Creates the root Secret [`ROOT_SECRET`] in `ns`.
pub async fn create_root_secret(ns: &TestNamespace) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": ROOT_SECRET},
        "stringData": {"rootUser": "root", "rootHost": "%", "rootPassword": "test-only"},
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}
