//! `make image` (deploy/image/build.sh): both images are valid OCI archives (index.json →
//! manifest → config and layer, media types, sizes and digests), the host's runs a static binary
//! as non-root with no shell beside it, the plugins' holds the bundled plugins as plain files,
//! and a second build of the same commit gives the same bytes.
//!
//! The script's musl release build is cached by cargo: the first run of this test on a machine
//! builds the host once more (minutes), later runs only check that it is up to date.

use std::collections::BTreeSet;
use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

use operator_host_tests::devcluster::repo_root;
use operator_host_tests::host::plugin_path;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const PLUGINS: [&str; 2] = ["memcached", "mysql"];
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Two runs of the script into two directories, and the references each printed.
struct Builds {
    first: (tempfile::TempDir, String),
    second: (tempfile::TempDir, String),
}

/// The builds all tests here check, made once.
fn builds() -> &'static Builds {
    static BUILDS: OnceLock<Builds> = OnceLock::new();
    BUILDS.get_or_init(|| {
        for plugin in PLUGINS {
            plugin_path("plugins", plugin);
        }
        Builds {
            first: build(),
            second: build(),
        }
    })
}

fn build() -> (tempfile::TempDir, String) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(repo_root().join("deploy/image/build.sh"))
        .env("IMAGE_OUT", out.path())
        .env_remove("IMAGE_SOURCE")
        .output()
        .expect("deploy/image/build.sh starts");
    assert_success("deploy/image/build.sh", &output);
    (out, String::from_utf8(output.stdout).unwrap())
}

fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The timestamp the script stamps on everything: SOURCE_DATE_EPOCH, or the commit time.
fn epoch() -> u64 {
    if let Ok(epoch) = std::env::var("SOURCE_DATE_EPOCH") {
        return epoch.parse().unwrap();
    }
    let output = Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_success("git log", &output);
    String::from_utf8(output.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// One entry of a tar archive.
#[derive(Debug)]
struct TarEntry {
    name: String,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: u64,
    dir: bool,
    data: Vec<u8>,
}

fn field(header: &[u8], range: Range<usize>) -> &str {
    std::str::from_utf8(&header[range])
        .unwrap()
        .trim_end_matches('\0')
}

fn octal(header: &[u8], range: Range<usize>) -> u64 {
    u64::from_str_radix(field(header, range).trim(), 8).unwrap()
}

/// The entries of a tar archive of USTAR headers, files and directories only (what the image
/// tool writes: no PAX records, links or devices).
fn tar_entries(bytes: &[u8]) -> Vec<TarEntry> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at + 512 <= bytes.len() {
        let header = &bytes[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        assert_eq!(&header[257..263], b"ustar\0", "a USTAR header at {at}");
        assert_eq!(&header[263..265], b"00", "a USTAR header at {at}");
        let name = match field(header, 345..500) {
            "" => field(header, 0..100).to_string(),
            prefix => format!("{prefix}/{}", field(header, 0..100)),
        };
        let kind = header[156];
        assert!(
            kind == b'0' || kind == b'5',
            "{name}: type {:?}, not a file or directory",
            kind as char
        );
        let size = usize::try_from(octal(header, 124..136)).unwrap();
        entries.push(TarEntry {
            mode: u32::try_from(octal(header, 100..108)).unwrap(),
            uid: u32::try_from(octal(header, 108..116)).unwrap(),
            gid: u32::try_from(octal(header, 116..124)).unwrap(),
            mtime: octal(header, 136..148),
            dir: kind == b'5',
            data: bytes[at + 512..at + 512 + size].to_vec(),
            name,
        });
        at += 512 + size.div_ceil(512) * 512;
    }
    entries
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap();
                files.insert(rel.to_str().unwrap().to_string());
            }
        }
    }
    files
}

/// An image read from its OCI archive, each step checked against the one that names it.
struct Image {
    digest: String,
    config: Value,
    layer: Vec<TarEntry>,
}

/// Reads `<out>/<name>.oci.tar`: checks that it holds what the layout `<out>/<name>` holds,
/// then follows index.json to the manifest, the config and the one layer, checking each
/// blob's media type, size and digest, and the layer's diff ID.
fn read_image(out: &Path, name: &str) -> Image {
    let archive = tar_entries(&std::fs::read(out.join(format!("{name}.oci.tar"))).unwrap());
    let layout = out.join(name);
    let archived: BTreeSet<String> = archive
        .iter()
        .filter(|e| !e.dir)
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(archived, files_under(&layout), "{name}: archive vs layout");
    for entry in &archive {
        assert!(
            entry.dir || std::fs::read(layout.join(&entry.name)).unwrap() == entry.data,
            "{name}: {} differs between the archive and the layout",
            entry.name
        );
    }
    let file = |path: &str| -> &[u8] {
        &archive
            .iter()
            .find(|e| e.name == path && !e.dir)
            .unwrap_or_else(|| panic!("{name}: no {path} in the archive"))
            .data
    };
    // A blob named by a descriptor, checked against it.
    let blob = |desc: &Value, media_type: &str| -> &[u8] {
        assert_eq!(desc["mediaType"], media_type, "{name}: {desc}");
        let digest = desc["digest"].as_str().unwrap();
        let data = file(&format!("blobs/{}", digest.replacen(':', "/", 1)));
        assert_eq!(sha256(data), digest, "{name}: blob digest");
        assert_eq!(desc["size"], data.len(), "{name}: blob size of {digest}");
        data
    };
    let json = |data: &[u8]| -> Value { serde_json::from_slice(data).unwrap() };

    assert_eq!(
        json(file("oci-layout")),
        json!({"imageLayoutVersion": "1.0.0"})
    );
    let index = json(file("index.json"));
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(index["mediaType"], INDEX);
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1, "{name}: one image in index.json");
    let entry = &manifests[0];
    let reference = format!("localhost/{name}:{VERSION}");
    assert_eq!(
        entry["annotations"]["io.containerd.image.name"], reference,
        "{name}: the name `ctr images import` gives it"
    );
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        VERSION
    );
    assert_eq!(
        entry["platform"],
        json!({"os": "linux", "architecture": "amd64"})
    );

    let manifest = json(blob(entry, MANIFEST));
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["mediaType"], MANIFEST);
    let config = json(blob(&manifest["config"], CONFIG));
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{name}: one layer");
    blob(&layers[0], LAYER);
    let layer_path = layout.join(format!(
        "blobs/{}",
        layers[0]["digest"].as_str().unwrap().replacen(':', "/", 1)
    ));
    let gunzip = Command::new("gzip")
        .arg("-dc")
        .arg(&layer_path)
        .output()
        .expect("gzip runs");
    assert_success("gzip -dc", &gunzip);
    let layer = gunzip.stdout;

    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(
        config["rootfs"]["diff_ids"],
        json!([sha256(&layer)]),
        "{name}: the config's diff ID is the uncompressed layer's digest"
    );
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        VERSION
    );
    let revision = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.revision"],
        String::from_utf8(revision.stdout).unwrap().trim()
    );

    let layer = tar_entries(&layer);
    let names: Vec<&str> = layer.iter().map(|e| e.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "{name}: layer entries in name order");
    let epoch = epoch();
    for e in &layer {
        assert_eq!(
            e.mtime, epoch,
            "{name}: {} stamped with the commit time",
            e.name
        );
    }
    Image {
        digest: entry["digest"].as_str().unwrap().to_string(),
        config,
        layer,
    }
}

fn entry<'a>(image: &'a Image, name: &str) -> &'a TarEntry {
    image
        .layer
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no {name} in the layer"))
}

/// Panics unless `elf` is a statically linked x86-64 executable: no program interpreter
/// (PT_INTERP) and, in its dynamic section if it has one (a static PIE relocates itself), no
/// library it needs (DT_NEEDED).
fn assert_static_elf(elf: &[u8]) {
    let u16_at = |at: usize| usize::from(u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()));
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| {
        usize::try_from(u64::from_le_bytes(elf[at..at + 8].try_into().unwrap())).unwrap()
    };
    assert_eq!(&elf[..4], b"\x7fELF", "an ELF file");
    assert_eq!((elf[4], elf[5]), (2, 1), "64-bit little-endian");
    assert_eq!(u16_at(0x12), 62, "x86-64");
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let header = phoff + i * phentsize;
        match u32_at(header) {
            3 => panic!("the binary has a program interpreter (PT_INTERP): dynamically linked"),
            2 => {
                let (offset, size) = (u64_at(header + 8), u64_at(header + 32));
                for tag in (offset..offset + size).step_by(16).map(u64_at) {
                    assert_ne!(tag, 1, "the binary needs a shared library (DT_NEEDED)");
                    if tag == 0 {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{value} is not an array"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

#[test]
fn the_host_image_runs_a_static_binary_as_non_root_with_nothing_else() {
    let builds = builds();
    let image = read_image(builds.first.0.path(), "operator-host");
    let config = &image.config["config"];

    let user = config["User"].as_str().unwrap();
    assert_eq!(user, "65532:65532");
    let entrypoint = strings(&config["Entrypoint"]);
    assert_eq!(entrypoint, ["/operator-host"]);
    let env = strings(&config["Env"]);
    assert!(
        env.contains(&"OPERATOR_HOST_CACHE_DIR=/var/cache/operator-host"),
        "the compile cache is off the read-only root: {env:?}"
    );

    let names: Vec<&str> = image.layer.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "etc/",
            "etc/group",
            "etc/passwd",
            "operator-host",
            "var/",
            "var/cache/",
            "var/cache/operator-host/"
        ],
        "the binary, the nonroot user's name and the cache directory, and nothing else"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("bin/") || n.ends_with("/sh"))
    );
    for e in &image.layer {
        let owner = if e.name == "var/cache/operator-host/" {
            (65532, 65532)
        } else {
            (0, 0)
        };
        assert_eq!((e.uid, e.gid), owner, "{}", e.name);
    }
    assert!(
        String::from_utf8_lossy(&entry(&image, "etc/passwd").data)
            .contains("nonroot:x:65532:65532:")
    );

    let binary = entry(&image, "operator-host");
    assert_eq!(binary.mode, 0o555);
    assert_static_elf(&binary.data);

    // Extracted, with none of this machine's environment, it runs: --version, the image's
    // command line (clap rejects an unknown flag before it honours --help), and the bundled
    // plugins taken from the plugins image, compiled by the static binary's wasmtime.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("operator-host");
    std::fs::write(&exe, &binary.data).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(&exe)
            .args(args)
            .env_clear()
            .envs(env.iter().filter_map(|kv| kv.split_once('=')))
            .env("OPERATOR_HOST_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap();
        assert_success(&format!("operator-host {args:?}"), &output);
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(run(&["--version"]), format!("operator-host {VERSION}\n"));
    let mut cmd = strings(&config["Cmd"]);
    cmd.push("--help");
    run(&cmd);
    let plugins = read_image(builds.first.0.path(), "operator-host-plugins");
    // Under the installed host's policy, which lets mysql read its root Secret (as hashes).
    let policy = repo_root().join("deploy/install/base/policy.yaml");
    let mut rbac = vec![
        "rbac".to_string(),
        "--policy".to_string(),
        policy.to_str().unwrap().to_string(),
    ];
    for plugin in PLUGINS {
        let path = dir.path().join(format!("{plugin}.wasm"));
        std::fs::write(
            &path,
            &entry(&plugins, &format!("plugins/{plugin}.wasm")).data,
        )
        .unwrap();
        rbac.push(path.to_str().unwrap().to_string());
    }
    let role = run(&rbac.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(role.contains("kind: ClusterRole"), "{role}");
}

#[test]
fn the_plugins_image_holds_the_bundled_plugins_as_files_any_uid_can_read() {
    let image = read_image(builds().first.0.path(), "operator-host-plugins");
    let config = &image.config["config"];
    assert!(config.get("Entrypoint").is_none() && config.get("Cmd").is_none());

    let names: Vec<&str> = image.layer.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["plugins/", "plugins/memcached.wasm", "plugins/mysql.wasm"]
    );
    assert_eq!(entry(&image, "plugins/").mode, 0o755);
    for plugin in PLUGINS {
        let file = entry(&image, &format!("plugins/{plugin}.wasm"));
        assert_eq!((file.mode, file.uid, file.gid), (0o444, 0, 0));
        assert!(
            file.data == std::fs::read(plugin_path("plugins", plugin)).unwrap(),
            "{plugin}.wasm is the one `make plugins` built"
        );
    }
}

#[test]
fn two_builds_of_one_commit_give_the_same_digests() {
    let builds = builds();
    let (first, second) = (&builds.first, &builds.second);
    assert_eq!(first.1, second.1, "the references printed by two builds");
    let printed: Vec<&str> = first.1.lines().collect();
    for (line, name) in printed
        .iter()
        .zip(["operator-host", "operator-host-plugins"])
    {
        let image = read_image(first.0.path(), name);
        assert_eq!(
            *line,
            format!("localhost/{name}:{VERSION}@{}", image.digest),
            "the script prints reference@digest"
        );
        let archive = |out: &Path| -> String {
            sha256(&std::fs::read(out.join(format!("{name}.oci.tar"))).unwrap())
        };
        assert_eq!(
            archive(first.0.path()),
            archive(second.0.path()),
            "{name}.oci.tar, byte for byte"
        );
    }
    assert_eq!(printed.len(), 2, "{printed:?}");
}
