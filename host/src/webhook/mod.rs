//! The admission and conversion webhooks of the plugins that implement `validate`, `default`
//! or `convert` (contract 0.3.0), served over HTTPS by every replica.
//!
//! One endpoint serves every plugin: `/validate/<plugin>`, `/default/<plugin>` and
//! `/convert/<plugin>`. Each request is answered by the plugin version the plugin's controller
//! serves ([`ServedPlugins`], swapped with it), in the same sandbox and limits as its
//! reconciles ([`review`]). The certificates are the host's own ([`tls`]); the API server is
//! told about the webhooks by the leader, for the CRDs the host installs ([`registration`]).

mod registration;
mod review;
mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use kube::Client;
use tokio::sync::watch;

pub use registration::{OWNER_LABEL, OWNER_NAMESPACE_LABEL, Owner, Registration, crd_conversion};
pub use review::{Hook, ReviewError, admit, convert};
pub use tls::Ca;

use crate::leader::Leadership;
use crate::metrics::{Metrics, WebhookLabels};
use crate::plugin::Plugin;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen for webhook requests on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot make a webhook certificate: {0}")]
    IssueCertificate(String),
    #[error("cannot read or create the webhooks' CA Secret {secret}: {source}")]
    CaSecret { secret: String, source: kube::Error },
    #[error("the webhooks' CA Secret {secret} is not usable: {problem}")]
    CaSecretContent { secret: String, problem: String },
    #[error(
        "the webhook certificate directory {} (tls.crt, tls.key and ca.crt, as a mounted Secret of cert-manager's) is not usable: {problem}",
        dir.display()
    )]
    CertDir {
        dir: std::path::PathBuf,
        problem: String,
    },
    #[error("cannot set up TLS for the webhooks: {0}")]
    Tls(#[source] rustls::Error),
    #[error("cannot write {what}: {source}")]
    Register { what: String, source: kube::Error },
    #[error("the webhook URL {url:?} is not an https:// URL with a host")]
    Url { url: String },
}

/// How the API server reaches this host's webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A URL: a host outside the cluster (as with the local control plane), e.g.
    /// `https://127.0.0.1:9443`.
    Url(String),
    /// A Service in front of the host's pods.
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
}

impl Endpoint {
    /// The names the serving certificate must hold for the API server to accept it.
    fn certificate_names(&self) -> Result<Vec<String>, Error> {
        Ok(match self {
            Endpoint::Url(url) => {
                let invalid = || Error::Url { url: url.clone() };
                let rest = url.strip_prefix("https://").ok_or_else(invalid)?;
                let authority = rest.split('/').next().unwrap_or_default();
                // `[::1]:9443`, `127.0.0.1:9443`, `hooks.example.com`
                let host = match authority.strip_prefix('[') {
                    Some(v6) => v6.split(']').next().unwrap_or_default(),
                    None => authority.split(':').next().unwrap_or_default(),
                };
                if host.is_empty() {
                    return Err(invalid());
                }
                vec![host.to_string()]
            }
            Endpoint::Service {
                namespace, name, ..
            } => vec![
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
            ],
        })
    }
}

/// What the host does with a request whose plugin call fails (traps, runs out of time or
/// memory): the administrator's choice, `Fail` by default, and what the API server does when
/// it cannot reach the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailurePolicy {
    /// Refuse the request.
    Fail,
    /// Let it through, with a warning.
    Ignore,
}

/// The Secret of the webhooks' CA of the host deployment whose election Lease is `lease`.
pub fn ca_secret_name(lease: &str) -> String {
    format!("{lease}-webhook-ca")
}

/// How `run` serves webhooks.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where this replica listens.
    pub addr: SocketAddr,
    /// How the API server reaches the webhooks; `None`: at `https://` and the address listened
    /// on (`127.0.0.1` for an unspecified address), as for a host beside a local control plane.
    pub endpoint: Option<Endpoint>,
    pub failure_policy: FailurePolicy,
    /// Where the serving certificate comes from.
    pub certificates: Certificates,
    /// The host deployment (its election Lease): its webhook configurations are named and
    /// labelled after it.
    pub owner: Owner,
}

/// Where a replica's serving certificate, and the CA the API server trusts, come from.
#[derive(Debug, Clone)]
pub enum Certificates {
    /// The host's own CA in a Secret every replica shares (made by the first, valid for
    /// `ca_validity` and replaced with a third of it left), and a serving certificate per
    /// replica, valid for `validity` and renewed after two thirds of it.
    OwnCa {
        /// The Secret's namespace and name.
        secret: (String, String),
        validity: Duration,
        ca_validity: Duration,
    },
    /// A directory with `tls.crt`, `tls.key` and `ca.crt` (a mounted Secret that cert-manager
    /// keeps renewed), reloaded when its files change.
    Dir(std::path::PathBuf),
}

/// The plugin versions the webhooks call, by plugin name: the supervisor puts each version
/// here as its controller starts serving it, so validation, defaulting and conversion swap
/// with the reconcile logic.
#[derive(Clone, Default)]
pub struct ServedPlugins {
    plugins: Arc<RwLock<HashMap<String, Arc<Plugin>>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl ServedPlugins {
    /// `plugin` now serves its name.
    pub fn serve(&self, plugin: Arc<Plugin>) {
        let name = plugin.decl.name.clone();
        self.write().insert(name, plugin);
        self.changed.notify_one();
    }

    /// The plugin called `name` is no longer served.
    pub fn withdraw(&self, name: &str) {
        if self.write().remove(name).is_some() {
            self.changed.notify_one();
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<Plugin>> {
        self.plugins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn all(&self) -> Vec<Arc<Plugin>> {
        let plugins = self.plugins.read().unwrap_or_else(|e| e.into_inner());
        plugins.values().cloned().collect()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Plugin>>> {
        self.plugins.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Clone)]
struct ServerState {
    plugins: ServedPlugins,
    failure_policy: FailurePolicy,
    metrics: Arc<Metrics>,
}

/// The webhooks of this replica, listening once [`start`] returns.
#[derive(Debug, Clone)]
pub struct Webhooks {
    /// The CA (PEM) the API server checks this replica's certificate with; it changes when the
    /// host's CA is replaced or a certificate directory gets a new CA.
    ca_bundle: watch::Receiver<String>,
    /// Where it listens (the port chosen when the configured one is 0).
    pub local_addr: SocketAddr,
    /// How the API server reaches them.
    pub endpoint: Endpoint,
}

impl Webhooks {
    /// The CA (PEM) to register now.
    pub fn ca_bundle(&self) -> String {
        self.ca_bundle.borrow().clone()
    }
}

/// Starts serving webhooks for `plugins` with `config`: the CA read or made (or the
/// certificate directory read), this replica's certificate issued, the listener bound.
/// Serves until `stop` resolves.
pub async fn start(
    client: &Client,
    config: &WebhookConfig,
    plugins: ServedPlugins,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Webhooks, Error> {
    match &config.certificates {
        Certificates::OwnCa {
            secret: (namespace, name),
            validity,
            ca_validity,
        } => {
            let (signing, ca_bundle) =
                tls::keep_own_ca(client, namespace, name, *ca_validity).await?;
            start_signed(
                signing, ca_bundle, *validity, config, plugins, metrics, stop,
            )
            .await
        }
        Certificates::Dir(dir) => {
            let listening = listen(config).await?;
            let names = listening.endpoint.certificate_names()?;
            let certified = tls::ServingCert::from_dir(dir.clone(), names)?;
            serve(listening, certified, config, plugins, metrics, stop)
        }
    }
}

/// [`start`] with the CA given (the benchmark's, which has no cluster), serving certificates
/// valid for `validity`.
pub async fn start_with_ca(
    ca: Ca,
    validity: Duration,
    config: &WebhookConfig,
    plugins: ServedPlugins,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Webhooks, Error> {
    let ca_bundle = watch::channel(ca.cert_pem.clone()).1;
    let signing = watch::channel(ca).1;
    start_signed(signing, ca_bundle, validity, config, plugins, metrics, stop).await
}

/// [`start`] with serving certificates valid for `validity` signed by the CA `signing` holds,
/// the API server told to trust `ca_bundle`.
async fn start_signed(
    signing: watch::Receiver<Ca>,
    ca_bundle: watch::Receiver<String>,
    validity: Duration,
    config: &WebhookConfig,
    plugins: ServedPlugins,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Webhooks, Error> {
    let listening = listen(config).await?;
    let names = listening.endpoint.certificate_names()?;
    let serving = tls::ServingCert::start(signing, names, validity)?;
    serve(
        listening,
        (serving, ca_bundle),
        config,
        plugins,
        metrics,
        stop,
    )
}

/// A bound listener and the endpoint the API server reaches it at.
struct Listening {
    listener: tokio::net::TcpListener,
    local_addr: SocketAddr,
    endpoint: Endpoint,
}

/// The listener of `config.addr`.
async fn listen(config: &WebhookConfig) -> Result<Listening, Error> {
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| Error::Listen {
            addr: config.addr,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| Error::Listen {
        addr: config.addr,
        source,
    })?;
    let endpoint = config.endpoint.clone().unwrap_or_else(|| {
        let mut reachable = local_addr;
        if reachable.ip().is_unspecified() {
            reachable.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        Endpoint::Url(format!("https://{reachable}"))
    });
    Ok(Listening {
        listener,
        local_addr,
        endpoint,
    })
}

/// Serves the webhooks on `listening` with the certificate `serving` presents (and the CA
/// bundle it chains to) until `stop` resolves.
fn serve(
    Listening {
        listener,
        local_addr,
        endpoint,
    }: Listening,
    (serving, ca_bundle): (Arc<tls::ServingCert>, watch::Receiver<String>),
    config: &WebhookConfig,
    plugins: ServedPlugins,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Webhooks, Error> {
    let app = Router::new()
        .route("/validate/{plugin}", post(serve_validate))
        .route("/default/{plugin}", post(serve_default))
        .route("/convert/{plugin}", post(serve_convert))
        .with_state(ServerState {
            plugins,
            failure_policy: config.failure_policy,
            metrics,
        });
    serve_tls(listener, serving, app, stop)?;
    tracing::info!(addr = %local_addr, ?endpoint, "serving admission and conversion webhooks");
    Ok(Webhooks {
        ca_bundle,
        local_addr,
        endpoint,
    })
}

/// Serves `app` over HTTPS on `listener` with a certificate for `names` from `ca` (renewed
/// after two thirds of `validity`) until `stop` resolves: the webhooks' server, and the
/// benchmark's native baseline on the same stack.
pub fn serve_https(
    listener: tokio::net::TcpListener,
    ca: Ca,
    names: Vec<String>,
    validity: Duration,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    serve_tls(
        listener,
        tls::ServingCert::start(watch::channel(ca).1, names, validity)?,
        app,
        stop,
    )
}

/// Serves `app` over HTTPS on `listener` with the certificate `serving` presents.
fn serve_tls(
    listener: tokio::net::TcpListener,
    serving: Arc<tls::ServingCert>,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let mut tls_config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(Error::Tls)?
    .with_no_client_auth()
    .with_cert_resolver(serving);
    tls_config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls_config));
    tokio::spawn(async move {
        tokio::pin!(stop);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut stop => return,
            };
            let Ok((tcp, _)) = accepted else { continue };
            let acceptor = acceptor.clone();
            let app = app.clone();
            tokio::spawn(async move {
                let tls = match acceptor.accept(tcp).await {
                    Ok(tls) => tls,
                    Err(error) => {
                        tracing::debug!(%error, "webhook TLS handshake failed");
                        return;
                    }
                };
                let served = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                    .await;
                if let Err(error) = served {
                    tracing::debug!(%error, "webhook connection ended with an error");
                }
            });
        }
    });
    Ok(())
}

async fn serve_validate(state: State<ServerState>, plugin: Path<String>, body: Bytes) -> Response {
    admission(state, plugin, Hook::Validate, body).await
}

async fn serve_default(state: State<ServerState>, plugin: Path<String>, body: Bytes) -> Response {
    admission(state, plugin, Hook::Default, body).await
}

async fn admission(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    hook: Hook,
    body: Bytes,
) -> Response {
    let Some(plugin) = state.plugins.get(&name) else {
        count(&state, &name, hook.as_str(), "not-served");
        return not_served(&name);
    };
    match admit(plugin, hook, &body, state.failure_policy, &state.metrics).await {
        Ok(review) => {
            let outcome = match review.response.as_ref() {
                Some(response)
                    if response.allowed
                        && response
                            .warnings
                            .iter()
                            .flatten()
                            .any(|w| w.starts_with("let through")) =>
                {
                    "failed"
                }
                Some(response) if response.allowed => "allowed",
                Some(response) if response.result.code == 500 => "failed",
                _ => "refused",
            };
            count(&state, &name, hook.as_str(), outcome);
            json(&review)
        }
        Err(error) => {
            count(&state, &name, hook.as_str(), error_outcome(&error));
            bad_review(&name, hook.as_str(), &error)
        }
    }
}

fn count(state: &ServerState, plugin: &str, webhook: &str, outcome: &str) {
    state
        .metrics
        .webhook_requests
        .get_or_create(&WebhookLabels {
            plugin: plugin.to_string(),
            webhook: webhook.to_string(),
            outcome: outcome.to_string(),
        })
        .inc();
}

async fn serve_convert(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let Some(plugin) = state.plugins.get(&name) else {
        count(&state, &name, "convert", "not-served");
        return not_served(&name);
    };
    match convert(plugin, &body, &state.metrics).await {
        Ok(review) => {
            let outcome = match review.response.as_ref().map(|response| &response.result) {
                Some(result)
                    if result.status == Some(kube::core::response::StatusSummary::Success) =>
                {
                    "allowed"
                }
                Some(result) if result.reason == review::CONVERSION_CALL_FAILED => "failed",
                _ => "refused",
            };
            count(&state, &name, "convert", outcome);
            json(&review)
        }
        Err(error) => {
            count(&state, &name, "convert", error_outcome(&error));
            bad_review(&name, "convert", &error)
        }
    }
}

fn json(review: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(review) {
        Ok(body) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

/// No plugin of that name serves here (yet, or any more): the API server applies the
/// webhook's failure policy.
fn not_served(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("no plugin {name:?} is served by this host"),
    )
        .into_response()
}

/// The outcome a request that got no review counts as: the host's failure to run the call,
/// or a request that is not the API server's.
fn error_outcome(error: &ReviewError) -> &'static str {
    match error {
        ReviewError::CallTask(_) => "failed",
        _ => "bad-request",
    }
}

fn bad_review(name: &str, hook: &str, error: &ReviewError) -> Response {
    tracing::warn!(plugin = name, webhook = hook, %error, "webhook request refused");
    let status = match error {
        ReviewError::CallTask(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, error.to_string()).into_response()
}

/// Keeps the API server's webhook configurations in step with `plugins` while this host may
/// write (the leader, or the only host): at once, on every change, and every minute (what
/// someone else changed or deleted is put back). Returns when `stop` resolves.
pub async fn keep_registered(
    client: Client,
    config: WebhookConfig,
    webhooks: Webhooks,
    namespaces: Vec<String>,
    plugins: ServedPlugins,
    leadership: Leadership,
    stop: impl std::future::Future<Output = ()>,
) {
    const PERIOD: Duration = Duration::from_secs(60);
    tokio::pin!(stop);
    let mut ca_bundle = webhooks.ca_bundle.clone();
    loop {
        if leadership.may_write() {
            let current_bundle = ca_bundle.borrow_and_update().clone();
            let registration = Registration {
                owner: &config.owner,
                endpoint: &webhooks.endpoint,
                ca_bundle: &current_bundle,
                failure_policy: config.failure_policy,
                namespaces: &namespaces,
            };
            let served: Vec<_> = plugins.all().iter().map(|p| p.decl.clone()).collect();
            if let Err(error) = registration::sync(&client, &registration, &served).await {
                tracing::error!(%error, "cannot bring the webhook configurations in step");
            }
        }
        // A standby looks again soon: it registers within seconds of becoming the leader.
        let wait = if leadership.may_write() {
            PERIOD
        } else {
            Duration::from_secs(5)
        };
        tokio::select! {
            () = plugins.changed.notified() => {}
            // A new CA (the host's successor CA, a renewed certificate directory) is
            // registered at once.
            Ok(()) = ca_bundle.changed() => {}
            () = tokio::time::sleep(wait) => {}
            () = &mut stop => return,
        }
    }
}
