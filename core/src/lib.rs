//! The pure core of operator-host: what a plugin declares and answers, and every rule the host
//! applies to it, with no cluster in sight.
//!
//! This crate may know the contract's plain types (`operator-host-contract`), Kubernetes' types
//! (k8s-openapi, and kube's types without its client) and serde. It may not know the wasm
//! engine (the host's `plugin`, `render`, `diff` and `conformance` call plugins with these
//! rules), kube's client or runtime, tokio, or anything that talks to an API server: the
//! authors' testing crate (`operator-host-testing`) builds on it in seconds. `make lint`
//! checks its dependencies, and `host/tests/suite/layers.rs` that its modules form no cycle,
//! in the order listed here, bottom first:
//!
//! - [`names`]: the names Kubernetes accepts (DNS-1123 labels and subdomains).
//! - [`signature`]: cosign-compatible signatures of plugin artifacts.
//! - [`labels`]: the host's labels and reserved names; label selectors.
//! - [`kinds`]: the one kind type ([`kinds::Kind`]) and the release's built-in kinds.
//! - [`declaration`]: what a plugin declares in `info`, validated.
//! - [`related`]: the other objects a plugin reads, chosen and presented the same everywhere.
//! - [`plan`]: the one pure function from a plugin's answer to what the host will do.
//! - [`selectors`]: which children's pods each selector of a plan selects (overlaps warned).
//! - [`policy`]: the administrator's policy: what each plugin may produce, and its limits.
//! - [`rbac`]: the ClusterRole the host needs for a set of plugins under a policy.
//!
//! ARCHITECTURE.md (at the repository's root) shows where this crate sits.

use operator_host_contract as contract;

pub mod declaration;
pub mod kinds;
pub mod labels;
pub mod names;
pub mod plan;
pub mod policy;
pub mod rbac;
pub mod related;
pub mod selectors;
pub mod signature;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
