//! `operator-host render`: what a plugin would do for each CR of a file, offline.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use super::{Format, load, now_rfc3339};
use crate::policy::Policy;
use crate::render;
use crate::runtime::Runtime;

/// The arguments of `render`.
#[derive(Debug, clap::Args)]
pub(super) struct RenderArgs {
    /// The plugin component (.wasm).
    plugin: PathBuf,
    /// A YAML stream, as `kubectl apply -f` takes: each custom resource of the plugin's
    /// kind is rendered; other documents (a Secret the CR uses, say) are not, but are read as
    /// objects of the cluster, which the plugin's related declarations choose from.
    cr: PathBuf,
    /// Children to present as observed to every CR, as the host would have read them from
    /// the API server: a YAML stream or a `kind: List` of whole objects (apiVersion, kind,
    /// metadata.name, spec and status), such as `kubectl get deploy,svc -o yaml` prints.
    #[arg(long, value_name = "FILE")]
    observed: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Yaml)]
    output: Format,
    /// The time used to stamp condition transitions (RFC 3339); default: now.
    #[arg(long)]
    now: Option<String>,
    /// Check the plan against this policy file, as `run --policy` does (default: the
    /// default policy, as `run` without `--policy`).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
    /// Render each CR as given, as a host without webhooks serves it, rather than defaulted
    /// and validated by the plugin first, as the API server has `run --webhook-addr` do.
    #[arg(long)]
    no_admission: bool,
}

/// Prints the plan of each CR of the file, under `policy` (the file's, or the default).
pub(super) fn run(args: RenderArgs, runtime: &Arc<Runtime>, policy: &Policy) -> anyhow::Result<()> {
    let RenderArgs {
        plugin,
        cr,
        observed,
        output,
        now,
        policy: policy_file,
        no_admission,
    } = args;
    let mut plugin = load(runtime, &plugin)?;
    // Admitted and limited by the policy as `run` serves it.
    let admitted = policy
        .admit(&plugin.decl)
        .with_context(|| match &policy_file {
            Some(file) => format!("under the policy {}", file.display()),
            None => "under the default policy, as `run` without --policy (give the \
                 administrator's with --policy FILE)"
                .to_string(),
        })?;
    for warning in admitted {
        eprintln!("warning: {warning}");
    }
    plugin.limit_by(policy, runtime.limits());
    let now = now.unwrap_or_else(now_rfc3339);
    if no_admission {
        plugin.decl.implements = Default::default();
    }
    let rendered = render::render(&plugin, policy, &cr, observed.as_deref(), &now)?;
    for line in rendered.notes.iter().chain(&rendered.warnings) {
        eprintln!("{line}");
    }
    match output {
        Format::Yaml => print!("{}", render::to_yaml_stream(&rendered)),
        // One JSON document per CR, in file order (a stream, as `jq` reads it).
        Format::Json => {
            for (_, plan) in &rendered.plans {
                println!("{}", serde_json::to_string_pretty(&render::to_json(plan))?);
            }
        }
    }
    Ok(())
}
