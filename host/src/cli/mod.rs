//! The `operator-host` command line: parse, configure, run. This is the binary's edge (the
//! only module that uses `anyhow`); it lives in the library so that test binaries (the
//! fault-injection tests' crashable host) run exactly this command line. A subcommand of some
//! size has a file of its own.

mod diff;
mod replay;
mod rollback;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::controller::{self, ControllerConfig, RunConfig};
use crate::leader::{self, Leadership};
use crate::plan::PlanError;
use crate::plugin::Plugin;
use crate::policy::Policy;
use crate::rbac;
use crate::render;
use crate::runtime::{CompileCache, Limits, Runtime, RuntimeConfig};
use crate::scaffold;
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

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
    /// CPU deadline of one reconcile call, in milliseconds.
    #[arg(long, global = true, default_value_t = 1000)]
    call_timeout_ms: u64,
    /// Memory limit of one plugin instance, in MiB.
    #[arg(long, global = true, default_value_t = 64)]
    memory_limit_mib: usize,
    /// Largest plugin response, in MiB.
    #[arg(long, global = true, default_value_t = 4)]
    max_response_mib: usize,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every plugin in a directory as a controller against the cluster; plugin files
    /// added, replaced or removed while it runs take effect without a restart.
    Run {
        /// Directory of plugin components (*.wasm), watched for changes.
        #[arg(long, default_value = "target/plugins")]
        plugins: PathBuf,
        /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config).
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Only watch and reconcile parents in this namespace; repeat for several
        /// (default: all namespaces).
        #[arg(long = "namespace", value_name = "NAMESPACE")]
        namespaces: Vec<String>,
        /// Install each plugin's CRD and wait until it is Established before starting the
        /// plugin: created if absent, updated if this host installed it for the same plugin
        /// (annotation operator-host.dev/installed-for), any other CRD of that name refused.
        #[arg(long)]
        install_crds: bool,
        /// Address of /metrics, /healthz and /readyz.
        #[arg(long, default_value = "127.0.0.1:8080")]
        metrics_addr: std::net::SocketAddr,
        /// Reconcile every parent at least this often, in seconds.
        #[arg(long, default_value_t = 300)]
        resync_secs: u64,
        /// Most reconciles running at once per plugin and namespace.
        #[arg(long, default_value_t = 32)]
        concurrency: u16,
        /// Policy file: what each plugin may produce, and its limits (default: the safe
        /// defaults, see the README).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        leader_election: LeaderElectArgs,
        /// This host's identity in the election (default: $POD_NAME or the hostname, and the
        /// process id).
        #[arg(long)]
        leader_elect_identity: Option<String>,
        /// How long a Lease holds without renewal, in seconds.
        #[arg(long, default_value_t = leader::DEFAULT_LEASE_DURATION.as_secs())]
        leader_elect_lease_duration: u64,
        /// How long the leader keeps writing without a successful renewal, in seconds (less
        /// than the lease duration: the margin is the fence's).
        #[arg(long, default_value_t = leader::DEFAULT_RENEW_DEADLINE.as_secs())]
        leader_elect_renew_deadline: u64,
        /// How often candidates try to take, and the leader to renew, the Lease, in seconds.
        #[arg(long, default_value_t = leader::DEFAULT_RETRY_PERIOD.as_secs())]
        leader_elect_retry_period: u64,
        /// Also serve the plugins the cluster declares as OperatorPlugins
        /// (operator-host.dev/v1alpha1), pulled from OCI registries; with --install-crds the
        /// host installs that CRD too.
        #[arg(long)]
        plugins_from_cluster: bool,
        /// Where pulled plugins are kept by digest, so a restart during a registry outage
        /// serves them (default: <cache dir>/pulled).
        #[arg(long, value_name = "DIR")]
        plugin_store: Option<PathBuf>,
        /// Serve only the OperatorPlugins with these labels (a label selector such as
        /// team=payments), so several host deployments can share a cluster.
        #[arg(long, value_name = "SELECTOR")]
        operator_plugin_selector: Option<String>,
        /// The flight recorder: keep the inputs of each parent's last reconcile in
        /// DIR/<plugin>/<namespace>/<name>.json (Secret data only as hashes), for
        /// `operator-host replay`.
        #[arg(long, value_name = "DIR")]
        record: Option<PathBuf>,
    },
    /// Print the ClusterRole the host needs to run these plugins (under a policy).
    Rbac {
        /// The plugin components: .wasm files, or OCI references (registry/repository:tag or
        /// @sha256:<digest>, what an OperatorPlugin's spec.source names) to pull.
        #[arg(required = true)]
        plugins: Vec<String>,
        /// Policy file: child kinds it forbids get no rule.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Include what `run --install-crds` needs (CustomResourceDefinitions).
        #[arg(long)]
        install_crds: bool,
        /// Name of the ClusterRole.
        #[arg(long, default_value = rbac::DEFAULT_NAME)]
        name: String,
        /// With `--leader-elect`: also print the Role for the Lease.
        #[command(flatten)]
        leader_election: LeaderElectArgs,
        /// Include what `run --plugins-from-cluster` needs (OperatorPlugins, and a Role for
        /// the pull Secrets of the host's namespace: --leader-elect-namespace or
        /// $POD_NAMESPACE).
        #[arg(long)]
        plugins_from_cluster: bool,
        /// How to reach the registry of plugins given as references.
        #[command(flatten)]
        registry: RegistryArgs,
        /// Check the plugins' custom resource kinds against this cluster's discovery, as `run`
        /// does before it serves them (the release's own kinds are checked without a cluster).
        #[arg(long, value_name = "PATH")]
        kubeconfig: Option<PathBuf>,
    },
    /// Print the children and status a plugin computes for each CR of a file, without a
    /// cluster.
    Render {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        /// A YAML stream, as `kubectl apply -f` takes: each custom resource of the plugin's
        /// kind is rendered, other documents (a Secret the CR uses, say) are skipped.
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
        /// Check the plan against this policy file, as `run --policy` does.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
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
    Crd {
        /// The plugin component (.wasm).
        #[arg(required_unless_present = "operator_plugin")]
        plugin: Option<PathBuf>,
        /// Print the OperatorPlugin CRD (what `run --plugins-from-cluster --install-crds`
        /// installs) instead.
        #[arg(long, conflicts_with = "plugin")]
        operator_plugin: bool,
    },
    /// Push a plugin to an OCI registry as a Wasm artifact (CNCF layout: config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer); prints
    /// REFERENCE@DIGEST.
    Push {
        /// The plugin component (.wasm); it must load as a plugin of this host's contract.
        plugin: PathBuf,
        /// Where to push it: registry/repository:tag.
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull a plugin from an OCI registry into a file; prints REFERENCE@DIGEST.
    Pull {
        /// registry/repository:tag or registry/repository@sha256:<digest>.
        reference: String,
        /// The file to write (replaced whole, never half-written).
        #[arg(long, short)]
        output: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Sign the artifact a reference names, as `cosign sign --key` does (a `.sig` manifest
    /// beside it); prints the signed REFERENCE@DIGEST.
    Sign {
        /// registry/repository:tag (resolved to its digest) or registry/repository@sha256:...
        reference: String,
        /// The private key: an unencrypted PKCS#8 PEM of ECDSA P-256 (`generate-key`).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Check that a cosign signature of the artifact a reference names verifies with a
    /// public key, as an OperatorPlugin's spec.verify does; prints the key's fingerprint.
    Verify {
        reference: String,
        /// The public key (PEM): what `generate-key` or `cosign generate-key-pair` wrote.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Write a new signing key pair: PREFIX.key (private, mode 0600) and PREFIX.pub (for
    /// OperatorPlugins' spec.verify.keys, or the policy's signatureKeys).
    GenerateKey { prefix: PathBuf },
    /// Write a new plugin to start from (a Rust crate, a Python or an npm package): the plugin's build
    /// settings, a Deployment and Service operator with its CRD type, a unit test and a sample
    /// CR (see its README.md).
    New {
        /// The plugin's name, a DNS-1123 label (`web-app`): the crate's name and the name the
        /// plugin declares.
        name: String,
        /// The plugin's language.
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
        /// Where to write it (default: ./NAME); it must not exist.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The parent's kind (default: NAME in CamelCase, `WebApp`).
        #[arg(long)]
        kind: Option<String>,
        /// The parent's API group.
        #[arg(long, default_value = "example.com")]
        group: String,
        /// Take the SDK from this directory (a checkout's plugins/sdk; plugins/sdk-python with
        /// --lang python, plugins/sdk-js with --lang js) instead of crates.io (PyPI, npm).
        #[arg(long, value_name = "DIR", conflicts_with = "sdk_git")]
        sdk_path: Option<PathBuf>,
        /// Take operator-host-sdk from this git repository instead of crates.io.
        #[arg(long, value_name = "URL")]
        sdk_git: Option<String>,
        /// With --sdk-git: the branch, tag or commit.
        #[arg(long, requires = "sdk_git")]
        sdk_rev: Option<String>,
    },
    /// Check what the host relies on a plugin for, on a built component of any language:
    /// its declaration, the same answer to the same request, no state between calls, the
    /// invalid-spec error for a spec its schema refuses, answers the host and the policy
    /// accept, calls well inside the timeout. Prints a line per check; exits 1 if one fails.
    Conformance {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        /// YAML streams of sample CRs; each CR of the plugin's kind is checked.
        crs: Vec<PathBuf>,
        /// Check the answers against this policy file (default: the default policy).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
    /// Make a plugin component of a WASI preview1 core module that exports the contract's
    /// functions: a Go plugin built with `GOOS=wasip1 GOARCH=wasm go build
    /// -buildmode=c-shared` and the Go SDK (plugins/sdk-go). Loads the result as a plugin
    /// before writing it.
    Componentize {
        /// The core module (.wasm).
        module: PathBuf,
        /// The component to write (replaced whole, never half-written).
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Print what a plugin declares.
    Inspect {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Format::Yaml)]
        output: Format,
    },
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

/// The languages `new` scaffolds a plugin in.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Lang {
    Rust,
    Python,
    Js,
}

impl From<Lang> for scaffold::Lang {
    fn from(lang: Lang) -> Self {
        match lang {
            Lang::Rust => scaffold::Lang::Rust,
            Lang::Python => scaffold::Lang::Python,
            Lang::Js => scaffold::Lang::JavaScript,
        }
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
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        );
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", error_report(&error));
            ExitCode::from(exit_code(&error))
        }
    }
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
    if let Some(plan_error) = error
        .downcast_ref::<render::Error>()
        .and_then(render::Error::plan_error)
    {
        return match plan_error {
            PlanError::InvalidSpec(_) => EXIT_REJECTED,
            _ => EXIT_FAILURE,
        };
    }
    if error.downcast_ref::<render::Error>().is_some()
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
    if let Command::New {
        name,
        lang,
        dir,
        kind,
        group,
        sdk_path,
        sdk_git,
        sdk_rev,
    } = cli.command
    {
        let sdk = match (sdk_path, sdk_git) {
            // Cargo and pip read a path dependency relative to the new plugin, not to where
            // `new` ran.
            (Some(path), _) => scaffold::SdkSource::Path(
                std::path::absolute(&path)
                    .with_context(|| format!("resolving --sdk-path {}", path.display()))?,
            ),
            (None, Some(url)) => scaffold::SdkSource::Git { url, rev: sdk_rev },
            (None, None) => scaffold::SdkSource::Version(env!("CARGO_PKG_VERSION").to_string()),
        };
        let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
        let plugin = scaffold::Plugin {
            name,
            kind,
            group,
            sdk,
        };
        for file in scaffold::write(lang.into(), &plugin, &dir)? {
            println!("{}", file.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    // `run` catches SIGTERM before anything else: a pod stopped while the host starts must
    // still end cleanly, not by the signal's default action.
    let serving = match cli.command {
        Command::Run { .. } => {
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
    // `render` checks a policy only when it is given one.
    let render_policy = match &cli.command {
        Command::Render {
            policy: Some(path), ..
        } => Some(Policy::load(path)?),
        _ => None,
    };
    let policy = match &cli.command {
        Command::Run { policy, .. }
        | Command::Rbac { policy, .. }
        | Command::Conformance { policy, .. }
        | Command::Diff(diff::DiffArgs { policy, .. })
        | Command::Replay(replay::ReplayArgs { policy, .. }) => {
            let policy = match policy {
                Some(path) => Policy::load(path)?,
                None => Policy::default(),
            };
            Some(Arc::new(policy.fit_runtime(&mut config)))
        }
        _ => None,
    };
    let policy = policy.unwrap_or_default();
    let runtime = Runtime::new(config).context("starting the wasm runtime")?;
    match cli.command {
        Command::Run {
            plugins,
            kubeconfig,
            namespaces,
            install_crds,
            metrics_addr,
            resync_secs,
            concurrency,
            policy: _,
            leader_election,
            leader_elect_identity,
            leader_elect_lease_duration,
            leader_elect_renew_deadline,
            leader_elect_retry_period,
            plugins_from_cluster,
            plugin_store,
            operator_plugin_selector,
            record,
        } => {
            let cluster_plugins = plugins_from_cluster.then(|| controller::ClusterPluginsConfig {
                store_dir: plugin_store
                    .or_else(|| cli.runtime.cache_dir.clone().map(|d| d.join("pulled")))
                    .or_else(|| CompileCache::default_dir().map(|d| d.join("pulled")))
                    .unwrap_or_else(|| PathBuf::from("pulled-plugins")),
                namespace: leader_election.namespace(),
                selector: operator_plugin_selector,
            });
            let election = leader_election
                .leader_elect
                .then(|| leader::ElectionConfig {
                    namespace: leader_election.namespace(),
                    lease_name: leader_election.leader_elect_lease.clone(),
                    identity: leader_elect_identity.unwrap_or_else(leader::default_identity),
                    lease_duration: Duration::from_secs(leader_elect_lease_duration),
                    renew_deadline: Duration::from_secs(leader_elect_renew_deadline),
                    retry_period: Duration::from_secs(leader_elect_retry_period),
                    labels: Default::default(),
                });
            if let Some(election) = &election {
                election.validate()?;
            }
            let leadership = match election {
                Some(_) => Leadership::candidate(),
                None => Leadership::unelected(),
            };
            let shard = leader_election.shard;
            let ring = leader_election.leader_elect_lease.clone();
            let (async_runtime, shutdown) =
                serving.expect("the async runtime is started for every `run`");
            async_runtime.block_on(async move {
                    let kube_config = kube_config(kubeconfig.as_deref()).await?;
                    // Every write of the host goes through the fence; only the Lease's own
                    // renewals do not.
                    let (client, leader_election, sharding) = match election {
                        Some(election) => {
                            let lease_client = kube::Client::try_from(kube_config.clone())
                                .context("creating the Kubernetes client")?;
                            tracing::info!(lease = %format!("{}/{}", election.namespace, election.lease_name), identity = %election.identity, "leader election on: standing by until this host holds the lease");
                            let sharding = shard.then(|| {
                                crate::shard::Sharding::new(&ring, &election, lease_client.clone())
                            });
                            // A sharded replica writes while its own shard Lease is fresh;
                            // what only the leader does is checked against the election.
                            let fence = sharding.as_ref().map_or(&leadership, |s| &s.fence);
                            (
                                leader::fenced_client(kube_config, fence)?,
                                Some(leader::LeaderElection {
                                    config: election,
                                    lease_client,
                                }),
                                sharding,
                            )
                        }
                        None => (
                            kube::Client::try_from(kube_config)
                                .context("creating the Kubernetes client")?,
                            None,
                            None,
                        ),
                    };
                    let config = RunConfig {
                        plugins_dir: plugins,
                        install_crds,
                        metrics_addr: Some(metrics_addr),
                        controllers: ControllerConfig {
                            namespaces,
                            resync: Duration::from_secs(resync_secs),
                            concurrency,
                            leadership,
                            shard: None,
                            record: record.map(crate::recording::FlightRecorder::new),
                            canary_failed: Default::default(),
                        },
                        policy,
                        leader_election,
                        cluster_plugins,
                        sharding,
                    };
                    controller::run(client, runtime, config, shutdown).await?;
                    anyhow::Ok(())
                })?;
        }
        Command::Render {
            plugin,
            cr,
            observed,
            output,
            now,
            policy: _,
        } => {
            let plugin = load(&runtime, &plugin)?;
            let now = now.unwrap_or_else(now_rfc3339);
            let rendered = render::render_with_policy(
                &plugin,
                render_policy.as_ref(),
                &cr,
                observed.as_deref(),
                &now,
            )?;
            for document in &rendered.skipped {
                eprintln!(
                    "note: {}: skipped {document}: not a {}",
                    cr.display(),
                    plugin.decl.parent
                );
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
        }
        Command::Rbac {
            plugins,
            policy: _,
            install_crds,
            name,
            leader_election,
            plugins_from_cluster,
            registry,
            kubeconfig,
        } => {
            let mut declarations = Vec::new();
            for plugin in &plugins {
                let plugin = load_file_or_reference(&runtime, plugin, &registry)?;
                for warning in policy.admit(&plugin.decl)? {
                    eprintln!("warning: plugin {}: {warning}", plugin.decl.name);
                }
                declarations.push(plugin.decl);
            }
            if let Some(path) = &kubeconfig {
                block_on(async {
                    let client = kube::Client::try_from(kube_config(Some(path)).await?)
                        .context("creating the Kubernetes client")?;
                    for decl in &declarations {
                        controller::check_served_kinds(&client, decl).await?;
                    }
                    anyhow::Ok(())
                })??;
            }
            let lease = leader_election.leader_elect.then(|| rbac::LeaseName {
                namespace: leader_election.namespace(),
                name: leader_election.leader_elect_lease.clone(),
                sharded: leader_election.shard,
            });
            let options = rbac::Options {
                name,
                install_crds,
                lease,
                plugins_from_cluster: plugins_from_cluster.then(|| leader_election.namespace()),
            };
            let role = rbac::cluster_role(&declarations, &policy, &options);
            print!("{}", rbac::to_yaml(&role, &options, &declarations)?);
        }
        Command::Diff(args) => return diff::run(args, &runtime, &policy),
        Command::Replay(args) => return replay::run(args, &runtime, &policy),
        Command::Rollback(args) => rollback::run(args)?,
        Command::Crd {
            plugin,
            operator_plugin: _,
        } => {
            let crd = match plugin {
                Some(plugin) => load(&runtime, &plugin)?.decl.crd,
                None => <crate::operator_plugin::OperatorPlugin as kube::CustomResourceExt>::crd(),
            };
            print!("{}", serde_yaml::to_string(&crd)?);
        }
        Command::Push {
            plugin: path,
            reference,
            registry,
        } => {
            let access = registry.access()?;
            let plugin = load(&runtime, &path)?;
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
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
        }
        Command::Pull {
            reference,
            output,
            registry,
        } => {
            let access = registry.access()?;
            let pulled = block_on(crate::oci::pull(&reference, &access))??;
            crate::files::write_whole(&output, &pulled.bytes)
                .with_context(|| format!("writing {}", output.display()))?;
            println!(
                "{}@{}",
                crate::oci::repository_name(&reference)?,
                pulled.digest
            );
        }
        Command::Sign {
            reference,
            key,
            registry,
        } => {
            let access = registry.access()?;
            let (pem, what) = read_key(&key)?;
            let key = crate::signature::PrivateKey::from_pem(&pem, &what)?;
            let repository = crate::oci::repository_name(&reference)?;
            block_on(async {
                let digest = crate::oci::resolve(&reference, &access).await?;
                let payload = crate::signature::payload(&repository, &digest);
                let stored = crate::signature::Stored {
                    signature: key.sign(&payload),
                    payload,
                };
                crate::oci::push_signature(&reference, &digest, stored, &access).await?;
                println!("{repository}@{digest}");
                anyhow::Ok(())
            })??;
        }
        Command::Verify {
            reference,
            key,
            registry,
        } => {
            let access = registry.access()?;
            let (pem, what) = read_key(&key)?;
            let key = crate::signature::PublicKey::from_pem(&pem, &what)?;
            block_on(async {
                let digest = crate::oci::resolve(&reference, &access).await?;
                let signatures = crate::oci::pull_signatures(&reference, &digest, &access).await?;
                let fingerprint = crate::signature::verify(&signatures, &[key], &digest)?;
                println!(
                    "{}@{digest} is signed by key {fingerprint}",
                    crate::oci::repository_name(&reference)?
                );
                anyhow::Ok(())
            })??;
        }
        Command::GenerateKey { prefix } => {
            let (private, public) = crate::signature::PrivateKey::generate();
            let private_path = prefix.with_extension("key");
            let public_path = prefix.with_extension("pub");
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&private_path).with_context(|| {
                format!("creating {} (it must not exist)", private_path.display())
            })?;
            std::io::Write::write_all(&mut file, private.as_bytes())
                .with_context(|| format!("writing {}", private_path.display()))?;
            std::fs::write(&public_path, public)
                .with_context(|| format!("writing {}", public_path.display()))?;
            println!("{}\n{}", private_path.display(), public_path.display());
        }
        Command::New { .. } => unreachable!("`new` returned before the runtime started"),
        Command::Conformance {
            plugin: path,
            crs,
            policy: _,
        } => {
            // Checked within the limits the policy gives the plugin, as `run` serves it.
            let mut plugin = load(&runtime, &path)?;
            plugin.limit_by(&policy, runtime.limits());
            let mut parents = Vec::new();
            for file in &crs {
                parents.extend(
                    render::read_yaml_documents(file)?
                        .into_iter()
                        .filter(|document| plugin.decl.parent.matches(document)),
                );
            }
            if !crs.is_empty() && parents.is_empty() {
                anyhow::bail!(
                    "{} hold no {}: nothing to check the plugin's answers on",
                    crs.iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    plugin.decl.parent
                );
            }
            let report = crate::conformance::check(&plugin, &parents, &policy);
            print!("{}", report.to_text());
            let failed = report.failed();
            if failed > 0 {
                anyhow::bail!(
                    "{failed} of {} checks of {} failed",
                    report.checks.len(),
                    path.display()
                );
            }
        }
        Command::Componentize { module, output } => {
            let component = crate::componentize::componentize(&module)?;
            // A component the host would refuse is not written: the load says why.
            let plugin = Plugin::from_compiled(&output, runtime.load_bytes(&output, &component)?)?;
            crate::files::write_whole(&output, &component)
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!(
                "{}: plugin {} {} ({} bytes)",
                output.display(),
                plugin.decl.name,
                plugin.decl.version,
                component.len()
            );
        }
        Command::Inspect {
            plugin: path,
            output,
        } => {
            let plugin = load(&runtime, &path)?;
            let decl = &plugin.decl;
            let description = serde_json::json!({
                "name": decl.name,
                "version": decl.version,
                "contract": plugin.compiled.contract().package(),
                "parent": decl.parent.to_string(),
                "plural": decl.parent.plural,
                "namespaced": decl.parent.namespaced,
                "children": decl.children.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "needsFinalize": decl.needs_finalize,
                "size": plugin.compiled.size(),
                "sha256": decl.content_hash,
            });
            match output {
                Format::Yaml => print!("{}", serde_yaml::to_string(&description)?),
                Format::Json => println!("{}", serde_json::to_string_pretty(&description)?),
            }
        }
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
