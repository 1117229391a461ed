//! What a plugin change leaves behind, and what the host does about it.
//!
//! - A plugin removed (or whose new version reconciles another parent kind) leaves parents
//!   that hold the host's finalizer with nobody to finalize them. The host **keeps the
//!   finalizer** (the plugin's cleanup has not run; dropping it silently could leak what the
//!   plugin manages outside the cluster) and marks each such parent `Reconciled=False` with
//!   reason `PluginRemoved`, a Warning event, and a message with the exact command that
//!   releases it. Putting the plugin back finalizes them as usual.
//! - A new version that no longer declares a child kind stops watching it, so its owned
//!   children of that kind would never be pruned: the host prunes them once, at the swap.
//!
//! # Caveats
//! Both happen when the change takes effect. A host started without the plugin knows nothing
//! of it: parents deleted then wait without a condition (the README says how to release them).

use kube::api::{DynamicObject, ListParams};
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;

use super::context::recorder;
use super::reconcile::{
    FINALIZER, delete_target, event, holds_finalizer, now_rfc3339, patch_parent_status,
};
use crate::api::api_for;
use crate::declaration::Declaration;
use crate::kinds::Kind;
use crate::labels::managed_children_selector;
use crate::labels::{MANAGED_BY, MANAGED_BY_LABEL, PARENT_UID_LABEL, PLUGIN_LABEL};
use crate::plan::{self, PruneTarget};
use crate::plugin::Plugin;

/// The `Reconciled=False` reason on parents whose plugin is gone.
pub const PLUGIN_REMOVED: &str = "PluginRemoved";

/// The scopes to act in: the configured namespaces, or all (`None`).
fn scopes(namespaces: &[String]) -> Vec<Option<&str>> {
    if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().map(|n| Some(n.as_str())).collect()
    }
}

/// Marks every parent of `old` that holds the host's finalizer: `why` says what happened to
/// the plugin (removed, or now reconciling another kind).
pub async fn mark_parents_without_plugin(
    client: &Client,
    old: &Plugin,
    namespaces: &[String],
    why: &str,
) {
    let recorder = recorder(client);
    for scope in scopes(namespaces) {
        let api = api_for(client, &old.decl.parent, scope);
        let parents = match api.list(&ListParams::default()).await {
            Ok(parents) => parents,
            Err(error) => {
                tracing::warn!(plugin = %old.decl.name, kind = %old.decl.parent, %error, "cannot list the parents of a removed plugin to mark those holding its finalizer");
                continue;
            }
        };
        for parent in parents.items.iter().filter(|p| holds_finalizer(p)) {
            let message = orphan_message(&old.decl.name, &old.decl.parent, parent, why);
            let parent_json = serde_json::to_value(parent).unwrap_or(Value::Null);
            let status =
                plan::failure_status(&parent_json, PLUGIN_REMOVED, &message, &now_rfc3339());
            // The parent's own namespace: listed across all namespaces, it is not addressed
            // through that API (a name there means a cluster-scoped object).
            let parent_api = api_for(client, &old.decl.parent, parent.namespace().as_deref());
            if let Err(error) = patch_parent_status(&parent_api, parent, status).await {
                tracing::warn!(parent = %parent.name_any(), %error, "cannot mark a parent whose plugin is gone");
            }
            let event = event(EventType::Warning, PLUGIN_REMOVED, &message, None);
            let reference = parent.object_ref(&old.decl.parent.api_resource());
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "cannot publish event");
            }
        }
    }
}

/// What a parent whose plugin is gone says, with the command that releases it.
fn orphan_message(plugin: &str, kind: &Kind, parent: &DynamicObject, why: &str) -> String {
    let index = parent
        .finalizers()
        .iter()
        .position(|f| f == FINALIZER)
        .unwrap_or(0);
    format!(
        "plugin {plugin} {why}, so nothing finalizes this {kind_name}; the host keeps its \
         finalizer {FINALIZER} so that the plugin's cleanup is not skipped. Put the plugin \
         back to finalize it, or release it without cleanup: kubectl patch {plural}.{group} \
         {name} -n {namespace} --type=json \
         -p '[{{\"op\":\"remove\",\"path\":\"/metadata/finalizers/{index}\"}}]'",
        kind_name = kind.kind,
        plural = kind.plural,
        group = kind.group,
        name = parent.name_any(),
        namespace = parent.namespace().unwrap_or_default(),
    )
}

/// Child kinds `old` declared that `new` does not (in any version).
pub fn dropped_kinds<'a>(old: &'a Declaration, new: &Declaration) -> Vec<&'a Kind> {
    old.children
        .iter()
        .filter(|kind| !new.children.iter().any(|k| k.same_kind(kind)))
        .collect()
}

/// Prunes, once, the children of `kinds` that the host manages for `old` (proven owned: the
/// host's labels and a controller reference to a parent of `old`'s kind with that UID).
/// Returns how many were deleted.
pub async fn prune_dropped_kinds(
    client: &Client,
    old: &Plugin,
    kinds: &[&Kind],
    namespaces: &[String],
) -> usize {
    let selector = managed_children_selector(&old.decl.name);
    let mut pruned = 0;
    for kind in kinds {
        for scope in scopes(namespaces) {
            let api = api_for(client, kind, scope);
            let children = match api.list(&ListParams::default().labels(&selector)).await {
                Ok(children) => children,
                Err(error) => {
                    tracing::warn!(plugin = %old.decl.name, %kind, %error, "cannot list the children of a dropped kind; they are left as they are");
                    continue;
                }
            };
            for child in &children.items {
                let Some(target) = dropped_child_target(&old.decl, kind, child) else {
                    continue;
                };
                match delete_target(client, &target).await {
                    Ok(true) => pruned += 1,
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(plugin = %old.decl.name, %kind, name = %target.name, %error, "cannot prune a child of a dropped kind");
                    }
                }
            }
        }
    }
    if pruned > 0 {
        tracing::info!(plugin = %old.decl.name, pruned, "pruned the children of child kinds the new version no longer declares");
    }
    pruned
}

/// `child` as a prune target if it is proven to be managed by `old` for one of its parents.
fn dropped_child_target(
    old: &Declaration,
    kind: &Kind,
    child: &DynamicObject,
) -> Option<PruneTarget> {
    let labels = child.labels();
    let parent_uid = labels.get(PARENT_UID_LABEL)?;
    let labelled = labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        && labels.get(PLUGIN_LABEL) == Some(&old.name);
    let controlled = child.owner_references().iter().any(|r| {
        r.controller == Some(true)
            && &r.uid == parent_uid
            && r.kind == old.parent.kind
            && r.api_version == old.parent.api_version()
    });
    if !(labelled && controlled) {
        return None;
    }
    Some(PruneTarget {
        kind: kind.clone(),
        namespace: child.namespace()?,
        name: child.name_any(),
        uid: child.uid()?,
        policy: crate::plan::delete_policy(
            child
                .annotations()
                .get(crate::labels::ON_PRUNE_ANNOTATION)
                .map(String::as_str),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{kind, memcached_declaration};
    use serde_json::json;

    fn declaration(children: Vec<Kind>) -> Declaration {
        Declaration {
            needs_finalize: true,
            ..memcached_declaration(children)
        }
    }

    fn config_map() -> Kind {
        kind("", "v1", "ConfigMap", "configmaps")
    }

    fn child(labels: serde_json::Value, owner_kind: &str, owner_uid: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "c", "namespace": "ns", "uid": "child-uid", "labels": labels,
                "ownerReferences": [{"apiVersion": "cache.example.com/v1alpha1", "kind": owner_kind,
                                     "name": "p", "uid": owner_uid, "controller": true}]
            }
        }))
        .unwrap()
    }

    fn labels(plugin: &str) -> serde_json::Value {
        json!({MANAGED_BY_LABEL: MANAGED_BY, PLUGIN_LABEL: plugin, PARENT_UID_LABEL: "p-uid"})
    }

    #[test]
    fn the_kinds_a_new_version_no_longer_declares_are_dropped() {
        let old = declaration(vec![
            kind("apps", "v1", "Deployment", "deployments"),
            config_map(),
        ]);
        let new = declaration(vec![kind("apps", "v1", "Deployment", "deployments")]);
        assert_eq!(dropped_kinds(&old, &new), [&config_map()]);
        assert!(dropped_kinds(&new, &old).is_empty());
        // Another version of the same kind is the same objects: not dropped.
        let moved = declaration(vec![
            kind("apps", "v2", "Deployment", "deployments"),
            config_map(),
        ]);
        assert!(dropped_kinds(&old, &moved).is_empty());
    }

    #[test]
    fn only_children_proven_to_be_the_plugins_are_pruned_when_their_kind_is_dropped() {
        let old = declaration(vec![config_map()]);
        let target = dropped_child_target(
            &old,
            &config_map(),
            &child(labels("memcached"), "Memcached", "p-uid"),
        );
        assert_eq!(
            target.map(|t| (t.name, t.namespace, t.uid)),
            Some(("c".into(), "ns".into(), "child-uid".into()))
        );
        for (labels, owner_kind, owner_uid) in [
            (labels("other"), "Memcached", "p-uid"),
            (
                json!({MANAGED_BY_LABEL: MANAGED_BY, PLUGIN_LABEL: "memcached"}),
                "Memcached",
                "p-uid",
            ),
            (labels("memcached"), "Other", "p-uid"),
            (labels("memcached"), "Memcached", "another-uid"),
        ] {
            assert!(
                dropped_child_target(&old, &config_map(), &child(labels, owner_kind, owner_uid))
                    .is_none()
            );
        }
    }

    #[test]
    fn a_parent_without_its_plugin_says_how_to_release_it() {
        let old = declaration(vec![]);
        let parent: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "p", "namespace": "ns", "finalizers": ["other", FINALIZER]}
        }))
        .unwrap();
        let message = orphan_message(&old.name, &old.parent, &parent, "was removed from the host");
        assert!(
            message.contains("plugin memcached was removed from the host"),
            "{message}"
        );
        assert!(
            message.contains("kubectl patch memcacheds.cache.example.com p -n ns --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/1\"}]'"),
            "{message}"
        );
    }
}
