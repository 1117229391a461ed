//! Access to the local Kubernetes control plane (deploy/devcluster) for integration tests.
//!
//! The first use in a test binary runs `deploy/devcluster/start.sh`, which is
//! idempotent and serialised by a file lock, so every test binary shares one
//! cluster. Setting `OPERATOR_HOST_TEST_KUBECONFIG` attaches to an existing
//! cluster instead. A cluster that cannot start fails the test, never skips it.
//!
//! Tests that break the control plane (stop or restart the apiserver or etcd) use a cluster
//! of their own, [`isolated`], in `target/devcluster-<name>`, and the fault methods of
//! [`Cluster`], which call `deploy/devcluster/fault.sh`.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Event, Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// Names a kubeconfig of an already running cluster to use instead of the devcluster.
pub const KUBECONFIG_ENV: &str = "OPERATOR_HOST_TEST_KUBECONFIG";

/// Label put on every test namespace, so leftovers are easy to find and delete.
pub const TEST_NAMESPACE_LABEL: &str = "operator-host.test/namespace";

/// What went wrong, named for the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting the devcluster with {script} failed ({status}):\n{output}")]
    StartCluster {
        script: PathBuf,
        status: String,
        output: String,
    },
    #[error("reading kubeconfig {path}: {source}")]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("building a client from {path}: {source}")]
    BuildClient {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("creating namespace {name}: {source}")]
    CreateNamespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting namespace {name}: {source}")]
    DeleteNamespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("invalid isolated cluster name {name:?}: lowercase letters, digits and '-' only")]
    IsolatedName { name: String },
    #[error(
        "the cluster at {kubeconfig} was not started by these tests: it has no state dir to inject faults into"
    )]
    NoStateDir { kubeconfig: PathBuf },
    #[error("fault {action} {component} with {script} failed ({status}):\n{output}")]
    Fault {
        action: &'static str,
        component: &'static str,
        script: PathBuf,
        status: String,
        output: String,
    },
    #[error("timed out after {timeout:?} waiting for {what}; last error: {last}")]
    WaitTimeout {
        what: String,
        timeout: Duration,
        last: String,
    },
}

/// The repository root (this crate lives in `<root>/tests`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// State directory of the shared devcluster (`<root>/target/devcluster`).
pub fn state_dir() -> PathBuf {
    repo_root().join("target").join("devcluster")
}

/// The Kubernetes release the devcluster is pinned to, read from its go.mod.
pub fn pinned_kubernetes_version() -> String {
    let go_mod = repo_root().join("deploy/devcluster/go.mod");
    let text = std::fs::read_to_string(&go_mod)
        .unwrap_or_else(|e| panic!("reading {}: {e}", go_mod.display()));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("k8s.io/kubernetes "))
        .filter_map(|v| v.split_whitespace().next().map(str::to_string))
        .next()
        .unwrap_or_else(|| panic!("no k8s.io/kubernetes requirement in {}", go_mod.display()))
}

/// The cluster every test of this binary uses, started on first use.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    kubeconfig_data: Kubeconfig,
    /// The devcluster state dir; `None` for a cluster named by `OPERATOR_HOST_TEST_KUBECONFIG`.
    dir: Option<PathBuf>,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// Starts (or attaches to) the shared cluster; panics with the reason if it cannot.
pub fn cluster() -> &'static Cluster {
    // The error is kept as text so every test that asks reports the same reason.
    match CLUSTER.get_or_init(|| {
        crate::image::prebuild_in_background(&repo_root());
        start_or_attach().map_err(|e| e.to_string())
    }) {
        Ok(cluster) => cluster,
        Err(reason) => panic!("the test cluster is unavailable: {reason}"),
    }
}

fn start_or_attach() -> Result<Cluster, Error> {
    let (kubeconfig, dir) = match std::env::var_os(KUBECONFIG_ENV) {
        Some(path) if !path.is_empty() => (PathBuf::from(path), None),
        _ => {
            start_devcluster(&state_dir())?;
            (state_dir().join("kubeconfig"), Some(state_dir()))
        }
    };
    Cluster::read(kubeconfig, dir)
}

/// The isolated clusters of this process, by name.
static ISOLATED: Mutex<BTreeMap<String, Isolated>> = Mutex::new(BTreeMap::new());

/// An isolated cluster this process started, and how many tests use it now.
struct Isolated {
    cluster: Result<&'static Cluster, String>,
    users: usize,
    /// Whether its real node was started ([`isolated_cluster_with_real_node`]), and how.
    real_node: Option<Result<(), String>>,
}

/// An isolated cluster in use by a test: while one of these lives, starting another isolated
/// cluster does not stop this one. Dereferences to the [`Cluster`].
#[derive(Debug)]
pub struct IsolatedCluster {
    name: String,
    cluster: &'static Cluster,
}

impl IsolatedCluster {
    /// The cluster, for a test that keeps this guard until it ends.
    pub fn get(&self) -> &'static Cluster {
        self.cluster
    }
}

impl std::ops::Deref for IsolatedCluster {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        self.cluster
    }
}

impl Drop for IsolatedCluster {
    fn drop(&mut self) {
        let mut clusters = ISOLATED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(isolated) = clusters.get_mut(&self.name) {
            isolated.users -= 1;
        }
    }
}

/// A cluster of its own, in `<root>/target/devcluster-<name>`, for tests that stop or restart
/// parts of the control plane (never the shared one). Started on first use in this process
/// (30-60 s; blocking: call it from `spawn_blocking`, or use [`isolated_cluster`]), shared by
/// later calls with the same name, and stopped by the devcluster itself once this process
/// has exited (`DEVCLUSTER_OWNER_PID`); `stop.sh` without `DEVCLUSTER_DIR` stops it too.
/// Starting one first stops the isolated clusters no test uses now: the tests of one area run
/// one after another in the one test binary, so an area's cluster is not kept running (a
/// control plane, perhaps a real node) through every area after it; a later user starts it
/// again. Panics with the reason if it cannot start, like [`cluster`].
pub fn isolated(name: &str) -> IsolatedCluster {
    let mut clusters = ISOLATED.lock().unwrap_or_else(|e| e.into_inner());
    use_isolated(&mut clusters, name)
}

/// [`isolated`] under the lock of [`ISOLATED`].
fn use_isolated(clusters: &mut BTreeMap<String, Isolated>, name: &str) -> IsolatedCluster {
    if !clusters.contains_key(name) {
        let idle: Vec<String> = clusters
            .iter()
            .filter(|(_, isolated)| isolated.users == 0)
            .map(|(other, _)| other.clone())
            .collect();
        for other in idle {
            clusters.remove(&other);
            if let Err(error) = stop_devcluster(&isolated_state_dir(&other)) {
                eprintln!("stopping the idle isolated cluster {other}: {error}");
            }
        }
        let cluster = start_isolated(name).map_err(|e| e.to_string());
        clusters.insert(
            name.to_string(),
            Isolated {
                cluster,
                users: 0,
                real_node: None,
            },
        );
    }
    let isolated = clusters.get_mut(name).expect("inserted above");
    match isolated.cluster {
        Ok(cluster) => {
            isolated.users += 1;
            IsolatedCluster {
                name: name.to_string(),
                cluster,
            }
        }
        Err(ref reason) => panic!("the isolated cluster {name} is unavailable: {reason}"),
    }
}

/// [`isolated`] off the async worker threads.
pub async fn isolated_cluster(name: &str) -> IsolatedCluster {
    let name = name.to_string();
    tokio::task::spawn_blocking(move || isolated(&name))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// State directory of the isolated cluster `name`.
pub fn isolated_state_dir(name: &str) -> PathBuf {
    repo_root()
        .join("target")
        .join(format!("devcluster-{name}"))
}

fn start_isolated(name: &str) -> Result<&'static Cluster, Error> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(Error::IsolatedName {
            name: name.to_string(),
        });
    }
    let dir = isolated_state_dir(name);
    run_start_script(&dir, Some(std::process::id()))?;
    let cluster = Cluster::read(dir.join("kubeconfig"), Some(dir))?;
    // Kept for the life of the process, like the shared cluster in its OnceLock.
    Ok(Box::leak(Box::new(cluster)))
}

/// Runs `deploy/devcluster/start.sh` for the state directory `dir` and waits for it.
pub fn start_devcluster(dir: &Path) -> Result<(), Error> {
    run_start_script(dir, None)
}

/// `start.sh` for `dir`; with an `owner` pid, the cluster it starts stops once that exits.
fn run_start_script(dir: &Path, owner: Option<u32>) -> Result<(), Error> {
    let script = repo_root().join("deploy/devcluster/start.sh");
    let mut command = Command::new(&script);
    command.env("DEVCLUSTER_DIR", dir);
    if let Some(pid) = owner {
        command.env("DEVCLUSTER_OWNER_PID", pid.to_string());
    }
    let output = command.output().map_err(|e| Error::StartCluster {
        script: script.clone(),
        status: "not run".into(),
        output: e.to_string(),
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::StartCluster {
        script,
        status: output.status.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}

/// Runs `deploy/devcluster/stop.sh` for the state directory `dir`; returns its output.
pub fn stop_devcluster(dir: &Path) -> std::io::Result<std::process::Output> {
    Command::new(repo_root().join("deploy/devcluster/stop.sh"))
        .env("DEVCLUSTER_DIR", dir)
        .output()
}

/// A part of the control plane a fault can stop (see `deploy/devcluster/fault.sh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    KubeApiserver,
    Etcd,
}

impl Component {
    fn name(self) -> &'static str {
        match self {
            Component::KubeApiserver => "kube-apiserver",
            Component::Etcd => "etcd",
        }
    }
}

/// What a fault does to a [`Component`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Stop it; returns once it is down.
    Stop,
    /// Start it; returns once the apiserver's /readyz answers ok.
    Start,
    /// Stop it, keep it down for the given time, start it; returns once /readyz is ok.
    Restart(Duration),
}

impl Cluster {
    fn read(kubeconfig: PathBuf, dir: Option<PathBuf>) -> Result<Self, Error> {
        let kubeconfig_data =
            Kubeconfig::read_from(&kubeconfig).map_err(|source| Error::ReadKubeconfig {
                path: kubeconfig.clone(),
                source,
            })?;
        Ok(Cluster {
            kubeconfig,
            kubeconfig_data,
            dir,
        })
    }

    /// The devcluster state dir, if these tests started the cluster.
    pub fn state_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The admin client config (for a client of one's own, e.g. a fault proxy's upstream).
    pub async fn config(&self) -> Result<Config, Error> {
        Config::from_custom_kubeconfig(self.kubeconfig_data.clone(), &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::BuildClient {
                path: self.kubeconfig.clone(),
                source: Box::new(e),
            })
    }

    /// A new client for the current test's runtime (a `Client` is bound to the
    /// tokio runtime that made it, and each `#[tokio::test]` has its own).
    pub async fn client(&self) -> Result<Client, Error> {
        Client::try_from(self.config().await?).map_err(|e| Error::BuildClient {
            path: self.kubeconfig.clone(),
            source: Box::new(e),
        })
    }

    /// Stops the kube-apiserver (the rest keeps running); returns once it is gone.
    pub async fn stop_apiserver(&self) -> Result<Duration, Error> {
        self.fault(FaultAction::Stop, Component::KubeApiserver)
            .await
    }

    /// Starts the stopped kube-apiserver again, on the same port with the same certificates;
    /// returns once /readyz is ok.
    pub async fn start_apiserver(&self) -> Result<Duration, Error> {
        self.fault(FaultAction::Start, Component::KubeApiserver)
            .await
    }

    /// Stops the kube-apiserver, waits `down_for`, starts it; returns once /readyz is ok.
    pub async fn restart_apiserver(&self, down_for: Duration) -> Result<Duration, Error> {
        self.fault(FaultAction::Restart(down_for), Component::KubeApiserver)
            .await
    }

    /// Stops etcd (the apiserver keeps running, unable to read or write).
    pub async fn stop_etcd(&self) -> Result<Duration, Error> {
        self.fault(FaultAction::Stop, Component::Etcd).await
    }

    /// Starts etcd again on the same data and ports; returns once the apiserver's /readyz is ok.
    pub async fn start_etcd(&self) -> Result<Duration, Error> {
        self.fault(FaultAction::Start, Component::Etcd).await
    }

    /// Stops etcd, waits `down_for`, starts it; returns once the apiserver's /readyz is ok.
    pub async fn restart_etcd(&self, down_for: Duration) -> Result<Duration, Error> {
        self.fault(FaultAction::Restart(down_for), Component::Etcd)
            .await
    }

    /// Runs `deploy/devcluster/fault.sh` on this cluster; returns how long it took.
    /// Never use it on the shared cluster: other tests run against it.
    pub async fn fault(
        &self,
        action: FaultAction,
        component: Component,
    ) -> Result<Duration, Error> {
        let dir = self.dir.as_ref().ok_or_else(|| Error::NoStateDir {
            kubeconfig: self.kubeconfig.clone(),
        })?;
        let script = repo_root().join("deploy/devcluster/fault.sh");
        let (verb, down_for) = match action {
            FaultAction::Stop => ("stop", Duration::ZERO),
            FaultAction::Start => ("start", Duration::ZERO),
            FaultAction::Restart(d) => ("restart", d),
        };
        let failed = |status: String, output: String| Error::Fault {
            action: verb,
            component: component.name(),
            script: script.clone(),
            status,
            output,
        };
        let started = Instant::now();
        let output = tokio::process::Command::new(&script)
            .env("DEVCLUSTER_DIR", dir)
            .args([verb, component.name()])
            .arg(format!("--down-for={}ms", down_for.as_millis()))
            .output()
            .await
            .map_err(|e| failed("not run".into(), e.to_string()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            return Err(failed(output.status.to_string(), text));
        }
        let took = started.elapsed();
        eprintln!(
            "fault {verb} {}: {} ({took:?})",
            component.name(),
            text.trim()
        );
        Ok(took)
    }
}

/// A client of the shared cluster, starting it first if needed.
pub async fn client() -> Client {
    // start.sh blocks for seconds; keep it off the async worker.
    let cluster = tokio::task::spawn_blocking(cluster)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    cluster
        .client()
        .await
        .unwrap_or_else(|e| panic!("the test cluster is unavailable: {e}"))
}

/// The kubectl built with the devcluster (same version), or `kubectl` from PATH.
pub fn kubectl_path() -> PathBuf {
    let built = state_dir().join("bin").join("kubectl");
    if built.exists() {
        built
    } else {
        PathBuf::from("kubectl")
    }
}

/// A `kubectl` command aimed at the shared cluster (`--kubeconfig` set).
pub fn kubectl() -> Command {
    let mut cmd = Command::new(kubectl_path());
    cmd.arg("--kubeconfig").arg(&cluster().kubeconfig);
    cmd
}

/// Polls `check` every 100 ms until it yields `Some`, or fails after `timeout`.
/// Errors from `check` count as "not yet" and the last one is reported.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = String::from("none");
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() >= deadline {
            return Err(Error::WaitTimeout {
                what: what.to_string(),
                timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A namespace of its own for one test, deleted by `cleanup()` (or, best
/// effort, on drop).
pub struct TestNamespace {
    name: String,
    client: Client,
    /// The kubeconfig of its cluster, for the best-effort deletion on drop.
    kubeconfig: PathBuf,
    deleted: bool,
}

impl TestNamespace {
    /// Creates a namespace of the shared cluster named after `test_name` plus a unique
    /// suffix, and waits for its default ServiceAccount (pods are refused until it exists).
    pub async fn new(test_name: &str) -> Result<Self, Error> {
        let client = client().await;
        Self::create(client, cluster().kubeconfig.clone(), test_name).await
    }

    /// [`TestNamespace::new`] in `cluster` (an isolated one).
    pub async fn in_cluster(cluster: &Cluster, test_name: &str) -> Result<Self, Error> {
        let client = cluster.client().await?;
        Self::create(client, cluster.kubeconfig.clone(), test_name).await
    }

    async fn create(client: Client, kubeconfig: PathBuf, test_name: &str) -> Result<Self, Error> {
        let name = unique_name(test_name);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([(TEST_NAMESPACE_LABEL.to_string(), "true".to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|source| Error::CreateNamespace {
                name: name.clone(),
                source,
            })?;
        let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_for(
            &format!("the default ServiceAccount of {name}"),
            Duration::from_secs(30),
            || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
        )
        .await?;
        Ok(Self {
            name,
            client,
            kubeconfig,
            deleted: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Typed API for namespaced objects of this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Whether this namespace has no `K` named `name` (for waits on garbage collection).
    pub async fn absent<K>(&self, name: &str) -> Result<bool, kube::Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        Ok(self.api::<K>().get_opt(name).await?.is_none())
    }

    /// This namespace's `K`s that match the label `selector`.
    pub async fn labelled<K>(&self, selector: &str) -> Result<Vec<K>, kube::Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let params = kube::api::ListParams::default().labels(selector);
        Ok(self.api::<K>().list(&params).await?.items)
    }

    /// Waits (up to a minute) for an Event in this namespace that `matches`; panics naming
    /// `what` if none comes.
    pub async fn wait_for_event(&self, what: &str, matches: impl Fn(&Event) -> bool) {
        let events: Api<Event> = self.api();
        wait_for(what, Duration::from_secs(60), || async {
            let listed = events.list(&ListParams::default()).await?;
            Ok(listed.items.iter().any(&matches).then_some(()))
        })
        .await
        .unwrap();
    }

    /// Deletes the namespace and waits (up to `timeout`) until it and its contents are gone:
    /// for tests that measure, so that this deletion's work does not land in the next one.
    pub async fn cleanup_and_wait(self, timeout: Duration) -> Result<(), Error> {
        let namespaces = Api::<Namespace>::all(self.client.clone());
        let name = self.name.clone();
        self.cleanup().await?;
        wait_for(&format!("namespace {name} to be gone"), timeout, || async {
            Ok(namespaces.get_opt(&name).await?.is_none().then_some(()))
        })
        .await
    }

    /// Deletes the namespace (without waiting for its contents to go).
    pub async fn cleanup(mut self) -> Result<(), Error> {
        self.deleted = true;
        match Api::<Namespace>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(source) => Err(Error::DeleteNamespace {
                name: self.name.clone(),
                source,
            }),
        }
    }
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish()
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        // Drop cannot await; kubectl on a plain thread does not need the
        // (possibly shutting down) runtime. Best effort: errors are ignored.
        let mut cmd = Command::new(kubectl_path());
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args([
            "delete",
            "namespace",
            &self.name,
            "--wait=false",
            "--ignore-not-found",
        ]);
        let _ = std::thread::spawn(move || cmd.output()).join();
    }
}

/// A DNS-label name derived from `test_name`, unique per process and call.
pub fn unique_name(test_name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut base: String = test_name
        .rsplit("::")
        .next()
        .unwrap_or(test_name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    base.truncate(40);
    let base = base.trim_matches('-');
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix =
        (nanos ^ std::process::id().rotate_left(16) ^ n.wrapping_mul(0x9e37_79b9)) & 0xff_ffff;
    format!("t-{base}-{suffix:06x}")
}

/// Requests the API server has served of `resource` (`subresource` `""` for the object
/// itself) with `verb` (`APPLY`, `PATCH`, `DELETE`, ...), from its own metrics: what a host
/// made the API server do, counted where it happened rather than by the host.
pub async fn apiserver_requests(
    client: &Client,
    verb: &str,
    resource: &str,
    subresource: &str,
) -> anyhow::Result<u64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let wanted = [
        format!("verb=\"{verb}\""),
        format!("resource=\"{resource}\""),
        format!("subresource=\"{subresource}\""),
    ];
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| wanted.iter().all(|w| l.contains(w.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// Waits until the API server serves the CRD `name` (its `Established` condition is true).
pub async fn wait_for_crd_established(
    crds: &Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    use kube::runtime::wait::{Condition, conditions};
    wait_for(
        &format!("the CRD {name} to be Established"),
        timeout,
        || async {
            let crd = crds.get(name).await?;
            Ok(conditions::is_crd_established()
                .matches_object(Some(&crd))
                .then_some(()))
        },
    )
    .await
}

/// [`isolated_cluster`] with a real node attached (`deploy/devcluster/node.sh start`, see
/// "A real node" in `deploy/devcluster/README.md`): containerd and runc from the machine's
/// packages and a kubelet of the pinned release, node [`real_node_name`], which runs only pods
/// placed with [`real_node_placement`]. Started once per start of its cluster (the node stops
/// with the cluster). Needs root and
/// `apt-get install -y --no-install-recommends containerd runc containernetworking-plugins`;
/// panics with node.sh's output, which says what is missing, if the node cannot start (never
/// skips). One real node per machine: this waits while a test uses another cluster's node,
/// and starting this cluster then stops that one.
pub async fn isolated_cluster_with_real_node(name: &str) -> IsolatedCluster {
    let name = name.to_string();
    loop {
        let another_in_use = {
            let clusters = ISOLATED.lock().unwrap_or_else(|e| e.into_inner());
            clusters.iter().any(|(other, isolated)| {
                *other != name && isolated.real_node.is_some() && isolated.users > 0
            })
        };
        if !another_in_use {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::task::spawn_blocking(move || {
        let mut clusters = ISOLATED.lock().unwrap_or_else(|e| e.into_inner());
        let cluster = use_isolated(&mut clusters, &name);
        let isolated = clusters.get_mut(&name).expect("in use");
        let started = isolated.real_node.get_or_insert_with(|| {
            run_node_script(&isolated_state_dir(&name), &["start"]).map(|_| ())
        });
        if let Err(reason) = started {
            panic!("the real node of the isolated cluster {name} is unavailable: {reason}");
        }
        cluster
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Imports an image archive (an OCI image layout or `docker save` tarball) into the real node's
/// containerd (`node.sh import`), where pods find it by the name it carries (use
/// `imagePullPolicy: Never` or `IfNotPresent`: there is no registry). Returns node.sh's output,
/// one `imported NAME` line per image.
pub async fn real_node_import(cluster: &Cluster, archive: &Path) -> anyhow::Result<String> {
    let dir = cluster
        .state_dir()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no state dir, so no real node",
                cluster.kubeconfig.display()
            )
        })?
        .to_path_buf();
    let archive = archive.as_os_str().to_owned();
    tokio::task::spawn_blocking(move || {
        run_node_script(&dir, &[std::ffi::OsStr::new("import"), archive.as_os_str()])
    })
    .await?
    .map_err(anyhow::Error::msg)
}

/// The test image archive the real node's build makes (`localhost/devcluster/testpod:1`, see
/// `deploy/devcluster/node/testpod`): it prints its uid, whether it can write to `/` and to
/// each `-write DIR`, with `-apiserver` the apiserver's /version as an in-cluster client, then
/// `testpod ready`, and runs until SIGTERM.
pub fn real_node_test_image(cluster: &Cluster) -> PathBuf {
    cluster
        .state_dir()
        .unwrap_or_else(|| Path::new("/nonexistent"))
        .join("bin")
        .join("testpod.tar")
}

/// The real node's name.
pub fn real_node_name() -> &'static str {
    "real-node-0"
}

/// What puts a pod on the real node and nowhere else: the node selector for its label and the
/// toleration of its taint (`operator-host.dev/real-node=true`, NoSchedule).
pub fn real_node_placement() -> (
    BTreeMap<String, String>,
    Vec<k8s_openapi::api::core::v1::Toleration>,
) {
    let key = "operator-host.dev/real-node";
    let selector = [(key.to_string(), "true".to_string())].into();
    let toleration = k8s_openapi::api::core::v1::Toleration {
        key: Some(key.to_string()),
        operator: Some("Equal".to_string()),
        value: Some("true".to_string()),
        effect: Some("NoSchedule".to_string()),
        ..Default::default()
    };
    (selector, vec![toleration])
}

/// Runs `deploy/devcluster/node.sh ARGS` for the cluster in `dir`; its output, or why it failed.
fn run_node_script<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> Result<String, String> {
    let script = repo_root().join("deploy/devcluster/node.sh");
    let output = Command::new(&script)
        .env("DEVCLUSTER_DIR", dir)
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "{} failed ({}):\n{text}",
            script.display(),
            output.status
        ))
    }
}
