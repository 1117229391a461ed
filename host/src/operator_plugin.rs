//! `OperatorPlugin` (operator-host.dev/v1alpha1, cluster-scoped): a plugin the cluster
//! declares by OCI reference. The host resolves the reference (and polls a tag), pulls the
//! artifact, keeps it on disk by digest, offers it to the registry as the plugin of the
//! resource's name, and says on the resource what serves: conditions `Pulled` and `Serving`.
//!
//! Every replica pulls and loads (a standby is warm); only the leader writes the status.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::labels::FIELD_MANAGER;
use crate::leader::Leadership;
use crate::oci::{self, Access, Credentials};
use crate::registry::{ClusterOffer, ClusterPlugins, Outcome};

/// What `operator-host rbac` grants a host that reads OperatorPlugins (`run
/// --plugins-from-cluster`) whose pull Secrets are in `namespace`.
pub fn rbac_grants(namespace: String) -> crate::rbac::ClusterPlugins {
    let crd = <OperatorPlugin as kube::CustomResourceExt>::crd();
    crate::rbac::ClusterPlugins {
        namespace,
        group: crd.spec.group,
        plural: crd.spec.names.plural,
    }
}

/// How often a tag is resolved again unless the resource says otherwise.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(300);
/// How soon a failed resolve or pull is tried again (at most the poll interval).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);
/// How often each replica renews its entry in `status.replicas`.
const REPORT_INTERVAL: Duration = Duration::from_secs(60);
/// After how long without a renewal the leader drops a replica's entry (one that ended
/// without taking it away: killed, or its node lost).
const REPORT_EXPIRY: Duration = Duration::from_secs(3 * 60);
/// How long a stopping replica tries to take its entries away.
const WITHDRAW_TIMEOUT: Duration = Duration::from_millis(1500);

/// A plugin served from an OCI registry.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "operator-host.dev",
    version = "v1alpha1",
    kind = "OperatorPlugin",
    status = "OperatorPluginStatus",
    shortname = "oplugin",
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.shortDigest"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Serving","type":"string","jsonPath":".status.conditions[?(@.type==\"Serving\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorPluginSpec {
    /// The artifact: registry/repository:tag (resolved again every pollInterval) or
    /// registry/repository@sha256:<digest>. The plugin it holds must be named as this
    /// resource is.
    pub source: String,
    /// How often a tag is resolved again: a Go duration such as 30s, 5m or 1h (default 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<String>,
    /// Speak plain HTTP to the registry (a registry on loopback or without TLS).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[serde(rename = "plainHTTP")]
    pub plain_http: bool,
    /// A Secret of type kubernetes.io/dockerconfigjson, in the host's namespace, holding the
    /// registry's credentials (default: anonymous).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
    /// The keys a cosign signature of the artifact must verify with. With keys here, or
    /// `requireSignature` in the host's policy, an artifact without such a signature is
    /// refused and the previous version keeps serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
    /// This plugin's entry in the host's policy: the fields of an entry under `plugins` of
    /// the policy file (kinds, namespaces, allowSecrets, podSecurity, limits, ...), resolved
    /// over the file's `defaults`. Refused if the file has an entry for this plugin itself;
    /// requireSignature and signatureKeys stay the file's. A change is a hot swap, refused
    /// (the previous policy keeps applying) if it is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::policy::Rules>,
}

/// Which signatures an artifact must carry.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verify {
    /// PEM public keys (ECDSA P-256: cosign.pub, or what `operator-host generate-key` writes).
    #[serde(default)]
    pub keys: Vec<String>,
}

/// What the host found and serves.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorPluginStatus {
    /// The manifest digest the source resolved to last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its first 12 hex digits, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_digest: Option<String>,
    /// The digest that served before `digest` did: where `operator-host rollback` goes back
    /// to (the host keeps it in its digest store, so it serves without the registry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_digest: Option<String>,
    /// The plugin name and version the served artifact declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// What each replica of the host serves: each writes its own entry, again every minute,
    /// and takes it away when it stops; the leader drops an entry not renewed for three.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub replicas: Vec<ReplicaStatus>,
}

/// What one replica of the host serves.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// The replica's identity (its leader-election identity: the pod's name first).
    pub name: String,
    /// The manifest digest it serves.
    pub digest: String,
    /// The version the artifact declares.
    pub version: String,
    /// When it last said so.
    pub last_reported: Time,
}

/// Why an OperatorPlugin could not be served (said on the resource, and logged).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("spec.pollInterval {value:?} is not a duration such as 30s, 5m or 1h: {problem}")]
    PollInterval { value: String, problem: String },
    #[error("cannot read the pull Secret {namespace}/{name}: {source}")]
    PullSecret {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("the pull Secret {namespace}/{name} has no .dockerconfigjson key")]
    PullSecretKey { namespace: String, name: String },
    #[error(transparent)]
    Oci(#[from] oci::Error),
    #[error("{reference} resolved to {resolved}, but the registry served the manifest {served}")]
    DigestMismatch {
        reference: String,
        resolved: String,
        served: String,
    },
    #[error("cannot keep the pulled plugin in {}: {source}", dir.display())]
    Store {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot install the OperatorPlugin CRD: {0}")]
    InstallCrd(#[source] kube::Error),
    #[error(transparent)]
    Key(#[from] crate::signature::Error),
    #[error("{digest} is not served: {refusal}")]
    Refused {
        digest: String,
        refusal: crate::signature::Refusal,
    },
    #[error("cannot write the status of OperatorPlugin {name}: {source}")]
    WriteStatus { name: String, source: kube::Error },
    #[error(
        "spec.verify.keys[{index}] (key {fingerprint}) is not one of the policy's signatureKeys: \
         where the policy names signature keys, only they are trusted"
    )]
    UntrustedKey { index: usize, fingerprint: String },
}

/// Pulled artifacts on disk, by manifest digest: a host that restarts while the registry is
/// down serves what it pulled before.
#[derive(Debug, Clone)]
pub struct DigestStore {
    dir: PathBuf,
}

impl DigestStore {
    pub fn new(dir: &Path) -> Self {
        DigestStore {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{}.wasm", digest.replace(':', "-")))
    }

    fn get(&self, digest: &str) -> Option<Arc<[u8]>> {
        std::fs::read(self.path(digest)).ok().map(Arc::from)
    }

    fn put(&self, digest: &str, bytes: &[u8]) -> Result<(), Error> {
        self.write(&self.path(digest), bytes)
    }

    /// The signatures that verified `digest` before: a restart while the registry is down
    /// checks them against the keys of now.
    fn signatures(&self, digest: &str) -> Option<Vec<crate::signature::Stored>> {
        let json = std::fs::read(self.signatures_path(digest)).ok()?;
        serde_json::from_slice(&json).ok()
    }

    fn put_signatures(
        &self,
        digest: &str,
        signatures: &[crate::signature::Stored],
    ) -> Result<(), Error> {
        let json = serde_json::to_vec(signatures).unwrap_or_default();
        self.write(&self.signatures_path(digest), &json)
    }

    fn signatures_path(&self, digest: &str) -> PathBuf {
        self.dir
            .join(format!("{}.sig.json", digest.replace(':', "-")))
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), Error> {
        crate::files::write_whole(path, bytes).map_err(|source| Error::Store {
            dir: self.dir.clone(),
            source,
        })
    }
}

/// What the OperatorPlugin controller needs.
#[derive(Clone)]
pub struct Config {
    pub client: Client,
    pub cluster: ClusterPlugins,
    pub store: DigestStore,
    /// Where pull Secrets are read: the host's namespace.
    pub namespace: String,
    pub leadership: Leadership,
    /// `requireSignature` and `signatureKeys` of each plugin's entry.
    pub policy: Arc<crate::policy::Policy>,
    /// A label selector: only the OperatorPlugins it selects are this host's.
    pub selector: Option<String>,
    pub replica: Replica,
}

/// This replica, as `status.replicas` names it.
#[derive(Clone)]
pub struct Replica {
    /// Its identity (the leader election's).
    pub name: String,
    /// Writes while this replica stands by too: its report is its own entry, under a field
    /// manager of its own, not a reconcile's write, so the leader's fence does not hold it.
    pub client: Client,
}

impl Replica {
    fn field_manager(&self) -> String {
        // Field managers are at most 128 bytes.
        let mut manager = format!("operator-host-replica/{}", self.name);
        while manager.len() > 128 {
            manager.pop();
        }
        manager
    }
}

/// The controller's state: its configuration, and each resource's last resolve.
struct Context {
    config: Config,
    /// By resource name: the source, what it resolved to, and when. A reconcile that the
    /// registry's syncs trigger (to refresh `Serving`) reuses it for half a poll interval
    /// instead of asking the registry again.
    resolved:
        std::sync::Mutex<std::collections::HashMap<String, (String, String, std::time::Instant)>>,
}

impl Context {
    async fn resolve(
        &self,
        name: &str,
        source: &str,
        access: &Access,
        poll: Duration,
    ) -> Result<String, Error> {
        let recent = self
            .lock()
            .get(name)
            .and_then(|(resolved_source, digest, at)| {
                (resolved_source == source && at.elapsed() < poll / 2).then(|| digest.clone())
            });
        if let Some(digest) = recent {
            return Ok(digest);
        }
        let digest = oci::resolve(source, access).await?;
        self.lock().insert(
            name.to_string(),
            (
                source.to_string(),
                digest.clone(),
                std::time::Instant::now(),
            ),
        );
        Ok(digest)
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<String, (String, String, std::time::Instant)>,
    > {
        self.resolved.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Installs (server-side applies) the OperatorPlugin CRD and waits until it is served.
pub async fn install_crd(client: &Client) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = OperatorPlugin::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(Error::InstallCrd)?;
    let established = kube::runtime::wait::await_condition(
        crds,
        &name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    let _ = tokio::time::timeout(Duration::from_secs(30), established).await;
    Ok(())
}

/// Watches OperatorPlugins until `stop` resolves: each is pulled and offered to the
/// registry, and withdrawn once deleted; `synced` fires after each registry sync, so that
/// `Serving` follows what happened.
pub async fn run(
    config: Config,
    synced: impl futures::Stream<Item = ()> + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<OperatorPlugin> = Api::all(config.client.clone());
    let stop = stop.shared();
    let writer = reflector::store::Writer::default();
    let store = writer.as_reader();
    let reporter = tokio::spawn(report_replicas(
        config.clone(),
        store.clone(),
        config.cluster.synced(),
        stop.clone(),
    ));
    let cluster = config.cluster.clone();
    let mut selection = watcher::Config::default();
    if let Some(selector) = &config.selector {
        selection = selection.labels(selector);
    }
    let resources = watcher(api, selection)
        .default_backoff()
        .reflect(writer)
        .inspect({
            let store = store.clone();
            move |event| match event {
                Ok(watcher::Event::Delete(resource)) => {
                    let gone = resource.name_any();
                    cluster.retain(|name| name != gone);
                }
                // After a relist, a delete it missed.
                Ok(watcher::Event::InitDone) => {
                    let live: std::collections::HashSet<String> =
                        store.state().iter().map(|r| r.name_any()).collect();
                    cluster.retain(|name| live.contains(name));
                }
                _ => {}
            }
        })
        .touched_objects();
    Controller::for_stream(resources, store)
        .reconcile_all_on(synced)
        .graceful_shutdown_on(stop)
        .run(
            reconcile,
            error_policy,
            Arc::new(Context {
                config,
                resolved: Default::default(),
            }),
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "OperatorPlugin reconcile failed");
            }
        })
        .await;
    let _ = reporter.await;
}

/// Keeps this replica's entry in each OperatorPlugin's `status.replicas` true, after each
/// registry sync and every [`REPORT_INTERVAL`]; the leader also drops entries not renewed
/// for [`REPORT_EXPIRY`]. Once `stop` resolves, takes this replica's entries away.
async fn report_replicas(
    config: Config,
    store: reflector::Store<OperatorPlugin>,
    mut synced: impl futures::Stream<Item = ()> + Send + Unpin,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut tick = tokio::time::interval(REPORT_INTERVAL);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = tick.tick() => {}
            Some(()) = synced.next() => {}
        }
        for resource in store.state() {
            if let Err(error) = report_replica(&resource, &config).await {
                tracing::warn!(operator_plugin = %resource.name_any(), %error, "cannot say in status.replicas what this replica serves");
            }
        }
    }
    // A replica that stops takes its entries away (from every resource: its cache may not
    // have seen its last report yet); one that cannot in time leaves them to expire.
    let replica = &config.replica;
    let withdraw = store.state().into_iter().map(|resource| async move {
        edit_replicas(replica, &resource.name_any(), |replicas| {
            replicas.retain(|r| r.name != replica.name)
        })
        .await
    });
    let _ = tokio::time::timeout(WITHDRAW_TIMEOUT, futures::future::join_all(withdraw)).await;
}

/// The entry of replica `name` in `resource`'s status, if it has one.
fn listed<'a>(resource: &'a OperatorPlugin, name: &str) -> Option<&'a ReplicaStatus> {
    resource
        .status
        .as_ref()
        .and_then(|s| s.replicas.iter().find(|r| r.name == name))
}

/// Writes this replica's entry in `resource`'s `status.replicas` if what it serves changed or
/// the entry is due for renewal (and, on the leader, drops expired entries of others).
async fn report_replica(resource: &OperatorPlugin, config: &Config) -> Result<(), Error> {
    let replica = &config.replica;
    let served = config
        .cluster
        .outcome(&resource.name_any())
        .and_then(|(_, served)| served)
        .filter(|served| !served.digest.is_empty());
    let up_to_date = match (&served, listed(resource, &replica.name)) {
        (Some(served), Some(own)) => {
            own.digest == served.digest
                && own.version == served.version
                && age(&own.last_reported) < REPORT_INTERVAL - REPORT_INTERVAL / 10
        }
        (None, None) => true,
        _ => false,
    };
    let leads = config.leadership.may_write();
    let expired = |entry: &ReplicaStatus| {
        leads && entry.name != replica.name && age(&entry.last_reported) > REPORT_EXPIRY
    };
    let any_expired = resource
        .status
        .as_ref()
        .is_some_and(|status| status.replicas.iter().any(expired));
    if up_to_date && !any_expired {
        return Ok(());
    }
    edit_replicas(replica, &resource.name_any(), |replicas| {
        replicas.retain(|entry| entry.name != replica.name && !expired(entry));
        if let Some(served) = &served {
            replicas.push(ReplicaStatus {
                name: replica.name.clone(),
                digest: served.digest.clone(),
                version: served.version.clone(),
                last_reported: Time(now()),
            });
        }
    })
    .await
}

/// How long ago `time` was (zero if it is in the future).
fn age(time: &Time) -> Duration {
    let elapsed = now().duration_since(time.0);
    Duration::try_from(elapsed).unwrap_or_default()
}

/// Reads OperatorPlugin `name`, lets `edit` change its `status.replicas`, and writes the list
/// back if it changed, on the resource version read: a concurrent write by another replica
/// is a conflict, after which the edit starts again from a fresh read.
async fn edit_replicas(
    replica: &Replica,
    name: &str,
    edit: impl Fn(&mut Vec<ReplicaStatus>),
) -> Result<(), Error> {
    let api: Api<OperatorPlugin> = Api::all(replica.client.clone());
    let write_failed = |source| Error::WriteStatus {
        name: name.to_string(),
        source,
    };
    let mut attempts = 0;
    loop {
        let resource = api.get(name).await.map_err(write_failed)?;
        let before = resource.status.map(|s| s.replicas).unwrap_or_default();
        let mut replicas = before.clone();
        edit(&mut replicas);
        if replicas == before {
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": resource.metadata.resource_version},
            "status": {"replicas": replicas},
        });
        let params = PatchParams {
            field_manager: Some(replica.field_manager()),
            ..PatchParams::default()
        };
        match api.patch_status(name, &params, &Patch::Merge(patch)).await {
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < 3 => attempts += 1,
            written => return written.map(drop).map_err(write_failed),
        }
    }
}

fn error_policy(_: Arc<OperatorPlugin>, _: &Error, _: Arc<Context>) -> Action {
    Action::requeue(RETRY_AFTER_FAILURE)
}

/// Go-style durations (30s, 5m, 1h30m), as `metav1.Duration` fields take them.
fn poll_interval(spec: &OperatorPluginSpec) -> Result<Duration, Error> {
    let Some(value) = &spec.poll_interval else {
        return Ok(DEFAULT_POLL_INTERVAL);
    };
    humantime::parse_duration(value).map_err(|e| Error::PollInterval {
        value: value.clone(),
        problem: e.to_string(),
    })
}

async fn access(spec: &OperatorPluginSpec, config: &Config) -> Result<Access, Error> {
    let auth = match &spec.pull_secret {
        None => Credentials::Anonymous,
        Some(name) => {
            let secrets: Api<Secret> = Api::namespaced(config.client.clone(), &config.namespace);
            let secret = secrets
                .get(name)
                .await
                .map_err(|source| Error::PullSecret {
                    namespace: config.namespace.clone(),
                    name: name.clone(),
                    source,
                })?;
            let json = secret
                .data
                .and_then(|mut data| data.remove(".dockerconfigjson"))
                .ok_or_else(|| Error::PullSecretKey {
                    namespace: config.namespace.clone(),
                    name: name.clone(),
                })?;
            Credentials::DockerConfigJson {
                json: json.0,
                from: format!("Secret {}/{name}", config.namespace),
            }
        }
    };
    Ok(Access {
        auth,
        plain_http: spec.plain_http,
        ..Access::default()
    })
}

/// The keys `resource`'s artifact must be signed with, if it must be signed. When the policy
/// names `signatureKeys`, they are the only publishers trusted (an allow-list, as sigstore's
/// policy-controller and Kubewarden keep it): `spec.verify.keys` may choose among them, never
/// add one, so whoever may write an OperatorPlugin cannot vouch for their own artifact. Without
/// policy keys, `spec.verify.keys` pins the author's key: that answers a tampered registry, not
/// an untrusted author.
fn required_keys(
    resource: &OperatorPlugin,
    config: &Config,
) -> Result<Option<Vec<crate::signature::PublicKey>>, Error> {
    let rules = config.policy.rules(&resource.name_any());
    let own = resource
        .spec
        .verify
        .as_ref()
        .map(|v| v.keys.clone())
        .unwrap_or_default();
    trusted_keys(rules.require_signature, &own, &rules.signature_keys)
}

/// [`required_keys`] from the policy's `requireSignature` and `signatureKeys` and the
/// OperatorPlugin's `spec.verify.keys` (`own`).
fn trusted_keys(
    require_signature: bool,
    own: &[String],
    signature_keys: &[String],
) -> Result<Option<Vec<crate::signature::PublicKey>>, Error> {
    if !require_signature && own.is_empty() {
        return Ok(None);
    }
    let mut own_keys = Vec::new();
    for (index, pem) in own.iter().enumerate() {
        own_keys.push(crate::signature::PublicKey::from_pem(
            pem,
            &format!("spec.verify.keys[{index}]"),
        )?);
    }
    let mut trusted = Vec::new();
    for (index, pem) in signature_keys.iter().enumerate() {
        trusted.push(crate::signature::PublicKey::from_pem(
            pem,
            &format!("the policy's signatureKeys[{index}]"),
        )?);
    }
    if trusted.is_empty() {
        return Ok(Some(own_keys));
    }
    if own_keys.is_empty() {
        return Ok(Some(trusted));
    }
    for (index, key) in own_keys.iter().enumerate() {
        if !trusted.iter().any(|t| t.same_key(key)) {
            return Err(Error::UntrustedKey {
                index,
                fingerprint: key.fingerprint.clone(),
            });
        }
    }
    Ok(Some(own_keys))
}

/// Checks `digest`'s signatures against `keys`: those that verified it before (kept in the
/// store), else the registry's (kept once they verify). The key's fingerprint, or why not.
async fn verify(
    source: &str,
    digest: &str,
    keys: &[crate::signature::PublicKey],
    access: Option<&Access>,
    store: &DigestStore,
) -> Result<String, Error> {
    let refused = |refusal| Error::Refused {
        digest: digest.into(),
        refusal,
    };
    if let Some(kept) = store.signatures(digest)
        && let Ok(fingerprint) = crate::signature::verify(&kept, keys, digest)
    {
        return Ok(fingerprint);
    }
    let Some(access) = access else {
        return Err(refused(crate::signature::Refusal::Unsigned {
            digest: digest.into(),
            tag: crate::signature::signature_tag(digest),
        }));
    };
    let signatures = oci::pull_signatures(source, digest, access).await?;
    let fingerprint = crate::signature::verify(&signatures, keys, digest).map_err(refused)?;
    store.put_signatures(digest, &signatures)?;
    Ok(fingerprint)
}

/// What to serve: the digest, its bytes, and the key that signed it (if one must have).
struct Fetched {
    digest: String,
    bytes: Arc<[u8]>,
    signed_by: Option<String>,
}

/// The digest `resource` names now, verified, and its bytes: from the store if pulled
/// before, else from the registry.
async fn fetch(
    resource: &OperatorPlugin,
    context: &Context,
    poll: Duration,
) -> Result<Fetched, Error> {
    let config = &context.config;
    let source = &resource.spec.source;
    let keys = required_keys(resource, config)?;
    let access = access(&resource.spec, config).await?;
    let digest = context
        .resolve(&resource.name_any(), source, &access, poll)
        .await?;
    let signed_by = match &keys {
        Some(keys) => Some(verify(source, &digest, keys, Some(&access), &config.store).await?),
        None => None,
    };
    if let Some(bytes) = config.store.get(&digest) {
        return Ok(Fetched {
            digest,
            bytes,
            signed_by,
        });
    }
    let pinned = format!("{}@{digest}", source.split('@').next().unwrap_or(source));
    let pulled = oci::pull(&pinned, &access).await?;
    if pulled.digest != digest {
        return Err(Error::DigestMismatch {
            reference: source.clone(),
            resolved: digest,
            served: pulled.digest,
        });
    }
    config.store.put(&digest, &pulled.bytes)?;
    Ok(Fetched {
        digest,
        bytes: pulled.bytes.into(),
        signed_by,
    })
}

/// After a restart with the registry unreachable: what this resource served before, from
/// the store (verified against the signatures kept with it, if it must be signed).
async fn from_store(resource: &OperatorPlugin, digest: &str, config: &Config) -> Option<Fetched> {
    let bytes = config.store.get(digest)?;
    let signed_by = match required_keys(resource, config).ok()? {
        Some(keys) => Some(
            verify(&resource.spec.source, digest, &keys, None, &config.store)
                .await
                .ok()?,
        ),
        None => None,
    };
    Some(Fetched {
        digest: digest.into(),
        bytes,
        signed_by,
    })
}

async fn reconcile(resource: Arc<OperatorPlugin>, context: Arc<Context>) -> Result<Action, Error> {
    let config = &context.config;
    let name = resource.name_any();
    let previous = resource.status.clone().unwrap_or_default();
    let mut status = OperatorPluginStatus {
        observed_generation: resource.metadata.generation,
        ..previous.clone()
    };
    let poll = match poll_interval(&resource.spec) {
        Ok(poll) => poll,
        Err(error) => {
            set_condition(
                &mut status,
                "Pulled",
                "False",
                "InvalidSpec",
                &error.to_string(),
            );
            write_status(&resource, &previous, status, config).await?;
            return Ok(Action::await_change());
        }
    };
    let requeue = match fetch(&resource, &context, poll).await {
        Ok(fetched) => {
            set_condition(
                &mut status,
                "Pulled",
                "True",
                "Pulled",
                &format!("{} is {}", resource.spec.source, fetched.digest),
            );
            offer(&mut status, config, &resource, fetched);
            // A digest never changes; a tag is resolved again.
            if resource.spec.source.contains('@') {
                None
            } else {
                Some(poll)
            }
        }
        Err(error) => {
            tracing::warn!(operator_plugin = %name, %error, "cannot serve the plugin's artifact; what serves keeps serving");
            // A host that restarted while the registry is down serves what it pulled before.
            if let Some(digest) = &previous.digest
                && config.cluster.offered_digest(&name).is_none()
                && let Some(fetched) = from_store(&resource, digest, config).await
            {
                offer(&mut status, config, &resource, fetched);
            }
            config
                .cluster
                .set_policy(&name, resource.spec.policy.clone());
            let keeps = match config.cluster.offered_digest(&name) {
                Some(digest) => format!("; {digest} keeps serving"),
                None => String::new(),
            };
            let message = format!("{error}{keeps}");
            match &error {
                Error::Refused { refusal, digest } => {
                    set_condition(
                        &mut status,
                        "Pulled",
                        "True",
                        "Pulled",
                        &format!("{} is {digest}", resource.spec.source),
                    );
                    set_condition(&mut status, "Verified", "False", refusal.reason(), &message);
                }
                Error::Key(_) => {
                    set_condition(&mut status, "Verified", "False", "InvalidKey", &message)
                }
                Error::UntrustedKey { .. } => {
                    set_condition(&mut status, "Verified", "False", "UntrustedKey", &message)
                }
                _ => set_condition(&mut status, "Pulled", "False", "PullFailed", &message),
            }
            Some(poll.min(RETRY_AFTER_FAILURE))
        }
    };
    write_status(&resource, &previous, status, config).await?;
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// Offers `fetched` to the registry and says so in `status`.
fn offer(
    status: &mut OperatorPluginStatus,
    config: &Config,
    resource: &OperatorPlugin,
    fetched: Fetched,
) {
    let name = resource.name_any();
    let name = name.as_str();
    let content_hash = crate::signature::sha256_digest(&fetched.bytes);
    config.cluster.offer(
        name,
        ClusterOffer {
            digest: fetched.digest.clone(),
            bytes: fetched.bytes,
            policy: resource.spec.policy.clone(),
            approval: resource
                .annotations()
                .get(crate::labels::APPROVE_ANNOTATION)
                .cloned(),
        },
    );
    match &fetched.signed_by {
        Some(key) => set_condition(
            status,
            "Verified",
            "True",
            "Verified",
            &format!("{} is signed by key {key}", fetched.digest),
        ),
        None => set_condition(
            status,
            "Verified",
            "Unknown",
            "NotRequired",
            "no key is given and the policy does not require a signature",
        ),
    }
    status.short_digest = fetched
        .digest
        .strip_prefix("sha256:")
        .map(|hex| hex.chars().take(12).collect());
    // A new digest: the one that served until now is the one to go back to.
    let was_serving = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Serving" && c.status == "True");
    if was_serving && status.digest.as_deref() != Some(fetched.digest.as_str()) {
        status.previous_digest = status.digest.take();
    }
    status.digest = Some(fetched.digest);
    serving_condition(status, config, name, &content_hash);
}

/// `Serving` from what the registry made of the content offered.
fn serving_condition(
    status: &mut OperatorPluginStatus,
    config: &Config,
    name: &str,
    content_hash: &str,
) {
    let hex = content_hash.trim_start_matches("sha256:");
    let outcome = config.cluster.outcome(name);
    // The rollout's conditions: True for the content offered, False once it no longer is.
    let rollout = match &outcome {
        Some((
            Outcome::Held {
                content_hash,
                reason,
                ..
            },
            _,
        )) if content_hash == hex => Some(("RolloutHeld", reason)),
        Some((
            Outcome::Canary {
                content_hash,
                progress,
                ..
            },
            _,
        )) if content_hash == hex => Some(("RolloutProgressing", progress)),
        Some((
            Outcome::RolledBack {
                content_hash,
                reason,
                ..
            },
            _,
        )) if content_hash == hex => Some(("RolledBack", reason)),
        _ => None,
    };
    for kind in ["RolloutHeld", "RolloutProgressing", "RolledBack"] {
        match rollout {
            Some((now, message)) if now == kind => {
                set_condition(status, kind, "True", kind, message)
            }
            _ if status.conditions.iter().any(|c| c.type_ == kind) => set_condition(
                status,
                kind,
                "False",
                "NotNow",
                "no version of this resource is in this state now",
            ),
            _ => {}
        }
    }
    match outcome {
        Some((Outcome::Serving { content_hash }, served)) if content_hash == hex => {
            if let Some(served) = served {
                status.plugin = Some(served.plugin);
                status.version = Some(served.version);
            }
            let message = format!(
                "serving {} {}",
                status.plugin.as_deref().unwrap_or(name),
                status.version.as_deref().unwrap_or_default()
            );
            set_condition(status, "Serving", "True", "Serving", message.trim_end());
        }
        Some((
            Outcome::Rejected {
                content_hash,
                error,
                serving,
            },
            _,
        )) if content_hash == hex => {
            let keeps = if serving.is_some() {
                "; what served before keeps serving"
            } else {
                ""
            };
            set_condition(
                status,
                "Serving",
                "False",
                "Rejected",
                &format!("{error}{keeps}"),
            );
        }
        Some((Outcome::Held { content_hash, .. }, _)) if content_hash == hex => set_condition(
            status,
            "Serving",
            "False",
            "RolloutHeld",
            "held before serving until approved (see the RolloutHeld condition); what served \
             before keeps serving",
        ),
        Some((Outcome::Canary { content_hash, .. }, _)) if content_hash == hex => set_condition(
            status,
            "Serving",
            "False",
            "Canary",
            "serving its canary parents (see the RolloutProgressing condition); what served \
             before serves the others",
        ),
        Some((Outcome::RolledBack { content_hash, .. }, _)) if content_hash == hex => {
            set_condition(
                status,
                "Serving",
                "False",
                "RolledBack",
                "failed on its canary parents and rolled back (see the RolledBack condition); \
                 what served before serves every parent",
            )
        }
        _ => set_condition(
            status,
            "Serving",
            "False",
            "Loading",
            "the host is loading this version",
        ),
    }
}

fn set_condition(
    status: &mut OperatorPluginStatus,
    kind: &str,
    value: &str,
    reason: &str,
    message: &str,
) {
    let generation = status.observed_generation;
    if let Some(existing) = status.conditions.iter_mut().find(|c| c.type_ == kind) {
        if existing.status != value {
            existing.last_transition_time = Time(now());
        }
        existing.status = value.into();
        existing.reason = reason.into();
        existing.message = message.into();
        existing.observed_generation = generation;
        return;
    }
    status.conditions.push(Condition {
        type_: kind.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(now()),
    });
}

fn now() -> k8s_openapi::jiff::Timestamp {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second).unwrap_or(now)
}

/// Writes the status if it changed; a standby leaves it to the leader.
async fn write_status(
    resource: &OperatorPlugin,
    previous: &OperatorPluginStatus,
    status: OperatorPluginStatus,
    config: &Config,
) -> Result<(), Error> {
    if *previous == status || !config.leadership.may_write() {
        return Ok(());
    }
    let api: Api<OperatorPlugin> = Api::all(config.client.clone());
    let name = resource.name_any();
    let events = rollout_events(previous, &status);
    api.patch_status(
        &name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        // The replicas' entries are theirs: the leader's write leaves them out.
        &Patch::Merge(json!({"status": OperatorPluginStatus {
            replicas: Vec::new(),
            ..status
        }})),
    )
    .await
    .map_err(|source| Error::WriteStatus { name, source })?;
    if events.is_empty() {
        return Ok(());
    }
    let recorder = Recorder::new(
        config.client.clone(),
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let reference = resource.object_ref(&());
    for (type_, reason, note) in events {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "Rollout".into(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "cannot publish an event on the OperatorPlugin");
        }
    }
    Ok(())
}

/// The events a status change is worth, as `kubectl describe operatorplugin` shows them: a
/// version held, a canary started, promoted or rolled back.
fn rollout_events(
    previous: &OperatorPluginStatus,
    now: &OperatorPluginStatus,
) -> Vec<(EventType, &'static str, String)> {
    let condition = |status: &OperatorPluginStatus, kind: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")
            .map(|c| c.message.clone())
    };
    let digest = now.digest.as_deref().unwrap_or("the new version");
    let same_digest = previous.digest == now.digest;
    let mut events = Vec::new();
    for (kind, type_, reason) in [
        ("RolloutHeld", EventType::Warning, "RolloutHeld"),
        ("RolloutProgressing", EventType::Normal, "CanaryStarted"),
        ("RolledBack", EventType::Warning, "RolledBack"),
    ] {
        if let Some(message) = condition(now, kind)
            && (condition(previous, kind).is_none() || !same_digest)
        {
            events.push((type_, reason, format!("{digest}: {message}")));
        }
    }
    if condition(previous, "RolloutProgressing").is_some()
        && condition(now, "RolloutProgressing").is_none()
        && condition(now, "Serving").is_some()
        && same_digest
    {
        let serving = condition(now, "Serving").unwrap_or_default();
        events.push((
            EventType::Normal,
            "CanaryPromoted",
            format!("{digest}: {serving}"),
        ));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status serving `digest` with these conditions (`type`, `status`, `message`).
    fn status_of(digest: &str, conditions: &[(&str, &str, &str)]) -> OperatorPluginStatus {
        let mut status = OperatorPluginStatus {
            digest: Some(digest.into()),
            ..OperatorPluginStatus::default()
        };
        for (kind, value, message) in conditions {
            set_condition(&mut status, kind, value, kind, message);
        }
        status
    }

    #[test]
    fn rollout_conditions_that_turn_true_are_events_once() {
        let reasons = |previous, now| -> Vec<&'static str> {
            rollout_events(previous, now)
                .into_iter()
                .map(|(_, reason, _)| reason)
                .collect()
        };
        let serving = status_of("sha256:v1", &[("Serving", "True", "serving memcached")]);
        let canary = status_of(
            "sha256:v2",
            &[
                ("Serving", "False", "canary"),
                ("RolloutProgressing", "True", "1 of 2"),
            ],
        );
        assert_eq!(reasons(&serving, &canary), ["CanaryStarted"]);
        // The same condition again (its message moving on) is no new event.
        let further = status_of(
            "sha256:v2",
            &[
                ("Serving", "False", "canary"),
                ("RolloutProgressing", "True", "2 of 2"),
            ],
        );
        assert!(reasons(&canary, &further).is_empty());
        let promoted = status_of(
            "sha256:v2",
            &[
                ("Serving", "True", "serving memcached"),
                ("RolloutProgressing", "False", "no version"),
            ],
        );
        assert_eq!(reasons(&further, &promoted), ["CanaryPromoted"]);
        let rolled_back = status_of(
            "sha256:v3",
            &[
                ("Serving", "False", "rolled back"),
                ("RolledBack", "True", "ns/m-0: PruneHeld"),
            ],
        );
        let events = rollout_events(&promoted, &rolled_back);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, EventType::Warning);
        assert!(events[0].2.contains("sha256:v3") && events[0].2.contains("PruneHeld"));
        let held = status_of("sha256:v4", &[("RolloutHeld", "True", "would delete 8")]);
        assert_eq!(reasons(&promoted, &held), ["RolloutHeld"]);
        assert!(reasons(&held, &held).is_empty());
    }

    #[test]
    fn the_crd_is_cluster_scoped_with_the_columns_kubectl_shows() {
        let crd = OperatorPlugin::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        let columns: Vec<String> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(columns, ["Digest", "Version", "Serving", "Age"]);
        // What serves, not True/False: the Serving condition's reason (Serving, Canary,
        // RolloutHeld, RolledBack, Rejected, Loading).
        let serving = &crd.spec.versions[0]
            .additional_printer_columns
            .as_ref()
            .unwrap()[2];
        assert_eq!(
            serving.json_path,
            ".status.conditions[?(@.type==\"Serving\")].reason"
        );
    }

    #[test]
    fn the_policys_signature_keys_are_the_only_publishers_trusted_when_it_names_any() {
        let (_, admin) = crate::signature::PrivateKey::generate();
        let (_, author) = crate::signature::PrivateKey::generate();
        let fingerprints = |keys: Option<Vec<crate::signature::PublicKey>>| -> Vec<String> {
            keys.unwrap_or_default()
                .into_iter()
                .map(|k| k.fingerprint)
                .collect()
        };
        let fingerprint = |pem: &str| {
            crate::signature::PublicKey::from_pem(pem, "k")
                .unwrap()
                .fingerprint
        };
        // No policy keys: the OperatorPlugin pins its author's key (a tampered registry).
        let pinned = trusted_keys(false, std::slice::from_ref(&author), &[]).unwrap();
        assert_eq!(fingerprints(pinned), [fingerprint(&author)]);
        assert!(trusted_keys(false, &[], &[]).unwrap().is_none());
        // Policy keys: the only publishers; spec.verify.keys may choose among them only.
        let admin_keys = std::slice::from_ref(&admin);
        let only_admin = trusted_keys(true, &[], admin_keys).unwrap();
        assert_eq!(fingerprints(only_admin), [fingerprint(&admin)]);
        let chosen = trusted_keys(true, admin_keys, admin_keys).unwrap();
        assert_eq!(fingerprints(chosen), [fingerprint(&admin)]);
        let vouched = trusted_keys(true, &[admin.clone(), author.clone()], admin_keys);
        match vouched {
            Err(Error::UntrustedKey {
                index,
                fingerprint: f,
            }) => {
                assert_eq!((index, f), (1, fingerprint(&author)));
            }
            other => panic!("an author's own key was trusted: {other:?}"),
        }
    }

    #[test]
    fn poll_intervals_are_go_durations() {
        let spec = |value: &str| OperatorPluginSpec {
            source: "r/p:1".into(),
            poll_interval: Some(value.into()),
            plain_http: false,
            pull_secret: None,
            verify: None,
            policy: None,
        };
        assert_eq!(
            poll_interval(&spec("30s")).unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(
            poll_interval(&spec("1h30m")).unwrap(),
            Duration::from_secs(5400)
        );
        let error = poll_interval(&spec("often")).unwrap_err().to_string();
        assert!(error.contains("\"often\" is not a duration"), "{error}");
    }
}
