//! A fault-injecting HTTP proxy between a client (the operator host) and the API server.
//!
//! The proxy listens on `127.0.0.1:<free port>` in plain HTTP and forwards every request
//! through a `kube::Client` built from the upstream config (which does TLS and auth), streaming
//! response bodies back, so watches stay live. A test points its client at the proxy
//! ([`FaultProxy::client`], or [`FaultProxy::kubeconfig`] for a host run as a subprocess) and
//! injects faults that take effect on live connections:
//!
//! - [`FaultProxy::hold_watch`]: the events of matching watches are buffered until released,
//!   so the client's cache lags;
//! - [`FaultProxy::delay`]: matching requests wait before they are forwarded;
//! - [`FaultProxy::respond_status`]: matching requests are answered with a status (503, 429
//!   with `Retry-After`, ...) and a Kubernetes `Status` body instead of being forwarded;
//! - [`FaultProxy::drop_connections`]: every open connection ends abruptly now;
//!
//! and counts what it saw ([`FaultProxy::count`], [`FaultProxy::forwarded`],
//! [`FaultProxy::counts`]). Faults last until their [`FaultGuard`] is released or dropped.
//! An upstream that cannot be reached is answered with 502 (which kube's client does not
//! retry, as it would not retry a refused connection). Upgrades (exec, port-forward) are not
//! supported.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use kube::{Client, Config};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = BoxBody<Bytes, BoxError>;

/// What went wrong, named for the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("building the upstream client: {0}")]
    UpstreamClient(#[source] kube::Error),
    #[error("binding the proxy's listener on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    #[error("writing the proxy's kubeconfig {path}: {source}")]
    WriteKubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building a client of the proxy: {0}")]
    ProxyClient(#[source] kube::Error),
    #[error("parsing the proxy's URL {url}: {source}")]
    ProxyUrl {
        url: String,
        #[source]
        source: http::uri::InvalidUri,
    },
}

/// Which requests a fault or a count applies to: all conditions must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    methods: Vec<Method>,
    path: PathPattern,
    watch: Option<bool>,
}

/// How a [`Matcher`] matches the request path (without the query).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PathPattern {
    #[default]
    Any,
    Prefix(String),
    Contains(String),
}

impl Matcher {
    /// Every request.
    pub fn any() -> Self {
        Self::default()
    }

    /// Writes: POST, PUT, PATCH and DELETE.
    pub fn writes() -> Self {
        Self {
            methods: vec![Method::POST, Method::PUT, Method::PATCH, Method::DELETE],
            ..Self::default()
        }
    }

    /// Also accepts `method` (a matcher without methods accepts every method).
    pub fn method(mut self, method: Method) -> Self {
        self.methods.push(method);
        self
    }

    /// Only paths starting with `prefix`, e.g. `/apis/apps/v1/namespaces/x/deployments`.
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path = PathPattern::Prefix(prefix.into());
        self
    }

    /// Only paths containing `part`, e.g. `/namespaces/x/`.
    pub fn path_contains(mut self, part: impl Into<String>) -> Self {
        self.path = PathPattern::Contains(part.into());
        self
    }

    /// Only watches (`watch=true`, or a `/watch/` path).
    pub fn watch(mut self) -> Self {
        self.watch = Some(true);
        self
    }

    /// Only requests that are not watches.
    pub fn not_watch(mut self) -> Self {
        self.watch = Some(false);
        self
    }

    /// Whether a request of `method` on `path` (watch or not) matches.
    pub fn matches(&self, method: &Method, path: &str, watch: bool) -> bool {
        let method_ok = self.methods.is_empty() || self.methods.contains(method);
        let path_ok = match &self.path {
            PathPattern::Any => true,
            PathPattern::Prefix(p) => path.starts_with(p.as_str()),
            PathPattern::Contains(p) => path.contains(p.as_str()),
        };
        method_ok && path_ok && self.watch.is_none_or(|w| w == watch)
    }

    fn matches_seen(&self, seen: &RequestSeen) -> bool {
        self.matches(&seen.method, &seen.path, seen.watch)
    }
}

/// An injected answer: a status with a Kubernetes `Status` body, optionally with
/// `Retry-After`, for the first `times` matching requests or until `lasting` has passed
/// (either, both, or neither: then until the guard is released).
#[derive(Debug, Clone)]
pub struct StatusFault {
    status: StatusCode,
    retry_after: Option<Duration>,
    times: Option<u64>,
    lasting: Option<Duration>,
}

impl StatusFault {
    pub fn new(status: StatusCode) -> Self {
        Self {
            status,
            retry_after: None,
            times: None,
            lasting: None,
        }
    }

    /// Adds `Retry-After` (whole seconds, rounded up) and `details.retryAfterSeconds`.
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Answers only the first `n` matching requests.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Answers matching requests only for `window` from now.
    pub fn lasting(mut self, window: Duration) -> Self {
        self.lasting = Some(window);
        self
    }
}

/// What became of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not decided yet (delayed).
    Pending,
    /// Sent to the API server (its response may still be held).
    Forwarded,
    /// Answered by the proxy with this status (a [`StatusFault`]).
    Injected(u16),
    /// The API server could not be reached: answered 502.
    Unreachable,
}

/// One request the proxy received.
#[derive(Debug, Clone)]
pub struct RequestSeen {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub watch: bool,
    pub outcome: Outcome,
    pub at: Instant,
}

#[derive(Debug)]
enum Fault {
    Hold(Matcher),
    Delay(Matcher, Duration),
    Status {
        matcher: Matcher,
        fault: StatusFault,
        answered: u64,
        until: Option<Instant>,
    },
}

#[derive(Debug, Default)]
struct Faults {
    next_id: u64,
    active: Vec<(u64, Fault)>,
}

struct Shared {
    faults: Mutex<Faults>,
    seen: Mutex<Vec<RequestSeen>>,
    /// Bumped when a hold is added or released, so held streams re-check.
    holds_changed: watch::Sender<()>,
    /// Bumped by `drop_connections`; connections and their streams end when it changes or
    /// when the proxy is dropped (the sender with it).
    epoch: watch::Sender<u64>,
    connections: AtomicU64,
}

impl Shared {
    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seen(&self) -> MutexGuard<'_, Vec<RequestSeen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, fault: Fault) -> u64 {
        let is_hold = matches!(fault, Fault::Hold(_));
        let id = {
            let mut faults = self.faults();
            faults.next_id += 1;
            let id = faults.next_id;
            faults.active.push((id, fault));
            id
        };
        if is_hold {
            self.holds_changed.send_replace(());
        }
        id
    }

    fn remove(&self, id: u64) {
        self.faults().active.retain(|(i, _)| *i != id);
        self.holds_changed.send_replace(());
    }

    fn held(&self, method: &Method, path: &str, watch: bool) -> bool {
        self.faults().active.iter().any(|(_, f)| match f {
            Fault::Hold(m) => watch && m.matches(method, path, watch),
            _ => false,
        })
    }

    fn delay(&self, method: &Method, path: &str, watch: bool) -> Duration {
        self.faults()
            .active
            .iter()
            .filter_map(|(_, f)| match f {
                Fault::Delay(m, d) if m.matches(method, path, watch) => Some(*d),
                _ => None,
            })
            .sum()
    }

    /// The injected answer for this request, if a status fault takes it (and counts it).
    fn injected(&self, method: &Method, path: &str, watch: bool) -> Option<StatusFault> {
        let now = Instant::now();
        let mut faults = self.faults();
        faults.active.iter_mut().find_map(|(_, f)| match f {
            Fault::Status {
                matcher,
                fault,
                answered,
                until,
            } if matcher.matches(method, path, watch)
                && fault.times.is_none_or(|n| *answered < n)
                && until.is_none_or(|u| now < u) =>
            {
                *answered += 1;
                Some(fault.clone())
            }
            _ => None,
        })
    }
}

/// Removes its fault when released or dropped.
#[must_use = "the fault is removed when the guard is dropped"]
pub struct FaultGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl FaultGuard {
    /// Removes the fault now (a held watch then delivers what it buffered, in order).
    pub fn release(self) {}
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        self.shared.remove(self.id);
    }
}

impl std::fmt::Debug for FaultGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultGuard").field("id", &self.id).finish()
    }
}

/// The running proxy; stops (and ends its connections) when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    kubeconfig: tempfile::TempDir,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy to the API server of `upstream` on the current tokio runtime.
    /// The upstream client does not retry 429/503/504 itself (kube's default does), so the
    /// client behind the proxy sees what the API server answered.
    pub async fn start(mut upstream: Config) -> Result<Self, Error> {
        upstream.default_retry = false;
        // Watches last as long as the client asks (timeoutSeconds), not a read timeout.
        upstream.read_timeout = None;
        let client = Client::try_from(upstream).map_err(Error::UpstreamClient)?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let shared = Arc::new(Shared {
            faults: Mutex::new(Faults::default()),
            seen: Mutex::new(Vec::new()),
            holds_changed: watch::channel(()).0,
            epoch: watch::channel(0).0,
            connections: AtomicU64::new(0),
        });
        let kubeconfig = write_kubeconfig(addr)?;
        let accept = tokio::spawn(accept_loop(listener, client, shared.clone()));
        Ok(Self {
            addr,
            shared,
            accept,
            kubeconfig,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A config for the proxy: plain HTTP, no credentials (the proxy adds the upstream's).
    /// kube's default retry of 429/503/504 is left on; turn `default_retry` off to see them.
    pub fn config(&self) -> Result<Config, Error> {
        let url = self.url();
        let uri = url
            .parse()
            .map_err(|source| Error::ProxyUrl { url, source })?;
        Ok(Config::new(uri))
    }

    /// A client of the proxy (see [`FaultProxy::config`]).
    pub fn client(&self) -> Result<Client, Error> {
        Client::try_from(self.config()?).map_err(Error::ProxyClient)
    }

    /// A kubeconfig file naming the proxy, for a host run as a subprocess; it lives as long
    /// as the proxy.
    pub fn kubeconfig(&self) -> PathBuf {
        kubeconfig_path(self.kubeconfig.path())
    }

    /// Holds the events of matching watches (open ones too) until the guard is released:
    /// the response has started, its body is buffered, then delivered in order.
    pub fn hold_watch(&self, matcher: Matcher) -> FaultGuard {
        self.guard(Fault::Hold(matcher.watch()))
    }

    /// Delays matching requests by `by` before forwarding them (delays of several matching
    /// faults add up).
    pub fn delay(&self, matcher: Matcher, by: Duration) -> FaultGuard {
        self.guard(Fault::Delay(matcher, by))
    }

    /// Answers matching requests with `fault` instead of forwarding them.
    pub fn respond_status(&self, matcher: Matcher, fault: StatusFault) -> FaultGuard {
        let until = fault.lasting.map(|d| Instant::now() + d);
        self.guard(Fault::Status {
            matcher,
            fault,
            answered: 0,
            until,
        })
    }

    /// Ends every open connection now, abruptly (open watches end mid-stream); new
    /// connections are accepted as before.
    pub fn drop_connections(&self) {
        self.shared.epoch.send_modify(|e| *e += 1);
    }

    /// How many connections the proxy has accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Every request seen so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestSeen> {
        self.shared.seen().clone()
    }

    /// How many requests matching `matcher` arrived.
    pub fn count(&self, matcher: &Matcher) -> usize {
        self.shared
            .seen()
            .iter()
            .filter(|s| matcher.matches_seen(s))
            .count()
    }

    /// How many requests matching `matcher` went through to the API server.
    pub fn forwarded(&self, matcher: &Matcher) -> usize {
        self.shared
            .seen()
            .iter()
            .filter(|s| s.outcome == Outcome::Forwarded && matcher.matches_seen(s))
            .count()
    }

    /// Requests seen, by method and path.
    pub fn counts(&self) -> BTreeMap<(String, String), usize> {
        let mut counts = BTreeMap::new();
        for s in self.shared.seen().iter() {
            *counts
                .entry((s.method.to_string(), s.path.clone()))
                .or_insert(0) += 1;
        }
        counts
    }

    fn guard(&self, fault: Fault) -> FaultGuard {
        FaultGuard {
            id: self.shared.add(fault),
            shared: self.shared.clone(),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Connections and streams also watch for the sender's end, which comes with the last
        // `Shared`; bump the epoch so they end now even while guards keep it alive.
        self.drop_connections();
    }
}

fn kubeconfig_path(dir: &Path) -> PathBuf {
    dir.join("kubeconfig")
}

fn write_kubeconfig(addr: SocketAddr) -> Result<tempfile::TempDir, Error> {
    let dir = tempfile::tempdir().map_err(|source| Error::WriteKubeconfig {
        path: std::env::temp_dir(),
        source,
    })?;
    let path = kubeconfig_path(dir.path());
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fault-proxy\n  cluster:\n    server: http://{addr}\n\
         users:\n- name: fault-proxy\n  user: {{}}\ncontexts:\n- name: fault-proxy\n  context:\n    cluster: fault-proxy\n    user: fault-proxy\n\
         current-context: fault-proxy\n"
    );
    std::fs::write(&path, text).map_err(|source| Error::WriteKubeconfig { path, source })?;
    Ok(dir)
}

async fn accept_loop(listener: TcpListener, client: Client, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or similar: try again shortly rather than stop.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let mut epoch = shared.epoch.subscribe();
        let client = client.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let client = client.clone();
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(client, shared, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            // Dropping the connection future closes the socket: that is the abrupt end.
            tokio::select! {
                _ = conn => {}
                _ = epoch.changed() => {}
            }
        });
    }
}

/// Hop-by-hop headers, and those the forwarding recomputes.
fn skip_header(name: &HeaderName) -> bool {
    [
        header::HOST,
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
}

fn is_watch(path: &str, query: &str) -> bool {
    path.contains("/watch/")
        || query
            .split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1")
}

async fn handle(
    client: Client,
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let watch = is_watch(&path, &query);
    let index = {
        let mut seen = shared.seen();
        seen.push(RequestSeen {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            watch,
            outcome: Outcome::Pending,
            at: Instant::now(),
        });
        seen.len() - 1
    };
    let set_outcome = |outcome| {
        if let Some(s) = shared.seen().get_mut(index) {
            s.outcome = outcome;
        }
    };

    let delay = shared.delay(&method, &path, watch);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(fault) = shared.injected(&method, &path, watch) {
        set_outcome(Outcome::Injected(fault.status.as_u16()));
        return status_response(
            fault.status,
            fault.retry_after,
            "injected by the fault proxy",
        );
    }

    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return status_response(
                StatusCode::BAD_REQUEST,
                None,
                &format!("fault proxy: reading the request body: {e}"),
            );
        }
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string());
    let mut upstream = Request::builder().method(method.clone()).uri(target);
    for (name, value) in &parts.headers {
        if !skip_header(name) {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = match upstream.body(kube::client::Body::from(body)) {
        Ok(r) => r,
        Err(e) => {
            return status_response(
                StatusCode::BAD_REQUEST,
                None,
                &format!("fault proxy: building the upstream request: {e}"),
            );
        }
    };
    let response = match client.send(upstream).await {
        Ok(r) => r,
        Err(e) => {
            set_outcome(Outcome::Unreachable);
            return status_response(
                StatusCode::BAD_GATEWAY,
                None,
                &format!("fault proxy: the API server is unreachable: {e}"),
            );
        }
    };
    set_outcome(Outcome::Forwarded);
    let (mut parts, body) = response.into_parts();
    let skipped: Vec<HeaderName> = parts
        .headers
        .keys()
        .filter(|n| skip_header(n))
        .cloned()
        .collect();
    for name in skipped {
        parts.headers.remove(name);
    }
    // A small buffer: frames wait upstream, as they would in a slow client's socket.
    let (tx, rx) = mpsc::channel(16);
    let epoch = shared.epoch.subscribe();
    tokio::spawn(pump(shared, method, path, watch, body, tx, epoch));
    Response::from_parts(parts, ChannelBody(rx).boxed())
}

type FrameResult = Result<Frame<Bytes>, BoxError>;

/// Copies the upstream body to the client, buffering frames while a hold matches.
async fn pump(
    shared: Arc<Shared>,
    method: Method,
    path: String,
    watch: bool,
    mut upstream: kube::client::Body,
    tx: mpsc::Sender<FrameResult>,
    mut epoch: watch::Receiver<u64>,
) {
    let mut holds_changed = shared.holds_changed.subscribe();
    let mut buffered: VecDeque<FrameResult> = VecDeque::new();
    let mut upstream_done = false;
    loop {
        let holding = shared.held(&method, &path, watch);
        if !holding {
            while let Some(frame) = buffered.pop_front() {
                if tx.send(frame).await.is_err() {
                    return;
                }
            }
            if upstream_done {
                return;
            }
        }
        tokio::select! {
            frame = upstream.frame(), if !upstream_done => match frame {
                None => upstream_done = true,
                Some(frame) => {
                    let failed = frame.is_err();
                    let frame = frame.map_err(BoxError::from);
                    if holding {
                        buffered.push_back(frame);
                    } else if tx.send(frame).await.is_err() {
                        return;
                    }
                    upstream_done |= failed;
                }
            },
            changed = holds_changed.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = epoch.changed() => return,
        }
    }
}

/// A response body fed by `pump`.
struct ChannelBody(mpsc::Receiver<FrameResult>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx)
    }
}

/// The API server's reason for a status, as in a `Status` object.
fn reason(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

fn status_response(
    status: StatusCode,
    retry_after: Option<Duration>,
    message: &str,
) -> Response<ProxyBody> {
    let retry_secs = retry_after.map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason(status),
        "code": status.as_u16(),
    });
    if let Some(secs) = retry_secs {
        body["details"] = serde_json::json!({ "retryAfterSeconds": secs });
    }
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = retry_secs {
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from(secs));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_combine_method_path_and_watch() {
        let m = Matcher::any()
            .method(Method::GET)
            .path_prefix("/api/v1/namespaces/a/")
            .watch();
        assert!(m.matches(&Method::GET, "/api/v1/namespaces/a/pods", true));
        assert!(!m.matches(&Method::GET, "/api/v1/namespaces/a/pods", false));
        assert!(!m.matches(&Method::POST, "/api/v1/namespaces/a/pods", true));
        assert!(!m.matches(&Method::GET, "/api/v1/namespaces/b/pods", true));
        let w = Matcher::writes().path_contains("/configmaps");
        assert!(w.matches(&Method::PATCH, "/api/v1/namespaces/a/configmaps/x", false));
        assert!(!w.matches(&Method::GET, "/api/v1/namespaces/a/configmaps/x", false));
        assert!(Matcher::any().matches(&Method::DELETE, "/", false));
    }

    #[test]
    fn watches_are_told_from_the_query_or_the_path() {
        assert!(is_watch("/api/v1/pods", "labelSelector=a&watch=true"));
        assert!(is_watch("/api/v1/watch/pods", ""));
        assert!(!is_watch("/api/v1/pods", "watch=false"));
        assert!(!is_watch("/api/v1/pods", "allowWatchBookmarks=true"));
    }

    #[test]
    fn an_injected_status_is_a_kubernetes_status_with_retry_after() {
        let r = status_response(
            StatusCode::TOO_MANY_REQUESTS,
            Some(Duration::from_millis(1500)),
            "m",
        );
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
    }
}
