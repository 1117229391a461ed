//! The one place the host generates bindings for the plugin contract in `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "operator-host:reconciler/reconciler@0.1.0",
});

pub use self::exports::operator_host::reconciler::plugin as guest;
pub use self::operator_host::reconciler::host_log;
pub use self::operator_host::reconciler::types;

/// The contract version this host implements; a plugin must export exactly this.
pub const CONTRACT: &str = "operator-host:reconciler@0.1.0";

/// The name of the interface every plugin exports.
pub const PLUGIN_INTERFACE: &str = "operator-host:reconciler/plugin@0.1.0";
