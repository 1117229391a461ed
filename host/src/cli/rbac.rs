//! `operator-host rbac`: the ClusterRole (and Roles) the host needs for a set of plugins.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use super::{LeaderElectArgs, RegistryArgs, block_on, kube_config, load_file_or_reference};
use crate::controller;
use crate::policy::Policy;
use crate::rbac;
use crate::runtime::Runtime;

/// The arguments of `rbac`.
#[derive(Debug, clap::Args)]
pub(super) struct RbacArgs {
    /// The plugin components: .wasm files, or OCI references (registry/repository:tag or
    /// @sha256:<digest>, what an OperatorPlugin's spec.source names) to pull.
    #[arg(required = true)]
    plugins: Vec<String>,
    /// Policy file: child kinds it forbids get no rule.
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
    /// Include what `run --install-crds` needs (CustomResourceDefinitions).
    #[arg(long)]
    install_crds: bool,
    /// Name of the ClusterRole.
    #[arg(long, default_value = rbac::DEFAULT_NAME)]
    name: String,
    /// With `--leader-elect`: also print the Role for the Lease.
    #[command(flatten)]
    leader_election: LeaderElectArgs,
    /// Include what `run --plugins-from-cluster` needs (OperatorPlugins, and a Role for
    /// the pull Secrets of the host's namespace: --leader-elect-namespace or
    /// $POD_NAMESPACE).
    #[arg(long)]
    plugins_from_cluster: bool,
    /// Include what `run --webhook-addr` needs: the Secret of the webhooks' CA (a Role in
    /// the host's namespace) and, with --install-crds, the webhook configurations.
    #[arg(long)]
    webhooks: bool,
    /// How to reach the registry of plugins given as references.
    #[command(flatten)]
    registry: RegistryArgs,
    /// Check the plugins' custom resource kinds against this cluster's discovery, as `run`
    /// does before it serves them (the release's own kinds are checked without a cluster).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
}

/// Prints the ClusterRole (and the Roles the options need) as YAML.
pub(super) fn run(args: RbacArgs, runtime: &Arc<Runtime>, policy: &Policy) -> anyhow::Result<()> {
    let RbacArgs {
        plugins,
        policy: _,
        install_crds,
        name,
        leader_election,
        plugins_from_cluster,
        webhooks,
        registry,
        kubeconfig,
    } = args;
    let mut declarations = Vec::new();
    for plugin in &plugins {
        let plugin = load_file_or_reference(runtime, plugin, &registry)?;
        for warning in policy.admit(&plugin.decl)? {
            eprintln!("warning: plugin {}: {warning}", plugin.decl.name);
        }
        declarations.push(plugin.decl);
    }
    if let Some(path) = &kubeconfig {
        block_on(async {
            let client = kube::Client::try_from(kube_config(Some(path)).await?)
                .context("creating the Kubernetes client")?;
            for decl in &declarations {
                controller::check_served_kinds(&client, decl).await?;
            }
            anyhow::Ok(())
        })??;
    }
    let lease = leader_election.leader_elect.then(|| rbac::LeaseName {
        namespace: leader_election.namespace(),
        name: leader_election.leader_elect_lease.clone(),
        sharded: leader_election.shard,
    });
    let options = rbac::Options {
        name,
        install_crds,
        lease,
        plugins_from_cluster: plugins_from_cluster
            .then(|| crate::operator_plugin::rbac_grants(leader_election.namespace())),
        // Every `run` reports what it serves, with or without an election.
        replica_report: Some(rbac::ReportLease {
            namespace: leader_election.namespace(),
            name: crate::replicas::report_lease_name(&leader_election.leader_elect_lease),
        }),
        webhooks: webhooks.then(|| rbac::WebhookCa {
            namespace: leader_election.namespace(),
            secret: crate::webhook::ca_secret_name(&leader_election.leader_elect_lease),
        }),
    };
    let role = rbac::cluster_role(&declarations, policy, &options);
    print!("{}", rbac::to_yaml(&role, &options, &declarations)?);
    Ok(())
}
