//! `operator-host conformance`: what the host relies on a plugin for, checked by calling it.

use std::path::PathBuf;
use std::sync::Arc;

use super::load;
use crate::policy::Policy;
use crate::render;
use crate::runtime::Runtime;

/// The arguments of `conformance`.
#[derive(Debug, clap::Args)]
pub(super) struct ConformanceArgs {
    /// The plugin component (.wasm).
    plugin: PathBuf,
    /// YAML streams of sample CRs, which must be valid: each CR of the plugin's kind is
    /// checked; other documents are read as objects of the cluster, as `render` reads them.
    crs: Vec<PathBuf>,
    /// Check the answers against this policy file (default: the default policy).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
}

/// Prints a line per check; fails if one failed.
pub(super) fn run(
    args: ConformanceArgs,
    runtime: &Arc<Runtime>,
    policy: &Policy,
) -> anyhow::Result<()> {
    let ConformanceArgs {
        plugin: path,
        crs,
        policy: _,
    } = args;
    // Checked within the limits the policy gives the plugin, as `run` serves it.
    let mut plugin = load(runtime, &path)?;
    plugin.limit_by(policy, runtime.limits());
    let sample = render::Sample::read(&plugin, &crs)?;
    if !crs.is_empty() && sample.parents.is_empty() {
        anyhow::bail!(
            "{} hold no {}: nothing to check the plugin's answers on",
            crs.iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            plugin.decl.parent
        );
    }
    for note in sample.notes(&plugin) {
        eprintln!("{note}");
    }
    let report = crate::conformance::check(&plugin, &sample, policy);
    print!("{}", report.to_text());
    let failed = report.failed();
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} checks of {} failed",
            report.checks.len(),
            path.display()
        );
    }
    Ok(())
}
