//! `operator-host replay`: a plugin run offline on the flight recorder's recordings, alone
//! (what it would do) or beside another version (what would change).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use super::diff::DiffFormat;
use super::{Format, load_file_or_reference, now_rfc3339};
use crate::diff::{Report, Version};
use crate::plan::PlanError;
use crate::policy::Policy;
use crate::recording::{Recording, Recordings};
use crate::runtime::Runtime;

/// How `replay` prints: `render`'s formats alone, `diff`'s with --against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ReplayFormat {
    Yaml,
    Json,
    Text,
}

/// The arguments of `replay`.
#[derive(Debug, clap::Args)]
pub(super) struct ReplayArgs {
    /// The plugin to run: a .wasm file or an OCI reference.
    plugin: String,
    /// Recordings (`run --record DIR` wrote them): files, or directories of them.
    #[arg(required = true)]
    recordings: Vec<PathBuf>,
    /// Another version (a file or a reference) to compare with: prints what would change, as
    /// `diff` does, instead of what the plugin would do.
    #[arg(long, value_name = "FILE|REFERENCE")]
    against: Option<String>,
    /// The host's policy file, as `run --policy` (default: the default policy).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
    /// Output format: without --against, `yaml` (a stream, as `render`, the default) or
    /// `json`; with it, `text` (the default) or `json` (as `diff`).
    #[arg(long, short, value_enum)]
    output: Option<ReplayFormat>,
    /// With --against: the time both versions stamp condition transitions with (default:
    /// now); alone, each recording is replayed at the time it was recorded.
    #[arg(long)]
    now: Option<String>,
    #[command(flatten)]
    registry: super::RegistryArgs,
}

/// Why `replay` could not run; exits 2, never 1 or 3 (which say how the plugin did).
#[derive(Debug, thiserror::Error)]
#[error("the recordings were not replayed")]
pub(super) struct ReplayFailed;

/// Runs `replay`: exits 1 when the plugin fails on a recording (or, with --against, when
/// anything would change), 3 when it rejects a recorded spec, 2 when it could not run.
pub(super) fn run(
    args: ReplayArgs,
    runtime: &Arc<Runtime>,
    policy: &Policy,
) -> anyhow::Result<ExitCode> {
    replay(args, runtime, policy).context(ReplayFailed)
}

fn replay(args: ReplayArgs, runtime: &Arc<Runtime>, policy: &Policy) -> anyhow::Result<ExitCode> {
    let policy = Arc::new(policy.clone());
    let load = |source: &str| -> anyhow::Result<crate::plugin::Plugin> {
        let mut plugin = load_file_or_reference(runtime, source, &args.registry)?;
        plugin.limit_by(&policy, runtime.limits());
        plugin.policy = policy.clone();
        Ok(plugin)
    };
    let plugin = load(&args.plugin)?;
    let recordings: Vec<Recording> = Recording::read_all(&args.recordings)?
        .into_iter()
        .map(|(_, recording)| recording)
        .collect();
    anyhow::ensure!(
        !recordings.is_empty(),
        "no recordings in {}",
        args.recordings
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(other) = recordings.iter().find(|r| r.plugin != plugin.decl.name) {
        anyhow::bail!(
            "a recording of plugin {:?} cannot be replayed by plugin {:?}",
            other.plugin,
            plugin.decl.name
        );
    }
    if let Some(against) = &args.against {
        let serving = load(against)?;
        let format = match args.output {
            None | Some(ReplayFormat::Text) => DiffFormat::Text,
            Some(ReplayFormat::Json) => DiffFormat::Json,
            Some(ReplayFormat::Yaml) => {
                anyhow::bail!("-o yaml: with --against, expected text or json")
            }
        };
        let now = args.now.clone().unwrap_or_else(now_rfc3339);
        let report = Report::make(
            (&serving, Version::of(&serving, against)),
            (&plugin, Version::of(&plugin, &args.plugin)),
            &Recordings::new(&recordings),
            &now,
        );
        super::diff::print(&report, format)?;
        return Ok(super::diff::exit_code(&report));
    }
    let format = match args.output {
        None | Some(ReplayFormat::Yaml) => Format::Yaml,
        Some(ReplayFormat::Json) => Format::Json,
        Some(ReplayFormat::Text) => {
            anyhow::bail!("-o text: without --against, expected yaml or json")
        }
    };
    let mut plans = Vec::new();
    let (mut failed, mut rejected) = (false, false);
    for recording in &recordings {
        let inputs = recording.inputs();
        let identity = crate::render::identity(&inputs.parent);
        let now = args
            .now
            .clone()
            .unwrap_or_else(|| recording.recorded_at.clone());
        match crate::diff::plan_under_policy(&plugin, &inputs, &now) {
            Ok(plan) => plans.push((identity, plan)),
            Err(error) => {
                eprintln!("error: {identity}: {error}");
                match error {
                    PlanError::InvalidSpec(_) => rejected = true,
                    _ => failed = true,
                }
            }
        }
    }
    let rendered = crate::render::Rendered {
        plans,
        notes: Vec::new(),
        warnings: Vec::new(),
    };
    match format {
        Format::Yaml => print!("{}", crate::render::to_yaml_stream(&rendered)),
        Format::Json => {
            for (_, plan) in &rendered.plans {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&crate::render::to_json(plan))?
                );
            }
        }
    }
    Ok(match (failed, rejected) {
        (true, _) => ExitCode::from(super::EXIT_FAILURE),
        (false, true) => ExitCode::from(super::EXIT_REJECTED),
        (false, false) => ExitCode::SUCCESS,
    })
}
