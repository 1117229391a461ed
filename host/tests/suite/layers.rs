//! The dependency direction of the host's modules (ARCHITECTURE.md): the core's modules in the
//! order its crate doc lists them, each using only those listed before it, and the host's
//! modules without a cycle. Read from the sources, so a change that brings a cycle back fails
//! here with the edge that closes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of the crate at `src` and the top-level modules of the same crate
/// it names (`crate::name`), outside comments.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_str().unwrap().trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let uses = graph.entry(module.clone()).or_default();
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    uses.insert(name);
                }
            }
        }
    }
    graph
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// A cycle of `graph`, if it has one, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == module) {
            let mut cycle = path[start..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if graph.contains_key(next)
                && let Some(cycle) = visit(next, graph, path, done)
            {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|module| visit(module, graph, &mut Vec::new(), &mut done))
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn the_cores_modules_use_only_those_listed_before_them() {
    let src = crate_src("core");
    let graph = module_graph(&src);
    // The order of the crate doc's list (`//! - [`name`]: ...`), bottom first.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let order: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! - [`"))
        .map(|l| l.split('`').next().unwrap().to_string())
        .collect();
    let listed: BTreeSet<&String> = order.iter().collect();
    // The unit tests' fixtures are no layer: only tests use them.
    let modules: BTreeSet<&String> = graph.keys().filter(|m| *m != "test_support").collect();
    assert_eq!(
        modules, listed,
        "core/src/lib.rs must list every module of the crate, in layer order"
    );
    for (position, module) in order.iter().enumerate() {
        let below = &order[..position];
        for used in &graph[module] {
            if graph.contains_key(used) && used != "test_support" {
                assert!(
                    below.contains(used),
                    "core module `{module}` uses `{used}`, which core/src/lib.rs lists above it: \
                     a layer may use only the layers below it (move what both need lower)"
                );
            }
        }
    }
}

#[test]
fn the_hosts_modules_have_no_cycle() {
    let graph = module_graph(&crate_src("host"));
    assert!(graph.contains_key("controller") && graph.contains_key("cli"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the host's modules form a cycle: {} (move what they share into a module below both)",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, uses)| (m.into(), uses.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
    let acyclic: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec![])]
        .into_iter()
        .map(|(m, uses)| (m.into(), uses.into_iter().map(String::from).collect()))
        .collect();
    assert!(find_cycle(&acyclic).is_none());
}
