//! Offline rendering: a CR file through a plugin, printed as a YAML stream for `kubectl apply -f -`.
//!
//! Rendering calls the same [`plan`](crate::plan::plan) as the controller; the only
//! difference is that a parent read from a file has no UID, so children carry no owner
//! reference and nothing is pruned.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::plan::{self, Plan, PlanError};
use crate::plugin::Plugin;
use crate::policy::Policy;

/// Why a CR could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not valid YAML: {detail}", path.display())]
    ParseYaml { path: PathBuf, detail: String },
    #[error("{} holds {count} documents; expected exactly one custom resource", path.display())]
    DocumentCount { path: PathBuf, count: usize },
    #[error("{}: expected a {expected}, found apiVersion {api_version:?} kind {kind:?}", path.display())]
    WrongKind {
        path: PathBuf,
        expected: String,
        api_version: String,
        kind: String,
    },
    #[error("{}: {source}", path.display())]
    Plan { path: PathBuf, source: PlanError },
}

impl Error {
    /// The plan error, when the failure came from the plugin or its output.
    pub fn plan_error(&self) -> Option<&PlanError> {
        match self {
            Error::Plan { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Renders the CR in `cr_path`, with the children in `observed_path` (a YAML stream or a
/// `List`) as what the host would have observed.
pub fn render(
    plugin: &Plugin,
    cr_path: &Path,
    observed_path: Option<&Path>,
    now: &str,
) -> Result<Plan, Error> {
    render_with_policy(plugin, None, cr_path, observed_path, now)
}

/// [`render`], and with a policy, the plan checked against it as `run` does.
pub fn render_with_policy(
    plugin: &Plugin,
    policy: Option<&Policy>,
    cr_path: &Path,
    observed_path: Option<&Path>,
    now: &str,
) -> Result<Plan, Error> {
    let mut documents = read_yaml_documents(cr_path)?;
    if documents.len() != 1 {
        return Err(Error::DocumentCount {
            path: cr_path.to_path_buf(),
            count: documents.len(),
        });
    }
    let mut parent = documents.remove(0);
    if !plugin.decl.parent.matches(&parent) {
        return Err(Error::WrongKind {
            path: cr_path.to_path_buf(),
            expected: plugin.decl.parent.to_string(),
            api_version: parent["apiVersion"].as_str().unwrap_or("").to_string(),
            kind: parent["kind"].as_str().unwrap_or("").to_string(),
        });
    }
    if parent["metadata"]["namespace"].as_str().is_none() && parent["metadata"].is_object() {
        parent["metadata"]["namespace"] = "default".into();
    }
    let observed = match observed_path {
        Some(path) => read_yaml_documents(path)?
            .into_iter()
            .flat_map(|doc| match doc["items"].as_array() {
                Some(items) if doc["kind"] == "List" => items.clone(),
                _ => vec![doc],
            })
            .collect(),
        None => Vec::new(),
    };
    let plan_error = |source| Error::Plan {
        path: cr_path.to_path_buf(),
        source,
    };
    let plan = plan::plan(plugin, &parent, &observed, now).map_err(plan_error)?;
    if let Some(policy) = policy {
        policy
            .check(&plugin.decl, &parent, &plan)
            .map_err(|violation| plan_error(violation.into()))?;
    }
    Ok(plan)
}

/// The non-empty YAML documents of a file, as JSON values.
pub fn read_yaml_documents(path: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).map_err(|e| Error::ParseYaml {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        match value {
            Value::Null => {}
            Value::Object(_) => documents.push(value),
            other => {
                return Err(Error::ParseYaml {
                    path: path.to_path_buf(),
                    detail: format!(
                        "a document is {other}, expected a mapping (a Kubernetes object)"
                    ),
                });
            }
        }
    }
    Ok(documents)
}

/// The plan as a YAML stream of the children, followed by the status as a comment.
pub fn to_yaml_stream(plan: &Plan) -> String {
    let mut out = String::new();
    for child in &plan.apply {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(child).unwrap_or_default());
    }
    out.push_str("---\n# status:\n");
    for line in serde_yaml::to_string(&plan.status)
        .unwrap_or_default()
        .lines()
    {
        out.push_str("#   ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The plan as one JSON document: `children`, `status`, `requeueAfterMs`.
pub fn to_json(plan: &Plan) -> Value {
    serde_json::json!({
        "children": plan.apply,
        "status": plan.status,
        "requeueAfterMs": plan.requeue_after.map(|d| d.as_millis() as u64),
    })
}
