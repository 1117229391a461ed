//! `operator-host rollback`: an OperatorPlugin back to the version that served before, in one
//! step (its `spec.source` pinned to `status.previousDigest`).

use std::path::PathBuf;

use anyhow::Context;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::{block_on, kube_config};
use crate::operator_plugin::OperatorPlugin;

/// The arguments of `rollback`.
#[derive(Debug, clap::Args)]
pub(super) struct RollbackArgs {
    /// The OperatorPlugin (named as its plugin).
    name: String,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
}

/// Pins the OperatorPlugin's source to the digest that served before; prints the change.
pub(super) fn run(args: RollbackArgs) -> anyhow::Result<()> {
    block_on(async {
        let client = kube::Client::try_from(kube_config(args.kubeconfig.as_deref()).await?)
            .context("creating the Kubernetes client")?;
        let api: Api<OperatorPlugin> = Api::all(client);
        let name = &args.name;
        let resource = api
            .get(name)
            .await
            .with_context(|| format!("reading OperatorPlugin {name:?}"))?;
        let status = resource.status.clone().unwrap_or_default();
        let Some(previous) = status.previous_digest else {
            anyhow::bail!(
                "OperatorPlugin {name:?} has no status.previousDigest: no other version has \
                 served since the host recorded it, so there is nothing to go back to"
            );
        };
        let source = &resource.spec.source;
        let rolled_back = format!("{}@{previous}", crate::oci::repository_name(source)?);
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"source": rolled_back}})),
        )
        .await
        .with_context(|| format!("setting spec.source of OperatorPlugin {name:?}"))?;
        println!(
            "OperatorPlugin {name}: spec.source {rolled_back} (was {source}, serving {})",
            status.digest.as_deref().unwrap_or("nothing")
        );
        anyhow::Ok(())
    })?
}
