//! Native unit tests of the Memcached reconcile logic.

use super::*;
use k8s_openapi::api::apps::v1::DeploymentStatus;
use kube::CustomResourceExt;
use operator_host_sdk::Observed;

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
        .unwrap()
        .spec
        .unwrap()
        .template
}

fn observed_deployment(size: i32, ready: i32) -> Observed {
    let mut deployment = deployment("mc", &memcached("mc", size).spec, &selector_labels("mc"));
    deployment.status = Some(DeploymentStatus {
        ready_replicas: Some(ready),
        updated_replicas: Some(ready),
        ..DeploymentStatus::default()
    });
    Observed::new(vec![serde_json::to_value(deployment).unwrap()])
}

#[test]
fn deployment_replicas_follow_size_and_service_targets_the_port() {
    let desired = reconcile(&memcached("mc", 3), &Observed::default());
    assert_eq!(desired.children.len(), 2);
    let deployment = desired.get::<Deployment>("mc").unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(3));
    let service = desired.get::<Service>("mc").unwrap();
    let port = &service.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.port, DEFAULT_PORT);
}

#[test]
fn selectors_are_unique_per_cr() {
    let a = reconcile(&memcached("a", 1), &Observed::default());
    let b = reconcile(&memcached("b", 1), &Observed::default());
    let selector = |d: &Desired, n: &str| {
        d.get::<Deployment>(n)
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
    assert_eq!(partial.status["conditions"][0]["status"], "False");
    assert_eq!(partial.status["conditions"][0]["reason"], "PodsNotReady");
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
