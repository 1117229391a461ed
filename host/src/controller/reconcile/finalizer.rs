//! The host's finalizer on parents: when it is added, what happens on deletion, and the edits
//! themselves (JSON patches that test the parent's UID, so a stale view never edits a new
//! parent of the same name).

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::status::uid_test;
use super::{Error, PluginContext, spend_write};
use crate::faults;

/// The finalizer the host puts on parents of plugins that declare `needs-finalize`.
pub const FINALIZER: &str = "operator-host.dev/finalize";

/// Whether `parent` holds the host's finalizer.
pub fn holds(parent: &DynamicObject) -> bool {
    parent.finalizers().iter().any(|f| f == FINALIZER)
}

/// What to do with a parent being deleted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum DeletionStep {
    /// The host's finalizer is not on it: nothing to do but forget it.
    Forget,
    /// The policy no longer lets the plugin act in its namespace: release it without a call.
    ReleaseWithoutCall(String),
    /// Call the plugin's `finalize`; remove the finalizer once it reports done.
    CallFinalize,
}

/// The decision for a parent being deleted, from whether it holds the finalizer and the
/// policy's verdict on its namespace.
pub(super) fn deletion_step(parent: &DynamicObject, allowed: Result<(), String>) -> DeletionStep {
    if !holds(parent) {
        return DeletionStep::Forget;
    }
    match allowed {
        Ok(()) => DeletionStep::CallFinalize,
        Err(violation) => DeletionStep::ReleaseWithoutCall(violation),
    }
}

/// Adds the finalizer; a no-op on a stale copy (the resourceVersion test) instead of a
/// duplicate, and never on another parent of the same name (the UID test).
pub(super) async fn add(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
) -> Result<(), Error> {
    json_patch_parent(parent, ctx, api, add_operations(parent)).await?;
    faults::crash_point(faults::Step::FinalizerAdd);
    Ok(())
}

/// Removes the finalizer from the parent the host believes it is (UID and position tested).
pub(super) async fn remove(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
) -> Result<(), Error> {
    json_patch_parent(parent, ctx, api, remove_operations(parent)).await?;
    faults::crash_point(faults::Step::FinalizerRemove);
    Ok(())
}

fn add_operations(parent: &DynamicObject) -> Value {
    let version = json!({"op": "test", "path": "/metadata/resourceVersion", "value": parent.resource_version()});
    let add = if parent.metadata.finalizers.is_none() {
        json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})
    } else {
        json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER})
    };
    json!([uid_test(parent), version, add])
}

fn remove_operations(parent: &DynamicObject) -> Value {
    let index = parent
        .finalizers()
        .iter()
        .position(|f| f == FINALIZER)
        .unwrap_or(0);
    json!([
        uid_test(parent),
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ])
}

/// Applies the JSON patch `operations` to the parent's metadata.
#[tracing::instrument(level = "debug", name = "finalizer_write", skip_all)]
async fn json_patch_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    api: &Api<DynamicObject>,
    operations: Value,
) -> Result<(), Error> {
    // Built from literals above, so it always has the shape of a JSON patch.
    let patch: json_patch::Patch = serde_json::from_value(operations).unwrap_or_default();
    spend_write(ctx, parent, &ctx.plugin.load().decl.name, "finalizer").await;
    api.patch(
        &parent.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
    .map_err(Error::Finalizer)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(finalizers: Option<Vec<&str>>) -> DynamicObject {
        let resource = crate::test_support::memcached_resource();
        let mut object = DynamicObject::new("a", &resource).within("ns");
        object.metadata.uid = Some("uid-1".into());
        object.metadata.resource_version = Some("7".into());
        object.metadata.finalizers = finalizers.map(|f| f.into_iter().map(String::from).collect());
        object
    }

    #[test]
    fn every_finalizer_edit_tests_the_uid_of_the_parent_it_was_meant_for() {
        for operations in [
            add_operations(&parent(None)),
            add_operations(&parent(Some(vec!["other"]))),
            remove_operations(&parent(Some(vec!["other", FINALIZER]))),
        ] {
            assert_eq!(
                operations[0],
                json!({"op": "test", "path": "/metadata/uid", "value": "uid-1"})
            );
            // Each is a valid JSON patch.
            serde_json::from_value::<json_patch::Patch>(operations).unwrap();
        }
        let remove = remove_operations(&parent(Some(vec!["other", FINALIZER])));
        assert_eq!(remove[2]["path"], "/metadata/finalizers/1");
        let add = add_operations(&parent(None));
        assert_eq!(
            add[1]["value"], "7",
            "the add is also a no-op on a stale copy"
        );
    }

    #[test]
    fn a_parent_being_deleted_is_finalized_only_while_it_holds_the_finalizer() {
        assert_eq!(deletion_step(&parent(None), Ok(())), DeletionStep::Forget);
        assert_eq!(
            deletion_step(&parent(Some(vec!["other"])), Err("no".into())),
            DeletionStep::Forget
        );
        assert_eq!(
            deletion_step(&parent(Some(vec![FINALIZER])), Ok(())),
            DeletionStep::CallFinalize
        );
        assert_eq!(
            deletion_step(&parent(Some(vec![FINALIZER])), Err("namespace x".into())),
            DeletionStep::ReleaseWithoutCall("namespace x".into())
        );
    }
}
