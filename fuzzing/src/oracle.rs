//! The oracle: every promise the host makes about a plan, computed from this crate's own model.
//!
//! [`check`] runs one decoded input through `plan_from_response` and, when that succeeds,
//! through `Policy::check` with each policy of [`policy`]; it panics on the first broken
//! invariant. None of the host's helpers is used to compute what is expected.

mod pod_security;
mod policy;

use std::collections::HashSet;
use std::time::Duration;

use operator_host::plan::{Plan, PlanError, plan_from_response};
use operator_host::runtime::{Child, ReconcileResponse};
use serde_json::{Value, json};

use crate::input::Case;
use crate::scenario::{
    DECLARATION, HOST_ONLY_FIELDS, MANAGED_BY, MANAGED_BY_LABEL, NOW, PARENT_API_VERSION,
    PARENT_KIND, PARENT_UID_LABEL, PLUGIN, PLUGIN_LABEL, RESERVED_PREFIX,
};

/// Runs `case` end to end and checks every invariant; panics on the first one broken.
pub fn check(case: &Case) {
    let decl = &*DECLARATION;
    let response = ReconcileResponse {
        children: case.children.iter().cloned().map(Child::in_place).collect(),
        status: case.status.clone(),
        requeue_after_ms: case.requeue_after_ms,
    };
    let result = plan_from_response(decl, &case.parent, &case.observed, response, NOW);
    let parent_valid = case.parent["apiVersion"] == PARENT_API_VERSION
        && case.parent["kind"] == PARENT_KIND
        && case.parent["metadata"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
    match &result {
        Err(PlanError::InvalidParent(_)) => {
            assert!(!parent_valid, "a valid parent was refused: {result:?}")
        }
        _ => assert!(parent_valid, "an invalid parent was accepted: {result:?}"),
    }
    let Ok(plan) = result else {
        return;
    };
    let namespace = case.parent["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    check_apply(case, &plan, namespace);
    check_prune(case, &plan, namespace);
    check_status(case, &plan);
    assert_eq!(
        plan.requeue_after,
        case.requeue_after_ms.map(Duration::from_millis)
    );
    policy::check_policies(&case.parent, &plan, namespace);
}

/// The parent's UID as the host must use it: a non-empty string, or none.
fn parent_uid(case: &Case) -> Option<&str> {
    case.parent["metadata"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
}

/// A DNS-1123 subdomain, as Kubernetes validates most object names.
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The documented dependency order: config and identities, Services, other kinds,
/// workloads (pruning runs in reverse).
fn dependency_rank(kind: &str) -> u8 {
    match kind {
        "ConfigMap" | "Secret" | "ServiceAccount" | "Role" => 1,
        "Service" => 2,
        // Kinds that run pods, except the older ReplicationController, which the host
        // ranks with the other kinds (the order is only documented for these).
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" | "CronJob" | "Pod" => 4,
        _ => 3,
    }
}

fn check_apply(case: &Case, plan: &Plan, namespace: &str) {
    let uid = parent_uid(case);
    let originals: Vec<Value> = case
        .children
        .iter()
        .map(|text| serde_json::from_str(text).expect("an accepted child is valid JSON"))
        .collect();
    assert_eq!(
        plan.apply.len(),
        originals.len(),
        "every child is applied or the plan fails"
    );
    let mut seen = HashSet::new();
    let mut previous: Option<(u8, usize)> = None;
    for child in plan.objects() {
        let kind = DECLARATION
            .children
            .iter()
            .find(|k| k.matches(child))
            .unwrap_or_else(|| panic!("undeclared kind applied: {child}"));
        assert!(kind.namespaced, "cluster-scoped kind applied: {child}");
        // `Value` indexing (a missing key is null), not `Map` indexing (which panics).
        let metadata = &child["metadata"];
        assert!(
            metadata.is_object(),
            "applied child without metadata: {child}"
        );
        let name = metadata["name"]
            .as_str()
            .unwrap_or_else(|| panic!("applied child without a name: {child}"));
        assert!(is_dns_subdomain(name), "invalid name {name:?} applied");
        assert!(
            seen.insert((kind.kind.clone(), name.to_string())),
            "{kind} {name:?} applied twice"
        );
        assert_eq!(metadata["namespace"], namespace, "{child}");
        assert!(child.get("status").is_none(), "status applied: {child}");
        for field in &HOST_ONLY_FIELDS[1..] {
            assert!(
                metadata.get(*field).is_none_or(Value::is_null),
                "metadata.{field} applied: {child}"
            );
        }
        let labels = &metadata["labels"];
        let label_keys = labels
            .as_object()
            .unwrap_or_else(|| panic!("applied child without labels: {child}"))
            .keys();
        assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY, "{child}");
        assert_eq!(labels[PLUGIN_LABEL], PLUGIN, "{child}");
        match uid {
            Some(uid) => {
                assert_eq!(
                    metadata["ownerReferences"],
                    json!([{
                        "apiVersion": PARENT_API_VERSION,
                        "kind": PARENT_KIND,
                        "name": case.parent["metadata"]["name"],
                        "uid": uid,
                        "controller": true,
                        "blockOwnerDeletion": true,
                    }]),
                    "{child}"
                );
                assert_eq!(labels[PARENT_UID_LABEL], uid, "{child}");
            }
            None => {
                assert!(
                    metadata.get("ownerReferences").is_none_or(Value::is_null),
                    "owner reference without a parent UID: {child}"
                );
                assert!(labels.get(PARENT_UID_LABEL).is_none(), "{child}");
            }
        }
        for key in label_keys {
            assert!(
                !key.starts_with(RESERVED_PREFIX) || key == PLUGIN_LABEL || key == PARENT_UID_LABEL,
                "reserved label {key:?} applied: {child}"
            );
        }
        if let Some(annotations) = metadata.get("annotations").and_then(Value::as_object) {
            for key in annotations.keys() {
                assert!(
                    !key.starts_with(RESERVED_PREFIX) && key != MANAGED_BY_LABEL,
                    "reserved annotation {key:?} applied: {child}"
                );
            }
        }

        // Apart from the host's metadata, the child is exactly what the plugin returned.
        let index = originals
            .iter()
            .position(|o| o["kind"] == child["kind"] && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("applied child the plugin did not return: {child}"));
        let original = &originals[index];
        let host_fields = ["namespace", "labels", "ownerReferences"];
        for (key, value) in original.as_object().into_iter().flatten() {
            if key != "status" && key != "metadata" {
                assert_eq!(&child[key], value, "field {key} changed");
            }
        }
        for (key, value) in original["metadata"].as_object().into_iter().flatten() {
            if !host_fields.contains(&key.as_str()) {
                assert_eq!(&metadata[key], value, "metadata.{key} changed");
            }
        }
        for (key, value) in original["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
        {
            assert_eq!(&labels[key], value, "label {key} changed");
        }
        for key in child.as_object().into_iter().flatten().map(|(k, _)| k) {
            assert!(original.get(key).is_some(), "field {key} added");
        }
        for key in metadata.as_object().into_iter().flatten().map(|(k, _)| k) {
            assert!(
                original["metadata"].get(key).is_some() || host_fields.contains(&key.as_str()),
                "metadata.{key} added"
            );
        }

        // Dependency order; the plugin's order among equals (a stable sort).
        let position = (dependency_rank(&kind.kind), index);
        if let Some(before) = previous {
            assert!(
                before < position,
                "apply order {before:?} then {position:?}"
            );
        }
        previous = Some(position);
    }
}

/// Whether `object` is provably this parent's child: labels and a controller reference.
fn owned(object: &Value, uid: &str, namespace: &str) -> bool {
    let metadata = &object["metadata"];
    let labels = &metadata["labels"];
    labels[MANAGED_BY_LABEL] == MANAGED_BY
        && labels[PLUGIN_LABEL] == PLUGIN
        && labels[PARENT_UID_LABEL] == uid
        && metadata["ownerReferences"].as_array().is_some_and(|refs| {
            refs.iter()
                .any(|r| r["uid"] == uid && r["controller"] == true)
        })
        && metadata["namespace"] == namespace
}

fn check_prune(case: &Case, plan: &Plan, namespace: &str) {
    let Some(uid) = parent_uid(case) else {
        assert!(
            plan.prune.is_empty(),
            "prune without a parent UID: {plan:?}"
        );
        return;
    };
    let desired: HashSet<(&str, &str)> = plan
        .objects()
        .filter_map(|c| Some((c["kind"].as_str()?, c["metadata"]["name"].as_str()?)))
        .collect();
    let mut previous_rank = u8::MAX;
    for target in &plan.prune {
        assert!(
            !desired.contains(&(target.kind.kind.as_str(), target.name.as_str())),
            "desired child pruned: {target:?}"
        );
        assert_eq!(target.namespace, namespace);
        assert!(
            DECLARATION.children.contains(&target.kind),
            "undeclared kind pruned: {target:?}"
        );
        let observed = case.observed.iter().any(|o| {
            target.kind.matches(o)
                && o["metadata"]["name"] == target.name.as_str()
                && o["metadata"]["uid"] == target.uid.as_str()
                && owned(o, uid, namespace)
        });
        assert!(
            observed,
            "pruned an object not observed as owned: {target:?}"
        );
        let rank = dependency_rank(&target.kind.kind);
        assert!(rank <= previous_rank, "prune order: {:?}", plan.prune);
        previous_rank = rank;
    }
    // Completeness: every owned, undesired, deletable (name and UID) object is pruned.
    let expected = case
        .observed
        .iter()
        .filter(|o| DECLARATION.children.iter().any(|k| k.matches(o)))
        .filter(|o| owned(o, uid, namespace))
        .filter_map(|o| Some((o["kind"].as_str()?, o["metadata"]["name"].as_str()?, o)))
        .filter(|(kind, name, o)| {
            !desired.contains(&(kind, name)) && o["metadata"]["uid"].is_string()
        })
        .count();
    assert_eq!(
        plan.prune.len(),
        expected,
        "owned, undesired objects left: {plan:?}"
    );
}

/// `lastTransitionTime` as the host must stamp a condition without one: the previous time
/// while the status is unchanged, `now` otherwise. `None`: ambiguous (several of a type).
fn expected_transition(previous: &Value, condition: &Value) -> Option<String> {
    let same_type: Vec<&Value> = previous["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == condition["type"])
        .collect();
    match same_type.as_slice() {
        [] => Some(NOW.into()),
        [earlier] if earlier["status"] == condition["status"] => Some(
            earlier["lastTransitionTime"]
                .as_str()
                .unwrap_or(NOW)
                .to_string(),
        ),
        [_] => Some(NOW.into()),
        _ => None,
    }
}

fn check_status(case: &Case, plan: &Plan) {
    let given: Value = serde_json::from_str(&case.status).expect("an accepted status is JSON");
    let given = given.as_object().expect("an accepted status is an object");
    let status = &plan.status;
    assert!(status.is_object(), "the status is not an object: {status}");
    let previous = case.parent.get("status").unwrap_or(&Value::Null);
    let generation = case.parent["metadata"]["generation"].as_i64();
    for (key, value) in given {
        if key != "conditions" && key != "observedGeneration" {
            assert_eq!(&status[key], value, "status.{key} changed");
        }
    }
    match generation {
        Some(g) => assert_eq!(status["observedGeneration"], g),
        None => assert_eq!(
            status.get("observedGeneration"),
            given.get("observedGeneration")
        ),
    }
    let conditions = status["conditions"]
        .as_array()
        .expect("status.conditions is a list");
    let (host, kept) = conditions
        .split_last()
        .expect("the host's condition is last");
    assert_eq!(host["type"], "Reconciled");
    assert_eq!(host["status"], "True");
    assert_eq!(host["reason"], "ReconcileSucceeded");
    assert_eq!(
        host.get("observedGeneration"),
        generation.map(Value::from).as_ref()
    );
    if let Some(time) = expected_transition(previous, host) {
        assert_eq!(host["lastTransitionTime"], time.as_str(), "{status:?}");
    }
    // The plugin's conditions, minus any `Reconciled` it tried to set, in its order.
    let plugin: Vec<&Value> = given
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "Reconciled")
        .collect();
    assert_eq!(
        kept.len(),
        plugin.len(),
        "conditions lost or added: {status:?}"
    );
    for (after, before) in kept.iter().zip(plugin) {
        // The host refuses conditions that are not objects (status.conditions[i]).
        let before_fields = before.as_object().expect("accepted conditions are objects");
        for (key, value) in before_fields {
            if key != "lastTransitionTime" || value.is_string() {
                assert_eq!(&after[key], value, "condition field {key} changed");
            }
        }
        assert!(after["lastTransitionTime"].is_string(), "{after}");
        if !before["lastTransitionTime"].is_string()
            && let Some(time) = expected_transition(previous, before)
        {
            assert_eq!(after["lastTransitionTime"], time.as_str(), "{after}");
        }
    }
}
