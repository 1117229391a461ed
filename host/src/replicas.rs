//! What each replica of the host serves, said in a Lease of its namespace for `kubectl
//! operator-host plugins`: every plugin with its version, digest, contract and rollout state.
//!
//! Every replica (leader, standby or shard) keeps one annotation of the Lease `<lease>-replicas`
//! ([`report_lease_name`]): a [`ReplicaReport`] as JSON. It writes it when what it serves
//! changes and again every [`REPORT_INTERVAL`], by server-side apply under a field manager of
//! its own (so replicas never overwrite each other), and applies it away when it stops; the
//! leader drops the annotations of replicas that stopped renewing for [`REPORT_EXPIRY`]
//! (killed, or their node lost). A Lease, because presence is what Kubernetes keeps in Leases,
//! under a name known in advance, so the host's Role grants that one object and no other
//! Lease. The report is the host's bookkeeping, not a reconcile's write: a standby writes it
//! too, with the election's unfenced client.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::kinds::Kind;
use crate::leader::{Leadership, Role};

/// How often each replica renews its report when nothing changed.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(60);
/// A report not renewed for this long is of a replica that is gone: the leader drops it, and
/// `kubectl operator-host` shows it as expired meanwhile.
pub const REPORT_EXPIRY: Duration = Duration::from_secs(3 * 60);
/// How long a stopping replica tries to take its report away.
const WITHDRAW_TIMEOUT: Duration = Duration::from_millis(1500);
/// How soon a failed write is tried again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);
/// How long one write may take: an API server that does not answer must not hold the report
/// task (nor, through it, a stopping host).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The label of report Leases: the name of the host deployment's election Lease.
pub const REPORT_LABEL: &str = "operator-host.dev/replicas-of";
/// The prefix of each replica's annotation; the name is a hash of its identity (an identity
/// may be longer than an annotation name may).
pub const ANNOTATION_PREFIX: &str = "replicas.operator-host.dev/";

/// Why a report could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot write this replica's report to Lease {namespace}/{name}: {source}; the host \
         needs `create` on leases and `get` and `patch` on that Lease in its namespace (see \
         `operator-host rbac`)"
    )]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing this replica's report to Lease {namespace}/{name} took longer than {after:?}")]
    WriteTimeout {
        namespace: String,
        name: String,
        after: Duration,
    },
    #[error("cannot list the Leases of operator-host replicas ({REPORT_LABEL}): {0}")]
    List(#[source] kube::Error),
}

/// Where a host deployment's replicas report, and who this replica is.
#[derive(Clone)]
pub struct ReportConfig {
    /// The host's namespace (the election's).
    pub namespace: String,
    /// The election Lease's name: the report Lease is named after it.
    pub lease: String,
    /// This replica's identity (the election's).
    pub identity: String,
    /// A client that writes while this replica stands by (the election's unfenced one).
    pub client: Client,
    /// The namespaces it reconciles parents in; empty: all.
    pub namespaces: Vec<String>,
    /// With sharding: its shard.
    pub shard: Option<String>,
}

impl std::fmt::Debug for ReportConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportConfig")
            .field("namespace", &self.namespace)
            .field("lease", &self.lease)
            .field("identity", &self.identity)
            .finish()
    }
}

/// The report Lease of the host deployment whose election Lease is `lease`.
pub fn report_lease_name(lease: &str) -> String {
    format!("{lease}-replicas")
}

/// The annotation of replica `identity`.
pub fn annotation(identity: &str) -> String {
    let hash = hex::encode(Sha256::digest(identity.as_bytes()));
    format!("{ANNOTATION_PREFIX}{}", &hash[..16])
}

/// What one replica says it serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaReport {
    /// Its identity in the election.
    pub replica: String,
    /// `leader`, `standby`, or `unelected` (the only replica).
    pub role: String,
    /// The namespaces it reconciles parents in; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// With sharding: its shard, the value of the parents' shard label it reconciles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// RFC 3339: when it last said so.
    pub reported: String,
    pub plugins: Vec<PluginReport>,
}

/// One plugin of a replica: what serves, and what became of the newest content offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginReport {
    /// The plugin's name (its file's, or its OperatorPlugin's).
    pub name: String,
    /// `file <name>.wasm` or `OperatorPlugin <name>`.
    pub source: String,
    /// `Serving`, `Pending`, `Rejected`, `Held`, `Canary` or `RolledBack`.
    pub state: String,
    /// Why it is not simply serving: the error, the hold, the canary's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The SHA-256 of the content that is rejected, held or in canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    /// The version that serves, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingReport>,
}

/// The version of a plugin that serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServingReport {
    pub version: String,
    /// Hex SHA-256 of the component.
    pub sha256: String,
    /// The OCI manifest digest, for a plugin of an OperatorPlugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The contract version it speaks, e.g. `0.2.0`.
    pub contract: String,
    /// `baseline` or `optimized`.
    pub tier: String,
    pub parent: Kind,
    pub children: Vec<Kind>,
}

impl ReplicaReport {
    /// Whether the replica stopped renewing it (`now` and `reported` as RFC 3339 instants).
    pub fn age(&self, now: Timestamp) -> Option<Duration> {
        let reported: Timestamp = self.reported.parse().ok()?;
        Duration::try_from(now.duration_since(reported)).ok()
    }

    pub fn expired(&self, now: Timestamp) -> bool {
        self.age(now).is_some_and(|age| age > REPORT_EXPIRY)
    }

    /// Whether the replica reconciles parents in `namespace`.
    pub fn serves_namespace(&self, namespace: &str) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|ns| ns == namespace)
    }
}

/// A report Lease as read: the host deployment (`namespace/lease`) and its replicas' reports.
#[derive(Debug, Clone)]
pub struct HostDeployment {
    pub namespace: String,
    /// The election Lease's name (the report Lease's label).
    pub lease: String,
    pub reports: Vec<ReplicaReport>,
}

/// Every host deployment's reports, in `namespace` or in all namespaces; annotations that are
/// not reports (or not readable) are skipped.
pub async fn read(client: &Client, namespace: Option<&str>) -> Result<Vec<HostDeployment>, Error> {
    let api: Api<Lease> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let leases = api
        .list(&ListParams::default().labels(REPORT_LABEL))
        .await
        .map_err(Error::List)?;
    Ok(leases
        .items
        .into_iter()
        .map(|lease| HostDeployment {
            namespace: lease.namespace().unwrap_or_default(),
            lease: lease
                .labels()
                .get(REPORT_LABEL)
                .cloned()
                .unwrap_or_default(),
            reports: reports_of(&lease),
        })
        .collect())
}

fn reports_of(lease: &Lease) -> Vec<ReplicaReport> {
    let mut reports: Vec<ReplicaReport> = lease
        .annotations()
        .iter()
        .filter(|(key, _)| key.starts_with(ANNOTATION_PREFIX))
        .filter_map(|(_, value)| serde_json::from_str(value).ok())
        .collect();
    reports.sort_by(|a, b| a.replica.cmp(&b.replica));
    reports
}

/// Writes this replica's report whenever `plugins` changes, its role changes, or it is due
/// for renewal, until `stop`; then takes it away. A failed write is logged and tried again:
/// serving never waits on the report.
pub async fn run(
    config: ReportConfig,
    mut plugins: tokio::sync::watch::Receiver<Vec<PluginReport>>,
    leadership: Leadership,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut roles = leadership.changes();
    let mut last_error: Option<String> = None;
    tokio::pin!(stop);
    loop {
        let report = ReplicaReport {
            replica: config.identity.clone(),
            role: role_name(&roles.borrow_and_update()),
            namespaces: config.namespaces.clone(),
            shard: config.shard.clone(),
            reported: now_rfc3339(),
            plugins: plugins.borrow_and_update().clone(),
        };
        let leads = leadership.role() == Role::Leader;
        let written = tokio::select! {
            () = &mut stop => break,
            written = tokio::time::timeout(WRITE_TIMEOUT, write(&config, Some(&report), leads)) => {
                written.unwrap_or_else(|_| Err(Error::WriteTimeout {
                    namespace: config.namespace.clone(),
                    name: report_lease_name(&config.lease),
                    after: WRITE_TIMEOUT,
                }))
            }
        };
        let pause = match written {
            Ok(()) => {
                if last_error.take().is_some() {
                    tracing::info!("this replica's report is written again");
                }
                REPORT_INTERVAL
            }
            Err(error) => {
                let error = error.to_string();
                // Said once, not every retry.
                if last_error.as_ref() != Some(&error) {
                    tracing::warn!(%error, "kubectl operator-host cannot see this replica");
                }
                last_error = Some(error);
                RETRY_AFTER_FAILURE
            }
        };
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(pause) => {}
            Ok(()) = plugins.changed() => {}
            Ok(()) = roles.changed() => {}
        }
    }
    let _ = tokio::time::timeout(WITHDRAW_TIMEOUT, write(&config, None, false)).await;
}

fn now_rfc3339() -> String {
    let now = Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(now)
        .to_string()
}

fn role_name(role: &Role) -> String {
    match role {
        Role::Unelected => "unelected",
        Role::Leader => "leader",
        Role::Standby { .. } => "standby",
    }
    .into()
}

/// Applies this replica's annotation (`None`: without it, which takes it away); the leader
/// also drops expired reports of others.
async fn write(
    config: &ReportConfig,
    report: Option<&ReplicaReport>,
    leads: bool,
) -> Result<(), Error> {
    let name = report_lease_name(&config.lease);
    let api: Api<Lease> = Api::namespaced(config.client.clone(), &config.namespace);
    let failed = |source| Error::Write {
        namespace: config.namespace.clone(),
        name: name.clone(),
        source,
    };
    let mut annotations = BTreeMap::new();
    if let Some(report) = report {
        let value = serde_json::to_string(report).expect("a report serializes");
        annotations.insert(annotation(&config.identity), value);
    }
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": {REPORT_LABEL: config.lease},
            "annotations": annotations,
        },
    });
    let manager = field_manager(&config.identity);
    let written = api
        .patch(
            &name,
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(&lease),
        )
        .await
        .map_err(failed)?;
    if leads {
        let now = Timestamp::now();
        let expired: BTreeMap<String, Option<String>> = written
            .annotations()
            .iter()
            .filter(|(key, value)| {
                key.starts_with(ANNOTATION_PREFIX)
                    && serde_json::from_str::<ReplicaReport>(value)
                        .map_or(true, |report| report.expired(now))
            })
            .map(|(key, _)| (key.clone(), None))
            .collect();
        if !expired.is_empty() {
            // A merge patch: the annotations are other managers', which an apply cannot drop.
            let patch = json!({"metadata": {"annotations": expired}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(failed)?;
        }
    }
    Ok(())
}

/// A field manager of this replica's own (at most 128 characters, as the API server allows).
fn field_manager(identity: &str) -> String {
    let manager = format!("{}-replica-{identity}", crate::labels::FIELD_MANAGER);
    manager.chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(reported: &str) -> ReplicaReport {
        ReplicaReport {
            replica: "host-0_1-a".into(),
            role: "leader".into(),
            namespaces: vec![],
            shard: None,
            reported: reported.into(),
            plugins: vec![],
        }
    }

    #[test]
    fn a_report_expires_three_minutes_after_it_was_renewed() {
        let now: Timestamp = "2026-12-07T12:10:00Z".parse().unwrap();
        assert!(!report("2026-12-07T12:07:30Z").expired(now));
        assert!(report("2026-12-07T12:06:59Z").expired(now));
        assert_eq!(
            report("2026-12-07T12:09:00Z").age(now),
            Some(Duration::from_secs(60))
        );
    }

    #[test]
    fn each_identity_has_an_annotation_name_of_its_own_whatever_its_length() {
        let long = "a".repeat(300);
        let key = annotation(&long);
        assert!(key.len() - ANNOTATION_PREFIX.len() <= 63, "{key}");
        assert_ne!(annotation("host-0_1-a"), annotation("host-0_1-b"));
        assert!(field_manager(&long).len() <= 128);
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let written = ReplicaReport {
            plugins: vec![PluginReport {
                name: "memcached".into(),
                source: "file memcached.wasm".into(),
                state: "Held".into(),
                detail: Some("would delete 1 Deployment".into()),
                candidate: Some("ab".into()),
                serving: Some(ServingReport {
                    version: "0.2.0".into(),
                    sha256: "cd".into(),
                    digest: None,
                    contract: "0.2.0".into(),
                    tier: "optimized".into(),
                    parent: Kind {
                        group: "cache.example.com".into(),
                        version: "v1alpha1".into(),
                        kind: "Memcached".into(),
                        plural: "memcacheds".into(),
                        namespaced: true,
                    },
                    children: vec![],
                }),
            }],
            ..report("2026-12-07T12:10:00Z")
        };
        let mut lease = Lease::default();
        lease.metadata.annotations = Some(BTreeMap::from([
            (
                annotation(&written.replica),
                serde_json::to_string(&written).unwrap(),
            ),
            (format!("{ANNOTATION_PREFIX}broken"), "{".into()),
            ("other".into(), "{}".into()),
        ]));
        assert_eq!(reports_of(&lease), vec![written]);
    }
}
