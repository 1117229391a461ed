//! Glue between the generated bindings and [`Reconciler`]; used by `export_reconciler!`.

use kube::CustomResourceExt;

use crate::admission::{merge_apply, merge_diff};
use crate::bindings::operator_host::reconciler::types as wit;
use crate::bindings::operator_host::reconciler::types::{
    FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};
use crate::{
    ChildOptions, DeletePolicy, Error, FieldErrorType, Finalized, Kind, Observed, Readiness,
    Reconciler, Related, RelatedSelector, SecretView, UpdateStrategy, Validation,
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
        crd: serde_json::to_string(&R::crd()).unwrap_or_default(),
        related: R::related().into_iter().map(Into::into).collect(),
        implements: implements::<R>(),
    }
}

/// The capabilities `R` says it implements.
fn implements<R: Reconciler>() -> wit::Capabilities {
    let mut implements = wit::Capabilities::empty();
    for (on, capability) in [
        (R::VALIDATE, wit::Capabilities::VALIDATE),
        (R::VALIDATE_DELETE, wit::Capabilities::VALIDATE_DELETE),
        (R::DEFAULT, wit::Capabilities::DEFAULT),
        (R::CONVERT, wit::Capabilities::CONVERT),
    ] {
        if on {
            implements |= capability;
        }
    }
    implements
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

/// A decoding error of the parent, naming the field.
type DecodeError = serde_path_to_error::Error<serde_json::Error>;

/// `value` as `R::Parent`. Its status is the plugin's own earlier output, not the user's
/// input: one that no longer decodes (a phase renamed in a new version of the plugin) is left
/// out, and its error returned beside the parent, so that neither a reconcile nor an
/// admission request fails for it until someone edits the parent. Every entry point decodes
/// the parent here.
fn decode_dropping_stale_status<R: Reconciler>(
    value: &serde_json::Value,
) -> Result<(R::Parent, Option<DecodeError>), DecodeError> {
    let first = match serde_path_to_error::deserialize(value) {
        Ok(decoded) => return Ok((decoded, None)),
        Err(e) => e,
    };
    let mut without_status = value.clone();
    if without_status
        .as_object_mut()
        .and_then(|object| object.remove("status"))
        .is_none()
    {
        return Err(first);
    }
    let decoded = serde_path_to_error::deserialize(&without_status)?;
    Ok((decoded, Some(first)))
}

/// The parent as `R::Parent` for `reconcile` and `finalize`: a stale status is dropped with a
/// warning, so the parent is reconciled and gets a new status instead of failing as an invalid
/// spec.
fn decode_parent<R: Reconciler>(parent: serde_json::Value) -> Result<R::Parent, Error> {
    let kind = R::Parent::api_resource().kind;
    let (decoded, stale) =
        decode_dropping_stale_status::<R>(&parent).map_err(|e| invalid_parent(&kind, e))?;
    if let Some(first_error) = stale {
        crate::log::warn(format!(
            "the {kind}'s previous status does not decode ({first_error}); reconciling it as if it had none"
        ));
    }
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

/// The parent in an admission request as `R::Parent`, or the field error of what does not
/// decode (`spec.size: Invalid value: ...: invalid type: string "x", expected i32`); a stale
/// status is dropped, as for a reconcile.
fn decode_for_admission<R: Reconciler>(
    object: &str,
    validation: &mut Validation,
) -> Option<R::Parent> {
    let value: serde_json::Value = match serde_json::from_str(object) {
        Ok(value) => value,
        Err(e) => {
            validation.invalid("", serde_json::Value::Null, format!("not JSON: {e}"));
            return None;
        }
    };
    match decode_dropping_stale_status::<R>(&value) {
        Ok((parent, _)) => Some(parent),
        Err(e) => {
            let field = e.path().to_string();
            validation.error(crate::FieldError {
                reason: FieldErrorType::Invalid,
                field,
                value: None,
                detail: e.into_inner().to_string(),
            });
            None
        }
    }
}

/// `validate` for the plugin `R`.
pub fn validate<R: Reconciler>(request: wit::AdmissionRequest) -> wit::Validation {
    let mut validation = Validation::new();
    match request.operation {
        wit::Operation::Create | wit::Operation::Update => {
            let object = request
                .object
                .as_deref()
                .and_then(|o| decode_for_admission::<R>(o, &mut validation));
            // An old object that no longer decodes (a schema that changed since) is no reason
            // to refuse the new one: it is validated as a create.
            let old = request
                .old_object
                .as_deref()
                .and_then(|o| decode_for_admission::<R>(o, &mut Validation::new()));
            if let Some(object) = object {
                validation = R::validate(&object, old.as_ref());
            }
        }
        wit::Operation::Delete => {
            if let Some(old) = request
                .old_object
                .as_deref()
                .and_then(|o| decode_for_admission::<R>(o, &mut Validation::new()))
            {
                validation = R::validate_delete(&old);
            }
        }
    }
    wit::Validation {
        errors: validation
            .errors()
            .iter()
            .map(|error| wit::FieldError {
                reason: match error.reason {
                    FieldErrorType::Required => wit::FieldErrorType::Required,
                    FieldErrorType::Invalid => wit::FieldErrorType::Invalid,
                    FieldErrorType::Forbidden => wit::FieldErrorType::Forbidden,
                    FieldErrorType::NotSupported => wit::FieldErrorType::NotSupported,
                    FieldErrorType::Duplicate => wit::FieldErrorType::Duplicate,
                    FieldErrorType::TooLong => wit::FieldErrorType::TooLong,
                    FieldErrorType::TooMany => wit::FieldErrorType::TooMany,
                    FieldErrorType::NotFound => wit::FieldErrorType::NotFound,
                },
                field: error.field.clone(),
                value: error.value.as_ref().map(ToString::to_string),
                detail: error.detail.clone(),
            })
            .collect(),
        warnings: validation.warnings().to_vec(),
    }
}

/// `default` for the plugin `R`: the object with only the fields `R::default` changed
/// changed, so that what the typed parent does not model (or models with other defaults)
/// stays as the user wrote it. An object that does not decode is returned as it is, for
/// `validate` to refuse.
pub fn default<R: Reconciler>(object: String) -> Result<String, String> {
    let mut value: serde_json::Value =
        serde_json::from_str(&object).map_err(|e| format!("the object is not JSON: {e}"))?;
    let Ok((mut parent, _)) = decode_dropping_stale_status::<R>(&value) else {
        return Ok(object);
    };
    let encode = |parent: &R::Parent| {
        serde_json::to_value(parent).map_err(|e| format!("cannot encode the parent: {e}"))
    };
    let before = encode(&parent)?;
    R::default(&mut parent);
    let after = encode(&parent)?;
    match merge_diff(&before, &after) {
        Some(patch) => {
            merge_apply(&mut value, &patch);
            Ok(value.to_string())
        }
        None => Ok(object),
    }
}

/// `convert` for the plugin `R`.
pub fn convert<R: Reconciler>(object: String, to_version: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(&object).map_err(|e| format!("the object is not JSON: {e}"))?;
    R::convert(value, to_version)
        .map(|converted| converted.to_string())
        .map_err(|e| e.message().to_string())
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
        const DEFAULT: bool = true;
        fn default(parent: &mut Thing) {
            if parent.spec.size == 0 {
                parent.spec.size = 1;
            }
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
    fn admission_drops_a_status_that_no_longer_decodes_but_not_an_invalid_spec() {
        let mut validation = Validation::new();
        let text = thing(json!({"size": 1}), json!({"phase": "RenamedSinceThen"})).to_string();
        let parent = decode_for_admission::<ThingOperator>(&text, &mut validation).unwrap();
        assert!(parent.status.is_none());
        assert!(validation.is_valid(), "{:?}", validation.errors());

        let text = thing(json!({"size": "big"}), json!({"phase": "RenamedSinceThen"})).to_string();
        assert!(decode_for_admission::<ThingOperator>(&text, &mut validation).is_none());
        assert_eq!(validation.errors()[0].field, "spec.size");
    }

    #[test]
    fn default_applies_to_a_parent_whose_status_no_longer_decodes_and_keeps_that_status() {
        let text = thing(json!({"size": 0}), json!({"phase": "RenamedSinceThen"})).to_string();
        let defaulted: serde_json::Value =
            serde_json::from_str(&default::<ThingOperator>(text).unwrap()).unwrap();
        assert_eq!(defaulted["spec"]["size"], 1);
        assert_eq!(defaulted["status"]["phase"], "RenamedSinceThen");
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
