//! `operator-host sign`: a cosign-compatible signature of an artifact, pushed beside it.

use std::path::PathBuf;

use super::{RegistryArgs, block_on, read_key};

/// The arguments of `sign`.
#[derive(Debug, clap::Args)]
pub(super) struct SignArgs {
    /// registry/repository:tag (resolved to its digest) or registry/repository@sha256:...
    reference: String,
    /// The private key: an unencrypted PKCS#8 PEM of ECDSA P-256 (`generate-key`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Signs the artifact the reference names; prints the signed REFERENCE@DIGEST.
pub(super) fn run(args: SignArgs) -> anyhow::Result<()> {
    let SignArgs {
        reference,
        key,
        registry,
    } = args;
    let access = registry.access()?;
    let (pem, what) = read_key(&key)?;
    let key = crate::signature::PrivateKey::from_pem(&pem, &what)?;
    let repository = crate::oci::repository_name(&reference)?;
    block_on(async {
        let digest = crate::oci::resolve(&reference, &access).await?;
        let payload = crate::signature::payload(&repository, &digest);
        let stored = crate::signature::Stored {
            signature: key.sign(&payload),
            payload,
        };
        crate::oci::push_signature(&reference, &digest, stored, &access).await?;
        println!("{repository}@{digest}");
        anyhow::Ok(())
    })??;
    Ok(())
}
