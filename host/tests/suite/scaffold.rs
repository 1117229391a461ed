//! A plugin as a third party writes it: `operator-host new` against the SDK as `cargo package` ships it (or the Python and JavaScript SDKs as pip and npm install them), tested, built and rendered outside this workspace.

use crate::util;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use operator_host::metrics::Metrics;
use operator_host::registry::{Proposal, Registry};

use util::{operator_host, path_str, repo_root, stderr, stdout};

/// The target directory this workspace builds in: the scaffolded crate builds in it too, so
/// the dependencies it shares with the bundled plugins are not compiled again.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// `cargo` in `dir`, with an environment of its own: the variables cargo sets for this test
/// (`CARGO_PKG_*`, `CARGO_MANIFEST_DIR`, ...) would otherwise be read as the nested build's,
/// and crates whose build scripts track them rebuilt.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.env_clear().current_dir(dir).args(args);
    for (key, value) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        let keep = [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
            "TMPDIR",
        ]
        .contains(&key_text.as_ref())
            || key_text == "CARGO_INCREMENTAL";
        if keep {
            command.env(key, value);
        }
    }
    command
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("cargo runs")
}

fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        stdout(output),
        stderr(output)
    );
}

/// The crates a Rust plugin's author takes from crates.io, each with the directory name it is
/// unpacked under: the SDK, the testing crate, and what the testing crate builds on.
const PACKAGED: [(&str, &str); 4] = [
    ("operator-host-sdk", "sdk"),
    ("operator-host-testing", "testing"),
    ("operator-host-core", "core"),
    ("operator-host-contract", "contract"),
];

/// The [`PACKAGED`] crates as `cargo package` makes them (what crates.io would serve),
/// unpacked side by side in the returned directory. Made once per test run (the tests share
/// the target directory they are packaged in).
fn packaged() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = target_dir().join("scaffold-test");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        package(&dir);
        dir
    })
}

fn package(dir: &Path) {
    let mut args = vec!["package", "--no-verify", "--allow-dirty", "--offline"];
    for (name, _) in PACKAGED {
        args.extend(["-p", name]);
    }
    assert_success("cargo package", &cargo(&repo_root(), &args));
    let version = env!("CARGO_PKG_VERSION");
    for (name, unpacked_as) in PACKAGED {
        let archive = target_dir()
            .join("package")
            .join(format!("{name}-{version}.crate"));
        // `-m`: now as the files' times. cargo packages with one fixed time, and a build of the
        // scaffold in the shared target dir fingerprints path crates by their files' times: with
        // the packaged ones, a new SDK would look unchanged and its old build be linked.
        let unpacked = Command::new("tar")
            .arg("-xzmf")
            .arg(&archive)
            .arg("-C")
            .arg(dir)
            .output()
            .expect("tar runs");
        assert_success(&format!("unpacking {name}"), &unpacked);
        std::fs::rename(dir.join(format!("{name}-{version}")), dir.join(unpacked_as)).unwrap();
    }
}

#[test]
fn the_packaged_crates_hold_the_contract_and_no_path_outside_them() {
    let dir = packaged();
    let wit = std::fs::read_to_string(dir.join("sdk/wit/reconciler.wit")).unwrap();
    assert_eq!(
        wit,
        std::fs::read_to_string(repo_root().join("wit/reconciler.wit")).unwrap(),
        "the packaged WIT is the contract's"
    );
    for (name, unpacked_as) in PACKAGED {
        let manifest = std::fs::read_to_string(dir.join(unpacked_as).join("Cargo.toml")).unwrap();
        assert!(!manifest.contains("workspace = true"), "{name}: {manifest}");
        assert!(!manifest.contains("path = \"../"), "{name}: {manifest}");
        assert!(
            !manifest.contains("wasmtime"),
            "{name} needs no wasm engine: {manifest}"
        );
    }
    let lib = std::fs::read_to_string(dir.join("sdk/src/lib.rs")).unwrap();
    assert!(
        !lib.contains("\"../../"),
        "the SDK reads nothing outside itself"
    );
}

#[test]
fn a_scaffolded_plugin_tests_builds_and_renders_against_the_packaged_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let packaged = packaged();
    let plugin_dir = dir.path().join("web-app");
    let output = operator_host(&[
        "new",
        "web-app",
        "--dir",
        path_str(&plugin_dir),
        "--sdk-path",
        path_str(&packaged.join("sdk")),
    ]);
    assert_success("operator-host new", &output);
    assert!(
        stdout(&output).contains("src/lib.rs"),
        "{}",
        stdout(&output)
    );
    // The testing crate's own dependencies come from crates.io, which does not have them:
    // the unpacked packages stand in for it.
    let mut manifest = std::fs::read_to_string(plugin_dir.join("Cargo.toml")).unwrap();
    manifest.push_str("\n[patch.crates-io]\n");
    for (name, unpacked_as) in PACKAGED.iter().filter(|(_, dir)| *dir != "testing") {
        let path = packaged.join(unpacked_as);
        manifest.push_str(&format!("{name} = {{ path = {:?} }}\n", path_str(&path)));
    }
    std::fs::write(plugin_dir.join("Cargo.toml"), manifest).unwrap();
    // The workspace's versions, so the build reuses what the bundled plugins compiled;
    // cargo drops what the plugin does not use.
    std::fs::copy(
        repo_root().join("Cargo.lock"),
        plugin_dir.join("Cargo.lock"),
    )
    .unwrap();

    assert_success(
        "cargo fmt --check",
        &cargo(&plugin_dir, &["fmt", "--check"]),
    );
    assert_success("cargo test", &cargo(&plugin_dir, &["test", "--offline"]));
    let build = cargo(
        &plugin_dir,
        &[
            "build",
            "--offline",
            "--target",
            "wasm32-wasip2",
            "--profile",
            "plugin",
        ],
    );
    assert_success("cargo build --target wasm32-wasip2", &build);
    let wasm = target_dir().join("wasm32-wasip2/plugin/web_app.wasm");

    renders_and_conforms(&wasm, &plugin_dir.join("examples/web-app.yaml"));
    let inspect = operator_host(&["inspect", path_str(&wasm)]);
    assert_success("operator-host inspect", &inspect);
    assert!(stdout(&inspect).contains("WebApp"), "{}", stdout(&inspect));
    served_as_the_build_names_it(&wasm);
}

/// The file cargo writes for the plugin `web-app`, `web_app.wasm`, is served as it is from a
/// plugin directory; a second file naming the same plugin is refused, the first kept serving.
fn served_as_the_build_names_it(wasm: &Path) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, dir.path().join("web_app.wasm")).unwrap();
    let (sender, _tier_ups) = tokio::sync::mpsc::unbounded_channel();
    let mut registry = Registry::new(
        util::runtime_with(Default::default()),
        dir.path(),
        Arc::new(Metrics::new()),
        sender,
    );
    let proposals = registry.scan().unwrap();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Add { plugin }] if plugin.decl.name == "web-app"),
        "web_app.wasm serves the plugin web-app: {proposals:?}"
    );
    registry.commit(&proposals[0]);

    std::fs::copy(wasm, dir.path().join("web-app.wasm")).unwrap();
    let proposals = registry.scan().unwrap();
    assert!(proposals.is_empty(), "{proposals:?}");
    let report = registry.replica_report();
    let refused = report
        .iter()
        .find(|p| p.source == "file web-app.wasm")
        .filter(|p| p.state == "Rejected")
        .and_then(|p| p.detail.as_ref())
        .unwrap_or_else(|| panic!("web-app.wasm is refused: {report:?}"));
    assert!(refused.contains("one name has one plugin"), "{refused}");
    assert!(registry.served(&dir.path().join("web_app.wasm")).is_some());
}

/// `program` with `args` in `dir`, its output captured.
fn run_in(dir: &Path, program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .current_dir(dir)
        .args(args)
        .env_remove("VIRTUAL_ENV")
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()))
}

/// `new NAME --lang LANG --sdk-path SDK` into `dir/web-app`; returns that directory.
fn scaffold(dir: &Path, lang: &str, sdk: &str) -> PathBuf {
    let plugin_dir = dir.join("web-app");
    let output = operator_host(&[
        "new",
        "web-app",
        "--lang",
        lang,
        "--dir",
        path_str(&plugin_dir),
        "--sdk-path",
        path_str(&repo_root().join(sdk)),
    ]);
    assert_success(&format!("operator-host new --lang {lang}"), &output);
    plugin_dir
}

/// The scaffolded plugin `wasm` renders its sample CR `example` (a Deployment and a Service,
/// not ready yet) under the example policy, and passes `conformance`.
fn renders_and_conforms(wasm: &Path, example: &Path) {
    let rendered = operator_host(&[
        "render",
        path_str(wasm),
        path_str(example),
        "--policy",
        path_str(&repo_root().join("examples/policy.yaml")),
    ]);
    assert_success("operator-host render", &rendered);
    let yaml = stdout(&rendered);
    for expected in [
        "kind: Deployment",
        "kind: Service",
        "name: web-app-sample",
        "reason: DeploymentNotFound",
    ] {
        assert!(yaml.contains(expected), "expected {expected:?} in:\n{yaml}");
    }
    let conformance = operator_host(&["conformance", path_str(wasm), path_str(example)]);
    assert_success("operator-host conformance", &conformance);
}

#[test]
fn a_scaffolded_python_plugin_installs_tests_builds_and_renders() {
    // As its README says: a virtual environment of its own, the SDK (from this checkout) with
    // componentize-py and pytest installed from PyPI, then test, build, render, conformance.
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = scaffold(dir.path(), "python", "plugins/sdk-python");
    let venv = plugin_dir.join(".venv");
    assert_success(
        "python3 -m venv",
        &run_in(
            &plugin_dir,
            Path::new("python3"),
            &["-m", "venv", path_str(&venv)],
        ),
    );
    let python = venv.join("bin/python");
    assert_success(
        "pip install -e .",
        &run_in(
            &plugin_dir,
            &python,
            &["-m", "pip", "install", "-q", "-e", "."],
        ),
    );
    let tests = run_in(&plugin_dir, &python, &["-m", "pytest", "-q"]);
    assert_success("pytest", &tests);
    assert!(stdout(&tests).contains("2 passed"), "{}", stdout(&tests));
    let wasm = plugin_dir.join("web-app.wasm");
    assert_success(
        "python -m operator_host.build",
        &run_in(
            &plugin_dir,
            &python,
            &[
                "-m",
                "operator_host.build",
                "web_app:operator",
                "-o",
                path_str(&wasm),
            ],
        ),
    );
    renders_and_conforms(&wasm, &plugin_dir.join("examples/web-app.yaml"));
}

#[test]
fn a_scaffolded_javascript_plugin_installs_tests_builds_and_renders() {
    // As its README says, with the SDK packed and installed as the registry would serve it
    // (`--install-links`: a copy with its own dependencies, not a link into this checkout).
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = scaffold(dir.path(), "js", "plugins/sdk-js");
    let npm = Path::new("npm");
    assert_success(
        "npm install",
        &run_in(
            &plugin_dir,
            npm,
            &["install", "--install-links", "--no-audit", "--no-fund"],
        ),
    );
    let tests = run_in(&plugin_dir, npm, &["test"]);
    assert_success("npm test", &tests);
    assert!(stdout(&tests).contains("# pass 2"), "{}", stdout(&tests));
    assert_success(
        "npm run build",
        &run_in(&plugin_dir, npm, &["run", "build"]),
    );
    let wasm = plugin_dir.join("web-app.wasm");
    renders_and_conforms(&wasm, &plugin_dir.join("examples/web-app.yaml"));
}

#[test]
fn new_refuses_a_bad_name_and_an_existing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let output = operator_host(&["new", "Web_App", "--dir", path_str(&dir.path().join("x"))]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("DNS-1123 label"),
        "{}",
        stderr(&output)
    );
    let output = operator_host(&["new", "web", "--dir", path_str(dir.path())]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("already exists"),
        "{}",
        stderr(&output)
    );
    let output = operator_host(&["new", "web", "--lang", "cobol"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("rust"), "{}", stderr(&output));
}
