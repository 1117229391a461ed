//! Applying a plan's children: server-side apply in plan order, each write carrying the UID
//! the host believes the child has, and one event per child that changed.
//!
//! A plan comes in stages (contract 0.2.0's barriers): a stage is applied only once the
//! barrier child of the one before is ready, as the API server answered its apply (or as the
//! cache has it, when nothing needed applying). Update strategies: `create-only` children
//! that exist are not written; `recreate` children whose change the API server refuses as
//! immutable are deleted (UID precondition, foreground) and created again by a later
//! reconcile, once the deletion is seen; `in-place` ones report that refusal
//! ([`Error::ImmutableField`]) instead of retrying it.
//!
//! A child is not applied again when the plugin wants the body this host last applied to it
//! and the cached child still holds every field of that body with its value: the apply would
//! change nothing. A field someone else changed shows in the cache (and its watch event
//! reconciles), so drift is still put back; a field the plugin stops setting changes the
//! body, so its removal is still applied.
//!
//! # Guarantees
//! - A child that exists and is not controlled by this parent is never written
//!   ([`Error::NotOwned`]).
//! - A stale cache cannot make the host take over a namesake: the apply of a known child
//!   carries its UID, a replaced object answers with a conflict, and the host re-reads it.
//! - A stale view of a parent cannot make or change children for it: before its first write
//!   of a reconcile, the host reads the parent and goes on only if it still exists with the
//!   UID and the generation (the spec) the plan was made from.
//!
//! # Caveats
//! - Creating a child the host has never seen cannot carry a precondition (Kubernetes has none
//!   for "does not exist" in an apply): an unowned object created in the few milliseconds
//!   between the live read and the apply would be taken over.

use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::events::EventType;
use serde_json::Value;

use super::parent_state::{ChildChurn, lock, state_key};
use super::status::{hash_parent_inputs, value_hash};
use super::{Error, PluginContext, child_reference, publish, spend_write};
use crate::api::api_for;
use crate::faults;
use crate::kinds::Kind;
use crate::labels::FIELD_MANAGER;
use crate::metrics::KindLabels;
use crate::plan::{Plan, PlannedChild, describe_wait, differing_fields, holds, is_ready, project};
use crate::plugin::Plugin;
use crate::runtime::UpdateStrategy;

/// How one apply changed a child, as its event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChildChange {
    Created,
    Updated,
}

impl ChildChange {
    fn reason(self) -> &'static str {
        match self {
            ChildChange::Created => "Created",
            ChildChange::Updated => "Updated",
        }
    }
}

/// What applying a plan did.
#[derive(Debug, Default)]
pub(super) struct Applied {
    /// Children that changed.
    pub changed: usize,
    /// When a barrier held the plan: what it waits for, and how many children wait with it.
    pub waiting: Option<String>,
}

/// Server-side applies each child in plan order, stage by stage, as far as the barriers let.
pub(super) async fn apply_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    plan: &Plan,
    observed: &[Value],
    inputs: u64,
) -> Result<Applied, Error> {
    let mut outcome = Applied::default();
    // The child that closed the stage being applied, as the API server has it now.
    let mut barrier: Option<(&PlannedChild, Option<Value>)> = None;
    let mut parent_checked = false;
    let (last_applied, last_written, churn) = lock(&ctx.parents)
        .get(&state_key(parent))
        .map(|state| {
            (
                state.applied.clone(),
                state.written.clone(),
                state.child_churn,
            )
        })
        .unwrap_or_default();
    let churning = churning_child(plugin, plan, observed, &last_applied, &last_written);
    check_child_churn(parent, ctx, plugin, inputs, churn, churning)?;
    let mut applied = std::collections::HashMap::with_capacity(plan.apply.len());
    let mut written = std::collections::HashMap::with_capacity(plan.apply.len());
    for (index, planned) in plan.apply.iter().enumerate() {
        if let Some((closing, live)) = &barrier
            && closing.stage < planned.stage
        {
            if let Some(wait) = unready(closing, live.as_ref()) {
                outcome.waiting = Some(format!(
                    "waiting for {wait}; {} more children after it are not applied yet",
                    plan.apply.len() - index
                ));
                break;
            }
            barrier = None;
        }
        let child = &planned.object;
        let Some(kind) = plugin.decl.children.iter().find(|k| k.matches(child)) else {
            continue; // the plan only contains declared kinds
        };
        let name = child["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let api = api_for(&ctx.client, kind, parent.namespace().as_deref());
        let cached = observed
            .iter()
            .find(|o| kind.matches(o) && o["metadata"]["name"] == name.as_str())
            .cloned();
        let key = format!("{}/{}/{name}", kind.group, kind.kind);
        let body = value_hash(child);
        let labels = || KindLabels {
            plugin: plugin.decl.name.clone(),
            kind: kind.kind.clone(),
        };
        let closes_stage = planned.barrier.is_some();
        let unchanged = last_applied.get(&key) == Some(&body)
            && cached.as_ref().is_some_and(|cached| holds(cached, child));
        // Being deleted (a recreate under way): written again once it is gone.
        let deleting = cached
            .as_ref()
            .is_some_and(|c| !c["metadata"]["deletionTimestamp"].is_null());
        let exists_as_is = planned.update == UpdateStrategy::CreateOnly && cached.is_some();
        if unchanged || deleting || exists_as_is {
            ctx.metrics.applies_skipped.get_or_create(&labels()).inc();
            if !deleting {
                if let Some(version) = last_written.get(&key) {
                    written.insert(key.clone(), version.clone());
                }
                applied.insert(key, body);
            }
            if closes_stage {
                barrier = Some((planned, cached));
            }
            continue;
        }
        let before = match cached {
            Some(cached) => Some(cached),
            // Not in our caches: it must not exist, or be ours and not cached yet.
            None => read_owned(&api, kind, &name, parent).await?,
        };
        if planned.update == UpdateStrategy::CreateOnly && before.is_some() {
            applied.insert(key, body);
            if closes_stage {
                barrier = Some((planned, before));
            }
            continue;
        }
        // Before the first write: the view the plan was made from must still be the parent's.
        if !parent_checked {
            ensure_parent_current(parent, ctx, plugin).await?;
            parent_checked = true;
        }
        let result = apply_believing(ctx, plugin, parent, &api, kind, child, before.as_ref()).await;
        let (before, after) = match result {
            Err(Error::Apply { source, .. }) if is_uid_conflict(&source) => {
                // The object the host believed in was deleted or replaced since its cache saw
                // it: read what is there now and decide again, once.
                tracing::debug!(kind = %kind, %name, "child replaced since cached; re-reading");
                let live = read_owned(&api, kind, &name, parent).await?;
                if live.is_none() && !parent_checked {
                    ensure_parent_current(parent, ctx, plugin).await?;
                    parent_checked = true;
                }
                let after =
                    apply_believing(ctx, plugin, parent, &api, kind, child, live.as_ref()).await?;
                (live, after)
            }
            Err(Error::Apply { source, .. }) if is_immutable_refusal(&source) => {
                let message = api_message(&source);
                match (planned.update, before.as_ref()) {
                    (UpdateStrategy::Recreate, Some(existing)) => {
                        recreate(ctx, plugin, parent, &api, kind, existing, &message).await?;
                        outcome.changed += 1;
                        if closes_stage {
                            barrier = Some((planned, None));
                        }
                        continue;
                    }
                    _ => {
                        return Err(Error::ImmutableField {
                            kind: kind.kind.clone(),
                            name,
                            message,
                        });
                    }
                }
            }
            result => (before, result?),
        };
        faults::crash_point(faults::Step::Apply);
        ctx.metrics.applies.get_or_create(&labels()).inc();
        if let Some(version) = after["metadata"]["resourceVersion"].as_str() {
            written.insert(key.clone(), version.to_string());
        }
        applied.insert(key, body);
        let change = child_change(child, before.as_ref(), &after);
        if closes_stage {
            barrier = Some((planned, Some(after.clone())));
        }
        let Some(change) = change else {
            continue;
        };
        outcome.changed += 1;
        let reason = change.reason();
        let text = |field: &str| after["metadata"][field].as_str().unwrap_or_default();
        let related = child_reference(kind, text("namespace"), &name, text("uid"));
        let note = format!("{reason} {} {name}", kind.kind);
        publish(
            ctx,
            plugin,
            parent,
            EventType::Normal,
            reason,
            note,
            Some(related),
        )
        .await;
    }
    if outcome.waiting.is_none()
        && let Some((closing, live)) = &barrier
    {
        // The last stage's barrier holds nothing back, but the parent is not reconciled
        // until it is ready either: what it waits for is what the plugin asked for.
        outcome.waiting = unready(closing, live.as_ref()).map(|wait| format!("waiting for {wait}"));
    }
    // Only the children of this plan: one it no longer returns is pruned, not remembered.
    // Children after a barrier that holds are not remembered either: they were not applied.
    let mut states = lock(&ctx.parents);
    let state = states.entry(state_key(parent)).or_default();
    state.applied = applied;
    state.written = written;
    Ok(outcome)
}

/// A hash of what a parent's children may legitimately follow besides the children
/// themselves: the parent's generation, labels and annotations, and its related objects
/// except those this host manages for `plugin` (its own children read back would otherwise
/// be a new input after every write).
pub(super) fn churn_inputs(
    parent: &DynamicObject,
    related: &[crate::runtime::RelatedObjects],
    plugin: &str,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hash_parent_inputs(parent, &mut hasher);
    let managed = |object: &str| {
        let object: Value = serde_json::from_str(object).unwrap_or(Value::Null);
        let labels = &object["metadata"]["labels"];
        labels[crate::labels::MANAGED_BY_LABEL] == crate::labels::MANAGED_BY
            && labels[crate::labels::PLUGIN_LABEL] == plugin
    };
    for related in related {
        related.name.hash(&mut hasher);
        let mut objects: Vec<&String> = related.objects.iter().filter(|o| !managed(o)).collect();
        objects.sort();
        objects.hash(&mut hasher);
    }
    hasher.finish()
}

/// The first child the plan changes although only this host changed it since its last apply
/// (the cached child is still at the resourceVersion that apply left): its `Kind name`, and
/// the fields that would change.
fn churning_child(
    plugin: &Plugin,
    plan: &Plan,
    observed: &[Value],
    last_applied: &std::collections::HashMap<String, u64>,
    last_written: &std::collections::HashMap<String, String>,
) -> Option<(String, Vec<String>)> {
    plan.apply.iter().find_map(|planned| {
        let child = &planned.object;
        let kind = plugin.decl.children.iter().find(|k| k.matches(child))?;
        let name = child["metadata"]["name"].as_str()?;
        let key = format!("{}/{}/{name}", kind.group, kind.kind);
        if last_applied.get(&key)? == &value_hash(child) {
            return None;
        }
        let cached = observed
            .iter()
            .find(|o| kind.matches(o) && o["metadata"]["name"] == name)?;
        let version = cached["metadata"]["resourceVersion"].as_str()?;
        (last_written.get(&key).map(String::as_str) == Some(version)).then(|| {
            (
                format!("{} {name}", kind.kind),
                differing_fields(cached, child),
            )
        })
    })
}

/// Refuses a plan that changes a child again when only this host changed it since its last
/// apply and the parent's inputs are the same: a child derived from what the host itself last
/// wrote (its resourceVersion, a counter) would otherwise be written, and reconciled again,
/// without end. A child changed by anyone else (a controller filling its status, a user) is
/// an input like any other and resets the count.
fn check_child_churn(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    inputs: u64,
    churn: ChildChurn,
    churning: Option<(String, Vec<String>)>,
) -> Result<(), Error> {
    let next = churn.next(inputs, churning.is_some());
    lock(&ctx.parents)
        .entry(state_key(parent))
        .or_default()
        .child_churn = next;
    let limit = plugin.policy.rules(&plugin.decl.name).status_churn_limit;
    match churning {
        Some((child, fields)) if next.changes >= limit => Err(Error::ChildrenNotConverging {
            plugin: plugin.decl.name.clone(),
            child,
            fields: fields.join(", "),
            changes: limit,
        }),
        _ => Ok(()),
    }
}

/// What the barrier child `closing` waits for, unless `live` (as the API server has it now)
/// is ready.
fn unready(closing: &PlannedChild, live: Option<&Value>) -> Option<String> {
    let readiness = closing.barrier.as_ref()?;
    (!live.is_some_and(|live| is_ready(live, readiness)))
        .then(|| describe_wait(&closing.object, readiness))
}

/// Deletes `existing` (a `recreate` child whose change was refused as immutable) in the
/// foreground, with its UID as precondition; the reconcile that sees it gone creates it anew.
#[tracing::instrument(level = "debug", name = "recreate", skip_all, fields(kind = %kind.kind, name = existing["metadata"]["name"].as_str().unwrap_or_default()))]
async fn recreate(
    ctx: &PluginContext,
    plugin: &Plugin,
    parent: &DynamicObject,
    api: &Api<DynamicObject>,
    kind: &Kind,
    existing: &Value,
    refusal: &str,
) -> Result<(), Error> {
    let name = existing["metadata"]["name"].as_str().unwrap_or_default();
    let uid = existing["metadata"]["uid"].as_str().unwrap_or_default();
    spend_write(ctx, parent, &plugin.decl.name, "recreate").await;
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {}
        // Gone already, or replaced: the next reconcile sees what is there.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
        Err(source) => {
            return Err(Error::Prune {
                kind: kind.kind.clone(),
                name: name.to_string(),
                source,
            });
        }
    }
    let namespace = existing["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let related = child_reference(kind, namespace, name, uid);
    let note = format!(
        "Recreating {} {name}: its change was refused as immutable ({refusal})",
        kind.kind
    );
    publish(
        ctx,
        plugin,
        parent,
        EventType::Normal,
        "Recreating",
        note,
        Some(related),
    )
    .await;
    Ok(())
}

/// Whether an apply was refused because it changes what cannot change after creation (a
/// Job's template, a Deployment's selector, most of a StatefulSet's spec): 422 with the API
/// server's wording for it. Any other refusal (an invalid value) is not one: deleting the
/// child could not make it valid.
fn is_immutable_refusal(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else {
        return false;
    };
    let message = status.message.to_ascii_lowercase();
    status.code == 422
        && !is_uid_conflict(error)
        && (message.contains("field is immutable")
            || message.contains("is immutable after creation")
            || message.contains("may not change once set")
            || message.contains("forbidden: updates to"))
}

/// What the API server refused, briefly: `spec.template: field is immutable` for each field
/// it names (its message repeats the whole refused value, a pod template for a Job).
fn api_message(error: &kube::Error) -> String {
    const MOST: usize = 300;
    let kube::Error::Api(status) = error else {
        return error.to_string();
    };
    let causes: Vec<String> = status
        .details
        .iter()
        .flat_map(|details| &details.causes)
        .map(|cause| {
            let message = cause.message.rsplit(": ").next().unwrap_or(&cause.message);
            format!(
                "{}: {}",
                cause.field,
                message.chars().take(MOST).collect::<String>()
            )
        })
        .collect();
    if causes.is_empty() {
        status.message.chars().take(MOST).collect()
    } else {
        causes.join("; ")
    }
}

/// Fails with [`Error::StaleParent`] unless `parent` still exists with the UID and the
/// generation the host has: a create carries no precondition, so it is the parent's identity
/// that is checked first; and a spec that changed since the cache showed it (a change that
/// was undone while the host was not looking, say) must not be written to the children.
async fn ensure_parent_current(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
) -> Result<(), Error> {
    let api = api_for(
        &ctx.client,
        &plugin.decl.parent,
        parent.namespace().as_deref(),
    );
    let live = api
        .get_opt(&parent.name_any())
        .await
        .map_err(|source| Error::Read {
            kind: plugin.decl.parent.kind.clone(),
            name: parent.name_any(),
            source,
        })?;
    match live {
        Some(live)
            if live.uid() == parent.uid()
                && live.metadata.generation == parent.metadata.generation
                && live.metadata.deletion_timestamp.is_none() =>
        {
            Ok(())
        }
        _ => Err(Error::StaleParent {
            name: parent.name_any(),
        }),
    }
}

/// The live object of that name, if it exists and is controlled by `parent`; an object
/// of someone else's is [`Error::NotOwned`].
async fn read_owned(
    api: &Api<DynamicObject>,
    kind: &Kind,
    name: &str,
    parent: &DynamicObject,
) -> Result<Option<Value>, Error> {
    let existing = api.get_opt(name).await.map_err(|source| Error::Read {
        kind: kind.kind.clone(),
        name: name.to_string(),
        source,
    })?;
    let Some(existing) = existing else {
        return Ok(None);
    };
    if !is_controlled_by(&existing, parent) {
        return Err(Error::NotOwned {
            kind: kind.kind.clone(),
            name: name.to_string(),
        });
    }
    Ok(Some(serde_json::to_value(existing).unwrap_or(Value::Null)))
}

/// Applies `child`, carrying the UID of `believed` (the object the host thinks it is
/// updating) as a precondition; a create carries none.
#[tracing::instrument(level = "debug", name = "apply", skip_all, fields(kind = %kind.kind, name = child["metadata"]["name"].as_str().unwrap_or_default()))]
async fn apply_believing(
    ctx: &PluginContext,
    plugin: &Plugin,
    parent: &DynamicObject,
    api: &Api<DynamicObject>,
    kind: &Kind,
    child: &Value,
    believed: Option<&Value>,
) -> Result<Value, Error> {
    let name = child["metadata"]["name"].as_str().unwrap_or_default();
    let mut body = with_uid_precondition(child, believed);
    // With sharding, the child follows its parent into this shard's caches.
    if let Some(shard) = &ctx.shard
        && let Some(labels) = body["metadata"]["labels"].as_object_mut()
    {
        labels.insert(crate::shard::SHARD_LABEL.into(), shard.as_str().into());
    }
    spend_write(ctx, parent, &plugin.decl.name, "apply").await;
    let after = api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|source| Error::Apply {
            kind: kind.kind.clone(),
            name: name.to_string(),
            source,
        })?;
    Ok(serde_json::to_value(after).unwrap_or(Value::Null))
}

/// `child` with `metadata.uid` set to the UID of `believed`: the API server refuses the apply
/// if the object of that name now has another UID.
fn with_uid_precondition(child: &Value, believed: Option<&Value>) -> Value {
    let mut body = child.clone();
    if let Some(uid) = believed.and_then(|b| b["metadata"]["uid"].as_str())
        && let Some(metadata) = body["metadata"].as_object_mut()
    {
        metadata.insert("uid".into(), uid.into());
    }
    body
}

/// Whether an apply failed because the object's UID is not the one it carried: 422
/// "metadata.uid: ... field is immutable" when another object has the name now, 409 "uid
/// mismatch" when none has. (Other refusals may mention a UID too: a Job's template carries
/// its `controller-uid` label.)
fn is_uid_conflict(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            let message = status.message.to_ascii_lowercase();
            (status.code == 422 && message.contains("metadata.uid"))
                || (status.code == 409 && message.contains("uid mismatch"))
        }
        _ => false,
    }
}

/// Whether `child` has a controller reference to `parent`.
pub(super) fn is_controlled_by(child: &DynamicObject, parent: &DynamicObject) -> bool {
    let uid = parent.uid();
    child
        .owner_references()
        .iter()
        .any(|r| Some(&r.uid) == uid.as_ref() && r.controller == Some(true))
}

/// How the apply of `desired` changed the child, judged on the fields the host applies only:
/// what the child's own controller and the API server write (status, revision annotations,
/// resource versions) is no change of the host's, so a lagging cache makes no event.
pub(super) fn child_change(
    desired: &Value,
    before: Option<&Value>,
    after: &Value,
) -> Option<ChildChange> {
    let Some(before) = before else {
        return Some(ChildChange::Created);
    };
    (project(desired, before) != project(desired, after)).then_some(ChildChange::Updated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas: i64, extra: Value) -> Value {
        let mut object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "a", "labels": {"app": "a"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
        });
        json_patch::merge(&mut object, &extra);
        object
    }

    #[test]
    fn a_child_not_seen_before_is_created() {
        let desired = deployment(1, json!({}));
        assert_eq!(
            child_change(&desired, None, &desired),
            Some(ChildChange::Created)
        );
    }

    #[test]
    fn what_others_write_is_no_change_of_the_hosts() {
        let desired = deployment(1, json!({}));
        let before = deployment(1, json!({"metadata": {"uid": "u", "resourceVersion": "1"}}));
        // The deployment controller's status, revision annotation and a server default.
        let after = deployment(
            1,
            json!({
                "metadata": {"uid": "u", "resourceVersion": "9",
                             "annotations": {"deployment.kubernetes.io/revision": "1"}},
                "spec": {"strategy": {"type": "RollingUpdate"},
                         "template": {"spec": {"containers": [{"name": "c", "image": "x", "imagePullPolicy": "Always"}]}}},
                "status": {"replicas": 1}
            }),
        );
        assert_eq!(child_change(&desired, Some(&before), &after), None);
    }

    #[test]
    fn a_field_the_host_applies_that_changed_is_an_update() {
        let desired = deployment(3, json!({}));
        let before = deployment(1, json!({}));
        let after = deployment(3, json!({}));
        assert_eq!(
            child_change(&desired, Some(&before), &after),
            Some(ChildChange::Updated)
        );
        // A list that grew is compared whole.
        let desired = deployment(
            1,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}, {"name": "d"}]}}}}),
        );
        assert_eq!(
            child_change(&desired, Some(&before), &desired),
            Some(ChildChange::Updated)
        );
    }

    #[test]
    fn the_apply_of_a_known_child_carries_its_uid() {
        let desired = deployment(1, json!({}));
        let believed = deployment(1, json!({"metadata": {"uid": "u-1"}}));
        assert_eq!(
            with_uid_precondition(&desired, Some(&believed))["metadata"]["uid"],
            "u-1"
        );
        assert!(
            with_uid_precondition(&desired, None)["metadata"]
                .get("uid")
                .is_none()
        );
    }

    #[test]
    fn only_a_refusal_about_the_uid_is_a_uid_conflict() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(
                kube::core::Status::failure(message, "Conflict")
                    .with_code(code)
                    .boxed(),
            )
        };
        // What kube-apiserver 1.35 answers (seen on the devcluster).
        assert!(is_uid_conflict(&status(
            422,
            "ConfigMap \"a\" is invalid: metadata.uid: Invalid value: \"0000\": field is immutable"
        )));
        assert!(is_uid_conflict(&status(
            409,
            "Operation cannot be fulfilled on configmaps \"b\": uid mismatch: the provided \
             object specified uid 0000, and no existing object was found"
        )));
        assert!(!is_uid_conflict(&status(
            409,
            "Apply failed with 1 conflict"
        )));
        assert!(!is_uid_conflict(&status(500, "uid")));
        // A Job's template names its controller-uid label: that is no conflict of the UID.
        assert!(!is_uid_conflict(&status(
            422,
            "Job.batch \"s\" is invalid: spec.template: Invalid value: {\"labels\":\
             {\"controller-uid\":\"614c\"}}: field is immutable"
        )));
    }

    #[test]
    fn an_immutable_refusal_is_told_apart_and_summed_up_by_field() {
        let refusal = |message: &str, causes: Vec<kube::core::response::StatusCause>| {
            let details = kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            };
            kube::Error::Api(
                kube::core::Status::failure(message, "Invalid")
                    .with_code(422)
                    .with_details(details)
                    .boxed(),
            )
        };
        let job = refusal(
            "Job.batch \"s\" is invalid: spec.template: Invalid value: {\"Spec\":{}}: field is immutable",
            vec![kube::core::response::StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: {\"Spec\":{}}: field is immutable".into(),
                field: "spec.template".into(),
            }],
        );
        assert!(is_immutable_refusal(&job));
        assert_eq!(api_message(&job), "spec.template: field is immutable");
        let stateful_set = refusal(
            "StatefulSet.apps \"db\" is invalid: spec: Forbidden: updates to statefulset spec for \
             fields other than 'replicas' are forbidden",
            vec![],
        );
        assert!(is_immutable_refusal(&stateful_set));
        // A value the API server refuses on create as well is not made valid by a recreate.
        let invalid = refusal(
            "Deployment.apps \"d\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            vec![],
        );
        assert!(!is_immutable_refusal(&invalid));
    }
}
