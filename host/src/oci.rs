//! Plugins as OCI artifacts in the CNCF TAG Runtime Wasm layout (config
//! `application/vnd.wasm.config.v0+json`, one `application/wasm` layer): push, pull by tag or
//! digest, and the registry credentials of the docker config or of a Kubernetes Secret.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::signature::sha256_digest;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};

/// The config media type of a Wasm artifact (CNCF TAG Runtime Wasm OCI artifact layout).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of its one layer: the component's bytes.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The largest plugin the host pulls, unless told otherwise: a plugin is a few MiB; a
/// registry must not make the host buffer without end.
pub const DEFAULT_MAX_PLUGIN_BYTES: u64 = 64 << 20;

const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
const VERSION_ANNOTATION: &str = "org.opencontainers.image.version";
const CREATED_ANNOTATION: &str = "org.opencontainers.image.created";

/// Why an artifact could not be pushed or pulled.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{reference:?} is not an OCI reference (expected registry/repository:tag or registry/repository@sha256:<digest>): {source}"
    )]
    ParseReference {
        reference: String,
        source: oci_client::ParseError,
    },
    #[error("cannot build the registry client: {0}")]
    Client(#[source] oci_client::errors::OciDistributionError),
    #[error("cannot read the credentials for {registry} from {from}: {problem}")]
    Credentials {
        registry: String,
        from: String,
        problem: String,
    },
    #[error("cannot push {what} of {reference}: {source}")]
    Push {
        reference: String,
        what: &'static str,
        source: oci_client::errors::OciDistributionError,
    },
    #[error("cannot pull {what} of {reference}: {source}")]
    Pull {
        reference: String,
        what: &'static str,
        source: oci_client::errors::OciDistributionError,
    },
    #[error("{reference} is not a Wasm plugin artifact: {problem}")]
    NotAWasmArtifact { reference: String, problem: String },
}

/// How to reach a registry: its credentials, and whether it speaks plain HTTP.
#[derive(Clone, Debug)]
pub struct Access {
    pub auth: Credentials,
    /// Plain HTTP to the reference's registry (a registry on loopback), as oras's
    /// `--plain-http`.
    pub plain_http: bool,
    pub max_plugin_bytes: u64,
}

impl Default for Access {
    fn default() -> Self {
        Access {
            auth: Credentials::Anonymous,
            plain_http: false,
            max_plugin_bytes: DEFAULT_MAX_PLUGIN_BYTES,
        }
    }
}

/// Registry credentials.
#[derive(Clone)]
pub enum Credentials {
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
    /// The docker config (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`, with
    /// its credential helpers); anonymous if it has nothing for the registry.
    DockerConfig,
    /// The content of a `.dockerconfigjson` (a `kubernetes.io/dockerconfigjson` Secret),
    /// named for messages.
    DockerConfigJson {
        json: Vec<u8>,
        from: String,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => write!(f, "Basic({username})"),
            Credentials::DockerConfig => f.write_str("DockerConfig"),
            Credentials::DockerConfigJson { from, .. } => write!(f, "DockerConfigJson({from})"),
        }
    }
}

impl Credentials {
    /// The credentials for `registry` (a host[:port], as in the reference).
    async fn for_registry(&self, registry: &str) -> Result<RegistryAuth, Error> {
        let found = match self {
            Credentials::Anonymous => return Ok(RegistryAuth::Anonymous),
            Credentials::Basic { username, password } => {
                return Ok(RegistryAuth::Basic(username.clone(), password.clone()));
            }
            Credentials::DockerConfig => {
                let server = registry.to_string();
                // Reads a file and may run a credential helper.
                tokio::task::spawn_blocking(move || docker_credential::get_credential(&server))
                    .await
                    .map_err(|e| self.problem(registry, e.to_string()))?
            }
            Credentials::DockerConfigJson { json, .. } => {
                docker_credential::get_credential_from_reader(json.as_slice(), registry)
            }
        };
        use docker_credential::{CredentialRetrievalError as Missing, DockerCredential};
        match found {
            Ok(DockerCredential::UsernamePassword(username, password)) => {
                Ok(RegistryAuth::Basic(username, password))
            }
            Ok(DockerCredential::IdentityToken(_)) => Err(self.problem(
                registry,
                "it holds an identity token, which the host cannot exchange: log in with a username and password".into(),
            )),
            // No file, or nothing for this registry: anonymous, as docker and oras do.
            Err(Missing::NoCredentialConfigured | Missing::ConfigNotFound | Missing::ConfigReadError) => {
                Ok(RegistryAuth::Anonymous)
            }
            Err(error) => Err(self.problem(registry, format!("{error:?}"))),
        }
    }

    fn problem(&self, registry: &str, problem: String) -> Error {
        let from = match self {
            Credentials::DockerConfigJson { from, .. } => from.clone(),
            _ => "the docker config".into(),
        };
        Error::Credentials {
            registry: registry.into(),
            from,
            problem,
        }
    }
}

/// A parsed reference, keeping the text it was given for messages.
pub fn parse_reference(reference: &str) -> Result<Reference, Error> {
    reference.parse().map_err(|source| Error::ParseReference {
        reference: reference.into(),
        source,
    })
}

/// The artifact config of the layout; `component` lists the component's world, as
/// wasm-pkg-tools writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    pub created: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub architecture: String,
    pub os: String,
    #[serde(default)]
    pub layer_digests: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<WasmComponent>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WasmComponent {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// What to push: a component and what the plugin says of itself.
#[derive(Debug)]
pub struct Artifact<'a> {
    pub bytes: &'a [u8],
    /// The plugin's name: the layer's title, so `oras pull` writes `<name>.wasm`.
    pub name: &'a str,
    pub version: &'a str,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// RFC 3339; `SOURCE_DATE_EPOCH` makes pushes of the same bytes give the same digest.
    pub created: String,
}

/// A pulled plugin: the component's bytes (their digest checked) and the manifest's digest.
#[derive(Debug)]
pub struct Pulled {
    pub bytes: Vec<u8>,
    pub digest: String,
    pub annotations: BTreeMap<String, String>,
}

/// A client for `reference`'s registry and the credentials to send it.
async fn connect(reference: &Reference, access: &Access) -> Result<(Client, RegistryAuth), Error> {
    let client = client(reference, access)?;
    let auth = access
        .auth
        .for_registry(reference.resolve_registry())
        .await?;
    Ok((client, auth))
}

/// A client for `reference`'s registry.
fn client(reference: &Reference, access: &Access) -> Result<Client, Error> {
    // reqwest's rustls needs a process-wide crypto provider; kube brings ring. An error only
    // says one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let protocol = if access.plain_http {
        ClientProtocol::HttpsExcept(vec![reference.resolve_registry().to_string()])
    } else {
        ClientProtocol::Https
    };
    Client::try_from(ClientConfig {
        protocol,
        ..ClientConfig::default()
    })
    .map_err(Error::Client)
}

/// Pushes `artifact` to `reference`; returns the manifest's digest.
pub async fn push(
    reference: &str,
    artifact: &Artifact<'_>,
    access: &Access,
) -> Result<String, Error> {
    let parsed = parse_reference(reference)?;
    let (client, auth) = connect(&parsed, access).await?;
    let failed = |what| {
        move |source| Error::Push {
            reference: reference.into(),
            what,
            source,
        }
    };
    client
        .auth(&parsed, &auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(failed("the credentials"))?;
    let layer_digest = sha256_digest(artifact.bytes);
    let config = WasmConfig {
        created: artifact.created.clone(),
        author: None,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![layer_digest.clone()],
        component: Some(WasmComponent {
            exports: artifact.exports.clone(),
            imports: artifact.imports.clone(),
        }),
    };
    let config_bytes = serde_json::to_vec(&config).unwrap_or_default();
    let config_digest = sha256_digest(&config_bytes);
    client
        .push_blob(&parsed, config_bytes.clone(), &config_digest)
        .await
        .map_err(failed("the config"))?;
    client
        .push_blob(&parsed, artifact.bytes.to_vec(), &layer_digest)
        .await
        .map_err(failed("the component"))?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: CONFIG_MEDIA_TYPE.into(),
            digest: config_digest,
            size: config_bytes.len() as i64,
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: LAYER_MEDIA_TYPE.into(),
            digest: layer_digest,
            size: artifact.bytes.len() as i64,
            annotations: Some(
                [(
                    TITLE_ANNOTATION.to_string(),
                    format!("{}.wasm", artifact.name),
                )]
                .into(),
            ),
            ..OciDescriptor::default()
        }],
        annotations: Some(
            [
                (VERSION_ANNOTATION.to_string(), artifact.version.to_string()),
                (CREATED_ANNOTATION.to_string(), artifact.created.clone()),
            ]
            .into(),
        ),
        ..OciImageManifest::default()
    };
    // Our own bytes, so the digest is known without asking the registry.
    let body = serde_json::to_vec(&manifest).unwrap_or_default();
    let digest = sha256_digest(&body);
    client
        .push_manifest_raw(
            &parsed,
            body,
            http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
        )
        .await
        .map_err(failed("the manifest"))?;
    Ok(digest)
}

/// The digest `reference` names now: its own digest, or what its tag points at.
pub async fn resolve(reference: &str, access: &Access) -> Result<String, Error> {
    let parsed = parse_reference(reference)?;
    if let Some(digest) = parsed.digest() {
        return Ok(digest.to_string());
    }
    let (client, auth) = connect(&parsed, access).await?;
    client
        .fetch_manifest_digest(&parsed, &auth)
        .await
        .map_err(|source| Error::Pull {
            reference: reference.into(),
            what: "the manifest digest",
            source,
        })
}

/// Pulls the plugin `reference` names (by digest when it has one), refusing anything but a
/// Wasm artifact of one component no larger than `access.max_plugin_bytes`.
pub async fn pull(reference: &str, access: &Access) -> Result<Pulled, Error> {
    let parsed = parse_reference(reference)?;
    let (client, auth) = connect(&parsed, access).await?;
    let failed = |what| {
        move |source| Error::Pull {
            reference: reference.into(),
            what,
            source,
        }
    };
    let not_wasm = |problem: String| Error::NotAWasmArtifact {
        reference: reference.into(),
        problem,
    };
    let (manifest, digest) = client
        .pull_image_manifest(&parsed, &auth)
        .await
        .map_err(failed("the manifest"))?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(not_wasm(format!(
            "its config is {:?}, not {CONFIG_MEDIA_TYPE:?}",
            manifest.config.media_type
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(not_wasm(format!(
            "it has {} layers, not one {LAYER_MEDIA_TYPE} layer",
            manifest.layers.len()
        )));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(not_wasm(format!(
            "its layer is {:?}, not {LAYER_MEDIA_TYPE:?}",
            layer.media_type
        )));
    }
    let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
    if size > access.max_plugin_bytes {
        return Err(not_wasm(format!(
            "its component is {size} bytes, more than the {} a plugin may be",
            access.max_plugin_bytes
        )));
    }
    let pinned = parsed.clone_with_digest(digest.clone());
    let mut bytes = Bounded::new(access.max_plugin_bytes);
    // Verifies the bytes against the layer's digest.
    client
        .pull_blob(&pinned, layer, &mut bytes)
        .await
        .map_err(failed("the component"))?;
    Ok(Pulled {
        bytes: bytes.into_inner(),
        digest,
        annotations: manifest.annotations.unwrap_or_default(),
    })
}

/// The largest signature payload the host reads (a payload is a few hundred bytes).
const MAX_SIGNATURE_BYTES: u64 = 64 << 10;

/// Whether the registry said the manifest is not there.
fn is_not_found(error: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    match error {
        E::ImageManifestNotFoundError(_) => true,
        E::ServerError { code, .. } => *code == 404,
        E::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

/// The reference of `digest`'s signatures in `reference`'s repository.
fn signature_reference(reference: &Reference, digest: &str) -> Reference {
    Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        crate::signature::signature_tag(digest),
    )
}

/// The cosign signatures stored beside `digest` in `reference`'s repository (none if there
/// is no `.sig` manifest); each payload checked against its layer digest.
pub async fn pull_signatures(
    reference: &str,
    digest: &str,
    access: &Access,
) -> Result<Vec<crate::signature::Stored>, Error> {
    let parsed = parse_reference(reference)?;
    let (client, auth) = connect(&parsed, access).await?;
    signatures_of(&client, &auth, &parsed, reference, digest).await
}

/// [`pull_signatures`] on a connection made already.
async fn signatures_of(
    client: &Client,
    auth: &RegistryAuth,
    parsed: &Reference,
    reference: &str,
    digest: &str,
) -> Result<Vec<crate::signature::Stored>, Error> {
    let signatures = signature_reference(parsed, digest);
    let failed = |what| {
        move |source| Error::Pull {
            reference: format!("{reference} ({})", crate::signature::signature_tag(digest)),
            what,
            source,
        }
    };
    let manifest = match client.pull_image_manifest(&signatures, auth).await {
        Ok((manifest, _)) => manifest,
        Err(error) if is_not_found(&error) => return Ok(Vec::new()),
        Err(error) => return Err(failed("the signatures")(error)),
    };
    let mut stored = Vec::new();
    for layer in &manifest.layers {
        let signature = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::signature::SIGNATURE_ANNOTATION));
        let (true, Some(signature)) = (
            layer.media_type == crate::signature::PAYLOAD_MEDIA_TYPE
                && u64::try_from(layer.size).is_ok_and(|size| size <= MAX_SIGNATURE_BYTES),
            signature,
        ) else {
            continue;
        };
        let mut payload = Bounded::new(MAX_SIGNATURE_BYTES);
        client
            .pull_blob(&signatures, layer, &mut payload)
            .await
            .map_err(failed("a signature payload"))?;
        stored.push(crate::signature::Stored {
            payload: payload.into_inner(),
            signature: signature.clone(),
        });
    }
    Ok(stored)
}

/// Adds `signature` to the signatures of `digest` in `reference`'s repository, as `cosign
/// sign` does (one `.sig` manifest, one layer per signature; an identical one is not added
/// twice).
pub async fn push_signature(
    reference: &str,
    digest: &str,
    signature: crate::signature::Stored,
    access: &Access,
) -> Result<(), Error> {
    let parsed = parse_reference(reference)?;
    let (client, auth) = connect(&parsed, access).await?;
    let mut all = signatures_of(&client, &auth, &parsed, reference, digest).await?;
    if all.contains(&signature) {
        return Ok(());
    }
    all.push(signature);
    let signatures = signature_reference(&parsed, digest);
    let failed = |what| {
        move |source| Error::Push {
            reference: format!("{reference} ({})", crate::signature::signature_tag(digest)),
            what,
            source,
        }
    };
    client
        .auth(&signatures, &auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(failed("the credentials"))?;
    let (config, manifest) = crate::signature::signature_manifest(&all);
    client
        .push_blob(&signatures, config.clone(), &sha256_digest(&config))
        .await
        .map_err(failed("the signature config"))?;
    for stored in &all {
        client
            .push_blob(
                &signatures,
                stored.payload.clone(),
                &sha256_digest(&stored.payload),
            )
            .await
            .map_err(failed("a signature payload"))?;
    }
    client
        .push_manifest_raw(
            &signatures,
            manifest,
            http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
        )
        .await
        .map_err(failed("the signature manifest"))?;
    Ok(())
}

/// `registry/repository` of a parsed reference: what a cosign payload names.
pub fn repository_name(reference: &str) -> Result<String, Error> {
    let parsed = parse_reference(reference)?;
    Ok(format!("{}/{}", parsed.registry(), parsed.repository()))
}

/// A buffer that refuses to grow past a limit: the registry's stream is not trusted to end
/// where the manifest said.
struct Bounded {
    bytes: Vec<u8>,
    limit: u64,
}

impl Bounded {
    fn new(limit: u64) -> Self {
        Bounded {
            bytes: Vec::new(),
            limit,
        }
    }

    fn into_inner(self) -> Vec<u8> {
        self.bytes
    }
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if (self.bytes.len() + buf.len()) as u64 > self.limit {
            return Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes a plugin may be",
                self.limit
            ))));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// `SOURCE_DATE_EPOCH` as RFC 3339, else now: what `created` says of an artifact.
pub fn created_now() -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok());
    let at = match seconds {
        Some(seconds) => k8s_openapi::jiff::Timestamp::from_second(seconds).ok(),
        None => None,
    }
    .unwrap_or_else(k8s_openapi::jiff::Timestamp::now);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_that_does_not_parse_is_named_in_the_error() {
        let error = parse_reference("Not A Reference").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("\"Not A Reference\" is not an OCI reference"),
            "{error}"
        );
    }

    #[test]
    fn the_password_is_never_printed() {
        let credentials = Credentials::Basic {
            username: "alice".into(),
            password: "s3cret".into(),
        };
        assert_eq!(format!("{credentials:?}"), "Basic(alice)");
    }

    #[tokio::test]
    async fn a_docker_config_json_gives_the_registry_its_credentials() {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:pa:ss");
        let json = serde_json::json!({"auths": {"127.0.0.1:5000": {"auth": auth}}});
        let credentials = Credentials::DockerConfigJson {
            json: serde_json::to_vec(&json).unwrap(),
            from: "Secret default/registry".into(),
        };
        let RegistryAuth::Basic(user, password) =
            credentials.for_registry("127.0.0.1:5000").await.unwrap()
        else {
            panic!("not basic auth");
        };
        assert_eq!((user.as_str(), password.as_str()), ("alice", "pa:ss"));
        assert!(matches!(
            credentials.for_registry("elsewhere.example").await.unwrap(),
            RegistryAuth::Anonymous
        ));
    }

    #[test]
    fn a_bounded_buffer_refuses_more_than_its_limit() {
        use tokio::io::AsyncWriteExt;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut buffer = Bounded::new(4);
            buffer.write_all(b"abcd").await.unwrap();
            assert!(buffer.write_all(b"e").await.is_err());
        });
    }
}
