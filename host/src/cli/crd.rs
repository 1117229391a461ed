//! `operator-host crd`: the CRD of a plugin's parent kind, or the OperatorPlugin CRD.

use std::path::PathBuf;
use std::sync::Arc;

use super::load;
use crate::runtime::Runtime;

/// The arguments of `crd`.
#[derive(Debug, clap::Args)]
pub(super) struct CrdArgs {
    /// The plugin component (.wasm).
    #[arg(required_unless_present = "operator_plugin")]
    plugin: Option<PathBuf>,
    /// Print the OperatorPlugin CRD (what `run --plugins-from-cluster --install-crds`
    /// installs) instead.
    #[arg(long, conflicts_with = "plugin")]
    operator_plugin: bool,
}

/// Prints the CRD as YAML.
pub(super) fn run(args: CrdArgs, runtime: &Arc<Runtime>) -> anyhow::Result<()> {
    let CrdArgs {
        plugin,
        operator_plugin: _,
    } = args;
    let crd = match plugin {
        Some(plugin) => load(runtime, &plugin)?.decl.crd,
        None => <crate::operator_plugin::OperatorPlugin as kube::CustomResourceExt>::crd(),
    };
    print!("{}", serde_yaml::to_string(&crd)?);
    Ok(())
}
