//! A loaded plugin: a compiled component, its validated declaration and the policy it serves
//! under; [`Plugin::plan`] calls it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::declaration::{self, Declaration};
use crate::plan::{self, Plan, PlanError};
use crate::policy::Policy;
use crate::runtime::{self, CallError, CompiledPlugin, ReconcileError, RelatedObjects, Runtime};

/// The parts of a parent a plugin's `default` may change (JSON pointers).
const DEFAULTABLE: [&str; 3] = ["/spec", "/metadata/labels", "/metadata/annotations"];

/// Whether the JSON pointer `path` is `prefix` or under it.
fn within(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Load(#[from] runtime::Error),
    #[error("calling `info` of plugin {} failed: {source}", path.display())]
    Info { path: PathBuf, source: CallError },
    #[error(transparent)]
    Declaration(#[from] declaration::Error),
}

/// A plugin ready to reconcile: its validated declaration, the compiled component, and the
/// policy it serves under.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub path: PathBuf,
    pub decl: Declaration,
    pub compiled: CompiledPlugin,
    /// The host's policy, with the plugin's own entry if its OperatorPlugin gives one
    /// (`spec.policy`); [`Policy::default`] until the registry loads it under a policy. It
    /// travels with the content, so a swap changes both at once.
    pub policy: Arc<Policy>,
}

impl Plugin {
    /// Gives the plugin the limits `policy` sets for it, over `base` (the runtime's).
    pub fn limit_by(&mut self, policy: &Policy, base: &runtime::Limits) {
        let limits = policy.limits(&self.decl.name, base);
        self.compiled = self.compiled.clone().with_limits(limits);
    }

    /// Loads the plugin at `path`: compile (or cache hit), type-check, call `info`, validate.
    pub fn load(runtime: &Arc<Runtime>, path: &Path) -> Result<Self, Error> {
        Self::from_compiled(path, runtime.load(path)?)
    }

    /// Validates the declaration of an already compiled plugin.
    pub fn from_compiled(path: &Path, compiled: CompiledPlugin) -> Result<Self, Error> {
        let info = compiled.info().map_err(|source| Error::Info {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Plugin {
            path: path.to_path_buf(),
            decl: Declaration::from_info(path, info, compiled.content_hash().to_string())?,
            compiled,
            policy: Arc::new(Policy::default()),
        })
    }

    /// Calls the plugin for `parent` and turns its answer into a [`Plan`].
    ///
    /// Contract 0.3.0's `default` of `object`: the defaulted object, or why it is refused (the
    /// plugin refused it, answered something that is not an object, or changed more than the
    /// spec, labels and annotations, which are all a default may change: identity, status and
    /// the rest of the metadata are the API server's and the host's); `Err` when the call
    /// failed (trapped, ran out of time or memory).
    pub fn default_parent(
        &self,
        object: &Value,
        context: &str,
    ) -> Result<Result<Value, String>, CallError> {
        let name = &self.decl.name;
        let defaulted = match self.compiled.default_object(&object.to_string(), context)? {
            Ok(defaulted) => defaulted,
            Err(refusal) => {
                return Ok(Err(format!(
                    "plugin {name} refused to default it: {refusal}"
                )));
            }
        };
        let defaulted: Value = match serde_json::from_str(&defaulted) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => return Ok(Err(format!("plugin {name}'s default is not a JSON object"))),
            Err(e) => return Ok(Err(format!("plugin {name}'s default is not JSON: {e}"))),
        };
        let outside = json_patch::diff(object, &defaulted)
            .0
            .iter()
            .map(|op| op.path().to_string())
            .find(|path| !DEFAULTABLE.iter().any(|allowed| within(path, allowed)));
        Ok(match outside {
            Some(path) => Err(format!(
                "plugin {name}'s default changes {path}, where a default may change only the \
                 spec, labels and annotations"
            )),
            None => Ok(defaulted),
        })
    }

    /// `observed` are the children the host observed for this parent, `related` the objects of
    /// the plugin's related declarations (see [`crate::related`]); `now` (RFC 3339) stamps
    /// condition transitions, because plugins have no clock.
    pub fn plan(
        &self,
        parent: &Value,
        observed: &[Value],
        related: Vec<RelatedObjects>,
        now: &str,
    ) -> Result<Plan, PlanError> {
        let (request, seed) = plan::request("reconcile", parent, observed, related);
        let context = format!(
            "{}:{}/{}",
            self.decl.name,
            parent["metadata"]["namespace"].as_str().unwrap_or(""),
            parent["metadata"]["name"].as_str().unwrap_or("")
        );
        let response = match self.compiled.reconcile_seeded(&request, &seed, &context)? {
            Ok(response) => response,
            Err(ReconcileError::InvalidSpec(message)) => {
                return Err(PlanError::InvalidSpec(message));
            }
            Err(ReconcileError::Retry(message)) => return Err(PlanError::PluginRetry(message)),
        };
        plan::plan_from_response(&self.decl, parent, observed, response, now)
    }
}

#[cfg(test)]
mod tests {
    use super::within;

    #[test]
    fn defaults_stay_within_the_spec_labels_and_annotations() {
        assert!(within("/spec", "/spec"));
        assert!(within("/spec/image", "/spec"));
        assert!(!within("/specs", "/spec"));
        assert!(!within("/metadata/name", "/metadata/labels"));
    }
}
