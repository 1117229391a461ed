//! `operator-host diff`: a new plugin version run against the serving one on every live parent.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use super::{RegistryArgs, block_on, kube_config, load_file_or_reference, now_rfc3339};
use crate::diff::{self, Report, Scope, Version};
use crate::plugin::Plugin;
use crate::policy::Policy;
use crate::runtime::Runtime;

/// Exit code when the new version would change something (as `diff` and `kubectl diff`).
const EXIT_CHANGES: u8 = 1;

/// How `diff` prints its report.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum DiffFormat {
    /// Each parent that would change, its children as unified diffs, then a summary.
    Text,
    /// One JSON document: `new`, `serving`, `parents` (those that would change) and `summary`.
    Json,
}

/// The arguments of `diff`.
#[derive(Debug, clap::Args)]
pub(super) struct DiffArgs {
    /// The new version: a .wasm file, or an OCI reference (registry/repository:tag or
    /// @sha256:<digest>).
    plugin: String,
    /// The version to compare with: a file or an OCI reference (default: the version the
    /// replicas report serving in the plugin's OperatorPlugin; a plugin served from a plugin
    /// directory needs this).
    #[arg(long, value_name = "FILE|REFERENCE")]
    against: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Only the parents in this namespace; repeat for several (default: all namespaces).
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    namespaces: Vec<String>,
    /// Only the parents with these labels (a label selector such as tier=gold).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// The host's policy file: both versions are checked against it, as `run --policy` does
    /// (with the OperatorPlugin's spec.policy entry, when the serving version comes from one).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = DiffFormat::Text)]
    output: DiffFormat,
    /// The time used to stamp condition transitions (RFC 3339); default: now.
    #[arg(long)]
    now: Option<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Why a diff could not be made; exits 2, never 1 (which says that something would change).
#[derive(Debug, thiserror::Error)]
#[error("no diff was made")]
pub(super) struct DiffFailed;

/// Runs `diff`: prints the report; exits 1 when the new version would change anything.
pub(super) fn run(
    args: DiffArgs,
    runtime: &Arc<Runtime>,
    policy: &Policy,
) -> anyhow::Result<ExitCode> {
    let report = make_report(&args, runtime, policy).context(DiffFailed)?;
    print(&report, args.output)?;
    Ok(exit_code(&report))
}

/// Prints `report` in `format`.
pub(super) fn print(report: &Report, format: DiffFormat) -> anyhow::Result<()> {
    match format {
        DiffFormat::Text => print!("{}", report.to_text()),
        DiffFormat::Json => println!("{}", serde_json::to_string_pretty(report)?),
    }
    Ok(())
}

/// `1` when the report says something would change, else `0`.
pub(super) fn exit_code(report: &Report) -> ExitCode {
    match report.changes() {
        true => ExitCode::from(EXIT_CHANGES),
        false => ExitCode::SUCCESS,
    }
}

fn make_report(args: &DiffArgs, runtime: &Arc<Runtime>, policy: &Policy) -> anyhow::Result<Report> {
    let mut new = load_file_or_reference(runtime, &args.plugin, &args.registry)?;
    let name = new.decl.name.clone();
    let against = match &args.against {
        Some(against) => Some(load_file_or_reference(runtime, against, &args.registry)?),
        None => None,
    };
    block_on(async {
        let client = kube::Client::try_from(kube_config(args.kubeconfig.as_deref()).await?)
            .context("creating the Kubernetes client")?;
        let (mut serving, serving_source, policy) = match (against, &args.against) {
            (Some(serving), Some(source)) => (serving, source.clone(), policy.clone()),
            _ => {
                let served = diff::live::served_version(&client, &name).await?;
                let mut access = args.registry.access()?;
                access.plain_http |= served.plain_http;
                let pulled = crate::oci::pull(&served.reference, &access).await?;
                let path = std::path::Path::new(&served.reference);
                let compiled = runtime.load_quick(path, &pulled.bytes, None)?;
                let policy = match served.policy {
                    Some(rules) => policy.with_entry(
                        &name,
                        rules,
                        &format!("spec.policy of OperatorPlugin {name}"),
                    )?,
                    None => policy.clone(),
                };
                (
                    Plugin::from_compiled(path, compiled)?,
                    served.reference,
                    policy,
                )
            }
        };
        anyhow::ensure!(
            serving.decl.name == name,
            "{} is plugin {name:?} and {serving_source} is plugin {:?}: a diff compares two \
             versions of one plugin",
            args.plugin,
            serving.decl.name
        );
        // Both within the limits and under the policy the plugin is served with.
        let policy = Arc::new(policy);
        for version in [&mut serving, &mut new] {
            version.limit_by(&policy, runtime.limits());
            version.policy = policy.clone();
        }
        let scope = Scope {
            namespaces: args.namespaces.clone(),
            selector: args.selector.clone(),
        };
        let state = diff::live::read(&client, [&serving, &new], &scope).await?;
        let now = args.now.clone().unwrap_or_else(now_rfc3339);
        anyhow::Ok(Report::make(
            (&serving, Version::of(&serving, &serving_source)),
            (&new, Version::of(&new, &args.plugin)),
            &state,
            &now,
        ))
    })?
}
