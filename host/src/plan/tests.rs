//! Unit tests of the plan: validation, ownership, ordering and status merging.

use super::*;
use crate::plugin::Declaration;
use crate::test_support::{kind, memcached_declaration};
use serde_json::json;

fn declaration() -> Declaration {
    memcached_declaration(vec![
        kind("apps", "v1", "Deployment", "deployments"),
        kind("", "v1", "Service", "services"),
        kind("", "v1", "ConfigMap", "configmaps"),
    ])
}

fn parent() -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": "ns", "uid": "uid-1", "generation": 4},
        "spec": {"size": 1},
    })
}

fn response(children: Vec<Value>, status: Value) -> ReconcileResponse {
    ReconcileResponse {
        children: children.iter().map(Value::to_string).collect(),
        status: status.to_string(),
        requeue_after_ms: None,
    }
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {}})
}

fn owned(child: Value, uid: &str) -> Value {
    let mut child = child;
    child["metadata"]["namespace"] = "ns".into();
    child["metadata"]["uid"] = uid.into();
    child["metadata"]["labels"] = json!({
        MANAGED_BY_LABEL: MANAGED_BY, PLUGIN_LABEL: "memcached", PARENT_UID_LABEL: "uid-1"
    });
    child["metadata"]["ownerReferences"] = json!([{"uid": "uid-1", "controller": true}]);
    child
}

fn plan_of(children: Vec<Value>, observed: &[Value]) -> Result<Plan, PlanError> {
    plan_from_response(
        &declaration(),
        &parent(),
        observed,
        response(children, json!({})),
        "2026-01-01T00:00:00Z",
    )
}

#[test]
fn children_get_namespace_owner_reference_and_labels() {
    let plan = plan_of(vec![deployment("mc")], &[]).unwrap();
    let meta = &plan.apply[0]["metadata"];
    assert_eq!(meta["namespace"], "ns");
    assert_eq!(meta["labels"][MANAGED_BY_LABEL], MANAGED_BY);
    assert_eq!(meta["labels"][PLUGIN_LABEL], "memcached");
    assert_eq!(meta["labels"][PARENT_UID_LABEL], "uid-1");
    let owner = &meta["ownerReferences"][0];
    assert_eq!(owner["uid"], "uid-1");
    assert_eq!(owner["controller"], true);
    assert_eq!(owner["blockOwnerDeletion"], true);
    assert_eq!(owner["kind"], "Memcached");
}

#[test]
fn apply_order_puts_config_and_services_before_workloads() {
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let plan = plan_of(vec![deployment("d"), service("s"), config], &[]).unwrap();
    let kinds: Vec<_> = plan
        .apply
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ConfigMap", "Service", "Deployment"]);
}

#[test]
fn undeclared_kinds_are_a_policy_violation() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let err = plan_of(vec![secret], &[]).unwrap_err();
    assert_eq!(err.reason(), "PolicyViolation");
    assert!(err.to_string().contains("v1/Secret"), "{err}");
}

#[test]
fn children_in_another_namespace_are_a_policy_violation() {
    let mut child = deployment("d");
    child["metadata"]["namespace"] = "kube-system".into();
    let err = plan_of(vec![child], &[]).unwrap_err();
    assert!(matches!(err, PlanError::PolicyViolation(m) if m.contains("kube-system")));
}

#[test]
fn forged_ownership_is_a_policy_violation() {
    let mut forged_owner = deployment("d");
    forged_owner["metadata"]["ownerReferences"] = json!([{"uid": "x"}]);
    assert_eq!(
        plan_of(vec![forged_owner], &[]).unwrap_err().reason(),
        "PolicyViolation"
    );
    let mut forged_label = deployment("d");
    forged_label["metadata"]["labels"] = json!({PARENT_UID_LABEL: "other"});
    assert_eq!(
        plan_of(vec![forged_label], &[]).unwrap_err().reason(),
        "PolicyViolation"
    );
    let mut finalizer = deployment("d");
    finalizer["metadata"]["finalizers"] = json!(["x"]);
    assert_eq!(
        plan_of(vec![finalizer], &[]).unwrap_err().reason(),
        "PolicyViolation"
    );
}

#[test]
fn malformed_children_are_invalid_output() {
    let bad = ReconcileResponse {
        children: vec!["{not json".into()],
        status: "{}".into(),
        requeue_after_ms: None,
    };
    let err = plan_from_response(&declaration(), &parent(), &[], bad, "t").unwrap_err();
    assert_eq!(err.reason(), "InvalidPluginOutput");
    let err = plan_of(vec![deployment("Not_Valid")], &[]).unwrap_err();
    assert!(err.to_string().contains("metadata.name"), "{err}");
    let err = plan_of(vec![deployment("a"), deployment("a")], &[]).unwrap_err();
    assert!(err.to_string().contains("second"), "{err}");
}

#[test]
fn too_many_children_are_invalid_output() {
    let children = (0..=DEFAULT_MAX_CHILDREN)
        .map(|i| service(&format!("s{i}")))
        .collect();
    assert_eq!(
        plan_of(children, &[]).unwrap_err().reason(),
        "InvalidPluginOutput"
    );
}

#[test]
fn only_owned_children_that_are_no_longer_desired_are_pruned() {
    let observed = [
        owned(deployment("mc"), "d-uid"),
        owned(service("old"), "s-uid"),
        // Same labels but no controller reference: not proven owned.
        {
            let mut v = owned(service("adopted"), "a-uid");
            v["metadata"]["ownerReferences"] = json!([]);
            v
        },
        // Owned by another parent.
        {
            let mut v = owned(service("other"), "o-uid");
            v["metadata"]["ownerReferences"] = json!([{"uid": "uid-2", "controller": true}]);
            v
        },
    ];
    let plan = plan_of(vec![deployment("mc")], &observed).unwrap();
    let pruned: Vec<_> = plan
        .prune
        .iter()
        .map(|t| (t.name.as_str(), t.uid.as_str()))
        .collect();
    assert_eq!(pruned, [("old", "s-uid")]);
}

#[test]
fn without_a_parent_uid_nothing_is_owned_or_pruned() {
    let mut parent = parent();
    parent["metadata"].as_object_mut().unwrap().remove("uid");
    let plan = plan_from_response(
        &declaration(),
        &parent,
        &[owned(service("old"), "s")],
        response(vec![deployment("mc")], json!({})),
        "t",
    )
    .unwrap();
    assert!(plan.prune.is_empty());
    assert!(plan.apply[0]["metadata"].get("ownerReferences").is_none());
}

#[test]
fn status_gets_observed_generation_and_reconciled_condition() {
    let status =
        json!({"readyReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]});
    let plan = plan_from_response(
        &declaration(),
        &parent(),
        &[],
        response(vec![], status),
        "2026-01-01T00:00:00Z",
    )
    .unwrap();
    assert_eq!(plan.status["observedGeneration"], 4);
    let conditions = plan.status["conditions"].as_array().unwrap();
    assert_eq!(conditions[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    let reconciled = conditions.iter().find(|c| c["type"] == RECONCILED).unwrap();
    assert_eq!(reconciled["status"], "True");
    assert!(
        reconciled["message"]
            .as_str()
            .unwrap()
            .contains("memcached@0.1.0")
    );
}

#[test]
fn conditions_that_are_not_objects_are_invalid_output() {
    // Found by the fuzz target (fuzz/seeds/plan_output/regression-status-condition-not-object):
    // these used to panic while the transition time was stamped.
    for (conditions, found) in [
        (json!([1]), "1"),
        (json!(["Available"]), "\"Available\""),
        (json!([{"type": "Available"}, null]), "null"),
    ] {
        let error = plan_from_response(
            &declaration(),
            &parent(),
            &[],
            response(vec![], json!({"conditions": conditions})),
            "2026-01-01T00:00:00Z",
        )
        .unwrap_err();
        let PlanError::InvalidPluginOutput(message) = &error else {
            panic!("{error:?}");
        };
        assert!(
            message.contains("status.conditions[") && message.ends_with(found),
            "{message}"
        );
    }
}

#[test]
fn transition_times_are_kept_while_status_is_unchanged() {
    let mut parent = parent();
    parent["status"] = json!({"conditions": [
        {"type": "Available", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
        {"type": RECONCILED, "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
    ]});
    let status = json!({"conditions": [{"type": "Available", "status": "True"}]});
    let plan = plan_from_response(
        &declaration(),
        &parent,
        &[],
        response(vec![], status),
        "2026-01-01T00:00:00Z",
    )
    .unwrap();
    let conditions = plan.status["conditions"].as_array().unwrap();
    assert_eq!(conditions[0]["lastTransitionTime"], "2025-01-01T00:00:00Z");
    assert_eq!(conditions[1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
}

#[test]
fn failure_status_keeps_the_previous_status() {
    let mut parent = parent();
    parent["status"] = json!({"readyReplicas": 3, "observedGeneration": 3});
    let error = PlanError::InvalidSpec("spec.size: too big".into());
    let status = failure_status(&parent, error.reason(), &error.to_string(), "t");
    assert_eq!(status["readyReplicas"], 3);
    assert_eq!(status["observedGeneration"], 3);
    assert_eq!(status["conditions"][0]["reason"], "InvalidSpec");
    assert_eq!(status["conditions"][0]["status"], "False");
}

#[test]
fn a_parent_of_another_kind_is_rejected() {
    let mut other = parent();
    other["kind"] = "Other".into();
    let err = plan_from_response(
        &declaration(),
        &other,
        &[],
        response(vec![], json!({})),
        "t",
    )
    .unwrap_err();
    assert_eq!(err.reason(), "InvalidParent");
}

#[test]
fn holds_agrees_with_the_projection_it_stands_for() {
    let cached = json!({
        "metadata": {"name": "mc", "labels": {"a": "1", "b": "2"}, "uid": "u"},
        "spec": {"replicas": 3, "ports": [{"port": 11211, "protocol": "TCP"}], "paused": null},
    });
    let cases = [
        (json!({"metadata": {"labels": {"a": "1"}}}), true),
        (json!({"spec": {"ports": [{"port": 11211}]}}), true),
        (json!({"spec": {"paused": null, "absent": null}}), true),
        (json!({"spec": {"replicas": 4}}), false),
        (json!({"metadata": {"labels": {"c": "3"}}}), false),
        (
            json!({"spec": {"ports": [{"port": 11211}, {"port": 1}]}}),
            false,
        ),
        (json!({"spec": {"ports": []}}), false),
        (json!({"spec": {"absent": {"deep": 1}}}), false),
        (json!({"spec": {"replicas": {"nested": 3}}}), false),
    ];
    for (desired, expected) in cases {
        assert_eq!(holds(&cached, &desired), expected, "{desired}");
        assert_eq!(project(&desired, &cached) == desired, expected, "{desired}");
    }
}
