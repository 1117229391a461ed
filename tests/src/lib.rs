//! Integration-test support: the shared local control plane and per-test namespaces.
pub mod campaign;
pub mod devcluster;
pub mod election;
pub mod fault_proxy;
pub mod host;
pub mod hostile;
pub mod image;
pub mod kubectl_plugin;
pub mod manifests;
pub mod memcached;
pub mod mysql;
pub mod oci_registry;
pub mod operator_plugins;
pub mod oracle;
pub mod otlp;
pub mod process_host;
pub mod recorder;
pub mod service_account;
pub mod squatter;
pub mod staged;
pub mod swap_memory;
pub mod webhooks;

/// The sizes a benchmark runs at: its whole-number arguments, or `default` without any.
pub fn bench_sizes(default: &[usize]) -> Vec<usize> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        default.to_vec()
    } else {
        sizes
    }
}
