//! `operator-host diff`: what a plugin version would change on every live parent, compared
//! with the version serving now, through the same plan and policy path as `run`.
//!
//! Both versions are called on the same inputs (the parent, its observed children and its
//! related objects, read from the API server by [`live`], or from a flight recording) with
//! the same clock, so every difference between their plans is the new version's doing. What
//! a child would change is judged the way the host applies it: the new version's object
//! against the one the serving version asks for (on a converged cluster, the fields
//! server-side apply would set or remove); a child the serving version does not ask for is
//! compared with the live object, on the fields the new version sets. The host's `Reconciled` message names the version
//! that reconciled: a status that differs only there is no change.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::plan::{self, Plan, PlanError, PruneTarget};
use crate::plugin::Plugin;
use crate::runtime::{DeletePolicy, RelatedObjects, UpdateStrategy};

pub mod live;

pub use live::{LiveState, Scope};

/// What one parent's reconcile is made from, as the host would read it.
#[derive(Debug, Clone)]
pub struct ParentInputs {
    pub parent: Value,
    /// Its children (controller reference to its UID), as the host's caches hold them.
    pub observed: Vec<Value>,
    pub related: Vec<RelatedObjects>,
}

/// Where a diff's parents and their inputs come from: the cluster (the host's
/// `diff::live::LiveState`) or a flight recorder's recordings (`recording::Recordings`).
pub trait Inputs {
    /// The parents, in the order the report lists them.
    fn parents(&self) -> &[Value];
    /// How many children the parents have now.
    fn children(&self) -> usize;
    /// What `version` would be called with for `parent`.
    fn inputs(&self, version: &Plugin, parent: &Value) -> ParentInputs;
}

/// A child named in a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildName {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl ChildName {
    fn of(object: &Value) -> ChildName {
        let text = |field: &Value| field.as_str().unwrap_or_default().to_string();
        ChildName {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            name: text(&object["metadata"]["name"]),
        }
    }

    fn of_target(target: &PruneTarget) -> ChildName {
        ChildName {
            api_version: target.kind.api_version(),
            kind: target.kind.kind.clone(),
            name: target.name.clone(),
        }
    }

    fn same(&self, object: &Value) -> bool {
        object["kind"] == self.kind.as_str()
            && object["metadata"]["name"] == self.name.as_str()
            && object["apiVersion"].as_str().map(api_group) == Some(api_group(&self.api_version))
    }
}

/// The group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> ``): one object is served
/// under each of its group's versions.
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

impl std::fmt::Display for ChildName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// A child the new version would delete, or release (its delete policy `orphan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    #[serde(flatten)]
    pub child: ChildName,
    /// `true` when the child is kept without the host's labels and owner reference.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub orphaned: bool,
}

/// One field whose value would change (`null` on one side: set or removed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// `spec.replicas`, `metadata.annotations["example.com/x"]`, `spec.ports[0].port`.
    pub path: String,
    /// The same as a JSON pointer (RFC 6901), for programs: `/spec/ports/0/port`.
    pub pointer: String,
    pub old: Value,
    pub new: Value,
}

/// A child that exists and would be written differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changed {
    #[serde(flatten)]
    pub child: ChildName,
    /// What the change is compared with: `serving` (the serving version's object) or `live`
    /// (the object in the cluster, on the fields the new version sets).
    pub against: &'static str,
    /// How the host writes it when not in place (`update=recreate`: deleted and created).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handling: Option<String>,
    pub fields: Vec<FieldChange>,
    /// The change as `kubectl diff` shows one: a unified diff of the two objects' YAML.
    pub diff: String,
}

/// Why a version made no plan for a parent (an invalid spec, a trap, a policy violation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The `Reconciled=False` reason the host would report.
    pub reason: String,
    pub message: String,
}

impl From<&PlanError> for Failure {
    fn from(error: &PlanError) -> Self {
        Failure {
            reason: error.reason().to_string(),
            message: error.to_string(),
        }
    }
}

/// How the parent's status would change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusChange {
    pub old: Value,
    pub new: Value,
    pub diff: String,
}

/// What the new version would change for one parent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentDiff {
    /// `namespace/name` (`name` for a cluster-scoped parent).
    pub parent: String,
    pub created: Vec<ChildName>,
    pub changed: Vec<Changed>,
    pub deleted: Vec<Removed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusChange>,
    /// The new version's failure on this parent: nothing of its children would be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Failure>,
    /// The serving version's failure on this parent, if it fails too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_error: Option<Failure>,
}

impl ParentDiff {
    /// Whether serving the new version would change anything for this parent.
    pub fn changes(&self) -> bool {
        !self.created.is_empty()
            || !self.changed.is_empty()
            || !self.deleted.is_empty()
            || self.status.is_some()
            || self.error != self.serving_error
    }
}

/// Runs `version` for one parent as `run` would: the plan, then the policy it serves under.
pub fn plan_under_policy(
    version: &Plugin,
    inputs: &ParentInputs,
    now: &str,
) -> Result<Plan, PlanError> {
    let plan = version.plan(
        &inputs.parent,
        &inputs.observed,
        inputs.related.clone(),
        now,
    )?;
    version.policy.check(&version.decl, &inputs.parent, &plan)?;
    Ok(plan)
}

/// Both versions on one parent's inputs, compared. `serving` and `new` each carry the
/// policy they serve under.
pub fn diff_parent(
    serving: &Plugin,
    new: &Plugin,
    state: &impl Inputs,
    parent: &Value,
    now: &str,
) -> ParentDiff {
    let old = plan_under_policy(serving, &state.inputs(serving, parent), now);
    let inputs = state.inputs(new, parent);
    let mut planned = plan_under_policy(new, &inputs, now);
    // The host's message names the version that reconciled; that alone is no change.
    if let Ok(plan) = &mut planned {
        let named = plan.status.to_string().replace(
            &plan::version_identity(&new.decl),
            &plan::version_identity(&serving.decl),
        );
        plan.status = serde_json::from_str(&named).unwrap_or(Value::Null);
    }
    compare(parent, &inputs.observed, &old, &planned)
}

/// What `planned` (the new version's plan) would change for a parent whose children are
/// `observed`, against `old` (the serving version's plan on the same inputs).
pub fn compare(
    parent: &Value,
    observed: &[Value],
    old: &Result<Plan, PlanError>,
    planned: &Result<Plan, PlanError>,
) -> ParentDiff {
    let mut diff = ParentDiff {
        parent: crate::render::identity(parent)
            .trim_start_matches('/')
            .to_string(),
        created: Vec::new(),
        changed: Vec::new(),
        deleted: Vec::new(),
        status: None,
        error: planned.as_ref().err().map(Failure::from),
        serving_error: old.as_ref().err().map(Failure::from),
    };
    let Ok(new_plan) = planned else {
        return diff;
    };
    let old_plan = old.as_ref().ok();
    for child in &new_plan.apply {
        let name = ChildName::of(&child.object);
        let Some(live) = observed.iter().find(|o| name.same(o)) else {
            diff.created.push(name);
            continue;
        };
        if child.update == UpdateStrategy::CreateOnly {
            continue; // an existing create-only child is not written
        }
        let serving = old_plan.and_then(|plan| plan.objects().find(|o| name.same(o)));
        let (against, baseline) = match serving {
            Some(object) => ("serving", object.clone()),
            None => ("live", plan::project(&child.object, live)),
        };
        let fields = field_changes(&baseline, &child.object);
        if fields.is_empty() {
            continue;
        }
        diff.changed.push(Changed {
            diff: unified_diff(&baseline, &child.object, &name.to_string()),
            child: name,
            against,
            handling: child.handling(),
            fields,
        });
    }
    diff.deleted = new_plan
        .prune
        .iter()
        .map(|target| Removed {
            child: ChildName::of_target(target),
            orphaned: target.policy == DeletePolicy::Orphan,
        })
        .collect();
    let old_status = match old_plan {
        Some(plan) => &plan.status,
        None => &parent["status"],
    };
    if *old_status != new_plan.status {
        diff.status = Some(StatusChange {
            diff: unified_diff(old_status, &new_plan.status, "status"),
            old: old_status.clone(),
            new: new_plan.status.clone(),
        });
    }
    diff
}

/// Every leaf where `old` and `new` differ, both ways: fields set, changed and removed.
/// Lists of the same length are compared element by element, others whole.
pub fn field_changes(old: &Value, new: &Value) -> Vec<FieldChange> {
    fn walk(old: &Value, new: &Value, at: (&str, &str), out: &mut Vec<FieldChange>) {
        let (path, pointer) = at;
        match (old, new) {
            (Value::Object(before), Value::Object(after)) => {
                let keys: std::collections::BTreeSet<&String> =
                    before.keys().chain(after.keys()).collect();
                for key in keys {
                    let null = Value::Null;
                    let escaped = key.replace('~', "~0").replace('/', "~1");
                    walk(
                        before.get(key).unwrap_or(&null),
                        after.get(key).unwrap_or(&null),
                        (&field_path(path, key), &format!("{pointer}/{escaped}")),
                        out,
                    );
                }
            }
            (Value::Array(before), Value::Array(after)) if before.len() == after.len() => {
                for (index, (old, new)) in before.iter().zip(after).enumerate() {
                    let at = (&format!("{path}[{index}]"), &format!("{pointer}/{index}"));
                    walk(old, new, (at.0, at.1), out);
                }
            }
            (old, new) if old != new => out.push(FieldChange {
                path: path.to_string(),
                pointer: pointer.to_string(),
                old: old.clone(),
                new: new.clone(),
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(old, new, ("", ""), &mut out);
    out
}

/// `path.key`, or `path["key"]` for a key that is not a plain name (labels, annotations).
fn field_path(path: &str, key: &str) -> String {
    let plain = key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{key:?}]"),
    }
}

/// A unified diff of the YAML of `old` and `new`, as `kubectl diff` prints one.
fn unified_diff(old: &Value, new: &Value, what: &str) -> String {
    let yaml = |value: &Value| match value {
        Value::Null => String::new(),
        value => serde_yaml::to_string(value).unwrap_or_default(),
    };
    let (old, new) = (yaml(old), yaml(new));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("{what} (serving)"), &format!("{what} (new)"))
        .to_string()
}

/// Which plugin version a diff is about.
#[derive(Debug, Clone, Serialize)]
pub struct Version {
    pub plugin: String,
    pub version: String,
    pub sha256: String,
    /// Where it came from: a file or an OCI reference.
    pub source: String,
}

impl Version {
    pub fn of(plugin: &Plugin, source: &str) -> Version {
        Version {
            plugin: plugin.decl.name.clone(),
            version: plugin.decl.version.clone(),
            sha256: plugin.decl.content_hash.clone(),
            source: source.to_string(),
        }
    }
}

/// The totals of a diff.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub parents: usize,
    pub parents_changed: usize,
    /// Parents on which the new version fails (and the serving one does not, or differently).
    pub parents_failing: usize,
    /// The children the parents have now.
    pub children: usize,
    /// By kind.
    pub created: BTreeMap<String, usize>,
    pub changed: BTreeMap<String, usize>,
    pub deleted: BTreeMap<String, usize>,
    pub orphaned: BTreeMap<String, usize>,
    /// Whether the prune guard of the new version's policy would hold some of these
    /// deletions, were no spec change asking for them: more than its share of the children.
    pub prune_guard_holds: bool,
}

/// The whole diff of a version over a set of parents.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub new: Version,
    pub serving: Version,
    /// The parents that would change, in namespace and name order.
    pub parents: Vec<ParentDiff>,
    pub summary: Summary,
}

impl Report {
    /// Diffs `new` against `serving` on every parent of `state`.
    pub fn make(
        serving: (&Plugin, Version),
        new: (&Plugin, Version),
        state: &impl Inputs,
        now: &str,
    ) -> Report {
        let mut summary = Summary {
            parents: state.parents().len(),
            children: state.children(),
            ..Summary::default()
        };
        let mut parents = Vec::new();
        for parent in state.parents() {
            let diff = diff_parent(serving.0, new.0, state, parent, now);
            if !diff.changes() {
                continue;
            }
            summary.parents_changed += 1;
            summary.parents_failing += usize::from(diff.error.is_some());
            let count = |by_kind: &mut BTreeMap<String, usize>, kind: &str| {
                *by_kind.entry(kind.to_string()).or_default() += 1;
            };
            for child in &diff.created {
                count(&mut summary.created, &child.kind);
            }
            for child in &diff.changed {
                count(&mut summary.changed, &child.child.kind);
            }
            for child in &diff.deleted {
                let by_kind = match child.orphaned {
                    true => &mut summary.orphaned,
                    false => &mut summary.deleted,
                };
                count(by_kind, &child.child.kind);
            }
            parents.push(diff);
        }
        let percent = new.0.policy.rules(&new.0.decl.name).prune_guard_percent;
        let deleted: usize = summary.deleted.values().sum();
        summary.prune_guard_holds =
            percent < 100 && deleted > crate::policy::prune_guard_limit(summary.children, percent);
        Report {
            new: new.1,
            serving: serving.1,
            parents,
            summary,
        }
    }

    /// Whether serving the new version would change anything.
    pub fn changes(&self) -> bool {
        self.summary.parents_changed > 0
    }

    /// The report for people: each parent that would change, then the summary.
    pub fn to_text(&self) -> String {
        let describe = |v: &Version| {
            format!(
                "{} {} (sha256:{}, {})",
                v.plugin,
                v.version,
                &v.sha256[..v.sha256.len().min(12)],
                v.source
            )
        };
        let mut out = format!(
            "new:     {}\nserving: {}\n",
            describe(&self.new),
            describe(&self.serving)
        );
        for parent in &self.parents {
            out.push_str(&format!("\n{}\n", parent.parent));
            if let Some(error) = &parent.error {
                out.push_str(&format!("  ! fails: {}: {}\n", error.reason, error.message));
            }
            if let Some(error) = &parent.serving_error
                && parent.error.as_ref() != Some(error)
            {
                out.push_str(&format!(
                    "  (the serving version fails here: {}: {})\n",
                    error.reason, error.message
                ));
            }
            for child in &parent.created {
                out.push_str(&format!("  + {child} (created)\n"));
            }
            for child in &parent.deleted {
                let what = if child.orphaned {
                    "orphaned"
                } else {
                    "deleted"
                };
                out.push_str(&format!("  - {} ({what})\n", child.child));
            }
            for child in &parent.changed {
                let handling = child
                    .handling
                    .as_deref()
                    .map(|h| format!(", {h}"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "  ~ {} (changed, against the {} object{handling})\n",
                    child.child, child.against
                ));
                out.push_str(&indent(&child.diff, "      "));
            }
            if let Some(status) = &parent.status {
                out.push_str("  ~ status\n");
                out.push_str(&indent(&status.diff, "      "));
            }
        }
        let s = &self.summary;
        let by_kind = |counts: &BTreeMap<String, usize>| {
            let total: usize = counts.values().sum();
            if counts.is_empty() {
                return "0".to_string();
            }
            let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!("{total} ({})", kinds.join(", "))
        };
        out.push_str(&format!(
            "\n{} of {} parents would change, {} would fail; of their {} children: created {}, \
             changed {}, deleted {}, orphaned {}\n",
            s.parents_changed,
            s.parents,
            s.parents_failing,
            s.children,
            by_kind(&s.created),
            by_kind(&s.changed),
            by_kind(&s.deleted),
            by_kind(&s.orphaned),
        ));
        if s.prune_guard_holds {
            out.push_str(
                "the prune guard would hold these deletions (more than its share of the \
                 children; see pruneGuard in the policy)\n",
            );
        }
        out
    }
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|line| format!("{prefix}{line}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;
    use serde_json::json;

    fn config_map(name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}},
               "data": data})
    }

    fn planned(objects: &[Value], status: Value) -> Result<Plan, PlanError> {
        Ok(Plan {
            apply: objects
                .iter()
                .map(|object| plan::PlannedChild {
                    object: object.clone(),
                    update: UpdateStrategy::InPlace,
                    stage: 0,
                    barrier: None,
                })
                .collect(),
            prune: Vec::new(),
            status,
            requeue_after: None,
        })
    }

    fn parent() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "App",
               "metadata": {"name": "a", "namespace": "ns", "uid": "u"},
               "status": {"ready": true}})
    }

    #[test]
    fn the_same_plan_changes_nothing() {
        let child = config_map("a", json!({"k": "v"}));
        let plan = planned(std::slice::from_ref(&child), json!({"ready": true}));
        let diff = compare(&parent(), &[child], &plan, &plan);
        assert!(!diff.changes(), "{diff:?}");
        assert_eq!(diff.parent, "ns/a");
    }

    #[test]
    fn fields_set_changed_and_removed_are_each_named() {
        let old = config_map("a", json!({"kept": "1", "changed": "old", "removed": "x"}));
        let mut new = config_map("a", json!({"kept": "1", "changed": "new", "added": "y"}));
        new["metadata"]["annotations"] = json!({"example.com/variant": "v2"});
        let diff = compare(
            &parent(),
            std::slice::from_ref(&old),
            &planned(std::slice::from_ref(&old), json!({})),
            &planned(std::slice::from_ref(&new), json!({})),
        );
        let [changed] = diff.changed.as_slice() else {
            panic!("one child changes: {diff:?}");
        };
        assert_eq!(changed.against, "serving");
        let paths: Vec<&str> = changed.fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "data.added",
                "data.changed",
                "data.removed",
                "metadata.annotations",
            ]
        );
        assert_eq!(changed.fields[2].new, Value::Null, "a removal's new value");
        assert_eq!(changed.fields[0].pointer, "/data/added");
        assert!(changed.diff.contains("-  removed: x"), "{}", changed.diff);
        assert!(changed.diff.contains("+  changed: new"), "{}", changed.diff);
    }

    #[test]
    fn what_the_api_server_added_to_a_live_child_is_no_change() {
        let desired = config_map("a", json!({"k": "v"}));
        let mut live = desired.clone();
        live["metadata"]["uid"] = "child-uid".into();
        live["metadata"]["resourceVersion"] = "7".into();
        // The serving version fails, so the new plan is compared with the live object.
        let old = Err(PlanError::PluginRetry("not yet".into()));
        let diff = compare(
            &parent(),
            &[live],
            &old,
            &planned(std::slice::from_ref(&desired), json!({"ready": true})),
        );
        assert!(diff.changed.is_empty(), "{diff:?}");
        assert!(diff.changes(), "the serving version's failure goes away");
        assert_eq!(diff.status, None, "the status stays what the parent says");
    }

    #[test]
    fn children_created_and_deleted_are_listed_by_kind_and_name() {
        let kept = config_map("a", json!({}));
        let gone = config_map("a-old", json!({}));
        let mut new_plan = planned(&[kept.clone(), config_map("a-new", json!({}))], json!({}));
        new_plan.as_mut().unwrap().prune.push(PruneTarget {
            kind: Kind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
            },
            namespace: "ns".into(),
            name: "a-old".into(),
            uid: "g".into(),
            policy: DeletePolicy::Delete,
        });
        let diff = compare(
            &parent(),
            &[kept.clone(), gone.clone()],
            &planned(&[kept, gone], json!({})),
            &new_plan,
        );
        assert_eq!(
            diff.created
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["a-new"]
        );
        assert_eq!(diff.deleted.len(), 1);
        assert_eq!(diff.deleted[0].child.name, "a-old");
        assert!(!diff.deleted[0].orphaned);
    }

    #[test]
    fn a_new_failure_is_a_change_and_the_same_failure_is_not() {
        let child = config_map("a", json!({}));
        let ok = planned(std::slice::from_ref(&child), json!({}));
        let fails = Err(PlanError::PolicyViolation("no Secrets".into()));
        let diff = compare(&parent(), std::slice::from_ref(&child), &ok, &fails);
        assert!(diff.changes());
        assert_eq!(diff.error.as_ref().unwrap().reason, "PolicyViolation");
        assert!(diff.created.is_empty() && diff.deleted.is_empty());
        let diff = compare(&parent(), &[child], &fails, &fails);
        assert!(!diff.changes(), "{diff:?}");
    }

    #[test]
    fn keys_that_are_not_plain_names_are_quoted_in_paths() {
        assert_eq!(
            field_path("metadata.labels", "app.kubernetes.io/name"),
            r#"metadata.labels["app.kubernetes.io/name"]"#
        );
        assert_eq!(field_path("", "spec"), "spec");
        assert_eq!(field_path("spec", "replicas"), "spec.replicas");
        let changes = field_changes(
            &json!({"metadata": {"labels": {"a/b~c": "1"}}}),
            &json!({"metadata": {"labels": {"a/b~c": "2"}}}),
        );
        assert_eq!(changes[0].pointer, "/metadata/labels/a~1b~0c");
    }
}
