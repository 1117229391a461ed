//! Pruning: deleting owned children that are no longer desired, each with its UID as a
//! precondition, so an object recreated under the same name is never hit.

use kube::api::{DeleteParams, DynamicObject, Preconditions, PropagationPolicy};
use kube::runtime::events::EventType;

use super::{Error, PluginContext, child_reference, publish, spend_write};
use crate::controller::api_for;
use crate::faults;
use crate::metrics::KindLabels;
use crate::plan::{Plan, PruneTarget};
use crate::plugin::Plugin;

/// Deletes the plan's prune targets in order.
pub(super) async fn prune_children(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &Plugin,
    plan: &Plan,
) -> Result<(), Error> {
    for target in &plan.prune {
        spend_write(ctx, &plugin.decl.name, "prune").await;
        if !delete_target(&ctx.client, target).await? {
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
        let message = format!("Pruned {} {}", target.kind.kind, target.name);
        let related = child_reference(&target.kind, &target.namespace, &target.name, &target.uid);
        publish(
            ctx,
            plugin,
            parent,
            EventType::Normal,
            "Pruned",
            message,
            Some(related),
        )
        .await;
    }
    Ok(())
}

/// Deletes `target` if it still is the object of that UID; returns whether it deleted it
/// (an object already gone, or replaced by another of that name, is nothing of ours).
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
