//! `operator-host componentize`: a WASI preview1 module made a plugin component.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::plugin::Plugin;
use crate::runtime::Runtime;

/// The arguments of `componentize`.
#[derive(Debug, clap::Args)]
pub(super) struct ComponentizeArgs {
    /// The core module (.wasm).
    module: PathBuf,
    /// The component to write (replaced whole, never half-written).
    #[arg(long, short)]
    output: PathBuf,
}

/// Writes the component, once it loads as a plugin.
pub(super) fn run(args: ComponentizeArgs, runtime: &Arc<Runtime>) -> anyhow::Result<()> {
    let ComponentizeArgs { module, output } = args;
    let component = crate::componentize::componentize(&module)?;
    // A component the host would refuse is not written: the load says why.
    let plugin = Plugin::from_compiled(&output, runtime.load_bytes(&output, &component)?)?;
    crate::files::write_whole(&output, &component)
        .with_context(|| format!("writing {}", output.display()))?;
    eprintln!(
        "{}: plugin {} {} of {} ({} bytes)",
        output.display(),
        plugin.decl.name,
        plugin.decl.version,
        plugin.compiled.contract().package(),
        component.len()
    );
    Ok(())
}
