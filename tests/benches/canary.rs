//! Benchmark: a canary's time to roll back. N parents converge on Memcached v1 under
//! `rollout.strategy: Canary` (10 %, a 60-second analysis, the gate's thresholds open); the
//! release with a bug (no children) then lands, and the benchmark measures the time from the
//! first failed reconcile of a canary parent to the rollback, against the mean time of one
//! reconcile in the same run, and counts what the release deleted (nothing: its canary
//! parents' deletions are held).
//!
//! `make bench-cluster` (or `cargo bench -p operator-host-tests --bench canary -- 100 1000`).

use std::time::{Duration, Instant};

use operator_host::policy::Policy;
use operator_host_tests::devcluster::TestNamespace;
use operator_host_tests::host::{Host, plugin_path, publish, runtime};
use operator_host_tests::memcached::{converge_from_scratch, managed_children};

/// Parents created at once.
const CREATES_IN_FLIGHT: usize = 32;

const POLICY: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  rollout: {strategy: Canary, canaryPercent: 10, analysisSeconds: 60, holdWorkloadDeletes: false, maxDeletePercent: 100}
";

async fn run(n: usize) -> anyhow::Result<()> {
    let ns = TestNamespace::new(&format!("bench-canary-{n}")).await?;
    let dir = tempfile::tempdir()?;
    let live = dir.path().join("memcached.wasm");
    publish(&plugin_path("test-plugins", "memcached-v1"), &live);
    let policy = Policy::parse(POLICY, std::path::Path::new("canary-bench-policy.yaml"))?;
    let host = Host::start_dir_with_policy(dir.path().to_path_buf(), &[ns.name()], policy).await;
    let timeout = Duration::from_secs(60 + n as u64);
    let from_scratch = converge_from_scratch(&ns, n, CREATES_IN_FLIGHT, timeout).await?;
    let children = managed_children(&ns, "").await.0;
    let (reconciles, seconds) = (
        host.counter("operator_host_reconcile_duration_seconds_count", |_| true),
        host.sum("operator_host_reconcile_duration_seconds_sum", |_| true),
    );
    let per_reconcile = Duration::from_secs_f64(seconds / reconciles.max(1) as f64);

    let buggy = plugin_path("test-plugins", "memcached-no-children");
    let hash = operator_host::plugin::Plugin::load(&runtime(), &buggy)?
        .decl
        .content_hash;
    let of_buggy = |labels: &str| labels.contains(&format!("sha256=\"{hash}\""));
    let rejected = host.reloads("rejected");
    let landed = Instant::now();
    publish(&buggy, &live);
    let mut first_failure = None;
    let rolled_back = loop {
        if first_failure.is_none()
            && host.counter("operator_host_version_reconciles_total", |labels| {
                of_buggy(labels) && !labels.contains("result=\"success\"")
            }) > 0
        {
            first_failure = Some(Instant::now());
        }
        if host.reloads("rejected") > rejected {
            break Instant::now();
        }
        anyhow::ensure!(landed.elapsed() < timeout, "no rollback within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let first_failure = first_failure.unwrap_or(rolled_back);
    let to_rollback = rolled_back - first_failure;
    let after = managed_children(&ns, "").await.0;
    let lost = children.keys().filter(|c| !after.contains_key(*c)).count();
    println!(
        "N = {n:>5}: converge {from_scratch:>8.2?}   mean reconcile {per_reconcile:>8.2?}   \
         landing to first canary failure {:>8.2?}   first failure to rollback {to_rollback:>8.2?} \
         ({:.1} reconciles)   children deleted {lost}",
        first_failure - landed,
        to_rollback.as_secs_f64() / per_reconcile.as_secs_f64(),
    );
    host.stop().await;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes = operator_host_tests::bench_sizes(&[100, 1000]);
    println!(
        "canary rollback: memcached v1 -> a release with no children, canaryPercent 10, \
         spec.size = 0, release build"
    );
    for n in sizes {
        run(n).await?;
    }
    Ok(())
}
