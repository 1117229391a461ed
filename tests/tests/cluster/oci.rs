//! Plugins as OCI artifacts against a real registry on loopback: `push` and `pull` in the
//! CNCF Wasm layout, read and written by the reference client (oras) the other way round,
//! credentials (basic auth from the command line and from a docker config), the refusals of
//! what is not a plugin artifact, and signatures that the cosign CLI verifies and makes.

use std::process::Command;

use operator_host_tests::host::plugin_path;
use operator_host_tests::oci_registry::{TestRegistry, cosign, output_of};
use serde_json::Value;

const HOST: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

fn host(args: &[&str]) -> Command {
    let mut command = Command::new(HOST);
    command.args(args);
    command
}

/// `host push` of the bundled Memcached plugin to `reference`; its `REFERENCE@DIGEST` line.
fn push_memcached(reference: &str) -> String {
    let mut push = host(&["push", "--plain-http"]);
    push.arg(plugin_path("plugins", "memcached")).arg(reference);
    output_of(&mut push).trim().to_string()
}

#[tokio::test]
async fn a_plugin_pushed_by_the_host_is_read_by_oras_as_a_wasm_artifact() {
    let registry = TestRegistry::start().await;
    let reference = registry.reference("plugins/memcached:0.1.0");
    let pushed = push_memcached(&reference);
    let digest = pushed
        .strip_prefix(&format!("{}@", registry.reference("plugins/memcached")))
        .unwrap_or_else(|| panic!("push printed {pushed:?}"));
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    // The layout other tools expect.
    let manifest: Value = serde_json::from_str(&output_of(
        &mut registry.oras(&["manifest", "fetch", &reference]),
    ))
    .unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.version"],
        "0.1.0"
    );
    let resolved = output_of(&mut registry.oras(&["resolve", &reference]));
    assert_eq!(
        resolved.trim(),
        digest,
        "the digest push printed is the registry's"
    );
    let config: Value = serde_json::from_str(&output_of(&mut registry.oras(&[
        "manifest",
        "fetch-config",
        &reference,
    ])))
    .unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    let exports = config["component"]["exports"].to_string();
    assert!(
        exports.contains("operator-host:reconciler/plugin"),
        "{exports}"
    );
    // oras writes the layer under its title: the plugin's file name.
    let out = tempfile::tempdir().unwrap();
    let output = format!("--output={}", out.path().display());
    output_of(&mut registry.oras(&["pull", &reference, &output]));
    let pulled = std::fs::read(out.path().join("memcached.wasm")).unwrap();
    assert_eq!(
        pulled,
        std::fs::read(plugin_path("plugins", "memcached")).unwrap()
    );
}

#[tokio::test]
async fn a_plugin_pushed_by_oras_is_pulled_by_the_host_by_tag_and_by_digest() {
    let registry = TestRegistry::start().await;
    let reference = registry.reference("plugins/memcached:from-oras");
    let work = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_path("plugins", "memcached"),
        work.path().join("memcached.wasm"),
    )
    .unwrap();
    std::fs::write(
        work.path().join("config.json"),
        r#"{"created":"1970-01-01T00:00:00Z","architecture":"wasm","os":"wasip2","layerDigests":[]}"#,
    )
    .unwrap();
    output_of(
        registry
            .oras(&[
                "push",
                &reference,
                "--config",
                "config.json:application/vnd.wasm.config.v0+json",
                "memcached.wasm:application/wasm",
            ])
            .current_dir(work.path()),
    );
    let digest = output_of(&mut registry.oras(&["resolve", &reference]));
    let digest = digest.trim();
    for by in [
        reference.clone(),
        registry.reference(&format!("plugins/memcached@{digest}")),
    ] {
        let out = work.path().join("pulled.wasm");
        let printed = output_of(host(&["pull", "--plain-http", &by, "-o"]).arg(&out));
        assert_eq!(
            printed.trim(),
            format!("{}@{digest}", registry.reference("plugins/memcached"))
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(plugin_path("plugins", "memcached")).unwrap(),
            "pulled by {by}"
        );
    }
}

/// The stderr of a host command that must fail, and its exit status.
fn failure_of(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(!output.status.success(), "{command:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn what_is_not_a_plugin_artifact_is_refused_with_what_was_expected() {
    let registry = TestRegistry::start().await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "not a plugin").unwrap();
    let other = registry.reference("other/notes:1");
    output_of(
        registry
            .oras(&["push", &other, "notes.txt"])
            .current_dir(work.path()),
    );
    let out = work.path().join("out.wasm");
    let error = failure_of(host(&["pull", "--plain-http", &other, "-o"]).arg(&out));
    assert!(
        error.contains("is not a Wasm plugin artifact")
            && error.contains("application/vnd.wasm.config.v0+json"),
        "{error}"
    );
    assert!(!out.exists(), "nothing is written for a refused pull");
    let missing = registry.reference("plugins/missing:1");
    let error = failure_of(host(&["pull", "--plain-http", &missing, "-o"]).arg(&out));
    assert!(
        error.contains(&format!("cannot pull the manifest of {missing}")),
        "{error}"
    );
    let error = failure_of(host(&["pull", "Not A Reference", "-o"]).arg(&out));
    assert!(error.contains("is not an OCI reference"), "{error}");
    // A file that is not a plugin is refused before anything reaches the registry.
    let error = failure_of(
        host(&["push", "--plain-http"])
            .arg(work.path().join("notes.txt"))
            .arg(registry.reference("plugins/notes:1")),
    );
    assert!(error.contains("notes.txt"), "{error}");
    let tags = registry
        .oras(&["repo", "tags", &registry.reference("plugins/notes")])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&tags.stdout).trim().is_empty());
}

#[tokio::test]
async fn a_registry_behind_basic_auth_takes_the_command_lines_or_the_docker_configs_credentials() {
    let registry = TestRegistry::with_basic_auth("publisher", "s3cret-pass").await;
    let reference = registry.reference("plugins/memcached:0.1.0");
    let plugin = plugin_path("plugins", "memcached");
    let empty_config = tempfile::tempdir().unwrap();
    let error = failure_of(
        host(&["push", "--plain-http"])
            .arg(&plugin)
            .arg(&reference)
            .env("DOCKER_CONFIG", empty_config.path()),
    );
    assert!(error.contains(&format!("of {reference}")), "{error}");
    // Credentials on the command line, the password on stdin.
    let mut push = host(&[
        "push",
        "--plain-http",
        "--username",
        "publisher",
        "--password-stdin",
    ]);
    push.arg(&plugin)
        .arg(&reference)
        .stdin(std::process::Stdio::piped());
    let mut child = push.stdout(std::process::Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"s3cret-pass\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "push with --password-stdin failed");
    // Credentials from a docker config, as a Secret of type kubernetes.io/dockerconfigjson
    // would hold them.
    let out = empty_config.path().join("pulled.wasm");
    output_of(
        host(&["pull", "--plain-http", &reference, "-o"])
            .arg(&out)
            .env("DOCKER_CONFIG", registry.docker_config()),
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&plugin).unwrap()
    );
}

/// cosign's flags for a registry on loopback without a transparency log.
const COSIGN_LOCAL: [&str; 2] = ["--allow-insecure-registry", "--allow-http-registry"];

#[tokio::test]
async fn signatures_interoperate_with_the_cosign_cli_both_ways() {
    let registry = TestRegistry::start().await;
    let keys = tempfile::tempdir().unwrap();
    // The host signs; cosign verifies.
    let ours = registry.reference("plugins/memcached:1");
    let digest = push_memcached(&ours);
    output_of(host(&["generate-key"]).arg(keys.path().join("publisher")));
    output_of(
        host(&["sign", "--plain-http", "--key"])
            .arg(keys.path().join("publisher.key"))
            .arg(&ours),
    );
    let mut verify = cosign(
        keys.path(),
        &[
            "verify",
            "--key",
            "publisher.pub",
            "--insecure-ignore-tlog=true",
        ],
    );
    let verified = output_of(verify.args(COSIGN_LOCAL).arg(&ours));
    assert!(
        verified.contains(digest.rsplit('@').next().unwrap()),
        "{verified}"
    );
    // cosign signs (its legacy format, no transparency log); the host verifies.
    let theirs = registry.reference("plugins/mysql:1");
    output_of(
        host(&["push", "--plain-http"])
            .arg(plugin_path("plugins", "mysql"))
            .arg(&theirs),
    );
    output_of(&mut cosign(keys.path(), &["generate-key-pair"]));
    let mut sign = cosign(
        keys.path(),
        &[
            "sign",
            "--yes",
            "--key",
            "cosign.key",
            "--tlog-upload=false",
            "--new-bundle-format=false",
            "--use-signing-config=false",
        ],
    );
    output_of(sign.args(COSIGN_LOCAL).arg(&theirs));
    let verified = output_of(
        host(&["verify", "--plain-http", "--key"])
            .arg(keys.path().join("cosign.pub"))
            .arg(&theirs),
    );
    assert!(verified.contains("is signed by key"), "{verified}");
    // Not by the host's key.
    let error = failure_of(
        host(&["verify", "--plain-http", "--key"])
            .arg(keys.path().join("publisher.pub"))
            .arg(&theirs),
    );
    assert!(error.contains("verifies with the given key"), "{error}");
}

/// `rbac` takes what an OperatorPlugin names: a reference is pulled, and the role is the one
/// the same plugin's file gets.
#[tokio::test]
async fn rbac_of_a_reference_is_the_rbac_of_the_plugin_it_names() {
    let registry = TestRegistry::start().await;
    let reference = registry.reference("plugins/memcached:rbac");
    push_memcached(&reference);
    let of_file = output_of(
        host(&["rbac", "--plugins-from-cluster"]).arg(plugin_path("plugins", "memcached")),
    );
    let of_reference = output_of(&mut host(&[
        "rbac",
        "--plugins-from-cluster",
        "--plain-http",
        &reference,
    ]));
    assert_eq!(of_reference, of_file);
    assert!(
        of_file.contains("memcacheds") && of_file.contains("operatorplugins"),
        "{of_file}"
    );
    // A file name that is not there is a missing file, not a registry to ask.
    let missing = failure_of(&mut host(&["rbac", "no-such-plugin.wasm"]));
    assert!(missing.contains("no-such-plugin.wasm"), "{missing}");
}
