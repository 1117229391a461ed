//! `operator-host pull`: a plugin pulled from an OCI registry into a file.

use std::path::PathBuf;

use anyhow::Context;

use super::{RegistryArgs, block_on};

/// The arguments of `pull`.
#[derive(Debug, clap::Args)]
pub(super) struct PullArgs {
    /// registry/repository:tag or registry/repository@sha256:<digest>.
    reference: String,
    /// The file to write (replaced whole, never half-written).
    #[arg(long, short)]
    output: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Pulls the artifact into the output file; prints REFERENCE@DIGEST.
pub(super) fn run(args: PullArgs) -> anyhow::Result<()> {
    let PullArgs {
        reference,
        output,
        registry,
    } = args;
    let access = registry.access()?;
    let pulled = block_on(crate::oci::pull(&reference, &access))??;
    crate::files::write_whole(&output, &pulled.bytes)
        .with_context(|| format!("writing {}", output.display()))?;
    println!(
        "{}@{}",
        crate::oci::repository_name(&reference)?,
        pulled.digest
    );
    Ok(())
}
