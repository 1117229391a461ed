//! The webhooks' certificates: the host's own CA, kept in a Secret every replica shares and
//! replaced before it expires, and a serving certificate per replica signed by it and renewed
//! well before it expires; or a certificate someone else issues (cert-manager), read from a
//! mounted Secret and reloaded when it is renewed.
//!
//! The API server trusts the CA (the `caBundle` of every webhook entry), never a serving
//! certificate itself, so a replica renews its certificate on its own and nothing else changes.
//! The CA lives ten years by default (as the CAs of controller-runtime's and Gatekeeper's
//! cert-controller do) and is made once, by whichever replica comes first: a replica that finds
//! it made by another uses it. With a third of its life left, the first replica to notice makes
//! its successor: the Secret's bundle (`ca.crt`) trusts both at once, and every replica signs
//! with the new one only after a grace in which the leader registers the new bundle, so no
//! replica ever serves a certificate the API server does not trust yet. The old CA leaves the
//! bundle when it expires.

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

/// The annotation of the CA Secret saying until when its signing CA is valid (RFC 3339), for
/// people: the host reads the certificate itself.
const CA_NOT_AFTER_ANNOTATION: &str = "operator-host.dev/ca-not-after";
/// The annotation of the CA Secret saying when its signing CA replaced the one before (RFC
/// 3339): the replicas sign with it a grace after that.
const CA_ROTATED_AT_ANNOTATION: &str = "operator-host.dev/ca-rotated-at";
/// The Secret's keys: the signing CA, its key, every CA the API server is to trust, and the CA
/// the signing one replaced (the replicas sign with it until the grace after a rotation ends,
/// also one that starts meanwhile).
const CA_CERT_KEY: &str = "tls.crt";
const CA_KEY_KEY: &str = "tls.key";
const CA_BUNDLE_KEY: &str = "ca.crt";
const PREVIOUS_CERT_KEY: &str = "previous.crt";
const PREVIOUS_KEY_KEY: &str = "previous.key";
/// Serving certificates start this long before they are made: the API server's clock may be
/// behind the host's.
const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// A CA: its certificate (the `caBundle`) and key, as PEM.
#[derive(Clone)]
pub struct Ca {
    pub cert_pem: String,
    key_pem: String,
    /// When the certificate expires: no certificate it signs outlives it.
    not_after: OffsetDateTime,
}

impl Ca {
    /// A new CA named `common_name`, valid for ten years, kept nowhere (the benchmark's).
    pub fn self_signed(common_name: &str) -> Result<Self, Error> {
        Self::generate(common_name, Duration::from_secs(10 * 365 * 24 * 3600))
    }

    /// A new CA for the host's CA Secret `secret` (`namespace/name`), valid for `validity`.
    fn of_secret(secret: &str, validity: Duration) -> Result<Self, Error> {
        Self::generate(&format!("operator-host webhooks ({secret})"), validity)
    }

    /// A new CA, valid for `validity` from now.
    fn generate(common_name: &str, validity: Duration) -> Result<Self, Error> {
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
        params.not_after = now + validity;
        let cert = params.self_signed(&key).map_err(issue)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            not_after: params.not_after,
        })
    }

    /// A serving certificate for `names` (DNS names or IP addresses), valid for `validity` or
    /// until the CA expires if that is sooner; and how long it is valid.
    fn issue(
        &self,
        names: &[String],
        validity: Duration,
    ) -> Result<(CertifiedKey, Duration), Error> {
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
        params.not_after = (now + validity).min(self.not_after);
        let cert = params.signed_by(&key, &issuer).map_err(issue)?;
        let signing_key = rustls::crypto::ring::sign::any_supported_type(&PrivateKeyDer::Pkcs8(
            PrivatePkcs8KeyDer::from(key.serialize_der()),
        ))
        .map_err(Error::Tls)?;
        let ca_der = pem_der(&self.cert_pem)?;
        let lifetime = (params.not_after - now)
            .try_into()
            .unwrap_or(Duration::ZERO);
        Ok((
            CertifiedKey::new(vec![cert.der().clone(), ca_der], signing_key),
            lifetime,
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

/// When the (first) certificate of `pem` expires.
fn not_after(pem: &str) -> Result<OffsetDateTime, String> {
    let der = pem_der(pem).map_err(|e| e.to_string())?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| format!("the certificate does not parse: {e}"))?;
    OffsetDateTime::from_unix_timestamp(cert.validity().not_after.timestamp())
        .map_err(|e| format!("its expiry is out of range: {e}"))
}

/// The certificates of a PEM bundle, each as PEM text.
fn pem_certificates(bundle: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    bundle
        .split_inclusive(END)
        .filter(|block| block.contains(END))
        .map(|block| format!("{}\n", block.trim_start()))
        .collect()
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The host's CA as its Secret holds it.
#[derive(Clone)]
struct SharedCa {
    /// The CA new serving certificates are signed with (after the grace of a rotation).
    signing: Ca,
    /// The CA `signing` replaced, if it replaced one.
    previous: Option<Ca>,
    /// Every CA the API server trusts (PEM each), the signing one first.
    trusted: Vec<String>,
    /// When `signing` replaced the CA before it, if it did.
    rotated_at: Option<OffsetDateTime>,
}

impl SharedCa {
    /// A first CA, for the Secret `secret`.
    fn first(secret: &str, validity: Duration) -> Result<Self, Error> {
        let signing = Ca::of_secret(secret, validity)?;
        Ok(SharedCa {
            trusted: vec![signing.cert_pem.clone()],
            signing,
            previous: None,
            rotated_at: None,
        })
    }

    /// This CA's successor for the Secret `secret`: a new signing CA, trusted beside the CAs
    /// trusted now that are still valid.
    fn rotated(&self, secret: &str, validity: Duration) -> Result<Self, Error> {
        let signing = Ca::of_secret(secret, validity)?;
        let mut trusted = vec![signing.cert_pem.clone()];
        trusted.extend(self.unexpired().cloned());
        Ok(SharedCa {
            signing,
            previous: Some(self.signing.clone()),
            trusted,
            rotated_at: Some(OffsetDateTime::now_utc()),
        })
    }

    /// The trusted CAs that have not expired.
    fn unexpired(&self) -> impl Iterator<Item = &String> {
        let now = OffsetDateTime::now_utc();
        self.trusted
            .iter()
            .filter(move |pem| not_after(pem).is_ok_and(|expiry| expiry > now))
    }

    /// The CA bundle to register now: the trusted CAs not expired.
    fn bundle(&self) -> String {
        self.unexpired().map(String::as_str).collect()
    }

    /// The CA of `secret` (in `namespace`).
    fn of(secret: &Secret, namespace: &str) -> Result<Self, Error> {
        let name = format!("{namespace}/{}", secret.name_any());
        let problem = |problem: String| Error::CaSecretContent {
            secret: name.clone(),
            problem,
        };
        let data = secret.data.as_ref();
        let text = |key: &str| {
            data.and_then(|data| data.get(key))
                .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
        };
        let ca = |cert_key: &str, key_key: &str| -> Result<Ca, Error> {
            let cert_pem = text(cert_key)
                .ok_or_else(|| problem(format!("it has no {cert_key} as PEM text")))?;
            let key_pem =
                text(key_key).ok_or_else(|| problem(format!("it has no {key_key} as PEM text")))?;
            // Checked now, not at the first renewal: a Secret someone else wrote is refused
            // at start.
            KeyPair::from_pem(&key_pem)
                .map_err(|e| problem(format!("{key_key} is not a private key: {e}")))?;
            let not_after =
                not_after(&cert_pem).map_err(|e| problem(format!("{cert_key}: {e}")))?;
            Ok(Ca {
                cert_pem,
                key_pem,
                not_after,
            })
        };
        let signing = ca(CA_CERT_KEY, CA_KEY_KEY)?;
        let previous = match text(PREVIOUS_CERT_KEY) {
            Some(_) => Some(ca(PREVIOUS_CERT_KEY, PREVIOUS_KEY_KEY)?),
            None => None,
        };
        // A Secret of an older host (or someone else's) has no bundle: its CA is all there is.
        let mut trusted = pem_certificates(&text(CA_BUNDLE_KEY).unwrap_or_default());
        if !trusted.contains(&signing.cert_pem) {
            trusted.insert(0, signing.cert_pem.clone());
        }
        let rotated_at = secret
            .annotations()
            .get(CA_ROTATED_AT_ANNOTATION)
            .and_then(|at| {
                OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
            });
        Ok(SharedCa {
            signing,
            previous,
            trusted,
            rotated_at,
        })
    }

    /// The Secret `namespace/name` holding this CA.
    fn secret(&self, namespace: &str, name: &str) -> Secret {
        let mut annotations = BTreeMap::from([(
            CA_NOT_AFTER_ANNOTATION.to_string(),
            rfc3339(self.signing.not_after),
        )]);
        if let Some(at) = self.rotated_at {
            annotations.insert(CA_ROTATED_AT_ANNOTATION.to_string(), rfc3339(at));
        }
        let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
        let mut data = BTreeMap::from([
            (CA_CERT_KEY.to_string(), bytes(&self.signing.cert_pem)),
            (CA_KEY_KEY.to_string(), bytes(&self.signing.key_pem)),
            (CA_BUNDLE_KEY.to_string(), bytes(&self.trusted.concat())),
        ]);
        if let Some(previous) = &self.previous {
            data.insert(PREVIOUS_CERT_KEY.to_string(), bytes(&previous.cert_pem));
            data.insert(PREVIOUS_KEY_KEY.to_string(), bytes(&previous.key_pem));
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "operator-host".to_string(),
                )])),
                annotations: Some(annotations),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".to_string()),
            data: Some(data),
            ..Default::default()
        }
    }
}

/// When the host's CA is replaced, and how the replicas follow.
#[derive(Debug, Clone, Copy)]
struct CaRotation {
    /// How long a new CA is valid.
    validity: Duration,
}

impl CaRotation {
    /// A CA with less than this left is replaced.
    fn renew_before(self) -> Duration {
        self.validity / 3
    }

    /// How often each replica reads the Secret again.
    fn period(self) -> Duration {
        (self.validity / 20).min(Duration::from_secs(60))
    }

    /// How long after a rotation the replicas go on signing with the CA before: time for the
    /// leader to read the Secret and register the new bundle (at least two periods).
    fn grace(self) -> Duration {
        (self.validity / 6).min(Duration::from_secs(5 * 60))
    }

    fn is_due(self, ca: &Ca) -> bool {
        let left = ca.not_after - OffsetDateTime::now_utc();
        left < self.renew_before()
    }

    /// The CA the replicas sign with now: `shared.signing`, or during the grace after it
    /// replaced another, that one.
    fn signing_now(self, shared: &SharedCa) -> &Ca {
        let in_grace = shared
            .rotated_at
            .is_some_and(|at| OffsetDateTime::now_utc() < at + self.grace());
        match &shared.previous {
            Some(previous) if in_grace => previous,
            _ => &shared.signing,
        }
    }
}

/// The host's CA of the Secret `namespace/name`, made and stored there first if there is none,
/// and kept: replaced before it expires by whichever replica notices first, read again
/// periodically. Returns the CA to sign serving certificates with and the CA bundle to register,
/// each changing as the CA is replaced (until both receivers are dropped).
pub async fn keep_own_ca(
    client: &Client,
    namespace: &str,
    name: &str,
    validity: Duration,
) -> Result<(watch::Receiver<Ca>, watch::Receiver<String>), Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let rotation = CaRotation { validity };
    let shared = load_or_create_ca(&secrets, namespace, name, rotation).await?;
    let (signing_tx, signing) = watch::channel(rotation.signing_now(&shared).clone());
    let (bundle_tx, bundle) = watch::channel(shared.bundle());
    let (namespace, name) = (namespace.to_string(), name.to_string());
    tokio::spawn(async move {
        let mut known = shared;
        loop {
            tokio::time::sleep(rotation.period()).await;
            if signing_tx.is_closed() && bundle_tx.is_closed() {
                return;
            }
            match keep_ca_once(&secrets, &namespace, &name, rotation, &known).await {
                Ok(shared) => known = shared,
                Err(error) => {
                    tracing::warn!(%error, "cannot check the webhooks' CA; keeping the one known");
                }
            }
            bundle_tx.send_if_modified(|current| {
                let bundle = known.bundle();
                let changed = *current != bundle;
                *current = bundle;
                changed
            });
            let wanted = rotation.signing_now(&known);
            if signing_tx.borrow().cert_pem != wanted.cert_pem {
                tracing::info!(
                    secret = %format!("{namespace}/{name}"),
                    not_after = %rfc3339(wanted.not_after),
                    "signing the webhooks' certificates with the new CA"
                );
                signing_tx.send_replace(wanted.clone());
            }
        }
    });
    Ok((signing, bundle))
}

/// The CA of the Secret `namespace/name` as it is now: read, made first if there is none.
async fn load_or_create_ca(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
    rotation: CaRotation,
) -> Result<SharedCa, Error> {
    let secret_error = |source| Error::CaSecret {
        secret: format!("{namespace}/{name}"),
        source,
    };
    if let Some(secret) = secrets.get_opt(name).await.map_err(secret_error)? {
        return SharedCa::of(&secret, namespace);
    }
    let shared = SharedCa::first(&format!("{namespace}/{name}"), rotation.validity)?;
    match secrets
        .create(&PostParams::default(), &shared.secret(namespace, name))
        .await
    {
        Ok(_) => {
            tracing::info!(secret = %format!("{namespace}/{name}"), "made the webhooks' CA");
            Ok(shared)
        }
        // Another replica made it first: everyone uses that one.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = secrets.get(name).await.map_err(secret_error)?;
            SharedCa::of(&secret, namespace)
        }
        Err(source) => Err(secret_error(source)),
    }
}

/// One look at the Secret: its CA, replaced first if it is due (or made again, trusting the
/// CA `known` too, if someone deleted the Secret).
async fn keep_ca_once(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
    rotation: CaRotation,
    known: &SharedCa,
) -> Result<SharedCa, Error> {
    let secret_name = format!("{namespace}/{name}");
    let secret_error = |source| Error::CaSecret {
        secret: secret_name.clone(),
        source,
    };
    let stored = secrets.get_opt(name).await.map_err(secret_error)?;
    let current = match &stored {
        Some(secret) => SharedCa::of(secret, namespace)?,
        None => known.clone(),
    };
    if stored.is_some() && !rotation.is_due(&current.signing) {
        return Ok(current);
    }
    let successor = current.rotated(&secret_name, rotation.validity)?;
    let mut secret = successor.secret(namespace, name);
    let written = match stored {
        // Only over the version read: of two replicas rotating at once, one wins.
        Some(stored) => {
            secret.metadata.resource_version = stored.resource_version();
            secrets.replace(name, &PostParams::default(), &secret).await
        }
        None => secrets.create(&PostParams::default(), &secret).await,
    };
    match written {
        Ok(_) => {
            tracing::info!(
                secret = %secret_name,
                not_after = %rfc3339(successor.signing.not_after),
                "made the webhooks' new CA; trusted beside the old one until that expires"
            );
            Ok(successor)
        }
        // Another replica rotated it first: its CA is read at the next look.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(current),
        Err(source) => Err(secret_error(source)),
    }
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
    /// A certificate for `names` from the CA `signing` holds, and the task that renews it
    /// after two thirds of its life (`validity`, or less when the CA expires sooner) and at once
    /// when the CA changes (until the returned certificate is dropped).
    pub fn start(
        mut signing: watch::Receiver<Ca>,
        names: Vec<String>,
        validity: Duration,
    ) -> Result<Arc<Self>, Error> {
        let (certified, mut lifetime) = signing.borrow_and_update().issue(&names, validity)?;
        let serving = Arc::new(ServingCert {
            current: ArcSwap::from_pointee(certified),
        });
        let renewing = Arc::downgrade(&serving);
        tokio::spawn(async move {
            let mut retry = None;
            loop {
                // A CA about to expire gives short certificates: never renew in a busy loop.
                let wait = retry
                    .unwrap_or(lifetime * 2 / 3)
                    .max(Duration::from_secs(1));
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    // A fixed CA (its sender gone) never changes: only the timer renews.
                    Ok(()) = signing.changed() => {}
                }
                let Some(serving) = renewing.upgrade() else {
                    return;
                };
                let ca = signing.borrow_and_update().clone();
                match ca.issue(&names, validity) {
                    Ok((renewed, valid_for)) => {
                        serving.current.store(Arc::new(renewed));
                        lifetime = valid_for;
                        retry = None;
                        tracing::info!(?valid_for, "renewed the webhooks' serving certificate");
                    }
                    // The current one is still valid for a third of its life: try again soon.
                    Err(error) => {
                        tracing::error!(%error, "cannot renew the webhooks' serving certificate");
                        retry = Some(lifetime / 15);
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
        let ca = Ca::self_signed("test").unwrap();
        let served = ca
            .issue(
                &["127.0.0.1".into(), "hooks.system.svc".into()],
                Duration::from_secs(60),
            )
            .unwrap()
            .0;
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

    #[test]
    fn a_serving_certificate_never_outlives_its_ca() {
        let ca = Ca::generate("short", Duration::from_secs(30)).unwrap();
        let (_, lifetime) = ca
            .issue(&["127.0.0.1".into()], Duration::from_secs(3600))
            .unwrap();
        assert!(lifetime <= Duration::from_secs(30), "{lifetime:?}");
        let (_, lifetime) = Ca::self_signed("long")
            .unwrap()
            .issue(&["127.0.0.1".into()], Duration::from_secs(3600))
            .unwrap();
        assert_eq!(lifetime.as_secs().div_ceil(10) * 10, 3600);
    }

    #[test]
    fn the_ca_secret_round_trips_and_a_successor_is_trusted_beside_it() {
        let first = SharedCa::first("ns/hooks-webhook-ca", Duration::from_secs(3600)).unwrap();
        let secret = first.secret("ns", "hooks-webhook-ca");
        let read = SharedCa::of(&secret, "ns").unwrap();
        assert_eq!(read.signing.cert_pem, first.signing.cert_pem);
        assert_eq!(read.trusted, vec![first.signing.cert_pem.clone()]);
        assert!(read.rotated_at.is_none());
        assert_eq!(
            (read.signing.not_after - first.signing.not_after).whole_seconds(),
            0
        );

        let successor = read
            .rotated("ns/hooks-webhook-ca", Duration::from_secs(3600))
            .unwrap();
        let read = SharedCa::of(&successor.secret("ns", "hooks-webhook-ca"), "ns").unwrap();
        assert_ne!(read.signing.cert_pem, first.signing.cert_pem);
        assert_eq!(
            read.trusted,
            vec![
                read.signing.cert_pem.clone(),
                first.signing.cert_pem.clone()
            ]
        );
        assert!(read.rotated_at.is_some());
        assert_eq!(
            read.previous.as_ref().map(|ca| ca.cert_pem.as_str()),
            Some(first.signing.cert_pem.as_str())
        );
        assert_eq!(
            read.bundle(),
            format!("{}{}", read.signing.cert_pem, first.signing.cert_pem)
        );
    }

    #[test]
    fn an_expired_ca_leaves_the_bundle() {
        let expired = Ca::generate("expired", Duration::from_secs(1)).unwrap();
        let current = Ca::self_signed("current").unwrap();
        let shared = SharedCa {
            trusted: vec![current.cert_pem.clone(), expired.cert_pem.clone()],
            signing: current.clone(),
            previous: None,
            rotated_at: None,
        };
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(shared.bundle(), current.cert_pem);
        let successor = shared.rotated("ns/ca", Duration::from_secs(60)).unwrap();
        assert_eq!(
            successor.trusted,
            vec![successor.signing.cert_pem.clone(), current.cert_pem]
        );
    }

    #[test]
    fn a_ca_secret_of_an_older_host_trusts_its_one_ca() {
        let ca = Ca::self_signed("old").unwrap();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("hooks-webhook-ca".into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (
                    "tls.crt".into(),
                    ByteString(ca.cert_pem.clone().into_bytes()),
                ),
                (
                    "tls.key".into(),
                    ByteString(ca.key_pem.clone().into_bytes()),
                ),
            ])),
            ..Default::default()
        };
        let read = SharedCa::of(&secret, "ns").unwrap();
        assert_eq!(read.trusted, vec![ca.cert_pem.clone()]);
        assert!(read.previous.is_none());
        let rotation = CaRotation {
            validity: Duration::from_secs(10 * 365 * 24 * 3600),
        };
        assert_eq!(rotation.signing_now(&read).cert_pem, ca.cert_pem);

        let mut not_a_ca = secret.clone();
        not_a_ca
            .data
            .as_mut()
            .unwrap()
            .insert("tls.crt".into(), ByteString(b"not PEM".to_vec()));
        let error = SharedCa::of(&not_a_ca, "ns").err().unwrap().to_string();
        assert!(
            error.starts_with("the webhooks' CA Secret ns/hooks-webhook-ca is not usable: tls.crt"),
            "{error}"
        );
    }

    #[test]
    fn a_ca_is_replaced_with_a_third_of_its_life_left_and_signs_after_a_grace() {
        let rotation = CaRotation {
            validity: Duration::from_secs(60),
        };
        assert!(!rotation.is_due(&Ca::generate("new", Duration::from_secs(60)).unwrap()));
        assert!(rotation.is_due(&Ca::generate("old", Duration::from_secs(19)).unwrap()));
        assert_eq!(rotation.grace(), Duration::from_secs(10));
        assert_eq!(rotation.period(), Duration::from_secs(3));
        let ten_years = CaRotation {
            validity: Duration::from_secs(10 * 365 * 24 * 3600),
        };
        assert_eq!(ten_years.grace(), Duration::from_secs(300));
        assert_eq!(ten_years.period(), Duration::from_secs(60));

        // Read back from its Secret, as a replica that starts during the grace reads it: it
        // signs with the CA before until the grace ends.
        let shared = SharedCa::first("ns/ca", rotation.validity).unwrap();
        let rotated = shared.rotated("ns/ca", rotation.validity).unwrap();
        let just_rotated = SharedCa::of(&rotated.secret("ns", "ca"), "ns").unwrap();
        assert_eq!(
            rotation.signing_now(&just_rotated).cert_pem,
            shared.signing.cert_pem
        );
        let earlier = SharedCa {
            rotated_at: just_rotated
                .rotated_at
                .map(|at| at - Duration::from_secs(11)),
            ..just_rotated.clone()
        };
        assert_eq!(
            rotation.signing_now(&earlier).cert_pem,
            just_rotated.signing.cert_pem
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
        let ca = Ca::self_signed("test").unwrap();
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
        let ca = Ca::self_signed("test").unwrap();
        let (certified, bundle) = cert_files(&ca).parse(Path::new("/certs")).unwrap();
        assert_eq!(
            verification_problem(&certified, &bundle, &["hooks.system.svc".into()]),
            None
        );
        let wrong_name = verification_problem(&certified, &bundle, &["other.system.svc".into()]);
        assert!(
            wrong_name.is_some_and(|p| p.starts_with("tls.crt is not valid for other.system.svc")),
        );
        let other_ca = Ca::self_signed("other").unwrap();
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
