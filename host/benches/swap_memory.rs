//! Benchmark: the memory a hot swap leaves behind, in the wasm runtime alone.
//!
//! For each guest language's Memcached build, one runtime loads a version, makes reconcile
//! calls with it (as many at once as a plugin may run), drops it and loads the other build,
//! 100 times; the process's resident memory is printed every 10 swaps and at the end, against
//! a fresh runtime in a fresh process that loads the last version and makes the same calls
//! (the baseline, measured in the same run). Each language runs twice, in processes of their
//! own: with wasmtime's default of 100 unused warm pool slots (the host's setting before) and
//! with the host's ([`runtime::DEFAULT_UNUSED_WARM_SLOTS`]). The pool's unused warm memories
//! and their resident bytes are printed beside it: what replaced versions leave behind.
//!
//! The host process as a whole (controllers, caches, a plugin directory swapped under it) is
//! measured by `cargo bench -p operator-host-tests --bench swap_memory`.
//!
//! `cargo bench -p operator-host --bench swap_memory` (after `make plugins`); one language:
//! `-- rust` (or `go`, `python`, `js`); `OPERATOR_HOST_BENCH_SWAPS` changes the count.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use operator_host::plugin::Plugin;
use operator_host::runtime::{self, Runtime, RuntimeConfig};

/// Where a child process of this benchmark finds the plugin it loads fresh.
const FRESH_ENV: &str = "OPERATOR_HOST_BENCH_FRESH_PLUGIN";
/// The goal: a swapped runtime's memory within this factor of a fresh one's.
const GOAL: f64 = 1.1;

/// The resident set of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn request() -> runtime::ReconcileRequest {
    let mut parent = common::memcached_example();
    parent["metadata"]["namespace"] = "default".into();
    parent["metadata"]["uid"] = "0b1c7a52-5d3e-4c1f-9a57-3f1e2d4c5b6a".into();
    runtime::ReconcileRequest {
        parent: parent.to_string(),
        observed: Vec::new(),
        related: Vec::new(),
    }
}

/// Loads `path` and makes `rounds` rounds of as many concurrent reconciles as a plugin may run.
fn load_and_call(runtime: &Arc<Runtime>, path: &Path, rounds: usize) -> Plugin {
    let plugin =
        Plugin::load(runtime, path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    let request = request();
    for _ in 0..rounds {
        std::thread::scope(|scope| {
            for _ in 0..plugin.compiled.max_concurrent_calls() {
                scope.spawn(|| {
                    plugin
                        .compiled
                        .reconcile(&request, "bench")
                        .expect("sandboxed call")
                        .expect("reconcile succeeded");
                });
            }
        });
    }
    plugin
}

fn runtime_in(cache: &Path, unused_warm_slots: u32) -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.to_path_buf()),
        unused_warm_slots,
        ..RuntimeConfig::default()
    })
    .expect("a runtime")
}

/// The wasmtime default the host used before (`PoolingAllocationConfig::max_unused_warm_slots`).
const WASMTIME_DEFAULT_WARM_SLOTS: u32 = 100;

const ROUNDS: usize = 5;

/// Where the children find the compile cache that holds both builds.
const CACHE_ENV: &str = "OPERATOR_HOST_BENCH_CACHE";

fn cache_dir() -> PathBuf {
    PathBuf::from(std::env::var_os(CACHE_ENV).expect("the compile cache's directory"))
}

/// A child process: a fresh runtime that loads the plugin (from the compile cache), makes the
/// calls, and prints its RSS.
fn fresh_child(plugin: &Path) {
    let runtime = runtime_in(&cache_dir(), runtime::DEFAULT_UNUSED_WARM_SLOTS);
    let _plugin = load_and_call(&runtime, plugin, ROUNDS);
    runtime::release_free_memory();
    println!("{}", rss_kib());
}

fn fresh_rss(plugin: &Path, cache: &Path) -> u64 {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env(FRESH_ENV, plugin)
        .env(CACHE_ENV, cache)
        .output()
        .expect("the fresh-runtime child runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("the child prints its RSS")
}

/// `component` with a custom section that makes its content another build's.
fn second_build(component: &Path, dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(component).unwrap();
    wasm_encoder::Section::append_to(
        &wasm_encoder::CustomSection {
            name: "operator-host-bench".into(),
            data: b"second build".into(),
        },
        &mut bytes,
    );
    let path = dir.join("second.wasm");
    std::fs::write(&path, bytes).unwrap();
    path
}

fn main() {
    // As the host's command line does: the measurement is of the allocator it runs with.
    operator_host::runtime::tune_allocator();
    if let Some(plugin) = std::env::var_os(FRESH_ENV) {
        fresh_child(Path::new(&plugin));
        return;
    }
    if let Ok(spec) = std::env::var(SWAP_ENV) {
        swap_child(&spec);
        return;
    }
    let swaps: usize = std::env::var("OPERATOR_HOST_BENCH_SWAPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let root = common::repo_root();
    let languages = [
        ("rust", root.join("target/plugins/memcached.wasm")),
        ("go", root.join("target/plugins-go/memcached.wasm")),
        ("python", root.join("target/plugins-python/memcached.wasm")),
        ("js", root.join("target/plugins-js/memcached.wasm")),
    ];
    for (language, first) in languages {
        if !only.is_empty() && !only.iter().any(|o| o == language) {
            continue;
        }
        let first = common::built(first);
        let dir = tempfile::tempdir().unwrap();
        let second = second_build(&first, dir.path());
        let builds = [first.as_path(), second.as_path()];
        // Both builds compiled into a cache every child loads from, as a host that released
        // them has them: the children measure loads and swaps, not compiles.
        let compiler = runtime_in(dir.path(), runtime::DEFAULT_UNUSED_WARM_SLOTS);
        for build in builds {
            compiler.load(build).expect("the build compiles");
        }
        drop(compiler);
        let fresh = fresh_rss(builds[swaps % 2], dir.path());
        for (setting, warm) in [
            (
                "before (wasmtime's 100 warm slots, no trim)",
                WASMTIME_DEFAULT_WARM_SLOTS,
            ),
            (
                "the host's (0 warm slots, trim)",
                runtime::DEFAULT_UNUSED_WARM_SLOTS,
            ),
        ] {
            // Each setting in a process of its own, so neither inherits the other's memory.
            swap_in_child(language, &builds, dir.path(), swaps, warm, setting, fresh);
        }
    }
}

/// Where a child process finds what to swap: `language,warm,swaps,first,second`.
const SWAP_ENV: &str = "OPERATOR_HOST_BENCH_SWAP";

#[allow(clippy::too_many_arguments)]
fn swap_in_child(
    language: &str,
    builds: &[&Path; 2],
    cache: &Path,
    swaps: usize,
    warm: u32,
    setting: &str,
    fresh: u64,
) {
    let spec = format!(
        "{language},{warm},{swaps},{},{}",
        builds[0].display(),
        builds[1].display()
    );
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env(SWAP_ENV, spec)
        .env(CACHE_ENV, cache)
        .output()
        .expect("the swapping child runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let samples = lines.next().unwrap_or_default();
    let after: u64 = lines
        .next()
        .and_then(|l| l.parse().ok())
        .expect("the child prints its RSS");
    let pool = lines.next().unwrap_or_default();
    println!("{language:<7} {setting}: RSS MiB by swap {samples}");
    println!(
        "{language:<7} {setting}: after {swaps} swaps {:.1} MiB, fresh runtime {:.1} MiB: \
         {:.2}x (goal <= {GOAL}x); pool: {pool}",
        after as f64 / 1024.0,
        fresh as f64 / 1024.0,
        after as f64 / fresh as f64,
    );
}

/// A child process: `swaps` swaps between two builds in a runtime with `warm` unused warm
/// slots; prints the samples, the final RSS (KiB) and the pool's unused memories.
fn swap_child(spec: &str) {
    let parts: Vec<&str> = spec.splitn(5, ',').collect();
    let (warm, swaps): (u32, usize) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
    let builds = [Path::new(parts[3]), Path::new(parts[4])];
    let runtime = runtime_in(&cache_dir(), warm);
    let host_setting = warm == runtime::DEFAULT_UNUSED_WARM_SLOTS;
    let mut served = load_and_call(&runtime, builds[0], ROUNDS);
    if host_setting {
        runtime::release_free_memory();
    }
    let mut samples = vec![format!("0: {}", rss_kib() / 1024)];
    for swap in 1..=swaps {
        let loaded = load_and_call(&runtime, builds[swap % 2], ROUNDS);
        drop(std::mem::replace(&mut served, loaded));
        // As the host does once a swap is done.
        if host_setting {
            runtime::release_free_memory();
        }
        if swap % 10 == 0 {
            samples.push(format!("{swap}: {}", rss_kib() / 1024));
        }
    }
    let pool = runtime.pool_usage();
    println!("{}", samples.join(", "));
    println!("{}", rss_kib());
    println!(
        "{} unused warm memories, {:.1} MiB resident in them",
        pool.unused_warm_memories,
        pool.unused_memory_bytes_resident as f64 / (1 << 20) as f64
    );
    drop(served);
}
