//! Integration-test support: the shared local control plane and per-test namespaces.
pub mod campaign;
pub mod devcluster;
pub mod election;
pub mod fault_proxy;
pub mod host;
pub mod hostile;
pub mod manifests;
pub mod memcached;
pub mod mysql;
pub mod oci_registry;
pub mod operator_plugins;
pub mod oracle;
pub mod process_host;
pub mod recorder;
pub mod service_account;
pub mod squatter;
pub mod staged;
