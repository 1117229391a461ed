//! Benchmark: `operator-host diff` of a new Memcached version over N live parents (time and
//! the diff process's peak memory), beside the time the host needs to reconcile the same N
//! parents once from scratch, measured in the same run.
//!
//! `make bench-cluster` (or `cargo bench -p operator-host-tests --bench diff -- 1000`).

use std::process::Command;
use std::time::{Duration, Instant};

use operator_host_tests::devcluster::{TestNamespace, cluster};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::converge_from_scratch;
use operator_host_tests::process_host::memory_mib;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
/// Parents created at once.
const CREATES_IN_FLIGHT: usize = 32;

/// Runs `command` to its end; its output and its peak resident memory (VmHWM, read every
/// 20 ms while it runs), in MiB.
fn run_measured(command: &mut Command) -> anyhow::Result<(std::process::Output, f64)> {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut peak: f64 = 0.0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(memory_mib(pid).1);
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        }
    });
    let output = child.wait_with_output()?;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok((output, sampler.join().unwrap_or_default()))
}

async fn run(n: usize) -> anyhow::Result<()> {
    let ns = TestNamespace::new(&format!("bench-diff-{n}")).await?;
    let dir = tempfile::tempdir()?;
    let v1 = plugin_path("test-plugins", "memcached-v1");
    let v2 = plugin_path("test-plugins", "memcached-v2");
    std::fs::copy(&v1, dir.path().join("memcached.wasm"))?;
    let host = Host::start_dir(dir.path().to_path_buf(), &[ns.name()]).await;
    let timeout = Duration::from_secs(60 + n as u64);
    let reconcile_once = converge_from_scratch(&ns, n, CREATES_IN_FLIGHT, timeout).await?;
    host.stop().await;

    let diffed = Instant::now();
    let (output, peak) = run_measured(
        Command::new(BINARY)
            .arg("diff")
            .arg(&v2)
            .arg("--against")
            .arg(&v1)
            .args(["-n", ns.name(), "-o", "json", "--kubeconfig"])
            .arg(&cluster().kubeconfig),
    )?;
    let diff_time = diffed.elapsed();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    anyhow::ensure!(
        report["summary"]["parentsChanged"] == n,
        "the diff saw {} of {n} parents change: {}",
        report["summary"]["parentsChanged"],
        String::from_utf8_lossy(&output.stderr)
    );
    println!(
        "N = {n:>5}: reconcile once {:>8.2?}   diff {:>8.2?} (peak RSS {peak:.0} MiB, report {} KiB)   \
         ratio diff/reconcile {:.3}",
        reconcile_once,
        diff_time,
        output.stdout.len() / 1024,
        diff_time.as_secs_f64() / reconcile_once.as_secs_f64()
    );
    ns.cleanup().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes = operator_host_tests::bench_sizes(&[1000]);
    println!(
        "diff: memcached v2 against v1 over N live parents (spec.size = 0), release build, \
         {CREATES_IN_FLIGHT} creates in flight"
    );
    for n in sizes {
        run(n).await?;
    }
    Ok(())
}
