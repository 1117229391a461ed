//! The plan: one pure function from a parent and its observed children to what the host will do.
//!
//! Both `operator-host run` and `operator-host render` call
//! [`Plugin::plan`](crate::plugin::Plugin::plan), which calls the plugin (sandboxed and
//! deterministic) and hands its answer to [`plan_from_response`] here, so what `render` prints
//! is exactly what the controller applies; everything here is plain data transformation.
//!
//! # Guarantees
//! - A plan is only produced when the plugin succeeded and every child passed validation;
//!   otherwise nothing is applied and nothing is pruned.
//! - Only children proven to be owned (ownership labels *and* a controller reference to this
//!   parent's UID) are ever prune targets.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::contract::{
    CallError, DeletePolicy, FieldValue, Readiness, ReconcileRequest, ReconcileResponse,
    RelatedObjects, UpdateStrategy,
};
use crate::declaration::Declaration;
use crate::kinds::Kind;
use crate::labels::{
    MANAGED_BY, MANAGED_BY_LABEL, ON_PRUNE_ANNOTATION, PARENT_UID_LABEL, PLUGIN_LABEL,
    RESERVED_PREFIX,
};
use crate::names::check_dns_subdomain;

/// The host's condition type on every parent.
pub const RECONCILED: &str = "Reconciled";
/// Most children one reconcile may return.
pub const DEFAULT_MAX_CHILDREN: usize = 1000;

/// Why no plan could be made. [`PlanError::reason`] maps each to a condition reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("the parent object is invalid: {0}")]
    InvalidParent(String),
    #[error(transparent)]
    PluginCall(#[from] CallError),
    #[error("the plugin rejected the spec: {0}")]
    InvalidSpec(String),
    #[error("the plugin asked to retry: {0}")]
    PluginRetry(String),
    #[error("invalid plugin output: {0}")]
    InvalidPluginOutput(String),
    #[error("policy violation: {0}")]
    PolicyViolation(String),
}

impl PlanError {
    /// The `Reconciled=False` condition reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            PlanError::InvalidParent(_) => "InvalidParent",
            PlanError::PluginCall(CallError::Timeout { .. }) => "PluginTimeout",
            PlanError::PluginCall(CallError::Stalled { .. }) => "HostOverloaded",
            PlanError::PluginCall(CallError::OutOfMemory { .. }) => "PluginOutOfMemory",
            PlanError::PluginCall(CallError::Trap { .. }) => "PluginTrap",
            PlanError::PluginCall(CallError::Instantiate { .. }) => "PluginUnavailable",
            PlanError::PluginCall(CallError::ResponseTooLarge { .. }) => "InvalidPluginOutput",
            PlanError::PluginCall(CallError::NotInContract { .. }) => "InvalidPluginOutput",
            PlanError::InvalidSpec(_) => "InvalidSpec",
            PlanError::PluginRetry(_) => "PluginRetry",
            PlanError::InvalidPluginOutput(_) => "InvalidPluginOutput",
            PlanError::PolicyViolation(_) => "PolicyViolation",
        }
    }

    /// Whether retrying without a change to the parent can help.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            PlanError::InvalidSpec(_) | PlanError::InvalidParent(_)
        )
    }
}

/// A child the host will delete: owned by this parent but no longer desired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneTarget {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// Deleted with this UID as a precondition, so a re-created object is never hit.
    pub uid: String,
    /// Deleted, or kept without the host's labels and owner reference.
    pub policy: DeletePolicy,
}

/// A child to server-side apply, with how to apply it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedChild {
    /// The object with the host's metadata.
    pub object: Value,
    /// In place; `recreate`: a change refused as immutable deletes the child, to be created
    /// again; `create-only`: not written when it exists.
    pub update: UpdateStrategy,
    /// Which stage of the plan it belongs to: stage `n + 1` is applied only once the
    /// barrier of stage `n` is ready.
    pub stage: usize,
    /// Set on the child that closes its stage: what the next stage waits for.
    pub barrier: Option<Readiness>,
}

/// What the host will do for one parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Children to server-side apply, stage by stage, each stage in dependency order.
    pub apply: Vec<PlannedChild>,
    /// Children to delete (or orphan), in reverse dependency order: only once every stage
    /// was applied.
    pub prune: Vec<PruneTarget>,
    /// The parent's status after a successful apply.
    pub status: Value,
    /// When to reconcile again even if nothing changes.
    pub requeue_after: Option<Duration>,
}

impl PlannedChild {
    /// How the host handles this child, when it is not 0.1.0's only way (in place, no
    /// barrier, first stage): `stage 0: update=recreate ready-when=condition Complete`, or
    /// `stage 1` for a child behind a barrier, for `render`. (The delete
    /// policy shows in the object, as [`ON_PRUNE_ANNOTATION`].)
    pub fn handling(&self) -> Option<String> {
        let mut parts = Vec::new();
        match self.update {
            UpdateStrategy::InPlace => {}
            UpdateStrategy::Recreate => parts.push("update=recreate".to_string()),
            UpdateStrategy::CreateOnly => parts.push("update=create-only".to_string()),
        }
        match &self.barrier {
            None => {}
            Some(Readiness::Condition(type_)) => {
                parts.push(format!("ready-when=condition {type_}"));
            }
            Some(Readiness::FieldEquals(FieldValue { path, value })) => {
                parts.push(format!("ready-when={path}={value}"));
            }
        }
        // A child behind a barrier says so even with the default options.
        match (self.stage, parts.is_empty()) {
            (0, true) => None,
            (stage, true) => Some(format!("stage {stage}")),
            (stage, false) => Some(format!("stage {stage}: {}", parts.join(" "))),
        }
    }
}

impl Plan {
    /// The objects of the children to apply, in plan order.
    pub fn objects(&self) -> impl Iterator<Item = &Value> + Clone {
        self.apply.iter().map(|child| &child.object)
    }
}

/// What the plan needs to know about the parent.
#[derive(Debug, Clone)]
struct Parent<'a> {
    object: &'a Value,
    namespace: &'a str,
    uid: Option<&'a str>,
}

/// The request of a `function` (`reconcile` or `finalize`) call for `parent`, its `observed`
/// children and its `related` objects, and the seed of the call's randomness (see
/// [`crate::contract::random_seed`]).
///
/// The seed leaves out what changes with every write of the host's own, the parent's `status`
/// and `resourceVersion`: so a plugin that draws "random" numbers answers the same again after
/// the host wrote what it answered, and a random message or status is stable rather than a new
/// write on every reconcile. The children are seeded as sent (the host does not write their
/// status, and their resourceVersion changes only when they do).
pub fn request(
    function: &str,
    parent: &Value,
    observed: &[Value],
    related: Vec<RelatedObjects>,
) -> (ReconcileRequest, [u8; 32]) {
    let request = ReconcileRequest {
        parent: without_managed_fields(parent).to_string(),
        observed: observed
            .iter()
            .map(|o| without_managed_fields(o).to_string())
            .collect(),
        related,
    };
    let mut seeded_parent = without_managed_fields(parent).into_owned();
    if let Some(fields) = seeded_parent.as_object_mut() {
        fields.remove("status");
    }
    if let Some(metadata) = seeded_parent["metadata"].as_object_mut() {
        metadata.remove("resourceVersion");
    }
    let seeded_parent = seeded_parent.to_string();
    let related_parts = request.related.iter().flat_map(|related| {
        std::iter::once(related.name.as_str()).chain(related.objects.iter().map(String::as_str))
    });
    let seed = crate::contract::random_seed(
        function,
        std::iter::once(seeded_parent.as_str())
            .chain(request.observed.iter().map(String::as_str))
            .chain(related_parts),
    );
    (request, seed)
}

/// `object` cut down to the shape of `template`: the keys of its maps, element by element for
/// lists of the same length, whole otherwise.
pub fn project(template: &Value, object: &Value) -> Value {
    match (template, object) {
        (Value::Object(fields), Value::Object(values)) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| {
                    let value = values.get(key).unwrap_or(&Value::Null);
                    (key.clone(), project(field, value))
                })
                .collect(),
        ),
        (Value::Array(items), Value::Array(values)) if items.len() == values.len() => Value::Array(
            items
                .iter()
                .zip(values)
                .map(|(item, value)| project(item, value))
                .collect(),
        ),
        (_, value) => value.clone(),
    }
}

/// Whether `object` holds every field of `desired` with the value it has there (whatever
/// else the API server or others added).
/// (`project(desired, object) == *desired`, compared in place: it runs for every child of
/// every reconcile.)
pub fn holds(object: &Value, desired: &Value) -> bool {
    match (desired, object) {
        (Value::Object(fields), Value::Object(values)) => fields
            .iter()
            .all(|(key, field)| holds(values.get(key).unwrap_or(&Value::Null), field)),
        (Value::Array(items), Value::Array(values)) if items.len() == values.len() => items
            .iter()
            .zip(values)
            .all(|(item, value)| holds(value, item)),
        (desired, object) => desired == object,
    }
}

/// The paths (`data.version`, `spec.replicas`, `spec.template.spec.containers[0].image`) of
/// the fields of `desired` whose values `object` does not hold: what an apply of `desired`
/// would change.
pub fn differing_fields(object: &Value, desired: &Value) -> Vec<String> {
    fn walk(object: &Value, desired: &Value, path: &str, out: &mut Vec<String>) {
        match (desired, object) {
            (Value::Object(fields), Value::Object(values)) => {
                for (key, field) in fields {
                    let path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    walk(values.get(key).unwrap_or(&Value::Null), field, &path, out);
                }
            }
            (Value::Array(items), Value::Array(values)) if items.len() == values.len() => {
                for (index, (item, value)) in items.iter().zip(values).enumerate() {
                    walk(value, item, &format!("{path}[{index}]"), out);
                }
            }
            (desired, object) if desired != object => out.push(path.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(object, desired, "", &mut out);
    out
}

/// `object` without `metadata.managedFields`: bookkeeping of the API server that no plugin
/// needs, and often the largest part of an object.
fn without_managed_fields(object: &Value) -> std::borrow::Cow<'_, Value> {
    if object["metadata"].get("managedFields").is_none() {
        return std::borrow::Cow::Borrowed(object);
    }
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    std::borrow::Cow::Owned(object)
}

/// The pure part of [`Plugin::plan`](crate::plugin::Plugin::plan): validates the plugin's response and builds the plan.
pub fn plan_from_response(
    plugin: &Declaration,
    parent_object: &Value,
    observed: &[Value],
    response: ReconcileResponse,
    now: &str,
) -> Result<Plan, PlanError> {
    let parent = read_parent(plugin, parent_object)?;
    if response.children.len() > DEFAULT_MAX_CHILDREN {
        return Err(PlanError::InvalidPluginOutput(format!(
            "{} children returned, at most {DEFAULT_MAX_CHILDREN} are allowed",
            response.children.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut apply = Vec::with_capacity(response.children.len());
    let mut stage = 0;
    for (index, child) in response.children.into_iter().enumerate() {
        let (object, kind, name) =
            validate_child(plugin, &parent, index, &child.object, child.on_prune)?;
        if !seen.insert((kind.kind.clone(), name.clone())) {
            return Err(PlanError::InvalidPluginOutput(format!(
                "child #{index} is a second {} named {name:?}",
                kind.kind
            )));
        }
        if let Some(readiness) = &child.ready_when {
            check_readiness(index, readiness)?;
        }
        let closes_stage = child.ready_when.is_some();
        apply.push((
            apply_rank(&kind.kind),
            PlannedChild {
                object,
                update: child.update,
                stage,
                barrier: child.ready_when,
            },
        ));
        if closes_stage {
            stage += 1;
        }
    }
    apply.sort_by_key(|(rank, child)| (child.stage, *rank));

    let mut prune: Vec<(usize, PruneTarget)> = observed
        .iter()
        .filter_map(|o| owned_child(plugin, &parent, o))
        .filter(|(_, target)| !seen.contains(&(target.kind.kind.clone(), target.name.clone())))
        .collect();
    prune.sort_by_key(|(rank, _)| std::cmp::Reverse(*rank));

    let status: Value = serde_json::from_str(&response.status).map_err(|e| {
        PlanError::InvalidPluginOutput(format!("the status is not valid JSON: {e}"))
    })?;
    let message = format!(
        "{} produced {} children",
        version_identity(plugin),
        apply.len()
    );
    let status = merge_status(
        parent.object,
        status,
        reconciled(true, "ReconcileSucceeded", &message),
        now,
    )?;
    Ok(Plan {
        apply: apply.into_iter().map(|(_, child)| child).collect(),
        prune: prune.into_iter().map(|(_, target)| target).collect(),
        status,
        requeue_after: response.requeue_after_ms.map(Duration::from_millis),
    })
}

/// The status to write when reconciling failed: the previous status with
/// `Reconciled=False`, so what was observed before is not lost.
/// `reason` and `message` say which step failed and why. The plugin's conditions, if it
/// computed them for an earlier generation, become `Unknown` (see [`mark_stale_conditions`]).
pub fn failure_status(parent: &Value, reason: &str, message: &str, now: &str) -> Value {
    // The previous observedGeneration stays: this generation was not reconciled.
    let mut status = with_condition(parent, reconciled(false, reason, message), now);
    mark_stale_conditions(&mut status, parent, reason, now);
    status
}

/// Turns `Unknown` each of the plugin's conditions in `status` when the plugin computed them
/// for an earlier generation than the parent's (`status.observedGeneration` is the last one it
/// answered for) and the current one failed with `reason`: an `Available=True` of the old
/// spec must not stand for a spec the plugin refused (or could not be asked about), and
/// `kubectl wait --for=condition=Available` must not pass on it. A condition already marked
/// for this generation is left as it is, so a retried failure writes nothing new.
fn mark_stale_conditions(status: &mut Value, parent: &Value, reason: &str, now: &str) {
    let (Some(generation), Some(computed_for)) = (
        parent["metadata"]["generation"].as_i64(),
        status["observedGeneration"].as_i64(),
    ) else {
        return;
    };
    if computed_for >= generation {
        return;
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    for condition in conditions
        .iter_mut()
        .filter(|c| c.is_object() && c["type"] != RECONCILED)
    {
        let was = condition["status"].clone();
        if was == "Unknown" && condition["observedGeneration"].as_i64() == Some(generation) {
            continue;
        }
        condition["status"] = "Unknown".into();
        condition["reason"] = reason.into();
        condition["message"] = format!(
            "generation {generation} was not reconciled ({reason}); the plugin last computed \
             this condition for generation {computed_for}"
        )
        .into();
        condition["observedGeneration"] = generation.into();
        if was != "Unknown" {
            condition["lastTransitionTime"] = now.into();
        }
    }
}

/// The parent's status with `condition` (one of the host's own) put in place of the one of
/// its type: stamped with the parent's generation and its transition time, the rest as it is.
pub fn with_condition(parent: &Value, condition: Value, now: &str) -> Value {
    let previous = parent
        .get("status")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut status = previous.clone();
    set_condition(&mut status, condition, &previous, parent, now);
    status
}

fn reconciled(ok: bool, reason: &str, message: &str) -> Value {
    json!({
        "type": RECONCILED,
        "status": if ok { "True" } else { "False" },
        "reason": reason,
        "message": message,
    })
}

/// The UID of the object's controller (its owner reference with `controller: true`; the API
/// server allows one), if it has one.
pub fn controller_uid(object: &Value) -> Option<&str> {
    object["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|owner| owner["controller"] == true)?["uid"]
        .as_str()
}

/// How the host's `Reconciled` message names the version that made a plan:
/// `plugin memcached@0.1.0 (sha256:0123456789ab)`.
pub fn version_identity(plugin: &Declaration) -> String {
    format!(
        "plugin {}@{} ({})",
        plugin.name,
        plugin.version,
        short_hash(&plugin.content_hash)
    )
}

fn short_hash(hash: &str) -> String {
    format!("sha256:{}", &hash[..hash.len().min(12)])
}

fn read_parent<'a>(plugin: &Declaration, object: &'a Value) -> Result<Parent<'a>, PlanError> {
    if !plugin.parent.matches(object) {
        return Err(PlanError::InvalidParent(format!(
            "expected a {}, got apiVersion {} kind {}",
            plugin.parent, object["apiVersion"], object["kind"]
        )));
    }
    if object["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        return Err(PlanError::InvalidParent("metadata.name is missing".into()));
    }
    if !plugin.parent.namespaced {
        return Err(PlanError::InvalidParent(format!(
            "{} is cluster-scoped; only namespaced parents are supported",
            plugin.parent
        )));
    }
    Ok(Parent {
        object,
        namespace: object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default"),
        uid: object["metadata"]["uid"].as_str().filter(|u| !u.is_empty()),
    })
}

/// Checks one child against the contract ([`check_child`]) and adds the
/// host's metadata; returns it with its kind and name.
fn validate_child(
    plugin: &Declaration,
    parent: &Parent<'_>,
    index: usize,
    text: &str,
    on_prune: DeletePolicy,
) -> Result<(Value, Kind, String), PlanError> {
    let mut child: Value = serde_json::from_str(text).map_err(|e| {
        PlanError::InvalidPluginOutput(format!("child #{index}: not valid JSON: {e}"))
    })?;
    let kind = check_child(plugin, parent.namespace, index, &child)?;
    let name = child["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let Some(metadata) = child.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(PlanError::InvalidPluginOutput(format!(
            "child #{index}: metadata must be an object"
        )));
    };
    metadata.insert("namespace".into(), parent.namespace.into());
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels[MANAGED_BY_LABEL] = MANAGED_BY.into();
    labels[PLUGIN_LABEL] = plugin.name.clone().into();
    if let Some(uid) = parent.uid {
        labels[PARENT_UID_LABEL] = uid.into();
        metadata.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": plugin.parent.api_version(),
                "kind": plugin.parent.kind,
                "name": parent.object["metadata"]["name"],
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
        );
    }
    if on_prune == DeletePolicy::Orphan {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        annotations[ON_PRUNE_ANNOTATION] = "orphan".into();
    }
    // Status belongs to the child's own controller, never to an apply.
    if let Some(object) = child.as_object_mut() {
        object.remove("status");
    }
    Ok((child, kind, name))
}

/// The observed child as a prune target, if it is proven to be owned by this parent.
fn owned_child(
    plugin: &Declaration,
    parent: &Parent<'_>,
    object: &Value,
) -> Option<(usize, PruneTarget)> {
    let uid = parent.uid?;
    let kind = plugin.children.iter().find(|k| k.matches(object))?;
    let metadata = &object["metadata"];
    let labels = &metadata["labels"];
    let labelled = labels[MANAGED_BY_LABEL] == MANAGED_BY
        && labels[PLUGIN_LABEL] == plugin.name.as_str()
        && labels[PARENT_UID_LABEL] == uid;
    let controlled = controller_uid(object) == Some(uid);
    if !(labelled && controlled) || metadata["namespace"].as_str() != Some(parent.namespace) {
        return None;
    }
    let policy = delete_policy(metadata["annotations"][ON_PRUNE_ANNOTATION].as_str());
    Some((
        apply_rank(&kind.kind),
        PruneTarget {
            kind: kind.clone(),
            namespace: parent.namespace.to_string(),
            name: metadata["name"].as_str()?.to_string(),
            uid: metadata["uid"].as_str()?.to_string(),
            policy,
        },
    ))
}

/// The delete policy a child's [`ON_PRUNE_ANNOTATION`] (its value, if any) gives it.
pub fn delete_policy(annotation: Option<&str>) -> DeletePolicy {
    match annotation {
        Some("orphan") => DeletePolicy::Orphan,
        _ => DeletePolicy::Delete,
    }
}

/// A barrier the host can judge: a condition type or a dotted path, and a JSON value.
fn check_readiness(index: usize, readiness: &Readiness) -> Result<(), PlanError> {
    let invalid =
        |what: String| PlanError::InvalidPluginOutput(format!("child #{index}: ready-when {what}"));
    match readiness {
        Readiness::Condition(type_) if type_.is_empty() => {
            Err(invalid("names an empty condition type".into()))
        }
        Readiness::Condition(_) => Ok(()),
        Readiness::FieldEquals(FieldValue { path, value }) => {
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(invalid(format!(
                    "has the path {path:?}; expected a dotted path such as status.readyReplicas"
                )));
            }
            serde_json::from_str::<Value>(value)
                .map(|_| ())
                .map_err(|e| invalid(format!("value {value:?} is not JSON: {e}")))
        }
    }
}

/// Whether `child`, as the API server has it now, is ready as `readiness` says: not being
/// deleted, its controller has seen its current generation (when its status says), and the
/// condition is `True` or the field has the value.
pub fn is_ready(child: &Value, readiness: &Readiness) -> bool {
    let metadata = &child["metadata"];
    if !metadata["deletionTimestamp"].is_null() {
        return false;
    }
    if let (Some(seen), Some(generation)) = (
        child["status"]["observedGeneration"].as_i64(),
        metadata["generation"].as_i64(),
    ) && seen < generation
    {
        return false;
    }
    match readiness {
        Readiness::Condition(type_) => {
            child["status"]["conditions"]
                .as_array()
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == type_.as_str() && c["status"] == "True")
                })
        }
        Readiness::FieldEquals(FieldValue { path, value }) => {
            let Ok(expected) = serde_json::from_str::<Value>(value) else {
                return false;
            };
            path.split('.')
                .try_fold(child, |object, key| object.get(key))
                == Some(&expected)
        }
    }
}

/// What a barrier waits for, for the parent's condition: `Job "add-member-3" to have the
/// condition Complete=True`.
pub fn describe_wait(child: &Value, readiness: &Readiness) -> String {
    let what = match readiness {
        Readiness::Condition(type_) => format!("the condition {type_}=True"),
        Readiness::FieldEquals(FieldValue { path, value }) => format!("{path} = {value}"),
    };
    format!(
        "{} {} to have {what}",
        child["kind"].as_str().unwrap_or("child"),
        child["metadata"]["name"]
    )
}

/// `status` (a plan's) with the host's condition saying the plan is held at a barrier:
/// `Reconciled=False`, reason `WaitingForReadiness`, `message` saying for what.
pub fn waiting_status(parent: &Value, mut status: Value, message: &str, now: &str) -> Value {
    let previous = parent.get("status").cloned().unwrap_or(Value::Null);
    let condition = reconciled(false, WAITING_FOR_READINESS, message);
    set_condition(&mut status, condition, &previous, parent, now);
    status
}

/// The `Reconciled=False` reason of a parent annotated paused.
pub const PAUSED: &str = "Paused";

/// The `Reconciled=False` reason of a plan held at a barrier.
pub const WAITING_FOR_READINESS: &str = "WaitingForReadiness";

/// Apply order: what others refer to first (config, identities), then Services, then
/// workloads, then objects that select workloads. Pruning runs in reverse.
pub fn apply_rank(kind: &str) -> usize {
    match kind {
        "Namespace" | "CustomResourceDefinition" => 0,
        "ServiceAccount"
        | "Secret"
        | "ConfigMap"
        | "PersistentVolumeClaim"
        | "Role"
        | "RoleBinding"
        | "LimitRange"
        | "ResourceQuota" => 1,
        "Service" => 2,
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" | "CronJob" | "Pod" => 4,
        "PodDisruptionBudget" | "HorizontalPodAutoscaler" | "Ingress" | "NetworkPolicy" => 5,
        _ => 3,
    }
}

/// The plugin's status plus `observedGeneration` and the host's condition, with transition
/// times kept from the previous status while a condition's status is unchanged.
fn merge_status(
    parent: &Value,
    status: Value,
    condition: Value,
    now: &str,
) -> Result<Value, PlanError> {
    let Value::Object(mut status) = status else {
        return Err(PlanError::InvalidPluginOutput(
            "the status must be a JSON object".into(),
        ));
    };
    let previous = parent.get("status").cloned().unwrap_or(Value::Null);
    match status.get("conditions") {
        None => {}
        Some(Value::Array(conditions)) => {
            if let Some(index) = conditions.iter().position(|c| !c.is_object()) {
                return Err(PlanError::InvalidPluginOutput(format!(
                    "status.conditions[{index}] must be an object, got {}",
                    conditions[index]
                )));
            }
        }
        Some(_) => {
            return Err(PlanError::InvalidPluginOutput(
                "status.conditions must be a list".into(),
            ));
        }
    }
    if let Some(generation) = parent["metadata"]["generation"].as_i64() {
        status.insert("observedGeneration".into(), generation.into());
    }
    let mut status = Value::Object(status);
    if let Some(conditions) = status["conditions"].as_array_mut() {
        for c in conditions.iter_mut() {
            stamp_transition(c, &previous, now);
        }
    }
    set_condition(&mut status, condition, &previous, parent, now);
    Ok(status)
}

/// Puts `condition` (replacing one of the same type) into `status`, stamped.
fn set_condition(
    status: &mut Value,
    mut condition: Value,
    previous: &Value,
    parent: &Value,
    now: &str,
) {
    if let Some(generation) = parent["metadata"]["generation"].as_i64() {
        condition["observedGeneration"] = generation.into();
    }
    stamp_transition(&mut condition, previous, now);
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    if let Some(conditions) = status["conditions"].as_array_mut() {
        conditions.retain(|c| c["type"] != condition["type"]);
        conditions.push(condition);
    }
}

/// Sets a condition's `lastTransitionTime` unless it has one: the previous status's time
/// while the condition's status is unchanged, `now` otherwise.
pub fn stamp_transition(condition: &mut Value, previous: &Value, now: &str) {
    if condition
        .get("lastTransitionTime")
        .is_some_and(|t| t.is_string())
    {
        return;
    }
    let earlier = previous["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == condition["type"]))
        .filter(|c| c["status"] == condition["status"])
        .and_then(|c| c["lastTransitionTime"].as_str());
    condition["lastTransitionTime"] = earlier.unwrap_or(now).into();
}

/// The contract's rules for child `index` of a plugin's output, before the host adds its
/// metadata: a declared, namespaced kind; no namespace but the parent's; no metadata that
/// only the host may set. Returns its kind; `Err` is a policy violation or invalid output.
pub fn check_child(
    plugin: &Declaration,
    parent_namespace: &str,
    index: usize,
    child: &Value,
) -> Result<Kind, PlanError> {
    let invalid =
        |detail: String| PlanError::InvalidPluginOutput(format!("child #{index}: {detail}"));
    let policy = |detail: String| PlanError::PolicyViolation(format!("child #{index}: {detail}"));
    if !child.is_object() {
        return Err(invalid("not a JSON object".into()));
    }
    let (Some(api_version), Some(kind)) = (child["apiVersion"].as_str(), child["kind"].as_str())
    else {
        return Err(invalid("apiVersion and kind must be strings".into()));
    };
    let Some(kind) = plugin.children.iter().find(|k| k.matches(child)).cloned() else {
        let declared: Vec<String> = plugin.children.iter().map(ToString::to_string).collect();
        return Err(policy(format!(
            "{api_version}/{kind} is not a kind the plugin declared ({})",
            declared.join(", ")
        )));
    };
    if !kind.namespaced {
        return Err(policy(format!(
            "{kind} is cluster-scoped; children must live in the parent's namespace"
        )));
    }
    let Some(metadata) = child.get("metadata").and_then(Value::as_object) else {
        return Err(invalid("metadata must be an object".into()));
    };
    let name = metadata.get("name").and_then(Value::as_str).unwrap_or("");
    check_dns_subdomain(name).map_err(|p| invalid(format!("metadata.name: {p}")))?;
    let label = format!("{kind} {name:?}");
    match metadata.get("namespace") {
        None | Some(Value::Null) => {}
        Some(Value::String(ns)) if ns == parent_namespace => {}
        Some(other) => {
            return Err(policy(format!(
                "{label} has metadata.namespace {other}, but children must be in the parent's namespace {parent_namespace:?}"
            )));
        }
    }
    for field in [
        "ownerReferences",
        "finalizers",
        "uid",
        "resourceVersion",
        "managedFields",
        "deletionTimestamp",
    ] {
        if metadata.get(field).is_some_and(|v| !v.is_null()) {
            return Err(policy(format!(
                "{label} sets metadata.{field}, which only the host may set"
            )));
        }
    }
    for map in ["labels", "annotations"] {
        match metadata.get(map) {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                if let Some(key) = entries
                    .keys()
                    .find(|k| k.starts_with(RESERVED_PREFIX) || *k == MANAGED_BY_LABEL)
                {
                    return Err(policy(format!(
                        "{label} sets the reserved {map} key {key:?}"
                    )));
                }
            }
            Some(_) => {
                return Err(invalid(format!(
                    "{label}: metadata.{map} must be an object"
                )));
            }
        }
    }
    Ok(kind)
}

#[cfg(test)]
mod tests;
