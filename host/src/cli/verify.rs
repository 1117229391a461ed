//! `operator-host verify`: an artifact's signature checked against a public key.

use std::path::PathBuf;

use super::{RegistryArgs, block_on, read_key};

/// The arguments of `verify`.
#[derive(Debug, clap::Args)]
pub(super) struct VerifyArgs {
    reference: String,
    /// The public key (PEM): what `generate-key` or `cosign generate-key-pair` wrote.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Verifies the artifact's signature with the key; prints the key's fingerprint.
pub(super) fn run(args: VerifyArgs) -> anyhow::Result<()> {
    let VerifyArgs {
        reference,
        key,
        registry,
    } = args;
    let access = registry.access()?;
    let (pem, what) = read_key(&key)?;
    let key = crate::signature::PublicKey::from_pem(&pem, &what)?;
    block_on(async {
        let digest = crate::oci::resolve(&reference, &access).await?;
        let signatures = crate::oci::pull_signatures(&reference, &digest, &access).await?;
        let fingerprint = crate::signature::verify(&signatures, &[key], &digest)?;
        println!(
            "{}@{digest} is signed by key {fingerprint}",
            crate::oci::repository_name(&reference)?
        );
        anyhow::Ok(())
    })??;
    Ok(())
}
