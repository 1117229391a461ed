//! Native unit tests of the Memcached reconcile logic.

use super::*;
use k8s_openapi::api::apps::v1::DeploymentStatus;
use kube::CustomResourceExt;
use operator_host_sdk::Observed;
use serde_json::json;

fn memcached(name: &str, size: i32) -> Memcached {
    let mut cr = Memcached::new(
        name,
        MemcachedSpec {
            size,
            image: DEFAULT_IMAGE.into(),
            container_port: DEFAULT_PORT,
            resources: None,
        },
    );
    cr.metadata.generation = Some(3);
    cr
}

fn reconcile(cr: &Memcached, observed: &Observed) -> Desired {
    MemcachedOperator::reconcile(cr, observed).unwrap()
}

fn pod_template(desired: &Desired, name: &str) -> PodTemplateSpec {
    desired
        .get::<Deployment>(name)
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap()
        .template
}

/// The Deployment the host applied for `cr`, as the API server shows it once its controller
/// has observed it: `ready` pods ready, all of them updated and available.
fn applied_deployment(cr: &Memcached, ready: i32) -> serde_json::Value {
    let desired = reconcile(cr, &Observed::default());
    let mut deployment = desired.children[0].clone();
    assert_eq!(deployment["kind"], "Deployment");
    deployment["metadata"]["generation"] = 2.into();
    deployment["status"] = serde_json::to_value(DeploymentStatus {
        observed_generation: Some(2),
        replicas: Some(ready),
        ready_replicas: Some(ready),
        updated_replicas: Some(ready),
        available_replicas: Some(ready),
        ..DeploymentStatus::default()
    })
    .unwrap();
    deployment
}

fn observed_deployment(size: i32, ready: i32) -> Observed {
    Observed::new(vec![applied_deployment(&memcached("mc", size), ready)])
}

fn available(desired: &Desired) -> (&str, &str) {
    let condition = &desired.status["conditions"][0];
    assert_eq!(condition["type"], "Available");
    (
        condition["status"].as_str().unwrap(),
        condition["reason"].as_str().unwrap(),
    )
}

#[test]
fn deployment_replicas_follow_size_and_service_targets_the_port() {
    let desired = reconcile(&memcached("mc", 3), &Observed::default());
    assert_eq!(desired.children.len(), 2);
    let deployment = desired
        .get::<Deployment>("mc")
        .expect("the child decodes")
        .unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(3));
    let service = desired
        .get::<Service>("mc")
        .expect("the child decodes")
        .unwrap();
    let port = &service.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.port, DEFAULT_PORT);
}

#[test]
fn selectors_are_unique_per_cr() {
    let a = reconcile(&memcached("a", 1), &Observed::default());
    let b = reconcile(&memcached("b", 1), &Observed::default());
    let selector = |d: &Desired, n: &str| {
        d.get::<Deployment>(n)
            .expect("the child decodes")
            .unwrap()
            .spec
            .unwrap()
            .selector
            .match_labels
            .unwrap()
    };
    assert_ne!(selector(&a, "a"), selector(&b, "b"));
    let service_selector = a
        .get::<Service>("a")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap()
        .selector
        .unwrap();
    assert_eq!(service_selector, selector(&a, "a"));
}

#[test]
fn image_and_port_changes_change_the_pod_template() {
    let base = memcached("mc", 1);
    let before = pod_template(&reconcile(&base, &Observed::default()), "mc");
    let mut new_image = base.clone();
    new_image.spec.image = "memcached:1.6.40".into();
    assert_ne!(
        before,
        pod_template(&reconcile(&new_image, &Observed::default()), "mc")
    );
    let mut new_port = base.clone();
    new_port.spec.container_port = 11311;
    let template = pod_template(&reconcile(&new_port, &Observed::default()), "mc");
    assert_ne!(before, template);
    let container = &template.spec.unwrap().containers[0];
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 11311);
}

#[test]
fn status_without_an_observed_deployment_is_not_available() {
    let desired = reconcile(&memcached("mc", 2), &Observed::default());
    assert_eq!(desired.status["readyReplicas"], 0);
    assert_eq!(desired.status["conditions"][0]["status"], "False");
    assert_eq!(
        desired.status["conditions"][0]["reason"],
        "DeploymentNotFound"
    );
    assert_eq!(desired.status["conditions"][0]["observedGeneration"], 3);
    assert!(
        desired.status["conditions"][0]
            .get("lastTransitionTime")
            .is_none()
    );
}

#[test]
fn status_is_available_once_every_pod_is_ready() {
    let cr = memcached("mc", 2);
    let partial = reconcile(&cr, &observed_deployment(2, 1));
    assert_eq!(available(&partial), ("False", "RolloutInProgress"));
    let ready = reconcile(&cr, &observed_deployment(2, 2));
    assert_eq!(ready.status["readyReplicas"], 2);
    assert_eq!(ready.status["conditions"][0]["status"], "True");
    assert_eq!(
        ready.status["selector"],
        "app.kubernetes.io/instance=mc,app.kubernetes.io/name=memcached"
    );
}

#[test]
fn status_reports_scaling_while_the_deployment_has_the_old_size() {
    let scaled = memcached("mc", 5);
    let desired = reconcile(&scaled, &observed_deployment(2, 2));
    assert_eq!(desired.status["conditions"][0]["reason"], "Scaling");
}

#[test]
fn out_of_range_values_are_rejected_with_the_field() {
    let err =
        MemcachedOperator::reconcile(&memcached("mc", 101), &Observed::default()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidSpec(m) if m.contains("spec.size")),
        "{err}"
    );
    let mut bad_port = memcached("mc", 1);
    bad_port.spec.container_port = 70000;
    let err = MemcachedOperator::reconcile(&bad_port, &Observed::default()).unwrap_err();
    assert!(err.message().contains("spec.containerPort"), "{err}");
}

#[test]
fn crd_declares_defaults_range_and_printer_columns() {
    let crd = serde_json::to_value(Memcached::crd()).unwrap();
    let version = &crd["spec"]["versions"][0];
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["size"]["maximum"], 100.0);
    assert_eq!(spec["image"]["default"], DEFAULT_IMAGE);
    assert_eq!(spec["containerPort"]["default"], DEFAULT_PORT);
    let columns: Vec<_> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Size", "Ready", "Available", "Image", "Age"]);
    assert!(version["subresources"]["status"].is_object());
}

#[test]
fn children_carry_no_namespace_or_owner() {
    let desired = reconcile(&memcached("mc", 1), &Observed::default());
    for child in &desired.children {
        assert!(child["metadata"].get("namespace").is_none());
        assert!(child["metadata"].get("ownerReferences").is_none());
    }
}

#[test]
fn status_is_not_available_while_the_observed_deployment_has_the_old_image() {
    // The observed Deployment is the one of the previous spec, fully rolled out: the host
    // has not applied the new image yet, so the new generation is not available.
    let old = memcached("mc", 2);
    let mut new = old.clone();
    new.spec.image = "memcached:1.6.40".into();
    new.metadata.generation = Some(4);
    let observed = Observed::new(vec![applied_deployment(&old, 2)]);
    let desired = reconcile(&new, &observed);
    assert_eq!(available(&desired), ("False", "SpecNotApplied"));
    assert_eq!(desired.status["conditions"][0]["observedGeneration"], 4);
    assert_eq!(desired.status["readyReplicas"], 2);
    // Once applied and rolled out it is.
    let observed = Observed::new(vec![applied_deployment(&new, 2)]);
    assert_eq!(
        available(&reconcile(&new, &observed)),
        ("True", "MinimumReplicasReady")
    );
}

#[test]
fn status_is_not_available_until_the_new_pods_replace_the_old_ones() {
    let cr = memcached("mc", 2);
    let mut rolling = applied_deployment(&cr, 2);
    // The new spec is applied but its controller has not acted on it yet.
    rolling["metadata"]["generation"] = 3.into();
    let desired = reconcile(&cr, &Observed::new(vec![rolling.clone()]));
    assert_eq!(available(&desired), ("False", "SpecNotObserved"));
    // Observed: two new pods ready, one old pod still terminating.
    rolling["status"]["observedGeneration"] = 3.into();
    rolling["status"]["replicas"] = 3.into();
    rolling["status"]["readyReplicas"] = 3.into();
    let desired = reconcile(&cr, &Observed::new(vec![rolling.clone()]));
    assert_eq!(available(&desired), ("False", "RolloutInProgress"));
    let message = desired.status["conditions"][0]["message"].as_str().unwrap();
    assert!(message.contains("1 old replicas"), "{message}");
    rolling["status"]["replicas"] = 2.into();
    let desired = reconcile(&cr, &Observed::new(vec![rolling]));
    assert_eq!(available(&desired), ("True", "MinimumReplicasReady"));
}

#[test]
fn the_deployment_carries_the_hash_of_its_spec_and_its_pods_do_not() {
    let desired = reconcile(&memcached("mc", 1), &Observed::default());
    let deployment = desired
        .get::<Deployment>("mc")
        .expect("the child decodes")
        .unwrap();
    assert!(
        deployment
            .metadata
            .annotations
            .unwrap()
            .contains_key(operator_host_sdk::SPEC_HASH_ANNOTATION)
    );
    let template = deployment.spec.unwrap().template;
    assert!(template.metadata.unwrap().annotations.is_none());
    let service = desired
        .get::<Service>("mc")
        .expect("the child decodes")
        .unwrap();
    assert!(service.metadata.annotations.is_none());
}

fn with_resources(resources: serde_json::Value) -> Memcached {
    let mut cr = memcached("mc", 2);
    cr.spec.resources = Some(serde_json::from_value(resources).unwrap());
    cr
}

#[test]
fn resources_the_api_server_refuses_are_rejected_with_the_entry() {
    // What the spec-mutation campaign found the Deployment's apply refused with a 422.
    for (resources, field) in [
        (
            json!({"requests": {"k": 1}}),
            r#"spec.resources.requests["k"]: "#,
        ),
        (
            json!({"requests": {"bad key": 1}}),
            r#"spec.resources.requests["bad key"]: "#,
        ),
        (
            json!({"requests": {"-k-": 1}}),
            r#"spec.resources.requests["-k-"]: "#,
        ),
        (
            json!({"limits": {"cpu": "not-a-quantity"}}),
            r#"spec.resources.limits["cpu"]: "#,
        ),
        (
            json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
            r#"spec.resources.requests["cpu"]: "#,
        ),
        (
            json!({"requests": {"example.com/gpu": 1}}),
            r#"spec.resources.limits["example.com/gpu"]: "#,
        ),
    ] {
        let err =
            MemcachedOperator::reconcile(&with_resources(resources.clone()), &Observed::default())
                .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidSpec(m) if m.starts_with(field)),
            "{resources}: {err}"
        );
    }
}

#[test]
fn the_container_gets_resources_as_the_api_server_stores_them() {
    let desired = reconcile(
        &with_resources(json!({"requests": {"cpu": "0.5"}, "limits": {}, "claims": []})),
        &Observed::default(),
    );
    let container = &pod_template(&desired, "mc").spec.unwrap().containers[0];
    let resources = container.resources.clone().unwrap();
    assert_eq!(resources.requests.unwrap()["cpu"].0, "500m");
    assert_eq!((resources.limits, resources.claims), (None, None));
    // Empty maps and lists are left out, not written for the API server to drop.
    let empty = reconcile(
        &with_resources(json!({"requests": {}, "limits": {}, "claims": []})),
        &Observed::default(),
    );
    let json = serde_json::to_value(
        empty
            .get::<Deployment>("mc")
            .expect("the child decodes")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        json["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({})
    );
    let none = reconcile(&memcached("mc", 2), &Observed::default());
    assert!(
        pod_template(&none, "mc").spec.unwrap().containers[0]
            .resources
            .is_none()
    );
}

#[test]
fn the_host_accepts_every_answer_under_the_example_policy() {
    use operator_host_testing::{self as testing, Policy};
    let policy = Policy::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policy.yaml"
    )))
    .unwrap();
    let cr = memcached("mc", 2);
    for observed in [
        Vec::new(),
        vec![applied_deployment(&cr, 1)],
        vec![applied_deployment(&cr, 2)],
    ] {
        let plan = testing::reconcile::<MemcachedOperator>(&cr, &observed, Some(&policy)).unwrap();
        assert_eq!(plan.apply.len(), 2);
        assert_eq!(plan.status["conditions"][1]["type"], "Reconciled");
    }
    let one_child = Policy::parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\nplugins:\n  memcached: {maxChildren: 1}\n",
        std::path::Path::new("one-child.yaml"),
    )
    .unwrap();
    let err = testing::reconcile::<MemcachedOperator>(&cr, &[], Some(&one_child)).unwrap_err();
    assert_eq!(err.reason(), Some("PolicyViolation"), "{err}");
    let mut too_big = memcached("mc", 2);
    too_big.spec.size = MAX_SIZE + 1;
    let err = testing::reconcile::<MemcachedOperator>(&too_big, &[], None).unwrap_err();
    assert_eq!(err.reason(), Some("InvalidSpec"), "{err}");
}

#[test]
fn admission_refuses_what_reconcile_would_and_warns_at_size_zero() {
    let validation = MemcachedOperator::validate(&memcached("mc", 101), None);
    let errors: Vec<String> = validation
        .errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        ["spec.size: Invalid value: must be between 0 and 100, got 101"]
    );
    let validation = MemcachedOperator::validate(&memcached("mc", 0), None);
    assert!(validation.is_valid());
    assert_eq!(validation.warnings().len(), 1, "{validation:?}");
}

#[test]
fn defaulting_pins_an_untagged_memcached_image_and_nothing_else() {
    for (image, defaulted) in [
        ("memcached", "memcached:1.6.39-alpine"),
        (
            "mirror.example.com/library/memcached",
            "mirror.example.com/library/memcached:1.6.39-alpine",
        ),
        ("memcached:1.6.30", "memcached:1.6.30"),
        ("memcached@sha256:abc", "memcached@sha256:abc"),
        ("example.com/other", "example.com/other"),
    ] {
        let mut cr = memcached("mc", 1);
        cr.spec.image = image.into();
        MemcachedOperator::default(&mut cr);
        assert_eq!(cr.spec.image, defaulted);
        MemcachedOperator::default(&mut cr);
        assert_eq!(cr.spec.image, defaulted, "defaulting is idempotent");
    }
}
