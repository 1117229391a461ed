//! Unit tests of the plan: validation, ownership, ordering and status merging.

use super::*;
use crate::contract::{Child, DeletePolicy};
use crate::declaration::Declaration;
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
        children: children
            .iter()
            .map(|c| Child::in_place(c.to_string()))
            .collect(),
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
    let meta = &plan.apply[0].object["metadata"];
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
        .map(|c| c.object["kind"].as_str().unwrap())
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
        children: vec![Child::in_place("{not json".into())],
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
    assert!(
        plan.apply[0].object["metadata"]
            .get("ownerReferences")
            .is_none()
    );
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

/// A parent of generation 4 whose plugin last answered for generation 3, `Available`.
fn parent_answered_for_generation_3() -> Value {
    let mut parent = parent();
    parent["status"] = json!({
        "observedGeneration": 3,
        "readyReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "1 of 1 ready", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Reconciled", "status": "True", "reason": "ReconcileSucceeded",
             "observedGeneration": 3, "lastTransitionTime": "2025-01-01T00:00:00Z"},
        ],
    });
    parent
}

#[test]
fn a_refused_spec_makes_the_conditions_of_the_previous_one_unknown() {
    let parent = parent_answered_for_generation_3();
    let status = failure_status(&parent, "InvalidSpec", "spec.image: empty", "now");
    let conditions = status["conditions"].as_array().unwrap();
    let available = conditions
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap();
    assert_eq!(available["status"], "Unknown", "{available}");
    assert_eq!(available["reason"], "InvalidSpec");
    assert_eq!(available["observedGeneration"], 4);
    assert_eq!(available["lastTransitionTime"], "now");
    assert!(
        available["message"]
            .as_str()
            .unwrap()
            .contains("last computed this condition for generation 3"),
        "{available}"
    );
    let reconciled = conditions.iter().find(|c| c["type"] == RECONCILED).unwrap();
    assert_eq!(reconciled["status"], "False");
    // What the plugin observed stays, under the generation it was observed for.
    assert_eq!(status["readyReplicas"], 1);
    assert_eq!(status["observedGeneration"], 3);
}

#[test]
fn a_retried_failure_leaves_the_marked_conditions_as_they_are() {
    let mut parent = parent_answered_for_generation_3();
    let first = failure_status(&parent, "InvalidSpec", "spec.image: empty", "t1");
    parent["status"] = first.clone();
    let again = failure_status(&parent, "PluginTimeout", "deadline", "t2");
    let available = |status: &Value| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Available")
            .cloned()
            .unwrap()
    };
    assert_eq!(available(&again), available(&first));
}

#[test]
fn a_failure_of_the_generation_the_plugin_answered_for_keeps_its_conditions() {
    let mut parent = parent_answered_for_generation_3();
    parent["metadata"]["generation"] = json!(3);
    let status = failure_status(&parent, "ApplyFailed", "the API server refused", "now");
    let available = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .cloned()
        .unwrap();
    assert_eq!(available["status"], "True");
    assert_eq!(available["reason"], "MinimumReplicasAvailable");
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

#[test]
fn differing_fields_name_the_paths_an_apply_would_change_and_agree_with_holds() {
    let cached = json!({
        "metadata": {"name": "mc", "labels": {"a": "1"}},
        "data": {"version": "41", "same": "x"},
        "spec": {"ports": [{"port": 11211}]},
    });
    let desired = json!({
        "metadata": {"labels": {"a": "1"}},
        "data": {"version": "42", "same": "x"},
        "spec": {"ports": [{"port": 11212}]},
    });
    assert_eq!(
        differing_fields(&cached, &desired),
        ["data.version", "spec.ports[0].port"]
    );
    assert!(differing_fields(&cached, &json!({"data": {"same": "x"}})).is_empty());
    assert_eq!(
        holds(&cached, &desired),
        differing_fields(&cached, &desired).is_empty()
    );
}

/// Children with contract 0.2.0's options, planned for `parent()`.
fn plan_with(children: Vec<Child>, observed: &[Value]) -> Result<Plan, PlanError> {
    let response = ReconcileResponse {
        children,
        status: "{}".into(),
        requeue_after_ms: None,
    };
    plan_from_response(&declaration(), &parent(), observed, response, "t")
}

fn with(object: Value, update: UpdateStrategy, ready_when: Option<Readiness>) -> Child {
    Child {
        update,
        ready_when,
        ..Child::in_place(object.to_string())
    }
}

fn complete() -> Option<Readiness> {
    Some(Readiness::Condition("Available".into()))
}

#[test]
fn barriers_split_the_children_into_stages_each_ordered_by_kind() {
    let config =
        |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let plan = plan_with(
        vec![
            with(deployment("first"), UpdateStrategy::InPlace, None),
            with(config("c1"), UpdateStrategy::InPlace, complete()),
            with(deployment("second"), UpdateStrategy::Recreate, None),
            with(service("s"), UpdateStrategy::CreateOnly, None),
        ],
        &[],
    )
    .unwrap();
    let planned: Vec<(usize, &str, bool)> = plan
        .apply
        .iter()
        .map(|c| {
            (
                c.stage,
                c.object["metadata"]["name"].as_str().unwrap(),
                c.barrier.is_some(),
            )
        })
        .collect();
    // Within a stage the kind order holds (the ConfigMap first); across stages the list's.
    assert_eq!(
        planned,
        [
            (0, "c1", true),
            (0, "first", false),
            (1, "s", false),
            (1, "second", false)
        ]
    );
    assert_eq!(plan.apply[3].update, UpdateStrategy::Recreate);
    assert_eq!(plan.apply[2].update, UpdateStrategy::CreateOnly);
    assert_eq!(
        plan.apply[0].handling().as_deref(),
        Some("stage 0: ready-when=condition Available")
    );
    assert_eq!(plan.apply[1].handling(), None);
    assert_eq!(
        plan.apply[2].handling().as_deref(),
        Some("stage 1: update=create-only")
    );
    assert_eq!(
        plan.apply[3].handling().as_deref(),
        Some("stage 1: update=recreate")
    );
}

#[test]
fn a_barrier_the_host_cannot_judge_is_invalid_output() {
    for (readiness, expected) in [
        (Readiness::Condition(String::new()), "empty condition type"),
        (
            Readiness::FieldEquals(FieldValue {
                path: "status..ready".into(),
                value: "1".into(),
            }),
            "dotted path",
        ),
        (
            Readiness::FieldEquals(FieldValue {
                path: "status.phase".into(),
                value: "Running".into(),
            }),
            "is not JSON",
        ),
    ] {
        let err = plan_with(
            vec![with(
                deployment("d"),
                UpdateStrategy::InPlace,
                Some(readiness),
            )],
            &[],
        )
        .unwrap_err();
        assert_eq!(err.reason(), "InvalidPluginOutput");
        assert!(err.to_string().contains("child #0: ready-when"), "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn an_orphan_child_carries_its_policy_to_the_prune_that_comes_later() {
    let orphan = Child {
        on_prune: DeletePolicy::Orphan,
        ..Child::in_place(deployment("kept").to_string())
    };
    let plan = plan_with(vec![orphan], &[]).unwrap();
    let annotations = &plan.apply[0].object["metadata"]["annotations"];
    assert_eq!(annotations[ON_PRUNE_ANNOTATION], "orphan");

    // No longer returned: the observed copy's annotation says orphan, another's says nothing.
    let mut kept = owned(deployment("kept"), "c-1");
    kept["metadata"]["annotations"] = json!({ON_PRUNE_ANNOTATION: "orphan"});
    let gone = owned(deployment("gone"), "c-2");
    let plan = plan_with(vec![], &[kept, gone]).unwrap();
    let policies: Vec<(&str, DeletePolicy)> = plan
        .prune
        .iter()
        .map(|t| (t.name.as_str(), t.policy))
        .collect();
    assert_eq!(
        policies,
        [
            ("kept", DeletePolicy::Orphan),
            ("gone", DeletePolicy::Delete)
        ]
    );
}

#[test]
fn a_child_is_ready_once_its_controller_saw_this_generation_and_the_test_holds() {
    let job = |generation: i64, seen: i64, complete: &str| {
        json!({"kind": "Job", "metadata": {"name": "j", "generation": generation},
               "status": {"observedGeneration": seen,
                          "conditions": [{"type": "Complete", "status": complete}],
                          "readyReplicas": 3}})
    };
    let complete = Readiness::Condition("Complete".into());
    assert!(is_ready(&job(2, 2, "True"), &complete));
    assert!(!is_ready(&job(2, 2, "False"), &complete));
    assert!(
        !is_ready(&job(3, 2, "True"), &complete),
        "a newer spec is not seen yet"
    );
    let mut deleting = job(2, 2, "True");
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    assert!(!is_ready(&deleting, &complete));
    let three = Readiness::FieldEquals(FieldValue {
        path: "status.readyReplicas".into(),
        value: "3".into(),
    });
    assert!(is_ready(&job(1, 1, "False"), &three));
    let four = Readiness::FieldEquals(FieldValue {
        path: "status.readyReplicas".into(),
        value: "4".into(),
    });
    assert!(!is_ready(&job(1, 1, "False"), &four));
    assert_eq!(
        describe_wait(&job(1, 1, "False"), &complete),
        "Job \"j\" to have the condition Complete=True"
    );
}

#[test]
fn a_held_plan_says_what_it_waits_for_in_the_reconciled_condition() {
    let plan = plan_of(vec![deployment("d")], &[]).unwrap();
    let status = waiting_status(&parent(), plan.status, "waiting for Job \"j\"", "t2");
    let condition = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == RECONCILED)
        .unwrap();
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], WAITING_FOR_READINESS);
    assert_eq!(condition["message"], "waiting for Job \"j\"");
    assert_eq!(status["observedGeneration"], 4);
}
