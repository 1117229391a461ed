//! Test-only plugin of contract 0.2.0 (`wit/0.2.0`), built without the SDK: what a plugin of that release is, so the host's tests prove it still loads and runs with 0.2.0's features.
// wit-bindgen expands `unsafe` export glue into this crate (the SDK hides it for real plugins).
#![allow(unsafe_code)]

wit_bindgen::generate!({
    path: "wit",
    world: "operator-host:reconciler/reconciler@0.2.0",
});

use exports::operator_host::reconciler::plugin::Guest;
use operator_host::reconciler::types::{
    Child, DeletePolicy, FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError,
    ReconcileRequest, ReconcileResponse, UpdateStrategy,
};
use serde_json::json;

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Legacy;

/// The parent kind's CRD: a spec of one string, a status the host writes.
fn crd() -> serde_json::Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"greeting": {"type": "string"}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "legacies.legacy.example.com"},
        "spec": {
            "group": "legacy.example.com",
            "names": {"kind": "Legacy", "plural": "legacies", "singular": "legacy", "listKind": "LegacyList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
            }],
        },
    })
}

impl Guest for Legacy {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "legacy".into(),
            version: "0.2.0".into(),
            parent: GroupVersionKind {
                group: "legacy.example.com".into(),
                version: "v1".into(),
                kind: "Legacy".into(),
                plural: "legacies".into(),
                namespaced: true,
            },
            children: vec![GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
            }],
            needs_finalize: false,
            crd: crd().to_string(),
            related: Vec::new(),
        }
    }

    /// One ConfigMap, created once and kept when no longer returned: 0.2.0's child options.
    fn reconcile(request: ReconcileRequest) -> Result<ReconcileResponse, ReconcileError> {
        let parent: serde_json::Value = serde_json::from_str(&request.parent)
            .map_err(|e| ReconcileError::InvalidSpec(e.to_string()))?;
        let name = parent["metadata"]["name"].as_str().unwrap_or_default();
        let greeting = parent["spec"]["greeting"].as_str().unwrap_or("hello");
        let config_map = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"greeting": greeting},
        });
        Ok(ReconcileResponse {
            children: vec![Child {
                object: config_map.to_string(),
                update: UpdateStrategy::CreateOnly,
                on_prune: DeletePolicy::Orphan,
                ready_when: None,
            }],
            status: json!({"greeted": true}).to_string(),
            requeue_after_ms: None,
        })
    }

    fn finalize(_: ReconcileRequest) -> Result<FinalizeResponse, ReconcileError> {
        Ok(FinalizeResponse {
            done: true,
            requeue_after_ms: None,
        })
    }
}

export!(Legacy);
