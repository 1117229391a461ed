//! operator-host: a Kubernetes operator host whose reconcilers are sandboxed wasm components.
//!
//! - [`runtime`]: the wasm engine, compile cache and sandboxed calls: the crate
//!   `operator-host-runtime`, which knows nothing of Kubernetes, over the contract's plain
//!   types (the crate `operator-host-contract`, re-exported by it).
//! - the pure core: the crate `operator-host-core`, whose modules are re-exported here under
//!   their own names: [`names`], [`signature`], [`labels`], [`kinds`], [`declaration`],
//!   [`related`], [`plan`], [`selectors`], [`policy`], [`rbac`].
//! - plugins called with the core's rules: [`plugin`] (a loaded plugin and its call),
//!   [`render`], [`diff`] (with [`diff::live`], which reads the cluster), [`rollout`],
//!   [`conformance`]; [`recording`]: the flight recorder whose recordings `replay` runs a
//!   plugin on. (A plugin's logic runs natively through the same checks with the crate
//!   `operator-host-testing`, in the plugin's `cargo test`.)
//! - [`api`]: kube's dynamic API of a core [`kinds::Kind`], the one place a kind becomes an
//!   `Api`.
//! - [`controller`]: the run loop against the API server (watch, apply, prune, status).
//! - [`webhook`]: the admission and conversion webhooks of the plugins that validate, default
//!   or convert, served over HTTPS by every replica.
//! - [`registry`]: which version each plugin file serves; hot reload decisions.
//! - [`watch`]: the debounced watcher of the plugin directory.
//! - [`cli`]: the `operator-host` command line (the binary's edge).
//! - [`leader`]: leader election with fencing (a Lease; only the holder writes); [`replicas`]:
//!   what each replica serves, in a Lease `kubectl operator-host` reads.
//! - [`shard`]: sharding the parents over the replicas (shard Leases, labels, drain handshake).
//! - [`metrics`]: Prometheus metrics and health endpoints; [`telemetry`]: traces over OTLP.
//! - [`faults`]: crash points for fault-injection tests (empty unless built with `fault-injection`).
//! - [`scaffold`]: `new`, a plugin to start from; [`componentize`]: a WASI preview1 module made
//!   a component of the contract.
//! - [`operator_plugin`]: the OperatorPlugin resource; [`oci`]: plugins as signed OCI
//!   artifacts; [`files`]: files written whole.
//!
//! ARCHITECTURE.md (at the repository's root) shows how they work together.

// The wasm runtime is a crate of its own (no Kubernetes in it, checked by its dependencies);
// these keep the paths `crate::runtime` and `crate::files` of the rest of the host.
pub use operator_host_runtime as runtime;
pub use operator_host_runtime::files;
// The pure core is a crate of its own (no wasm engine or kube client in it, checked by `make
// lint`); these keep its modules at the paths `crate::plan`, `operator_host::policy`, ...
pub use operator_host_core::{
    declaration, kinds, labels, names, plan, policy, rbac, related, selectors, signature,
};

pub mod api;
pub mod cli;
pub mod componentize;
pub mod conformance;
pub mod controller;
pub mod diff;
pub mod faults;
pub mod leader;
pub mod metrics;
pub mod oci;
pub mod operator_plugin;
pub mod plugin;
pub mod recording;
pub mod registry;
pub mod render;
pub mod replicas;
pub mod rollout;
pub mod scaffold;
pub mod shard;
pub mod telemetry;
pub mod webhook;
#[cfg(test)]
use operator_host_core::test_support;
pub mod watch;
