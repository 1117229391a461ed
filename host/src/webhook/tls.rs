//! The webhooks' certificates: the host's own CA, kept in a Secret every replica shares, and a
//! serving certificate per replica signed by it and renewed well before it expires; or a
//! certificate someone else issues (cert-manager), read from a mounted Secret and reloaded
//! when it is renewed.
//!
//! The API server trusts the CA (the `caBundle` of every webhook entry), never a serving
//! certificate itself, so a replica renews its certificate on its own and nothing else changes.
//! The CA lives ten years (as the certificates of controller-runtime's and Gatekeeper's
//! cert-controller do) and is made once, by whichever replica comes first: a replica that finds
//! it made by another uses it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::Error;

/// How long the CA is valid.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The annotation of the CA Secret saying until when the CA is valid (RFC 3339).
const CA_NOT_AFTER_ANNOTATION: &str = "operator-host.dev/ca-not-after";
/// Serving certificates start this long before they are made: the API server's clock may be
/// behind the host's.
const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// The CA: its certificate (the `caBundle`) and key, as PEM.
#[derive(Clone)]
pub struct Ca {
    pub cert_pem: String,
    key_pem: String,
}

impl Ca {
    /// A new CA named `common_name`, valid for ten years, kept nowhere (the benchmark's).
    pub fn self_signed(common_name: &str) -> Result<Self, Error> {
        Self::generate(common_name).map(|(ca, _)| ca)
    }

    /// A new CA, valid for [`CA_VALIDITY`] from now.
    fn generate(common_name: &str) -> Result<(Self, OffsetDateTime), Error> {
        let key = KeyPair::generate().map_err(issue)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, common_name);
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - CLOCK_SKEW;
        params.not_after = now + CA_VALIDITY;
        let cert = params.self_signed(&key).map_err(issue)?;
        Ok((
            Ca {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            },
            params.not_after,
        ))
    }

    /// A serving certificate for `names` (DNS names or IP addresses), valid for `validity`.
    fn issue(&self, names: &[String], validity: Duration) -> Result<CertifiedKey, Error> {
        let ca_key = KeyPair::from_pem(&self.key_pem).map_err(issue)?;
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, ca_key).map_err(issue)?;
        let key = KeyPair::generate().map_err(issue)?;
        let mut params = CertificateParams::default();
        params.subject_alt_names = names
            .iter()
            .map(|name| match name.parse() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => name.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .map_err(issue)?;
        let mut subject = DistinguishedName::new();
        subject.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.distinguished_name = subject;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let now = OffsetDateTime::now_utc();
        params.not_before = now - CLOCK_SKEW;
        params.not_after = now + validity;
        let cert = params.signed_by(&key, &issuer).map_err(issue)?;
        let signing_key = rustls::crypto::ring::sign::any_supported_type(&PrivateKeyDer::Pkcs8(
            PrivatePkcs8KeyDer::from(key.serialize_der()),
        ))
        .map_err(Error::Tls)?;
        let ca_der = pem_der(&self.cert_pem)?;
        Ok(CertifiedKey::new(
            vec![cert.der().clone(), ca_der],
            signing_key,
        ))
    }
}

fn issue(error: rcgen::Error) -> Error {
    Error::IssueCertificate(error.to_string())
}

/// The DER of the first certificate of `pem`.
fn pem_der(pem: &str) -> Result<CertificateDer<'static>, Error> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| Error::IssueCertificate(format!("the CA certificate is not PEM: {e}")))
}

/// The CA of the Secret `namespace/name`, made and stored there first if there is none.
pub async fn load_or_create_ca(client: &Client, namespace: &str, name: &str) -> Result<Ca, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret_error = |source| Error::CaSecret {
        secret: format!("{namespace}/{name}"),
        source,
    };
    if let Some(secret) = secrets.get_opt(name).await.map_err(secret_error)? {
        return ca_of(&secret, namespace);
    }
    let (ca, not_after) = Ca::generate(&format!("operator-host webhooks ({namespace}/{name})"))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "operator-host".to_string(),
            )])),
            annotations: Some(BTreeMap::from([(
                CA_NOT_AFTER_ANNOTATION.to_string(),
                not_after
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default(),
            )])),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(BTreeMap::from([
            (
                "tls.crt".to_string(),
                ByteString(ca.cert_pem.clone().into_bytes()),
            ),
            (
                "tls.key".to_string(),
                ByteString(ca.key_pem.clone().into_bytes()),
            ),
        ])),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %format!("{namespace}/{name}"), "made the webhooks' CA");
            Ok(ca)
        }
        // Another replica made it first: everyone uses that one.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = secrets.get(name).await.map_err(secret_error)?;
            ca_of(&secret, namespace)
        }
        Err(source) => Err(secret_error(source)),
    }
}

/// The CA a Secret holds.
fn ca_of(secret: &Secret, namespace: &str) -> Result<Ca, Error> {
    let text = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
            .ok_or_else(|| Error::CaSecretContent {
                secret: format!("{namespace}/{}", secret.name_any()),
                problem: format!("it has no {key} as PEM text"),
            })
    };
    let ca = Ca {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
    };
    // Checked now, not at the first renewal: a Secret someone else wrote is refused at start.
    KeyPair::from_pem(&ca.key_pem).map_err(|e| Error::CaSecretContent {
        secret: format!("{namespace}/{}", secret.name_any()),
        problem: format!("tls.key is not a private key: {e}"),
    })?;
    Ok(ca)
}

/// The serving certificate this replica presents, swapped whole when renewed.
#[derive(Debug)]
pub struct ServingCert {
    current: ArcSwap<CertifiedKey>,
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl ServingCert {
    /// A certificate for `names` from `ca`, and the task that renews it after two thirds of
    /// `validity` (until the returned certificate is dropped).
    pub fn start(ca: Ca, names: Vec<String>, validity: Duration) -> Result<Arc<Self>, Error> {
        let serving = Arc::new(ServingCert {
            current: ArcSwap::from_pointee(ca.issue(&names, validity)?),
        });
        let renewing = Arc::downgrade(&serving);
        tokio::spawn(async move {
            let period = validity * 2 / 3;
            loop {
                tokio::time::sleep(period).await;
                let Some(serving) = renewing.upgrade() else {
                    return;
                };
                match ca.issue(&names, validity) {
                    Ok(renewed) => {
                        serving.current.store(Arc::new(renewed));
                        tracing::info!(valid_for = ?validity, "renewed the webhooks' serving certificate");
                    }
                    // The current one is still valid for a third of its life: try again soon.
                    Err(error) => {
                        tracing::error!(%error, "cannot renew the webhooks' serving certificate");
                        tokio::time::sleep(period / 10).await;
                    }
                }
            }
        });
        Ok(serving)
    }
}

/// The files of a mounted `kubernetes.io/tls` Secret as cert-manager writes it: the serving
/// certificate (its chain), its key, and the CA the API server must trust.
const CERT_FILE: &str = "tls.crt";
const KEY_FILE: &str = "tls.key";
const CA_FILE: &str = "ca.crt";
/// How often a certificate directory is read again. The kubelet updates a mounted Secret
/// within about a minute of its change, and cert-manager renews well before expiry (a third of
/// the duration by default), so checking often only shortens the time a renewal takes.
const CERT_DIR_PERIOD: Duration = Duration::from_secs(10);
/// How long a CA replaced in a certificate directory stays in the registered bundle beside the
/// new one: the other replicas' kubelets update their copies of the Secret up to a minute or
/// two later, and until then they serve certificates of the old CA.
const REPLACED_CA_GRACE: Duration = Duration::from_secs(5 * 60);

/// The content of a certificate directory, as read.
#[derive(PartialEq, Eq)]
struct CertFiles {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Vec<u8>,
}

impl CertFiles {
    fn read(dir: &Path) -> Result<Self, Error> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read(&path).map_err(|e| Error::CertDir {
                dir: dir.to_path_buf(),
                problem: format!("cannot read {}: {e}", path.display()),
            })
        };
        Ok(CertFiles {
            cert: read(CERT_FILE)?,
            key: read(KEY_FILE)?,
            ca: read(CA_FILE)?,
        })
    }

    /// The serving certificate and the CA bundle (PEM), checked to be usable.
    fn parse(&self, dir: &Path) -> Result<(CertifiedKey, String), Error> {
        use rustls::pki_types::pem::PemObject;
        let problem = |problem: String| Error::CertDir {
            dir: dir.to_path_buf(),
            problem,
        };
        let chain = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| problem(format!("{CERT_FILE} is not PEM certificates: {e}")))?;
        if chain.is_empty() {
            return Err(problem(format!("{CERT_FILE} holds no certificate")));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key)
            .map_err(|e| problem(format!("{KEY_FILE} is not a PEM private key: {e}")))?;
        let signing_key = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| problem(format!("{KEY_FILE} is not a key rustls signs with: {e}")))?;
        let certified = CertifiedKey::new(chain, signing_key);
        certified
            .keys_match()
            .map_err(|e| problem(format!("{KEY_FILE} is not the key of {CERT_FILE}: {e}")))?;
        let ca = String::from_utf8(self.ca.clone())
            .ok()
            .filter(|pem| {
                CertificateDer::pem_slice_iter(pem.as_bytes())
                    .next()
                    .is_some_and(|first| first.is_ok())
            })
            .ok_or_else(|| {
                problem(format!(
                    "{CA_FILE} is not a PEM certificate: the API server must be told the CA \
                     that signed {CERT_FILE} (cert-manager writes it for CA and self-signed \
                     issuers)"
                ))
            })?;
        Ok((certified, ca))
    }
}

/// Why `certified` would not be accepted for `names` by a client trusting `ca` (PEM), if it
/// would not: logged, not refused, as the API server's own verifier is the one that decides.
fn verification_problem(certified: &CertifiedKey, ca: &str, names: &[String]) -> Option<String> {
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()).flatten() {
        if let Err(e) = roots.add(cert) {
            return Some(format!("{CA_FILE} holds a certificate that is no CA: {e}"));
        }
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| e.to_string())
    .ok()?;
    names.iter().find_map(|name| {
        let server_name = rustls::pki_types::ServerName::try_from(name.as_str()).ok()?;
        verifier
            .verify_server_cert(
                &certified.cert[0],
                &certified.cert[1..],
                &server_name,
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .err()
            .map(|e| format!("{CERT_FILE} is not valid for {name} under {CA_FILE}: {e}"))
    })
}

impl ServingCert {
    /// The certificate of the directory `dir` (`tls.crt`, `tls.key`, `ca.crt`: a mounted
    /// Secret of cert-manager's), the CA bundle to register, and the task that reloads both
    /// when the files change (until the returned certificate is dropped). A change that does
    /// not load (a half-written update) keeps the certificate served until the next one does.
    /// A new CA is registered at once together with the one it replaces, which leaves the
    /// bundle after [`REPLACED_CA_GRACE`]. A certificate the API server would not accept for
    /// `names` (the endpoint's) is served, with a warning saying why.
    pub fn from_dir(
        dir: PathBuf,
        names: Vec<String>,
    ) -> Result<(Arc<Self>, watch::Receiver<String>), Error> {
        let mut loaded = CertFiles::read(&dir)?;
        let (certified, mut ca) = loaded.parse(&dir)?;
        if let Some(problem) = verification_problem(&certified, &ca, &names) {
            tracing::warn!(dir = %dir.display(), %problem, "the webhooks' certificate will be refused");
        }
        let serving = Arc::new(ServingCert {
            current: ArcSwap::from_pointee(certified),
        });
        let (bundle, bundle_changes) = watch::channel(ca.clone());
        let reloading = Arc::downgrade(&serving);
        tokio::spawn(async move {
            let mut replaced: Option<(String, tokio::time::Instant)> = None;
            loop {
                tokio::time::sleep(CERT_DIR_PERIOD).await;
                let Some(serving) = reloading.upgrade() else {
                    return;
                };
                let reloaded = CertFiles::read(&dir).and_then(|files| {
                    if files == loaded {
                        return Ok(None);
                    }
                    let parsed = files.parse(&dir)?;
                    Ok(Some((files, parsed)))
                });
                match reloaded {
                    Ok(None) => {}
                    Ok(Some((files, (certified, new_ca)))) => {
                        if let Some(problem) = verification_problem(&certified, &new_ca, &names) {
                            tracing::warn!(dir = %dir.display(), %problem, "the webhooks' certificate will be refused");
                        }
                        serving.current.store(Arc::new(certified));
                        if new_ca != ca {
                            replaced = Some((
                                std::mem::replace(&mut ca, new_ca),
                                tokio::time::Instant::now(),
                            ));
                        }
                        loaded = files;
                        tracing::info!(dir = %dir.display(), "reloaded the webhooks' certificate");
                    }
                    Err(error) => {
                        tracing::warn!(%error, "keeping the webhooks' certificate served");
                    }
                }
                if replaced
                    .as_ref()
                    .is_some_and(|(_, since)| since.elapsed() >= REPLACED_CA_GRACE)
                {
                    replaced = None;
                }
                let wanted = match &replaced {
                    Some((old, _)) => format!("{}\n{old}", ca.trim_end()),
                    None => ca.clone(),
                };
                bundle.send_if_modified(|current| {
                    let changed = *current != wanted;
                    *current = wanted;
                    changed
                });
            }
        });
        Ok((serving, bundle_changes))
    }
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    use super::*;

    #[test]
    fn a_serving_certificate_chains_to_the_ca_and_names_what_it_serves() {
        let (ca, _) = Ca::generate("test").unwrap();
        let served = ca
            .issue(
                &["127.0.0.1".into(), "hooks.system.svc".into()],
                Duration::from_secs(60),
            )
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pem_der(&ca.cert_pem).unwrap()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        for name in ["127.0.0.1", "hooks.system.svc"] {
            verifier
                .verify_server_cert(
                    &served.cert[0],
                    &served.cert[1..],
                    &rustls::pki_types::ServerName::try_from(name).unwrap(),
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(
            verifier
                .verify_server_cert(
                    &served.cert[0],
                    &served.cert[1..],
                    &rustls::pki_types::ServerName::try_from("other.svc").unwrap(),
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .is_err()
        );
    }

    /// A certificate directory as cert-manager's CA issuer fills a Secret, from `ca`.
    fn cert_files(ca: &Ca) -> CertFiles {
        let ca_key = KeyPair::from_pem(&ca.key_pem).unwrap();
        let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["hooks.system.svc".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        CertFiles {
            cert: cert.pem().into_bytes(),
            key: key.serialize_pem().into_bytes(),
            ca: ca.cert_pem.clone().into_bytes(),
        }
    }

    #[test]
    fn a_certificate_directory_gives_the_certificate_and_the_ca_to_register() {
        let (ca, _) = Ca::generate("test").unwrap();
        let dir = Path::new("/certs");
        let (certified, bundle) = cert_files(&ca).parse(dir).unwrap();
        assert_eq!(bundle, ca.cert_pem);
        assert_eq!(certified.cert.len(), 1);

        let problem = |files: CertFiles| match files.parse(dir) {
            Err(Error::CertDir { problem, .. }) => problem,
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("a bad directory was accepted"),
        };
        let other_key = KeyPair::generate().unwrap().serialize_pem().into_bytes();
        let mismatched = CertFiles {
            key: other_key,
            ..cert_files(&ca)
        };
        assert!(
            problem(mismatched).starts_with("tls.key is not the key of tls.crt"),
            "mismatched key"
        );
        let no_ca = CertFiles {
            ca: Vec::new(),
            ..cert_files(&ca)
        };
        assert!(problem(no_ca).starts_with("ca.crt is not a PEM certificate"));
        let not_pem = CertFiles {
            cert: b"not a certificate".to_vec(),
            ..cert_files(&ca)
        };
        assert_eq!(problem(not_pem), "tls.crt holds no certificate");
    }

    #[test]
    fn a_certificate_is_checked_against_the_ca_and_the_names_it_must_hold() {
        let (ca, _) = Ca::generate("test").unwrap();
        let (certified, bundle) = cert_files(&ca).parse(Path::new("/certs")).unwrap();
        assert_eq!(
            verification_problem(&certified, &bundle, &["hooks.system.svc".into()]),
            None
        );
        let wrong_name = verification_problem(&certified, &bundle, &["other.system.svc".into()]);
        assert!(
            wrong_name.is_some_and(|p| p.starts_with("tls.crt is not valid for other.system.svc")),
        );
        let (other_ca, _) = Ca::generate("other").unwrap();
        assert!(
            verification_problem(&certified, &other_ca.cert_pem, &["hooks.system.svc".into()])
                .is_some()
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CERT_FILE), "x").unwrap();
        let error = CertFiles::read(dir.path()).err().unwrap().to_string();
        assert!(error.contains("tls.key"), "{error}");
        assert!(
            error.contains("as a mounted Secret of cert-manager's"),
            "{error}"
        );
    }
}
