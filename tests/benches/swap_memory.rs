//! Benchmark: the host's resident memory across 100 hot swaps, for each guest language.
//!
//! A host process serves 20 Memcached parents from a plugin directory; its plugin file is
//! replaced 100 times, alternately with two builds of the same language (Rust: the v1 and v2
//! builds of `make test-plugins`; Go, Python, JavaScript: the build of `make plugins` and the
//! same with a custom section added), each swap reconciling every parent. Resident memory is
//! printed before, every 10th swap and at the end, against a fresh host serving the last build
//! to the same parents (the baseline, measured in the same run), and against that host again
//! once it has reconciled every parent as many times as the swapped host did, without a swap
//! (what serving for as long costs; the difference is what the swaps left). Goal: within 1.1x.
//! Each host's memory is also printed by what holds it (instance pool, heap, plugin code, other
//! files, from /proc/<pid>/smaps).
//!
//! `cargo bench -p operator-host-tests --bench swap_memory` (`make bench-cluster`); one
//! language: `-- rust` (or `go`, `python`, `js`).

use std::path::{Path, PathBuf};

use operator_host_tests::devcluster::repo_root;
use operator_host_tests::host::plugin_path;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const SWAPS: usize = 100;
const PARENTS: usize = 20;
const GOAL: f64 = 1.1;

/// `component` with a custom section added: another build of the same logic.
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    let languages: [(&str, PathBuf, Option<PathBuf>); 4] = [
        (
            "rust",
            plugin_path("test-plugins", "memcached-v1"),
            Some(plugin_path("test-plugins", "memcached-v2")),
        ),
        ("go", root.join("target/plugins-go/memcached.wasm"), None),
        (
            "python",
            root.join("target/plugins-python/memcached.wasm"),
            None,
        ),
        ("js", root.join("target/plugins-js/memcached.wasm"), None),
    ];
    for (language, first, second) in languages {
        if !only.is_empty() && !only.iter().any(|o| o == language) {
            continue;
        }
        assert!(
            first.exists(),
            "{} is missing: run `make plugins`",
            first.display()
        );
        let language_dir = dir.path().join(language);
        std::fs::create_dir(&language_dir).unwrap();
        let second = second.unwrap_or_else(|| second_build(&first, &language_dir));
        let run = operator_host_tests::swap_memory::measure(
            Path::new(BINARY),
            &format!("swap-memory-{language}"),
            [&first, &second],
            PARENTS,
            SWAPS,
            10,
            true,
        )
        .await;
        let samples: Vec<String> = run
            .samples
            .iter()
            .map(|(swap, mib)| format!("{swap}: {mib:.1}"))
            .collect();
        println!("{language:<7} RSS MiB by swap  {}", samples.join(", "));
        println!(
            "{language:<7} after {SWAPS} swaps {:.1} MiB, fresh host {:.1} MiB: {:.2}x (goal <= {GOAL}x)",
            run.after,
            run.fresh,
            run.ratio()
        );
        println!("{language:<7} swapped host MiB: {}", run.after_by_kind);
        println!("{language:<7} fresh host MiB:   {}", run.fresh_by_kind);
        if let (Some((mib, by_kind)), Some(ratio)) = (&run.same_work, run.same_work_ratio()) {
            println!(
                "{language:<7} the fresh host after {SWAPS} rounds of reconciles {mib:.1} MiB \
                 ({by_kind}): swapped {ratio:.2}x (goal <= {GOAL}x)"
            );
        }
    }
}
