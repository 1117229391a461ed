//! Benchmark: how long a leader-elected deployment is without a writer when its leader is
//! killed, and what a standby costs.
//!
//! Two host processes with `--leader-elect` (15 s lease, 10 s renew deadline, 2 s retry) serve
//! 20 Memcached CRs. Each round SIGKILLs the leader, resizes one CR at once, and measures the
//! time from the kill to the new leader's first write (seen by its own fault proxy); the killed
//! host is replaced by a fresh standby. The baseline of the ratio is the lease duration, the
//! floor of client-go's algorithm: a candidate may not take a lease before it has seen it
//! unrenewed for that long. A standby's memory (VmRSS) is read once both hosts have loaded
//! their plugins, beside the leader's.
//!
//! `cargo bench -p operator-host-tests --bench takeover [-- ROUNDS]` (default 20).

use std::time::{Duration, Instant};

use operator_host_tests::devcluster::wait_for;
use operator_host_tests::election::{Candidate, Election, LEASE};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

/// The process's resident memory in MiB (from /proc).
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let election = Election::new(BINARY, "bench-takeover").await;
    let plugins = election.v1.path().to_path_buf();
    let mut leader = election.candidate("host-0", &plugins).await;
    leader
        .wait_role("ready: leader", Duration::from_secs(30))
        .await;
    let mut standby = election.candidate("host-1", &plugins).await;
    standby
        .wait_role("ready: standby", Duration::from_secs(30))
        .await;
    let names = election.create_many(0, 20, 1).await;
    election
        .converge(&election.plugin, &names, "before the first kill")
        .await;
    // Both have loaded and compiled the plugins and synced their caches.
    let (leader_rss, standby_rss) = (rss_mib(leader.host.pid()), rss_mib(standby.host.pid()));
    println!(
        "memory: leader {leader_rss:.1} MiB, standby {standby_rss:.1} MiB (VmRSS; the Memcached plugin, 20 CRs)"
    );
    let mut takeovers = Vec::new();
    for round in 0..rounds {
        let killed = Instant::now();
        let Candidate { host, .. } = leader;
        host.kill().await;
        election
            .resize(&names[round % names.len()..][..1], 2 + round as u32 % 2)
            .await;
        let first_write = wait_for("the new leader's first write", LEASE * 2, || async {
            Ok(standby.write_times().first().map(|(at, _)| *at))
        })
        .await
        .unwrap();
        let took = first_write.duration_since(killed);
        println!("round {round}: kill -> first write of the new leader {took:.2?}");
        takeovers.push(took);
        leader = standby;
        standby = election
            .candidate(&format!("host-{}", round + 2), &plugins)
            .await;
        standby
            .wait_role("ready: standby", Duration::from_secs(30))
            .await;
    }
    takeovers.sort();
    let p50 = percentile(&takeovers, 0.5);
    let p99 = percentile(&takeovers, 0.99);
    println!(
        "takeover over {rounds} kills: p50 {p50:.2?}, p99 {p99:.2?}, min {:.2?}, max {:.2?}; \
         ratio to the lease duration ({LEASE:?}, the baseline): p50 {:.2}, p99 {:.2}",
        takeovers[0],
        takeovers[takeovers.len() - 1],
        p50.as_secs_f64() / LEASE.as_secs_f64(),
        p99.as_secs_f64() / LEASE.as_secs_f64()
    );
    election
        .converge(&election.plugin, &names, "after the last kill")
        .await;
    leader.host.kill().await;
    standby.host.kill().await;
    election.ns.cleanup().await.unwrap();
}
