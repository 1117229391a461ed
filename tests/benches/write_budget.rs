//! Benchmark: API writes a status-counter plugin causes, with the write protections of the
//! policy relaxed (the loop the host had before them) and with the defaults, in the same run.
//!
//! The hostile plugin's `status-counter` attack derives its status from the previous one and
//! asks to be called again at once (`requeueAfterMs: 0`). Relaxed (`minRequeueSeconds: 0`,
//! `statusChurnLimit` and `writeBudget` at their largest) every call writes the status; with
//! the defaults the parent stops at `StatusNotConverging` after 5 writes and backs off.
//! Counted on the API server (`apiserver_request_total`), not by the host.
//!
//! `cargo bench -p operator-host-tests --bench write_budget [-- SECONDS]` (default 30).

use std::time::{Duration, Instant};

use kube::Api;
use kube::api::DynamicObject;
use operator_host::policy::Policy;
use operator_host_tests::devcluster::{TestNamespace, apiserver_requests};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::hostile::attack_resource;
use operator_host_tests::memcached::create;
use serde_json::json;

const RELAXED: &str = "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\nplugins:\n  hostile:\n    \
    minRequeueSeconds: 0\n    statusChurnLimit: 4294967295\n    writeBudget: {perSecond: 1000000, burst: 1000000}\n";
const DEFAULTS: &str = "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n";

/// Status writes per second on the API server over `window`, with the counter running under
/// `policy`; and the Attack's `Reconciled` reason at the end.
async fn status_writes(
    label: &str,
    policy: &str,
    window: Duration,
) -> anyhow::Result<(f64, String)> {
    let ns = TestNamespace::new(&format!("bench-writes-{label}")).await?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(
        plugin_path("test-plugins", "hostile"),
        plugins.path().join("hostile.wasm"),
    )?;
    let policy = Policy::parse(policy, std::path::Path::new(label))?;
    let host =
        Host::start_dir_with_policy(plugins.path().to_path_buf(), &[ns.name()], policy).await;
    let attacks: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &attack_resource());
    let client = ns.client();
    let before = apiserver_requests(&client, "PATCH", "attacks", "status").await?;
    let started = Instant::now();
    create(
        &attacks,
        &attack_resource(),
        "counter",
        json!({"attack": "status-counter", "target": "requeue-now"}),
    )
    .await;
    tokio::time::sleep(window).await;
    let after = apiserver_requests(&client, "PATCH", "attacks", "status").await?;
    let rate = (after - before) as f64 / started.elapsed().as_secs_f64();
    let attack = attacks.get("counter").await?;
    let reason = attack.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Reconciled"))
        .map(|c| c["reason"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    println!(
        "{label:>9}: {rate:>8.2} status writes/s over {window:?} ({} in all, count {}, Reconciled reason {reason})",
        after - before,
        attack.data["status"]["count"]
    );
    host.stop().await;
    ns.cleanup().await?;
    Ok((rate, reason))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let window = Duration::from_secs(seconds);
    let (relaxed, _) = status_writes("relaxed", RELAXED, window).await?;
    let (defaults, reason) = status_writes("defaults", DEFAULTS, window).await?;
    println!(
        "status-counter attack: defaults / relaxed = {:.4} ({defaults:.2} vs {relaxed:.2} writes/s); \
         with the defaults the parent ends {reason}",
        defaults / relaxed.max(f64::MIN_POSITIVE)
    );
    Ok(())
}
