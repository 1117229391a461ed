//! Spec mutation (Acto, issue 14): random sequences of valid and invalid spec edits, generated from each plugin's CRD schema.
//!
//! At run time the test walks `spec` of the plugin's CRD (`plugin.decl.crd`,
//! `spec.versions[0].schema.openAPIV3Schema.properties.spec`) and derives candidate edits from
//! what the schema says: integer bounds ±1, every enum value and one outside the enum, strings
//! matching a `pattern` (generated from it), lengths at and beyond `minLength`/`maxLength`,
//! empty, blank and long strings, booleans, map entries added, optional fields removed,
//! required fields removed, values of the wrong type, and changes to immutable subtrees
//! (`x-kubernetes-validations: self == oldSelf`). A short per-plugin list adds values the
//! schema lets through but the plugin's `validate` may reject (checked against the schema walk,
//! so it cannot name a field the CRD no longer has).
//!
//! Each sequence runs one host process (`operator-host-faulty`, no crash armed) in a namespace
//! of its own and applies its edits one by one as merge patches. Every step is judged:
//! - refused by the API server (422): nothing changed: the parent's generation, the children's
//!   UIDs and every field the plugin set on them for the last valid spec;
//! - accepted, but the plugin (its pure `plan`, run here on the live parent) rejects it: the
//!   parent says `Reconciled=False`, reason `InvalidSpec`, for its current generation, with a
//!   message naming a field edited since the last valid spec, and the children are unchanged;
//! - accepted and valid: the oracle's `converges` (the live state is the plugin's fixed point)
//!   and children kept across the edit keep their UIDs.
//!
//! After the sequence the initial spec is put back: it converges and `assert_quiet` passes.
//!
//! An accepted spec the plugin takes but whose children the API server refuses (the host says
//! `Reconciled=False` with another reason) is a finding about the plugin's validation: it is
//! printed with its reproduction, the last valid spec is put back (which must converge), and the
//! sequence goes on. Every other broken expectation fails the test with the sequence, step, edit,
//! the oracle's difference and the host's log tail.
//!
//! By default 2 sequences × 8 steps per plugin with fixed seeds; `OPERATOR_HOST_CAMPAIGN=long`
//! runs 20 × 25. `OPERATOR_HOST_SPEC_SEED=<n>` changes the seeds.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use operator_host::plan::{self, PlanError};
use operator_host_tests::campaign::{BOUND, Scenario};
use operator_host_tests::fault_proxy::Matcher;
use operator_host_tests::memcached::{memcached_resource, reconciled_condition};
use operator_host_tests::oracle::{self, first_difference};
use operator_host_tests::process_host::ProcessHost;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

/// How long a child may keep lacking an empty value the plugin sets before that is a finding.
const STUCK: Duration = Duration::from_secs(5);
/// The step that converges the initial spec.
const INITIAL: &str = "initial";

/// The length of the "long string" candidate of a string without `maxLength`.
const LONG: usize = 300;

/// What the API server must answer to an edit, as far as the schema decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// The schema allows the value.
    Accepted,
    /// The schema forbids it: a 422.
    Refused,
    /// The schema decides with a rule the test does not evaluate (a `pattern` it did not
    /// generate from): whatever the API server answers is checked for its consequences.
    Either,
}

/// One spec edit: set `path` to `value`, or remove it (`None`).
#[derive(Clone, Debug)]
struct Edit {
    path: Vec<String>,
    value: Option<Value>,
    expect: Expect,
    /// Why this value (which schema rule it probes).
    why: String,
    /// The root of the immutable subtree the path lies in, if any: there the answer depends on
    /// whether the subtree changes, so it is decided against the live spec at the step.
    immutable: Option<Vec<String>>,
    /// The schema's default at `path`: what a removal leaves.
    default: Option<Value>,
    /// For the per-plugin values: whether the plugin must reject it (checked, so the list
    /// cannot rot silently).
    plugin_rejects: Option<bool>,
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", field(&self.path))?;
        match &self.value {
            Some(value) => {
                let text = value.to_string();
                if text.len() > 80 {
                    write!(f, " = {}… ({} characters of JSON)", &text[..60], text.len())?;
                } else {
                    write!(f, " = {text}")?;
                }
            }
            None => write!(f, " removed")?,
        }
        write!(f, " [{}; schema: {:?}]", self.why, self.expect)
    }
}

/// `spec.a.b`, map keys that are not identifiers in brackets.
fn field(path: &[String]) -> String {
    let mut out = "spec".to_string();
    for segment in path {
        if segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            out.push('.');
            out.push_str(segment);
        } else {
            out.push_str(&format!("[{segment:?}]"));
        }
    }
    out
}

/// Builds the candidate edits from a structural schema. All randomness (pattern-matching
/// strings, in-range integers) comes from `runner`, so a seed fixes the candidates too.
struct Walker<'a> {
    runner: &'a mut TestRunner,
    out: Vec<Edit>,
}

impl Walker<'_> {
    fn push(&mut self, path: &[String], value: Option<Value>, expect: Expect, why: &str) {
        self.out.push(Edit {
            path: path.to_vec(),
            value,
            expect,
            why: why.to_string(),
            immutable: None,
            default: None,
            plugin_rejects: None,
        });
    }

    fn walk(
        &mut self,
        schema: &Value,
        path: &mut Vec<String>,
        required: bool,
        immutable: Option<Vec<String>>,
    ) {
        let start = self.out.len();
        let immutable = immutable.or_else(|| {
            schema["x-kubernetes-validations"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|rule| rule["rule"] == "self == oldSelf")
                .then(|| path.clone())
        });
        if !path.is_empty() {
            if required {
                self.push(path, None, Expect::Refused, "required field removed");
            } else {
                self.push(path, None, Expect::Accepted, "optional field removed");
            }
        }
        let ty = schema["type"].as_str().unwrap_or_default();
        if schema["x-kubernetes-int-or-string"] == true {
            for (value, why) in [
                (json!(1), "int-or-string: an integer"),
                (json!("100m"), "int-or-string: a string"),
                (json!("not-a-quantity"), "int-or-string: any string"),
            ] {
                self.push(path, Some(value), Expect::Accepted, why);
            }
        } else if ty == "integer" {
            self.integer(schema, path);
            self.push(path, Some(json!("1")), Expect::Refused, "wrong type");
        } else if ty == "boolean" {
            self.push(path, Some(json!(true)), Expect::Accepted, "boolean");
            self.push(path, Some(json!(false)), Expect::Accepted, "boolean");
            self.push(path, Some(json!("yes")), Expect::Refused, "wrong type");
        } else if ty == "string" {
            self.string(schema, path);
            self.push(path, Some(json!(1)), Expect::Refused, "wrong type");
        } else if ty == "array" {
            self.array(schema, path);
            self.push(path, Some(json!("x")), Expect::Refused, "wrong type");
        } else if ty == "object" {
            if let Some(properties) = schema["properties"].as_object() {
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                for (name, property) in properties {
                    path.push(name.clone());
                    self.walk(
                        property,
                        path,
                        required.contains(&name.as_str()),
                        immutable.clone(),
                    );
                    path.pop();
                }
            }
            if schema["additionalProperties"].is_object() && !path.is_empty() {
                self.map(&schema["additionalProperties"], path, immutable.clone());
            }
            if !path.is_empty() {
                self.push(path, Some(json!("x")), Expect::Refused, "wrong type");
            }
        }
        for edit in &mut self.out[start..] {
            edit.immutable = edit.immutable.take().or_else(|| immutable.clone());
            if edit.value.is_none() && edit.path == *path {
                edit.default = schema.get("default").cloned();
            }
        }
    }

    fn integer(&mut self, schema: &Value, path: &[String]) {
        let min = schema["minimum"].as_f64().map(|m| m as i64);
        let max = schema["maximum"].as_f64().map(|m| m as i64);
        if let Some(min) = min {
            self.push(path, Some(json!(min - 1)), Expect::Refused, "minimum-1");
            self.push(path, Some(json!(min)), Expect::Accepted, "minimum");
        }
        if let Some(max) = max {
            self.push(path, Some(json!(max)), Expect::Accepted, "maximum");
            self.push(path, Some(json!(max + 1)), Expect::Refused, "maximum+1");
        }
        match (min, max) {
            (Some(min), Some(max)) => {
                let value = (min..=max)
                    .new_tree(self.runner)
                    .expect("an integer")
                    .current();
                self.push(path, Some(json!(value)), Expect::Accepted, "in range");
            }
            // No upper bound: stay near the lower one (a huge replica count would only load
            // the shared cluster).
            (Some(min), None) => {
                self.push(path, Some(json!(min + 1)), Expect::Accepted, "minimum+1");
                self.push(path, Some(json!(min + 2)), Expect::Accepted, "minimum+2");
            }
            (None, _) => {
                for value in [0, 1, -1] {
                    self.push(path, Some(json!(value)), Expect::Accepted, "unbounded");
                }
            }
        }
    }

    fn string(&mut self, schema: &Value, path: &[String]) {
        if let Some(values) = schema["enum"].as_array() {
            for value in values {
                self.push(path, Some(value.clone()), Expect::Accepted, "enum value");
            }
            self.push(
                path,
                Some(json!("NotInTheEnum")),
                Expect::Refused,
                "outside the enum",
            );
            return;
        }
        if let Some(pattern) = schema["pattern"].as_str() {
            for _ in 0..2 {
                let value = self.matching(pattern);
                self.push(
                    path,
                    Some(json!(value)),
                    Expect::Accepted,
                    "matches pattern",
                );
            }
            self.push(path, Some(json!("")), Expect::Either, "empty, vs pattern");
            self.push(
                path,
                Some(json!("~ x")),
                Expect::Either,
                "blank, vs pattern",
            );
            return;
        }
        let min = schema["minLength"].as_u64().map(|n| n as usize);
        let max = schema["maxLength"].as_u64().map(|n| n as usize);
        if let Some(min) = min.filter(|&m| m > 0) {
            self.push(
                path,
                Some(json!("a".repeat(min - 1))),
                Expect::Refused,
                "minLength-1",
            );
            self.push(
                path,
                Some(json!("a".repeat(min))),
                Expect::Accepted,
                "minLength",
            );
        } else {
            self.push(path, Some(json!("")), Expect::Accepted, "empty string");
        }
        match max {
            Some(max) => {
                self.push(
                    path,
                    Some(json!("a".repeat(max))),
                    Expect::Accepted,
                    "maxLength",
                );
                self.push(
                    path,
                    Some(json!("a".repeat(max + 1))),
                    Expect::Refused,
                    "maxLength+1",
                );
            }
            None => self.push(
                path,
                Some(json!("a".repeat(LONG))),
                Expect::Accepted,
                "long string",
            ),
        }
        let allows = |s: &str| min.is_none_or(|m| s.len() >= m);
        for (value, why) in [
            (" ", "blank string"),
            ("a b", "inner space"),
            ("x", "short"),
        ] {
            if allows(value) {
                self.push(path, Some(json!(value)), Expect::Accepted, why);
            }
        }
    }

    /// A string matching the schema's `pattern` (an ECMA/RE2 regex anchored with `^…$`):
    /// proptest generates from a regex without anchors, and `\d` must stay ASCII as in Go.
    fn matching(&mut self, pattern: &str) -> String {
        let body = pattern.trim_start_matches('^').trim_end_matches('$');
        let strategy = proptest::string::string_regex(&format!("(?-u:{body})"))
            .unwrap_or_else(|e| panic!("cannot generate from the pattern {pattern:?}: {e}"));
        strategy.new_tree(self.runner).expect("a string").current()
    }

    fn array(&mut self, schema: &Value, path: &[String]) {
        let min = schema["minItems"].as_u64().unwrap_or(0);
        let empty = if min > 0 {
            (Expect::Refused, "minItems-1")
        } else {
            (Expect::Accepted, "empty array")
        };
        self.push(path, Some(json!([])), empty.0, empty.1);
        if let Some(values) = schema["items"]["enum"].as_array() {
            for value in values {
                self.push(path, Some(json!([value])), Expect::Accepted, "enum item");
            }
            self.push(
                path,
                Some(json!(["NotInTheEnum"])),
                Expect::Refused,
                "item outside the enum",
            );
        }
    }

    /// A map (`additionalProperties`): entries with keys of several shapes, the value of one
    /// entry walked like a field, and the empty map.
    fn map(&mut self, values: &Value, path: &mut Vec<String>, immutable: Option<Vec<String>>) {
        let sample = match values["type"].as_str() {
            _ if values["x-kubernetes-int-or-string"] == true => json!(1),
            Some("integer") => json!(1),
            Some("boolean") => json!(true),
            _ => json!("v"),
        };
        for (key, why) in [
            ("example.com/k", "map key with a prefix"),
            ("bad key", "map key with a space"),
            ("-k-", "map key with dashes at the ends"),
        ] {
            path.push(key.into());
            self.push(path, Some(sample.clone()), Expect::Accepted, why);
            path.pop();
        }
        self.push(path, Some(json!({})), Expect::Accepted, "empty map");
        path.push("k".into());
        self.walk(values, path, false, immutable);
        path.pop();
    }
}

/// The spec schema of `plugin`'s CRD.
fn spec_schema(plugin: &operator_host::plugin::Plugin) -> Value {
    let crd = serde_json::to_value(&plugin.decl.crd).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

/// The candidates of a plugin: the schema's, then `extras` (path, value, whether the plugin
/// must reject it), each of which must lie on a path the schema has.
fn candidates(
    schema: &Value,
    extras: &[(&[&str], Value, bool)],
    runner: &mut TestRunner,
) -> Vec<Edit> {
    let mut walker = Walker {
        runner,
        out: Vec::new(),
    };
    walker.walk(schema, &mut Vec::new(), true, None);
    let mut out = walker.out;
    for (path, value, rejects) in extras {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        // A map entry's key is free; a field must be one the schema walk reached.
        let known = out.iter().any(|e| {
            e.path == path
                || (e.path.len() == path.len()
                    && e.path[..path.len() - 1] == path[..path.len() - 1]
                    && e.path.last().is_some_and(|k| k == "k"))
        });
        assert!(known, "{} is not in the CRD schema", field(&path));
        out.push(Edit {
            path,
            value: Some(value.clone()),
            expect: Expect::Accepted,
            why: format!(
                "plugin-level {}",
                if *rejects { "invalid" } else { "valid" }
            ),
            immutable: None,
            default: None,
            plugin_rejects: Some(*rejects),
        });
    }
    out
}

/// `{"a": {"b": value}}` for path `[a, b]` (`null` removes in a merge patch).
fn nested(path: &[String], value: Value) -> Value {
    path.iter()
        .rev()
        .fold(value, |inner, key| json!({ key.clone(): inner }))
}

/// `spec` with the edit applied as the API server would store it (a removal leaves the
/// default): used to decide whether an immutable subtree changes.
fn edited(spec: &Value, edit: &Edit) -> Value {
    let mut spec = spec.clone();
    let Some((last, parents)) = edit.path.split_last() else {
        return spec;
    };
    let mut node = &mut spec;
    for key in parents {
        if !node[key.as_str()].is_object() {
            node[key.as_str()] = json!({});
        }
        node = &mut node[key.as_str()];
    }
    match edit.value.clone().or_else(|| edit.default.clone()) {
        Some(value) => node[last.as_str()] = value,
        None => {
            if let Some(object) = node.as_object_mut() {
                object.remove(last);
            }
        }
    }
    spec
}

fn at<'v>(value: &'v Value, path: &[String]) -> &'v Value {
    path.iter().fold(value, |v, k| &v[k.as_str()])
}

/// The fixed seed of sequence `sequence` of `plugin` (32 bytes for ChaCha).
fn seed(plugin: &str, sequence: usize) -> [u8; 32] {
    let base: u64 = std::env::var("OPERATOR_HOST_SPEC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&base.to_le_bytes());
    seed[8..16].copy_from_slice(&(sequence as u64).to_le_bytes());
    for (i, b) in plugin.bytes().take(16).enumerate() {
        seed[16 + i] = b;
    }
    seed
}

/// (sequences, steps per sequence).
fn budget() -> (usize, usize) {
    if std::env::var("OPERATOR_HOST_CAMPAIGN").as_deref() == Ok("long") {
        (20, 25)
    } else {
        (2, 8)
    }
}

/// One plugin under test.
struct Subject {
    dir: &'static str,
    plugin: &'static str,
    resource: ApiResource,
    initial: Value,
    extras: Vec<(&'static [&'static str], Value, bool)>,
    /// Creates what the parent needs in the namespace (MySQL's root Secret).
    prepare: fn(&Scenario) -> futures::future::BoxFuture<'_, ()>,
}

/// What a campaign saw.
#[derive(Default)]
struct Tally {
    steps: usize,
    refused: usize,
    invalid: usize,
    valid: usize,
    findings: Vec<String>,
}

/// The children the host manages for the parent with `uid`, as the oracle reads them.
async fn children(scenario: &Scenario, uid: &str) -> Vec<Value> {
    scenario.oracle().children_of(uid).await.unwrap()
}

/// The plugin's plan for the live parent and children.
fn plan_for(
    scenario: &Scenario,
    parent: &DynamicObject,
    observed: &[Value],
) -> Result<plan::Plan, PlanError> {
    let parent = serde_json::to_value(parent).unwrap();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    scenario.plugin.plan(&parent, observed, Vec::new(), &now)
}

/// The last lines of the host's log.
fn tail(host: &ProcessHost) -> String {
    let log = host.log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// One sequence of edits against one host.
struct Run<'a> {
    scenario: &'a Scenario,
    host: ProcessHost,
    name: &'static str,
    label: String,
    /// The desired children of the last valid spec, as the plan made them at convergence.
    last_desired: Vec<Value>,
    last_valid_spec: Value,
    /// Top-level fields edited since the last valid spec (the plugin's message names one).
    dirty: Vec<String>,
}

impl Run<'_> {
    fn fail(&self, step: &str, edit: &str, what: String) -> ! {
        panic!(
            "{} step {step}: {edit}\n{what}\nhost log tail:\n{}",
            self.label,
            tail(&self.host)
        )
    }

    async fn parent(&self) -> DynamicObject {
        self.scenario.parents.get(self.name).await.unwrap()
    }

    /// Waits for the oracle's fixed point and records it as the last valid state. The first
    /// convergence creates every child and waits for every member to be ready, behind the
    /// other tests' load at the end of the suite: it may take twice as long as an edit's.
    async fn converge(&mut self, step: &str, edit: &str) -> Duration {
        let bound = if step == INITIAL { 2 * BOUND } else { BOUND };
        let took = match self.scenario.oracle().converges(self.name, bound).await {
            Ok(took) => took,
            Err(error) => self.fail(
                step,
                edit,
                format!("did not converge within {bound:?}: {error}"),
            ),
        };
        self.remember_valid().await;
        took
    }

    async fn remember_valid(&mut self) {
        let parent = self.parent().await;
        let observed = children(self.scenario, &parent.uid().unwrap()).await;
        self.last_desired = plan_for(self.scenario, &parent, &observed)
            .expect("a converged parent plans")
            .objects()
            .cloned()
            .collect();
        self.last_valid_spec = parent.data["spec"].clone();
        self.dirty.clear();
    }

    /// The children still carry every field the plugin set for the last valid spec, under
    /// the same UIDs as `before`.
    async fn children_unchanged(&self, step: &str, edit: &str, before: &BTreeMap<String, String>) {
        let uid = self.parent().await.uid().unwrap();
        let live = children(self.scenario, &uid).await;
        let now = oracle::uids(&live);
        if &now != before {
            self.fail(
                step,
                edit,
                format!("the children changed: before {before:?}, now {now:?}"),
            );
        }
        for desired in &self.last_desired {
            let found = live.iter().find(|c| {
                c["kind"] == desired["kind"] && c["metadata"]["name"] == desired["metadata"]["name"]
            });
            let Some(found) = found else {
                self.fail(
                    step,
                    edit,
                    format!("{} vanished", desired["metadata"]["name"]),
                );
            };
            if let Some((path, live, want)) = first_difference(desired, found, String::new()) {
                self.fail(
                    step,
                    edit,
                    format!(
                        "{} {}: {path} is {live}, the last valid spec set {want}",
                        desired["kind"], desired["metadata"]["name"]
                    ),
                );
            }
        }
    }

    /// Puts `spec` back wholesale (a merge patch cannot remove added map entries).
    async fn replace_spec(&self, spec: &Value) {
        loop {
            let mut parent = self.parent().await;
            parent.data["spec"] = spec.clone();
            match self
                .scenario
                .parents
                .replace(self.name, &PostParams::default(), &parent)
                .await
            {
                Ok(_) => return,
                // The host wrote the status in between.
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => panic!("{}: putting the spec back: {e}", self.label),
            }
        }
    }

    async fn step(&mut self, index: usize, edit: &Edit, tally: &mut Tally) {
        let step = format!("{index}");
        let parent = self.parent().await;
        let generation = parent.metadata.generation;
        let before = oracle::uids(&children(self.scenario, &parent.uid().unwrap()).await);
        let mut expect = edit.expect;
        if let Some(root) = &edit.immutable {
            let spec = &parent.data["spec"];
            if at(spec, root) != at(&edited(spec, edit), root) {
                expect = Expect::Refused;
            }
        }
        let shown = format!("{edit}; expected {expect:?}");
        let patch = json!({"spec": nested(&edit.path, edit.value.clone().unwrap_or(Value::Null))});
        let answer = self
            .scenario
            .parents
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        tally.steps += 1;
        let accepted = match answer {
            Ok(accepted) => accepted,
            Err(kube::Error::Api(status)) if status.code == 422 => {
                if expect == Expect::Accepted {
                    self.fail(
                        &step,
                        &shown,
                        format!(
                            "the API server refused a value the schema allows: {}",
                            status.message
                        ),
                    );
                }
                let now = self.parent().await;
                if now.metadata.generation != generation {
                    self.fail(
                        &step,
                        &shown,
                        format!(
                            "refused, yet the generation moved {generation:?} -> {:?}",
                            now.metadata.generation
                        ),
                    );
                }
                self.children_unchanged(&step, &shown, &before).await;
                tally.refused += 1;
                eprintln!("{} step {step}: {shown}: refused (422)", self.label);
                return;
            }
            Err(error) => self.fail(&step, &shown, format!("the patch failed: {error}")),
        };
        if expect == Expect::Refused {
            self.fail(
                &step,
                &shown,
                format!(
                    "the API server accepted a value the schema forbids: the spec is now {}",
                    accepted.data["spec"]
                ),
            );
        }
        // A per-plugin value's verdict holds for it alone: only on a valid spec does a valid
        // value leave the spec valid.
        let was_valid = self.dirty.is_empty();
        let top = edit.path.first().cloned().unwrap_or_default();
        if !self.dirty.contains(&top) {
            self.dirty.push(top);
        }
        let observed = children(self.scenario, &accepted.uid().unwrap()).await;
        match plan_for(self.scenario, &accepted, &observed) {
            Err(PlanError::InvalidSpec(message)) => {
                if edit.plugin_rejects == Some(false) && was_valid {
                    self.fail(
                        &step,
                        &shown,
                        format!("the plugin rejects a value the test took as valid: {message}"),
                    );
                }
                self.rejected(&step, &shown, &accepted, &before).await;
                tally.invalid += 1;
                eprintln!(
                    "{} step {step}: {shown}: InvalidSpec: {message}",
                    self.label
                );
            }
            Err(error) => self.fail(&step, &shown, format!("the plugin cannot plan: {error}")),
            Ok(_) => {
                if edit.plugin_rejects == Some(true) {
                    self.fail(
                        &step,
                        &shown,
                        "the plugin accepts a value the test expected it to reject".into(),
                    );
                }
                match self.valid(&step, &shown, &accepted).await {
                    Ok(took) => {
                        let after =
                            oracle::uids(&children(self.scenario, &accepted.uid().unwrap()).await);
                        for (child, uid) in &before {
                            if after.get(child).is_some_and(|u| u != uid) {
                                self.fail(
                                    &step,
                                    &shown,
                                    format!("{child} was replaced ({uid} -> {})", after[child]),
                                );
                            }
                        }
                        self.remember_valid().await;
                        tally.valid += 1;
                        eprintln!("{} step {step}: {shown}: converged in {took:?}", self.label);
                    }
                    Err(mut why) => {
                        if let Some((cut, _)) = why.char_indices().nth(400) {
                            why.truncate(cut);
                            why.push('…');
                        }
                        let finding = format!(
                            "{} step {step}: the plugin accepts {edit} but its children cannot \
                             get there: {why}\n  reproduce: a {} with spec {} then the merge \
                             patch {patch}",
                            self.label, self.scenario.plugin.decl.parent.kind, parent.data["spec"],
                        );
                        eprintln!("FINDING: {finding}");
                        tally.findings.push(finding);
                        tally.valid += 1;
                        // Back to the last valid spec, which must converge again.
                        let spec = self.last_valid_spec.clone();
                        self.replace_spec(&spec).await;
                        self.converge(&step, &format!("{shown}, then the last valid spec back"))
                            .await;
                    }
                }
            }
        }
    }

    /// Puts the last valid spec back over a spec the plugin rejects: it converges and the
    /// children keep their UIDs.
    async fn restore(&mut self, index: usize, tally: &mut Tally) {
        let step = format!("{index} (before it)");
        let shown = format!("the last valid spec back over {:?}", self.dirty);
        let before =
            oracle::uids(&children(self.scenario, &self.parent().await.uid().unwrap()).await);
        let spec = self.last_valid_spec.clone();
        self.replace_spec(&spec).await;
        let took = self.converge(&step, &shown).await;
        let after =
            oracle::uids(&children(self.scenario, &self.parent().await.uid().unwrap()).await);
        if after != before {
            self.fail(
                &step,
                &shown,
                format!("the children changed: before {before:?}, after {after:?}"),
            );
        }
        tally.steps += 1;
        tally.valid += 1;
        eprintln!("{} step {step}: {shown}: converged in {took:?}", self.label);
    }

    /// An accepted spec the plugin rejects: `Reconciled=False/InvalidSpec` for the current
    /// generation, naming an edited field, and the children as they were.
    async fn rejected(
        &self,
        step: &str,
        shown: &str,
        accepted: &DynamicObject,
        before: &BTreeMap<String, String>,
    ) {
        let generation = accepted.metadata.generation;
        let started = Instant::now();
        let condition = loop {
            let parent = self.parent().await;
            let condition = reconciled_condition(&parent);
            if condition["status"] == "False"
                && condition["reason"] == "InvalidSpec"
                && condition["observedGeneration"].as_i64() == generation
            {
                break condition;
            }
            if started.elapsed() > BOUND {
                self.fail(
                    step,
                    shown,
                    format!(
                        "no Reconciled=False/InvalidSpec for generation {generation:?} within \
                         {BOUND:?}; the condition is {condition}"
                    ),
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let message = condition["message"].as_str().unwrap_or_default();
        if !self
            .dirty
            .iter()
            .any(|f| message.contains(&format!("spec.{f}")))
        {
            self.fail(
                step,
                shown,
                format!(
                    "the InvalidSpec message names none of the fields edited since the last \
                     valid spec ({:?}): {message:?}",
                    self.dirty
                ),
            );
        }
        self.children_unchanged(step, shown, before).await;
    }

    /// A valid edit: the fixed point within [`BOUND`]; or `Err(why)` when it cannot be
    /// reached for a reason of the plugin's: the host says for this generation that the API
    /// server refuses a child (`ApplyFailed`), or a child keeps lacking an empty list or map
    /// the plugin sets (the API server drops empty values, so that desired state is never
    /// observed) for [`STUCK`].
    async fn valid(
        &self,
        step: &str,
        shown: &str,
        accepted: &DynamicObject,
    ) -> Result<Duration, String> {
        let generation = accepted.metadata.generation;
        let started = Instant::now();
        let mut stuck: Option<(Instant, usize)> = None;
        loop {
            let difference = match self.scenario.oracle().check(self.name).await {
                Ok(()) => return Ok(started.elapsed()),
                Err(difference) => difference,
            };
            let condition = reconciled_condition(&self.parent().await);
            if condition["status"] == "False"
                && condition["observedGeneration"].as_i64() == generation
                && condition["reason"] == "ApplyFailed"
            {
                return Err(format!("Reconciled={condition}"));
            }
            let dropped = matches!(
                &difference,
                oracle::Error::ChildDiffers { live: Value::Null, desired, .. }
                    if desired.as_array().is_some_and(Vec::is_empty)
                        || desired.as_object().is_some_and(|o| o.is_empty())
            );
            if !dropped {
                stuck = None;
            } else if let Some((since, writes)) = stuck {
                if since.elapsed() >= STUCK {
                    let during = self.writes() - writes;
                    return Err(format!(
                        "never converges: {difference}; the host made {during} writes in the \
                         last {STUCK:?}; Reconciled={condition}"
                    ));
                }
            } else {
                stuck = Some((Instant::now(), self.writes()));
            }
            if started.elapsed() > BOUND {
                self.fail(
                    step,
                    shown,
                    format!("did not converge within {BOUND:?}: {difference}"),
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// How many writes the host has made through the proxy so far.
    fn writes(&self) -> usize {
        let writes = Matcher::writes();
        self.scenario
            .proxy
            .requests()
            .iter()
            .filter(|r| writes.matches(&r.method, &r.path, r.watch))
            .count()
    }
}

async fn campaign(subject: Subject) {
    let (sequences, steps) = budget();
    let started = Instant::now();
    let mut tally = Tally::default();
    for sequence in 0..sequences {
        let scenario = Scenario::new(
            BINARY,
            &format!("spec-{}", subject.plugin),
            subject.dir,
            subject.plugin,
            subject.resource.clone(),
        )
        .await;
        (subject.prepare)(&scenario).await;
        let seed = seed(subject.plugin, sequence);
        // proptest only generates here: a seeded ChaCha runner, `new_tree(..).current()`,
        // no shrinking (each step costs seconds on a live cluster; a failure prints the
        // sequence, step and edit, and the seed reproduces it).
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
        );
        let all = candidates(&spec_schema(&scenario.plugin), &subject.extras, &mut runner);
        // Each edit comes with a coin: when the spec is left invalid for the plugin, heads
        // first puts the last valid spec back (a valid edit of its own, checked like one), so
        // a sequence does not spend all its steps behind one invalid field.
        let edits = proptest::collection::vec(
            (
                proptest::sample::select(all.clone()),
                proptest::bool::weighted(0.5),
            ),
            steps,
        )
        .new_tree(&mut runner)
        .expect("a sequence")
        .current();
        let host = scenario.host(None);
        let name = "target";
        // The host installs the CRD; the parent can only be created once it is there.
        let deadline = Instant::now() + BOUND;
        loop {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": subject.resource.api_version,
                "kind": subject.resource.kind,
                "metadata": {"name": name},
                "spec": subject.initial,
            }))
            .unwrap();
            match scenario
                .parents
                .create(&PostParams::default(), &object)
                .await
            {
                Ok(_) => break,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => panic!("creating the parent: {error}\nhost log:\n{}", host.log()),
            }
        }
        let label = format!(
            "{} sequence {sequence} (seed {}, {} candidates)",
            subject.plugin,
            hex::encode(&seed[..16]),
            all.len()
        );
        let mut run = Run {
            scenario: &scenario,
            host,
            name,
            label,
            last_desired: Vec::new(),
            last_valid_spec: Value::Null,
            dirty: Vec::new(),
        };
        run.converge(INITIAL, "the initial spec").await;
        let initial = run.last_valid_spec.clone();
        for (index, (edit, restore)) in edits.iter().enumerate() {
            if *restore && !run.dirty.is_empty() {
                run.restore(index, &mut tally).await;
            }
            run.step(index, edit, &mut tally).await;
        }
        let before = oracle::uids(&children(&scenario, &run.parent().await.uid().unwrap()).await);
        run.replace_spec(&initial).await;
        run.dirty.clear();
        let took = run.converge("revert", "the initial spec back").await;
        let after = oracle::uids(&children(&scenario, &run.parent().await.uid().unwrap()).await);
        for (child, uid) in &before {
            if after.get(child).is_some_and(|u| u != uid) {
                run.fail(
                    "revert",
                    "the initial spec back",
                    format!("{child} was replaced"),
                );
            }
        }
        eprintln!("{}: reverted, converged in {took:?}", run.label);
        scenario
            .assert_quiet(&run.host, &format!("{} revert", run.label))
            .await;
        run.host.kill().await;
        scenario.cleanup().await;
    }
    eprintln!(
        "{}: {sequences} sequences, {} steps ({} refused by the API server, {} rejected by the \
         plugin, {} valid), {} findings, in {:?}",
        subject.plugin,
        tally.steps,
        tally.refused,
        tally.invalid,
        tally.valid,
        tally.findings.len(),
        started.elapsed()
    );
    for finding in &tally.findings {
        eprintln!("FINDING: {finding}");
    }
}

fn nothing(_: &Scenario) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async {})
}

fn root_secret(scenario: &Scenario) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        operator_host_tests::mysql::create_root_secret(&scenario.ns).await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_spec_mutations() {
    campaign(Subject {
        dir: "plugins",
        plugin: "memcached",
        resource: memcached_resource(),
        initial: json!({"size": 2}),
        // `validate` checks the image beyond the schema (no whitespace); size and port it
        // checks like the schema does.
        extras: vec![
            (&["image"], json!("memcached:1.6.38-alpine"), false),
            (&["image"], json!("memcached :1.6"), true),
            (&["image"], json!("\tmemcached"), true),
        ],
        prepare: nothing,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_spec_mutations() {
    campaign(Subject {
        dir: "plugins",
        plugin: "mysql",
        resource: operator_host_tests::mysql::resource(),
        initial: json!({"secretName": "mysql-root"}),
        // What `validate` checks beyond the schema: Secret names, my.cnf's [mysqld] section,
        // label keys and values, and the keys the plugin sets itself.
        extras: vec![
            (&["secretName"], json!("mysql-root"), false),
            (&["secretName"], json!("Mysql_Root"), true),
            (&["mycnf"], json!("[mysqld]\nmax_connections=200\n"), false),
            (&["mycnf"], json!("max_connections=200\n"), true),
            (&["podLabels", "app.kubernetes.io/name"], json!("x"), true),
            (&["podLabels", "tier"], json!("db"), true),
            (&["podLabels", "team"], json!("-x"), true),
            (&["podLabels", "team"], json!("db"), false),
            (
                &["podAnnotations", "mysql.operator-host.dev/config-hash"],
                json!("x"),
                true,
            ),
        ],
        prepare: root_secret,
    })
    .await;
}
