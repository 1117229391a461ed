//! Cosign-compatible keyed signatures of plugin artifacts: the simple-signing payload naming a
//! manifest digest, signed with ECDSA P-256 over SHA-256, stored as cosign stores it (a
//! `.sig` manifest at tag `sha256-<hex>.sig` beside the artifact, one layer per signature).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The media type of a signature layer: its blob is the payload.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 DER signature of the payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// Why a key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{what} is not a PEM public key of ECDSA P-256 (as `cosign generate-key-pair` or `operator-host generate-key` write them): {problem}"
    )]
    PublicKey { what: String, problem: String },
    #[error(
        "{what} is not an unencrypted PKCS#8 PEM private key of ECDSA P-256 (as `operator-host generate-key` writes it): {problem}"
    )]
    PrivateKey { what: String, problem: String },
}

/// Why an artifact's signatures do not let it serve; said on the `Verified` condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{digest} has no signature (no {tag} beside it)")]
    Unsigned { digest: String, tag: String },
    #[error(
        "none of the {signatures} signature(s) of {digest} verifies with the given key(s) {keys}"
    )]
    WrongKey {
        digest: String,
        signatures: usize,
        keys: String,
    },
    #[error(
        "a signature by key {key} verifies, but it signs {signed}, not {digest}: it was copied from another artifact"
    )]
    OtherDigest {
        key: String,
        signed: String,
        digest: String,
    },
    #[error(
        "a signature is required, but no key is given (spec.verify.keys or the policy's signatureKeys)"
    )]
    NoKey,
}

impl Refusal {
    /// The reason of the `Verified` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Unsigned { .. } => "Unsigned",
            Refusal::WrongKey { .. } => "WrongKey",
            Refusal::OtherDigest { .. } => "OtherDigest",
            Refusal::NoKey => "NoKey",
        }
    }
}

/// A public key signatures are checked with, and its fingerprint for messages.
#[derive(Debug, Clone)]
pub struct PublicKey {
    key: VerifyingKey,
    /// The first 16 hex digits of the SHA-256 of its DER (SubjectPublicKeyInfo).
    pub fingerprint: String,
}

impl PublicKey {
    /// Reads a PEM `PUBLIC KEY`; `what` names it in the error.
    pub fn from_pem(pem: &str, what: &str) -> Result<Self, Error> {
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| Error::PublicKey {
            what: what.into(),
            problem: e.to_string(),
        })?;
        let der = key.to_public_key_der().map_err(|e| Error::PublicKey {
            what: what.into(),
            problem: e.to_string(),
        })?;
        let fingerprint = hex::encode(&Sha256::digest(der.as_bytes())[..8]);
        Ok(PublicKey { key, fingerprint })
    }

    /// Whether `other` is the same key, whatever its PEM's layout.
    pub fn same_key(&self, other: &PublicKey) -> bool {
        self.key == other.key
    }
}

/// A private key to sign with.
#[derive(Debug)]
pub struct PrivateKey(SigningKey);

impl PrivateKey {
    /// Reads an unencrypted PKCS#8 PEM `PRIVATE KEY`; `what` names it in the error.
    pub fn from_pem(pem: &str, what: &str) -> Result<Self, Error> {
        SigningKey::from_pkcs8_pem(pem.trim())
            .map(PrivateKey)
            .map_err(|e| Error::PrivateKey {
                what: what.into(),
                problem: e.to_string(),
            })
    }

    /// A new key pair: (private key PEM, public key PEM).
    pub fn generate() -> (String, String) {
        let key = SigningKey::random(&mut rand_core::OsRng);
        let private = key
            .to_pkcs8_pem(LineEnding::LF)
            .map(|pem| pem.to_string())
            .unwrap_or_default();
        let public = key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_default();
        (private, public)
    }

    /// The base64 DER signature of `payload` (RFC 6979: the same payload, the same signature).
    pub fn sign(&self, payload: &[u8]) -> String {
        let signature: Signature = self.0.sign(payload);
        BASE64.encode(signature.to_der().as_bytes())
    }
}

#[derive(Serialize, Deserialize)]
struct SimpleSigning {
    critical: Critical,
    /// Go writes `null` when there are no annotations.
    #[serde(default)]
    optional: serde_json::Value,
}

#[derive(Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The payload cosign signs for `repository@digest`, byte for byte (field order as Go's
/// `json.Marshal`, `optional: null`).
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&SimpleSigning {
        critical: Critical {
            identity: Identity {
                docker_reference: repository.into(),
            },
            image: Image {
                docker_manifest_digest: digest.into(),
            },
            kind: PAYLOAD_TYPE.into(),
        },
        optional: serde_json::Value::Null,
    })
    .unwrap_or_default()
}

/// The tag of `digest`'s signatures.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// One signature as stored: the payload (the layer's blob) and the base64 signature (its
/// annotation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    #[serde(with = "base64_bytes")]
    pub payload: Vec<u8>,
    pub signature: String,
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        STANDARD
            .decode(String::deserialize(d)?)
            .map_err(serde::de::Error::custom)
    }
}

/// The fingerprint of the key one of `signatures` of `digest` verifies with; else why none
/// lets it serve. A payload's claims are read only once its signature verified.
pub fn verify(signatures: &[Stored], keys: &[PublicKey], digest: &str) -> Result<String, Refusal> {
    if keys.is_empty() {
        return Err(Refusal::NoKey);
    }
    if signatures.is_empty() {
        return Err(Refusal::Unsigned {
            digest: digest.into(),
            tag: signature_tag(digest),
        });
    }
    let mut copied = None;
    for stored in signatures {
        let Some(signature) = BASE64
            .decode(stored.signature.trim())
            .ok()
            .and_then(|der| Signature::from_der(&der).ok())
        else {
            continue;
        };
        let Some(key) = keys
            .iter()
            .find(|key| key.key.verify(&stored.payload, &signature).is_ok())
        else {
            continue;
        };
        let Ok(claims) = serde_json::from_slice::<SimpleSigning>(&stored.payload) else {
            continue;
        };
        if claims.critical.kind != PAYLOAD_TYPE {
            continue;
        }
        if claims.critical.image.docker_manifest_digest == digest {
            return Ok(key.fingerprint.clone());
        }
        copied = Some(Refusal::OtherDigest {
            key: key.fingerprint.clone(),
            signed: claims.critical.image.docker_manifest_digest,
            digest: digest.into(),
        });
    }
    Err(copied.unwrap_or_else(|| Refusal::WrongKey {
        digest: digest.into(),
        signatures: signatures.len(),
        keys: keys
            .iter()
            .map(|k| k.fingerprint.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }))
}

/// The `.sig` manifest and its config for `signatures`, as cosign writes them (byte for
/// byte for one signature): (config, manifest).
pub fn signature_manifest(signatures: &[Stored]) -> (Vec<u8>, Vec<u8>) {
    let digests: Vec<String> = signatures
        .iter()
        .map(|s| sha256_digest(&s.payload))
        .collect();
    let history = vec![r#"{"created":"0001-01-01T00:00:00Z"}"#; signatures.len()].join(",");
    let diff_ids = digests
        .iter()
        .map(|d| format!("{d:?}"))
        .collect::<Vec<_>>()
        .join(",");
    // Field order as go-containerregistry writes them (a `json!` would sort the keys).
    let config = format!(
        r#"{{"architecture":"","created":"0001-01-01T00:00:00Z","history":[{history}],"os":"","rootfs":{{"type":"layers","diff_ids":[{diff_ids}]}},"config":{{}}}}"#
    );
    let layers = signatures
        .iter()
        .zip(&digests)
        .map(|(s, digest)| {
            format!(
                r#"{{"mediaType":"{PAYLOAD_MEDIA_TYPE}","size":{},"digest":"{digest}","annotations":{{"{SIGNATURE_ANNOTATION}":{}}}}}"#,
                s.payload.len(),
                serde_json::Value::from(s.signature.as_str())
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","size":{},"digest":"{}"}},"layers":[{layers}]}}"#,
        config.len(),
        sha256_digest(config.as_bytes()),
    );
    (config.into_bytes(), manifest.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cosign");
    const DIGEST: &str = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap()
    }

    fn cosigns_key() -> PublicKey {
        PublicKey::from_pem(&fixture("cosign.pub"), "cosign.pub").unwrap()
    }

    #[test]
    fn a_signature_made_by_cosign_verifies_and_its_payload_and_manifest_are_ours_byte_for_byte() {
        let payload = payload("localhost:5000/plugins/echo", DIGEST);
        assert_eq!(payload, fixture("payload.json").into_bytes());
        let stored = Stored {
            payload,
            signature: fixture("sig.b64").trim().to_string(),
        };
        let key = cosigns_key();
        assert_eq!(
            verify(
                std::slice::from_ref(&stored),
                std::slice::from_ref(&key),
                DIGEST
            ),
            Ok(key.fingerprint)
        );
        let (config, manifest) = signature_manifest(&[stored]);
        assert_eq!(
            String::from_utf8(config).unwrap(),
            fixture("config.json").trim()
        );
        assert_eq!(
            String::from_utf8(manifest).unwrap(),
            fixture("manifest.json").trim()
        );
    }

    #[test]
    fn a_signature_of_another_digest_a_tampered_payload_or_another_key_is_refused() {
        let stored = Stored {
            payload: fixture("payload.json").into_bytes(),
            signature: fixture("sig.b64").trim().to_string(),
        };
        let other = format!("sha256:{}", "0".repeat(64));
        assert!(matches!(
            verify(std::slice::from_ref(&stored), &[cosigns_key()], &other),
            Err(Refusal::OtherDigest { .. })
        ));
        let mut tampered = stored.clone();
        tampered.payload = payload("localhost:5000/plugins/echo", &other);
        assert!(matches!(
            verify(&[tampered], &[cosigns_key()], &other),
            Err(Refusal::WrongKey { .. })
        ));
        let (_, public) = PrivateKey::generate();
        let stranger = PublicKey::from_pem(&public, "a new key").unwrap();
        assert!(matches!(
            verify(std::slice::from_ref(&stored), &[stranger], DIGEST),
            Err(Refusal::WrongKey { .. })
        ));
        assert!(matches!(
            verify(&[], &[cosigns_key()], DIGEST),
            Err(Refusal::Unsigned { .. })
        ));
        assert_eq!(verify(&[stored], &[], DIGEST), Err(Refusal::NoKey));
    }

    #[test]
    fn what_this_host_signs_verifies_with_its_public_key() {
        let (private, public) = PrivateKey::generate();
        let key = PrivateKey::from_pem(&private, "the new key").unwrap();
        let payload = payload("registry.example/plugins/memcached", DIGEST);
        let stored = Stored {
            signature: key.sign(&payload),
            payload,
        };
        let public = PublicKey::from_pem(&public, "its public key").unwrap();
        assert!(verify(&[stored], &[public], DIGEST).is_ok());
    }

    #[test]
    fn a_key_that_is_not_pem_is_named_with_what_was_expected() {
        let error = PublicKey::from_pem("nonsense", "spec.verify.keys[0]")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("spec.verify.keys[0] is not a PEM public key"),
            "{error}"
        );
        let error = PrivateKey::from_pem("nonsense", "key.pem")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("key.pem is not an unencrypted PKCS#8"),
            "{error}"
        );
    }
}
