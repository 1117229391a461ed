//! The rollout gate in the run loop: a replacement of a served plugin is planned on the
//! controller's caches before it is swapped in, and held if [`crate::rollout::decide`] says so.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use kube::api::ListParams;

use super::{ChildCache, PluginController, RunError};
use crate::diff::{LiveState, Report, Version};
use crate::kinds::Kind;
use crate::labels::{APPROVE_ANNOTATION, managed_children_selector};
use crate::metrics::PluginLabels;
use crate::plugin::Plugin;
use crate::registry::ClusterPlugins;
use crate::rollout;

/// How long the gate waits for a controller's caches to sync (after a start) before it holds
/// the version, to be planned again.
const CACHES_SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// How a held version is approved, and whether it is.
pub(super) struct Approval {
    approved: bool,
    /// What to do to approve it, for the message.
    how: String,
}

impl Approval {
    pub(super) fn approved(&self) -> bool {
        self.approved
    }

    /// The approval of `new` (offered as `path`): a file beside a plugin file, the
    /// annotation of an OperatorPlugin.
    pub(super) fn of(new: &Plugin, path: &Path, cluster: Option<&ClusterPlugins>) -> Approval {
        let hash = &new.decl.content_hash;
        if ClusterPlugins::is_id(path) {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let (approval, digest) = cluster
                .map(|cluster| (cluster.approval(&name), cluster.offered_digest(&name)))
                .unwrap_or_default();
            return Approval {
                approved: rollout::approves(approval.as_deref(), hash, digest.as_deref()),
                how: format!(
                    "kubectl annotate operatorplugin {name} --overwrite {}={hash}",
                    APPROVE_ANNOTATION
                ),
            };
        }
        let file = rollout::approval_file(path);
        let approval = std::fs::read_to_string(&file).ok();
        Approval {
            approved: rollout::approves(approval.as_deref(), hash, None),
            how: format!("echo {hash} > {}", file.display()),
        }
    }
}

/// Plans `new` beside the version `controller` serves, on every parent it caches; holds it
/// (an error the run loop retries with backoff) if its plans would delete too much and it is
/// not approved. An approved version's deletions also pass the prune guard.
#[tracing::instrument(level = "debug", name = "rollout_gate", skip_all, fields(sha256 = %new.decl.content_hash))]
pub(super) async fn check(
    controller: &PluginController,
    new: &Arc<Plugin>,
    approval: &Approval,
) -> Result<(), RunError> {
    let rules = new.policy.rules(&new.decl.name).clone();
    if !rollout::gates(&rules) {
        return Ok(());
    }
    let held = |hold: String| RunError::RolloutHeld {
        plugin: new.decl.name.clone(),
        sha256: new.decl.content_hash.clone(),
        hold,
        approve: approval.how.clone(),
    };
    if approval.approved {
        tracing::info!(plugin = %new.decl.name, sha256 = %new.decl.content_hash, "rollout approved: the new version serves without the gate");
        controller.approve_prunes(&new.decl.content_hash);
        return Ok(());
    }
    let state = controller
        .live_state(new)
        .await
        .map_err(|problem| held(format!("it cannot be planned yet: {problem}")))?;
    let serving = controller.current();
    let planned = new.clone();
    let report = tokio::task::spawn_blocking(move || {
        let now = super::reconcile::now_rfc3339();
        let path = |plugin: &Plugin| plugin.path.display().to_string();
        Report::make(
            (&serving, Version::of(&serving, &path(&serving))),
            (&planned, Version::of(&planned, &path(&planned))),
            &state,
            &now,
        )
    })
    .await
    .map_err(|error| held(format!("its plans did not complete: {error}")))?;
    match rollout::decide(&report, &rules) {
        None => Ok(()),
        Some(hold) => {
            controller
                .metrics
                .rollouts_held
                .get_or_create(&PluginLabels {
                    plugin: new.decl.name.clone(),
                })
                .inc();
            Err(held(hold.to_string()))
        }
    }
}

/// The objects listed, none for a kind the API server does not serve (no object of it can
/// exist; whether the new version may serve without it is the reload's check, after the gate).
fn unless_not_served(
    listed: Result<Vec<Value>, crate::diff::live::Error>,
) -> Result<Vec<Value>, String> {
    match listed {
        Err(crate::diff::live::Error::List {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 404 => Ok(Vec::new()),
        listed => listed.map_err(|e| e.to_string()),
    }
}

impl PluginController {
    /// What the controller's caches hold, as [`LiveState`], once they have synced; with what
    /// `new` reads that they do not follow (other child kinds, other related declarations)
    /// read from the API server.
    async fn live_state(&self, new: &Plugin) -> Result<LiveState, String> {
        let ready = async {
            for (_, parents) in &self.tasks {
                parents
                    .wait_until_ready()
                    .await
                    .map_err(|e| e.to_string())?;
            }
            for context in &self.contexts {
                for cache in context.child_caches.iter().chain(&context.related_caches) {
                    cache
                        .store
                        .wait_until_ready()
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok::<(), String>(())
        };
        tokio::time::timeout(CACHES_SYNC_TIMEOUT, ready)
            .await
            .map_err(|_| format!("the caches did not sync within {CACHES_SYNC_TIMEOUT:?}"))??;
        let plugin = self.current();
        let parents: Vec<Value> = self
            .tasks
            .iter()
            .flat_map(|(_, store)| store.state())
            .filter_map(|parent| plugin.decl.parent.to_json(&parent))
            .collect();
        let as_json = |cache: &ChildCache| -> Vec<Value> {
            cache
                .store
                .state()
                .iter()
                .filter_map(|object| cache.kind.to_json(object))
                .collect()
        };
        let mut children = Vec::new();
        let mut related: Vec<(crate::kinds::Kind, Vec<Value>)> = Vec::new();
        // Two declarations of a kind may cache the same objects: each is taken once.
        let mut seen = std::collections::HashSet::new();
        for context in &self.contexts {
            children.extend(context.child_caches.iter().flat_map(as_json));
            for cache in &context.related_caches {
                let index = match related.iter().position(|(kind, _)| *kind == cache.kind) {
                    Some(index) => index,
                    None => {
                        related.push((cache.kind.clone(), Vec::new()));
                        related.len() - 1
                    }
                };
                for object in as_json(cache) {
                    let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
                    if seen.insert((index, uid.to_string())) {
                        related[index].1.push(object);
                    }
                }
            }
        }
        let cached: Vec<&Kind> = self
            .contexts
            .iter()
            .flat_map(|context| context.child_caches.iter().map(|cache| &cache.kind))
            .collect();
        let managed = ListParams::default().labels(&managed_children_selector(&new.decl.name));
        for kind in new.policy.allowed_children(&new.decl) {
            if !cached.contains(&&kind) {
                let listed = self.list_served(&kind, &managed, "children").await;
                children.extend(unless_not_served(listed)?);
            }
        }
        for declared in &new.decl.related {
            if !related.iter().any(|(kind, _)| *kind == declared.kind) {
                let params = ListParams::default();
                let listed = self.list_served(&declared.kind, &params, "related").await;
                related.push((declared.kind.clone(), unless_not_served(listed)?));
            }
        }
        Ok(LiveState::new(parents, children, related))
    }

    /// Lets `version`'s deletions past the prune guard of every controller of this plugin.
    pub(super) fn approve_prunes(&self, version: &str) {
        for context in &self.contexts {
            context.prune_guard.approve(version);
        }
    }
}
