//! The webhooks' certificates: the host's own CA, kept in a Secret every replica shares, and a
//! serving certificate per replica signed by it and renewed well before it expires.
//!
//! The API server trusts the CA (the `caBundle` of every webhook entry), never a serving
//! certificate itself, so a replica renews its certificate on its own and nothing else changes.
//! The CA lives ten years (as the certificates of controller-runtime's and Gatekeeper's
//! cert-controller do) and is made once, by whichever replica comes first: a replica that finds
//! it made by another uses it.

use std::collections::BTreeMap;
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
}
