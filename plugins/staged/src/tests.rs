//! The plugin's answers through the host's checks: options, stages and their order.

use operator_host_testing::{self as testing, DeletePolicy, Plan, Policy, UpdateStrategy};
use serde_json::{Value, json};

use super::*;

/// The plugin reads a Secret: the policy must allow Secrets (their hashes need no more).
fn policy() -> Policy {
    Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  allowSecrets: true\n",
        std::path::Path::new("policy.yaml"),
    )
    .unwrap()
}

fn plan(parent: &Staged, observed: &[Value], others: &[Value]) -> Plan {
    testing::reconcile_with::<StagedOperator>(parent, observed, others, Some(&policy())).unwrap()
}

fn staged(spec: serde_json::Value) -> Staged {
    serde_json::from_value(json!({
        "apiVersion": "staged.operator-host.dev/v1alpha1",
        "kind": "Staged",
        "metadata": {"name": "s", "namespace": "ns", "uid": "u-1"},
        "spec": spec,
    }))
    .unwrap()
}

#[test]
fn each_step_is_a_stage_of_its_own_and_the_done_map_comes_last() {
    let plan = plan(
        &staged(json!({"steps": ["a", "b"], "seed": "one"})),
        &[],
        &[],
    );
    let order: Vec<(usize, String)> = plan
        .apply
        .iter()
        .map(|c| {
            (
                c.stage,
                c.object["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            (0, "s-seed".to_string()),
            (0, "s-kept".to_string()),
            (0, "s-step-a".to_string()),
            (1, "s-step-b".to_string()),
            (2, "s-done".to_string()),
        ]
    );
    let job_a = &plan.apply[2];
    assert_eq!(job_a.update, UpdateStrategy::Recreate);
    assert_eq!(
        job_a.handling().as_deref(),
        Some("stage 0: update=recreate ready-when=condition Complete")
    );
    assert_eq!(plan.apply[0].update, UpdateStrategy::CreateOnly);
    // The kept map carries the delete policy in its own metadata, for the prune that comes
    // after the plugin stopped returning it.
    assert_eq!(
        plan.apply[1].object["metadata"]["annotations"]["operator-host.dev/on-prune"],
        "orphan"
    );
    assert!(plan.apply[4].barrier.is_none());
}

#[test]
fn an_orphan_child_that_is_no_longer_returned_is_released_not_deleted() {
    let kept = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "s-kept", "namespace": "ns", "uid": "c-1",
            "labels": {"app.kubernetes.io/managed-by": "operator-host",
                       "operator-host.dev/plugin": "staged",
                       "operator-host.dev/parent-uid": "u-1"},
            "annotations": {"operator-host.dev/on-prune": "orphan"},
            "ownerReferences": [{"apiVersion": "staged.operator-host.dev/v1alpha1",
                                 "kind": "Staged", "name": "s", "uid": "u-1", "controller": true}]
        }
    });
    let plan = plan(&staged(json!({"keep": false})), &[kept], &[]);
    assert_eq!(plan.prune.len(), 1);
    assert_eq!(plan.prune[0].name, "s-kept");
    assert_eq!(plan.prune[0].policy, DeletePolicy::Orphan);
}

#[test]
fn a_step_that_is_not_a_label_is_an_invalid_spec() {
    let err = testing::reconcile_with::<StagedOperator>(
        &staged(json!({"steps": ["Bad"]})),
        &[],
        &[],
        Some(&policy()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("spec.steps"), "{err}");
}

#[test]
fn completed_steps_are_counted_from_the_observed_jobs() {
    let job = |step: &str, complete: bool| {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": step_job("s", step), "namespace": "ns"},
            "status": {"conditions": [{"type": "Complete", "status": if complete {"True"} else {"False"}}]}
        })
    };
    let plan = plan(
        &staged(json!({"steps": ["a", "b"]})),
        &[job("a", true), job("b", false)],
        &[],
    );
    assert_eq!(plan.status["completedSteps"], 1);
}

#[test]
fn related_objects_reach_the_plugin_as_declared() {
    let config = |name: &str, labels: Value, data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns", "labels": labels}, "data": data})
    };
    let others = [
        config("settings", json!({}), json!({"mode": "fast"})),
        config("unrelated", json!({}), json!({"mode": "slow"})),
        config(
            "extra-b",
            json!({"staged.operator-host.dev/extra": "true"}),
            json!({}),
        ),
        config(
            "extra-a",
            json!({"staged.operator-host.dev/extra": "true"}),
            json!({}),
        ),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "creds", "namespace": "ns"},
               "data": {"password": "aHVudGVyMg=="}}),
    ];
    let plan = plan(
        &staged(json!({"configName": "settings", "secretName": "creds"})),
        &[],
        &others,
    );
    assert_eq!(plan.status["config"], json!({"mode": "fast"}));
    assert_eq!(plan.status["extras"], json!(["extra-a", "extra-b"]));
    // The Secret's value arrives as its hash: sha256("hunter2").
    assert_eq!(
        plan.status["secret"]["password"],
        "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7"
    );
    assert!(!plan.status.to_string().contains("hunter2"));
}
