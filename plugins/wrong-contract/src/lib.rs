//! Test-only plugin that implements contract version 9.0.0, which does not exist: the host must refuse to load it.
// wit-bindgen expands `unsafe` export glue into this crate (the SDK hides it for real plugins).
#![allow(unsafe_code)]

wit_bindgen::generate!({
    path: "wit",
    world: "operator-host:reconciler/reconciler@9.0.0",
});

use exports::operator_host::reconciler::plugin::Guest;
use operator_host::reconciler::types::{
    FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct WrongContract;

impl Guest for WrongContract {
    fn info() -> PluginInfo {
        let kind = GroupVersionKind {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Thing".into(),
            plural: "things".into(),
            namespaced: true,
        };
        PluginInfo {
            name: "wrong-contract".into(),
            version: "0.1.0".into(),
            parent: kind,
            children: vec![],
            needs_finalize: false,
            crd: "{}".into(),
        }
    }

    fn reconcile(_: ReconcileRequest) -> Result<ReconcileResponse, ReconcileError> {
        Err(ReconcileError::Retry("never called".into()))
    }

    fn finalize(_: ReconcileRequest) -> Result<FinalizeResponse, ReconcileError> {
        Err(ReconcileError::Retry("never called".into()))
    }
}

#[cfg(target_arch = "wasm32")]
export!(WrongContract);
