//! `operator-host new`: a plugin to start from, in Rust, Python or JavaScript.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;

use crate::scaffold;

/// The arguments of `new`.
#[derive(Debug, clap::Args)]
pub(super) struct NewArgs {
    /// The plugin's name, a DNS-1123 label (`web-app`): the crate's name and the name the
    /// plugin declares.
    name: String,
    /// The plugin's language.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// Where to write it (default: ./NAME); it must not exist.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The parent's kind (default: NAME in CamelCase, `WebApp`).
    #[arg(long)]
    kind: Option<String>,
    /// The parent's API group.
    #[arg(long, default_value = "example.com")]
    group: String,
    /// Take the SDK from this directory (a checkout's plugins/sdk; plugins/sdk-python with
    /// --lang python, plugins/sdk-js with --lang js) instead of crates.io (PyPI, npm).
    #[arg(long, value_name = "DIR", conflicts_with = "sdk_git")]
    sdk_path: Option<PathBuf>,
    /// Take operator-host-sdk from this git repository instead of crates.io.
    #[arg(long, value_name = "URL")]
    sdk_git: Option<String>,
    /// With --sdk-git: the branch, tag or commit.
    #[arg(long, requires = "sdk_git")]
    sdk_rev: Option<String>,
}

/// Writes the plugin's files; prints their paths.
pub(super) fn run(args: NewArgs) -> anyhow::Result<()> {
    let NewArgs {
        name,
        lang,
        dir,
        kind,
        group,
        sdk_path,
        sdk_git,
        sdk_rev,
    } = args;
    let sdk = match (sdk_path, sdk_git) {
        // Cargo and pip read a path dependency relative to the new plugin, not to where
        // `new` ran.
        (Some(path), _) => scaffold::SdkSource::Path(
            std::path::absolute(&path)
                .with_context(|| format!("resolving --sdk-path {}", path.display()))?,
        ),
        (None, Some(url)) => scaffold::SdkSource::Git { url, rev: sdk_rev },
        (None, None) => scaffold::SdkSource::Version(env!("CARGO_PKG_VERSION").to_string()),
    };
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let plugin = scaffold::Plugin {
        name,
        kind,
        group,
        sdk,
    };
    for file in scaffold::write(lang.into(), &plugin, &dir)? {
        println!("{}", file.display());
    }
    Ok(())
}

/// The languages `new` scaffolds a plugin in.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Lang {
    Rust,
    Python,
    Js,
}

impl From<Lang> for scaffold::Lang {
    fn from(lang: Lang) -> Self {
        match lang {
            Lang::Rust => scaffold::Lang::Rust,
            Lang::Python => scaffold::Lang::Python,
            Lang::Js => scaffold::Lang::JavaScript,
        }
    }
}
