//! The one place the host generates bindings for the plugin contracts in `wit/`, and maps
//! each contract the host serves onto the newest one.
//!
//! The host works with 0.2.0's types throughout; a 0.1.0 plugin's answers are converted to
//! them with 0.1.0's only behaviour (children applied in place, deleted on prune, no
//! barriers, nothing related), so nothing after a call knows which contract answered.

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

/// `operator-host:reconciler@0.2.0` (`wit/reconciler.wit`).
pub mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/reconciler.wit",
        world: "operator-host:reconciler/reconciler@0.2.0",
        additional_derives: [PartialEq],
    });

    pub use self::exports::operator_host::reconciler::plugin as guest;
    pub use self::operator_host::reconciler::host_log;
    pub use self::operator_host::reconciler::types;
}

pub use v0_2::types;

impl types::Child {
    /// `object` applied as 0.1.0 applies every child: in place, deleted on prune, no barrier.
    pub fn in_place(object: String) -> Self {
        types::Child {
            object,
            update: types::UpdateStrategy::InPlace,
            on_prune: types::DeletePolicy::Delete,
            ready_when: None,
        }
    }
}

/// A contract version the host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Contract {
    V0_1,
    V0_2,
}

impl Contract {
    /// Every contract the host serves, newest first.
    pub const SERVED: [Contract; 2] = [Contract::V0_2, Contract::V0_1];

    /// The newest contract: what new plugins and the SDKs target.
    pub const NEWEST: Contract = Contract::V0_2;

    /// The package, e.g. `operator-host:reconciler@0.2.0`.
    pub fn package(self) -> &'static str {
        match self {
            Contract::V0_1 => "operator-host:reconciler@0.1.0",
            Contract::V0_2 => "operator-host:reconciler@0.2.0",
        }
    }

    /// The interface every plugin of this contract exports.
    pub fn plugin_interface(self) -> &'static str {
        match self {
            Contract::V0_1 => "operator-host:reconciler/plugin@0.1.0",
            Contract::V0_2 => "operator-host:reconciler/plugin@0.2.0",
        }
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.package())
    }
}

/// 0.1.0's types and 0.2.0's, one into the other.
mod from_v0_1 {
    use super::{types as new, v0_1::types as old};

    impl From<old::GroupVersionKind> for new::GroupVersionKind {
        fn from(kind: old::GroupVersionKind) -> Self {
            new::GroupVersionKind {
                group: kind.group,
                version: kind.version,
                kind: kind.kind,
                plural: kind.plural,
                namespaced: kind.namespaced,
            }
        }
    }

    impl From<old::PluginInfo> for new::PluginInfo {
        fn from(info: old::PluginInfo) -> Self {
            new::PluginInfo {
                name: info.name,
                version: info.version,
                parent: info.parent.into(),
                children: info.children.into_iter().map(Into::into).collect(),
                needs_finalize: info.needs_finalize,
                crd: info.crd,
                related: Vec::new(),
            }
        }
    }

    impl From<old::ReconcileResponse> for new::ReconcileResponse {
        fn from(response: old::ReconcileResponse) -> Self {
            new::ReconcileResponse {
                children: response
                    .children
                    .into_iter()
                    .map(new::Child::in_place)
                    .collect(),
                status: response.status,
                requeue_after_ms: response.requeue_after_ms,
            }
        }
    }

    impl From<old::FinalizeResponse> for new::FinalizeResponse {
        fn from(response: old::FinalizeResponse) -> Self {
            new::FinalizeResponse {
                done: response.done,
                requeue_after_ms: response.requeue_after_ms,
            }
        }
    }

    impl From<old::ReconcileError> for new::ReconcileError {
        fn from(error: old::ReconcileError) -> Self {
            match error {
                old::ReconcileError::InvalidSpec(m) => new::ReconcileError::InvalidSpec(m),
                old::ReconcileError::Retry(m) => new::ReconcileError::Retry(m),
            }
        }
    }

    impl From<old::LogLevel> for new::LogLevel {
        fn from(level: old::LogLevel) -> Self {
            match level {
                old::LogLevel::Trace => new::LogLevel::Trace,
                old::LogLevel::Debug => new::LogLevel::Debug,
                old::LogLevel::Info => new::LogLevel::Info,
                old::LogLevel::Warn => new::LogLevel::Warn,
                old::LogLevel::Error => new::LogLevel::Error,
            }
        }
    }

    /// A 0.2.0 request as 0.1.0 has it: a 0.1.0 plugin declares nothing related.
    pub fn request(request: &new::ReconcileRequest) -> old::ReconcileRequest {
        old::ReconcileRequest {
            parent: request.parent.clone(),
            observed: request.observed.clone(),
        }
    }
}

pub use from_v0_1::request as request_v0_1;
