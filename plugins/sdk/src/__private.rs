//! Glue between the generated bindings and [`Reconciler`]; used by `export_reconciler!`.

use kube::CustomResourceExt;

use crate::bindings::operator_host::reconciler::types::{
    FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};
use crate::{Error, Finalized, Kind, Observed, Reconciler};

impl From<Kind> for GroupVersionKind {
    fn from(kind: Kind) -> Self {
        GroupVersionKind {
            group: kind.group,
            version: kind.version,
            kind: kind.kind,
            plural: kind.plural,
            namespaced: kind.namespaced,
        }
    }
}

impl From<Error> for ReconcileError {
    fn from(error: Error) -> Self {
        match error {
            Error::InvalidSpec(m) => ReconcileError::InvalidSpec(m),
            Error::Retry(m) => ReconcileError::Retry(m),
        }
    }
}

/// The parent's kind, read from the CRD that the parent type generates.
pub fn parent_kind<R: Reconciler>() -> Kind {
    let crd = R::Parent::crd();
    let resource = R::Parent::api_resource();
    Kind {
        group: resource.group,
        version: resource.version,
        kind: resource.kind,
        plural: resource.plural,
        namespaced: crd.spec.scope == "Namespaced",
    }
}

/// `info` for the plugin `R` of crate version `version`.
pub fn info<R: Reconciler>(version: &str) -> PluginInfo {
    PluginInfo {
        name: R::NAME.to_string(),
        version: version.to_string(),
        parent: parent_kind::<R>().into(),
        children: R::children().into_iter().map(Into::into).collect(),
        needs_finalize: R::NEEDS_FINALIZE,
        // A CRD built from k8s-openapi types always serializes.
        crd: serde_json::to_string(&R::Parent::crd()).unwrap_or_default(),
    }
}

fn decode_request<R: Reconciler>(
    request: &ReconcileRequest,
) -> Result<(R::Parent, Observed), Error> {
    let parent = serde_json::from_str(&request.parent).map_err(|e| {
        // Field-level messages from serde ("spec.size: invalid type ...") are what a user needs.
        Error::InvalidSpec(format!(
            "the {} does not match its schema: {e}",
            R::Parent::api_resource().kind
        ))
    })?;
    Ok((parent, Observed::from_json(&request.observed)?))
}

/// `reconcile` for the plugin `R`: decode, call, encode.
pub fn reconcile<R: Reconciler>(
    request: ReconcileRequest,
) -> Result<ReconcileResponse, ReconcileError> {
    let (parent, observed) = decode_request::<R>(&request)?;
    let desired = R::reconcile(&parent, &observed)?;
    Ok(ReconcileResponse {
        children: desired.children.iter().map(|c| c.to_string()).collect(),
        status: desired.status.to_string(),
        requeue_after_ms: desired.requeue_after.map(|d| d.as_millis() as u64),
    })
}

/// `finalize` for the plugin `R`.
pub fn finalize<R: Reconciler>(
    request: ReconcileRequest,
) -> Result<FinalizeResponse, ReconcileError> {
    let (parent, observed) = decode_request::<R>(&request)?;
    Ok(match R::finalize(&parent, &observed)? {
        Finalized::Done => FinalizeResponse {
            done: true,
            requeue_after_ms: None,
        },
        Finalized::Pending(after) => FinalizeResponse {
            done: false,
            requeue_after_ms: Some(after.as_millis() as u64),
        },
    })
}
