//! Convergence of N Memcached CRs on the devcluster: the wasm host against a native kube-rs controller.
//!
//! One run (`cargo bench -p operator-host-tests --bench convergence -- --n 200 --n 1000`), for
//! each N and each side (wasm host first, then native), in a namespace of its own:
//!
//! 1. start the controller in a child process of this binary (`--controller wasm|native`), so
//!    its resident memory and CPU time are its own, and wait until it reconciled a warm-up CR;
//! 2. create N `Memcached` CRs (32 creates in flight), stamping each with an `Instant`;
//! 3. watch Deployments, Services and the CRs from this (driver) process and record, per CR,
//!    when both children were first seen, when a status for its generation was first seen and
//!    when the status was up to date (`observedGeneration == generation`,
//!    `readyReplicas == spec.size`, `Available=True`);
//! 4. read the controller's VmRSS/VmHWM and CPU time; after a settle window, the API server's
//!    request counters (`apiserver_request_total`, every client's) by verb and resource, and
//!    the controller's writes per CR against the least a controller must write (the two
//!    creates, one status write per status change the watch saw, one event per created child);
//! 5. stop the controller, delete the namespace and wait until it is gone, so the next run
//!    starts on a quiet cluster.
//!
//! Both controllers use the default kube-rs client (kube-rs has no client-side rate limit),
//! the same reconcile concurrency, the same reflector-backed child caches, the same labels,
//! owner references, apply order, events and status rules. The native one
//! (`common/native.rs`) calls `memcached::MemcachedOperator::reconcile` directly. Results go to
//! stdout as a table.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use common::native::{NativeController, Operand};
use common::{
    apiserver_requests, cpu_secs, ensure_pod_capacity, memory_mib, percentile, print_writes,
    remove_bench_nodes, wait_namespace_gone, writes_between,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use operator_host_tests::devcluster::{self, TestNamespace};
use serde_json::{Value, json};

const GROUP: &str = "cache.example.com";
const VERSION: &str = "v1alpha1";
const KIND: &str = "Memcached";
const PLURAL: &str = "memcacheds";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Wasm,
    Native,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Wasm => "wasm",
            Side::Native => "native",
        }
    }
}

#[derive(Debug, Clone)]
struct Args {
    /// Driver: the numbers of CRs, in order.
    ns: Vec<usize>,
    /// `spec.size` of every CR.
    size: i32,
    concurrency: u16,
    /// Create requests in flight at once.
    create_parallelism: usize,
    /// Runs per side and N; the order alternates and the summary takes medians.
    repeat: usize,
    timeout: Duration,
    plugin: PathBuf,
    /// Child: which controller to run, in which namespace.
    controller: Option<(Side, String)>,
}

fn parse_args() -> anyhow::Result<Args> {
    let root = devcluster::repo_root();
    let mut args = Args {
        ns: Vec::new(),
        size: 1,
        concurrency: 32,
        create_parallelism: 32,
        repeat: 1,
        timeout: Duration::from_secs(900),
        plugin: root.join("target/plugins/memcached.wasm"),
        controller: None,
    };
    let mut side = None;
    let mut namespace = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--n" => args.ns.push(value("--n")?.parse().context("--n")?),
            "--size" => args.size = value("--size")?.parse().context("--size")?,
            "--concurrency" => {
                args.concurrency = value("--concurrency")?.parse().context("--concurrency")?
            }
            "--create-parallelism" => {
                args.create_parallelism = value("--create-parallelism")?.parse()?
            }
            "--repeat" => args.repeat = value("--repeat")?.parse::<usize>()?.max(1),
            "--timeout-secs" => {
                args.timeout = Duration::from_secs(value("--timeout-secs")?.parse()?)
            }
            "--plugin" => args.plugin = PathBuf::from(value("--plugin")?),
            "--controller" => {
                side = Some(match value("--controller")?.as_str() {
                    "wasm" => Side::Wasm,
                    "native" => Side::Native,
                    other => bail!("--controller must be wasm or native, got {other:?}"),
                })
            }
            "--namespace" => namespace = Some(value("--namespace")?),
            // `cargo bench` passes --bench; a criterion-style filter is ignored too.
            "--bench" => {}
            other if !other.starts_with('-') => {}
            other => bail!(
                "unknown argument {other:?}; usage: convergence [--n N]... [--size S] \
                 [--concurrency C] [--create-parallelism P] [--repeat R] [--timeout-secs T] \
                 [--plugin PATH]"
            ),
        }
    }
    if let (Some(side), Some(namespace)) = (side, namespace) {
        args.controller = Some((side, namespace));
    }
    if args.ns.is_empty() {
        args.ns = vec![200, 1000];
    }
    Ok(args)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let runtime = common::init()?;
    match args.controller.clone() {
        Some((side, namespace)) => runtime.block_on(controller_process(side, namespace, args)),
        None => runtime.block_on(driver(args)),
    }
}

// ---------------------------------------------------------------------------------------------
// The controller process.
// ---------------------------------------------------------------------------------------------

/// Runs one controller until stdin closes; prints `ready` once it is started, then
/// `reconciles <n>` as the count grows.
async fn controller_process(side: Side, namespace: String, args: Args) -> anyhow::Result<()> {
    let client = devcluster::client().await;
    let shutdown = common::stdin_closed();
    match side {
        Side::Wasm => {
            let runtime =
                operator_host::runtime::Runtime::new(operator_host::runtime::RuntimeConfig {
                    cache_dir: Some(compile_cache_dir()),
                    ..Default::default()
                })?;
            let plugin = operator_host::plugin::Plugin::load(&runtime, &args.plugin)?;
            let config = operator_host::controller::ControllerConfig {
                namespaces: vec![namespace],
                resync: Duration::from_secs(300),
                concurrency: args.concurrency,
                leadership: operator_host::leader::Leadership::unelected(),
                shard: None,
                record: None,
                canary_failed: Default::default(),
            };
            let metrics = Arc::new(operator_host::metrics::Metrics::new());
            let controller = operator_host::controller::PluginController::start(
                &client,
                Arc::new(plugin),
                &config,
                &metrics,
            );
            announce_ready();
            let reporter = common::report_reconciles(move || {
                common::metric_sum(&metrics.encode(), "operator_host_reconciles_total", &[]) as u64
            });
            shutdown.await;
            reporter.abort();
            controller.stop().await;
        }
        Side::Native => {
            let operand = Operand {
                name: "memcached".into(),
                parent: parent_resource(),
                logic: common::memcached_logic,
            };
            announce_ready();
            let reconciles = Arc::new(AtomicU64::new(0));
            let reporter = common::report_reconciles({
                let reconciles = reconciles.clone();
                move || reconciles.load(Ordering::Relaxed)
            });
            NativeController::new(client, &namespace, operand, args.concurrency)
                .owns::<Deployment>()
                .owns::<Service>()
                .run(shutdown, reconciles)
                .await;
            reporter.abort();
        }
    }
    Ok(())
}

fn announce_ready() {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "ready");
    let _ = stdout.flush();
}

fn compile_cache_dir() -> PathBuf {
    devcluster::repo_root().join("target/bench-compile-cache")
}

// ---------------------------------------------------------------------------------------------
// The driver.
// ---------------------------------------------------------------------------------------------

/// What the driver's watches saw, per CR name.
#[derive(Default)]
struct Seen {
    deployment: HashMap<String, Instant>,
    service: HashMap<String, Instant>,
    first_status: HashMap<String, Instant>,
    converged: HashMap<String, Instant>,
    /// The last status seen and how many times it changed, per CR.
    statuses: HashMap<String, (Value, usize)>,
}

#[derive(Debug, Clone)]
struct RunResult {
    side: Side,
    n: usize,
    create_secs: f64,
    children_all_secs: f64,
    status_all_secs: f64,
    converged_secs: f64,
    children_p50_ms: f64,
    children_p99_ms: f64,
    converged_p50_ms: f64,
    converged_p99_ms: f64,
    rss_mib: f64,
    hwm_mib: f64,
    cpu_secs: f64,
    /// CPU per reconcile and reconciles per CR, from the warm-up's convergence to the end of
    /// the settle window.
    cpu_per_reconcile_ms: f64,
    reconciles_per_cr: f64,
    /// Every client's writes during the run, by verb and resource.
    writes: Vec<((String, String), f64)>,
    /// The controller's writes per CR, and the least it could have made.
    controller_writes_per_cr: f64,
    minimum_writes_per_cr: f64,
}

async fn driver(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.plugin.exists(),
        "{} does not exist: run `make plugins` first",
        args.plugin.display()
    );
    let cluster = tokio::task::spawn_blocking(devcluster::cluster).await?;
    let client = devcluster::client().await;
    // Install the CRD the way the host does (with its status fields), and warm the cache
    // of compiled plugins, so neither side pays for either inside a measurement.
    let runtime = operator_host::runtime::Runtime::new(operator_host::runtime::RuntimeConfig {
        cache_dir: Some(compile_cache_dir()),
        ..Default::default()
    })?;
    let plugin = operator_host::plugin::Plugin::load(&runtime, &args.plugin)?;
    operator_host::controller::install_crd(&client, &plugin).await?;
    drop(plugin);

    let max_n = args.ns.iter().copied().max().unwrap_or(0);
    let bench_nodes = ensure_pod_capacity(&client, max_n * args.size.max(0) as usize + 1).await?;

    println!(
        "convergence: N = {:?} x {} runs per side, spec.size = {}, controller concurrency = {}, \
         {} creates in flight, {} cores",
        args.ns,
        args.repeat,
        args.size,
        args.concurrency,
        args.create_parallelism,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut results = Vec::new();
    let mut failure = None;
    'runs: for &n in &args.ns {
        let orders = [[Side::Wasm, Side::Native], [Side::Native, Side::Wasm]];
        for side in (0..args.repeat).flat_map(|r| orders[r % 2]) {
            match run_once(&cluster.kubeconfig, &args, side, n).await {
                Ok(result) => {
                    print_result(&result);
                    results.push(result);
                }
                Err(error) => {
                    failure = Some(error.context(format!("{} run with N = {n}", side.name())));
                    break 'runs;
                }
            }
        }
    }
    remove_bench_nodes(&client, &bench_nodes).await;
    print_summary(&results);
    match failure {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn parent_resource() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.into(),
        plural: PLURAL.into(),
    }
}

fn memcached_api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &parent_resource())
}

fn memcached_object(name: &str, size: i32) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"size": size},
    })
}

/// Whether a CR's status is up to date: its generation seen, its pods ready, `Available`.
fn status_state(object: &DynamicObject) -> (bool, bool) {
    let generation = object.metadata.generation;
    let status = &object.data["status"];
    let for_generation =
        generation.is_some() && status["observedGeneration"].as_i64() == generation;
    let size = object.data["spec"]["size"].as_i64().unwrap_or(-1);
    let available = status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True")
    });
    let ready = status["readyReplicas"].as_i64() == Some(size);
    (for_generation, for_generation && ready && available)
}

/// Spawns the driver's watches; resolves once all three have listed the namespace.
async fn watch_namespace(
    client: &Client,
    namespace: &str,
    seen: Arc<Mutex<Seen>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(3);
    let mut tasks = Vec::new();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let parents = memcached_api(client, namespace);

    fn spawn_watch<K, F>(
        stream: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
        ready: tokio::sync::mpsc::Sender<()>,
        mut on_object: F,
    ) -> tokio::task::JoinHandle<()>
    where
        K: Send + 'static,
        F: FnMut(K, Instant) + Send + 'static,
    {
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        on_object(o, now)
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = ready.try_send(());
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "driver watch error"),
                }
            }
        })
    }

    let s = seen.clone();
    tasks.push(spawn_watch(
        watcher(deployments, watcher::Config::default()).default_backoff(),
        ready_tx.clone(),
        move |d: Deployment, now| {
            s.lock()
                .unwrap()
                .deployment
                .entry(d.name_any())
                .or_insert(now);
        },
    ));
    let s = seen.clone();
    tasks.push(spawn_watch(
        watcher(services, watcher::Config::default()).default_backoff(),
        ready_tx.clone(),
        move |svc: Service, now| {
            s.lock()
                .unwrap()
                .service
                .entry(svc.name_any())
                .or_insert(now);
        },
    ));
    let s = seen;
    tasks.push(spawn_watch(
        watcher(parents, watcher::Config::default()).default_backoff(),
        ready_tx,
        move |mc: DynamicObject, now| {
            let (for_generation, converged) = status_state(&mc);
            let mut seen = s.lock().unwrap();
            let status = mc.data.get("status").cloned().unwrap_or(Value::Null);
            let (last, changes) = seen
                .statuses
                .entry(mc.name_any())
                .or_insert((Value::Null, 0));
            if status != *last {
                *last = status;
                *changes += 1;
            }
            if for_generation {
                seen.first_status.entry(mc.name_any()).or_insert(now);
            }
            if converged {
                seen.converged.entry(mc.name_any()).or_insert(now);
            }
        },
    ));
    for _ in 0..3 {
        let _ = ready_rx.recv().await;
    }
    tasks
}

/// A controller child process; stopping it closes its stdin.
struct ControllerProcess {
    child: Child,
    reconciles: Arc<AtomicU64>,
}

impl ControllerProcess {
    fn spawn(kubeconfig: &Path, args: &Args, side: Side, namespace: &str) -> anyhow::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--controller", side.name(), "--namespace", namespace])
            .args(["--concurrency", &args.concurrency.to_string()])
            .arg("--plugin")
            .arg(&args.plugin)
            .env(devcluster::KUBECONFIG_ENV, kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawning the controller process")?;
        let mut stdout = BufReader::new(child.stdout.take().context("controller stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        anyhow::ensure!(
            line.trim() == "ready",
            "the {} controller did not start (said {line:?})",
            side.name()
        );
        let reconciles = common::follow_reconciles(stdout);
        Ok(ControllerProcess { child, reconciles })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its reconciles so far, as it last reported them.
    fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// Closes stdin (graceful shutdown); kills the process if it has not exited in 30 s.
    fn stop(self) {
        common::stop_child(self.child);
    }
}

async fn wait_until<F: FnMut() -> bool>(
    what: &str,
    timeout: Duration,
    mut done: F,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn run_once(
    kubeconfig: &Path,
    args: &Args,
    side: Side,
    n: usize,
) -> anyhow::Result<RunResult> {
    let namespace = TestNamespace::new(&format!("bench-{}-{n}", side.name())).await?;
    let ns = namespace.name().to_string();
    let client = namespace.client();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watches = watch_namespace(&client, &ns, seen.clone()).await;
    let controller = {
        let (kubeconfig, args, ns) = (kubeconfig.to_path_buf(), args.clone(), ns.clone());
        tokio::task::spawn_blocking(move || ControllerProcess::spawn(&kubeconfig, &args, side, &ns))
            .await??
    };
    let api = memcached_api(&client, &ns);
    let result = async {
        // Warm-up: one CR through the whole loop proves the controller's watches are up.
        api.create(
            &PostParams::default(),
            &serde_json::from_value(memcached_object("warmup", args.size))?,
        )
        .await?;
        wait_until(
            "the warm-up CR to converge",
            Duration::from_secs(120),
            || seen.lock().unwrap().converged.contains_key("warmup"),
        )
        .await?;
        let cpu_before = cpu_secs(controller.pid());
        let reconciles_before = controller.reconciles();
        let requests_before = apiserver_requests(&client).await?;

        let names: Vec<String> = (0..n).map(|i| format!("mc-{i:05}")).collect();
        let started = Instant::now();
        let created: Vec<(String, Instant)> = futures::stream::iter(names.iter().cloned())
            .map(|name| {
                let api = api.clone();
                let object = memcached_object(&name, args.size);
                async move {
                    let at = Instant::now();
                    api.create(&PostParams::default(), &serde_json::from_value(object)?)
                        .await
                        .with_context(|| format!("creating {name}"))?;
                    anyhow::Ok((name, at))
                }
            })
            .buffer_unordered(args.create_parallelism)
            .try_collect()
            .await?;
        let create_secs = started.elapsed().as_secs_f64();

        let all = |map: &HashMap<String, Instant>| names.iter().all(|n| map.contains_key(n));
        wait_until(&format!("{n} CRs to converge"), args.timeout, || {
            all(&seen.lock().unwrap().converged)
        })
        .await?;
        let (rss_mib, hwm_mib) = memory_mib(controller.pid());
        let cpu = cpu_secs(controller.pid()) - cpu_before;
        // What the pods' last status updates still make the controller write.
        tokio::time::sleep(SETTLE).await;
        // The reconciles that work took and their CPU, the trailing ones included.
        let settled_cpu = cpu_secs(controller.pid()) - cpu_before;
        let reconciles = controller.reconciles() - reconciles_before;
        let writes = writes_between(&requests_before, &apiserver_requests(&client).await?);
        let event_writes = controller_event_writes(&client, &ns).await?;

        let seen = seen.lock().unwrap();
        let status_changes: usize = names.iter().map(|name| seen.statuses[name].1).sum();
        let per_cr = |count: f64| count / n as f64;
        let mut children_ms = Vec::with_capacity(n);
        let mut converged_ms = Vec::with_capacity(n);
        let (mut children_all, mut status_all, mut converged_all) = (started, started, started);
        for (name, at) in &created {
            let children = seen.deployment[name].max(seen.service[name]);
            children_ms.push(children.saturating_duration_since(*at).as_secs_f64() * 1e3);
            converged_ms.push(
                seen.converged[name]
                    .saturating_duration_since(*at)
                    .as_secs_f64()
                    * 1e3,
            );
            children_all = children_all.max(children);
            status_all = status_all.max(seen.first_status[name]);
            converged_all = converged_all.max(seen.converged[name]);
        }
        let since = |t: Instant| t.saturating_duration_since(started).as_secs_f64();
        anyhow::Ok(RunResult {
            side,
            n,
            create_secs,
            children_all_secs: since(children_all),
            status_all_secs: since(status_all),
            converged_secs: since(converged_all),
            children_p50_ms: percentile(&mut children_ms, 50.0),
            children_p99_ms: percentile(&mut children_ms, 99.0),
            converged_p50_ms: percentile(&mut converged_ms, 50.0),
            converged_p99_ms: percentile(&mut converged_ms, 99.0),
            rss_mib,
            hwm_mib,
            cpu_secs: cpu,
            cpu_per_reconcile_ms: settled_cpu * 1e3 / reconciles.max(1) as f64,
            reconciles_per_cr: per_cr(reconciles as f64),
            controller_writes_per_cr: per_cr(controller_writes(&writes) + event_writes),
            minimum_writes_per_cr: per_cr((4 * n + status_changes) as f64),
            writes,
        })
    }
    .await;

    tokio::task::spawn_blocking(move || controller.stop()).await?;
    for watch in watches {
        watch.abort();
    }
    namespace.cleanup().await?;
    wait_namespace_gone(&client, &ns).await;
    result
}

/// How long after convergence the API server's counters are read.
const SETTLE: Duration = Duration::from_secs(3);

/// The writes only the controller makes: applies of its children and writes of its CRs (the
/// driver's own creates aside). Its events are counted on the Event objects.
fn controller_writes(writes: &[((String, String), f64)]) -> f64 {
    let memcacheds = format!("{PLURAL}.{GROUP}");
    writes
        .iter()
        .filter(|((verb, resource), _)| match resource.as_str() {
            "deployments.apps" | "services" => verb == "APPLY",
            r => r.starts_with(&memcacheds) && !(verb == "POST" && r == memcacheds),
        })
        .map(|(_, count)| count)
        .sum()
}

/// Writes of the events about the run's CRs (the warm-up CR's aside): one per event, and one
/// more per repeat of a series. Only the controller posts events about its CRs.
async fn controller_event_writes(client: &Client, namespace: &str) -> anyhow::Result<f64> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some(KIND) && r.name.as_deref() != Some("warmup")
            })
        })
        .map(|e| e.series.as_ref().map_or(1, |s| s.count.max(1)) as f64)
        .sum())
}

fn print_result(r: &RunResult) {
    println!(
        "{:>6} N={:<5} created in {:6.2}s | all children {:6.2}s, all statuses {:6.2}s, \
         converged {:6.2}s ({:6.1} CR/s) | create->children p50 {:7.1}ms p99 {:7.1}ms | \
         create->converged p50 {:7.1}ms p99 {:7.1}ms | RSS {:6.1} MiB (peak {:6.1}) | CPU {:5.2}s",
        r.side.name(),
        r.n,
        r.create_secs,
        r.children_all_secs,
        r.status_all_secs,
        r.converged_secs,
        r.n as f64 / r.converged_secs,
        r.children_p50_ms,
        r.children_p99_ms,
        r.converged_p50_ms,
        r.converged_p99_ms,
        r.rss_mib,
        r.hwm_mib,
        r.cpu_secs,
    );
    println!(
        "    {:.2} reconciles per CR, {:.3} ms CPU per reconcile (with the settle window)",
        r.reconciles_per_cr, r.cpu_per_reconcile_ms
    );
    println!(
        "    controller writes per CR {:.2} (least {:.2}: ratio {:.2}); the API server's writes \
         per CR during the run (every client):",
        r.controller_writes_per_cr,
        r.minimum_writes_per_cr,
        r.controller_writes_per_cr / r.minimum_writes_per_cr
    );
    print_writes(&r.writes, r.n as f64);
}

fn print_summary(results: &[RunResult]) {
    println!();
    println!(
        "ratios wasm/native, of the medians over runs (targets: throughput >= 0.95, \
         p99 latency <= 1.10, CPU per reconcile <= 1.1, controller writes <= 1.5x the least):"
    );
    for n in results
        .iter()
        .map(|r| r.n)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (Some(w), Some(nat)) = (
            median_result(results, n, Side::Wasm),
            median_result(results, n, Side::Native),
        ) else {
            continue;
        };
        let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
        let throughput = nat.converged_secs / w.converged_secs;
        let children_throughput = nat.children_all_secs / w.children_all_secs;
        let p99 = w.children_p99_ms / nat.children_p99_ms;
        let cpu_per_reconcile = w.cpu_per_reconcile_ms / nat.cpu_per_reconcile_ms;
        println!(
            "  N={n:<5} throughput (converged) {throughput:.3} [{}], throughput (children) {children_throughput:.3}, \
             create->children p50 {:.3} p99 {p99:.3} [{}], create->converged p99 {:.3}, \
             RSS {:.1}/{:.1} MiB, CPU {:.2}/{:.2}s (per CR {:.3}), CPU per reconcile \
             {:.3}/{:.3} ms {cpu_per_reconcile:.3} [{}] over {:.2}/{:.2} reconciles per CR, \
             controller writes per CR {:.2}/{:.2} (wasm's {:.2}x the least [{}])",
            verdict(throughput >= 0.95),
            w.children_p50_ms / nat.children_p50_ms,
            verdict(p99 <= 1.10),
            w.converged_p99_ms / nat.converged_p99_ms,
            w.rss_mib,
            nat.rss_mib,
            w.cpu_secs,
            nat.cpu_secs,
            w.cpu_secs / nat.cpu_secs,
            w.cpu_per_reconcile_ms,
            nat.cpu_per_reconcile_ms,
            verdict(cpu_per_reconcile <= 1.1),
            w.reconciles_per_cr,
            nat.reconciles_per_cr,
            w.controller_writes_per_cr,
            nat.controller_writes_per_cr,
            w.controller_writes_per_cr / w.minimum_writes_per_cr,
            verdict(w.controller_writes_per_cr <= 1.5 * w.minimum_writes_per_cr),
        );
    }
}

/// The per-field median of the runs of `side` with `n` CRs.
fn median_result(results: &[RunResult], n: usize, side: Side) -> Option<RunResult> {
    let runs: Vec<&RunResult> = results
        .iter()
        .filter(|r| r.n == n && r.side == side)
        .collect();
    let first = (*runs.first()?).clone();
    let median = |field: fn(&RunResult) -> f64| {
        let mut values: Vec<f64> = runs.iter().map(|r| field(r)).collect();
        percentile(&mut values, 50.0)
    };
    Some(RunResult {
        create_secs: median(|r| r.create_secs),
        children_all_secs: median(|r| r.children_all_secs),
        status_all_secs: median(|r| r.status_all_secs),
        converged_secs: median(|r| r.converged_secs),
        children_p50_ms: median(|r| r.children_p50_ms),
        children_p99_ms: median(|r| r.children_p99_ms),
        converged_p50_ms: median(|r| r.converged_p50_ms),
        converged_p99_ms: median(|r| r.converged_p99_ms),
        rss_mib: median(|r| r.rss_mib),
        hwm_mib: median(|r| r.hwm_mib),
        cpu_secs: median(|r| r.cpu_secs),
        cpu_per_reconcile_ms: median(|r| r.cpu_per_reconcile_ms),
        reconciles_per_cr: median(|r| r.reconciles_per_cr),
        controller_writes_per_cr: median(|r| r.controller_writes_per_cr),
        minimum_writes_per_cr: median(|r| r.minimum_writes_per_cr),
        ..first
    })
}
