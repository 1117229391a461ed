//! The webhook configurations a test's host registered: they are cluster-scoped and outlive
//! the host (as a deployment's outlive its restarts), so a test removes its own.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use operator_host::webhook::Owner;

/// Deletes the webhook configurations of the host whose election Lease is `namespace/lease`.
pub async fn remove_configurations(client: &Client, namespace: &str, lease: &str) {
    let owner = Owner {
        namespace: namespace.to_string(),
        lease: lease.to_string(),
    };
    let selector = ListParams::default().labels(&owner.selector());
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &selector)
        .await
        .expect("the validating webhook configurations are deleted");
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &selector)
        .await
        .expect("the mutating webhook configurations are deleted");
}
