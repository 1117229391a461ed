//! The Memcached plugin in each guest language (Rust, Python, JavaScript, Go) side by side: size, compile, cache load, a call in a fresh instance, and the ratio to the Rust logic run natively.
//!
//! Every figure is taken in the same run. The request is the one `operator-host render` makes
//! for `examples/memcached.yaml` (no observed children), and every language must answer it as
//! the native Rust logic does (checked before timing):
//!
//! - `size`: the component's bytes;
//! - `compile`: `Runtime::load` without a cache (Cranelift), and a Winch compile
//!   (`Runtime::load_quick`, the tier a hot reload serves from until Cranelift is done);
//! - `cache load`: `Runtime::load` from a populated compile cache (what a restart pays);
//! - `fresh call`: `CompiledPlugin::reconcile`, a new instance per call, median of interleaved
//!   rounds, and its ratio to `native`: the Rust logic compiled natively through the same JSON
//!   glue;
//! - `fresh info`: `CompiledPlugin::info` in a new instance, whose answer every plugin computes
//!   at build time (in its snapshot), so this is about what a fresh instance costs before the
//!   plugin's own work.
//!
//! Run with `make bench-languages` (after `make plugins`); a language whose plugin is missing is
//! an error, not a skip.

mod common;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use operator_host::runtime::{self, CompiledPlugin, Runtime, RuntimeConfig, Tier};
use operator_host_sdk::bindings::operator_host::reconciler::types as guest_types;
use serde_json::Value;

/// Each language and the directory `make plugins` builds its Memcached plugin in.
const LANGUAGES: [(&str, &str); 4] = [
    ("Rust", "plugins"),
    ("Python", "plugins-python"),
    ("JavaScript", "plugins-js"),
    ("Go", "plugins-go"),
];

fn plugin_path(dir: &str) -> PathBuf {
    common::built(
        common::repo_root()
            .join("target")
            .join(dir)
            .join("memcached.wasm"),
    )
}

/// The parent `render` reconciles for `examples/memcached.yaml`.
fn parent() -> Value {
    let mut parent = common::memcached_example();
    parent["metadata"]["generation"] = 1.into();
    parent
}

fn runtime(cache_dir: Option<&Path>) -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        cache_dir: cache_dir.map(Path::to_path_buf),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let started = Instant::now();
    let value = f();
    (started.elapsed(), value)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Language {
    name: &'static str,
    size: usize,
    cold_compile: Duration,
    winch_compile: Duration,
    cache_load: Duration,
    plugin: CompiledPlugin,
    fresh_calls: Vec<Duration>,
    fresh_infos: Vec<Duration>,
}

fn main() {
    // `cargo test --benches` runs each benchmark once with `--test`: a load is enough there.
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    let parent = parent();
    let request = runtime::ReconcileRequest {
        parent: parent.to_string(),
        observed: Vec::new(),
        related: Vec::new(),
    };
    let native_request = guest_types::ReconcileRequest {
        parent: parent.to_string(),
        observed: Vec::new(),
        related: Vec::new(),
    };
    let native = || {
        operator_host_sdk::__private::reconcile::<memcached::MemcachedOperator>(
            native_request.clone(),
        )
        .expect("native reconcile")
    };
    let expected = native();
    let compiles = if quick { 1 } else { 3 };

    let mut languages = Vec::new();
    for (name, dir) in LANGUAGES {
        let path = plugin_path(dir);
        let bytes = std::fs::read(&path).expect("reading the plugin");
        let cache = tempfile::tempdir().expect("temp dir");
        let cold_compile = median(
            (0..compiles)
                .map(|_| time(|| runtime(None).load(&path).expect("compile")).0)
                .collect(),
        );
        let winch_compile = median(
            (0..compiles)
                .map(|_| {
                    let (took, plugin) = time(|| {
                        runtime(None)
                            .load_quick(&path, &bytes, None)
                            .expect("Winch")
                    });
                    assert_eq!(plugin.tier(), Tier::Baseline);
                    took
                })
                .collect(),
        );
        runtime(Some(cache.path()))
            .load(&path)
            .expect("fills the cache");
        let cached = runtime(Some(cache.path()));
        let cache_load = median(
            (0..5)
                .map(|_| time(|| cached.load(&path).expect("cache load")).0)
                .collect(),
        );
        let plugin = cached.load(&path).expect("load");
        let answer = plugin
            .reconcile(&request, "bench")
            .expect("the call")
            .expect("reconcile succeeds");
        // Equal as JSON values: each language writes its own key order and spacing.
        let json = |text: &String| serde_json::from_str::<Value>(text).expect("JSON");
        assert_eq!(
            answer
                .children
                .iter()
                .map(|c| json(&c.object))
                .collect::<Vec<_>>(),
            expected
                .children
                .iter()
                .map(|c| json(&c.object))
                .collect::<Vec<_>>(),
            "{name}: children differ from native"
        );
        assert_eq!(
            json(&answer.status),
            json(&expected.status),
            "{name}: status differs from native"
        );
        languages.push(Language {
            name,
            size: bytes.len(),
            cold_compile,
            winch_compile,
            cache_load,
            plugin,
            fresh_calls: Vec::new(),
            fresh_infos: Vec::new(),
        });
    }

    // Interleaved rounds, so background load hits every language and the native side alike.
    let (rounds, calls) = if quick { (1, 1) } else { (9, 40) };
    let mut native_calls = Vec::new();
    for _ in 0..rounds {
        let (took, _) = time(|| (0..calls * 20).for_each(|_| drop(black_box(native()))));
        native_calls.push(took / (calls * 20));
        for language in &mut languages {
            let (took, _) = time(|| {
                for _ in 0..calls {
                    black_box(language.plugin.reconcile(&request, "bench").expect("call"))
                        .expect("reconcile succeeds");
                }
            });
            language.fresh_calls.push(took / calls);
            let (took, _) = time(|| {
                for _ in 0..calls {
                    black_box(language.plugin.info().expect("info"));
                }
            });
            language.fresh_infos.push(took / calls);
        }
    }
    let native_call = median(native_calls);

    println!(
        "languages: median of {rounds} interleaved rounds ({calls} fresh calls each; native x20), {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "native Rust logic: {:.1} us per call",
        native_call.as_secs_f64() * 1e6
    );
    println!(
        "| language | component | cold compile (Cranelift) | Winch compile | cache load | fresh-instance info | fresh-instance reconcile | ratio to native Rust |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for language in languages {
        let call = median(language.fresh_calls);
        let info = median(language.fresh_infos);
        println!(
            "| {} | {:.2} MB | {:.0} ms | {:.0} ms | {:.1} ms | {:.0} us | {:.0} us | {:.1}x |",
            language.name,
            language.size as f64 / 1e6,
            ms(language.cold_compile),
            ms(language.winch_compile),
            ms(language.cache_load),
            info.as_secs_f64() * 1e6,
            call.as_secs_f64() * 1e6,
            call.as_secs_f64() / native_call.as_secs_f64(),
        );
    }
}
