//! `operator-host conformance`: what the host relies on a plugin for, checked on a built component of any language.
//!
//! Loading already checks the declaration (`info` valid, the CRD of the parent kind). The
//! checks here call the plugin: the same request gives the same answer; nothing survives
//! from one call to the next; an invalid spec is refused as an invalid spec, not retried or
//! trapped on; every answer passes the host's validation (declared kinds, the parent's
//! namespace, no reserved metadata) and the policy; and every call finishes well inside the
//! call timeout.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::plan::{self, PlanError};
use crate::plugin::Plugin;
use crate::policy::Policy;
use crate::render::{self, Sample};
use crate::runtime::{Child, ReconcileError, ReconcileResponse, RelatedObjects};

/// A call that takes more than this share of the call timeout fails the limits check: it
/// would time out on a busier machine.
const TIMEOUT_SHARE: f64 = 0.5;

/// The time conditions are stamped with; the checks compare answers, not clocks.
const NOW: &str = "2026-01-01T00:00:00Z";

/// One check and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// What was checked, e.g. `deterministic default/mc`.
    pub name: String,
    /// `Ok` with what was seen, or `Err` with what went wrong.
    pub outcome: Result<String, String>,
}

/// Every check of one plugin.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub checks: Vec<Check>,
    /// What the host would apply but the cluster would show as a mistake (a selector that
    /// takes in another child's pods): printed, not failed.
    pub warnings: Vec<String>,
}

impl Report {
    /// How many checks failed.
    pub fn failed(&self) -> usize {
        self.checks
            .iter()
            .filter(|check| check.outcome.is_err())
            .count()
    }

    fn record(&mut self, name: String, outcome: Result<String, String>) {
        self.checks.push(Check { name, outcome });
    }

    /// One line per check: `PASS name: detail` or `FAIL name: problem`; then `WARN warning`.
    pub fn to_text(&self) -> String {
        let checks = self.checks.iter().map(|check| match &check.outcome {
            Ok(detail) => format!("PASS {}: {detail}\n", check.name),
            Err(problem) => format!("FAIL {}: {problem}\n", check.name),
        });
        let warnings = self.warnings.iter().map(|w| format!("WARN {w}\n"));
        checks.chain(warnings).collect()
    }
}

/// The answer of one call, comparable.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Response {
        children: Vec<Child>,
        status: String,
        requeue_after_ms: Option<u64>,
    },
    InvalidSpec(String),
    Retry(String),
    Failed(String),
}

impl Answer {
    fn describe(&self) -> String {
        match self {
            Answer::Response { children, .. } => format!("{} children", children.len()),
            Answer::InvalidSpec(message) => format!("invalid spec: {message}"),
            Answer::Retry(message) => format!("retry: {message}"),
            Answer::Failed(message) => format!("the call failed: {message}"),
        }
    }
}

/// Checks `plugin` with the sample custom resources of `sample` (with its other documents as
/// the cluster's objects, as `render` reads them) under `policy`. Samples must be valid CRs:
/// each one's answer is checked as the host would apply it.
pub fn check(plugin: &Plugin, sample: &Sample, policy: &Policy) -> Report {
    let mut report = Report::default();
    let decl = &plugin.decl;
    report.record(
        "info".into(),
        Ok(format!(
            "{} {} reconciles {} into {}",
            decl.name,
            decl.version,
            decl.parent,
            decl.children
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    );
    report.record(
        "policy admits it".into(),
        policy
            .admit(decl)
            .map(|warnings| match warnings.is_empty() {
                true => "no warnings".to_string(),
                false => warnings.join("; "),
            })
            .map_err(|e| e.to_string()),
    );
    let timeout = plugin.compiled.limits().call_timeout;
    let mut slowest = Duration::ZERO;
    let mut timed_call = |parent: &Value| {
        let related = sample.related_to(plugin, parent);
        let started = Instant::now();
        let answer = call(plugin, parent, related);
        slowest = slowest.max(started.elapsed());
        answer
    };

    for parent in &sample.parents {
        let parent = parent.clone();
        let id = render::identity(&parent);
        let first = timed_call(&parent);
        let second = timed_call(&parent);
        report.record(
            format!("deterministic {id}"),
            if first == second {
                Ok(format!(
                    "two calls gave the same answer ({})",
                    first.describe()
                ))
            } else {
                Err(format!(
                    "two calls with the same request answered differently: {:?} then {:?}",
                    first, second
                ))
            },
        );
        // Another parent in between: an answer that changed would have kept state.
        let mut other = parent.clone();
        other["metadata"]["name"] = json!(format!("{}-other", name(&parent)));
        let _ = timed_call(&other);
        let third = timed_call(&parent);
        report.record(
            format!("no state between calls {id}"),
            if third == first {
                Ok("the answer after another parent's call is unchanged".into())
            } else {
                Err(format!(
                    "the answer changed after a call for another parent: {:?} then {:?}",
                    first, third
                ))
            },
        );
        let accepted = accepted(plugin, &parent, &first, policy).map(|(detail, warnings)| {
            let id = &id;
            report
                .warnings
                .extend(warnings.into_iter().map(|w| format!("{id}: {w}")));
            detail
        });
        report.record(format!("answer accepted {id}"), accepted);
        for (what, invalid) in invalid_specs(plugin, &parent) {
            report.record(
                format!("invalid spec refused {id} ({what})"),
                refused(timed_call(&invalid)),
            );
        }
        for (name, outcome) in admission_checks(plugin, &parent) {
            report.record(format!("{name} {id}"), outcome);
        }
    }
    if sample.parents.is_empty() {
        // Without samples, a bare parent still shows whether invalid specs are refused.
        let bare = json!({
            "apiVersion": decl.parent.api_version(),
            "kind": decl.parent.kind,
            "metadata": {"name": "conformance", "namespace": "default"},
            "spec": {},
        });
        for (what, invalid) in invalid_specs(plugin, &bare) {
            report.record(
                format!("invalid spec refused ({what})"),
                refused(timed_call(&invalid)),
            );
        }
    }
    let ceiling = timeout.mul_f64(TIMEOUT_SHARE);
    report.record(
        "within limits".into(),
        if slowest <= ceiling {
            Ok(format!(
                "slowest call {:.1} ms, call timeout {} ms",
                slowest.as_secs_f64() * 1e3,
                timeout.as_millis()
            ))
        } else {
            Err(format!(
                "slowest call {:.1} ms, more than {:.0} % of the call timeout of {} ms",
                slowest.as_secs_f64() * 1e3,
                TIMEOUT_SHARE * 100.0,
                timeout.as_millis()
            ))
        },
    );
    report
}

/// Contract 0.3.0's functions, for what the plugin implements: the sample is admitted (its
/// defaults applied, its validation passed), defaulting again changes nothing, the same
/// validation twice gives the same answer, and a conversion to each other version the CRD
/// serves and back gives the object back.
fn admission_checks(plugin: &Plugin, parent: &Value) -> Vec<(String, Result<String, String>)> {
    let implements = plugin.decl.implements;
    let mut checks = Vec::new();
    if !implements.admission() && !implements.convert {
        return checks;
    }
    let admitted = render::admit(plugin, parent);
    let admitted_object = admitted.as_ref().map(|a| a.object.clone()).ok();
    if implements.admission() {
        checks.push((
            "admitted".to_string(),
            admitted.as_ref().map_err(Clone::clone).map(|admitted| {
                match admitted.warnings.is_empty() {
                    true => "defaulted and validated without warnings".to_string(),
                    false => format!("with warnings: {}", admitted.warnings.join("; ")),
                }
            }),
        ));
    }
    if implements.default
        && let Some(defaulted) = &admitted_object
    {
        let again = render::admit(plugin, defaulted).map(|a| a.object);
        checks.push((
            "defaulting idempotent".to_string(),
            match again {
                Ok(again) if &again == defaulted => {
                    Ok("defaulting the defaulted object changes nothing".into())
                }
                Ok(again) => Err(format!(
                    "defaulting the defaulted object changed it again: {}",
                    json_patch::diff(defaulted, &again)
                        .0
                        .iter()
                        .map(|op| op.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Err(refusal) => Err(format!("the defaulted object is refused: {refusal}")),
            },
        ));
    }
    if implements.validate {
        let object = admitted_object.clone().unwrap_or_else(|| parent.clone());
        let request = crate::runtime::AdmissionRequest {
            operation: crate::runtime::Operation::Create,
            object: Some(object.to_string()),
            old_object: None,
            user: String::new(),
            dry_run: true,
        };
        let first = plugin.compiled.validate(&request, "conformance");
        let second = plugin.compiled.validate(&request, "conformance");
        checks.push((
            "validation deterministic".to_string(),
            if first == second {
                Ok("two validations gave the same answer".into())
            } else {
                Err(format!(
                    "two validations answered differently: {first:?} then {second:?}"
                ))
            },
        ));
    }
    if implements.convert {
        let object = admitted_object.unwrap_or_else(|| parent.clone());
        let own = plugin.decl.parent.version.clone();
        for version in plugin.decl.served_versions() {
            checks.push((
                format!("conversion round trip via {version}"),
                round_trip(plugin, &object, version, &own),
            ));
        }
    }
    checks
}

/// `object` converted to `version` and back to `own`: it must come back as it was.
fn round_trip(plugin: &Plugin, object: &Value, version: &str, own: &str) -> Result<String, String> {
    let convert = |object: &Value, to: &str| -> Result<Value, String> {
        let converted = plugin
            .compiled
            .convert(&object.to_string(), to, "conformance")
            .map_err(|e| format!("convert to {to} failed: {e}"))?
            .map_err(|refusal| format!("convert to {to} refused: {refusal}"))?;
        let converted: Value = serde_json::from_str(&converted)
            .map_err(|e| format!("convert to {to} answered something that is not JSON: {e}"))?;
        let expected = format!("{}/{to}", plugin.decl.parent.group);
        if converted["apiVersion"] != expected.as_str() {
            return Err(format!(
                "convert to {to} answered apiVersion {}, not {expected}",
                converted["apiVersion"]
            ));
        }
        Ok(converted)
    };
    let there = convert(object, version)?;
    let back = convert(&there, own)?;
    if &back == object {
        Ok(format!("{own} -> {version} -> {own} gives the object back"))
    } else {
        Err(format!(
            "{own} -> {version} -> {own} changed the object: {}",
            json_patch::diff(object, &back)
                .0
                .iter()
                .map(|op| op.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// The outcome of a call for a parent whose spec is invalid: it must be the invalid-spec error.
fn refused(answer: Answer) -> Result<String, String> {
    match answer {
        Answer::InvalidSpec(message) => Ok(message),
        other => Err(format!(
            "expected the invalid-spec error, got {}",
            other.describe()
        )),
    }
}

fn name(parent: &Value) -> &str {
    parent["metadata"]["name"].as_str().unwrap_or("")
}

/// One `reconcile` of `parent` with its `related` objects, as the host calls it.
fn call(plugin: &Plugin, parent: &Value, related: Vec<RelatedObjects>) -> Answer {
    let (request, seed) = plan::request("reconcile", parent, &[], related);
    match plugin
        .compiled
        .reconcile_seeded(&request, &seed, "conformance")
    {
        Ok(Ok(ReconcileResponse {
            children,
            status,
            requeue_after_ms,
        })) => Answer::Response {
            children,
            status,
            requeue_after_ms,
        },
        Ok(Err(ReconcileError::InvalidSpec(message))) => Answer::InvalidSpec(message),
        Ok(Err(ReconcileError::Retry(message))) => Answer::Retry(message),
        Err(error) => Answer::Failed(error.to_string()),
    }
}

/// Whether the host would apply `answer` for `parent` (its validation and the policy), and
/// the plan's selector warnings.
fn accepted(
    plugin: &Plugin,
    parent: &Value,
    answer: &Answer,
    policy: &Policy,
) -> Result<(String, Vec<String>), String> {
    let Answer::Response {
        children,
        status,
        requeue_after_ms,
    } = answer
    else {
        return Err(format!(
            "a sample must be a valid {} that reconciles (with the other documents of the \
             files as the cluster's objects), got {}",
            plugin.decl.parent,
            answer.describe()
        ));
    };
    let response = ReconcileResponse {
        children: children.clone(),
        status: status.clone(),
        requeue_after_ms: *requeue_after_ms,
    };
    let plan = plan::plan_from_response(&plugin.decl, parent, &[], response, NOW)
        .map_err(|e| e.to_string())?;
    policy
        .check(&plugin.decl, parent, &plan)
        .map_err(|violation| PlanError::from(violation).to_string())?;
    let warnings = crate::selectors::overlaps(plan.objects());
    let detail = format!(
        "{} children in {}, valid and within the policy",
        plan.apply.len(),
        parent["metadata"]["namespace"].as_str().unwrap_or("")
    );
    Ok((detail, warnings))
}

/// Variants of `parent` whose spec the CRD's schema refuses: a spec that is not an object,
/// and the first scalar field of the spec's schema given a value of another type.
fn invalid_specs(plugin: &Plugin, parent: &Value) -> Vec<(String, Value)> {
    let mut invalid = Vec::new();
    let mut not_an_object = parent.clone();
    not_an_object["spec"] = json!("conformance: a spec that is not an object");
    invalid.push(("spec is a string".to_string(), not_an_object));
    let crd = serde_json::to_value(&plugin.decl.crd).unwrap_or_default();
    let version = &plugin.decl.parent.version;
    let schema = crd["spec"]["versions"]
        .as_array()
        .and_then(|versions| versions.iter().find(|v| v["name"] == version.as_str()))
        .map(|v| &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]);
    let scalar = schema.and_then(Value::as_object).and_then(|properties| {
        properties.iter().find_map(|(field, schema)| {
            let wrong = match schema["type"].as_str()? {
                "integer" | "number" | "boolean" => json!("conformance"),
                "string" => json!({"conformance": true}),
                _ => return None,
            };
            Some((field.clone(), wrong))
        })
    });
    if let Some((field, wrong)) = scalar {
        let mut wrong_type = parent.clone();
        if !wrong_type["spec"].is_object() {
            wrong_type["spec"] = json!({});
        }
        wrong_type["spec"][&field] = wrong;
        invalid.push((format!("spec.{field} of another type"), wrong_type));
    }
    invalid
}
