//! Benchmark: after the plugin file is replaced (v1 -> v2 Memcached), how long until every
//! parent's children carry v2's output, compared with converging the same N from scratch
//! in the same run. The swap must not be slower than a fresh convergence: both are bound
//! by the API server, not by the host.
//!
//! `make bench-cluster` (or `cargo bench -p operator-host-tests --bench hot_swap -- 100 1000`).

use std::time::{Duration, Instant};

use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{VARIANT_ANNOTATION, converge_from_scratch, managed_children};

/// Parents created at once.
const CREATES_IN_FLIGHT: usize = 32;

async fn run(n: usize) -> anyhow::Result<()> {
    let ns = TestNamespace::new(&format!("bench-swap-{n}")).await?;
    let dir = tempfile::tempdir()?;
    let live = dir.path().join("memcached.wasm");
    std::fs::copy(plugin_path("test-plugins", "memcached-v1"), &live)?;
    let host = Host::start_dir(dir.path().to_path_buf(), &[ns.name()]).await;
    let timeout = Duration::from_secs(60 + n as u64);
    let from_scratch = converge_from_scratch(&ns, n, CREATES_IN_FLIGHT, timeout).await?;

    let swapped = Instant::now();
    std::fs::copy(plugin_path("test-plugins", "memcached-v2"), &live)?;
    wait_for("every child to carry v2's annotation", timeout, || async {
        Ok((managed_children(&ns, VARIANT_ANNOTATION).await.1 == 2 * n).then_some(()))
    })
    .await?;
    let after_swap = swapped.elapsed();
    let failed = host.reconciles_failed();
    println!(
        "N = {n:>5}: converge from scratch {:>8.2?}   re-converge after the swap {:>8.2?}   \
         ratio swap/scratch {:.2}   failed reconciles {failed}",
        from_scratch,
        after_swap,
        after_swap.as_secs_f64() / from_scratch.as_secs_f64()
    );
    host.stop().await;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes = operator_host_tests::bench_sizes(&[100, 1000]);
    println!(
        "hot swap: memcached v1 -> v2, spec.size = 0, release build, {CREATES_IN_FLIGHT} creates in flight"
    );
    for n in sizes {
        run(n).await?;
    }
    Ok(())
}
