//! The parent's status: the churn guard (a status must follow from its inputs), the write
//! itself (carrying the parent's UID), and the failure status.

use std::hash::{Hash, Hasher};

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::{Value, json};

use super::parent_state::{lock, state_key};
use super::{Error, PluginContext, now_rfc3339, parent_key, publish, spend_write};
use crate::api::api_for;
use crate::faults;
use crate::labels::FIELD_MANAGER;
use crate::plan;
use crate::plugin::Plugin;
use crate::policy::Effective;

/// A hash of what a parent's status may legitimately follow: its generation, labels and
/// annotations, and the observed children's identities and resource versions.
fn inputs_hash(parent: &DynamicObject, observed: &[Value]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hash_parent_inputs(parent, &mut hasher);
    let mut children: Vec<(&str, &str, &str)> = observed
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default(),
            )
        })
        .collect();
    children.sort_unstable();
    children.hash(&mut hasher);
    hasher.finish()
}

/// Feeds what of the parent itself its children and status may follow into `hasher`: its
/// generation (the spec), labels and annotations.
pub(super) fn hash_parent_inputs(parent: &DynamicObject, hasher: &mut impl Hasher) {
    parent.metadata.generation.hash(hasher);
    parent.labels().hash(hasher);
    parent.annotations().hash(hasher);
}

pub(super) fn value_hash(value: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// A hash of `status` without its conditions' `lastTransitionTime`s. The host stamps those
/// with the time of the reconcile when the cached parent does not hold the condition yet, so
/// while a status write keeps failing (an API server restarting) every retry computes the same
/// status at another time: that is not a status that changes.
fn status_fingerprint(status: &Value) -> u64 {
    let mut status = status.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
            condition.remove("lastTransitionTime");
        }
    }
    value_hash(&status)
}

/// Refuses a status that keeps changing while nothing it could follow from changed: a
/// counter, or anything else derived from the previous status, would otherwise be written
/// (and re-trigger the parent) on every reconcile.
pub(super) fn check_status_churn(
    parent: &DynamicObject,
    ctx: &PluginContext,
    rules: &Effective,
    parent_json: &Value,
    observed: &[Value],
    status: &Value,
) -> Result<(), Error> {
    let inputs = inputs_hash(parent, observed);
    let status_hash = status_fingerprint(status);
    let mut states = lock(&ctx.parents);
    let state = states.entry(state_key(parent)).or_default();
    if parent_json.get("status") == Some(status) || state.last_status == Some(status_hash) {
        // Unchanged, or what the host wrote last (a lagging cache): not a change.
        state.status_changes = 0;
        state.inputs = inputs;
        state.last_status = Some(status_hash);
        return Ok(());
    }
    if state.inputs == inputs {
        state.status_changes += 1;
    } else {
        state.inputs = inputs;
        state.status_changes = 1;
    }
    if state.status_changes >= rules.status_churn_limit {
        return Err(Error::StatusNotConverging {
            plugin: ctx.plugin.load().decl.name.clone(),
            changes: rules.status_churn_limit,
        });
    }
    state.last_status = Some(status_hash);
    Ok(())
}

/// The status write: a JSON patch that tests the UID of the parent the status was computed
/// for, then replaces the status. A server-side apply cannot carry that precondition to the
/// status subresource: kube-apiserver copies the stored metadata over the patch's there, so a
/// `metadata.uid` in it is ignored and a stale view would write onto a new parent of the same
/// name.
pub(crate) fn status_patch(parent: &DynamicObject, status: Value) -> json_patch::Patch {
    let operations = json!([
        uid_test(parent),
        {"op": "add", "path": "/status", "value": status},
    ]);
    // Built from literals, so it always has the shape of a JSON patch.
    serde_json::from_value(operations).unwrap_or_default()
}

/// The JSON-patch operation that fails unless the live object is the one the host believes in.
pub(super) fn uid_test(parent: &DynamicObject) -> Value {
    json!({"op": "test", "path": "/metadata/uid", "value": parent.uid()})
}

/// Writes `status` onto the parent the host believes it is (see [`status_patch`]).
#[tracing::instrument(level = "debug", name = "status_write", skip_all)]
pub(crate) async fn patch_parent_status(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    status: Value,
) -> Result<DynamicObject, kube::Error> {
    api.patch_status(
        &parent.name_any(),
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::<()>::Json(status_patch(parent, status)),
    )
    .await
}

/// Writes `status` unless the parent has it already (no hot loop on our own writes): the
/// cached parent holds it, and no later write of this host put another one there.
pub(super) async fn write_status(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
    parent_json: &Value,
    status: Value,
) -> Result<(), Error> {
    let status_hash = value_hash(&status);
    let written_other = lock(&ctx.parents)
        .get(&state_key(parent))
        .and_then(|state| state.written_status)
        .is_some_and(|written| written != status_hash);
    if parent_json.get("status") == Some(&status) && !written_other {
        return Ok(());
    }
    spend_write(ctx, parent, &ctx.plugin.load().decl.name, "status").await;
    patch_parent_status(api, parent, status)
        .await
        .map_err(Error::WriteStatus)?;
    lock(&ctx.parents)
        .entry(state_key(parent))
        .or_default()
        .written_status = Some(status_hash);
    faults::crash_point(faults::Step::Status);
    Ok(())
}

/// Puts `Reconciled=False` on the parent and publishes a Warning event; for a parent that is
/// gone ([`Error::StaleParent`]) there is nobody to tell, and neither a shutdown nor a lost
/// lead is the parent's business.
pub(super) async fn report_failure(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    error: &Error,
) {
    // A host that lost the lead mid-reconcile must not write the failure either (its writes
    // are refused by the fence anyway): the leader reconciles this parent.
    if matches!(error, Error::StaleParent { .. } | Error::ShuttingDown)
        || !ctx.leadership.may_write()
    {
        tracing::debug!(plugin = %plugin.decl.name, parent = %parent_key(parent), %error, "reconcile ended");
        return;
    }
    tracing::warn!(plugin = %plugin.decl.name, parent = %parent_key(parent), reason = error.reason(), %error, "reconcile failed");
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let status = plan::failure_status(
        &parent_json,
        error.reason(),
        &error.to_string(),
        &now_rfc3339(),
    );
    if parent.metadata.deletion_timestamp.is_none() {
        let api = api_for(
            &ctx.client,
            &plugin.decl.parent,
            parent.namespace().as_deref(),
        );
        if let Err(e) = write_status(parent, ctx, &api, &parent_json, status).await {
            tracing::warn!(parent = %parent_key(parent), error = %e, "cannot write the failure status");
        }
    }
    publish(
        ctx,
        plugin,
        parent,
        EventType::Warning,
        error.reason(),
        error.to_string(),
        None,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_recomputed_at_another_time_has_the_same_fingerprint() {
        let at = |time: &str, message: &str| {
            json!({"readyReplicas": 1, "conditions": [
                {"type": "Reconciled", "status": "True", "message": message,
                 "lastTransitionTime": time}]})
        };
        assert_eq!(
            status_fingerprint(&at("2026-12-05T22:44:06Z", "m")),
            status_fingerprint(&at("2026-12-05T22:44:09Z", "m"))
        );
        assert_ne!(
            status_fingerprint(&at("2026-12-05T22:44:06Z", "m")),
            status_fingerprint(&at("2026-12-05T22:44:06Z", "another"))
        );
        assert_ne!(
            status_fingerprint(&json!({"calls": 1})),
            status_fingerprint(&json!({"calls": 2}))
        );
    }

    #[test]
    fn the_status_write_carries_the_uid_of_the_parent_it_was_computed_for() {
        let resource = crate::test_support::memcached_resource();
        let mut parent = DynamicObject::new("a", &resource).within("ns");
        parent.metadata.uid = Some("uid-1".into());
        let patch = serde_json::to_value(status_patch(&parent, json!({"ready": true}))).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "uid-1"},
                {"op": "add", "path": "/status", "value": {"ready": true}},
            ])
        );
    }
}
