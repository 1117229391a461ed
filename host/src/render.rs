//! Offline rendering: the CRs of a YAML stream through a plugin, printed as a YAML stream for `kubectl apply -f -`.
//!
//! Rendering calls the same [`Plugin::plan`](crate::plugin::Plugin::plan) as the controller; the only
//! difference is that a parent read from a file has no UID, so children carry no owner
//! reference and nothing is pruned. A plugin that defaults or validates (contract 0.3.0) sees
//! each CR first as the API server would call it ([`admit`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::plan::{Plan, PlanError};
use crate::plugin::Plugin;
use crate::policy::Policy;
use crate::runtime::{AdmissionRequest, Operation, RelatedObjects};

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
    #[error("{} {parent}: {reason}", path.display())]
    Refused {
        path: PathBuf,
        /// `namespace/name` of the custom resource.
        parent: String,
        /// What the plugin's `validate` or `default` said (contract 0.3.0).
        reason: String,
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
    /// The notes on the documents of other kinds, not rendered ([`Sample::notes`]).
    pub notes: Vec<String>,
    /// Mistakes the API server accepts but the cluster would show: a selector that takes in
    /// another child's pods ([`crate::selectors::overlaps`]).
    pub warnings: Vec<String>,
}

/// Sample files read as `render`, `conformance` and the authors' testing crate read them: the
/// custom resources of the plugin's kind, and every other document as an object of the
/// cluster (what the plugin's related declarations choose from, as `run` chooses from the API
/// server's). A document without a namespace is in `default`, where `kubectl apply` puts it.
#[derive(Debug, Default)]
pub struct Sample {
    /// The custom resources of the plugin's kind, in file order.
    pub parents: Vec<Value>,
    /// The other documents.
    pub others: Vec<Value>,
    /// For each of `others`, the file it came from and `apiVersion kind "name"`.
    others_described: Vec<(PathBuf, String)>,
}

impl Sample {
    /// The documents of `paths`, split by whether they are of `plugin`'s parent kind.
    pub fn read<P: AsRef<Path>>(plugin: &Plugin, paths: &[P]) -> Result<Self, Error> {
        let mut sample = Sample::default();
        for path in paths {
            let path = path.as_ref();
            for mut document in read_yaml_documents(path)? {
                crate::related::default_namespace(&mut document);
                if plugin.decl.parent.matches(&document) {
                    sample.parents.push(document);
                } else {
                    let described = format!(
                        "{} {} {:?}",
                        document["apiVersion"].as_str().unwrap_or("(no apiVersion)"),
                        document["kind"].as_str().unwrap_or("(no kind)"),
                        document["metadata"]["name"].as_str().unwrap_or("")
                    );
                    sample
                        .others_described
                        .push((path.to_path_buf(), described));
                    sample.others.push(document);
                }
            }
        }
        Ok(sample)
    }

    /// The related objects of `parent`, chosen from the sample's other documents.
    pub fn related_to(&self, plugin: &Plugin, parent: &Value) -> Vec<RelatedObjects> {
        crate::related::objects_for(&plugin.decl.related, parent, |_| self.others.clone())
    }

    /// What `render` and `conformance` say of each document not of the plugin's kind.
    pub fn notes(&self, plugin: &Plugin) -> Vec<String> {
        self.others_described
            .iter()
            .map(|(path, document)| {
                format!(
                    "note: {}: {document} is not a {}: not rendered, read as an object of the \
                     cluster (what the plugin's related declarations choose from)",
                    path.display(),
                    plugin.decl.parent
                )
            })
            .collect()
    }
}

/// Renders every CR of the plugin's parent kind in `cr_path` (a YAML stream, as `kubectl
/// apply -f` reads; the other documents, such as a Secret the CR refers to, are read as
/// [`Sample`] does), each with the children in `observed_path` (a YAML stream or a `List`)
/// as what the host would have observed, and each plan checked against `policy` as `run`
/// does.
pub fn render(
    plugin: &Plugin,
    policy: &Policy,
    cr_path: &Path,
    observed_path: Option<&Path>,
    now: &str,
) -> Result<Rendered, Error> {
    let sample = Sample::read(plugin, &[cr_path])?;
    if sample.parents.is_empty() {
        return Err(Error::NoParent {
            path: cr_path.to_path_buf(),
            expected: plugin.decl.parent.to_string(),
            found: sample
                .others_described
                .into_iter()
                .map(|(_, described)| described)
                .collect(),
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
    let mut plans = Vec::with_capacity(sample.parents.len());
    let mut warnings = Vec::new();
    for parent in &sample.parents {
        let identity = identity(parent);
        let plan_error = |source| Error::Plan {
            path: cr_path.to_path_buf(),
            parent: identity.clone(),
            source,
        };
        // As the API server stores it through the plugin's webhooks.
        let admitted = admit(plugin, parent).map_err(|reason| Error::Refused {
            path: cr_path.to_path_buf(),
            parent: identity.clone(),
            reason,
        })?;
        warnings.extend(
            admitted
                .warnings
                .iter()
                .map(|warning| format!("warning: {identity}: {warning}")),
        );
        let parent = &admitted.object;
        let related = sample.related_to(plugin, parent);
        let plan = plugin
            .plan(parent, &observed, related, now)
            .map_err(plan_error)?;
        policy
            .check(&plugin.decl, parent, &plan)
            .map_err(|violation| plan_error(violation.into()))?;
        warnings.extend(
            crate::selectors::overlaps(plan.objects())
                .into_iter()
                .map(|warning| format!("warning: {identity}: {warning}")),
        );
        plans.push((identity, plan));
    }
    Ok(Rendered {
        plans,
        notes: sample.notes(plugin),
        warnings,
    })
}

/// A custom resource as the API server would store it, created through the plugin's webhooks.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    pub object: Value,
    /// What kubectl would print as `Warning: ...`.
    pub warnings: Vec<String>,
}

/// `parent` defaulted (when the plugin defaults) and validated as a create (when it
/// validates), as the API server calls the plugin through `run --webhook-addr`; `Err` says
/// why it would be refused.
pub fn admit(plugin: &Plugin, parent: &Value) -> Result<Admitted, String> {
    let implements = plugin.decl.implements;
    let context = format!("{}/{}", plugin.decl.name, identity(parent));
    let mut object = parent.clone();
    if implements.default {
        object = plugin
            .default_parent(&object, &context)
            .map_err(|e| format!("the plugin's default failed: {e}"))??;
    }
    let mut warnings = Vec::new();
    if implements.validate {
        let request = AdmissionRequest {
            operation: Operation::Create,
            object: Some(object.to_string()),
            old_object: None,
            user: String::new(),
            dry_run: true,
        };
        let validation = plugin
            .compiled
            .validate(&request, &context)
            .map_err(|e| format!("the plugin's validate failed: {e}"))?;
        if !validation.errors.is_empty() {
            let errors: Vec<String> = validation.errors.iter().map(ToString::to_string).collect();
            return Err(format!("refused at admission: {}", errors.join(", ")));
        }
        warnings = validation.warnings;
    }
    Ok(Admitted { object, warnings })
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
