//! Native unit tests of the Redis reconcile logic, through the host's own checks.

use super::*;
use operator_host_testing as testing;

fn redis(replicas: i32) -> Redis {
    let mut cr = Redis::new(
        "cache",
        RedisSpec {
            replicas,
            image: default_image(),
            storage: default_storage(),
            max_memory: default_max_memory(),
        },
    );
    cr.metadata.namespace = Some("default".into());
    cr.metadata.generation = Some(1);
    cr
}

#[test]
fn five_children_that_the_host_accepts_and_a_pending_status() {
    let plan = testing::reconcile::<RedisOperator>(&redis(3), &[], None).unwrap();
    let mut kinds: Vec<_> = plan
        .objects()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "PodDisruptionBudget",
            "Service",
            "Service",
            "StatefulSet"
        ]
    );
    assert_eq!(plan.status["phase"], "Pending");
}

#[test]
fn a_config_change_changes_the_pod_template() {
    let hash = |max_memory: &str| {
        let mut cr = redis(1);
        cr.spec.max_memory = max_memory.into();
        let desired = RedisOperator::reconcile(&cr, &Observed::default()).unwrap();
        let sts = desired.get::<StatefulSet>("cache").unwrap().unwrap();
        sts.spec
            .unwrap()
            .template
            .metadata
            .unwrap()
            .annotations
            .unwrap()[CONTENT_HASH_ANNOTATION]
            .clone()
    };
    assert_ne!(hash("256mb"), hash("512mb"));
}

#[test]
fn ready_once_the_statefulset_carries_the_spec_and_every_server_is_ready() {
    let cr = redis(2);
    let desired = RedisOperator::reconcile(&cr, &Observed::default()).unwrap();
    let mut sts = desired
        .children
        .iter()
        .find(|c| c["kind"] == "StatefulSet")
        .unwrap()
        .clone();
    sts["metadata"]["generation"] = 1.into();
    sts["status"] = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
        "updatedReplicas": 2, "currentRevision": "r1", "updateRevision": "r1"});
    let desired = RedisOperator::reconcile(&cr, &Observed::new(vec![sts])).unwrap();
    assert_eq!(desired.status["phase"], "Ready");
    assert_eq!(desired.status["readyReplicas"], 2);
}

#[test]
fn replicas_out_of_range_are_an_invalid_spec() {
    let err = RedisOperator::reconcile(&redis(10), &Observed::default()).unwrap_err();
    assert_eq!(err.message(), "spec.replicas: must be between 1 and 9");
}
