//! The oracle of the fault-injection tests, in the spirit of Anvil's eventually-stable
//! reconciliation: once a fault has ended, the live state must be the fixed point of the plugin.
//!
//! [`check`] reads the parent and its children from the API server and runs the plugin on
//! exactly that (the same pure `plan` function `render` and the host use). The state is
//! converged when the plan has nothing left to do: every desired child exists and carries every
//! field the plugin sets with the value it sets (a create-only child need only exist), no owned
//! child is left to prune, and the live status is the status the plan would write.
//! [`Snapshot`] adds what the plan cannot see: which children survived (same UIDs) and that
//! objects the host does not own were not touched.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use operator_host::plugin::Plugin;
use operator_host::runtime::{RelatedObjects, UpdateStrategy};
use operator_host::{labels, plan};
use serde_json::Value;
use tokio::task::JoinHandle;

/// Why the live state is not (yet) the plugin's fixed point.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {what}: {source}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("the plugin cannot plan for the live parent: {0}")]
    Plan(#[from] plan::PlanError),
    #[error("{kind} {name} is missing")]
    MissingChild { kind: String, name: String },
    #[error("{kind} {name}: {path} is {live}, the plugin sets {desired}")]
    ChildDiffers {
        kind: String,
        name: String,
        path: String,
        live: Value,
        desired: Value,
    },
    #[error("owned children are left to prune: {0:?}")]
    LeftToPrune(Vec<String>),
    #[error("the status is not what the plugin computes:\nlive:    {live}\ndesired: {desired}")]
    StatusDiffers { live: Value, desired: Value },
    #[error("{0} still exists")]
    StillThere(String),
    #[error("{0} does not exist")]
    ParentMissing(String),
}

/// What the oracle needs to know about one plugin's parents in one namespace.
pub struct Oracle<'a> {
    pub client: Client,
    pub plugin: &'a Plugin,
    pub namespace: &'a str,
}

fn resource(kind: &operator_host::kinds::Kind) -> ApiResource {
    kind.api_resource()
}

impl Oracle<'_> {
    fn api(&self, kind: &operator_host::kinds::Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), self.namespace, &resource(kind))
    }

    /// The live parent `name` and the children the host manages for it.
    async fn read(&self, name: &str) -> Result<Option<(Value, Vec<Value>)>, Error> {
        let parents = self.api(&self.plugin.decl.parent);
        let parent = parents.get_opt(name).await.map_err(|source| Error::Read {
            what: format!("{} {name}", self.plugin.decl.parent.kind),
            source,
        })?;
        let Some(parent) = parent else {
            return Ok(None);
        };
        let uid = parent.uid().unwrap_or_default();
        let mut children = Vec::new();
        for kind in &self.child_kinds() {
            let owned = self.owned(kind, &uid).await?;
            children.extend(owned.iter().filter_map(|child| kind.to_json(child)));
        }
        Ok(Some((
            serde_json::to_value(&parent).unwrap_or(Value::Null),
            children,
        )))
    }

    /// The objects the plugin's related declarations choose for `parent`, as the host passes
    /// them (chosen and viewed by the host's own `related::objects_for`).
    async fn related(&self, parent: &Value) -> Result<Vec<RelatedObjects>, Error> {
        let declarations = &self.plugin.decl.related;
        let mut candidates = Vec::with_capacity(declarations.len());
        for declaration in declarations {
            let listed = self
                .api(&declaration.kind)
                .list(&ListParams::default())
                .await
                .map_err(|source| Error::Read {
                    what: format!("the related {}s", declaration.kind.kind),
                    source,
                })?;
            let values: Vec<Value> = listed
                .items
                .iter()
                .filter_map(|object| declaration.kind.to_json(object))
                .collect();
            candidates.push(values);
        }
        Ok(operator_host::related::objects_for(
            declarations,
            parent,
            |index| candidates[index].clone(),
        ))
    }

    /// The child kinds the host watches for the plugin under the default policy (a kind the
    /// policy forbids is never applied, and may not even be namespaced).
    fn child_kinds(&self) -> Vec<operator_host::kinds::Kind> {
        operator_host::policy::Policy::default().allowed_children(&self.plugin.decl)
    }

    /// The host's children of the parent with `uid` (of every kind it watches), with their
    /// `apiVersion` and `kind` set.
    pub async fn children_of(&self, uid: &str) -> Result<Vec<Value>, Error> {
        let mut children = Vec::new();
        for kind in &self.child_kinds() {
            let owned = self.owned(kind, uid).await?;
            children.extend(owned.iter().filter_map(|child| kind.to_json(child)));
        }
        Ok(children)
    }

    /// The objects of `kind` labelled as the host's children of the parent with `uid`.
    async fn owned(
        &self,
        kind: &operator_host::kinds::Kind,
        uid: &str,
    ) -> Result<Vec<DynamicObject>, Error> {
        let selector = format!(
            "{}={},{}={uid}",
            labels::MANAGED_BY_LABEL,
            labels::MANAGED_BY,
            labels::PARENT_UID_LABEL
        );
        let listed = self
            .api(kind)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::Read {
                what: format!("the {kind} children"),
                source,
            })?;
        Ok(listed.items)
    }

    /// Whether parent `name` and its children are the plugin's fixed point (see the module
    /// documentation); the first difference otherwise.
    pub async fn check(&self, name: &str) -> Result<(), Error> {
        let Some((parent, observed)) = self.read(name).await? else {
            return Err(Error::ParentMissing(format!(
                "{} {name}",
                self.plugin.decl.parent.kind
            )));
        };
        let related = self.related(&parent).await?;
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let planned = self.plugin.plan(&parent, &observed, related, &now)?;
        for child in &planned.apply {
            let desired = &child.object;
            let kind = desired["kind"].as_str().unwrap_or_default();
            let child_name = desired["metadata"]["name"].as_str().unwrap_or_default();
            let live = observed
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == child_name)
                .ok_or_else(|| Error::MissingChild {
                    kind: kind.into(),
                    name: child_name.into(),
                })?;
            // Create-only: the host never writes it once it exists, whatever the plugin sets.
            if child.update == UpdateStrategy::CreateOnly {
                continue;
            }
            if let Some((path, live, desired)) = first_difference(desired, live, String::new()) {
                return Err(Error::ChildDiffers {
                    kind: kind.into(),
                    name: child_name.into(),
                    path,
                    live,
                    desired,
                });
            }
        }
        if !planned.prune.is_empty() {
            return Err(Error::LeftToPrune(
                planned
                    .prune
                    .iter()
                    .map(|t| format!("{}/{}", t.kind.kind, t.name))
                    .collect(),
            ));
        }
        let live_status = parent.get("status").cloned().unwrap_or(Value::Null);
        if live_status != planned.status {
            return Err(Error::StatusDiffers {
                live: live_status,
                desired: planned.status,
            });
        }
        Ok(())
    }

    /// Waits until [`Oracle::check`] passes for `name`; returns how long that took, or the
    /// last difference after `bound`.
    pub async fn converges(&self, name: &str, bound: Duration) -> Result<Duration, Error> {
        let started = Instant::now();
        loop {
            match self.check(name).await {
                Ok(()) => return Ok(started.elapsed()),
                Err(error) if started.elapsed() >= bound => return Err(error),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Waits until parent `name` and every child the host made for it are gone.
    pub async fn gone(&self, name: &str, uid: &str, bound: Duration) -> Result<Duration, Error> {
        let started = Instant::now();
        loop {
            let mut left = Vec::new();
            if self.read(name).await?.is_some() {
                left.push(format!("{} {name}", self.plugin.decl.parent.kind));
            }
            for kind in &self.child_kinds() {
                for child in self.owned(kind, uid).await? {
                    // Children being deleted by the garbage collector count as gone.
                    if child.metadata.deletion_timestamp.is_none() {
                        left.push(format!("{} {}", kind.kind, child.name_any()));
                    }
                }
            }
            if left.is_empty() {
                return Ok(started.elapsed());
            }
            if started.elapsed() >= bound {
                return Err(Error::StillThere(left.join(", ")));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The UIDs of parent `name`'s children, by `Kind/name`.
    pub async fn child_uids(&self, name: &str) -> Result<BTreeMap<String, String>, Error> {
        let Some((_, children)) = self.read(name).await? else {
            return Ok(BTreeMap::new());
        };
        Ok(uids(&children))
    }
}

/// The UIDs of `children`, by `Kind/name`.
pub fn uids(children: &[Value]) -> BTreeMap<String, String> {
    children
        .iter()
        .map(|c| {
            (
                format!(
                    "{}/{}",
                    c["kind"].as_str().unwrap_or_default(),
                    c["metadata"]["name"].as_str().unwrap_or_default()
                ),
                c["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// The first place where `live` lacks what `desired` sets: maps key by key, lists element by
/// element (of the same length), everything else equal. `None` when `live` carries all of it.
pub fn first_difference(
    desired: &Value,
    live: &Value,
    path: String,
) -> Option<(String, Value, Value)> {
    match (desired, live) {
        (Value::Object(fields), Value::Object(values)) => fields.iter().find_map(|(key, field)| {
            let value = values.get(key).unwrap_or(&Value::Null);
            first_difference(field, value, format!("{path}.{key}"))
        }),
        (Value::Array(items), Value::Array(values)) if items.len() == values.len() => items
            .iter()
            .zip(values)
            .enumerate()
            .find_map(|(i, (item, value))| first_difference(item, value, format!("{path}[{i}]"))),
        (desired, live) if desired == live => None,
        (desired, live) => Some((path, live.clone(), desired.clone())),
    }
}

/// Objects the host must not touch, remembered by resource version.
#[derive(Debug, Default)]
pub struct Bystanders {
    versions: BTreeMap<String, (Api<DynamicObject>, String, String)>,
}

impl Bystanders {
    /// Remembers `object` (read through `api`) as it is now.
    pub fn remember(&mut self, api: &Api<DynamicObject>, object: &DynamicObject) {
        self.versions.insert(
            format!(
                "{}/{}",
                object.types.as_ref().map_or("", |t| t.kind.as_str()),
                object.name_any()
            ),
            (
                api.clone(),
                object.name_any(),
                object.resource_version().unwrap_or_default(),
            ),
        );
    }

    /// The bystanders that changed (or vanished) since they were remembered.
    pub async fn touched(&self) -> Vec<String> {
        let mut touched = Vec::new();
        for (key, (api, name, version)) in &self.versions {
            match api.get_opt(name).await {
                Ok(Some(now)) if now.resource_version().as_deref() == Some(version) => {}
                Ok(Some(now)) => touched.push(format!(
                    "{key} (resourceVersion {version} -> {})",
                    now.resource_version().unwrap_or_default()
                )),
                Ok(None) => touched.push(format!("{key} (deleted)")),
                Err(error) => touched.push(format!("{key} (unreadable: {error})")),
            }
        }
        touched
    }
}

/// What [`all_converge`] found still off at its bound: each CR that failed its last check and
/// why.
#[derive(Debug)]
pub struct NotConverged {
    pub failed: Vec<(String, String)>,
    pub total: usize,
    pub bound: Duration,
}

impl std::fmt::Display for NotConverged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, error) = self.failed.first().cloned().unwrap_or_default();
        write!(
            f,
            "{} of {} CRs not at the plugin's fixed point after {:?}; {name}: {error}",
            self.failed.len(),
            self.total,
            self.bound
        )
    }
}

/// Waits until the oracle holds for every one of `names` in one sweep (a CR that passed may
/// fail again while its pods become ready and its status follows); returns how long it took,
/// or what still differed after `bound`.
pub async fn all_converge(
    oracle: &Oracle<'_>,
    names: &[String],
    bound: Duration,
) -> Result<Duration, NotConverged> {
    let started = Instant::now();
    // Only the CRs that failed are checked again, until none does; then all of them once more.
    let mut pending = names.to_vec();
    let mut swept_all = true;
    loop {
        let failed: Vec<(String, String)> = futures::stream::iter(&pending)
            .map(|name| async move {
                oracle
                    .check(name)
                    .await
                    .err()
                    .map(|e| (name.clone(), e.to_string()))
            })
            .buffer_unordered(8)
            .filter_map(|f| async move { f })
            .collect()
            .await;
        if failed.is_empty() && swept_all {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= bound {
            return Err(NotConverged {
                failed,
                total: names.len(),
                bound,
            });
        }
        swept_all = failed.is_empty();
        pending = if swept_all {
            names.to_vec()
        } else {
            failed.into_iter().map(|(name, _)| name).collect()
        };
        if !swept_all {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// The host's children of a namespace by `Kind/name`, polled from the test's own client before,
/// during and after a fault: the UID each had when first seen, and every later sighting of
/// another UID (a child deleted and recreated).
pub struct Uids {
    first: Arc<Mutex<BTreeMap<String, String>>>,
    recreated: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

pub async fn list_children(
    client: &Client,
    ns: &str,
) -> Result<BTreeMap<String, String>, kube::Error> {
    let params = ListParams::default().labels("app.kubernetes.io/managed-by=operator-host");
    let mut now = BTreeMap::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&params)
        .await?
    {
        now.insert(
            format!("Deployment/{}", d.name_any()),
            d.uid().unwrap_or_default(),
        );
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list(&params)
        .await?
    {
        now.insert(
            format!("Service/{}", s.name_any()),
            s.uid().unwrap_or_default(),
        );
    }
    Ok(now)
}

fn remember(
    now: BTreeMap<String, String>,
    first: &Mutex<BTreeMap<String, String>>,
    recreated: &Mutex<Vec<String>>,
) {
    let mut first = first.lock().unwrap();
    for (child, uid) in now {
        let seen = first.entry(child.clone()).or_insert_with(|| uid.clone());
        if *seen != uid {
            recreated
                .lock()
                .unwrap()
                .push(format!("{child}: UID {seen} first, then {uid}"));
        }
    }
}

impl Uids {
    pub fn start(client: Client, ns: String) -> Uids {
        let first = Arc::new(Mutex::new(BTreeMap::new()));
        let recreated = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let (first, recreated) = (first.clone(), recreated.clone());
            async move {
                loop {
                    // Lists fail while the control plane is down: that is the fault.
                    if let Ok(now) = list_children(&client, &ns).await {
                        remember(now, &first, &recreated);
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        });
        Uids {
            first,
            recreated,
            task,
        }
    }

    pub fn seen(&self) -> usize {
        self.first.lock().unwrap().len()
    }

    /// Stops polling, looks once more, and panics naming every child whose UID changed (with
    /// `host_log`, the host's log tail, in the message).
    pub async fn assert_none_recreated(self, client: &Client, ns: &str, host_log: &str) -> usize {
        self.task.abort();
        let now = list_children(client, ns).await.unwrap();
        remember(now, &self.first, &self.recreated);
        let recreated = self.recreated.lock().unwrap().clone();
        assert!(
            recreated.is_empty(),
            "children were recreated (deleted and made again): {recreated:?}; host log tail:\n{host_log}"
        );
        self.first.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_live_object_carrying_every_desired_field_does_not_differ() {
        let desired = json!({"spec": {"replicas": 2, "ports": [{"port": 1}]}});
        let live =
            json!({"spec": {"replicas": 2, "ports": [{"port": 1, "protocol": "TCP"}], "x": 1}});
        assert_eq!(first_difference(&desired, &live, String::new()), None);
        let live = json!({"spec": {"replicas": 3, "ports": [{"port": 1}]}});
        assert_eq!(
            first_difference(&desired, &live, String::new()),
            Some((".spec.replicas".into(), json!(3), json!(2)))
        );
        let live = json!({"spec": {"replicas": 2, "ports": []}});
        assert!(first_difference(&desired, &live, String::new()).is_some());
    }
}
