//! Native unit tests of the ConfigBundle reconcile logic.

use super::*;
use kube::CustomResourceExt;
use serde_json::json;

fn bundle(name: &str, keys: usize) -> ConfigBundle {
    let data = (0..keys)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    let mut cr = ConfigBundle::new(name, ConfigBundleSpec { data });
    cr.metadata.generation = Some(5);
    cr
}

/// The ConfigMap the host applied for `desired`, as the API server shows it.
fn applied(desired: &Desired) -> serde_json::Value {
    let mut config_map = desired.children[0].clone();
    config_map["metadata"]["namespace"] = "bench".into();
    config_map["metadata"]["resourceVersion"] = "17".into();
    config_map
}

fn ready(desired: &Desired) -> (&str, &str) {
    let condition = &desired.status["conditions"][0];
    assert_eq!(condition["type"], "Ready");
    assert_eq!(condition["observedGeneration"], 5);
    (
        condition["status"].as_str().unwrap(),
        condition["reason"].as_str().unwrap(),
    )
}

#[test]
fn the_first_reconcile_gives_the_config_map_and_is_not_ready() {
    let cr = bundle("b", 3);
    let desired = ConfigBundleOperator::reconcile(&cr, &Observed::default()).unwrap();
    assert_eq!(desired.children.len(), 1);
    let config_map = desired
        .get::<ConfigMap>("b")
        .expect("the child decodes")
        .unwrap();
    assert_eq!(config_map.data.unwrap(), cr.spec.data);
    assert!(desired.children[0]["metadata"].get("namespace").is_none());
    assert_eq!(ready(&desired), ("False", "Pending"));
    assert_eq!(desired.status["keys"], 0);
}

#[test]
fn the_observed_config_map_makes_it_ready_with_its_keys() {
    let cr = bundle("b", 3);
    let first = ConfigBundleOperator::reconcile(&cr, &Observed::default()).unwrap();
    let observed = Observed::new(vec![applied(&first)]);
    let desired = ConfigBundleOperator::reconcile(&cr, &observed).unwrap();
    assert_eq!(ready(&desired), ("True", "DataApplied"));
    assert_eq!(desired.status["keys"], 3);
    // A changed spec is pending until the ConfigMap carries it; keys counts what is observed.
    let mut changed = cr.clone();
    changed.spec.data.insert("k9".into(), "v9".into());
    let desired = ConfigBundleOperator::reconcile(&changed, &observed).unwrap();
    assert_eq!(ready(&desired), ("False", "Pending"));
    assert_eq!(desired.status["keys"], 3);
}

#[test]
fn an_empty_bundle_is_ready_once_its_config_map_is_observed() {
    let cr = bundle("b", 0);
    let first = ConfigBundleOperator::reconcile(&cr, &Observed::default()).unwrap();
    // No `data: {}` written: the API server would drop it.
    assert!(first.children[0].get("data").is_none());
    let observed = Observed::new(vec![applied(&first)]);
    let desired = ConfigBundleOperator::reconcile(&cr, &observed).unwrap();
    assert_eq!(ready(&desired), ("True", "DataApplied"));
    assert_eq!(desired.status["keys"], 0);
}

#[test]
fn more_than_64_keys_are_refused() {
    assert!(ConfigBundleOperator::reconcile(&bundle("b", MAX_KEYS), &Observed::default()).is_ok());
    let err = ConfigBundleOperator::reconcile(&bundle("b", MAX_KEYS + 1), &Observed::default())
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidSpec(m) if m.starts_with("spec.data: ") && m.contains("65")),
        "{err}"
    );
}

#[test]
fn keys_the_api_server_refuses_are_refused_with_the_key() {
    for key in ["", ".", "..a", "a b", "a/b", &"k".repeat(254)] {
        let mut cr = bundle("b", 1);
        cr.spec.data.insert(key.to_string(), "v".into());
        let err = ConfigBundleOperator::reconcile(&cr, &Observed::default()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidSpec(m) if m.starts_with(&format!("spec.data[{key:?}]: "))),
            "{key:?}: {err}"
        );
    }
    let mut cr = bundle("b", 1);
    cr.spec.data.insert("a-b_c.d".into(), "v".into());
    assert!(ConfigBundleOperator::reconcile(&cr, &Observed::default()).is_ok());
}

#[test]
fn the_crd_declares_the_kind_the_key_limit_and_the_status_subresource() {
    let crd = serde_json::to_value(ConfigBundle::crd()).unwrap();
    assert_eq!(
        crd["metadata"]["name"],
        "configbundles.bundle.bench.example.com"
    );
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert!(version["subresources"]["status"].is_object());
    let schema = &version["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(
        schema["spec"]["properties"]["data"],
        json!({
            "type": "object",
            "description": "The ConfigMap's `data`, key for key.",
            "default": {},
            "maxProperties": MAX_KEYS,
            "additionalProperties": {"type": "string"}
        })
    );
    assert_eq!(schema["status"]["properties"]["keys"]["type"], "integer");
}
