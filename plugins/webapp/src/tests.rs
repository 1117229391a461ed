//! Native unit tests of the WebApp logic, through the host's own checks and the examples' policy.

use super::*;
use operator_host_testing::{self as testing, Plan, Policy};

fn webapp(replicas: i32, image: &str) -> WebApp {
    let mut app = WebApp::new(
        "shop",
        WebAppSpec {
            image: image.into(),
            replicas,
            port: 8080,
            config: BTreeMap::from([("LOG_LEVEL".into(), "info".into())]),
            database_secret: "shop-db".into(),
            migration: vec!["/app/shop".into(), "migrate".into()],
        },
    );
    app.metadata.namespace = Some("default".into());
    app.metadata.generation = Some(1);
    app
}

fn secret(password: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "shop-db", "namespace": "default"},
           "data": {"DATABASE_URL": password}})
}

fn policy() -> Policy {
    Policy::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policy.yaml"
    )))
    .unwrap()
}

fn plan(app: &WebApp, observed: &[Value], others: &[Value]) -> Plan {
    let plan =
        testing::reconcile_with::<WebAppOperator>(app, observed, others, Some(&policy())).unwrap();
    assert_eq!(testing::warnings(&plan), Vec::<String>::new());
    plan
}

fn child<'a>(plan: &'a Plan, kind: &str, name: &str) -> &'a Value {
    plan.objects()
        .find(|c| c["kind"] == kind && c["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn condition<'a>(plan: &'a Plan, type_: &str) -> &'a Value {
    plan.status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no condition {type_}"))
}

/// `object` as the API server would hold it once its controller finished with it.
fn settled(mut object: Value) -> Value {
    object["metadata"]["generation"] = json!(1);
    object["status"] = match object["kind"].as_str().unwrap() {
        "Job" => json!({"conditions": [{"type": "Complete", "status": "True"}]}),
        _ => json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                    "readyReplicas": 2, "availableReplicas": 2}),
    };
    object
}

#[test]
fn the_migration_holds_back_the_app_and_no_selector_takes_in_its_pods() {
    let plan = plan(&webapp(2, "shop:1"), &[], &[secret("YQ==")]);
    let kinds: Vec<_> = plan
        .objects()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Job",
            "Service",
            "Deployment",
            "PodDisruptionBudget"
        ]
    );
    // The Job is a barrier: the app's children are in the stage after it.
    let stage = |kind| {
        plan.apply
            .iter()
            .find(|c| c.object["kind"] == kind)
            .unwrap()
            .stage
    };
    assert!(stage("Job") < stage("Deployment"));
    assert_eq!(plan.status["phase"], "Migrating");
    assert_eq!(condition(&plan, "Ready")["status"], "False");
    assert_eq!(condition(&plan, "Available")["status"], "False");
}

#[test]
fn ready_once_the_migration_of_this_image_ran_and_the_app_rolled_out() {
    let app = webapp(2, "shop:1");
    let first = plan(&app, &[], &[secret("YQ==")]);
    let observed: Vec<Value> = ["Job", "Deployment"]
        .iter()
        .map(|kind| {
            settled(
                child(
                    &first,
                    kind,
                    if *kind == "Job" {
                        "shop-migrate"
                    } else {
                        "shop"
                    },
                )
                .clone(),
            )
        })
        .collect();
    let done = plan(&app, &observed, &[secret("YQ==")]);
    assert_eq!(done.status["phase"], "Ready");
    assert_eq!(done.status["readyReplicas"], 2);
    for type_ in ["Ready", "MigrationComplete", "Available"] {
        assert_eq!(condition(&done, type_)["status"], "True", "{type_}");
    }
    // A new image: the old Job's completion and the old rollout are not this spec's.
    let next = plan(&webapp(2, "shop:2"), &observed, &[secret("YQ==")]);
    assert_eq!(next.status["phase"], "Migrating");
    assert_eq!(
        condition(&next, "MigrationComplete")["reason"],
        "SpecNotApplied"
    );
    assert_eq!(condition(&next, "Available")["status"], "False");
}

#[test]
fn a_rotated_secret_or_a_config_change_rolls_the_pods_and_the_migration_stays_done() {
    let template = |app: &WebApp, password: &str| {
        let plan = plan(app, &[], &[secret(password)]);
        let hash = |kind, name| {
            child(&plan, kind, name)["spec"]["template"]["metadata"]["annotations"]
                [CONTENT_HASH_ANNOTATION]
                .clone()
        };
        (hash("Deployment", "shop"), hash("Job", "shop-migrate"))
    };
    let app = webapp(2, "shop:1");
    let (pods, migration) = template(&app, "YQ==");
    let (rotated_pods, rotated_migration) = template(&app, "Yg==");
    assert_ne!(pods, rotated_pods);
    assert_eq!(
        migration, rotated_migration,
        "a rotation is no reason to migrate again"
    );
    let mut configured = app.clone();
    configured
        .spec
        .config
        .insert("LOG_LEVEL".into(), "debug".into());
    assert_ne!(template(&configured, "YQ==").0, pods);
}

#[test]
fn without_its_secret_it_is_pending_and_says_which() {
    let plan = plan(&webapp(1, "shop:1"), &[], &[]);
    assert_eq!(plan.status["phase"], "Pending");
    assert!(
        condition(&plan, "Ready")["message"]
            .as_str()
            .unwrap()
            .contains("\"shop-db\"")
    );
    // One replica: no budget to keep it up through a drain.
    assert!(plan.objects().all(|c| c["kind"] != "PodDisruptionBudget"));
}

#[test]
fn an_image_reference_with_spaces_is_an_invalid_spec() {
    let err = testing::reconcile::<WebAppOperator>(&webapp(1, "shop 1"), &[], Some(&policy()))
        .unwrap_err();
    assert_eq!(err.reason(), Some("InvalidSpec"), "{err}");
}
