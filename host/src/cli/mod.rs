//! The `operator-host` command line: parse, configure, run. This is the binary's edge (the
//! only module that uses `anyhow`); it lives in the library so that test binaries (the
//! fault-injection tests' crashable host) run exactly this command line. Each subcommand has a
//! file of its own (its arguments and what it does); this one parses, sets up what they share
//! (logs, the policy, the wasm runtime) and maps errors to exit codes.

mod componentize;
mod conformance;
mod crd;
mod diff;
mod generate_key;
mod inspect;
mod kubectl;
mod new;
mod pull;
mod push;
mod rbac;
mod render;
mod replay;
mod rollback;
mod run;
mod sign;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::controller;
use crate::leader;
use crate::plan::PlanError;
use crate::plugin::Plugin;
use crate::policy::Policy;
use crate::runtime::{CompileCache, Limits, Runtime, RuntimeConfig};
use crate::scaffold;
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Exit code when the plugin rejected the input (an invalid spec).
const EXIT_REJECTED: u8 = 3;
/// Exit code when a file could not be loaded, or the command line was wrong.
const EXIT_USAGE: u8 = 2;
/// Exit code for any other failure (a plugin trap, invalid plugin output, ...).
const EXIT_FAILURE: u8 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "operator-host",
    version,
    about = "A Kubernetes operator host whose reconcilers are WebAssembly components"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Log format: `text` for people, `json` (one object a line) for clusters. The level is
    /// `info` unless RUST_LOG says otherwise.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Leader election (`run --leader-elect`, and the Lease rule of `rbac --leader-elect`).
#[derive(Debug, clap::Args)]
struct LeaderElectArgs {
    /// Take part in leader election: only the holder of the Lease reconciles and writes; the
    /// others stand by with their plugins loaded and caches warm.
    #[arg(long)]
    leader_elect: bool,
    /// Name of the Lease (one per host deployment).
    #[arg(long, default_value = leader::DEFAULT_LEASE_NAME)]
    leader_elect_lease: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE, the in-cluster namespace, or
    /// `default`).
    #[arg(long)]
    leader_elect_namespace: Option<String>,
    /// Share the parents of every plugin among all replicas (each holds a shard Lease in the
    /// Lease's namespace; the leader assigns each parent to a live shard and moves parents
    /// with a drain handshake as replicas come and go). Needs --leader-elect.
    #[arg(long, requires = "leader_elect")]
    shard: bool,
}

impl LeaderElectArgs {
    fn namespace(&self) -> String {
        self.leader_elect_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
                    .map(|ns| ns.trim().to_string())
            })
            .unwrap_or_else(|| "default".into())
    }
}

#[derive(Debug, clap::Args)]
struct RuntimeArgs {
    /// Directory of compiled plugins (default: the user cache directory).
    #[arg(long, global = true, env = "OPERATOR_HOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile plugins every time instead of using the compile cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// CPU time one reconcile call may use, in milliseconds (a call the host starves of CPU
    /// stops after ten times as long, as HostOverloaded).
    #[arg(long, global = true, default_value_t = 1000)]
    call_timeout_ms: u64,
    /// Memory limit of one plugin instance, in MiB.
    #[arg(long, global = true, default_value_t = 64)]
    memory_limit_mib: usize,
    /// Largest plugin response, in MiB.
    #[arg(long, global = true, default_value_t = 4)]
    max_response_mib: usize,
}

// Made once per process: a boxed variant would only complicate the matches on it below.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run every plugin in a directory as a controller against the cluster; plugin files
    /// added, replaced or removed while it runs take effect without a restart.
    Run(run::RunArgs),
    /// Print the ClusterRole the host needs to run these plugins (under a policy).
    Rbac(rbac::RbacArgs),
    /// Print the children and status a plugin computes for each CR of a file, without a
    /// cluster.
    Render(render::RenderArgs),
    /// Show what a new version of a plugin would change on every live parent of its kind,
    /// against the version the cluster serves: both run on each parent's real inputs through
    /// the plan and the policy, as `run` would; only lists are read, nothing is written.
    /// Exits 0 when nothing would change, 1 when something would, 2 when no diff was made.
    Diff(diff::DiffArgs),
    /// Run a plugin offline on the flight recorder's recordings (`run --record DIR`): prints
    /// what it would do for each recorded parent, as `render` does, or with --against another
    /// version what would change, as `diff` does. A recording of a failing parent is a
    /// regression test for the fix.
    Replay(replay::ReplayArgs),
    /// Put an OperatorPlugin back on the version that served before the current one, in one
    /// step: its spec.source is pinned to status.previousDigest (kept in the host's digest
    /// store, so it serves while the registry is down). It passes the rollout gate like any
    /// other version.
    Rollback(rollback::RollbackArgs),
    /// Print the CRD of a plugin's parent kind, or operator-host's OperatorPlugin CRD, as YAML.
    Crd(crd::CrdArgs),
    /// Push a plugin to an OCI registry as a Wasm artifact (CNCF layout: config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer); prints
    /// REFERENCE@DIGEST.
    Push(push::PushArgs),
    /// Pull a plugin from an OCI registry into a file; prints REFERENCE@DIGEST.
    Pull(pull::PullArgs),
    /// Sign the artifact a reference names, as `cosign sign --key` does (a `.sig` manifest
    /// beside it); prints the signed REFERENCE@DIGEST.
    Sign(sign::SignArgs),
    /// Check that a cosign signature of the artifact a reference names verifies with a
    /// public key, as an OperatorPlugin's spec.verify does; prints the key's fingerprint.
    Verify(verify::VerifyArgs),
    /// Write a new signing key pair: PREFIX.key (private, mode 0600) and PREFIX.pub (for
    /// OperatorPlugins' spec.verify.keys, or the policy's signatureKeys).
    GenerateKey(generate_key::GenerateKeyArgs),
    /// Write a new plugin to start from (a Rust crate, a Python or an npm package): the plugin's build
    /// settings, a Deployment and Service operator with its CRD type, a unit test and a sample
    /// CR (see its README.md).
    New(new::NewArgs),
    /// Check what the host relies on a plugin for, on a built component of any language:
    /// its declaration, the same answer to the same request, no state between calls, the
    /// invalid-spec error for a spec its schema refuses, answers the host and the policy
    /// accept, calls well inside the timeout. Prints a line per check; exits 1 if one fails.
    Conformance(conformance::ConformanceArgs),
    /// Make a plugin component of a WASI preview1 core module that exports the contract's
    /// functions: a Go plugin built with `GOOS=wasip1 GOARCH=wasm go build
    /// -buildmode=c-shared` and the Go SDK (plugins/sdk-go). Loads the result as a plugin
    /// before writing it.
    Componentize(componentize::ComponentizeArgs),
    /// Print what a plugin declares.
    Inspect(inspect::InspectArgs),
    /// What the host serves and how its parents fare, read from the cluster: the same as
    /// `kubectl operator-host` with this binary linked as `kubectl-operator_host` on PATH.
    Kubectl(kubectl::KubectlArgs),
}

/// How to reach an OCI registry (push, pull).
#[derive(Debug, clap::Args)]
struct RegistryArgs {
    /// Speak plain HTTP to the registry (one on loopback), as oras's --plain-http.
    #[arg(long)]
    plain_http: bool,
    /// Registry user; its password comes from --password-stdin or
    /// $OPERATOR_HOST_REGISTRY_PASSWORD. Without it: the docker config's credentials
    /// ($DOCKER_CONFIG/config.json or ~/.docker/config.json), else anonymous.
    #[arg(long, short)]
    username: Option<String>,
    /// Read the registry password from standard input.
    #[arg(long, requires = "username")]
    password_stdin: bool,
}

impl RegistryArgs {
    fn access(&self) -> anyhow::Result<crate::oci::Access> {
        use crate::oci::Credentials;
        let auth = match &self.username {
            None => Credentials::DockerConfig,
            Some(username) => {
                let password = if self.password_stdin {
                    let mut password = String::new();
                    std::io::stdin()
                        .read_line(&mut password)
                        .context("reading the registry password from standard input")?;
                    password.trim_end_matches(['\r', '\n']).to_string()
                } else {
                    std::env::var("OPERATOR_HOST_REGISTRY_PASSWORD").context(
                        "--username needs --password-stdin or $OPERATOR_HOST_REGISTRY_PASSWORD",
                    )?
                };
                Credentials::Basic {
                    username: username.clone(),
                    password,
                }
            }
        };
        Ok(crate::oci::Access {
            auth,
            plain_http: self.plain_http,
            ..crate::oci::Access::default()
        })
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

/// Runs the command line of the process; returns its exit code.
pub fn main() -> ExitCode {
    crate::runtime::tune_allocator();
    let cli = Cli::parse_from(kubectl::as_host_command_line(std::env::args_os().collect()));
    // Traces go to a collector if the OpenTelemetry variables name one, whatever the logs'
    // filter; the logs to stderr.
    let traces = match crate::telemetry::Traces::from_env() {
        Ok(traces) => traces,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour codes only for a terminal: a log file (`make demo`'s host.log, a pod's log)
    // gets plain text.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let subscriber =
        tracing_subscriber::registry().with(traces.as_ref().map(|traces| traces.layer()));
    match cli.log_format {
        LogFormat::Text => subscriber.with(logs.with_filter(filter)).init(),
        LogFormat::Json => subscriber
            .with(logs.json().flatten_event(true).with_filter(filter))
            .init(),
    }
    let code = match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", error_report(&error));
            ExitCode::from(exit_code(&error))
        }
    };
    if let Some(traces) = traces {
        traces.shutdown();
    }
    code
}

/// `error` and its causes, each said once: this crate's errors already quote their source in
/// their message, which `{:#}` would print a second time.
fn error_report(error: &anyhow::Error) -> String {
    let mut report = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if !report.contains(&message) {
            if !report.is_empty() {
                report.push_str(": ");
            }
            report.push_str(&message);
        }
    }
    report
}

/// Maps failures to exit codes in one place.
fn exit_code(error: &anyhow::Error) -> u8 {
    // Refused at admission (contract 0.3.0's validate or default): rejected as an invalid
    // spec is.
    if let Some(crate::render::Error::Refused { .. }) = error.downcast_ref::<crate::render::Error>()
    {
        return EXIT_REJECTED;
    }
    if let Some(plan_error) = error
        .downcast_ref::<crate::render::Error>()
        .and_then(crate::render::Error::plan_error)
    {
        return match plan_error {
            PlanError::InvalidSpec(_) => EXIT_REJECTED,
            _ => EXIT_FAILURE,
        };
    }
    if error.downcast_ref::<crate::render::Error>().is_some()
        || error.downcast_ref::<diff::DiffFailed>().is_some()
        || error.downcast_ref::<replay::ReplayFailed>().is_some()
        || error.downcast_ref::<crate::recording::Error>().is_some()
        || error.downcast_ref::<crate::plugin::Error>().is_some()
        || error.downcast_ref::<crate::policy::Error>().is_some()
        || error.downcast_ref::<scaffold::Error>().is_some()
        || error.downcast_ref::<crate::componentize::Error>().is_some()
    {
        return EXIT_USAGE;
    }
    EXIT_FAILURE
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The commands that load no plugin need no runtime nor policy.
    match cli.command {
        Command::New(args) => {
            new::run(args)?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Kubectl(args) => {
            kubectl::run(args)?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    // `run` catches SIGTERM before anything else: a pod stopped while the host starts must
    // still end cleanly, not by the signal's default action.
    let serving = match cli.command {
        Command::Run(_) => {
            let async_runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            let shutdown = {
                let _context = async_runtime.enter();
                controller::ShutdownSignal::install()
                    .context("installing the SIGTERM and SIGINT handlers")?
            };
            // From this line on, SIGTERM ends the host cleanly (tests wait for it).
            tracing::info!(
                version = env!("CARGO_PKG_VERSION"),
                "operator-host starting"
            );
            Some((async_runtime, shutdown))
        }
        _ => None,
    };
    // The policy's limits apply on top of the command line's; its largest memory limit
    // sizes the runtime's instance slots.
    let mut config = runtime_config(&cli.runtime);
    let policy = match &cli.command {
        Command::Run(run::RunArgs { policy, .. })
        | Command::Render(render::RenderArgs { policy, .. })
        | Command::Rbac(rbac::RbacArgs { policy, .. })
        | Command::Conformance(conformance::ConformanceArgs { policy, .. })
        | Command::Diff(diff::DiffArgs { policy, .. })
        | Command::Replay(replay::ReplayArgs { policy, .. }) => {
            let policy = match policy {
                Some(path) => Policy::load(path)?,
                None => Policy::default(),
            };
            Some(Arc::new(policy.fit_limits(&mut config.limits)))
        }
        _ => None,
    };
    let policy = policy.unwrap_or_default();
    let runtime = Runtime::new(config).context("starting the wasm runtime")?;
    match cli.command {
        Command::Run(args) => {
            let serving = serving.expect("the async runtime is started for every `run`");
            run::run(args, runtime, policy, serving, cli.runtime.cache_dir)?
        }
        Command::Render(args) => render::run(args, &runtime, &policy)?,
        Command::Rbac(args) => rbac::run(args, &runtime, &policy)?,
        Command::Diff(args) => return diff::run(args, &runtime, &policy),
        Command::Replay(args) => return replay::run(args, &runtime, &policy),
        Command::Rollback(args) => rollback::run(args)?,
        Command::Crd(args) => crd::run(args, &runtime)?,
        Command::Push(args) => push::run(args, &runtime)?,
        Command::Pull(args) => pull::run(args)?,
        Command::Sign(args) => sign::run(args)?,
        Command::Verify(args) => verify::run(args)?,
        Command::GenerateKey(args) => generate_key::run(args)?,
        Command::New(_) | Command::Kubectl(_) => {
            unreachable!("`new` and `kubectl` returned before the runtime started")
        }
        Command::Conformance(args) => conformance::run(args, &runtime, &policy)?,
        Command::Componentize(args) => componentize::run(args, &runtime)?,
        Command::Inspect(args) => inspect::run(args, &runtime)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The client configuration from an explicit kubeconfig, or resolved as kubectl does (incl.
/// in-cluster).
async fn kube_config(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Config> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster config")?,
    };
    Ok(config)
}

/// Runs one future on a runtime of its own (the commands that are not `run`).
fn block_on<F: std::future::Future>(future: F) -> anyhow::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(future))
}

/// A key file's PEM, and its name for messages.
fn read_key(path: &Path) -> anyhow::Result<(String, String)> {
    let pem =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok((pem, path.display().to_string()))
}

fn load(runtime: &Arc<Runtime>, path: &Path) -> Result<Plugin, crate::plugin::Error> {
    Plugin::load(runtime, path)
}

/// The plugin in file `plugin`, or pulled from it as an OCI reference if it is no file and
/// does not end in `.wasm` (a mistyped file name is reported as a missing file).
fn load_file_or_reference(
    runtime: &Arc<Runtime>,
    plugin: &str,
    registry: &RegistryArgs,
) -> anyhow::Result<Plugin> {
    let path = Path::new(plugin);
    if path.exists() || plugin.ends_with(".wasm") {
        return Ok(load(runtime, path)?);
    }
    let pulled = block_on(crate::oci::pull(plugin, &registry.access()?))??;
    let compiled = runtime.load_quick(path, &pulled.bytes, None)?;
    Ok(Plugin::from_compiled(path, compiled)?)
}

fn runtime_config(args: &RuntimeArgs) -> RuntimeConfig {
    RuntimeConfig {
        limits: Limits {
            call_timeout: Duration::from_millis(args.call_timeout_ms),
            max_memory_bytes: args.memory_limit_mib << 20,
            max_response_bytes: args.max_response_mib << 20,
            ..Limits::default()
        },
        cache_dir: if args.no_cache {
            None
        } else {
            args.cache_dir.clone().or_else(CompileCache::default_dir)
        },
        ..RuntimeConfig::default()
    }
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
