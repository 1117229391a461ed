//! Glue between the generated bindings and [`Reconciler`]; used by `export_reconciler!`.

use kube::CustomResourceExt;

use crate::bindings::operator_host::reconciler::types as wit;
use crate::bindings::operator_host::reconciler::types::{
    FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};
use crate::{
    ChildOptions, DeletePolicy, Error, Finalized, Kind, Observed, Readiness, Reconciler, Related,
    RelatedSelector, SecretView, UpdateStrategy,
};

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

impl From<Related> for wit::RelatedResource {
    fn from(related: Related) -> Self {
        wit::RelatedResource {
            name: related.name,
            kind: related.kind.into(),
            selector: match related.selector {
                RelatedSelector::NameFromPath(path) => wit::RelatedSelector::NameFromPath(path),
                RelatedSelector::LabelSelector(s) => wit::RelatedSelector::LabelSelector(s),
            },
            secret_view: match related.secret_view {
                SecretView::DataHash => wit::SecretView::DataHash,
                SecretView::Full => wit::SecretView::Full,
            },
        }
    }
}

/// A desired child and its options as the contract's `child`.
fn child(object: &serde_json::Value, options: ChildOptions) -> wit::Child {
    wit::Child {
        object: object.to_string(),
        update: match options.update {
            UpdateStrategy::InPlace => wit::UpdateStrategy::InPlace,
            UpdateStrategy::Recreate => wit::UpdateStrategy::Recreate,
            UpdateStrategy::CreateOnly => wit::UpdateStrategy::CreateOnly,
        },
        on_prune: match options.on_prune {
            DeletePolicy::Delete => wit::DeletePolicy::Delete,
            DeletePolicy::Orphan => wit::DeletePolicy::Orphan,
        },
        ready_when: options.ready_when.map(|readiness| match readiness {
            Readiness::Condition(type_) => wit::Readiness::Condition(type_),
            Readiness::FieldEquals { path, value } => {
                wit::Readiness::FieldEquals(wit::FieldValue { path, value })
            }
        }),
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
        related: R::related().into_iter().map(Into::into).collect(),
    }
}

fn decode_request<R: Reconciler>(
    request: &ReconcileRequest,
) -> Result<(R::Parent, Observed), Error> {
    let parent = serde_json::from_str(&request.parent)
        .map_err(|e| Error::Retry(format!("the parent is not valid JSON: {e}")))?;
    let mut observed = Observed::from_json(&request.observed)?;
    for related in &request.related {
        observed.add_related_json(&related.name, &related.objects)?;
    }
    Ok((decode_parent::<R>(parent)?, observed))
}

/// The parent as `R::Parent`. Its status is the plugin's own earlier output, not the user's
/// input: one that no longer decodes (a phase renamed in a new version of the plugin) is
/// dropped with a warning, so the parent is reconciled and gets a new status instead of
/// failing as an invalid spec until someone edits it.
fn decode_parent<R: Reconciler>(mut parent: serde_json::Value) -> Result<R::Parent, Error> {
    let kind = R::Parent::api_resource().kind;
    let first_error = match serde_path_to_error::deserialize(&parent) {
        Ok(decoded) => return Ok(decoded),
        Err(e) => e,
    };
    if parent
        .as_object_mut()
        .and_then(|object| object.remove("status"))
        .is_none()
    {
        return Err(invalid_parent(&kind, first_error));
    }
    let decoded =
        serde_path_to_error::deserialize(&parent).map_err(|e| invalid_parent(&kind, e))?;
    crate::log::warn(format!(
        "the {kind}'s previous status does not decode ({first_error}); reconciling it as if it had none"
    ));
    Ok(decoded)
}

/// The invalid-spec error of a parent that does not decode, naming the field
/// (`spec.size: invalid type: string "x", expected i32`).
fn invalid_parent(kind: &str, error: serde_path_to_error::Error<serde_json::Error>) -> Error {
    Error::InvalidSpec(format!("the {kind} does not match its schema: {error}"))
}

/// `reconcile` for the plugin `R`: decode, call, encode.
pub fn reconcile<R: Reconciler>(
    request: ReconcileRequest,
) -> Result<ReconcileResponse, ReconcileError> {
    let (parent, observed) = decode_request::<R>(&request)?;
    let desired = R::reconcile(&parent, &observed)?;
    Ok(ReconcileResponse {
        children: desired
            .children
            .iter()
            .enumerate()
            .map(|(index, object)| {
                child(
                    object,
                    desired.options.get(index).cloned().unwrap_or_default(),
                )
            })
            .collect(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    #[derive(kube::CustomResource, Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
    #[kube(
        group = "t.dev",
        version = "v1",
        kind = "Thing",
        namespaced,
        status = "ThingStatus"
    )]
    struct ThingSpec {
        size: i32,
    }

    #[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
    enum Phase {
        Ready,
    }

    #[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
    struct ThingStatus {
        phase: Phase,
    }

    struct ThingOperator;
    impl Reconciler for ThingOperator {
        type Parent = Thing;
        const NAME: &'static str = "thing";
        fn children() -> Vec<Kind> {
            Vec::new()
        }
        fn reconcile(_: &Thing, _: &Observed) -> Result<crate::Desired, Error> {
            Ok(crate::Desired::new())
        }
    }

    fn thing(spec: serde_json::Value, status: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "t.dev/v1", "kind": "Thing", "metadata": {"name": "a"},
               "spec": spec, "status": status})
    }

    #[test]
    fn a_previous_status_that_no_longer_decodes_is_dropped() {
        let parent = decode_parent::<ThingOperator>(thing(
            json!({"size": 1}),
            json!({"phase": "RenamedSinceThen"}),
        ))
        .unwrap();
        assert!(parent.status.is_none());
        let parent =
            decode_parent::<ThingOperator>(thing(json!({"size": 1}), json!({"phase": "Ready"})))
                .unwrap();
        assert!(parent.status.is_some());
    }

    #[test]
    fn an_invalid_spec_names_the_field() {
        for status in [json!(null), json!({"phase": "RenamedSinceThen"})] {
            let err =
                decode_parent::<ThingOperator>(thing(json!({"size": "big"}), status)).unwrap_err();
            assert!(matches!(err, Error::InvalidSpec(_)), "{err}");
            assert!(
                err.message()
                    .starts_with("the Thing does not match its schema: spec.size: invalid type"),
                "{err}"
            );
        }
    }
}
