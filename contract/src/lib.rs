//! The contract between the host and its plugins as plain Rust: what a plugin declares and
//! answers, what one call may use, how a call can fail, and what seeds its randomness.
//!
//! These are the types of the newest contract (`wit/reconciler.wit`) with no wasm engine
//! behind them: the runtime maps every contract version it serves onto them (and back, for
//! the request), and everything above the runtime (the core, the authors' testing crate, the
//! controller) works with these alone, so none of it depends on wasmtime.

use std::time::Duration;

use sha2::{Digest, Sha256};

/// A Kubernetes kind as a plugin declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Lower-case plural resource name, e.g. `deployments`.
    pub plural: String,
    pub namespaced: bool,
}

/// How a related resource is found from the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelatedSelector {
    /// The object in the parent's namespace named by the string at this path of the parent
    /// (e.g. `spec.credentialsSecret`).
    NameFromPath(String),
    /// The objects in the parent's namespace matching this label selector.
    LabelSelector(String),
}

/// What a plugin sees of a related Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretView {
    /// The whole Secret, its data included.
    Full,
    /// Each value of `data` replaced by the SHA-256 of its bytes: enough to roll pods when
    /// it changes, never the secret itself.
    DataHash,
}

/// Another object a plugin reads (contract 0.2.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedResource {
    /// The name the request carries its objects under.
    pub name: String,
    pub kind: GroupVersionKind,
    pub selector: RelatedSelector,
    pub secret_view: SecretView,
}

/// What a plugin declares in `info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    /// The custom resource kind it reconciles.
    pub parent: GroupVersionKind,
    /// The kinds of the children it returns.
    pub children: Vec<GroupVersionKind>,
    /// Whether it must be called (`finalize`) before a parent goes.
    pub needs_finalize: bool,
    /// The parent's CustomResourceDefinition, as JSON.
    pub crd: String,
    pub related: Vec<RelatedResource>,
    /// Which admission and conversion functions the host calls (contract 0.3.0; nothing for
    /// older plugins).
    pub implements: Capabilities,
}

/// The functions beyond `reconcile` and `finalize` a plugin implements (contract 0.3.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Capabilities {
    /// `validate` for creates and updates.
    pub validate: bool,
    /// `validate` for deletes too.
    pub validate_delete: bool,
    /// `default` for creates and updates.
    pub default: bool,
    /// `convert` between the CRD's versions.
    pub convert: bool,
}

impl Capabilities {
    /// Whether the plugin needs an admission webhook of the API server at all.
    pub fn admission(&self) -> bool {
        self.validate || self.validate_delete || self.default
    }
}

/// What an admission request does to a parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// The input of `validate`: the parent as it would be stored and as it was, as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRequest {
    pub operation: Operation,
    /// None for a delete.
    pub object: Option<String>,
    /// Some for updates and deletes.
    pub old_object: Option<String>,
    pub user: String,
    pub dry_run: bool,
}

/// Why a field is refused, with the API server's own wording and cause types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    Required,
    Invalid,
    Forbidden,
    NotSupported,
    Duplicate,
    TooLong,
    TooMany,
    NotFound,
}

impl FieldErrorType {
    /// The API server's wording (k8s.io/apimachinery's `field.ErrorType.String`).
    pub fn describe(self) -> &'static str {
        match self {
            FieldErrorType::Required => "Required value",
            FieldErrorType::Invalid => "Invalid value",
            FieldErrorType::Forbidden => "Forbidden",
            FieldErrorType::NotSupported => "Unsupported value",
            FieldErrorType::Duplicate => "Duplicate value",
            FieldErrorType::TooLong => "Too long",
            FieldErrorType::TooMany => "Too many",
            FieldErrorType::NotFound => "Not found",
        }
    }

    /// The `metav1.CauseType` of a `Status`'s causes: `FieldValueInvalid`, ...
    pub fn cause_type(self) -> &'static str {
        match self {
            FieldErrorType::Required => "FieldValueRequired",
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::Forbidden => "FieldValueForbidden",
            FieldErrorType::NotSupported => "FieldValueNotSupported",
            FieldErrorType::Duplicate => "FieldValueDuplicate",
            FieldErrorType::TooLong => "FieldValueTooLong",
            FieldErrorType::TooMany => "FieldValueTooMany",
            FieldErrorType::NotFound => "FieldValueNotFound",
        }
    }

    /// Whether the API server shows the refused value with this type.
    fn shows_value(self) -> bool {
        matches!(
            self,
            FieldErrorType::Invalid | FieldErrorType::NotSupported | FieldErrorType::Duplicate
        )
    }
}

/// One refused field of an admission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub reason: FieldErrorType,
    /// `spec.size`, `spec.containers[0].image`.
    pub field: String,
    /// The refused value, as JSON.
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    /// The message without the field: `Invalid value: 0: must be between 1 and 10`.
    pub fn message(&self) -> String {
        let mut message = self.reason.describe().to_string();
        if let Some(value) = self.value.as_ref().filter(|_| self.reason.shows_value()) {
            message.push_str(": ");
            message.push_str(value);
        }
        if !self.detail.is_empty() {
            message.push_str(": ");
            message.push_str(&self.detail);
        }
        message
    }
}

/// As the API server prints a field error: `spec.size: Invalid value: 0: must be ...`.
impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// A `validate` answer: refused when `errors` is not empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Validation {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

/// The objects of one related resource, as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedObjects {
    pub name: String,
    pub objects: Vec<String>,
}

/// What a `reconcile` or `finalize` call receives: the parent, its observed children and its
/// related objects, each as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileRequest {
    pub parent: String,
    pub observed: Vec<String>,
    pub related: Vec<RelatedObjects>,
}

/// How the host changes a child that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateStrategy {
    /// Server-side apply in place (0.1.0's only behaviour).
    InPlace,
    /// As `InPlace`, but a change the API server refuses as immutable deletes the child and
    /// creates it again.
    Recreate,
    /// Created when absent, never updated afterwards.
    CreateOnly,
}

/// What the host does with a child the plugin no longer returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeletePolicy {
    /// Delete it (0.1.0's only behaviour).
    Delete,
    /// Keep it, without the parent's owner reference and the host's labels.
    Orphan,
}

/// A field of a child and the value it must have (JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldValue {
    pub path: String,
    pub value: String,
}

/// When a child counts as ready, for the barriers between children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `status.conditions` holds this type with status `True`.
    Condition(String),
    /// The field (a dotted path) has the value.
    FieldEquals(FieldValue),
}

/// One child a plugin wants, and how the host applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// The desired object, as JSON.
    pub object: String,
    pub update: UpdateStrategy,
    pub on_prune: DeletePolicy,
    /// A barrier: the children after this one are applied once it is ready.
    pub ready_when: Option<Readiness>,
}

impl Child {
    /// `object` applied as 0.1.0 applies every child: in place, deleted on prune, no barrier.
    pub fn in_place(object: String) -> Self {
        Child {
            object,
            update: UpdateStrategy::InPlace,
            on_prune: DeletePolicy::Delete,
            ready_when: None,
        }
    }
}

/// A `reconcile` answer: the children wanted now and the parent's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileResponse {
    pub children: Vec<Child>,
    /// The status, as JSON.
    pub status: String,
    pub requeue_after_ms: Option<u64>,
}

/// A `finalize` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizeResponse {
    /// Whether the parent may go now.
    pub done: bool,
    pub requeue_after_ms: Option<u64>,
}

/// A plugin's own refusal of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReconcileError {
    /// The spec is invalid; retrying without a change cannot help.
    InvalidSpec(String),
    /// Try again later.
    Retry(String),
}

/// The level of a plugin's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// What can go wrong during one sandboxed call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("the plugin did not finish within its CPU deadline of {limit:?}")]
    Timeout { limit: Duration },
    #[error(
        "the host gave the call only {cpu_used:?} of CPU in {wall:?} (its CPU deadline is {limit:?}): the host is overloaded"
    )]
    Stalled {
        limit: Duration,
        cpu_used: Duration,
        wall: Duration,
    },
    #[error("the plugin tried to use more than its memory limit of {limit} bytes")]
    OutOfMemory { limit: usize },
    #[error("the plugin trapped: {message}")]
    Trap { message: String },
    #[error("the plugin's response is over the limit of {limit} bytes ({size} bytes or more)")]
    ResponseTooLarge { size: usize, limit: usize },
    #[error("cannot instantiate the plugin: {message}")]
    Instantiate { message: String },
    #[error("the plugin's contract ({contract}) has no `{function}`: it came in 0.3.0")]
    NotInContract {
        function: &'static str,
        contract: &'static str,
    },
}

impl CallError {
    /// Whether the call was stopped for using too much CPU, memory or response space (as
    /// opposed to failing on its own, or being starved by a busy host): what a plugin's
    /// call priority reacts to (see the runtime's `CallPriority`).
    pub fn is_resource_limit(&self) -> bool {
        matches!(
            self,
            CallError::Timeout { .. }
                | CallError::OutOfMemory { .. }
                | CallError::ResponseTooLarge { .. }
        )
    }
}

/// Per-call resource limits. Every plugin gets these unless configured otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// CPU deadline of `reconcile` and `finalize`.
    pub call_timeout: Duration,
    /// CPU deadline of `info`, which is called at load and must be quick.
    pub info_timeout: Duration,
    /// Bytes of all linear memories and tables of one call together (tables count the
    /// runtime's `TABLE_ELEMENT_BYTES` per element).
    pub max_memory_bytes: usize,
    /// Elements of all tables of one call together.
    pub max_table_elements: usize,
    /// Largest response (children + status, or `info`), in bytes.
    pub max_response_bytes: usize,
    /// Bytes of stdout, of stderr and of `log` kept per call; the rest is dropped.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_timeout: Duration::from_secs(1),
            info_timeout: Duration::from_millis(200),
            max_memory_bytes: 64 << 20,
            max_table_elements: 20_000,
            max_response_bytes: 4 << 20,
            max_output_bytes: 64 << 10,
        }
    }
}

/// The seed of a call's WASI randomness: a SHA-256 of the function and `parts` (each
/// length-prefixed, so no two lists of parts share a seed).
pub fn random_seed<'a>(function: &str, parts: impl IntoIterator<Item = &'a str>) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"operator-host call randomness v1\0");
    hash.update(function.as_bytes());
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}
