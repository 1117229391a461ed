//! Pruning: deleting owned children that are no longer desired, each with its UID as a
//! precondition, so an object recreated under the same name is never hit; or, for a child
//! whose delete policy is `orphan`, releasing it: the host's labels, annotation and owner
//! reference removed by a JSON patch that tests the UID first.

use kube::api::{
    DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::{Error, PluginContext, child_reference, publish, spend_write};
use crate::api::api_for;
use crate::faults;
use crate::labels::{MANAGED_BY_LABEL, ON_PRUNE_ANNOTATION, PARENT_UID_LABEL, PLUGIN_LABEL};
use crate::metrics::KindLabels;
use crate::plan::{Plan, PruneTarget};
use crate::plugin::Plugin;
use crate::runtime::DeletePolicy;

/// Deletes the plan's prune targets in order.
pub(super) async fn prune_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    plan: &Plan,
) -> Result<(), Error> {
    for target in &plan.prune {
        spend_write(ctx, parent, &plugin.decl.name, "prune").await;
        let (done, reason) = match target.policy {
            DeletePolicy::Delete => (delete_target(&ctx.client, target).await?, "Pruned"),
            DeletePolicy::Orphan => (orphan_target(&ctx.client, target).await?, "Orphaned"),
        };
        if !done {
            continue;
        }
        faults::crash_point(faults::Step::Prune);
        ctx.metrics
            .prunes
            .get_or_create(&KindLabels {
                plugin: plugin.decl.name.clone(),
                kind: target.kind.kind.clone(),
            })
            .inc();
        let message = format!("{reason} {} {}", target.kind.kind, target.name);
        let related = child_reference(&target.kind, &target.namespace, &target.name, &target.uid);
        publish(
            ctx,
            plugin,
            parent,
            EventType::Normal,
            reason,
            message,
            Some(related),
        )
        .await;
    }
    Ok(())
}

/// Deletes `target` if it still is the object of that UID; returns whether it deleted it
/// (an object already gone, or replaced by another of that name, is nothing of ours).
#[tracing::instrument(level = "debug", name = "prune", skip_all, fields(kind = %target.kind.kind, name = %target.name, policy = "Delete"))]
pub(crate) async fn delete_target(
    client: &kube::Client,
    target: &PruneTarget,
) -> Result<bool, Error> {
    let api = api_for(client, &target.kind, Some(&target.namespace));
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(target.uid.clone()),
            resource_version: None,
        }),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api.delete(&target.name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(source) => Err(Error::Prune {
            kind: target.kind.kind.clone(),
            name: target.name.clone(),
            source,
        }),
    }
}

/// Releases `target`: removes the host's labels, its annotation and every controller
/// reference to the parent, if it still is the object of that UID; returns whether it did.
#[tracing::instrument(level = "debug", name = "prune", skip_all, fields(kind = %target.kind.kind, name = %target.name, policy = "Orphan"))]
pub(crate) async fn orphan_target(
    client: &kube::Client,
    target: &PruneTarget,
) -> Result<bool, Error> {
    let api = api_for(client, &target.kind, Some(&target.namespace));
    let failed = |source| Error::Prune {
        kind: target.kind.kind.clone(),
        name: target.name.clone(),
        source,
    };
    let Some(live) = api.get_opt(&target.name).await.map_err(failed)? else {
        return Ok(false);
    };
    if live.uid().as_deref() != Some(target.uid.as_str()) {
        return Ok(false);
    }
    let patch = orphan_patch(&live, &target.uid);
    match api
        .patch(
            &target.name,
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(patch).expect("a JSON patch")),
        )
        .await
    {
        Ok(_) => Ok(true),
        // Replaced or changed since the read (the test failed): the next reconcile decides.
        Err(kube::Error::Api(status))
            if status.code == 404 || status.code == 409 || status.code == 422 =>
        {
            Ok(false)
        }
        Err(source) => Err(failed(source)),
    }
}

/// The JSON patch that releases `live`: a test of its UID, then the removal of each host
/// label and annotation it has, and its owner references without the controller one.
fn orphan_patch(live: &DynamicObject, uid: &str) -> Value {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    let mut operations = vec![json!({"op": "test", "path": "/metadata/uid", "value": uid})];
    let labels = live.meta().labels.clone().unwrap_or_default();
    for key in [
        MANAGED_BY_LABEL,
        PLUGIN_LABEL,
        PARENT_UID_LABEL,
        crate::shard::SHARD_LABEL,
    ] {
        if labels.contains_key(key) {
            operations
                .push(json!({"op": "remove", "path": format!("/metadata/labels/{}", escape(key))}));
        }
    }
    if live.annotations().contains_key(ON_PRUNE_ANNOTATION) {
        operations.push(json!({"op": "remove",
            "path": format!("/metadata/annotations/{}", escape(ON_PRUNE_ANNOTATION))}));
    }
    let owners = live.owner_references();
    if !owners.is_empty() {
        let kept: Vec<_> = owners
            .iter()
            .filter(|r| r.controller != Some(true))
            .collect();
        operations
            .push(json!({"op": "test", "path": "/metadata/ownerReferences", "value": owners}));
        operations
            .push(json!({"op": "replace", "path": "/metadata/ownerReferences", "value": kept}));
    }
    Value::Array(operations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_orphan_patch_tests_the_uid_and_removes_only_what_the_host_put() {
        let live: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "keep", "namespace": "ns", "uid": "u-1",
                "labels": {"app": "web", MANAGED_BY_LABEL: "operator-host",
                           PLUGIN_LABEL: "p", PARENT_UID_LABEL: "p-1"},
                "annotations": {ON_PRUNE_ANNOTATION: "orphan", "note": "mine"},
                "ownerReferences": [
                    {"apiVersion": "x/v1", "kind": "P", "name": "p", "uid": "p-1", "controller": true},
                    {"apiVersion": "y/v1", "kind": "Q", "name": "q", "uid": "q-1"}
                ]
            }
        }))
        .unwrap();
        let patch = orphan_patch(&live, "u-1");
        let ops = patch.as_array().unwrap();
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/metadata/uid", "value": "u-1"})
        );
        let removed: Vec<&str> = ops
            .iter()
            .filter(|o| o["op"] == "remove")
            .filter_map(|o| o["path"].as_str())
            .collect();
        assert_eq!(
            removed,
            [
                "/metadata/labels/app.kubernetes.io~1managed-by",
                "/metadata/labels/operator-host.dev~1plugin",
                "/metadata/labels/operator-host.dev~1parent-uid",
                "/metadata/annotations/operator-host.dev~1on-prune",
            ]
        );
        let replaced = ops.iter().find(|o| o["op"] == "replace").unwrap();
        assert_eq!(
            replaced["value"],
            json!([{"apiVersion": "y/v1", "kind": "Q", "name": "q", "uid": "q-1"}])
        );
        // Applied to the object, the patch leaves the rest as it was.
        let mut object = serde_json::to_value(&live).unwrap();
        json_patch::patch(
            &mut object,
            &serde_json::from_value::<json_patch::Patch>(patch).unwrap(),
        )
        .unwrap();
        assert_eq!(object["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(object["metadata"]["annotations"], json!({"note": "mine"}));
    }
}
