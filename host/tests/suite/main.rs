//! The host's tests that need no cluster, as one test binary: one link instead of one per
//! area. Each module is an area; `cargo test -p operator-host --test suite runtime::` runs one.

mod util;

mod cli;
mod conformance;
mod contracts;
mod etcd_render;
mod guest_languages;
mod layers;
mod mysql_render;
mod pod_security;
mod policy;
mod rbac;
mod reload;
mod runtime;
mod scaffold;
mod shutdown;
