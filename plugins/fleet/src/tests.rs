//! Native unit tests: a Fleet parent reconciles as the Memcached it stands for.

use super::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::CustomResourceExt;
use memcached::{DEFAULT_IMAGE, DEFAULT_PORT, MemcachedSpec};
use serde_json::{Value, json};

fn fleet(name: &str, size: i32) -> Fleet {
    let mut cr = Fleet::new(
        name,
        FleetSpec {
            memcached: MemcachedSpec {
                size,
                image: DEFAULT_IMAGE.into(),
                container_port: DEFAULT_PORT,
                resources: None,
            },
        },
    );
    cr.metadata.generation = Some(2);
    cr
}

#[test]
fn a_fleet_parent_gets_memcacheds_deployment_service_and_status() {
    let cr = fleet("f", 3);
    let desired = FleetOperator::reconcile(&cr, &Observed::default()).unwrap();
    assert_eq!(desired.children.len(), 2);
    let deployment = desired
        .get::<Deployment>("f")
        .expect("the child decodes")
        .unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(3));
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some(DEFAULT_IMAGE));
    let service = desired
        .get::<Service>("f")
        .expect("the child decodes")
        .unwrap();
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, DEFAULT_PORT);
    assert_eq!(desired.status["conditions"][0]["type"], "Available");
    assert_eq!(desired.status["conditions"][0]["observedGeneration"], 2);
    // Exactly what Memcached answers for the same metadata and spec.
    let same = memcached::Memcached {
        metadata: cr.metadata.clone(),
        spec: cr.spec.memcached.clone(),
        status: None,
    };
    assert_eq!(
        desired,
        MemcachedOperator::reconcile(&same, &Observed::default()).unwrap()
    );
}

#[test]
fn the_parent_decodes_from_the_json_the_host_sends() {
    // Memcached's fields sit directly under spec, with Memcached's defaults.
    let cr: Fleet = serde_json::from_value(json!({
        "apiVersion": format!("fleet{INDEX}.bench.example.com/v1alpha1"),
        "kind": format!("Fleet{INDEX}"),
        "metadata": {"name": "f", "namespace": "bench"},
        "spec": {"size": 2}
    }))
    .unwrap();
    assert_eq!(cr.spec.memcached.size, 2);
    assert_eq!(cr.spec.memcached.image, DEFAULT_IMAGE);
    assert_eq!(cr.spec.memcached.container_port, DEFAULT_PORT);
    let err = FleetOperator::reconcile(&fleet("f", 101), &Observed::default()).unwrap_err();
    assert!(err.message().contains("spec.size"), "{err}");
}

/// Whether a schema node, or any below it, uses a keyword a structural schema forbids here.
fn find_unstructural(schema: &Value, path: &str) -> Option<String> {
    match schema {
        Value::Object(map) => map.iter().find_map(|(key, value)| {
            if ["$ref", "allOf", "anyOf", "oneOf", "definitions", "$defs"].contains(&key.as_str()) {
                Some(format!("{path}.{key}"))
            } else {
                find_unstructural(value, &format!("{path}.{key}"))
            }
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_unstructural(v, &format!("{path}[{i}]"))),
        _ => None,
    }
}

#[test]
fn the_crd_is_memcacheds_schema_under_the_builds_own_kind() {
    let crd = serde_json::to_value(Fleet::crd()).unwrap();
    assert_eq!(
        crd["metadata"]["name"],
        format!("fleet{INDEX}s.fleet{INDEX}.bench.example.com")
    );
    assert_eq!(crd["spec"]["names"]["kind"], format!("Fleet{INDEX}"));
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(NAME, format!("fleet-{INDEX}"));
    let version = &crd["spec"]["versions"][0];
    assert!(version["subresources"]["status"].is_object());
    let schema = &version["schema"]["openAPIV3Schema"];
    assert_eq!(find_unstructural(schema, "openAPIV3Schema"), None);
    // serde(flatten) puts Memcached's properties, defaults and bounds directly under spec.
    let spec = &schema["properties"]["spec"];
    let theirs = serde_json::to_value(memcached::Memcached::crd()).unwrap();
    let theirs = &theirs["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(spec["type"], "object");
    assert_eq!(spec["properties"]["size"]["maximum"], 100.0);
    assert_eq!(spec["properties"], theirs["spec"]["properties"]);
    assert_eq!(spec["required"], json!(["size"]));
    assert_eq!(spec["required"], theirs["spec"]["required"]);
    assert_eq!(schema["properties"]["status"], theirs["status"]);
}
