//! Typed access to observed children, building desired children, and kind descriptors.

use std::any::TypeId;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ChildOptions, Error};

/// A Kubernetes kind a plugin reconciles or creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name, e.g. `deployments`.
    pub plural: String,
    /// Whether objects of this kind are namespaced.
    pub namespaced: bool,
}

impl Kind {
    /// `apiVersion` as it appears in objects: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The [`Kind`] of a k8s-openapi type, e.g. `kind_of::<Deployment>()`.
pub fn kind_of<K>() -> Kind
where
    K: k8s_openapi::Resource,
    K::Scope: 'static,
{
    Kind {
        group: K::GROUP.to_string(),
        version: K::VERSION.to_string(),
        kind: K::KIND.to_string(),
        plural: K::URL_PATH_SEGMENT.to_string(),
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
    }
}

/// Metadata for a child: its name and labels only.
///
/// The host adds the namespace, the owner reference and its ownership labels; a plugin that
/// sets them itself is rejected, so children stay independent of who owns them.
pub fn child_meta(name: impl Into<String>, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    }
}

/// The children the host observed for one parent, as read from the API server, and the
/// related objects the plugin declared ([`crate::Reconciler::related`]).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    objects: Vec<Value>,
    related: BTreeMap<String, Vec<Value>>,
}

impl Observed {
    /// Observed children from already-parsed JSON objects.
    pub fn new(objects: Vec<Value>) -> Self {
        Observed {
            objects,
            related: BTreeMap::new(),
        }
    }

    /// The same, with `objects` as the related objects declared as `name` (for tests).
    pub fn with_related(mut self, name: impl Into<String>, objects: Vec<Value>) -> Self {
        self.related.insert(name.into(), objects);
        self
    }

    /// Observed children from the JSON texts of the request.
    pub fn from_json(texts: &[String]) -> Result<Self, Error> {
        Ok(Observed::new(parse_all(texts, "observed child")?))
    }

    /// Adds the related objects declared as `name`, from the JSON texts of the request.
    pub(crate) fn add_related_json(&mut self, name: &str, texts: &[String]) -> Result<(), Error> {
        let objects = parse_all(texts, &format!("related {name}"))?;
        self.related.insert(name.to_string(), objects);
        Ok(())
    }

    /// The related objects declared as `name` ([`crate::Related`]), decoded as `K`: empty when
    /// none matches (a name that was not declared is empty too).
    pub fn related<K>(&self, name: &str) -> Result<Vec<K>, Error>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        self.related_json(name).iter().map(decode::<K, K>).collect()
    }

    /// The related objects declared as `name`, as JSON.
    pub fn related_json(&self, name: &str) -> &[Value] {
        self.related.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The observed child of type `K` named `name`, if there is one.
    pub fn get<K>(&self, name: &str) -> Result<Option<K>, Error>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        self.find::<K>(name).map(decode::<K, K>).transpose()
    }

    /// The observed child of type `K` named `name`, decoded as `T`: a view with only the
    /// fields the plugin reads.
    ///
    /// A plugin that reads a few fields of a big kind should prefer this to [`Observed::get`]:
    /// decoding a whole k8s-openapi `Deployment` compiles the deserializers of every pod
    /// field (volumes, affinity, probes, ...) into the plugin, about a third of the
    /// Memcached plugin's code, and compile time is what a reload waits for on a cache miss.
    /// `T` may borrow strings from the observed object (as [`crate::WorkloadView`] does).
    pub fn view<'a, K, T>(&'a self, name: &str) -> Result<Option<T>, Error>
    where
        K: k8s_openapi::Resource,
        T: Deserialize<'a>,
    {
        self.find::<K>(name).map(decode::<K, T>).transpose()
    }

    /// Where the rollout (or, for a Job, the run) of the spec `desired` holds for the workload
    /// of type `K` named `name` stands: [`crate::WorkloadView::rollout_of`] of the observed
    /// one, or pending (reason `NotCreated`) while there is none.
    pub fn rollout_of<K>(&self, name: &str, desired: &Desired) -> Result<crate::Rollout, Error>
    where
        K: k8s_openapi::Resource,
    {
        Ok(match self.view::<K, crate::WorkloadView>(name)? {
            Some(workload) => workload.rollout_of(desired),
            None => crate::Rollout::Pending {
                reason: "NotCreated",
                message: format!("the {} {name:?} is not created yet", K::KIND),
            },
        })
    }

    /// Every observed child of type `K`.
    pub fn all<K>(&self) -> Result<Vec<K>, Error>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        self.objects
            .iter()
            .filter(|o| is_kind::<K>(o))
            .map(decode::<K, K>)
            .collect()
    }

    fn find<K: k8s_openapi::Resource>(&self, name: &str) -> Option<&Value> {
        self.objects
            .iter()
            .find(|o| is_kind::<K>(o) && o["metadata"]["name"].as_str() == Some(name))
    }

    /// Number of observed children of any kind.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether no children were observed.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// The objects of the request's JSON texts; `what` names them in the error (`observed child
/// #1 is not valid JSON: ...`).
fn parse_all(texts: &[String], what: &str) -> Result<Vec<Value>, Error> {
    texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            serde_json::from_str(text)
                .map_err(|e| Error::Retry(format!("{what} #{index} is not valid JSON: {e}")))
        })
        .collect()
}

fn is_kind<K: k8s_openapi::Resource>(object: &Value) -> bool {
    object["apiVersion"].as_str() == Some(K::API_VERSION)
        && object["kind"].as_str() == Some(K::KIND)
}

/// `object`, an observed `K`, decoded as `T`.
fn decode<'a, K: k8s_openapi::Resource, T: Deserialize<'a>>(object: &'a Value) -> Result<T, Error> {
    T::deserialize(object).map_err(|e| {
        Error::Retry(format!(
            "observed {} {:?} does not decode: {e}",
            K::KIND,
            object["metadata"]["name"].as_str().unwrap_or("")
        ))
    })
}

/// What `reconcile` returns: the children that should exist, the status, and when to call again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    /// The desired children as JSON objects (with `apiVersion` and `kind`).
    pub children: Vec<Value>,
    /// How the host handles each child, by index in `children`; a child without an entry
    /// gets [`ChildOptions::default`].
    pub options: Vec<ChildOptions>,
    /// The parent's status as a JSON object.
    pub status: Value,
    /// Call again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

impl Desired {
    /// No children, an empty status.
    pub fn new() -> Self {
        Desired {
            children: Vec::new(),
            options: Vec::new(),
            status: Value::Object(Default::default()),
            requeue_after: None,
        }
    }

    /// Adds a typed child (any k8s-openapi resource, or a custom resource type).
    ///
    /// A workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job) gets the
    /// annotation [`crate::SPEC_HASH_ANNOTATION`], the hash of its spec, so that its observed
    /// copy tells whether it carries this spec yet ([`crate::WorkloadView::rollout_of`]).
    pub fn child<K>(&mut self, child: &K) -> Result<&mut Self, Error>
    where
        K: k8s_openapi::Resource + Serialize,
    {
        self.child_with(child, ChildOptions::default())
    }

    /// Adds a typed child that the host applies, prunes or waits for as `options` say: an
    /// update strategy, a delete policy, a readiness barrier for the children added after it.
    pub fn child_with<K>(&mut self, child: &K, options: ChildOptions) -> Result<&mut Self, Error>
    where
        K: k8s_openapi::Resource + Serialize,
    {
        let mut value = serde_json::to_value(child)
            .map_err(|e| Error::Retry(format!("cannot serialize a {}: {e}", K::KIND)))?;
        // k8s-openapi types serialize apiVersion/kind themselves; custom types may not.
        if let Value::Object(map) = &mut value {
            map.entry("apiVersion")
                .or_insert_with(|| Value::String(K::API_VERSION.to_string()));
            map.entry("kind")
                .or_insert_with(|| Value::String(K::KIND.to_string()));
        }
        crate::view::stamp_spec_hash(&mut value);
        // Children pushed directly onto `children` have no entry: pad with the default.
        self.options
            .resize(self.children.len(), ChildOptions::default());
        self.children.push(value);
        self.options.push(options);
        Ok(self)
    }

    /// Adds `job` as a step the children added after it wait for, run once for each distinct
    /// `inputs` (whatever its run depends on: the image, the schema version, a config's
    /// data). The hash of `inputs` goes on the pod template under
    /// [`crate::CONTENT_HASH_ANNOTATION`], so new inputs make a new template, and the host
    /// recreates the Job (its template is immutable) instead of reporting `ImmutableField`;
    /// the same inputs leave the completed Job as it is. The barrier is its `Complete`
    /// condition; [`crate::WorkloadView::rollout_of`] of the observed Job says whether the
    /// run of *these* inputs completed (an old Job's completion is `SpecNotApplied`).
    pub fn run_once<S: Serialize + ?Sized>(
        &mut self,
        job: &k8s_openapi::api::batch::v1::Job,
        inputs: &S,
    ) -> Result<&mut Self, Error> {
        let hash = crate::content_hash(inputs)?;
        let mut job = job.clone();
        job.spec
            .get_or_insert_with(Default::default)
            .template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(Default::default)
            .insert(crate::CONTENT_HASH_ANNOTATION.to_string(), hash);
        self.child_with(
            &job,
            ChildOptions::new()
                .recreate()
                .ready_when_condition("Complete"),
        )
    }

    /// Sets the status from any serializable value (normally the CR's status type).
    pub fn status<S: Serialize>(&mut self, status: &S) -> Result<&mut Self, Error> {
        self.status = serde_json::to_value(status)
            .map_err(|e| Error::Retry(format!("cannot serialize the status: {e}")))?;
        Ok(self)
    }

    /// Asks to be called again after `after` even if nothing changes.
    pub fn requeue_after(&mut self, after: Duration) -> &mut Self {
        self.requeue_after = Some(after);
        self
    }

    /// The options of the child of type `K` named `name`, if it is desired.
    pub fn options_of<K: k8s_openapi::Resource>(&self, name: &str) -> Option<ChildOptions> {
        let index = self
            .children
            .iter()
            .position(|o| is_kind::<K>(o) && o["metadata"]["name"].as_str() == Some(name))?;
        Some(self.options.get(index).cloned().unwrap_or_default())
    }

    /// The desired child of type `K` named `name`, decoded: handy in unit tests. A child that
    /// is there but does not decode as `K` is an error, not `None`.
    pub fn get<K>(&self, name: &str) -> Result<Option<K>, Error>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        self.children
            .iter()
            .find(|o| is_kind::<K>(o) && o["metadata"]["name"].as_str() == Some(name))
            .map(|o| {
                K::deserialize(o).map_err(|e| {
                    Error::Retry(format!("desired {} {name:?} does not decode: {e}", K::KIND))
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use serde_json::json;

    use crate::WorkloadView;

    #[test]
    fn a_run_once_job_is_recreated_behind_a_barrier_and_changes_with_its_inputs() {
        use k8s_openapi::api::batch::v1::Job;
        let job = Job {
            metadata: child_meta("migrate", BTreeMap::new()),
            ..Default::default()
        };
        let template_hash = |desired: &Desired| {
            desired.children[0]["spec"]["template"]["metadata"]["annotations"]
                [crate::CONTENT_HASH_ANNOTATION]
                .clone()
        };
        let mut first = Desired::new();
        first.run_once(&job, &json!({"schema": 3})).unwrap();
        let options = first.options_of::<Job>("migrate").unwrap();
        assert_eq!(
            options,
            ChildOptions::new()
                .recreate()
                .ready_when_condition("Complete")
        );
        let mut same = Desired::new();
        same.run_once(&job, &json!({"schema": 3})).unwrap();
        let mut next = Desired::new();
        next.run_once(&job, &json!({"schema": 4})).unwrap();
        assert_eq!(template_hash(&first), template_hash(&same));
        assert_ne!(template_hash(&first), template_hash(&next));
        assert!(template_hash(&first).is_string());
    }

    #[test]
    fn kind_of_reads_group_plural_and_scope() {
        let deployment = kind_of::<Deployment>();
        assert_eq!(deployment.group, "apps");
        assert_eq!(deployment.plural, "deployments");
        assert_eq!(deployment.api_version(), "apps/v1");
        assert!(deployment.namespaced);
        assert_eq!(kind_of::<Service>().api_version(), "v1");
        assert!(!kind_of::<ClusterRole>().namespaced);
    }

    #[test]
    fn observed_get_matches_kind_and_name() {
        let observed = Observed::new(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"},
                   "status": {"readyReplicas": 2}}),
        ]);
        let deployment: Deployment = observed.get("a").unwrap().unwrap();
        assert_eq!(deployment.status.unwrap().ready_replicas, Some(2));
        assert!(observed.get::<Deployment>("b").unwrap().is_none());
        assert_eq!(observed.all::<Service>().unwrap().len(), 1);
    }

    #[test]
    fn observed_view_decodes_only_the_fields_asked_for() {
        let observed = Observed::new(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"},
                   "status": {"readyReplicas": 7}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "a", "generation": 4},
                   "spec": {"replicas": 3,
                            "template": {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}},
                   "status": {"readyReplicas": 2, "observedGeneration": 4}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b"},
                   "status": {"readyReplicas": "two"}}),
        ]);
        let view = observed
            .view::<Deployment, WorkloadView>("a")
            .unwrap()
            .unwrap();
        assert_eq!(view.metadata.generation, Some(4));
        assert_eq!(view.spec.replicas, Some(3));
        assert_eq!(view.status.ready_replicas, Some(2));
        assert_eq!(view.status.observed_generation, Some(4));
        assert_eq!(view.status.updated_replicas, None);
        assert!(
            observed
                .view::<Deployment, WorkloadView>("c")
                .unwrap()
                .is_none()
        );
        assert!(
            observed
                .view::<Service, WorkloadView>("b")
                .unwrap()
                .is_none()
        );
        let err = observed
            .view::<Deployment, WorkloadView>("b")
            .expect_err("a string where a number belongs is an error");
        assert!(
            err.message().contains("Deployment \"b\" does not decode"),
            "{err}"
        );
    }

    #[test]
    fn observed_rejects_invalid_json_with_the_index() {
        let err = Observed::from_json(&["{}".into(), "not json".into()]).unwrap_err();
        assert!(err.message().contains("#1"), "{err}");
    }

    #[test]
    fn desired_child_carries_api_version_and_kind() {
        let mut desired = Desired::new();
        desired
            .child(&Service {
                metadata: child_meta("svc", BTreeMap::new()),
                ..Service::default()
            })
            .unwrap();
        assert_eq!(desired.children[0]["apiVersion"], "v1");
        assert_eq!(desired.children[0]["kind"], "Service");
        assert!(desired.children[0]["metadata"].get("labels").is_none());
        assert!(desired.get::<Service>("svc").unwrap().is_some());
        desired.children[0]["spec"] = json!({"ports": "not a list"});
        let err = desired.get::<Service>("svc").unwrap_err();
        assert!(
            err.message().contains("Service \"svc\" does not decode"),
            "{err}"
        );
    }
}
