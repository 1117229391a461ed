//! Scale benchmarks on the devcluster (`make bench-scale`): operand density, cache memory per
//! parent, restart time and sharding, each beside a baseline measured in the same run.
//!
//! `cargo bench -p operator-host-tests --bench scale -- [density] [cache] [restart] [shard]
//! [--operands 10] [--per-operand 50] [--parents 10000] [--restarts 5] [--shard-crs 1000]
//! [--replicas 3]` (no part named: all four).
//!
//! - **density**: the 10 `fleet-<i>` plugins (Memcached's logic under 10 kinds) in one host
//!   process against 10 native kube-rs controller processes with the same logic, 50 CRs each:
//!   total RSS, total CPU per reconcile. Goal: host RSS <= 0.25x the natives'.
//! - **cache**: N `ConfigBundle` parents (one ConfigMap child each): RSS per parent and the time
//!   from exec until every parent was reconciled once after a restart, host against native.
//!   Goal: host RSS per parent <= 1x native.
//! - **restart**: exec -> `/readyz` ready for a host with the 10 fleet plugins in its compile
//!   cache, in an empty namespace, against the same host with no plugin. Goal: <= 100 ms.
//! - **shard**: convergence of M Memcached CRs with one replica (`--leader-elect`) and with R
//!   sharded replicas (`--leader-elect --shard`), reconciles per replica, and a projection of
//!   throughput against replicas from the measured CPU per reconcile, API writes per CR and
//!   the API server's write rate.
//!
//! Every controller runs as a process of its own (the host binary, or this binary with
//! `--native ...`), so its resident memory and CPU time are its own. The hosts run with the
//! default policy but a write budget the runs never reach (see [`POLICY`]).

mod common;

use std::collections::HashSet;
use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use common::native::{NativeController, Operand, Parent};
use common::{
    apiserver_requests, cpu_secs, memory_mib, metric_sum, percentile, print_writes, writes_between,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use operator_host::plugin::Plugin;
use operator_host_sdk::{Desired, Observed, Reconciler};
use operator_host_tests::devcluster::{self, TestNamespace, repo_root};
use operator_host_tests::process_host::{Launch, ProcessHost, free_local_addr, http_get};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
/// Creates in flight at once.
const CREATE_PARALLELISM: usize = 32;
/// Reconcile concurrency of every controller (the host's default).
const CONCURRENCY: u16 = 16;
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(1200);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Density,
    Cache,
    Restart,
    Shard,
}

#[derive(Debug, Clone)]
struct Args {
    parts: Vec<Part>,
    operands: usize,
    per_operand: usize,
    parents: usize,
    restarts: usize,
    shard_crs: usize,
    replicas: usize,
    /// Child mode: run one native controller.
    native: Option<NativeArgs>,
}

/// What a native controller process serves: the operand's name and parent kind, a namespace.
#[derive(Debug, Clone)]
struct NativeArgs {
    name: String,
    parent: ApiResource,
    namespace: String,
}

impl NativeArgs {
    fn to_args(&self) -> Vec<String> {
        let p = &self.parent;
        [
            "--native",
            &self.name,
            &p.group,
            &p.version,
            &p.kind,
            &p.plural,
            &self.namespace,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        parts: Vec::new(),
        operands: 10,
        per_operand: 50,
        parents: 10_000,
        restarts: 5,
        shard_crs: 1000,
        replicas: 3,
        native: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "density" => args.parts.push(Part::Density),
            "cache" => args.parts.push(Part::Cache),
            "restart" => args.parts.push(Part::Restart),
            "shard" => args.parts.push(Part::Shard),
            "--operands" => args.operands = value(&arg)?.parse()?,
            "--per-operand" => args.per_operand = value(&arg)?.parse()?,
            "--parents" => args.parents = value(&arg)?.parse()?,
            "--restarts" => args.restarts = value(&arg)?.parse::<usize>()?.max(1),
            "--shard-crs" => args.shard_crs = value(&arg)?.parse()?,
            "--replicas" => args.replicas = value(&arg)?.parse::<usize>()?.max(2),
            "--native" => {
                let mut field = || value("--native");
                let name = field()?;
                let (group, version, kind, plural) = (field()?, field()?, field()?, field()?);
                let namespace = field()?;
                let api_version = if group.is_empty() {
                    version.clone()
                } else {
                    format!("{group}/{version}")
                };
                args.native = Some(NativeArgs {
                    name,
                    parent: ApiResource {
                        group,
                        version,
                        api_version,
                        kind,
                        plural,
                    },
                    namespace,
                });
            }
            // `cargo bench` passes --bench.
            "--bench" => {}
            other => bail!(
                "unknown argument {other:?}; usage: scale [density] [cache] [restart] [shard] \
                 [--operands N] [--per-operand N] [--parents N] [--restarts N] \
                 [--shard-crs N] [--replicas N]"
            ),
        }
    }
    if args.parts.is_empty() {
        args.parts = vec![Part::Density, Part::Cache, Part::Restart, Part::Shard];
    }
    Ok(args)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let runtime = common::init()?;
    match args.native.clone() {
        Some(native) => runtime.block_on(native_process(native)),
        None => runtime.block_on(driver(args)),
    }
}

// ---------------------------------------------------------------------------------------------
// The native controller process.
// ---------------------------------------------------------------------------------------------

/// The ConfigBundle logic on the native controller's parent type.
fn config_bundle_logic(
    parent: &Parent<config_bundle::ConfigBundleSpec>,
    observed: &Observed,
) -> Result<Desired, operator_host_sdk::Error> {
    let typed = config_bundle::ConfigBundle {
        metadata: parent.metadata.clone(),
        spec: parent.spec.clone(),
        status: None,
    };
    config_bundle::ConfigBundleOperator::reconcile(&typed, observed)
}

/// Runs one native controller until stdin closes; prints `ready`, then `reconciles <n>` as
/// the count grows.
async fn native_process(native: NativeArgs) -> anyhow::Result<()> {
    let client = devcluster::client().await;
    let shutdown = common::stdin_closed();
    let reconciles = Arc::new(AtomicU64::new(0));
    let reporter = common::report_reconciles({
        let reconciles = reconciles.clone();
        move || reconciles.load(Ordering::Relaxed)
    });
    let (name, ns, parent) = (native.name.clone(), &native.namespace, native.parent);
    if name == config_bundle::ConfigBundleOperator::NAME {
        let operand = Operand {
            name,
            parent,
            logic: config_bundle_logic,
        };
        NativeController::new(client, ns, operand, CONCURRENCY)
            .owns::<ConfigMap>()
            .run(shutdown, reconciles)
            .await;
    } else {
        let operand = Operand {
            name,
            parent,
            logic: common::memcached_logic,
        };
        NativeController::new(client, ns, operand, CONCURRENCY)
            .owns::<Deployment>()
            .owns::<Service>()
            .run(shutdown, reconciles)
            .await;
    }
    reporter.abort();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The controllers, as the driver sees them.
// ---------------------------------------------------------------------------------------------

/// A native controller child process, its reconcile count read from its stdout.
struct NativeProcess {
    child: Child,
    reconciles: Arc<AtomicU64>,
}

impl NativeProcess {
    fn spawn(kubeconfig: &Path, native: &NativeArgs) -> anyhow::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(native.to_args())
            .env(devcluster::KUBECONFIG_ENV, kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawning a native controller")?;
        let stdout = child.stdout.take().context("native controller stdout")?;
        let reconciles = common::follow_reconciles(BufReader::new(stdout));
        Ok(NativeProcess { child, reconciles })
    }

    /// Closes stdin (graceful shutdown); kills the process if it has not exited in 30 s.
    fn stop(self) {
        common::stop_child(self.child);
    }
}

/// A host process and where it serves `/metrics` and `/readyz`.
struct HostProcess {
    host: ProcessHost,
    metrics: SocketAddr,
    _policy: tempfile::NamedTempFile,
}

/// The hosts' policy: the defaults, but a write budget (100 writes/s per plugin by default, a
/// protection against a runaway plugin) that the runs never reach, so that the API server and
/// the host's own work bound them, as they bound the natives.
const POLICY: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  writeBudget: {perSecond: 1000000, burst: 1000000}
";

impl HostProcess {
    fn start(plugins: &Path, namespace: &str, args: &[&str]) -> HostProcess {
        let metrics = free_local_addr();
        let mut policy = tempfile::NamedTempFile::new().expect("a policy file");
        policy
            .write_all(POLICY.as_bytes())
            .expect("writing the policy file");
        let policy_path = policy.path().to_string_lossy().to_string();
        let mut all_args = vec!["--policy", policy_path.as_str()];
        all_args.extend_from_slice(args);
        let host = ProcessHost::start(&Launch {
            binary: Path::new(BINARY),
            plugins,
            kubeconfig: &devcluster::cluster().kubeconfig,
            namespace: Some(namespace),
            crash_after: None,
            metrics_addr: Some(metrics),
            install_crds: true,
            args: &all_args,
        });
        HostProcess {
            host,
            metrics,
            _policy: policy,
        }
    }

    async fn metrics_text(&self) -> String {
        http_get(self.metrics, "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// Polls `/readyz` every 2 ms until it is 200 and says `said`; returns when.
    async fn wait_ready(&mut self, said: &str, bound: Duration) -> anyhow::Result<Instant> {
        let started = Instant::now();
        loop {
            if let Some((200, body)) = http_get(self.metrics, "/readyz").await
                && body.contains(said)
            {
                return Ok(Instant::now());
            }
            if started.elapsed() > bound {
                bail!(
                    "the host was not ready ({said:?}) within {bound:?}; log tail:\n{}",
                    self.host.log_tail(40)
                );
            }
            if self.host.exited(Duration::ZERO).await.is_some() {
                bail!("the host exited; log tail:\n{}", self.host.log_tail(40));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// SIGTERM (graceful stop), then SIGKILL after 30 s.
    async fn stop(mut self) {
        self.host.signal("TERM");
        if self.host.exited(Duration::from_secs(30)).await.is_none() {
            self.host.kill().await;
        }
    }
}

/// The controllers of one side of a measurement.
enum Side {
    Host(Vec<HostProcess>),
    Natives(Vec<NativeProcess>),
}

impl Side {
    fn name(&self) -> &'static str {
        match self {
            Side::Host(_) => "host",
            Side::Natives(_) => "native",
        }
    }

    fn pids(&self) -> Vec<u32> {
        match self {
            Side::Host(hosts) => hosts.iter().map(|h| h.host.pid()).collect(),
            Side::Natives(natives) => natives.iter().map(|n| n.child.id()).collect(),
        }
    }

    /// Total VmRSS and VmHWM of the processes, in MiB.
    fn memory_mib(&self) -> (f64, f64) {
        self.pids()
            .into_iter()
            .map(memory_mib)
            .fold((0.0, 0.0), |(r, h), (rss, hwm)| (r + rss, h + hwm))
    }

    fn cpu_secs(&self) -> f64 {
        self.pids().into_iter().map(cpu_secs).sum()
    }

    /// Reconciles per process.
    async fn reconciles(&self) -> Vec<u64> {
        match self {
            Side::Host(hosts) => {
                let mut counts = Vec::new();
                for host in hosts {
                    let text = host.metrics_text().await;
                    counts.push(metric_sum(&text, "operator_host_reconciles_total", &[]) as u64);
                }
                counts
            }
            Side::Natives(natives) => natives
                .iter()
                .map(|n| n.reconciles.load(Ordering::Relaxed))
                .collect(),
        }
    }

    async fn total_reconciles(&self) -> u64 {
        self.reconciles().await.iter().sum()
    }

    async fn stop(self) {
        match self {
            Side::Host(hosts) => {
                for host in hosts {
                    host.stop().await;
                }
            }
            Side::Natives(natives) => {
                tokio::task::spawn_blocking(move || {
                    natives.into_iter().for_each(NativeProcess::stop)
                })
                .await
                .ok();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The driver.
// ---------------------------------------------------------------------------------------------

/// A plugin of the benchmark: its name and parent kind.
#[derive(Clone)]
struct OperandInfo {
    name: String,
    parent: ApiResource,
}

fn scale_plugins(dir: &str) -> PathBuf {
    repo_root().join("target/scale-plugins").join(dir)
}

/// Loads the plugins of `dir` (sorted by file name) and installs their CRDs.
async fn load_operands(client: &Client, dir: &Path) -> anyhow::Result<Vec<OperandInfo>> {
    let runtime = operator_host::runtime::Runtime::new(operator_host::runtime::RuntimeConfig {
        cache_dir: Some(repo_root().join("target/test-compile-cache")),
        ..Default::default()
    })?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: run `make scale-plugins` first", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    let mut operands = Vec::new();
    for file in files {
        let plugin =
            Plugin::load(&runtime, &file).with_context(|| format!("loading {}", file.display()))?;
        operator_host::controller::install_crd(client, &plugin).await?;
        operands.push(OperandInfo {
            name: plugin.decl.name.clone(),
            parent: plugin.decl.parent.api_resource(),
        });
    }
    anyhow::ensure!(!operands.is_empty(), "no plugin in {}", dir.display());
    Ok(operands)
}

/// Counts the CRs whose status is up to date: `observedGeneration == generation` and the
/// condition `condition` True.
struct Tracker {
    converged: Arc<Mutex<HashSet<(String, String)>>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
    /// What the watches follow, for the LIST that makes up for events they missed.
    apis: Vec<(String, Api<DynamicObject>)>,
    condition: &'static str,
}

impl Tracker {
    async fn start(
        client: &Client,
        namespace: &str,
        operands: &[OperandInfo],
        condition: &'static str,
    ) -> Tracker {
        let converged = Arc::new(Mutex::new(HashSet::new()));
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(operands.len());
        let mut watches = Vec::new();
        let mut apis = Vec::new();
        for operand in operands {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &operand.parent);
            apis.push((operand.parent.kind.clone(), api.clone()));
            let (converged, ready, kind) = (
                converged.clone(),
                ready_tx.clone(),
                operand.parent.kind.clone(),
            );
            watches.push(tokio::spawn(async move {
                let mut stream =
                    std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                            if is_converged(&o, condition) {
                                converged
                                    .lock()
                                    .unwrap()
                                    .insert((kind.clone(), o.name_any()));
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            let _ = ready.try_send(());
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(%error, "driver watch error"),
                    }
                }
            }));
        }
        for _ in operands {
            let _ = ready_rx.recv().await;
        }
        Tracker {
            converged,
            watches,
            apis,
            condition,
        }
    }

    /// Adds the converged CRs a LIST finds (a watch of thousands of busy objects was seen to
    /// fall silent on this machine's API server without an error).
    async fn list_converged(&self) -> anyhow::Result<()> {
        for (kind, api) in &self.apis {
            let mut params = ListParams::default().limit(500);
            loop {
                let page = api.list(&params).await?;
                let mut converged = self.converged.lock().unwrap();
                for object in &page.items {
                    if is_converged(object, self.condition) {
                        converged.insert((kind.clone(), object.name_any()));
                    }
                }
                drop(converged);
                match page.metadata.continue_ {
                    Some(token) if !token.is_empty() => params = params.continue_token(&token),
                    _ => break,
                }
            }
        }
        Ok(())
    }

    fn count(&self) -> usize {
        self.converged.lock().unwrap().len()
    }

    /// Waits until `n` CRs have converged; when the count stands still for 5 s, a LIST
    /// checks what the watches may have missed (the time found is then up to that late).
    async fn wait(&self, n: usize, timeout: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        let (mut last, mut since) = (self.count(), Instant::now());
        while self.count() < n {
            if self.count() != last {
                (last, since) = (self.count(), Instant::now());
            } else if since.elapsed() > Duration::from_secs(5) {
                self.list_converged().await?;
                since = Instant::now();
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?}: {} of {n} CRs converged",
                    self.count()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Instant::now())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for watch in &self.watches {
            watch.abort();
        }
    }
}

fn is_converged(object: &DynamicObject, condition: &str) -> bool {
    let status = &object.data["status"];
    let generation = object.metadata.generation;
    generation.is_some()
        && status["observedGeneration"].as_i64() == generation
        && status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == condition && c["status"] == "True")
        })
}

/// Creates the CRs `crs` (of which operand, named what), the i-th with `spec(i)`,
/// `CREATE_PARALLELISM` at a time.
async fn create_all(
    client: &Client,
    namespace: &str,
    crs: &[(OperandInfo, String)],
    spec: impl Fn(usize) -> Value,
) -> anyhow::Result<()> {
    futures::stream::iter(crs.iter().enumerate())
        .map(|(i, (operand, name))| {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &operand.parent);
            let object = json!({
                "apiVersion": operand.parent.api_version,
                "kind": operand.parent.kind,
                "metadata": {"name": name},
                "spec": spec(i),
            });
            async move {
                api.create(&PostParams::default(), &serde_json::from_value(object)?)
                    .await
                    .with_context(|| format!("creating {} {name}", operand.parent.kind))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CREATE_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Starts the host (one process serving `plugins`) or one native process per operand.
async fn start_side(
    host: bool,
    plugins: &Path,
    operands: &[OperandInfo],
    namespace: &str,
) -> anyhow::Result<Side> {
    if host {
        let mut process = HostProcess::start(plugins, namespace, &[]);
        process
            .wait_ready("ready", Duration::from_secs(120))
            .await?;
        return Ok(Side::Host(vec![process]));
    }
    let kubeconfig = devcluster::cluster().kubeconfig.clone();
    let mut natives = Vec::new();
    for operand in operands {
        natives.push(NativeProcess::spawn(
            &kubeconfig,
            &NativeArgs {
                name: operand.name.clone(),
                parent: operand.parent.clone(),
                namespace: namespace.to_string(),
            },
        )?);
    }
    Ok(Side::Natives(natives))
}

/// A namespace of its own for one side of part `part`.
async fn side_namespace(part: &str, host: bool) -> anyhow::Result<TestNamespace> {
    let side = if host { "host" } else { "native" };
    Ok(TestNamespace::new(&format!("scale-{part}-{side}")).await?)
}

/// Waits until the reconcile count has not grown for `quiet` (at most 60 s).
async fn settle(side: &Side, quiet: Duration) -> u64 {
    let mut last = side.total_reconciles().await;
    let (started, mut since) = (Instant::now(), Instant::now());
    while since.elapsed() < quiet && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = side.total_reconciles().await;
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    last
}

async fn finish(namespace: TestNamespace) -> anyhow::Result<()> {
    let (client, name) = (namespace.client(), namespace.name().to_string());
    namespace.cleanup().await?;
    common::wait_namespace_gone(&client, &name).await;
    Ok(())
}

async fn driver(args: Args) -> anyhow::Result<()> {
    let _cluster = tokio::task::spawn_blocking(devcluster::cluster).await?;
    let client = devcluster::client().await;
    println!(
        "scale: {:?}, {} cores",
        args.parts,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let pods = args.operands * args.per_operand + args.shard_crs + 1;
    let bench_nodes = common::ensure_pod_capacity(&client, pods).await?;
    let mut result = Ok(());
    for part in &args.parts {
        let outcome = match part {
            Part::Density => density(&client, &args).await,
            Part::Cache => cache(&client, &args).await,
            Part::Restart => restart(&client, &args).await,
            Part::Shard => shard(&client, &args).await,
        };
        if let Err(error) = outcome {
            result = Err(error.context(format!("{part:?}")));
            break;
        }
    }
    common::remove_bench_nodes(&client, &bench_nodes).await;
    result
}

// --- density ---------------------------------------------------------------------------------

struct DensityResult {
    idle_mib: f64,
    rss_mib: f64,
    hwm_mib: f64,
    cpu_secs: f64,
    reconciles: u64,
    converged_secs: f64,
}

async fn density(client: &Client, args: &Args) -> anyhow::Result<()> {
    let dir = scale_plugins("fleet");
    let all = load_operands(client, &dir).await?;
    anyhow::ensure!(
        all.len() >= args.operands,
        "{} holds {} plugins, {} wanted",
        dir.display(),
        all.len(),
        args.operands
    );
    let operands = &all[..args.operands];
    // The host serves the chosen plugins only.
    let plugins = tempfile::tempdir()?;
    for operand in operands {
        std::fs::copy(
            dir.join(format!("{}.wasm", operand.name)),
            plugins.path().join(format!("{}.wasm", operand.name)),
        )?;
    }
    println!(
        "\ndensity: {} operands x {} CRs (spec.size 1) in one host vs {} native processes",
        operands.len(),
        args.per_operand,
        operands.len()
    );
    let mut results = Vec::new();
    for host in [true, false] {
        let namespace = side_namespace("density", host).await?;
        let ns = namespace.name().to_string();
        let tracker = Tracker::start(client, &ns, operands, "Available").await;
        let side = start_side(host, plugins.path(), operands, &ns).await?;
        let outcome = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let (idle_mib, _) = side.memory_mib();
            let (cpu0, rec0) = (side.cpu_secs(), side.total_reconciles().await);
            let crs: Vec<(OperandInfo, String)> = operands
                .iter()
                .enumerate()
                .flat_map(|(i, o)| {
                    (0..args.per_operand).map(move |j| (o.clone(), format!("f{i}-{j:03}")))
                })
                .collect();
            let started = Instant::now();
            create_all(client, &ns, &crs, |_| json!({"size": 1})).await?;
            let done = tracker.wait(crs.len(), CONVERGE_TIMEOUT).await?;
            let reconciles = settle(&side, Duration::from_secs(3)).await - rec0;
            let (rss_mib, hwm_mib) = side.memory_mib();
            anyhow::Ok(DensityResult {
                idle_mib,
                rss_mib,
                hwm_mib,
                cpu_secs: side.cpu_secs() - cpu0,
                reconciles,
                converged_secs: done.duration_since(started).as_secs_f64(),
            })
        }
        .await;
        let name = side.name();
        side.stop().await;
        drop(tracker);
        finish(namespace).await?;
        let r = outcome?;
        println!(
            "  {name:>6}: RSS idle {:7.1} MiB, converged {:7.1} MiB (peak {:7.1}) | converged in {:6.2}s | \
             CPU {:6.2}s over {} reconciles = {:.3} ms per reconcile",
            r.idle_mib,
            r.rss_mib,
            r.hwm_mib,
            r.converged_secs,
            r.cpu_secs,
            r.reconciles,
            1e3 * r.cpu_secs / r.reconciles.max(1) as f64
        );
        results.push(r);
    }
    let (h, n) = (&results[0], &results[1]);
    let per = |r: &DensityResult| r.cpu_secs / r.reconciles.max(1) as f64;
    let memory = h.rss_mib / n.rss_mib;
    println!(
        "  ratios host/native: RSS {memory:.3} [goal <= 0.25: {}], peak RSS {:.3}, CPU per reconcile {:.3}, \
         convergence time {:.3}",
        if memory <= 0.25 { "met" } else { "MISSED" },
        h.hwm_mib / n.hwm_mib,
        per(h) / per(n),
        h.converged_secs / n.converged_secs
    );
    Ok(())
}

// --- cache -----------------------------------------------------------------------------------

async fn cache(client: &Client, args: &Args) -> anyhow::Result<()> {
    let dir = scale_plugins("config-bundle");
    let operands = load_operands(client, &dir).await?;
    let n = args.parents;
    println!(
        "\ncache: {n} ConfigBundle parents (one ConfigMap each), host vs native, one process each"
    );
    let mut per_parent = Vec::new();
    for host in [true, false] {
        let namespace = side_namespace("cache", host).await?;
        let ns = namespace.name().to_string();
        let tracker = Tracker::start(client, &ns, &operands, "Ready").await;
        let side = start_side(host, &dir, &operands, &ns).await?;
        let outcome = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let (idle_mib, _) = side.memory_mib();
            let crs: Vec<(OperandInfo, String)> = (0..n)
                .map(|i| (operands[0].clone(), format!("b-{i:05}")))
                .collect();
            let started = Instant::now();
            create_all(
                client,
                &ns,
                &crs,
                |i| json!({"data": {"index": i.to_string(), "owner": "scale-benchmark"}}),
            )
            .await?;
            let done = tracker.wait(n, CONVERGE_TIMEOUT).await?;
            settle(&side, Duration::from_secs(3)).await;
            let (rss_mib, hwm_mib) = side.memory_mib();
            anyhow::Ok((idle_mib, rss_mib, hwm_mib, done.duration_since(started)))
        }
        .await;
        let name = side.name();
        side.stop().await;
        let (idle_mib, rss_mib, hwm_mib, converged) = match outcome {
            Ok(r) => r,
            Err(error) => {
                finish(namespace).await?;
                return Err(error);
            }
        };
        // A restart over the N parents: exec -> every parent reconciled once.
        let exec = Instant::now();
        let side = start_side(host, &dir, &operands, &ns).await?;
        let synced = async {
            let deadline = exec + CONVERGE_TIMEOUT;
            while side.total_reconciles().await < n as u64 {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "the restarted {name} did not reconcile {n} parents"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            anyhow::Ok(exec.elapsed())
        }
        .await;
        let (rss_after_restart, _) = side.memory_mib();
        side.stop().await;
        drop(tracker);
        finish(namespace).await?;
        let synced = synced?;
        let kib = 1024.0 * (rss_mib - idle_mib) / n as f64;
        println!(
            "  {name:>6}: RSS idle {idle_mib:7.1} MiB, with {n} parents {rss_mib:7.1} MiB (peak {hwm_mib:7.1}) = \
             {kib:5.2} KiB per parent | converged in {:6.2}s | restart: exec -> all reconciled {:6.2}s, \
             RSS then {rss_after_restart:7.1} MiB",
            converged.as_secs_f64(),
            synced.as_secs_f64()
        );
        per_parent.push((kib, synced.as_secs_f64()));
    }
    let ratio = per_parent[0].0 / per_parent[1].0;
    println!(
        "  ratios host/native: RSS per parent {ratio:.3} [goal <= 1: {}], time to initial sync {:.3}",
        if ratio <= 1.0 { "met" } else { "MISSED" },
        per_parent[0].1 / per_parent[1].1
    );
    Ok(())
}

// --- restart ---------------------------------------------------------------------------------

async fn restart(client: &Client, args: &Args) -> anyhow::Result<()> {
    let fleet = scale_plugins("fleet");
    // Warms the compile cache and installs the CRDs, as a host that ran before would have.
    let operands = load_operands(client, &fleet).await?;
    let empty = tempfile::tempdir()?;
    println!(
        "\nrestart: exec -> /readyz ready in an empty namespace, {} runs each, a host with the {} \
         fleet plugins in its compile cache vs the same host with no plugin",
        args.restarts,
        operands.len()
    );
    let namespace = TestNamespace::new("scale-restart").await?;
    let mut medians = Vec::new();
    for (what, dir) in [("10 plugins", fleet.as_path()), ("no plugin", empty.path())] {
        let mut times = Vec::new();
        for _ in 0..args.restarts {
            let exec = Instant::now();
            let mut host = HostProcess::start(dir, namespace.name(), &[]);
            let ready = host.wait_ready("ready", Duration::from_secs(60)).await;
            host.stop().await;
            times.push(1e3 * ready?.duration_since(exec).as_secs_f64());
        }
        let median = percentile(&mut times.clone(), 50.0);
        println!(
            "  {what:>10}: median {median:6.1} ms, min {:6.1} ms, max {:6.1} ms",
            times.iter().copied().fold(f64::INFINITY, f64::min),
            times.iter().copied().fold(0.0, f64::max)
        );
        medians.push(median);
    }
    finish(namespace).await?;
    println!(
        "  10 plugins: {:.1} ms [goal <= 100 ms: {}], ratio to no plugin {:.3}",
        medians[0],
        if medians[0] <= 100.0 { "met" } else { "MISSED" },
        medians[0] / medians[1]
    );
    Ok(())
}

// --- shard -----------------------------------------------------------------------------------

struct ShardRun {
    replicas: usize,
    converged_secs: f64,
    reconciles: Vec<u64>,
    cpu_secs: Vec<f64>,
    host_writes: f64,
    cluster_writes: f64,
}

async fn shard_run(
    client: &Client,
    args: &Args,
    replicas: usize,
    plugins: &Path,
    operand: &OperandInfo,
) -> anyhow::Result<ShardRun> {
    let namespace = TestNamespace::new(&format!("scale-shard-{replicas}")).await?;
    let ns = namespace.name().to_string();
    let tracker = Tracker::start(client, &ns, std::slice::from_ref(operand), "Available").await;
    let mut hosts = Vec::new();
    for i in 0..replicas {
        let identity = format!("replica-{i}");
        let mut host_args = vec![
            "--leader-elect",
            "--leader-elect-namespace",
            &ns,
            "--leader-elect-identity",
            &identity,
        ];
        if replicas > 1 {
            host_args.push("--shard");
        }
        hosts.push(HostProcess::start(plugins, &ns, &host_args));
    }
    let outcome = async {
        for host in &mut hosts {
            host.wait_ready("ready", Duration::from_secs(120)).await?;
        }
        // Every replica holds its shard before the parents arrive (the leader assigns
        // parents only to shards it sees live).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let side = Side::Host(std::mem::take(&mut hosts));
        let measured = async {
            let cpu0: Vec<f64> = side.pids().into_iter().map(cpu_secs).collect();
            let requests0 = apiserver_requests(client).await?;
            let crs: Vec<(OperandInfo, String)> = (0..args.shard_crs)
                .map(|i| (operand.clone(), format!("m-{i:04}")))
                .collect();
            let started = Instant::now();
            create_all(client, &ns, &crs, |_| json!({"size": 1})).await?;
            let done = tracker.wait(crs.len(), CONVERGE_TIMEOUT).await?;
            let converged_secs = done.duration_since(started).as_secs_f64();
            let reconciles = side.reconciles().await;
            let requests1 = apiserver_requests(client).await?;
            let cpu_secs: Vec<f64> = side
                .pids()
                .into_iter()
                .zip(cpu0)
                .map(|(pid, before)| cpu_secs(pid) - before)
                .collect();
            let Side::Host(processes) = &side else {
                unreachable!("the shard runs are hosts")
            };
            let mut host_writes = 0.0;
            for host in processes {
                host_writes += metric_sum(
                    &host.metrics_text().await,
                    "operator_host_api_writes_total",
                    &[],
                );
            }
            // The writes of the run, by verb and resource, counted once.
            let writes = writes_between(&requests0, &requests1);
            let cluster_writes: f64 = writes
                .iter()
                .filter(|((_, resource), _)| !resource.starts_with("leases"))
                .map(|(_, delta)| delta)
                .sum();
            println!("    API server writes during the run, by verb and resource (all clients):");
            print_writes(&writes, 1.0);
            anyhow::Ok(ShardRun {
                replicas,
                converged_secs,
                reconciles,
                cpu_secs,
                host_writes,
                cluster_writes,
            })
        }
        .await;
        side.stop().await;
        measured
    }
    .await;
    for host in hosts {
        host.stop().await;
    }
    drop(tracker);
    finish(namespace).await?;
    outcome
}

async fn shard(client: &Client, args: &Args) -> anyhow::Result<()> {
    let dir = repo_root().join("target/plugins");
    let plugins = tempfile::tempdir()?;
    std::fs::copy(
        dir.join("memcached.wasm"),
        plugins.path().join("memcached.wasm"),
    )
    .context("target/plugins/memcached.wasm: run `make plugins` first")?;
    let operands = load_operands(client, plugins.path()).await?;
    let m = args.shard_crs;
    println!(
        "\nshard: {m} Memcached CRs (spec.size 1), 1 replica (--leader-elect) vs {} replicas \
         (--leader-elect --shard)",
        args.replicas
    );
    let mut runs = Vec::new();
    for replicas in [1, args.replicas] {
        let run = shard_run(client, args, replicas, plugins.path(), &operands[0]).await?;
        let reconciles: u64 = run.reconciles.iter().sum();
        let cpu: f64 = run.cpu_secs.iter().sum();
        println!(
            "  {} replica(s): converged in {:6.2}s ({:6.1} CR/s) | reconciles per replica {:?} ({:.2} per CR) | \
             CPU per replica {:?} s ({:.3} ms per reconcile) | host writes {:.0} ({:.2} per CR) | \
             API server writes {:.0} ({:.0}/s)",
            run.replicas,
            run.converged_secs,
            m as f64 / run.converged_secs,
            run.reconciles,
            reconciles as f64 / m as f64,
            run.cpu_secs
                .iter()
                .map(|c| (c * 100.0).round() / 100.0)
                .collect::<Vec<_>>(),
            1e3 * cpu / reconciles.max(1) as f64,
            run.host_writes,
            run.host_writes / m as f64,
            run.cluster_writes,
            run.cluster_writes / run.converged_secs
        );
        runs.push(run);
    }
    let (one, many) = (&runs[0], &runs[1]);
    println!(
        "  ratio {} replicas / 1: throughput {:.3}",
        many.replicas,
        one.converged_secs / many.converged_secs
    );
    project(one, m);
    Ok(())
}

/// How throughput would grow with replicas on a cluster whose API server is not on the
/// controllers' cores: each replica is bound by its CPU per CR, the whole by the API server's
/// write capacity over the writes per CR (of every client: the host's, the
/// controller-manager's and the nodes' for the pods its Deployments make). Capacities: what
/// the devcluster sustained here, and 1000 and 3000 writes/s, assumed for a dedicated
/// control plane.
fn project(one: &ShardRun, m: usize) {
    let reconciles: u64 = one.reconciles.iter().sum();
    let cpu_per_cr = one.cpu_secs.iter().sum::<f64>() / m as f64;
    let writes_per_cr = one.cluster_writes / m as f64;
    let measured = one.cluster_writes / one.converged_secs;
    println!(
        "  projection (from the 1-replica run: {:.2} reconciles, {:.2} ms host CPU, {:.2} host \
         writes and {writes_per_cr:.2} API writes by all clients per CR; the devcluster API server \
         sustained {measured:.0} writes/s on this machine's shared cores):",
        reconciles as f64 / m as f64,
        1e3 * cpu_per_cr,
        one.host_writes / m as f64,
    );
    let capacities = [measured, 1000.0, 3000.0];
    println!(
        "    replicas (1 core each) | host-bound CR/s | projected CR/s at an API server of {:.0} / 1000 / 3000 writes/s",
        measured
    );
    for replicas in [1usize, 2, 3, 5, 10, 20] {
        let host_bound = replicas as f64 / cpu_per_cr;
        let projected: Vec<String> = capacities
            .iter()
            .map(|capacity| format!("{:6.0}", host_bound.min(capacity / writes_per_cr)))
            .collect();
        println!(
            "    {replicas:>8} | {host_bound:15.0} | {}",
            projected.join(" / ")
        );
    }
    let stops: Vec<String> = capacities
        .iter()
        .map(|capacity| format!("{:.1}", capacity / writes_per_cr * cpu_per_cr))
        .collect();
    println!(
        "    throughput stops growing at about {} replicas (API server of {:.0} / 1000 / 3000 writes/s)",
        stops.join(" / "),
        measured
    );
}
