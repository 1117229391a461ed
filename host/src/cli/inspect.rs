//! `operator-host inspect`: what a plugin declares.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Format, load};
use crate::runtime::Runtime;

/// The arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub(super) struct InspectArgs {
    /// The plugin component (.wasm).
    plugin: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Prints the plugin's declaration.
pub(super) fn run(args: InspectArgs, runtime: &Arc<Runtime>) -> anyhow::Result<()> {
    let InspectArgs {
        plugin: path,
        output,
    } = args;
    let plugin = load(runtime, &path)?;
    let decl = &plugin.decl;
    // Contract 0.3.0's admission and conversion functions the host calls.
    let implements: Vec<&str> = [
        ("validate", decl.implements.validate),
        ("validateDelete", decl.implements.validate_delete),
        ("default", decl.implements.default),
        ("convert", decl.implements.convert),
    ]
    .into_iter()
    .filter_map(|(name, implemented)| implemented.then_some(name))
    .collect();
    let description = serde_json::json!({
        "name": decl.name,
        "version": decl.version,
        "contract": plugin.compiled.contract().package(),
        "parent": decl.parent.to_string(),
        "plural": decl.parent.plural,
        "namespaced": decl.parent.namespaced,
        "children": decl.children.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "needsFinalize": decl.needs_finalize,
        "implements": implements,
        "size": plugin.compiled.size(),
        "sha256": decl.content_hash,
    });
    match output {
        Format::Yaml => print!("{}", serde_yaml::to_string(&description)?),
        Format::Json => println!("{}", serde_json::to_string_pretty(&description)?),
    }
    Ok(())
}
