//! `operator-host generate-key`: a new signing key pair.

use std::path::PathBuf;

use anyhow::Context;

/// The arguments of `generate-key`.
#[derive(Debug, clap::Args)]
pub(super) struct GenerateKeyArgs {
    prefix: PathBuf,
}

/// Writes PREFIX.key and PREFIX.pub; prints their paths.
pub(super) fn run(args: GenerateKeyArgs) -> anyhow::Result<()> {
    let GenerateKeyArgs { prefix } = args;
    let (private, public) = crate::signature::PrivateKey::generate();
    let private_path = prefix.with_extension("key");
    let public_path = prefix.with_extension("pub");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&private_path)
        .with_context(|| format!("creating {} (it must not exist)", private_path.display()))?;
    std::io::Write::write_all(&mut file, private.as_bytes())
        .with_context(|| format!("writing {}", private_path.display()))?;
    std::fs::write(&public_path, public)
        .with_context(|| format!("writing {}", public_path.display()))?;
    println!("{}\n{}", private_path.display(), public_path.display());
    Ok(())
}
