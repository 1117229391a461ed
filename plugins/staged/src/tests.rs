//! The plugin's answers through the host's checks: options, stages and their order.

use operator_host::runtime::{DeletePolicy, UpdateStrategy};
use operator_host::testing;
use serde_json::json;

use super::*;

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
    let plan = testing::reconcile::<StagedOperator>(
        &staged(json!({"steps": ["a", "b"], "seed": "one"})),
        &[],
        None,
    )
    .unwrap();
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
    let plan = testing::reconcile::<StagedOperator>(&staged(json!({"keep": false})), &[kept], None)
        .unwrap();
    assert_eq!(plan.prune.len(), 1);
    assert_eq!(plan.prune[0].name, "s-kept");
    assert_eq!(plan.prune[0].policy, DeletePolicy::Orphan);
}

#[test]
fn a_step_that_is_not_a_label_is_an_invalid_spec() {
    let err = testing::reconcile::<StagedOperator>(&staged(json!({"steps": ["Bad"]})), &[], None)
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
    let plan = testing::reconcile::<StagedOperator>(
        &staged(json!({"steps": ["a", "b"]})),
        &[job("a", true), job("b", false)],
        None,
    )
    .unwrap();
    assert_eq!(plan.status["completedSteps"], 1);
}
