//! Shared by the devcluster benchmarks: the native baseline controller, the controller
//! processes' resource readings, and the cluster room they need.

pub mod native;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use operator_host_sdk::{Desired, Observed, Reconciler};
use operator_host_tests::devcluster;
pub use operator_host_tests::process_host::memory_mib;
use serde_json::json;

/// Pods a devcluster (kwok) node accepts.
const PODS_PER_NODE: usize = 110;
/// Label of the fake nodes the benchmarks add when the cluster lacks pod capacity.
const BENCH_NODE_LABEL: &str = "operator-host.bench/node";

/// Logs to stderr (`RUST_LOG`, `warn` by default) and builds the benchmark's runtime.
pub fn init() -> std::io::Result<tokio::runtime::Runtime> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Resolves when stdin closes: a controller process's driver is done with it.
pub fn stdin_closed() -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        // EOF (or any error) on stdin.
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        let _ = stop_tx.send(());
    });
    async move {
        let _ = stop_rx.await;
    }
}

/// Prints `reconciles <n>` on stdout each time `count()` changes (polled every 100 ms), for
/// the driver's [`follow_reconciles`]. Runs until aborted.
pub fn report_reconciles(count: impl Fn() -> u64 + Send + 'static) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut said = u64::MAX;
        loop {
            let now = count();
            if now != said {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "reconciles {now}");
                let _ = stdout.flush();
                said = now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// The last count a controller process's [`report_reconciles`] printed, kept up to date by a
/// thread reading its stdout.
pub fn follow_reconciles(stdout: impl std::io::BufRead + Send + 'static) -> Arc<AtomicU64> {
    let reconciles = Arc::new(AtomicU64::new(0));
    let count = reconciles.clone();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("reconciles ") {
                count.store(n.trim().parse().unwrap_or(0), Ordering::Relaxed);
            }
        }
    });
    reconciles
}

/// The sum of a counter family's samples in a Prometheus text exposition, over the samples
/// whose labels contain every one of `with`.
pub fn metric_sum(text: &str, family: &str, with: &[&str]) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// Closes a controller process's stdin (its graceful shutdown); kills it if it has not
/// exited in 30 s.
pub fn stop_child(mut child: std::process::Child) {
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The Memcached logic on a parent of any kind whose spec is Memcached's.
pub fn memcached_logic(
    parent: &native::Parent<memcached::MemcachedSpec>,
    observed: &Observed,
) -> Result<Desired, operator_host_sdk::Error> {
    let typed = memcached::Memcached {
        metadata: parent.metadata.clone(),
        spec: parent.spec.clone(),
        status: None,
    };
    memcached::MemcachedOperator::reconcile(&typed, observed)
}

/// User + system CPU seconds of `pid` (and its finished threads).
pub fn cpu_secs(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // `rest` starts at field 3 (state), so field k is at index k - 3.
    (ticks(11) + ticks(12)) / 100.0
}

/// Waits (up to 10 min) until the namespace and everything in it are gone.
pub async fn wait_namespace_gone(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(600) {
        match namespaces.get_opt(name).await {
            Ok(None) => return,
            Ok(Some(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    eprintln!("warning: namespace {name} still exists after 10 min; continuing");
}

/// Nearest-rank percentile.
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// Adds fake kwok nodes until the cluster has room for `pods` more pods; returns their names.
pub async fn ensure_pod_capacity(client: &Client, pods: usize) -> anyhow::Result<Vec<String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let fake: Vec<Node> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|n| {
            n.annotations()
                .get("kwok.x-k8s.io/node")
                .map(String::as_str)
                == Some("fake")
        })
        .collect();
    let running = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed"))
        .await?
        .items
        .len();
    let capacity = fake.len() * PODS_PER_NODE;
    let free = capacity.saturating_sub(running);
    if free >= pods {
        return Ok(Vec::new());
    }
    let missing = (pods - free).div_ceil(PODS_PER_NODE);
    let version = client.apiserver_version().await?.git_version;
    let mut added = Vec::new();
    for i in 0..missing {
        let name = format!("bench-kwok-node-{i}");
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                           "kubernetes.io/arch": "amd64", "type": "kwok", BENCH_NODE_LABEL: "true"},
            },
            "status": {
                "capacity": {"cpu": "32", "memory": "256Gi", "pods": PODS_PER_NODE.to_string()},
                "allocatable": {"cpu": "32", "memory": "256Gi", "pods": PODS_PER_NODE.to_string()},
                "phase": "Running",
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": version,
                             "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                             "machineID": "", "osImage": "", "systemUUID": ""},
            },
        }))?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
        added.push(name);
    }
    devcluster::wait_for(
        &format!("{} bench nodes Ready", added.len()),
        Duration::from_secs(60),
        || {
            let nodes = nodes.clone();
            let added = added.clone();
            async move {
                let mut ready = 0;
                for name in &added {
                    let node = nodes.get(name).await?;
                    let is_ready = node.status.and_then(|s| s.conditions).is_some_and(|cs| {
                        cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                    ready += usize::from(is_ready);
                }
                Ok((ready == added.len()).then_some(()))
            }
        },
    )
    .await?;
    println!(
        "added {} fake nodes ({} had room for {free} more pods, {pods} needed); removed at the end",
        added.len(),
        fake.len()
    );
    Ok(added)
}

pub async fn remove_bench_nodes(client: &Client, names: &[String]) {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in names {
        if let Err(error) = nodes.delete(name, &DeleteParams::default()).await {
            eprintln!("warning: cannot delete bench node {name}: {error}");
        }
    }
}

/// API server request counts by verb and resource (`resource[.group][/subresource]`, e.g.
/// `deployments.apps/status`), from `apiserver_request_total`: every client's requests.
pub type RequestCounts = std::collections::BTreeMap<(String, String), f64>;

/// Verbs that write nothing.
const READ_VERBS: [&str; 4] = ["GET", "LIST", "WATCH", "CONNECT"];

/// The API server's request counters (`apiserver_request_total`), summed by verb and resource.
pub async fn apiserver_requests(client: &Client) -> anyhow::Result<RequestCounts> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut counts = RequestCounts::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |name: &str| {
            line.split_once(&format!(",{name}=\""))
                .or_else(|| line.split_once(&format!("{{{name}=\"")))
                .and_then(|(_, rest)| rest.split_once('"'))
                .map_or(String::new(), |(value, _)| value.to_string())
        };
        let mut resource = label("resource");
        for (separator, part) in [('.', label("group")), ('/', label("subresource"))] {
            if !part.is_empty() {
                resource = format!("{resource}{separator}{part}");
            }
        }
        let value: f64 = line
            .rsplit_once(' ')
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0.0);
        *counts.entry((label("verb"), resource)).or_insert(0.0) += value;
    }
    Ok(counts)
}

/// The writes (every verb but reads) counted between two readings, by verb and resource.
pub fn writes_between(
    before: &RequestCounts,
    after: &RequestCounts,
) -> Vec<((String, String), f64)> {
    after
        .iter()
        .filter(|((verb, _), _)| !READ_VERBS.contains(&verb.as_str()))
        .map(|(key, count)| (key.clone(), count - before.get(key).copied().unwrap_or(0.0)))
        .filter(|(_, delta)| *delta > 0.0)
        .collect()
}

/// Prints writes as a table, each count divided by `per`.
pub fn print_writes(writes: &[((String, String), f64)], per: f64) {
    for ((verb, resource), count) in writes {
        println!("      {verb:>7} {resource:<40} {:9.2}", count / per);
    }
}
