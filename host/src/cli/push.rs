//! `operator-host push`: a plugin pushed to an OCI registry as a Wasm artifact.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use super::{RegistryArgs, block_on, load};
use crate::runtime::Runtime;

/// The arguments of `push`.
#[derive(Debug, clap::Args)]
pub(super) struct PushArgs {
    /// The plugin component (.wasm); it must load as a plugin of this host's contract.
    plugin: PathBuf,
    /// Where to push it: registry/repository:tag.
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Pushes the plugin; prints REFERENCE@DIGEST.
pub(super) fn run(args: PushArgs, runtime: &Arc<Runtime>) -> anyhow::Result<()> {
    let PushArgs {
        plugin: path,
        reference,
        registry,
    } = args;
    let access = registry.access()?;
    let plugin = load(runtime, &path)?;
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let (imports, exports) = plugin.compiled.world();
    let artifact = crate::oci::Artifact {
        bytes: &bytes,
        name: &plugin.decl.name,
        version: &plugin.decl.version,
        imports,
        exports,
        created: crate::oci::created_now(),
    };
    let digest = block_on(crate::oci::push(&reference, &artifact, &access))??;
    println!("{}@{digest}", crate::oci::repository_name(&reference)?);
    Ok(())
}
