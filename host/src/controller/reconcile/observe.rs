//! Observe mode (`mode: Observe` in the policy): the plan is made and checked as in a
//! reconcile, then only compared with the cluster; the parent's `Drifted` condition says what
//! differs. No child is applied or pruned, no finalizer added or released.
//!
//! A child the plan wants is compared with the object of its name in the cluster, managed by
//! the host or not (read by name when the caches, which hold only the host's children, lack
//! it): how a team sees what a third-party plugin, or a new operator beside existing
//! workloads, would do before it may write. The host's own metadata (its labels, the owner
//! reference) is left out of the comparison; an object that exists and is not this parent's
//! is said to be so, since the host would refuse to write it.

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::{
    Error, PluginContext, call_plan, now_rfc3339, observed_children, parent_key, related_objects,
    status,
};
use crate::api::api_for;
use crate::metrics::PluginLabels;
use crate::plan::{self, PlanError};
use crate::plugin::Plugin;

/// The parents of a controller whose last observation found drift: the gauge's count.
#[derive(Debug, Default)]
pub struct DriftedParents(std::sync::Mutex<std::collections::HashSet<String>>);

impl DriftedParents {
    /// Records whether `parent` drifted; how many parents do now.
    pub(super) fn mark(&self, parent: &DynamicObject, drifted: bool) -> usize {
        let mut parents = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = parent_key(parent);
        if drifted {
            parents.insert(key);
        } else {
            parents.remove(&key);
        }
        parents.len()
    }
}

/// The condition type observe mode writes.
const DRIFTED: &str = "Drifted";

/// The longest `Drifted` message: the first differences, then how many more.
const MAX_MESSAGE: usize = 1000;

/// Observes one parent: plans, checks, compares, and writes the `Drifted` condition when what
/// differs changed.
pub(super) async fn observe_parent(
    parent: &DynamicObject,
    ctx: &PluginContext,
    plugin: &std::sync::Arc<Plugin>,
) -> Result<Action, Error> {
    let decl = &plugin.decl;
    let observed = observed_children(parent, ctx, plugin).await?;
    let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
    let related = related_objects(&parent_json, ctx, plugin).await?;
    super::record(ctx, plugin, &parent_json, &observed, &related);
    let plan = call_plan(ctx, plugin, parent_json.clone(), observed.clone(), related).await?;
    plugin
        .policy
        .check(decl, &parent_json, &plan)
        .map_err(PlanError::from)?;
    let mut differences = Vec::new();
    for child in &plan.apply {
        let Some(kind) = decl.children.iter().find(|k| k.matches(&child.object)) else {
            continue;
        };
        let name = child.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        let cached = observed
            .iter()
            .find(|o| kind.matches(o) && o["metadata"]["name"] == name)
            .cloned();
        let live = match cached {
            Some(live) => Some(live),
            None => {
                let api = api_for(&ctx.client, kind, parent.namespace().as_deref());
                api.get_opt(name)
                    .await
                    .map_err(|source| Error::Read {
                        kind: kind.kind.clone(),
                        name: name.to_string(),
                        source,
                    })?
                    .and_then(|mut object| {
                        object.metadata.managed_fields = None;
                        kind.to_json(&object)
                    })
            }
        };
        let what = format!("{}/{name}", kind.kind);
        match live {
            None => differences.push(format!("{what} is missing")),
            Some(live) => {
                let fields = plan::differing_fields(&live, &without_host_metadata(&child.object));
                let theirs = plan::controller_uid(&live) != parent.uid().as_deref();
                let owner = if theirs {
                    " exists and is not this parent's (the host would not write it)"
                } else {
                    ""
                };
                match (fields.is_empty(), theirs) {
                    (true, false) => {}
                    (true, true) => differences.push(format!("{what}{owner}")),
                    (false, _) => {
                        differences.push(format!("{what}{owner} differs in {}", fields.join(", ")))
                    }
                }
            }
        }
    }
    for target in &plan.prune {
        differences.push(format!(
            "{}/{} would be deleted",
            target.kind.kind, target.name
        ));
    }
    let drifted = !differences.is_empty();
    ctx.metrics
        .drifted_parents
        .get_or_create(&PluginLabels {
            plugin: decl.name.clone(),
        })
        .set(i64::try_from(ctx.drifted.mark(parent, drifted)).unwrap_or(i64::MAX));
    let condition = if drifted {
        serde_json::json!({
            "type": DRIFTED, "status": "True", "reason": "Observed",
            "message": message(&differences),
        })
    } else {
        serde_json::json!({
            "type": DRIFTED, "status": "False", "reason": "InSync",
            "message": format!("the cluster holds what plugin {} {} wants (observe mode: the host writes nothing)", decl.name, decl.version),
        })
    };
    let status = plan::with_condition(&parent_json, condition, &now_rfc3339());
    let api = api_for(&ctx.client, &decl.parent, parent.namespace().as_deref());
    status::write_status(parent, ctx, &api, &parent_json, status).await?;
    tracing::debug!(parent = %parent_key(parent), drifted, "observed");
    let rules = plugin.policy.rules(&decl.name);
    Ok(Action::requeue(ctx.resync.max(rules.min_requeue)))
}

/// `object` without what the host adds to every child: its labels and annotations under the
/// host's prefix, `app.kubernetes.io/managed-by`, and the owner references.
fn without_host_metadata(object: &Value) -> Value {
    let mut object = object.clone();
    let metadata = &mut object["metadata"];
    if let Some(metadata) = metadata.as_object_mut() {
        metadata.remove("ownerReferences");
    }
    for field in ["labels", "annotations"] {
        if let Some(map) = metadata[field].as_object_mut() {
            map.retain(|key, _| {
                !key.starts_with(crate::labels::RESERVED_PREFIX)
                    && key != crate::labels::MANAGED_BY_LABEL
            });
            if map.is_empty()
                && let Some(metadata) = metadata.as_object_mut()
            {
                metadata.remove(field);
            }
        }
    }
    object
}

/// The differences, cut to fit the condition's message.
fn message(differences: &[String]) -> String {
    let all = differences.join("; ");
    if all.len() <= MAX_MESSAGE {
        return all;
    }
    let cut: String = all.chars().take(MAX_MESSAGE).collect();
    format!("{cut}... ({} differences in all)", differences.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hosts_metadata_is_no_drift() {
        let desired = json!({"metadata": {"name": "a",
            "labels": {"app": "x", "app.kubernetes.io/managed-by": "operator-host",
                       "operator-host.dev/plugin": "p"},
            "ownerReferences": [{"uid": "u"}]},
            "spec": {"replicas": 2}});
        let live = json!({"metadata": {"name": "a", "labels": {"app": "x"}, "uid": "c"},
                          "spec": {"replicas": 2, "paused": false}});
        assert!(plan::differing_fields(&live, &without_host_metadata(&desired)).is_empty());
    }

    #[test]
    fn a_long_list_of_differences_is_cut_with_a_count() {
        let differences: Vec<String> = (0..100)
            .map(|i| format!("ConfigMap/c-{i} is missing"))
            .collect();
        let said = message(&differences);
        assert!(said.len() <= MAX_MESSAGE + 40, "{}", said.len());
        assert!(said.starts_with("ConfigMap/c-0 is missing; "), "{said}");
        assert!(said.ends_with("(100 differences in all)"), "{said}");
    }
}
