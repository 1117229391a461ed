//! `operator-host new`: a plugin (a Rust crate, a Python or an npm package) to start from, with the build settings, a sample test and a sample CR.

use std::path::{Path, PathBuf};

/// Why a plugin could not be scaffolded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{name:?} is not a plugin name: expected a DNS-1123 label (lowercase letters, digits and \
         '-', starting with a letter, at most 63 characters)"
    )]
    InvalidName { name: String },
    #[error(
        "{kind:?} is not a kind: expected CamelCase letters and digits, starting with a capital"
    )]
    InvalidKind { kind: String },
    #[error("{group:?} is not an API group: expected a DNS subdomain such as example.com")]
    InvalidGroup { group: String },
    #[error(
        "the testing crate operator-host-testing is not beside the SDK at {}: expected {} (a \
         checkout's plugins/sdk has plugins/testing beside it)",
        sdk.display(),
        expected.display()
    )]
    TestingCrateMissing { sdk: PathBuf, expected: PathBuf },
    #[error("{} already exists; choose another --dir or remove it", dir.display())]
    DirectoryExists { dir: PathBuf },
    #[error(
        "npm cannot install the JavaScript SDK from {url}: it is plugins/sdk-js of that \
         repository, and npm takes no subdirectory of a git repository; clone it and pass \
         --sdk-path CLONE/plugins/sdk-js"
    )]
    GitSdkForJs { url: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where the scaffolded crate gets `operator-host-sdk` from.
#[derive(Debug, Clone)]
pub enum SdkSource {
    /// A version on crates.io.
    Version(String),
    /// A git repository holding the SDK (with an optional branch, tag or commit).
    Git { url: String, rev: Option<String> },
    /// A directory holding the SDK crate (a checkout, or an unpacked `cargo package`).
    Path(PathBuf),
}

impl SdkSource {
    /// The dependency's value in `Cargo.toml`.
    fn cargo_dependency(&self) -> String {
        match self {
            SdkSource::Version(version) => format!("{:?}", version),
            SdkSource::Git { url, rev: None } => format!("{{ git = {url:?} }}"),
            SdkSource::Git {
                url,
                rev: Some(rev),
            } => format!("{{ git = {url:?}, rev = {rev:?} }}"),
            SdkSource::Path(path) => format!("{{ path = {:?} }}", path.display().to_string()),
        }
    }

    /// The value in `Cargo.toml` of `operator-host-testing`, the host's checks for `cargo
    /// test`: from where the SDK comes (a checkout has it at `plugins/testing`, beside the SDK;
    /// cargo finds it in a git repository by its name).
    fn cargo_testing_dependency(&self) -> Result<String, Error> {
        match self {
            SdkSource::Version(_) | SdkSource::Git { .. } => Ok(self.cargo_dependency()),
            SdkSource::Path(sdk) => {
                let testing = sdk.parent().unwrap_or(sdk).join("testing");
                if !testing.join("Cargo.toml").is_file() {
                    return Err(Error::TestingCrateMissing {
                        sdk: sdk.clone(),
                        expected: testing,
                    });
                }
                Ok(SdkSource::Path(testing).cargo_dependency())
            }
        }
    }

    /// The requirement in `pyproject.toml` (PEP 508), with the `build` and `test` extras: the
    /// SDK in this repository's `plugins/sdk-python` for a git URL or a checkout's directory.
    fn python_requirement(&self) -> String {
        const SDK: &str = "operator-host-sdk[build,test]";
        match self {
            SdkSource::Version(version) => format!("{SDK}=={version}"),
            SdkSource::Git { url, rev } => format!(
                "{SDK} @ git+{url}{}#subdirectory=plugins/sdk-python",
                rev.as_ref().map(|r| format!("@{r}")).unwrap_or_default()
            ),
            SdkSource::Path(path) => format!("{SDK} @ file://{}", path.display()),
        }
    }

    /// The dependency's value in `package.json`. npm installs no package from a subdirectory
    /// of a git repository, so a git source is refused.
    fn npm_dependency(&self) -> Result<String, Error> {
        match self {
            SdkSource::Version(version) => Ok(version.clone()),
            SdkSource::Git { url, .. } => Err(Error::GitSdkForJs { url: url.clone() }),
            SdkSource::Path(path) => Ok(format!("file:{}", path.display())),
        }
    }
}

/// A plugin's language, and so the files `new` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// The plugin's name (a DNS-1123 label): the crate's name and what `info` declares.
    pub name: String,
    /// The parent's kind (default: the name in CamelCase).
    pub kind: Option<String>,
    /// The parent's API group.
    pub group: String,
    pub sdk: SdkSource,
}

/// The toolchain the scaffolded crate pins: this repository's (a test keeps them equal).
const RUST_CHANNEL: &str = "1.95.0";

/// The files of a Rust plugin crate, relative to its directory.
const RUST_FILES: [(&str, &str); 8] = [
    ("Cargo.toml", include_str!("scaffold/rust/Cargo.toml.tmpl")),
    (
        ".cargo/config.toml",
        include_str!("scaffold/rust/cargo-config.toml.tmpl"),
    ),
    (
        "rust-toolchain.toml",
        include_str!("scaffold/rust/rust-toolchain.toml.tmpl"),
    ),
    (".gitignore", include_str!("scaffold/rust/gitignore.tmpl")),
    ("README.md", include_str!("scaffold/rust/README.md.tmpl")),
    ("src/lib.rs", include_str!("scaffold/rust/lib.rs.tmpl")),
    ("src/tests.rs", include_str!("scaffold/rust/tests.rs.tmpl")),
    (
        "examples/{{name}}.yaml",
        include_str!("scaffold/rust/example.yaml.tmpl"),
    ),
];

/// The files of a Python plugin package, relative to its directory.
const PYTHON_FILES: [(&str, &str); 6] = [
    (
        "pyproject.toml",
        include_str!("scaffold/python/pyproject.toml.tmpl"),
    ),
    (".gitignore", include_str!("scaffold/python/gitignore.tmpl")),
    ("README.md", include_str!("scaffold/python/README.md.tmpl")),
    (
        "{{module}}.py",
        include_str!("scaffold/python/operator.py.tmpl"),
    ),
    (
        "tests/test_{{module}}.py",
        include_str!("scaffold/python/tests/test_operator.py.tmpl"),
    ),
    (
        "examples/{{name}}.yaml",
        include_str!("scaffold/example.yaml.tmpl"),
    ),
];

/// The files of a JavaScript plugin package, relative to its directory.
const JS_FILES: [(&str, &str); 6] = [
    (
        "package.json",
        include_str!("scaffold/js/package.json.tmpl"),
    ),
    (".gitignore", include_str!("scaffold/js/gitignore.tmpl")),
    ("README.md", include_str!("scaffold/js/README.md.tmpl")),
    (
        "src/{{module}}.js",
        include_str!("scaffold/js/operator.js.tmpl"),
    ),
    (
        "test/{{module}}.test.js",
        include_str!("scaffold/js/test/operator.test.js.tmpl"),
    ),
    (
        "examples/{{name}}.yaml",
        include_str!("scaffold/example.yaml.tmpl"),
    ),
];

/// Writes a plugin of `lang` for `plugin` into `dir`, which must not exist yet: a Rust crate,
/// a Python package or an npm package. Returns the files written.
pub fn write(lang: Lang, plugin: &Plugin, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut values = values(plugin)?;
    match lang {
        Lang::Rust => values.push(("testing_dependency", plugin.sdk.cargo_testing_dependency()?)),
        Lang::JavaScript => values.push(("js_sdk_dependency", plugin.sdk.npm_dependency()?)),
        Lang::Python => {}
    }
    if dir.exists() {
        return Err(Error::DirectoryExists {
            dir: dir.to_path_buf(),
        });
    }
    let files: &[(&str, &str)] = match lang {
        Lang::Rust => &RUST_FILES,
        Lang::Python => &PYTHON_FILES,
        Lang::JavaScript => &JS_FILES,
    };
    let mut written = Vec::new();
    for &(relative, template) in files {
        let path = dir.join(fill(relative, &values));
        let write = |path: &Path| -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, fill(template, &values))
        };
        write(&path).map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The placeholders of the templates and their values.
fn values(plugin: &Plugin) -> Result<Vec<(&'static str, String)>, Error> {
    let name = &plugin.name;
    let is_label = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !is_label {
        return Err(Error::InvalidName { name: name.clone() });
    }
    let kind = plugin.kind.clone().unwrap_or_else(|| camel_case(name));
    if !kind.starts_with(|c: char| c.is_ascii_uppercase())
        || !kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(Error::InvalidKind { kind });
    }
    let group = &plugin.group;
    let is_subdomain = group.contains('.')
        && group.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if !is_subdomain {
        return Err(Error::InvalidGroup {
            group: group.clone(),
        });
    }
    let module = name.replace('-', "_");
    Ok(vec![
        ("name", name.clone()),
        // The Rust crate's and the Python or JavaScript module's name.
        ("crate", module.clone()),
        ("module", module),
        ("plural", format!("{}s", kind.to_ascii_lowercase())),
        ("kind", kind),
        ("group", group.clone()),
        ("sdk_dependency", plugin.sdk.cargo_dependency()),
        ("python_sdk_requirement", plugin.sdk.python_requirement()),
        ("rust_channel", RUST_CHANNEL.to_string()),
    ])
}

/// `web-app` → `WebApp`.
fn camel_case(name: &str) -> String {
    name.split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// `template` with every `{{key}}` replaced by its value.
fn fill(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_string(), |text, (key, value)| {
            text.replace(&format!("{{{{{key}}}}}"), value)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(name: &str) -> Plugin {
        Plugin {
            name: name.to_string(),
            kind: None,
            group: "example.com".to_string(),
            sdk: SdkSource::Version("0.1.0".to_string()),
        }
    }

    fn assert_filled(files: &[PathBuf]) {
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(
                !text.contains("{{"),
                "{} keeps a placeholder",
                file.display()
            );
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        let dir = tempfile::tempdir().unwrap();
        let files = write(Lang::Rust, &plugin("web-app"), &dir.path().join("web-app")).unwrap();
        assert!(files.iter().any(|f| f.ends_with("examples/web-app.yaml")));
        assert_filled(&files);
        let lib = std::fs::read_to_string(dir.path().join("web-app/src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct WebAppSpec"), "{lib}");
        assert!(
            lib.contains(r#"const NAME: &'static str = "web-app";"#),
            "{lib}"
        );
    }

    #[test]
    fn bad_names_kinds_groups_and_an_existing_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["Web", "-a", "a-", "a_b", ""] {
            let err = write(Lang::Rust, &plugin(name), &dir.path().join("x")).unwrap_err();
            assert!(matches!(err, Error::InvalidName { .. }), "{name}: {err}");
        }
        let mut bad_kind = plugin("a");
        bad_kind.kind = Some("lower".into());
        assert!(matches!(
            write(Lang::Rust, &bad_kind, &dir.path().join("x")),
            Err(Error::InvalidKind { .. })
        ));
        let mut bad_group = plugin("a");
        bad_group.group = "nodots".into();
        assert!(matches!(
            write(Lang::Rust, &bad_group, &dir.path().join("x")),
            Err(Error::InvalidGroup { .. })
        ));
        let err = write(Lang::Rust, &plugin("a"), dir.path()).unwrap_err();
        assert!(matches!(err, Error::DirectoryExists { .. }), "{err}");
    }

    #[test]
    fn a_python_package_has_every_placeholder_filled_and_the_sdk_requirement() {
        let dir = tempfile::tempdir().unwrap();
        let mut web_app = plugin("web-app");
        web_app.sdk = SdkSource::Path("/x/sdk-python".into());
        let files = write(Lang::Python, &web_app, &dir.path().join("web-app")).unwrap();
        assert!(files.iter().any(|f| f.ends_with("web_app.py")));
        assert!(files.iter().any(|f| f.ends_with("tests/test_web_app.py")));
        assert_filled(&files);
        let pyproject = std::fs::read_to_string(dir.path().join("web-app/pyproject.toml")).unwrap();
        assert!(
            pyproject.contains(r#""operator-host-sdk[build,test] @ file:///x/sdk-python""#),
            "{pyproject}"
        );
        assert_eq!(
            SdkSource::Git {
                url: "https://example.com/o.git".into(),
                rev: Some("v0.1.0".into())
            }
            .python_requirement(),
            "operator-host-sdk[build,test] @ git+https://example.com/o.git@v0.1.0#subdirectory=plugins/sdk-python"
        );
    }

    #[test]
    fn a_javascript_package_has_every_placeholder_filled_and_git_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut web_app = plugin("web-app");
        web_app.sdk = SdkSource::Path("/x/sdk-js".into());
        let files = write(Lang::JavaScript, &web_app, &dir.path().join("web-app")).unwrap();
        assert!(files.iter().any(|f| f.ends_with("src/web_app.js")));
        assert_filled(&files);
        let package = std::fs::read_to_string(dir.path().join("web-app/package.json")).unwrap();
        assert!(
            package.contains(r#""@operator-host/sdk": "file:/x/sdk-js""#),
            "{package}"
        );
        web_app.sdk = SdkSource::Git {
            url: "https://example.com/o.git".into(),
            rev: None,
        };
        let err = write(Lang::JavaScript, &web_app, &dir.path().join("git")).unwrap_err();
        assert!(matches!(err, Error::GitSdkForJs { .. }), "{err}");
    }

    #[test]
    fn the_pinned_toolchain_is_this_repositorys() {
        let ours = include_str!("../../rust-toolchain.toml");
        assert!(
            ours.contains(&format!("channel = \"{RUST_CHANNEL}\"")),
            "rust-toolchain.toml and scaffold::RUST_CHANNEL differ"
        );
    }

    #[test]
    fn sdk_sources_are_cargo_dependencies() {
        assert_eq!(
            SdkSource::Version("0.1.0".into()).cargo_dependency(),
            "\"0.1.0\""
        );
        assert_eq!(
            SdkSource::Git {
                url: "https://example.com/o.git".into(),
                rev: Some("v0.1.0".into())
            }
            .cargo_dependency(),
            r#"{ git = "https://example.com/o.git", rev = "v0.1.0" }"#
        );
        assert_eq!(
            SdkSource::Path("/x/sdk".into()).cargo_dependency(),
            r#"{ path = "/x/sdk" }"#
        );
    }
}
