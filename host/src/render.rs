//! Offline rendering: the CRs of a YAML stream through a plugin, printed as a YAML stream for `kubectl apply -f -`.
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
    #[error("{} holds no {expected}; found {}", path.display(), found_list(found))]
    NoParent {
        path: PathBuf,
        expected: String,
        /// `apiVersion kind name` of each document found.
        found: Vec<String>,
    },
    #[error("{} {parent}: {source}", path.display())]
    Plan {
        path: PathBuf,
        /// `namespace/name` of the custom resource.
        parent: String,
        source: PlanError,
    },
}

fn found_list(found: &[String]) -> String {
    if found.is_empty() {
        "no documents".to_string()
    } else {
        found.join(", ")
    }
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

/// What rendering one input file gave.
#[derive(Debug)]
pub struct Rendered {
    /// The plan of each custom resource of the plugin's kind, in file order, with the
    /// parent's `namespace/name`.
    pub plans: Vec<(String, Plan)>,
    /// `apiVersion kind name` of the documents of other kinds, which were not rendered.
    pub skipped: Vec<String>,
}

/// Renders every CR of the plugin's parent kind in `cr_path` (a YAML stream, as `kubectl
/// apply -f` reads; documents of other kinds, such as a Secret the CR refers to, are not
/// rendered, but are the objects a plugin's related declarations choose from, as the
/// cluster's would be), each with the children in `observed_path` (a YAML stream or a
/// `List`) as what the host would have observed.
pub fn render(
    plugin: &Plugin,
    cr_path: &Path,
    observed_path: Option<&Path>,
    now: &str,
) -> Result<Rendered, Error> {
    render_with_policy(plugin, None, cr_path, observed_path, now)
}

/// [`render`], and with a policy, each plan checked against it as `run` does.
pub fn render_with_policy(
    plugin: &Plugin,
    policy: Option<&Policy>,
    cr_path: &Path,
    observed_path: Option<&Path>,
    now: &str,
) -> Result<Rendered, Error> {
    let (parents, skipped): (Vec<Value>, Vec<Value>) = read_yaml_documents(cr_path)?
        .into_iter()
        .partition(|document| plugin.decl.parent.matches(document));
    let describe = |document: &Value| {
        format!(
            "{} {} {:?}",
            document["apiVersion"].as_str().unwrap_or("(no apiVersion)"),
            document["kind"].as_str().unwrap_or("(no kind)"),
            document["metadata"]["name"].as_str().unwrap_or("")
        )
    };
    // The other documents stand for the cluster's objects: in the namespace `apply` would
    // put them in.
    let others: Vec<Value> = skipped
        .iter()
        .cloned()
        .map(|mut document| {
            default_namespace(&mut document);
            document
        })
        .collect();
    let skipped: Vec<String> = skipped.iter().map(describe).collect();
    if parents.is_empty() {
        return Err(Error::NoParent {
            path: cr_path.to_path_buf(),
            expected: plugin.decl.parent.to_string(),
            found: skipped,
        });
    }
    let observed: Vec<Value> = match observed_path {
        Some(path) => read_yaml_documents(path)?
            .into_iter()
            .flat_map(|doc| match doc["items"].as_array() {
                Some(items) if doc["kind"] == "List" => items.clone(),
                _ => vec![doc],
            })
            .collect(),
        None => Vec::new(),
    };
    let mut plans = Vec::with_capacity(parents.len());
    for mut parent in parents {
        default_namespace(&mut parent);
        let identity = identity(&parent);
        let plan_error = |source| Error::Plan {
            path: cr_path.to_path_buf(),
            parent: identity.clone(),
            source,
        };
        let related =
            crate::related::objects_for(&plugin.decl.related, &parent, |_| others.clone());
        let plan = plan::plan(plugin, &parent, &observed, related, now).map_err(plan_error)?;
        if let Some(policy) = policy {
            policy
                .check(&plugin.decl, &parent, &plan)
                .map_err(|violation| plan_error(violation.into()))?;
        }
        plans.push((identity, plan));
    }
    Ok(Rendered { plans, skipped })
}

/// Puts a parent without a namespace in `default`, as `kubectl apply` would.
pub fn default_namespace(parent: &mut Value) {
    if parent["metadata"]["namespace"].as_str().is_none() && parent["metadata"].is_object() {
        parent["metadata"]["namespace"] = "default".into();
    }
}

/// A parent's `namespace/name`, as rendering and `conformance` name it.
pub fn identity(parent: &Value) -> String {
    format!(
        "{}/{}",
        parent["metadata"]["namespace"].as_str().unwrap_or(""),
        parent["metadata"]["name"].as_str().unwrap_or("")
    )
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

/// The plans as one YAML stream: each CR's children, followed by its status as a comment.
pub fn to_yaml_stream(rendered: &Rendered) -> String {
    let mut out = String::new();
    for (parent, plan) in &rendered.plans {
        for child in &plan.apply {
            out.push_str("---\n");
            if let Some(handling) = child.handling() {
                out.push_str(&format!("# {handling}\n"));
            }
            out.push_str(&serde_yaml::to_string(&child.object).unwrap_or_default());
        }
        out.push_str(&format!("---\n# status of {parent}:\n"));
        for line in serde_yaml::to_string(&plan.status)
            .unwrap_or_default()
            .lines()
        {
            out.push_str("#   ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A plan as one JSON document: `children`, `status`, `requeueAfterMs`, and `handling` (how
/// the host applies each child, by `Kind/name`) when a child is not applied in place.
pub fn to_json(plan: &Plan) -> Value {
    let mut document = serde_json::json!({
        "children": plan.objects().collect::<Vec<_>>(),
        "status": plan.status,
        "requeueAfterMs": plan.requeue_after.map(|d| d.as_millis() as u64),
    });
    let handling: serde_json::Map<String, Value> = plan
        .apply
        .iter()
        .filter_map(|child| {
            let object = &child.object;
            let key = format!(
                "{}/{}",
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default()
            );
            Some((key, child.handling()?.into()))
        })
        .collect();
    if !handling.is_empty() {
        document["handling"] = Value::Object(handling);
    }
    document
}
