//! The dependency direction of the host's modules (ARCHITECTURE.md): the core's modules in the
//! order its crate doc lists them, each using only those listed before it, and the host's
//! modules without a cycle. Read from the sources, so a change that brings a cycle back fails
//! here with the edge that closes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of the crate at `src` and the top-level modules of the same crate
/// it names (`crate::name`, `use crate::{a, b::C}` over as many lines as it takes), outside
/// comments.
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
        for name in crate_paths(&text) {
            if name != module {
                uses.insert(name);
            }
        }
    }
    graph
}

/// The first segment of every `crate::` path in `text` outside `//` comment lines: `a` of
/// `crate::a::B`, and `a` and `b` of a group `crate::{a::{B, C}, b}`, which may span lines.
fn crate_paths(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            names.push(leading_ident(rest));
            continue;
        };
        // The group's items at its own depth: the first segment of each is a module.
        let mut depth = 0;
        let mut item_start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    names.push(leading_ident(&group[item_start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.push(leading_ident(&group[item_start..i]));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The identifier `text` starts with, after blanks.
fn leading_ident(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
        .collect()
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

#[test]
fn grouped_and_multi_line_uses_are_read() {
    let text = "use crate::{leader, shard::Ownership};\n\
                // use crate::commented;\n\
                use crate::{\n    plan::{self, Plan},\n    policy,\n};\n\
                let x = crate::watch::debounce(crate::Error);\n";
    assert_eq!(
        crate_paths(text),
        ["leader", "shard", "plan", "policy", "watch"]
    );
}

/// The module files of the crate at `src` as the README names them: `name.rs` for a file,
/// `name/` for a directory with a `mod.rs`; neither the crate's root nor its tests. Each with
/// its path under `src`.
fn module_file_names(src: &Path) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for file in rust_files(src) {
        let name = file.file_name().unwrap().to_str().unwrap();
        let at_root = file.parent() == Some(src);
        if (at_root && (name == "lib.rs" || name == "main.rs"))
            || name == "tests.rs"
            || name.ends_with("_tests.rs")
        {
            continue;
        }
        let path = file.strip_prefix(src).unwrap().display().to_string();
        if name == "mod.rs" {
            let dir = path.strip_suffix("mod.rs").unwrap();
            let dir_name = dir.trim_end_matches('/').rsplit('/').next().unwrap();
            names.insert(dir.to_string(), format!("{dir_name}/"));
        } else {
            names.insert(path, name.to_string());
        }
    }
    names
}

/// Whether `name` occurs in `text` as a name of its own (not the tail of a longer one, as
/// `run.rs` is of `prune.rs`).
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[test]
fn the_readme_layout_names_every_module() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(readme_path).unwrap();
    let start = readme
        .find("\n## Layout\n")
        .expect("README.md has a Layout section");
    let layout = &readme[start + 1..];
    let layout = &layout[..layout.find("\n## ").unwrap_or(layout.len())];
    let mut missing = Vec::new();
    for krate in ["contract", "runtime", "core", "host"] {
        for (path, name) in module_file_names(&crate_src(krate)) {
            if !mentions(layout, &name) {
                missing.push(format!("{krate}/src/{path} (as `{name}`)"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README.md's Layout section does not name these modules (add a line for each):\n{}",
        missing.join("\n")
    );
}
