//! Benchmark: time from a plugin file's final write to the new version serving.
//!
//! Runs the real watcher and registry over a temporary directory (no cluster: serving
//! starts when the registry commits the new version, which is the moment the run loop swaps
//! it under the controllers). Content the compile cache has never seen is made by appending
//! a unique custom section to the v2 Memcached component.
//!
//! `cargo bench -p operator-host --bench reload` (after `make test-plugins`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use operator_host::metrics::Metrics;
use operator_host::registry::{Proposal, Registry};
use operator_host::runtime::{Runtime, RuntimeConfig, Tier};
use operator_host::watch;

const RUNS: usize = 10;

fn test_plugin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/test-plugins")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make test-plugins`",
        path.display()
    );
    path
}

/// `component` with a custom section that makes its content (and hash) unique.
fn unique_variant(component: &[u8], tag: &str) -> Vec<u8> {
    let mut bytes = component.to_vec();
    wasm_encoder::Section::append_to(
        &wasm_encoder::CustomSection {
            name: "operator-host-bench".into(),
            data: tag.as_bytes().into(),
        },
        &mut bytes,
    );
    bytes
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(label: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = percentile(&samples, 0.5);
    println!(
        "{label:<58} p50 {:>9.1?}  min {:>9.1?}  max {:>9.1?}  (n = {})",
        p50,
        samples[0],
        samples[samples.len() - 1],
        samples.len()
    );
    p50
}

/// Writes `bytes` over the live file, waits for the watcher and commits the reload; returns
/// the time from the end of the write to the commit, and the tier that serves.
async fn reload(
    registry: &mut Registry,
    changed: &mut tokio::sync::mpsc::UnboundedReceiver<()>,
    live: &Path,
    bytes: &[u8],
) -> (Duration, Tier) {
    tokio::fs::write(live, bytes).await.unwrap();
    let written = Instant::now();
    loop {
        changed.recv().await.unwrap();
        let proposals = registry.scan().unwrap();
        if let Some(proposal) = proposals.first() {
            registry.commit(proposal);
            let tier = match proposal {
                Proposal::Add { plugin } => plugin.compiled.tier(),
                Proposal::Replace { new, .. } => new.compiled.tier(),
                Proposal::Remove { .. } => panic!("unexpected removal"),
            };
            return (written.elapsed(), tier);
        }
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let v1 = std::fs::read(test_plugin("memcached-v1")).unwrap();
    let v2 = std::fs::read(test_plugin("memcached-v2")).unwrap();
    let live = dir.path().join("memcached.wasm");
    let (tier_up_sender, mut tier_ups) = tokio::sync::mpsc::unbounded_channel();
    let mut registry = Registry::new(
        runtime.clone(),
        dir.path(),
        Arc::new(Metrics::new()),
        tier_up_sender,
    );
    let (_watcher, mut changed) = watch::watch_dir(dir.path(), watch::DEFAULT_DEBOUNCE).unwrap();

    println!(
        "reload: Memcached plugin ({} bytes), {RUNS} runs each",
        v2.len()
    );
    // Warm: v1 and v2 compiled into the cache; the first load is an add.
    for bytes in [&v1, &v2] {
        runtime.load_bytes(&live, bytes).unwrap();
    }
    reload(&mut registry, &mut changed, &live, &v1).await;

    let mut hits = Vec::new();
    for i in 0..RUNS {
        let bytes = if i % 2 == 0 { &v2 } else { &v1 };
        let (elapsed, tier) = reload(&mut registry, &mut changed, &live, bytes).await;
        assert_eq!(tier, Tier::Optimized);
        hits.push(elapsed);
    }
    let mut misses = Vec::new();
    let mut optimized_after = Vec::new();
    for i in 0..RUNS {
        let bytes = unique_variant(&v2, &format!("miss-{i}"));
        let (elapsed, tier) = reload(&mut registry, &mut changed, &live, &bytes).await;
        assert_eq!(tier, Tier::Baseline);
        misses.push(elapsed);
        // Wait for the optimizing compile, so it does not slow the next measurement.
        let started = Instant::now();
        let tier_up = tier_ups.recv().await.unwrap();
        assert!(registry.finish_tier_up(tier_up).is_some());
        optimized_after.push(elapsed + started.elapsed());
    }
    let mut cranelift_only = Vec::new();
    for i in 0..3 {
        let bytes = unique_variant(&v2, &format!("cranelift-{i}"));
        let started = Instant::now();
        runtime.load_bytes(&live, &bytes).unwrap();
        cranelift_only.push(started.elapsed());
    }
    let hit = summary("write -> new version serving, compile cache hit", hits);
    let miss = summary(
        "write -> new version serving, cache miss (Winch build)",
        misses,
    );
    summary(
        "write -> optimized (Cranelift) build serving, cache miss",
        optimized_after,
    );
    let cranelift = summary(
        "compile with Cranelift only (what a miss would cost without Winch)",
        cranelift_only,
    );
    println!(
        "ratios: cache miss / target 250 ms = {:.2}; miss with Winch / Cranelift-only compile = {:.3}; hit = {:.1?}",
        miss.as_secs_f64() / 0.25,
        miss.as_secs_f64() / cranelift.as_secs_f64(),
        hit
    );
}
