//! One AdmissionReview or ConversionReview answered with a plugin's `validate`, `default` or
//! `convert`: the API server's request in, its response out, the plugin's answers checked.

use std::sync::Arc;

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::core::{DynamicObject, Status};
use serde_json::Value;

use super::FailurePolicy;
use crate::metrics::{Metrics, PluginLabels};
use crate::plugin::Plugin;
use crate::runtime::{self, CallError, FieldError, Validation};

/// Which admission function a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Validate,
    Default,
}

impl Hook {
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::Validate => "validate",
            Hook::Default => "default",
        }
    }
}

/// Why a review could not be answered at all (the API server then applies the webhook's
/// failure policy): the body is not a review, or is of something the plugin does not own.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not an AdmissionReview of admission.k8s.io/v1: {0}")]
    NotAdmissionReview(String),
    #[error("the body is not a ConversionReview of apiextensions.k8s.io/v1: {0}")]
    NotConversionReview(String),
    #[error(
        "plugin {plugin} reconciles {owned}, not {requested}: this webhook is not for that kind"
    )]
    NotOwned {
        plugin: String,
        owned: String,
        requested: String,
    },
    #[error("the plugin call did not complete: {0}")]
    CallTask(String),
}

/// Answers an AdmissionReview (`body`) with `plugin`'s `hook`.
pub async fn admit(
    plugin: Arc<Plugin>,
    hook: Hook,
    body: &[u8],
    failure_policy: FailurePolicy,
    metrics: &Metrics,
) -> Result<AdmissionReview<DynamicObject>, ReviewError> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotAdmissionReview(e.to_string()))?;
    let request: AdmissionRequest<DynamicObject> =
        review
            .try_into()
            .map_err(|e: kube::core::admission::ConvertAdmissionReviewError| {
                ReviewError::NotAdmissionReview(e.to_string())
            })?;
    let parent = &plugin.decl.parent;
    if request.resource.group != parent.group || request.resource.resource != parent.plural {
        return Err(ReviewError::NotOwned {
            plugin: plugin.decl.name.clone(),
            owned: format!("{}.{}", parent.plural, parent.group),
            requested: format!("{}.{}", request.resource.resource, request.resource.group),
        });
    }
    let response = AdmissionResponse::from(&request);
    // Done once for both hooks: an update that leaves the spec alone is not the plugin's.
    let object = json(request.object.as_ref());
    let old = json(request.old_object.as_ref());
    if request.operation == Operation::Update && leaves_spec_alone(&object, &old) {
        return Ok(response.into_review());
    }
    let response = match hook {
        Hook::Validate => {
            let objects = (object, old);
            validate(
                &plugin,
                &request,
                objects,
                response,
                failure_policy,
                metrics,
            )
            .await?
        }
        Hook::Default => match object {
            Some(object) if matches!(request.operation, Operation::Create | Operation::Update) => {
                default(&plugin, &request, object, response, failure_policy, metrics).await?
            }
            _ => response,
        },
    };
    Ok(response.into_review())
}

/// The object as JSON, or none.
fn json(object: Option<&DynamicObject>) -> Option<Value> {
    object.and_then(|o| serde_json::to_value(o).ok())
}

/// Whether an update leaves everything but the metadata and status as it was: such a write
/// (a label, a finalizer, the host's own writes) is never refused, so that neither it nor
/// the deletion of an object stored before the plugin validated is stuck behind the plugin.
/// The webhook entries say the same to the API server (`matchConditions`), which then does
/// not even call.
fn leaves_spec_alone(object: &Option<Value>, old: &Option<Value>) -> bool {
    let without_meta = |value: &Value| {
        let mut value = value.clone();
        if let Some(fields) = value.as_object_mut() {
            fields.remove("metadata");
            fields.remove("status");
        }
        value
    };
    match (object, old) {
        (Some(object), Some(old)) => without_meta(object) == without_meta(old),
        _ => false,
    }
}

/// `validate` of `(object, old)`: refused with the plugin's field errors as the API server's
/// own `Invalid`.
async fn validate(
    plugin: &Arc<Plugin>,
    request: &AdmissionRequest<DynamicObject>,
    (object, old): (Option<Value>, Option<Value>),
    response: AdmissionResponse,
    failure_policy: FailurePolicy,
    metrics: &Metrics,
) -> Result<AdmissionResponse, ReviewError> {
    let operation = match request.operation {
        Operation::Create => runtime::Operation::Create,
        Operation::Update => runtime::Operation::Update,
        Operation::Delete if plugin.decl.implements.validate_delete => runtime::Operation::Delete,
        Operation::Delete | Operation::Connect => return Ok(response),
    };
    let call = runtime::AdmissionRequest {
        operation,
        object: object.map(|o| o.to_string()),
        old_object: old.map(|o| o.to_string()),
        user: request.user_info.username.clone().unwrap_or_default(),
        dry_run: request.dry_run,
    };
    let context = context(plugin, request);
    let result = on_call_thread(plugin, metrics, move |plugin| {
        plugin.compiled.validate(&call, &context)
    })
    .await?;
    Ok(match result {
        Ok(validation) => answer_validation(plugin, request, response, validation),
        Err(error) => failed(plugin, Hook::Validate, response, &error, failure_policy),
    })
}

/// The response of a `validate` that answered.
fn answer_validation(
    plugin: &Plugin,
    request: &AdmissionRequest<DynamicObject>,
    mut response: AdmissionResponse,
    validation: Validation,
) -> AdmissionResponse {
    if !validation.warnings.is_empty() {
        response.warnings = Some(validation.warnings.iter().map(|w| warning(w)).collect());
    }
    if validation.errors.is_empty() {
        return response;
    }
    let parent = &plugin.decl.parent;
    let kind = if parent.group.is_empty() {
        parent.kind.clone()
    } else {
        format!("{}.{}", parent.kind, parent.group)
    };
    let mut response = response.deny(invalid_message(&kind, &request.name, &validation.errors));
    response.result.code = 422;
    response.result.reason = "Invalid".to_string();
    response.result.details = Some(kube::core::response::StatusDetails {
        name: request.name.clone(),
        group: parent.group.clone(),
        kind: parent.kind.clone(),
        causes: validation
            .errors
            .iter()
            .map(|error| kube::core::response::StatusCause {
                reason: error.reason.cause_type().to_string(),
                message: error.message(),
                field: error.field.clone(),
            })
            .collect(),
        uid: String::new(),
        retry_after_seconds: 0,
    });
    response
}

/// As the API server says an object is invalid: `Memcached.cache.example.com "a" is invalid:
/// spec.size: Invalid value: 101: ...` (several errors in brackets, comma-separated).
fn invalid_message(kind: &str, name: &str, errors: &[FieldError]) -> String {
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let errors = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{kind} {name:?} is invalid: {errors}")
}

/// `default` of `object`: the plugin's changes as a JSON patch (see
/// [`Plugin::default_parent`]).
async fn default(
    plugin: &Arc<Plugin>,
    request: &AdmissionRequest<DynamicObject>,
    object: Value,
    response: AdmissionResponse,
    failure_policy: FailurePolicy,
    metrics: &Metrics,
) -> Result<AdmissionResponse, ReviewError> {
    let context = context(plugin, request);
    let original = object.clone();
    let result = on_call_thread(plugin, metrics, move |plugin| {
        plugin.default_parent(&original, &context)
    })
    .await?;
    let defaulted = match result {
        Ok(Ok(defaulted)) => defaulted,
        Ok(Err(refusal)) => return Ok(response.deny(refusal)),
        Err(error) => {
            return Ok(failed(
                plugin,
                Hook::Default,
                response,
                &error,
                failure_policy,
            ));
        }
    };
    let patch = json_patch::diff(&object, &defaulted);
    if patch.0.is_empty() {
        return Ok(response);
    }
    // A patch of JSON values always serializes.
    Ok(response.clone().with_patch(patch).unwrap_or(response))
}

/// A plugin call that failed (trapped, ran out of time or memory): refused or let through as
/// the administrator's failure policy says, with the reason either way.
fn failed(
    plugin: &Plugin,
    hook: Hook,
    response: AdmissionResponse,
    error: &CallError,
    failure_policy: FailurePolicy,
) -> AdmissionResponse {
    let message = format!(
        "plugin {} could not {}: {error}",
        plugin.decl.name,
        hook.as_str()
    );
    tracing::warn!(plugin = %plugin.decl.name, webhook = hook.as_str(), %error, ?failure_policy, "plugin failed in an admission webhook");
    match failure_policy {
        FailurePolicy::Fail => {
            let mut response = response.deny(message);
            response.result.code = 500;
            response.result.reason = "InternalError".to_string();
            response
        }
        FailurePolicy::Ignore => {
            let mut response = response;
            response.warnings = Some(vec![warning(&format!(
                "let through (failurePolicy Ignore): {message}"
            ))]);
            response
        }
    }
}

/// `text` as the API server passes a warning on (an HTTP header): one line, at most 256
/// characters; a warning with a line break in it would be dropped whole.
fn warning(text: &str) -> String {
    const MAX: usize = 256;
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.char_indices().nth(MAX - 3) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// Runs `call` on one of the threads sandboxed calls run on, as a reconcile's do, and counts
/// its duration, CPU time and memory in the plugin's call metrics.
async fn on_call_thread<R: Send + 'static>(
    plugin: &Arc<Plugin>,
    metrics: &Metrics,
    call: impl FnOnce(&Plugin) -> R + Send + 'static,
) -> Result<R, ReviewError> {
    let calling = plugin.clone();
    let started = std::time::Instant::now();
    let (result, usage) = runtime::spawn_call(plugin.compiled.call_priority(), move || {
        let result = call(&calling);
        (result, runtime::take_last_call_usage())
    })
    .await
    .map_err(|e| ReviewError::CallTask(e.to_string()))?;
    let labels = PluginLabels {
        plugin: plugin.decl.name.clone(),
    };
    metrics
        .plugin_call_duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if let Some(usage) = usage {
        metrics
            .plugin_cpu
            .get_or_create(&labels)
            .inc_by(usage.cpu.as_secs_f64());
        metrics
            .plugin_call_memory
            .get_or_create(&labels)
            .observe(usage.memory_bytes as f64);
    }
    Ok(result)
}

/// Names the object in the plugin's log lines.
fn context(plugin: &Plugin, request: &AdmissionRequest<DynamicObject>) -> String {
    let namespace = request.namespace.as_deref().unwrap_or_default();
    format!("{}/{namespace}/{}", plugin.decl.name, request.name)
}

/// Answers a ConversionReview (`body`) with `plugin`'s `convert`, object by object; one
/// failure fails the whole review (the API server's rule).
pub async fn convert(
    plugin: Arc<Plugin>,
    body: &[u8],
    metrics: &Metrics,
) -> Result<ConversionReview, ReviewError> {
    let review: ConversionReview = serde_json::from_slice(body)
        .map_err(|e| ReviewError::NotConversionReview(e.to_string()))?;
    let request = ConversionRequest::from_review(review)
        .map_err(|e| ReviewError::NotConversionReview(e.to_string()))?;
    let desired = request.desired_api_version.clone();
    let objects = request.objects.clone();
    let response = ConversionResponse::for_request(request);
    let converted = on_call_thread(&plugin, metrics, move |plugin| {
        convert_all(plugin, &objects, &desired)
    })
    .await?;
    Ok(match converted {
        Ok(objects) => response.success(objects),
        Err((reason, message)) => response.failure(Status::failure(&message, reason)),
    }
    .into_review())
}

/// The reason of a conversion whose plugin call failed (trapped, ran out of time or memory),
/// as against one the plugin refused or answered wrongly (`ConversionFailed`).
pub const CONVERSION_CALL_FAILED: &str = "PluginCallFailed";
const CONVERSION_FAILED: &str = "ConversionFailed";

/// Every object converted to `desired` (`group/version`), each checked; or why not, with the
/// reason of the failure.
fn convert_all(
    plugin: &Plugin,
    objects: &[Value],
    desired: &str,
) -> Result<Vec<Value>, (&'static str, String)> {
    convert_checked(plugin, objects, desired).map_err(|failure| match failure {
        ConvertFailure::Call(message) => (CONVERSION_CALL_FAILED, message),
        ConvertFailure::Refused(message) => (CONVERSION_FAILED, message),
    })
}

/// Why a conversion failed.
enum ConvertFailure {
    /// The plugin's call did not complete.
    Call(String),
    /// The plugin refused, or answered something that is not a conversion.
    Refused(String),
}

fn convert_checked(
    plugin: &Plugin,
    objects: &[Value],
    desired: &str,
) -> Result<Vec<Value>, ConvertFailure> {
    let parent = &plugin.decl.parent;
    let version = match desired.split_once('/') {
        Some((group, version)) if group == parent.group => version,
        _ => {
            return Err(ConvertFailure::Refused(format!(
                "cannot convert to {desired}: plugin {} serves the group {}",
                plugin.decl.name, parent.group
            )));
        }
    };
    let served = plugin.decl.served_versions();
    if !served.contains(&version) {
        return Err(ConvertFailure::Refused(format!(
            "cannot convert to {desired}: the CRD of plugin {} serves {}",
            plugin.decl.name,
            served.join(", ")
        )));
    }
    objects
        .iter()
        .map(|object| {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let context = format!("{}/{name}", plugin.decl.name);
            let converted = match plugin
                .compiled
                .convert(&object.to_string(), version, &context)
            {
                Ok(Ok(converted)) => converted,
                Ok(Err(refusal)) => {
                    return Err(ConvertFailure::Refused(format!(
                        "plugin {} cannot convert {name} to {version}: {refusal}",
                        plugin.decl.name
                    )));
                }
                Err(error) => {
                    return Err(ConvertFailure::Call(format!(
                        "plugin {} failed to convert {name}: {error}",
                        plugin.decl.name
                    )));
                }
            };
            let converted: Value = serde_json::from_str(&converted).map_err(|e| {
                ConvertFailure::Refused(format!(
                    "plugin {} converted {name} to something that is not JSON: {e}",
                    plugin.decl.name
                ))
            })?;
            check_conversion(object, &converted, desired).map_err(|problem| {
                ConvertFailure::Refused(format!(
                    "plugin {}'s conversion of {name} {problem}",
                    plugin.decl.name
                ))
            })?;
            Ok(converted)
        })
        .collect()
}

/// A conversion changes the version and the fields, never which object it is.
fn check_conversion(object: &Value, converted: &Value, desired: &str) -> Result<(), String> {
    if converted["apiVersion"] != desired {
        return Err(format!(
            "has apiVersion {}, not {desired}",
            converted["apiVersion"]
        ));
    }
    if converted["kind"] != object["kind"] {
        return Err(format!("changes the kind to {}", converted["kind"]));
    }
    for field in ["name", "namespace", "uid", "resourceVersion", "generation"] {
        if converted["metadata"][field] != object["metadata"][field] {
            return Err(format!("changes metadata.{field}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_update_of_only_metadata_or_status_leaves_the_spec_alone() {
        let old = Some(json!({"metadata": {"labels": {}}, "spec": {"size": 1}}));
        let relabelled = Some(
            json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["f"]},
                                     "spec": {"size": 1}, "status": {"x": 1}}),
        );
        let resized = Some(json!({"metadata": {"labels": {}}, "spec": {"size": 2}}));
        assert!(leaves_spec_alone(&relabelled, &old));
        assert!(!leaves_spec_alone(&resized, &old));
        assert!(!leaves_spec_alone(&resized, &None));
    }

    #[test]
    fn several_field_errors_read_as_the_api_servers() {
        let error = |field: &str| FieldError {
            reason: runtime::FieldErrorType::Required,
            field: field.into(),
            value: None,
            detail: String::new(),
        };
        assert_eq!(
            invalid_message("Memcached.cache.example.com", "a", &[error("spec.image")]),
            "Memcached.cache.example.com \"a\" is invalid: spec.image: Required value"
        );
        assert_eq!(
            invalid_message("Thing", "b", &[error("spec.a"), error("spec.b")]),
            "Thing \"b\" is invalid: [spec.a: Required value, spec.b: Required value]"
        );
    }

    #[test]
    fn a_warning_is_one_line_the_api_server_passes_on() {
        assert_eq!(warning("a\nb"), "a b");
        let long = warning(&"x".repeat(300));
        assert_eq!(long.chars().count(), 256);
        assert!(long.ends_with("..."));
    }

    #[test]
    fn a_conversion_may_not_change_which_object_it_is() {
        let object =
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a", "uid": "u"}});
        let good =
            json!({"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "a", "uid": "u"}});
        assert_eq!(check_conversion(&object, &good, "g/v2"), Ok(()));
        assert!(check_conversion(&object, &good, "g/v3").is_err());
        let renamed =
            json!({"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "b", "uid": "u"}});
        assert_eq!(
            check_conversion(&object, &renamed, "g/v2"),
            Err("changes metadata.name".into())
        );
    }
}
