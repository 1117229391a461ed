//! Guest-side SDK for operator-host plugins: implement [`Reconciler`], call [`export_reconciler!`].
//!
//! The crate's README follows; its example is compiled as a test.
#![doc = include_str!("../README.md")]

pub mod bindings {
    //! Bindings generated from the contract in `wit/`; plugin authors rarely need them.
    wit_bindgen::generate!({
        path: "wit",
        world: "operator-host:reconciler/reconciler@0.3.0",
        pub_export_macro: true,
        export_macro_name: "__export_reconciler_bindings",
        default_bindings_module: "operator_host_sdk::bindings",
    });
}

mod admission;
mod children;
mod error;
mod labels;
pub mod log;
mod names;
mod options;
mod reconciler;
pub mod resources;
mod security;
mod status;
mod view;

#[doc(hidden)]
pub mod __private;

pub use admission::{FieldError, FieldErrorType, Validation};
pub use children::{Desired, Kind, Observed, child_meta, kind_of};
pub use error::Error;
pub use labels::{app_labels, component_labels, from_json};
pub use names::{is_dns_label, is_dns_subdomain};
pub use options::{
    ChildOptions, DeletePolicy, Readiness, Related, RelatedSelector, SecretView, UpdateStrategy,
};
pub use reconciler::{Finalized, Reconciler};
pub use resources::validate_container_resources;
pub use security::{restricted_container_security_context, restricted_pod_security_context};
pub use status::{Condition, conditions_schema};
pub use view::{
    CONTENT_HASH_ANNOTATION, MetadataView, RollingUpdateView, Rollout, SPEC_HASH_ANNOTATION,
    SpecHashView, UpdateStrategyView, WorkloadConditionView, WorkloadSpecView, WorkloadStatusView,
    WorkloadView, content_hash, job_condition_holds,
};

pub use k8s_openapi;
pub use kube;
pub use schemars;
pub use serde_json;

/// Exports a [`Reconciler`] implementation as the plugin's `plugin` interface.
///
/// Use it exactly once, in the plugin crate's `lib.rs`. The plugin's version is the
/// crate's `CARGO_PKG_VERSION`.
#[macro_export]
macro_rules! export_reconciler {
    ($reconciler:ty) => {
        // Only a wasm build exports the contract: native builds (unit tests) have no use for
        // the exports, and their names are not valid native symbol names.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
        struct __OperatorHostGuest;

        impl $crate::bindings::exports::operator_host::reconciler::plugin::Guest
            for __OperatorHostGuest
        {
            fn info() -> $crate::bindings::operator_host::reconciler::types::PluginInfo {
                $crate::__private::info::<$reconciler>(env!("CARGO_PKG_VERSION"))
            }

            fn reconcile(
                request: $crate::bindings::operator_host::reconciler::types::ReconcileRequest,
            ) -> ::core::result::Result<
                $crate::bindings::operator_host::reconciler::types::ReconcileResponse,
                $crate::bindings::operator_host::reconciler::types::ReconcileError,
            > {
                $crate::__private::reconcile::<$reconciler>(request)
            }

            fn finalize(
                request: $crate::bindings::operator_host::reconciler::types::ReconcileRequest,
            ) -> ::core::result::Result<
                $crate::bindings::operator_host::reconciler::types::FinalizeResponse,
                $crate::bindings::operator_host::reconciler::types::ReconcileError,
            > {
                $crate::__private::finalize::<$reconciler>(request)
            }

            fn validate(
                request: $crate::bindings::operator_host::reconciler::types::AdmissionRequest,
            ) -> $crate::bindings::operator_host::reconciler::types::Validation {
                $crate::__private::validate::<$reconciler>(request)
            }

            fn default(
                object: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, ::std::string::String> {
                $crate::__private::default::<$reconciler>(object)
            }

            fn convert(
                object: ::std::string::String,
                to_version: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, ::std::string::String> {
                $crate::__private::convert::<$reconciler>(object, &to_version)
            }
        }

        $crate::bindings::__export_reconciler_bindings!(__OperatorHostGuest with_types_in $crate::bindings);
        };
    };
}
