//! The memory hot swaps leave behind in a host process: a host serving Memcached parents from a
//! plugin directory whose file is replaced, alternately with two builds, while every swap
//! reconciles the parents again; its resident memory against a fresh host serving the last
//! build to the same parents. Shared by the CI test (`hot_reload.rs`) and the benchmark
//! (`benches/swap_memory.rs`).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::devcluster::{TestNamespace, wait_for};
use crate::host::publish;
use crate::memcached::{create, memcached_resource};
use crate::process_host::{Launch, ProcessHost, free_local_addr, http_get};

/// How long a swap, or the reconciles it causes, may take.
const BOUND: Duration = Duration::from_secs(120);

/// What one run measured, in MiB.
#[derive(Debug, Clone)]
pub struct SwapMemory {
    /// Resident memory before the first swap, and after every `every`th swap (each the least
    /// of a second's samples).
    pub samples: Vec<(usize, f64)>,
    /// After the last swap.
    pub after: f64,
    /// A fresh host serving the last build to the same parents.
    pub fresh: f64,
    /// Where the swapped host's memory sits after the last swap, and the fresh host's.
    pub after_by_kind: MemoryByKind,
    pub fresh_by_kind: MemoryByKind,
    /// The fresh host again after as many rounds of reconciles as the swapped host made (each
    /// round started by an annotation on every parent), when asked for: what serving for as
    /// long costs without a swap, so that the difference is what the swaps left behind.
    pub same_work: Option<(f64, MemoryByKind)>,
}

/// A process's resident memory by what holds it, in MiB (`/proc/<pid>/smaps`).
#[derive(Debug, Clone, Default)]
pub struct MemoryByKind {
    /// Guest linear memories in the pooling allocator's slots: the pages of a slot's memory
    /// image (mapped privately from the compiled artifact) and the pages past it.
    pub instance_pool: f64,
    /// Other anonymous memory: the C allocator's arenas, thread stacks.
    pub heap: f64,
    /// Compiled plugin code and data mapped from the compile cache.
    pub plugin_code: f64,
    /// Every other file mapping: the host's own executable and libraries.
    pub other_files: f64,
}

impl std::fmt::Display for MemoryByKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "instance pool {:.1}, heap {:.1}, plugin code {:.1}, other files {:.1}",
            self.instance_pool, self.heap, self.plugin_code, self.other_files
        )
    }
}

/// One mapping of `/proc/<pid>/smaps`.
struct Mapping {
    bytes: u64,
    permissions: String,
    path: String,
    resident_kib: f64,
}

/// Reads `/proc/<pid>/smaps` into a [`MemoryByKind`].
pub fn memory_by_kind(pid: u32) -> MemoryByKind {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            mappings.push(Mapping {
                bytes: end - start,
                permissions: fields.next().unwrap_or_default().to_string(),
                path: fields.nth(3).unwrap_or_default().to_string(),
                resident_kib: 0.0,
            });
        } else if first == "Rss:"
            && let Some(kib) = fields.next().and_then(|k| k.parse::<f64>().ok())
            && let Some(mapping) = mappings.last_mut()
        {
            mapping.resident_kib = kib;
        }
    }
    let mut by_kind = MemoryByKind::default();
    for (i, mapping) in mappings.iter().enumerate() {
        let compiled = mapping.path.ends_with(".cwasm");
        // A pool slot is GiBs of address space, inaccessible past what its memory uses now.
        let before_slot_guard = mappings.get(i + 1).is_some_and(|next| {
            next.path.is_empty() && next.permissions == "---p" && next.bytes >= 1 << 30
        });
        let kind = if compiled && mapping.permissions == "rw-p" {
            &mut by_kind.instance_pool
        } else if compiled {
            &mut by_kind.plugin_code
        } else if mapping.path.is_empty() && before_slot_guard {
            &mut by_kind.instance_pool
        } else if mapping.path.is_empty() || mapping.path.starts_with('[') {
            &mut by_kind.heap
        } else {
            &mut by_kind.other_files
        };
        *kind += mapping.resident_kib / 1024.0;
    }
    by_kind
}

impl SwapMemory {
    /// The swapped host's memory over the fresh one's.
    pub fn ratio(&self) -> f64 {
        self.after / self.fresh
    }

    /// The swapped host's memory over that of the host that did the same work unswapped.
    pub fn same_work_ratio(&self) -> Option<f64> {
        self.same_work.as_ref().map(|(mib, _)| self.after / mib)
    }
}

/// What process `pid` keeps resident, in MiB: the least of five samples over a second, so a
/// reconcile still in flight (its buffers are freed a moment later) is not counted as kept.
async fn settled_rss_mib(pid: u32) -> f64 {
    let mut least = f64::MAX;
    for _ in 0..5 {
        least = least.min(rss_mib(pid));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    least
}

/// The resident memory of process `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS for process {pid}"));
    kib / 1024.0
}

/// The sum of the samples of metric `name` whose labels contain every one of `labels`.
async fn metric_sum(metrics: SocketAddr, name: &str, labels: &[&str]) -> f64 {
    let text = http_get(metrics, "/metrics")
        .await
        .map(|(_, body)| body)
        .unwrap_or_default();
    text.lines()
        .filter(|line| line.starts_with(name) && labels.iter().all(|l| line.contains(l)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn reconciles(metrics: SocketAddr) -> f64 {
    metric_sum(
        metrics,
        "operator_host_reconciles_total",
        &["plugin=\"memcached\""],
    )
    .await
}

/// A host process serving `dir` to `ns`, ready.
async fn serve(binary: &Path, dir: &Path, ns: &TestNamespace) -> (ProcessHost, SocketAddr) {
    let metrics = free_local_addr();
    let kubeconfig = crate::devcluster::cluster().kubeconfig.clone();
    let mut host = ProcessHost::start(&Launch {
        binary,
        plugins: dir,
        kubeconfig: &kubeconfig,
        namespace: Some(ns.name()),
        install_crds: true,
        crash_after: None,
        metrics_addr: Some(metrics),
        args: &[],
    });
    let ready = wait_for("the host ready", BOUND, || async {
        Ok(http_get(metrics, "/readyz")
            .await
            .filter(|(status, _)| *status == 200)
            .map(|_| ()))
    })
    .await;
    host.assert_running("starting").await;
    ready.unwrap_or_else(|e| panic!("{e}; log tail:\n{}", host.log_tail(30)));
    (host, metrics)
}

/// Waits until the host has made `count` more reconciles than `since`.
async fn reconciled(host: &ProcessHost, metrics: SocketAddr, since: f64, count: usize) {
    let outcome = wait_for("the parents reconciled", BOUND, || async {
        Ok((reconciles(metrics).await >= since + count as f64).then_some(()))
    })
    .await;
    outcome.unwrap_or_else(|e| panic!("{e}; log tail:\n{}", host.log_tail(30)));
}

/// Serves `parents` Memcached parents with `builds[0]`, then swaps `swaps` times between the
/// two builds (each swap waits until the new build served and reconciled every parent),
/// sampling the host's memory every `every` swaps; then measures a fresh host serving the
/// last build, and with `same_work` that host again after `swaps` rounds of reconciles.
/// `binary` is the host (`operator-host-faulty`).
pub async fn measure(
    binary: &Path,
    test: &str,
    builds: [&Path; 2],
    parents: usize,
    swaps: usize,
    every: usize,
    same_work: bool,
) -> SwapMemory {
    // Both builds compiled into the shared compile cache first, as a host that has served
    // both has them: every swap then loads a cached artifact, as a fresh host loads the last.
    for build in builds {
        crate::host::runtime()
            .load(build)
            .unwrap_or_else(|e| panic!("compiling {}: {e}", build.display()));
    }
    let ns = TestNamespace::new(test).await.unwrap();
    let api = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memcached.wasm");
    publish(builds[0], &file);
    let (host, metrics) = serve(binary, dir.path(), &ns).await;
    let before = reconciles(metrics).await;
    for i in 0..parents {
        create(
            &api,
            &memcached_resource(),
            &format!("m-{i}"),
            json!({"size": 1}),
        )
        .await;
    }
    reconciled(&host, metrics, before, parents).await;
    let pid = host.pid();
    let mut samples = vec![(0, settled_rss_mib(pid).await)];
    for swap in 1..=swaps {
        let replaced = metric_sum(
            metrics,
            "operator_host_plugin_reloads_total",
            &["result=\"replaced\""],
        )
        .await;
        let before = reconciles(metrics).await;
        publish(builds[swap % 2], &file);
        let served = wait_for("the new build served", BOUND, || async {
            let now = metric_sum(
                metrics,
                "operator_host_plugin_reloads_total",
                &["result=\"replaced\""],
            )
            .await;
            Ok((now > replaced).then_some(()))
        })
        .await;
        served.unwrap_or_else(|e| panic!("swap {swap}: {e}; log tail:\n{}", host.log_tail(30)));
        reconciled(&host, metrics, before, parents).await;
        if swap % every == 0 {
            samples.push((swap, settled_rss_mib(pid).await));
        }
    }
    let after = settled_rss_mib(pid).await;
    let after_by_kind = memory_by_kind(pid);
    drop(host);

    let last = dir.path().join("last");
    std::fs::create_dir(&last).unwrap();
    publish(builds[swaps % 2], &last.join("memcached.wasm"));
    let (fresh_host, metrics) = serve(binary, &last, &ns).await;
    // As many reconciles as the swapped host made after its last swap: every parent, once.
    reconciled(&fresh_host, metrics, 0.0, parents).await;
    let fresh = settled_rss_mib(fresh_host.pid()).await;
    let fresh_by_kind = memory_by_kind(fresh_host.pid());
    let mut same_work_memory = None;
    if same_work {
        for round in 1..=swaps {
            let before = reconciles(metrics).await;
            let touch = Patch::Merge(json!({
                "metadata": {"annotations": {"bench.operator-host.dev/round": round.to_string()}}
            }));
            for i in 0..parents {
                api.patch(&format!("m-{i}"), &PatchParams::default(), &touch)
                    .await
                    .unwrap();
            }
            reconciled(&fresh_host, metrics, before, parents).await;
        }
        let pid = fresh_host.pid();
        same_work_memory = Some((settled_rss_mib(pid).await, memory_by_kind(pid)));
    }
    drop(fresh_host);
    ns.cleanup().await.unwrap();
    SwapMemory {
        samples,
        after,
        fresh,
        after_by_kind,
        fresh_by_kind,
        same_work: same_work_memory,
    }
}
