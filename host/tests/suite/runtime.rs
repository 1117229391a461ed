//! The sandbox enforces its limits and refuses what is not a plugin of this contract.

use crate::util;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use operator_host::runtime::{
    CacheOutcome, CallError, CallPriority, CompiledPlugin, Error, Limits, ReconcileRequest,
    ReconcileResponse, Runtime, RuntimeConfig, TABLE_ELEMENT_BYTES, Tier, WALL_CLOCK_ALLOWANCE,
    spawn_call, take_last_call_usage, thread_cpu_time,
};
use serde_json::{Value, json};
use util::{attack, runtime_with, test_plugin};

fn call(limits: Limits, attack_name: &str, count: u64) -> Result<ReconcileResponse, CallError> {
    let plugin = runtime_with(limits).load(&test_plugin("hostile")).unwrap();
    Ok(plugin
        .reconcile(&attack(attack_name, count), "test")?
        .expect("the plugin accepts the request"))
}

/// The CPU time `f` used on this thread (a call runs on its caller's thread), and its result.
fn cpu_time_of<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let started = thread_cpu_time();
    let result = f();
    (thread_cpu_time() - started, result)
}

#[test]
fn a_guest_that_loops_forever_is_cut_off_at_the_deadline() {
    let limits = Limits {
        call_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let plugin = runtime_with(limits).load(&test_plugin("hostile")).unwrap();
    let (cpu_used, result) = cpu_time_of(|| plugin.reconcile(&attack("loop", 0), "test"));
    assert_eq!(
        result.unwrap_err(),
        CallError::Timeout {
            limit: Duration::from_millis(200)
        }
    );
    // The deadline plus about one epoch tick, and the instantiation.
    assert!(
        cpu_used >= Duration::from_millis(200) && cpu_used < Duration::from_millis(300),
        "used {cpu_used:?} of CPU"
    );
}

#[test]
fn wall_clock_time_passing_without_cpu_does_not_end_a_call() {
    let limits = Limits {
        call_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let runtime = runtime_with(limits);
    let plugin = runtime.load(&test_plugin("hostile")).unwrap();
    let calling = Arc::new(AtomicBool::new(true));
    // Epochs race ahead (a second of ticks per millisecond), as they do for a call the host
    // has no core for; the call must still get its 300 ms of CPU.
    let ticker = std::thread::spawn({
        let (runtime, calling) = (runtime.clone(), calling.clone());
        move || {
            while calling.load(Ordering::Relaxed) {
                runtime.advance_epochs(200);
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let (cpu_used, result) = cpu_time_of(|| plugin.reconcile(&attack("loop", 0), "test"));
    calling.store(false, Ordering::Relaxed);
    ticker.join().unwrap();
    assert_eq!(
        result.unwrap_err(),
        CallError::Timeout {
            limit: Duration::from_millis(300)
        }
    );
    assert!(
        cpu_used >= Duration::from_millis(300),
        "stopped after {cpu_used:?} of CPU"
    );
}

#[tokio::test]
async fn a_call_the_host_starves_of_cpu_stops_as_stalled_not_as_the_plugins_timeout() {
    let limit = Duration::from_millis(20);
    let limits = Limits {
        call_timeout: limit,
        ..Limits::default()
    };
    let plugin = Arc::new(runtime_with(limits).load(&test_plugin("hostile")).unwrap());
    // Two spinning threads per core at the host's priority leave a demoted (SCHED_IDLE)
    // call almost no CPU until they stop.
    let spinning = Arc::new(AtomicBool::new(true));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..cores * 2)
        .map(|_| {
            let spinning = spinning.clone();
            std::thread::spawn(move || {
                while spinning.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let started = Instant::now();
    let result = spawn_call(CallPriority::Demoted, {
        let plugin = plugin.clone();
        move || plugin.reconcile(&attack("loop", 0), "test")
    })
    .await
    .unwrap();
    let elapsed = started.elapsed();
    spinning.store(false, Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().unwrap();
    }
    let error = result.unwrap_err();
    assert!(
        matches!(error, CallError::Stalled { limit: stalled_limit, cpu_used, wall }
            if stalled_limit == limit && cpu_used < limit && wall == limit * WALL_CLOCK_ALLOWANCE),
        "{error:?}"
    );
    assert!(
        !error.is_resource_limit(),
        "a stall is not the plugin's fault"
    );
    assert_eq!(plugin.call_priority(), CallPriority::Normal);
    assert!(
        elapsed >= limit * WALL_CLOCK_ALLOWANCE,
        "stopped after {elapsed:?}"
    );
}

#[test]
fn hitting_a_resource_limit_demotes_the_plugin_and_a_trap_does_not() {
    let limits = Limits {
        call_timeout: Duration::from_millis(50),
        max_memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let runtime = runtime_with(limits);
    for (attack_name, demoted) in [
        ("none", false),
        ("panic", false),
        ("loop", true),
        ("memory", true),
        ("big-response", true),
    ] {
        let plugin = runtime.load(&test_plugin("hostile")).unwrap();
        assert_eq!(plugin.call_priority(), CallPriority::Normal);
        let _ = plugin.reconcile(&attack(attack_name, 8 << 20), "test");
        let expected = if demoted {
            CallPriority::Demoted
        } else {
            CallPriority::Normal
        };
        assert_eq!(plugin.call_priority(), expected, "after {attack_name}");
    }
}

#[test]
fn a_guest_that_grows_memory_past_the_cap_fails_cleanly() {
    let limits = Limits {
        max_memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let error = call(limits, "memory", 0).unwrap_err();
    assert_eq!(error, CallError::OutOfMemory { limit: 32 << 20 });
}

#[test]
fn an_oversized_response_is_rejected() {
    let limits = Limits {
        max_response_bytes: 1 << 20,
        ..Limits::default()
    };
    let error = call(limits, "big-response", 2 << 20).unwrap_err();
    assert!(
        matches!(error, CallError::ResponseTooLarge { size, limit } if size > 2 << 20 && limit == 1 << 20),
        "{error:?}"
    );
}

#[test]
fn a_response_far_over_the_limit_is_refused_before_the_host_copies_it() {
    let limits = Limits {
        max_response_bytes: 1 << 20,
        ..Limits::default()
    };
    let error = call(limits, "big-response", 32 << 20).unwrap_err();
    // Refused once the copy passed the limit plus slack: the host never held 32 MiB.
    assert!(
        matches!(error, CallError::ResponseTooLarge { size, limit } if size < 4 << 20 && limit == 1 << 20),
        "{error:?}"
    );
}

#[test]
fn a_panic_is_a_trap_that_carries_the_panic_message() {
    let error = call(Limits::default(), "panic", 0).unwrap_err();
    let CallError::Trap { message } = error else {
        panic!("expected a trap, got {error:?}");
    };
    assert!(message.contains("panics on purpose"), "{message}");
}

#[test]
fn deep_recursion_is_a_stack_overflow_trap() {
    let error = call(Limits::default(), "stack-overflow", 0).unwrap_err();
    assert!(
        matches!(&error, CallError::Trap { message } if message.contains("call stack exhausted")),
        "{error:?}"
    );
}

#[test]
fn flooding_stdout_is_capped_without_failing_the_call() {
    // A generous deadline: this is about the output cap, not speed (debug builds, busy CI).
    let limits = Limits {
        call_timeout: Duration::from_secs(20),
        ..Limits::default()
    };
    let response = call(limits, "stdout-flood", 20_000).unwrap();
    assert_eq!(response.children.len(), 1);
}

#[test]
fn the_guest_sees_no_files_environment_network_or_clock() {
    let response = call(Limits::default(), "capabilities", 0).unwrap();
    let seen: Value = serde_json::from_str(&response.status).unwrap();
    assert_eq!(
        seen,
        json!({
            "readRoot": false, "readEtcPasswd": false, "envVars": 0, "args": 0,
            "tcpConnect": false, "tcpBind": false, "dnsLookup": false, "wallClockSecs": 0,
        })
    );
}

#[test]
fn no_state_survives_between_calls() {
    let plugin = runtime_with(Limits::default())
        .load(&test_plugin("hostile"))
        .unwrap();
    for _ in 0..3 {
        let response = plugin
            .reconcile(&attack("counter", 0), "test")
            .unwrap()
            .unwrap();
        assert_eq!(response.status, r#"{"calls":1}"#);
    }
}

#[test]
fn a_restart_loads_the_compiled_artifact_instead_of_recompiling() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = || {
        Runtime::new(RuntimeConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            ..RuntimeConfig::default()
        })
        .unwrap()
    };
    let path = test_plugin("wrong-contract");
    // The wrong-contract plugin compiles fine; that is all the cache is about.
    let first = runtime().load(&util::example_plugin("memcached")).unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Miss);
    let second = runtime().load(&util::example_plugin("memcached")).unwrap();
    assert_eq!(second.cache_outcome(), CacheOutcome::Hit);
    assert_eq!(first.content_hash(), second.content_hash());
    assert!(runtime().load(&path).is_err());
}

fn load_error(path: &Path) -> Error {
    runtime_with(Limits::default()).load(path).unwrap_err()
}

#[test]
fn a_missing_file_is_named_in_the_error() {
    let error = load_error(Path::new("/nonexistent/plugin.wasm"));
    assert!(matches!(error, Error::ReadPlugin { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/plugin.wasm"));
}

#[test]
fn a_file_that_is_not_wasm_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.wasm");
    std::fs::write(&path, "#!/bin/sh\necho not wasm\n").unwrap();
    let error = load_error(&path);
    assert!(matches!(error, Error::NotWasm { .. }), "{error:?}");
}

#[test]
fn a_core_module_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    std::fs::write(
        &path,
        wat::parse_str("(module (func (export \"f\")))").unwrap(),
    )
    .unwrap();
    let error = load_error(&path);
    assert!(matches!(error, Error::CoreModule { .. }), "{error:?}");
    assert!(error.to_string().contains("wasm32-wasip2"), "{error}");
}

#[test]
fn a_component_of_another_contract_version_is_refused() {
    let error = load_error(&test_plugin("wrong-contract"));
    let Error::WrongContract { detail, .. } = &error else {
        panic!("expected WrongContract, got {error:?}");
    };
    assert!(detail.contains("plugin@9.0.0"), "{detail}");
    for served in [
        "operator-host:reconciler@0.3.0",
        "operator-host:reconciler@0.2.0",
        "operator-host:reconciler@0.1.0",
    ] {
        assert!(error.to_string().contains(served), "{error}");
    }
}

#[test]
fn a_component_of_another_contract_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.wasm");
    let component = wat::parse_str(
        r#"(component
             (core module $m (func (export "run")))
             (core instance $i (instantiate $m))
             (func (export "run") (canon lift (core func $i "run"))))"#,
    )
    .unwrap();
    std::fs::write(&path, component).unwrap();
    let error = load_error(&path);
    let Error::WrongContract { detail, .. } = &error else {
        panic!("expected WrongContract, got {error:?}");
    };
    assert!(detail.contains("it exports none of"), "{detail}");
    assert!(detail.contains("its exports: run"), "{detail}");
}

#[test]
fn a_component_that_exports_nothing_is_told_how_a_plugin_exports_the_contract() {
    // What a Rust plugin crate without `export_reconciler!` builds to.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.wasm");
    std::fs::write(&path, wat::parse_str("(component)").unwrap()).unwrap();
    let error = load_error(&path);
    let Error::WrongContract { detail, .. } = &error else {
        panic!("expected WrongContract, got {error:?}");
    };
    assert!(detail.contains("it exports nothing"), "{detail}");
    assert!(detail.contains("export_reconciler!"), "{detail}");
}

// --- Memory: one budget for all the memories and tables of a call -------------------------

/// `host/tests/fixtures/many-memories.wat` with its growth and probe knobs set, as bytes.
fn many_memories(main_pages: u32, extra_pages: u32, probe_index_range: bool) -> Vec<u8> {
    many_memories_and_table(main_pages, extra_pages, 0, probe_index_range)
}

fn many_memories_and_table(
    main_pages: u32,
    extra_pages: u32,
    table_elements: u32,
    probe_index_range: bool,
) -> Vec<u8> {
    let text = many_memories_text();
    let text = set_knob(text, "main_pages", main_pages);
    let text = set_knob(text, "extra_pages", extra_pages);
    let text = set_knob(text, "table_elements", table_elements);
    let text = set_knob(text, "probe_index_range", u32::from(probe_index_range));
    wat::parse_str(text).unwrap()
}

fn many_memories_text() -> String {
    let path = util::repo_root().join("host/tests/fixtures/many-memories.wat");
    std::fs::read_to_string(path).unwrap()
}

/// `text` with the fixture's global `$name` set to `value`.
fn set_knob(text: String, name: &str, value: u32) -> String {
    let line = |v: &str| format!("(global ${name} i32 (i32.const {v}))");
    let default = match name {
        "main_pages" | "extra_pages" => "640",
        _ => "0",
    };
    assert!(text.contains(&line(default)), "the fixture sets ${name}");
    text.replace(&line(default), &line(&value.to_string()))
}

#[test]
fn a_guest_that_loops_while_instantiating_is_cut_off_at_the_deadline() {
    let limits = Limits {
        call_timeout: Duration::from_millis(100),
        ..Limits::default()
    };
    let bytes = wat::parse_str(set_knob(many_memories_text(), "loop_at_start", 1)).unwrap();
    for (runtime, quick) in both_tiers(&limits) {
        assert_eq!(
            reconcile_bytes(&runtime, quick, &bytes).unwrap_err(),
            CallError::Timeout {
                limit: limits.call_timeout
            },
            "quick: {quick}"
        );
    }
}

const PAGE: usize = 64 << 10;

/// Both memories start at one page: growing the main one by this many pages, and the extra
/// one not at all, makes their sum exactly `limit`.
fn pages_to_fill(limit: usize) -> u32 {
    (limit / PAGE - 2) as u32
}

fn reconcile_bytes(runtime: &Arc<Runtime>, quick: bool, bytes: &[u8]) -> Result<(), CallError> {
    let path = Path::new("many-memories.wasm");
    let plugin = if quick {
        runtime.load_quick(path, bytes, None).unwrap()
    } else {
        runtime.load_bytes(path, bytes).unwrap()
    };
    plugin.reconcile(&attack("none", 0), "test")?.unwrap();
    Ok(())
}

/// Each tier: the Cranelift one (pooled instances) and, with no compile cache, Winch's
/// (instances on demand).
fn both_tiers(limits: &Limits) -> [(Arc<Runtime>, bool); 2] {
    let uncached = Runtime::new(RuntimeConfig {
        limits: limits.clone(),
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .unwrap();
    [(runtime_with(limits.clone()), false), (uncached, true)]
}

#[test]
fn memories_each_under_the_limit_but_over_it_together_are_out_of_memory() {
    let limits = Limits {
        max_memory_bytes: 64 << 20,
        ..Limits::default()
    };
    for (runtime, quick) in both_tiers(&limits) {
        // The fixture as it is: 40 MiB and a page in each memory.
        let error = reconcile_bytes(&runtime, quick, &many_memories(640, 640, false)).unwrap_err();
        assert_eq!(
            error,
            CallError::OutOfMemory { limit: 64 << 20 },
            "quick: {quick}"
        );
        // The same growth in one memory fits.
        reconcile_bytes(&runtime, quick, &many_memories(640, 0, false)).unwrap();
    }
}

#[test]
fn memories_that_fill_the_limit_exactly_fit_and_one_page_more_does_not() {
    let limit = 16 << 20;
    let limits = Limits {
        max_memory_bytes: limit,
        ..Limits::default()
    };
    let fill = pages_to_fill(limit);
    for (runtime, quick) in both_tiers(&limits) {
        // One memory just under the limit, the other at its one page: exactly the limit.
        reconcile_bytes(&runtime, quick, &many_memories(fill, 0, false)).unwrap();
        reconcile_bytes(&runtime, quick, &many_memories(fill - 10, 10, false)).unwrap();
        for bytes in [
            many_memories(fill + 1, 0, false),
            many_memories(fill, 1, false),
        ] {
            let error = reconcile_bytes(&runtime, quick, &bytes).unwrap_err();
            assert_eq!(error, CallError::OutOfMemory { limit }, "quick: {quick}");
        }
    }
}

#[test]
fn a_refused_growth_past_4_gib_neither_takes_nor_frees_budget() {
    let limit = 16 << 20;
    let limits = Limits {
        max_memory_bytes: limit,
        ..Limits::default()
    };
    let fill = pages_to_fill(limit);
    for (runtime, quick) in both_tiers(&limits) {
        // The probe's last page makes exactly the limit: the refused growth took nothing.
        reconcile_bytes(&runtime, quick, &many_memories(fill - 1, 0, true)).unwrap();
        // And it freed nothing: that page is one too many here.
        let error = reconcile_bytes(&runtime, quick, &many_memories(fill, 0, true)).unwrap_err();
        assert_eq!(error, CallError::OutOfMemory { limit }, "quick: {quick}");
    }
}

#[test]
fn table_elements_count_against_the_memory_budget() {
    let limit = 16 << 20;
    let limits = Limits {
        max_memory_bytes: limit,
        max_table_elements: 20_000,
        ..Limits::default()
    };
    // Two pages short of the limit in memory, then two pages' worth of table elements.
    let fill = pages_to_fill(limit) - 2;
    let elements = (2 * PAGE / TABLE_ELEMENT_BYTES) as u32;
    for (runtime, quick) in both_tiers(&limits) {
        let run = |elements| {
            reconcile_bytes(
                &runtime,
                quick,
                &many_memories_and_table(fill, 0, elements, false),
            )
        };
        run(elements).unwrap();
        assert_eq!(
            run(elements + 1).unwrap_err(),
            CallError::OutOfMemory { limit },
            "quick: {quick}"
        );
    }
    // The element cap holds too, however much memory is left.
    let limits = Limits {
        max_table_elements: 1000,
        ..Limits::default()
    };
    for (runtime, quick) in both_tiers(&limits) {
        let bytes = many_memories_and_table(0, 0, 1000, false);
        reconcile_bytes(&runtime, quick, &bytes).unwrap();
        let bytes = many_memories_and_table(0, 0, 1001, false);
        let error = reconcile_bytes(&runtime, quick, &bytes).unwrap_err();
        assert!(
            matches!(error, CallError::Trap { .. }),
            "quick: {quick}: {error:?}"
        );
    }
}

#[test]
fn a_component_with_more_memories_than_allowed_is_refused_by_either_tier() {
    let text =
        std::fs::read_to_string(util::repo_root().join("host/tests/fixtures/many-memories.wat"))
            .unwrap();
    let table = "(table $table 0 funcref)";
    assert!(text.contains(table));
    let three = wat::parse_str(text.replace(table, &format!("(memory $third 1) {table}"))).unwrap();
    let path = Path::new("three-memories.wasm");
    let [(optimized, _), (baseline, _)] = both_tiers(&Limits::default());
    let error = optimized.load_bytes(path, &three).unwrap_err();
    assert!(
        matches!(&error, Error::Compile { source, .. }
            if format!("{source:#}").contains("3 Wasm linear memories")),
        "{error:?}"
    );
    // Without a pool to check it at load, the first call (`info`, at load) is refused.
    let plugin = baseline.load_quick(path, &three, None).unwrap();
    let error = plugin.info().unwrap_err();
    assert!(
        matches!(&error, CallError::Instantiate { message } if message.contains("memory count")),
        "{error:?}"
    );
}

#[test]
fn the_baseline_tier_hits_the_same_memory_limit() {
    let limits = Limits {
        max_memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let runtime = Runtime::new(RuntimeConfig {
        limits,
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let path = test_plugin("hostile");
    let plugin = runtime
        .load_quick(&path, &std::fs::read(&path).unwrap(), None)
        .unwrap();
    assert_eq!(plugin.tier(), Tier::Baseline);
    let error = plugin.reconcile(&attack("memory", 0), "test").unwrap_err();
    assert_eq!(error, CallError::OutOfMemory { limit: 32 << 20 });
}

#[test]
fn the_many_memories_fixture_is_a_plugin_the_host_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many-memories.wasm");
    std::fs::write(&path, many_memories(640, 640, false)).unwrap();
    let runtime = runtime_with(Limits::default());
    let plugin = operator_host::plugin::Plugin::load(&runtime, &path).unwrap();
    assert_eq!(plugin.decl.name, "many-memories");
    assert_eq!(plugin.decl.parent.kind, "ManyMemories");
    let error = plugin
        .compiled
        .reconcile(&attack("none", 0), "test")
        .unwrap_err();
    assert_eq!(error, CallError::OutOfMemory { limit: 64 << 20 });
    let done = plugin
        .compiled
        .finalize(&attack("none", 0), "test")
        .unwrap()
        .unwrap();
    assert!(done.done);
}

// --- Instance slots: a share per plugin ------------------------------------------------------

fn runtime_with_slots(max_instances: u32, max_concurrent_calls: usize) -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        limits: Limits {
            call_timeout: Duration::from_secs(20),
            ..Limits::default()
        },
        cache_dir: Some(util::shared_cache_dir()),
        max_instances,
        max_concurrent_calls,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// Runs `calls` calls of `plugin` at once, each on a thread of its own.
fn concurrently(
    plugin: &CompiledPlugin,
    calls: usize,
    attack_name: &'static str,
    count: u64,
) -> Vec<std::thread::JoinHandle<Result<(), CallError>>> {
    let start = Arc::new(Barrier::new(calls));
    (0..calls)
        .map(|_| {
            let (plugin, start) = (plugin.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                plugin
                    .reconcile(&attack(attack_name, count), "test")
                    .map(|_| ())
            })
        })
        .collect()
}

#[test]
fn calls_beyond_a_plugins_share_wait_for_a_slot_instead_of_failing() {
    // The share is the whole pool: without waiting, calls past 3 would find no instance.
    let runtime = runtime_with_slots(3, 3);
    let plugin = runtime.load(&test_plugin("hostile")).unwrap();
    assert_eq!(plugin.max_concurrent_calls(), 3);
    for call in concurrently(&plugin, 3 + 9, "many-children", 20_000) {
        call.join().unwrap().unwrap();
    }
}

#[test]
fn a_plugin_that_saturates_its_share_does_not_block_another() {
    let limits = Limits {
        call_timeout: Duration::from_millis(1500),
        ..Limits::default()
    };
    let runtime = Runtime::new(RuntimeConfig {
        limits,
        cache_dir: Some(util::shared_cache_dir()),
        max_instances: 3,
        max_concurrent_calls: 1,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let busy = runtime.load(&test_plugin("hostile")).unwrap();
    busy.set_max_concurrent_calls(2).unwrap();
    let other = runtime.load(&test_plugin("hostile")).unwrap();
    // Two calls hold the busy plugin's slots until their deadline; a third waits for one.
    let looping = concurrently(&busy, 3, "loop", 0);
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    other
        .reconcile(&attack("none", 0), "test")
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "the other plugin waited {:?}",
        started.elapsed()
    );
    for call in looping {
        let error = call.join().unwrap().unwrap_err();
        assert!(matches!(error, CallError::Timeout { .. }), "{error:?}");
    }
}

#[test]
fn a_plugin_whose_share_does_not_fit_is_refused_at_load() {
    let runtime = runtime_with_slots(4, 3);
    let path = test_plugin("hostile");
    let first = runtime.load(&path).unwrap();
    let error = runtime.load(&path).unwrap_err();
    assert!(
        matches!(
            error,
            Error::ReserveInstanceSlots {
                asked: 3,
                left: 1,
                total: 4,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("hostile.wasm"), "{message}");
    assert!(
        message.contains("asks for 3") && message.contains("only 1"),
        "{message}"
    );
    // Growing a share is refused the same way, and leaves it as it was.
    let error = first.set_max_concurrent_calls(5).unwrap_err();
    assert!(
        matches!(
            error,
            Error::ReserveInstanceSlots {
                asked: 5,
                left: 4,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(matches!(
        first.set_max_concurrent_calls(0).unwrap_err(),
        Error::NoConcurrentCalls { .. }
    ));
    assert_eq!(first.max_concurrent_calls(), 3);
    // Shrunk, it leaves room for the second; dropped (every clone), it returns its share.
    first.set_max_concurrent_calls(1).unwrap();
    let second = runtime.load(&path).unwrap();
    assert_eq!(runtime.free_instance_slots(), 0);
    let clone = first.clone();
    drop(first);
    assert_eq!(
        runtime.free_instance_slots(),
        0,
        "a clone still holds the share"
    );
    drop(clone);
    assert_eq!(runtime.free_instance_slots(), 1);
    drop(second);
    assert_eq!(runtime.free_instance_slots(), 4);
}

#[test]
fn both_tiers_of_a_plugin_share_one_reservation() {
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: None,
        max_instances: 4,
        max_concurrent_calls: 2,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let path = test_plugin("hostile");
    let baseline = runtime
        .load_quick(&path, &std::fs::read(&path).unwrap(), None)
        .unwrap();
    assert_eq!(baseline.tier(), Tier::Baseline);
    let optimized = runtime.optimize(&baseline, &path).unwrap();
    assert_eq!(optimized.tier(), Tier::Optimized);
    assert_eq!(runtime.free_instance_slots(), 2);
    optimized.set_max_concurrent_calls(3).unwrap();
    assert_eq!(baseline.max_concurrent_calls(), 3);
    drop(baseline);
    assert_eq!(runtime.free_instance_slots(), 1);
    optimized.info().unwrap();
    drop(optimized);
    assert_eq!(runtime.free_instance_slots(), 4);
}

// --- Randomness: a function of the request -------------------------------------------------

fn draws(plugin: &CompiledPlugin, request: &ReconcileRequest) -> String {
    plugin.reconcile(request, "test").unwrap().unwrap().status
}

#[test]
fn the_same_request_gets_the_same_random_numbers_and_another_request_others() {
    let plugin = runtime_with(Limits::default())
        .load(&test_plugin("hostile"))
        .unwrap();
    let request = attack("random", 0);
    let first = draws(&plugin, &request);
    assert_eq!(draws(&plugin, &request), first, "byte-identical output");
    // Another runtime (and so another process) draws the same numbers too.
    let again = runtime_with(Limits::default())
        .load(&test_plugin("hostile"))
        .unwrap();
    assert_eq!(draws(&again, &request), first);

    let other = draws(&plugin, &attack("random", 1));
    let (first, other): (Value, Value) = (
        serde_json::from_str(&first).unwrap(),
        serde_json::from_str(&other).unwrap(),
    );
    assert_ne!(first["entropy"], other["entropy"]);
    assert_ne!(first["hashMapSeed"], other["hashMapSeed"]);
    assert_ne!(first["entropy"], "00000000000000000000000000000000");
}

#[test]
fn observed_children_are_part_of_the_random_seed() {
    let plugin = runtime_with(Limits::default())
        .load(&test_plugin("hostile"))
        .unwrap();
    let mut request = attack("random", 0);
    let without = draws(&plugin, &request);
    request.observed = vec![r#"{"kind":"ConfigMap"}"#.into()];
    assert_ne!(draws(&plugin, &request), without);
}

#[test]
fn each_call_leaves_the_cpu_time_and_peak_memory_it_used_to_its_thread() {
    let limits = Limits {
        call_timeout: Duration::from_millis(100),
        max_memory_bytes: 64 << 20,
        ..Limits::default()
    };
    let plugin = runtime_with(limits.clone())
        .load(&test_plugin("hostile"))
        .unwrap();
    take_last_call_usage();

    plugin
        .reconcile(&attack("none", 0), "test")
        .unwrap()
        .unwrap();
    let usage = take_last_call_usage().expect("the call's usage");
    assert!(usage.cpu > Duration::ZERO, "{usage:?}");
    assert!(
        usage.memory_bytes > 0 && usage.memory_bytes < 16 << 20,
        "a plain call's memory: {usage:?}"
    );
    assert_eq!(take_last_call_usage(), None, "a usage is taken once");

    // Calls stopped at a limit report what they used up to it.
    plugin.reconcile(&attack("loop", 0), "test").unwrap_err();
    let usage = take_last_call_usage().expect("the loop's usage");
    assert!(usage.cpu >= limits.call_timeout, "{usage:?}");
    plugin.reconcile(&attack("memory", 0), "test").unwrap_err();
    let usage = take_last_call_usage().expect("the hoard's usage");
    assert!(
        usage.memory_bytes > limits.max_memory_bytes - (4 << 20)
            && usage.memory_bytes <= limits.max_memory_bytes,
        "the hoard's peak is its limit, to within the refused growth: {usage:?}"
    );
}
