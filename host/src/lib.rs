//! operator-host: a Kubernetes operator host whose reconcilers are sandboxed wasm components.
//!
//! - [`runtime`]: the wasm engine, compile cache and sandboxed calls: the crate
//!   `operator-host-runtime`, which knows nothing of Kubernetes.
//! - [`plugin`]: a loaded plugin whose declaration (`info`) was validated.
//! - [`kinds`]: the release's kinds: a declared kind must be one of them as the API server
//!   serves it (plural, scope).
//! - [`plan`]: the one pure function from plugin output to what the host will do.
//! - [`related`]: the other objects a plugin reads, chosen and presented the same in `run`
//!   and `render`; [`labels`] parses the label selectors that choose them.
//! - [`policy`]: the administrator's policy: what each plugin may produce, and its limits.
//! - [`rbac`]: the ClusterRole the host needs for a set of plugins under a policy.
//! - [`render`]: offline rendering of a CR through a plugin, using [`plan`].
//! - [`diff`]: what a new plugin version would change on every live parent, against the
//!   serving one, using [`plan`] and [`policy`]; [`recording`]: the flight recorder whose
//!   recordings `replay` runs a plugin on.
//! - [`controller`]: the run loop against the API server (watch, apply, prune, status).
//! - [`registry`]: which version each plugin file serves; hot reload decisions; [`rollout`]:
//!   the gate a new version passes before it serves.
//! - [`watch`]: the debounced watcher of the plugin directory.
//! - [`cli`]: the `operator-host` command line (the binary's edge).
//! - [`leader`]: leader election with fencing (a Lease; only the holder writes).
//! - [`shard`]: sharding the parents over the replicas (shard Leases, labels, drain handshake).
//! - [`metrics`]: Prometheus metrics and health endpoints.
//! - [`faults`]: crash points for fault-injection tests (empty unless built with `fault-injection`).
//! - [`conformance`]: what the host relies on a plugin for, checked by calling it.
//! - [`testing`]: a plugin's logic through the host's checks, natively (plugins' `cargo test`).
//! - [`scaffold`]: `new`, a plugin to start from; [`componentize`]: a WASI preview1 module made
//!   a component of the contract.
//! - [`operator_plugin`]: the OperatorPlugin resource; [`oci`] and [`signature`]: plugins as
//!   signed OCI artifacts; [`files`]: files written whole.
//!
//! ARCHITECTURE.md (at the repository's root) shows how they work together.

// The wasm runtime is a crate of its own (no Kubernetes in it, checked by its dependencies);
// these keep the paths `crate::runtime` and `crate::files` of the rest of the host.
pub use operator_host_runtime as runtime;
pub use operator_host_runtime::files;

pub mod cli;
pub mod componentize;
pub mod conformance;
pub mod controller;
pub mod diff;
pub mod faults;
pub mod kinds;
pub mod labels;
pub mod leader;
pub mod metrics;
pub mod oci;
pub mod operator_plugin;
pub mod plan;
pub mod plugin;
pub mod policy;
pub mod rbac;
pub mod recording;
pub mod registry;
pub mod related;
pub mod render;
pub mod rollout;
pub mod scaffold;
pub mod shard;
pub mod signature;
#[cfg(test)]
mod test_support;
pub mod testing;
pub mod watch;
