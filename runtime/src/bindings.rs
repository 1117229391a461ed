//! The one place the host generates bindings for the plugin contracts in `wit/`, and maps
//! each contract the host serves onto the newest one.
//!
//! The host works with the plain types of `operator-host-contract` throughout (those of the
//! newest contract); each contract's answers are converted to them, a 0.1.0 plugin's with
//! 0.1.0's only behaviour (children applied in place, deleted on prune, no barriers, nothing
//! related), so nothing after a call knows which contract answered.

/// `operator-host:reconciler@0.1.0` (`wit/0.1.0/reconciler.wit`).
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0/reconciler.wit",
        world: "operator-host:reconciler/reconciler@0.1.0",
    });

    pub use self::exports::operator_host::reconciler::plugin as guest;
    pub use self::operator_host::reconciler::host_log;
    pub use self::operator_host::reconciler::types;
}

/// `operator-host:reconciler@0.2.0` (`wit/0.2.0/reconciler.wit`).
pub mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0/reconciler.wit",
        world: "operator-host:reconciler/reconciler@0.2.0",
    });

    pub use self::exports::operator_host::reconciler::plugin as guest;
    pub use self::operator_host::reconciler::host_log;
    pub use self::operator_host::reconciler::types;
}

/// `operator-host:reconciler@0.3.0` (`wit/reconciler.wit`).
pub mod v0_3 {
    wasmtime::component::bindgen!({
        path: "../wit/reconciler.wit",
        world: "operator-host:reconciler/reconciler@0.3.0",
    });

    pub use self::exports::operator_host::reconciler::plugin as guest;
    pub use self::operator_host::reconciler::host_log;
    pub use self::operator_host::reconciler::types;
}

/// A contract version the host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Contract {
    V0_1,
    V0_2,
    V0_3,
}

impl Contract {
    /// Every contract the host serves, newest first.
    pub const SERVED: [Contract; 3] = [Contract::V0_3, Contract::V0_2, Contract::V0_1];

    /// The newest contract: what new plugins and the SDKs target.
    pub const NEWEST: Contract = Contract::V0_3;

    /// The package, e.g. `operator-host:reconciler@0.2.0`.
    pub fn package(self) -> &'static str {
        match self {
            Contract::V0_1 => "operator-host:reconciler@0.1.0",
            Contract::V0_2 => "operator-host:reconciler@0.2.0",
            Contract::V0_3 => "operator-host:reconciler@0.3.0",
        }
    }

    /// The interface every plugin of this contract exports.
    pub fn plugin_interface(self) -> &'static str {
        match self {
            Contract::V0_1 => "operator-host:reconciler/plugin@0.1.0",
            Contract::V0_2 => "operator-host:reconciler/plugin@0.2.0",
            Contract::V0_3 => "operator-host:reconciler/plugin@0.3.0",
        }
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.package())
    }
}

/// The conversions of the types every contract version has in the same shape: from the
/// generated types of the module `wit` in scope to the contract's plain ones (`plain`).
macro_rules! same_shape_conversions {
    () => {
        impl From<wit::GroupVersionKind> for plain::GroupVersionKind {
            fn from(kind: wit::GroupVersionKind) -> Self {
                plain::GroupVersionKind {
                    group: kind.group,
                    version: kind.version,
                    kind: kind.kind,
                    plural: kind.plural,
                    namespaced: kind.namespaced,
                }
            }
        }

        impl From<wit::FinalizeResponse> for plain::FinalizeResponse {
            fn from(response: wit::FinalizeResponse) -> Self {
                plain::FinalizeResponse {
                    done: response.done,
                    requeue_after_ms: response.requeue_after_ms,
                }
            }
        }

        impl From<wit::ReconcileError> for plain::ReconcileError {
            fn from(error: wit::ReconcileError) -> Self {
                match error {
                    wit::ReconcileError::InvalidSpec(m) => plain::ReconcileError::InvalidSpec(m),
                    wit::ReconcileError::Retry(m) => plain::ReconcileError::Retry(m),
                }
            }
        }

        impl From<wit::LogLevel> for plain::LogLevel {
            fn from(level: wit::LogLevel) -> Self {
                match level {
                    wit::LogLevel::Trace => plain::LogLevel::Trace,
                    wit::LogLevel::Debug => plain::LogLevel::Debug,
                    wit::LogLevel::Info => plain::LogLevel::Info,
                    wit::LogLevel::Warn => plain::LogLevel::Warn,
                    wit::LogLevel::Error => plain::LogLevel::Error,
                }
            }
        }
    };
}

/// The conversions of the types 0.2.0 and 0.3.0 have in the same shape (related resources,
/// children, the request and the response), for the module `wit` in scope.
macro_rules! related_and_children_conversions {
    () => {
        impl From<wit::RelatedResource> for plain::RelatedResource {
            fn from(related: wit::RelatedResource) -> Self {
                plain::RelatedResource {
                    name: related.name,
                    kind: related.kind.into(),
                    selector: match related.selector {
                        wit::RelatedSelector::NameFromPath(path) => {
                            plain::RelatedSelector::NameFromPath(path)
                        }
                        wit::RelatedSelector::LabelSelector(selector) => {
                            plain::RelatedSelector::LabelSelector(selector)
                        }
                    },
                    secret_view: match related.secret_view {
                        wit::SecretView::Full => plain::SecretView::Full,
                        wit::SecretView::DataHash => plain::SecretView::DataHash,
                    },
                }
            }
        }

        impl From<wit::Child> for plain::Child {
            fn from(child: wit::Child) -> Self {
                plain::Child {
                    object: child.object,
                    update: match child.update {
                        wit::UpdateStrategy::InPlace => plain::UpdateStrategy::InPlace,
                        wit::UpdateStrategy::Recreate => plain::UpdateStrategy::Recreate,
                        wit::UpdateStrategy::CreateOnly => plain::UpdateStrategy::CreateOnly,
                    },
                    on_prune: match child.on_prune {
                        wit::DeletePolicy::Delete => plain::DeletePolicy::Delete,
                        wit::DeletePolicy::Orphan => plain::DeletePolicy::Orphan,
                    },
                    ready_when: child.ready_when.map(|readiness| match readiness {
                        wit::Readiness::Condition(condition) => {
                            plain::Readiness::Condition(condition)
                        }
                        wit::Readiness::FieldEquals(field) => {
                            plain::Readiness::FieldEquals(plain::FieldValue {
                                path: field.path,
                                value: field.value,
                            })
                        }
                    }),
                }
            }
        }

        impl From<wit::ReconcileResponse> for plain::ReconcileResponse {
            fn from(response: wit::ReconcileResponse) -> Self {
                plain::ReconcileResponse {
                    children: response.children.into_iter().map(Into::into).collect(),
                    status: response.status,
                    requeue_after_ms: response.requeue_after_ms,
                }
            }
        }

        /// A request as 0.2.0 has it.
        pub fn request(request: &plain::ReconcileRequest) -> wit::ReconcileRequest {
            wit::ReconcileRequest {
                parent: request.parent.clone(),
                observed: request.observed.clone(),
                related: request
                    .related
                    .iter()
                    .map(|related| wit::RelatedObjects {
                        name: related.name.clone(),
                        objects: related.objects.clone(),
                    })
                    .collect(),
            }
        }
    };
}

/// `plugin-info` of 0.2.0 and later (related resources declared), with what the plugin
/// implements given by `$implements` from the generated `info`.
macro_rules! plugin_info_conversion {
    ($implements:expr) => {
        impl From<wit::PluginInfo> for plain::PluginInfo {
            fn from(info: wit::PluginInfo) -> Self {
                let implements = ($implements)(&info);
                plain::PluginInfo {
                    name: info.name,
                    version: info.version,
                    parent: info.parent.into(),
                    children: info.children.into_iter().map(Into::into).collect(),
                    needs_finalize: info.needs_finalize,
                    crd: info.crd,
                    related: info.related.into_iter().map(Into::into).collect(),
                    implements,
                }
            }
        }
    };
}

/// 0.2.0's generated types and the contract's plain ones, one into the other.
mod from_v0_2 {
    use super::v0_2::types as wit;
    use operator_host_contract as plain;

    same_shape_conversions!();
    related_and_children_conversions!();

    plugin_info_conversion!(|_: &wit::PluginInfo| plain::Capabilities::default());
}

pub use from_v0_2::request as request_v0_2;

/// 0.3.0's generated types and the contract's plain ones, one into the other.
mod from_v0_3 {
    use super::v0_3::types as wit;
    use operator_host_contract as plain;

    same_shape_conversions!();
    related_and_children_conversions!();

    plugin_info_conversion!(|info: &wit::PluginInfo| plain::Capabilities {
        validate: info.implements.contains(wit::Capabilities::VALIDATE),
        validate_delete: info.implements.contains(wit::Capabilities::VALIDATE_DELETE),
        default: info.implements.contains(wit::Capabilities::DEFAULT),
        convert: info.implements.contains(wit::Capabilities::CONVERT),
    });

    /// An admission request as 0.3.0 has it.
    pub fn admission_request(request: &plain::AdmissionRequest) -> wit::AdmissionRequest {
        wit::AdmissionRequest {
            operation: match request.operation {
                plain::Operation::Create => wit::Operation::Create,
                plain::Operation::Update => wit::Operation::Update,
                plain::Operation::Delete => wit::Operation::Delete,
            },
            object: request.object.clone(),
            old_object: request.old_object.clone(),
            user: request.user.clone(),
            dry_run: request.dry_run,
        }
    }

    impl From<wit::Validation> for plain::Validation {
        fn from(validation: wit::Validation) -> Self {
            plain::Validation {
                errors: validation
                    .errors
                    .into_iter()
                    .map(|error| plain::FieldError {
                        reason: match error.reason {
                            wit::FieldErrorType::Required => plain::FieldErrorType::Required,
                            wit::FieldErrorType::Invalid => plain::FieldErrorType::Invalid,
                            wit::FieldErrorType::Forbidden => plain::FieldErrorType::Forbidden,
                            wit::FieldErrorType::NotSupported => {
                                plain::FieldErrorType::NotSupported
                            }
                            wit::FieldErrorType::Duplicate => plain::FieldErrorType::Duplicate,
                            wit::FieldErrorType::TooLong => plain::FieldErrorType::TooLong,
                            wit::FieldErrorType::TooMany => plain::FieldErrorType::TooMany,
                            wit::FieldErrorType::NotFound => plain::FieldErrorType::NotFound,
                        },
                        field: error.field,
                        value: error.value,
                        detail: error.detail,
                    })
                    .collect(),
                warnings: validation.warnings,
            }
        }
    }
}

pub use from_v0_3::{admission_request as admission_request_v0_3, request as request_v0_3};

/// 0.1.0's generated types and the contract's plain ones, one into the other.
mod from_v0_1 {
    use super::v0_1::types as wit;
    use operator_host_contract as plain;

    same_shape_conversions!();

    impl From<wit::PluginInfo> for plain::PluginInfo {
        fn from(info: wit::PluginInfo) -> Self {
            plain::PluginInfo {
                name: info.name,
                version: info.version,
                parent: info.parent.into(),
                children: info.children.into_iter().map(Into::into).collect(),
                needs_finalize: info.needs_finalize,
                crd: info.crd,
                related: Vec::new(),
                implements: plain::Capabilities::default(),
            }
        }
    }

    impl From<wit::ReconcileResponse> for plain::ReconcileResponse {
        fn from(response: wit::ReconcileResponse) -> Self {
            plain::ReconcileResponse {
                children: response
                    .children
                    .into_iter()
                    .map(plain::Child::in_place)
                    .collect(),
                status: response.status,
                requeue_after_ms: response.requeue_after_ms,
            }
        }
    }

    /// A request as 0.1.0 has it: a 0.1.0 plugin declares nothing related.
    pub fn request(request: &plain::ReconcileRequest) -> wit::ReconcileRequest {
        wit::ReconcileRequest {
            parent: request.parent.clone(),
            observed: request.observed.clone(),
        }
    }
}

pub use from_v0_1::request as request_v0_1;
