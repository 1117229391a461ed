//! The integration tests against the local control plane (`deploy/devcluster`), as one test
//! binary: one link instead of one per area. Each module is an area;
//! `cargo test -p operator-host-tests --test cluster hot_reload::` runs one.

mod all_namespaces;
mod apply_options;
mod control_plane_faults;
mod crash_points;
mod crd_ownership;
mod devcluster;
mod diff;
mod etcd;
mod fault_proxy;
mod hostile;
mod hot_reload;
mod image;
mod in_cluster;
mod leader_election;
mod manifests;
mod mysql;
mod observe;
mod oci;
mod operator_plugin;
mod pause;
mod plugin_changes;
mod policy;
mod prune_guard;
mod rbac;
mod real_node;
mod related_resources;
mod replay;
mod rollout_gate;
mod run_loop;
mod sharding;
mod spec_mutation;
mod stale_cache;
mod start_stop;
mod status_truth;
mod unobserved_state;
