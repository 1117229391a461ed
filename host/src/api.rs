//! kube's dynamic API for the core's kinds: the one place a [`Kind`] becomes an [`Api`].

use kube::api::DynamicObject;
use kube::{Api, Client};

use crate::kinds::Kind;

/// The API of `kind`'s objects in `namespace`, or in every namespace (and for a cluster-scoped
/// kind). A name is addressed through the API of its object's namespace: through the
/// all-namespaces one it would mean a cluster-scoped object.
pub fn api_for(client: &Client, kind: &Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = kind.api_resource();
    match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}
