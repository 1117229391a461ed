//! Native unit tests of the MySQL reconcile logic: every field's effect, defaults, validation, hash, status.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentStatus, StatefulSet, StatefulSetSpec, StatefulSetStatus,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, PersistentVolumeClaimSpec, PodTemplateSpec, Service,
    ServiceAccount, ServiceSpec as CoreServiceSpec,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResourceExt;
use operator_host_sdk::{Desired, Error, Observed, Readiness, Reconciler, UpdateStrategy};
use serde_json::{Value, json};

use super::*;
use crate::children::{ROUTER_RO_PORT, ROUTER_RW_PORT, ROUTER_RW_SPLIT_PORT};
use crate::status::{INITIALIZING, OFFLINE, ONLINE, ONLINE_PARTIAL, PENDING};

/// A cluster parsed from JSON, so serde's defaults apply as they do for the plugin's input.
fn cluster_in(namespace: &str, name: &str, spec: Value) -> InnoDBCluster {
    serde_json::from_value(json!({
        "apiVersion": "mysql.operator-host.dev/v1alpha1",
        "kind": "InnoDBCluster",
        "metadata": {"name": name, "namespace": namespace, "generation": 4},
        "spec": spec,
    }))
    .unwrap()
}

fn cluster(name: &str, spec: Value) -> InnoDBCluster {
    cluster_in("db", name, spec)
}

fn minimal(name: &str) -> InnoDBCluster {
    cluster(name, json!({"secretName": "mysql-root"}))
}

fn with(spec: Value) -> InnoDBCluster {
    let mut full = json!({"secretName": "mysql-root"});
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    cluster("ic", full)
}

/// The root Secret as the host passes it (each value a hash), with every key.
fn root_secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "mysql-root", "namespace": "db"},
        "data": {"rootUser": "aGFzaA==", "rootHost": "aGFzaA==", "rootPassword": "aGFzaA=="}})
}

/// `objects` observed, beside the root Secret.
fn observed_with(objects: Vec<Value>) -> Observed {
    Observed::new(objects).with_related("root", vec![root_secret()])
}

fn reconcile(cr: &InnoDBCluster) -> Desired {
    MySqlOperator::reconcile(cr, &observed_with(vec![])).unwrap()
}

fn rejected(cr: &InnoDBCluster) -> String {
    match MySqlOperator::reconcile(cr, &observed_with(vec![])) {
        Err(Error::InvalidSpec(message)) => message,
        other => panic!("expected an invalid spec, got {other:?}"),
    }
}

fn sts(desired: &Desired, name: &str) -> StatefulSetSpec {
    desired
        .get::<StatefulSet>(name)
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap()
}

fn template(desired: &Desired, name: &str) -> PodTemplateSpec {
    sts(desired, name).template
}

fn mysql_container(desired: &Desired, name: &str) -> Container {
    template(desired, name).spec.unwrap().containers[0].clone()
}

fn claim(desired: &Desired, name: &str) -> PersistentVolumeClaimSpec {
    sts(desired, name).volume_claim_templates.unwrap()[0]
        .spec
        .clone()
        .unwrap()
}

fn router_service(desired: &Desired, name: &str) -> CoreServiceSpec {
    desired
        .get::<Service>(name)
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap()
}

fn port_target(service: &CoreServiceSpec, port_name: &str) -> (i32, IntOrString) {
    let port = service
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .find(|p| p.name.as_deref() == Some(port_name))
        .unwrap_or_else(|| panic!("no port {port_name}"));
    (port.port, port.target_port.clone().unwrap())
}

fn config_hash_of(desired: &Desired, name: &str) -> String {
    template(desired, name)
        .metadata
        .unwrap()
        .annotations
        .unwrap()[CONFIG_HASH_ANNOTATION]
        .clone()
}

fn initconf_data(desired: &Desired, name: &str) -> BTreeMap<String, String> {
    desired
        .get::<ConfigMap>(&format!("{name}-initconf"))
        .expect("the child decodes")
        .unwrap()
        .data
        .unwrap()
}

// --- children and their names ---------------------------------------------------------

#[test]
fn a_cluster_has_the_children_of_the_upstream_operator_and_the_job_that_creates_the_group() {
    let desired = reconcile(&minimal("ic"));
    let mut names: Vec<(String, String)> = desired
        .children
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_string(),
                c["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    names.sort();
    let expected = [
        ("ConfigMap", "ic-initconf"),
        ("Deployment", "ic-router"),
        ("Job", "ic-create-cluster"),
        ("PodDisruptionBudget", "ic-pdb"),
        ("Service", "ic"),
        ("Service", "ic-instances"),
        ("ServiceAccount", "ic-sa"),
        ("StatefulSet", "ic"),
    ];
    assert_eq!(names, expected.map(|(k, n)| (k.to_string(), n.to_string())));
    // Every child is of a declared kind.
    let declared: Vec<(String, String)> = MySqlOperator::children()
        .iter()
        .map(|k| (k.api_version(), k.kind.clone()))
        .collect();
    for child in &desired.children {
        let key = (
            child["apiVersion"].as_str().unwrap().to_string(),
            child["kind"].as_str().unwrap().to_string(),
        );
        assert!(declared.contains(&key), "{key:?} is not declared");
    }
}

#[test]
fn children_carry_no_namespace_owner_or_reserved_labels() {
    let desired = reconcile(&minimal("ic"));
    for child in &desired.children {
        let metadata = &child["metadata"];
        assert!(metadata.get("namespace").is_none(), "{child}");
        assert!(metadata.get("ownerReferences").is_none(), "{child}");
        let labels = metadata["labels"].as_object().unwrap();
        assert!(
            !labels.contains_key("app.kubernetes.io/managed-by"),
            "{child}"
        );
        assert!(labels.keys().all(|k| !k.starts_with("operator-host.dev/")));
        assert_eq!(labels["app.kubernetes.io/name"], "mysql-innodbcluster");
        assert_eq!(
            labels["app.kubernetes.io/instance"],
            "mysql-innodbcluster-ic"
        );
        assert_eq!(labels["mysql.oracle.com/cluster"], "ic");
        assert!(labels.contains_key("app.kubernetes.io/component"));
    }
}

#[test]
fn reconcile_is_deterministic() {
    let cr = with(json!({"instances": 3, "mycnf": "[mysqld]\nmax_connections=10\n"}));
    assert_eq!(reconcile(&cr), reconcile(&cr));
}

// --- defaults ---------------------------------------------------------------------------

#[test]
fn defaults_apply_when_only_the_secret_is_given() {
    let cr = minimal("ic");
    assert_eq!(cr.spec.instances, 1);
    assert_eq!(cr.spec.version, DEFAULT_VERSION);
    assert_eq!(cr.spec.router.instances, 1);
    assert_eq!(cr.spec.service.type_, ServiceType::ClusterIP);
    assert_eq!(cr.spec.service.default_port, DefaultPort::MysqlRw);
    assert_eq!(
        cr.spec.datadir_volume_claim_template,
        DatadirSpec::default()
    );

    let desired = reconcile(&cr);
    assert_eq!(sts(&desired, "ic").replicas, Some(1));
    assert_eq!(
        mysql_container(&desired, "ic").image.unwrap(),
        "container-registry.oracle.com/mysql/community-server:8.4.6"
    );
    let claim = claim(&desired, "ic");
    assert_eq!(claim.access_modes.unwrap(), ["ReadWriteOnce"]);
    assert_eq!(claim.storage_class_name, None);
    assert_eq!(
        claim.resources.unwrap().requests.unwrap()["storage"].0,
        "2Gi"
    );
    let service = router_service(&desired, "ic");
    assert_eq!(service.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(
        port_target(&service, "mysql"),
        (3306, IntOrString::Int(ROUTER_RW_PORT))
    );
    let router = desired
        .get::<Deployment>("ic-router")
        .expect("the child decodes")
        .unwrap();
    assert_eq!(router.spec.unwrap().replicas, Some(1));
    // No mycnf: no extra file and no include of one.
    let data = initconf_data(&desired, "ic");
    assert!(!data.contains_key(config::EXTRA_CNF));
    assert!(!data[config::MY_CNF].contains(config::EXTRA_CNF));
}

#[test]
fn the_crd_declares_defaults_bounds_patterns_enums_and_columns() {
    let crd = serde_json::to_value(InnoDBCluster::crd()).unwrap();
    assert_eq!(
        crd["metadata"]["name"],
        "innodbclusters.mysql.operator-host.dev"
    );
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["ic"]));
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert!(version["subresources"]["status"].is_object());
    let root = &version["schema"]["openAPIV3Schema"];
    assert!(
        root["x-kubernetes-validations"][0]["rule"]
            .as_str()
            .unwrap()
            .contains("self.metadata.name.size() <= 40")
    );
    let spec = &root["properties"]["spec"];
    assert_eq!(spec["required"], json!(["secretName"]));
    let p = &spec["properties"];
    assert_eq!(p["instances"]["default"], 1);
    assert_eq!(p["instances"]["minimum"], 1.0);
    assert_eq!(p["instances"]["maximum"], 9.0);
    assert_eq!(p["version"]["default"], DEFAULT_VERSION);
    assert_eq!(p["version"]["pattern"], r"^\d+\.\d+\.\d+$");
    assert_eq!(p["router"]["default"], json!({"instances": 1}));
    assert_eq!(p["router"]["properties"]["instances"]["minimum"], 0.0);
    assert_eq!(
        p["service"]["default"],
        json!({"type": "ClusterIP", "defaultPort": "mysql-rw"})
    );
    assert_eq!(
        p["service"]["properties"]["type"]["enum"],
        json!(["ClusterIP", "NodePort", "LoadBalancer"])
    );
    assert_eq!(
        p["service"]["properties"]["defaultPort"]["enum"],
        json!(["mysql-rw", "mysql-ro", "mysql-rw-split"])
    );
    let datadir = &p["datadirVolumeClaimTemplate"];
    assert_eq!(
        datadir["default"],
        json!({"storage": "2Gi", "accessModes": ["ReadWriteOnce"]})
    );
    assert_eq!(
        datadir["x-kubernetes-validations"][0]["rule"],
        "self == oldSelf"
    );
    assert!(p["resources"]["properties"]["limits"].is_object());
    assert!(p["podLabels"].is_object() && p["podAnnotations"].is_object());
    assert_eq!(p["mycnf"]["type"], "string");
    let columns: Vec<(&str, &str)> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["jsonPath"].as_str().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Status", ".status.cluster.status"),
            ("Online", ".status.cluster.onlineInstances"),
            ("Instances", ".spec.instances"),
            ("Routers", ".status.router.readyInstances"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
    let status = &root["properties"]["status"]["properties"];
    assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
}

// --- each field's effect ----------------------------------------------------------------

#[test]
fn instances_set_the_statefulset_replicas() {
    for n in [1, 3, 9] {
        let desired = reconcile(&with(json!({"instances": n})));
        assert_eq!(sts(&desired, "ic").replicas, Some(n));
    }
}

#[test]
fn version_sets_the_server_and_router_images() {
    let desired = reconcile(&with(json!({"version": "9.4.0"})));
    assert_eq!(
        mysql_container(&desired, "ic").image.unwrap(),
        "container-registry.oracle.com/mysql/community-server:9.4.0"
    );
    let router = desired
        .get::<Deployment>("ic-router")
        .expect("the child decodes")
        .unwrap();
    assert_eq!(
        router.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("container-registry.oracle.com/mysql/community-router:9.4.0")
    );
}

#[test]
fn router_instances_set_the_deployment_replicas_and_zero_removes_it_but_keeps_the_service() {
    let desired = reconcile(&with(json!({"router": {"instances": 3}})));
    let router = desired
        .get::<Deployment>("ic-router")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(router.replicas, Some(3));
    let none = reconcile(&with(json!({"router": {"instances": 0}})));
    assert!(
        none.get::<Deployment>("ic-router")
            .expect("the child decodes")
            .is_none()
    );
    assert!(
        none.get::<Service>("ic")
            .expect("the child decodes")
            .is_some()
    );
    assert_eq!(none.children.len(), 7, "the Job stays");
}

#[test]
fn service_type_and_default_port_shape_the_router_service() {
    for (type_, default_port, target) in [
        ("ClusterIP", "mysql-rw", ROUTER_RW_PORT),
        ("NodePort", "mysql-ro", ROUTER_RO_PORT),
        ("LoadBalancer", "mysql-rw-split", ROUTER_RW_SPLIT_PORT),
    ] {
        let desired = reconcile(&with(
            json!({"service": {"type": type_, "defaultPort": default_port}}),
        ));
        let service = router_service(&desired, "ic");
        assert_eq!(service.type_.as_deref(), Some(type_));
        assert_eq!(
            port_target(&service, "mysql"),
            (3306, IntOrString::Int(target))
        );
        // The other ports do not depend on the default port.
        assert_eq!(
            port_target(&service, "mysqlx"),
            (33060, IntOrString::Int(6448))
        );
        assert_eq!(
            port_target(&service, "mysql-ro"),
            (6447, IntOrString::Int(6447))
        );
        assert_eq!(
            port_target(&service, "mysqlx-ro"),
            (6449, IntOrString::Int(6449))
        );
        assert_eq!(
            port_target(&service, "mysql-rw-split"),
            (6450, IntOrString::Int(6450))
        );
        assert_eq!(
            port_target(&service, "router-rest"),
            (8443, IntOrString::Int(8443))
        );
    }
}

#[test]
fn mycnf_is_appended_to_the_configuration_last() {
    let mycnf = "[mysqld]\nmax_connections=300\n";
    let desired = reconcile(&with(json!({"mycnf": mycnf})));
    let data = initconf_data(&desired, "ic");
    assert_eq!(data[config::EXTRA_CNF], mycnf);
    let main = &data[config::MY_CNF];
    assert!(main.starts_with("# Generated") && main.contains("\n[mysqld]\n"));
    assert!(
        main.trim_end()
            .ends_with("!include /etc/mysql-initconf/99-extra.cnf"),
        "{main}"
    );
    // A missing final newline is added, so the next file starts on a line of its own.
    let desired = reconcile(&with(json!({"mycnf": "[mysqld]\nx=1"})));
    assert_eq!(
        initconf_data(&desired, "ic")[config::EXTRA_CNF],
        "[mysqld]\nx=1\n"
    );
}

#[test]
fn group_replication_settings_name_a_stable_group_and_every_possible_member() {
    let desired = reconcile(&minimal("ic"));
    let gr = &initconf_data(&desired, "ic")[config::GROUP_REPLICATION_CNF];
    let group = config::group_name("db", "ic");
    assert!(gr.contains(&format!("group_replication_group_name={group}")));
    assert!(gr.contains("plugin_load_add=group_replication.so"));
    for i in 0..9 {
        assert!(gr.contains(&format!("ic-{i}.ic-instances:33061")), "{gr}");
    }
    assert!(!gr.contains("ic-9."));
    // A UUID: 8-4-4-4-12 hex digits.
    let parts: Vec<usize> = group.split('-').map(str::len).collect();
    assert_eq!(parts, [8, 4, 4, 4, 12]);
    assert!(group.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    assert_eq!(group, config::group_name("db", "ic"));
    assert_ne!(group, config::group_name("db", "other"));
    assert_ne!(group, config::group_name("other", "ic"));
}

#[test]
fn datadir_template_sets_size_class_and_access_modes() {
    let desired = reconcile(&with(json!({"datadirVolumeClaimTemplate": {
        "storage": "20Gi", "storageClassName": "fast", "accessModes": ["ReadWriteOncePod"]
    }})));
    let template = &sts(&desired, "ic").volume_claim_templates.unwrap()[0];
    assert_eq!(template.metadata.name.as_deref(), Some("datadir"));
    let claim = template.spec.clone().unwrap();
    assert_eq!(claim.access_modes.unwrap(), ["ReadWriteOncePod"]);
    assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(
        claim.resources.unwrap().requests.unwrap()["storage"].0,
        "20Gi"
    );
    let mounts = mysql_container(&desired, "ic").volume_mounts.unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m.name == "datadir" && m.mount_path == "/var/lib/mysql")
    );
}

#[test]
fn pod_labels_and_annotations_go_on_the_pod_template_only() {
    let desired = reconcile(&with(json!({
        "podLabels": {"team": "db", "example.com/tier": "gold"},
        "podAnnotations": {"example.com/backup": "nightly"},
    })));
    let spec = sts(&desired, "ic");
    let metadata = spec.template.metadata.unwrap();
    let labels = metadata.labels.unwrap();
    assert_eq!(labels["team"], "db");
    assert_eq!(labels["example.com/tier"], "gold");
    assert_eq!(labels["tier"], "mysql");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "operator-host");
    let annotations = metadata.annotations.unwrap();
    assert_eq!(annotations["example.com/backup"], "nightly");
    assert!(annotations.contains_key(CONFIG_HASH_ANNOTATION));
    let selector = spec.selector.match_labels.unwrap();
    assert!(!selector.contains_key("team"));
    // Not on the StatefulSet itself, nor on the router pods.
    let object = desired
        .get::<StatefulSet>("ic")
        .expect("the child decodes")
        .unwrap();
    assert!(!object.metadata.labels.unwrap().contains_key("team"));
    let router = desired
        .get::<Deployment>("ic-router")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    let router_meta = router.template.metadata.unwrap();
    assert!(!router_meta.labels.unwrap().contains_key("team"));
    assert!(router_meta.annotations.is_none());
}

#[test]
fn resources_go_on_the_mysql_container() {
    let desired = reconcile(&with(json!({"resources": {
        "requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}
    }})));
    let resources = mysql_container(&desired, "ic").resources.unwrap();
    assert_eq!(resources.requests.unwrap()["cpu"].0, "500m");
    assert_eq!(resources.limits.unwrap()["memory"].0, "2Gi");
    let none = reconcile(&minimal("ic"));
    assert!(mysql_container(&none, "ic").resources.is_none());
}

#[test]
fn credentials_are_referenced_from_the_secret_never_copied() {
    let desired = reconcile(&with(json!({"secretName": "creds"})));
    let env = mysql_container(&desired, "ic").env.unwrap();
    let reference = |name: &str| {
        let var = env.iter().find(|e| e.name == name).unwrap();
        assert!(var.value.is_none());
        let key = var.value_from.clone().unwrap().secret_key_ref.unwrap();
        (key.name, key.key)
    };
    assert_eq!(
        reference("MYSQL_ROOT_PASSWORD"),
        ("creds".to_string(), "rootPassword".to_string())
    );
    assert_eq!(
        reference("MYSQL_ROOT_HOST"),
        ("creds".to_string(), "rootHost".to_string())
    );
    let router = desired
        .get::<Deployment>("ic-router")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    let router_env = router.template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let user = router_env.iter().find(|e| e.name == "MYSQL_USER").unwrap();
    let user_ref = user.value_from.clone().unwrap().secret_key_ref.unwrap();
    assert_eq!(
        (user_ref.name.as_str(), user_ref.key.as_str()),
        ("creds", "rootUser")
    );
    // No Secret among the children.
    assert!(desired.children.iter().all(|c| c["kind"] != "Secret"));
}

#[test]
fn the_statefulset_is_parallel_headless_probed_and_mounts_the_configuration() {
    let desired = reconcile(&minimal("ic"));
    let spec = sts(&desired, "ic");
    assert_eq!(spec.service_name.as_deref(), Some("ic-instances"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("ic-sa"));
    let volume = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "initconf")
        .unwrap();
    assert_eq!(volume.config_map.unwrap().name, "ic-initconf");
    let container = &pod.containers[0];
    assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
    let script = &container.args.as_ref().unwrap()[0];
    assert!(script.contains("SERVER_ID_BASE + ordinal"), "{script}");
    assert!(script.contains("--report-host=\"$HOSTNAME.ic-instances\""));
    // Kubernetes expands $(VAR) in args: the script must not contain that syntax.
    assert!(!script.contains("$("), "{script}");
    let env = container.env.as_ref().unwrap();
    assert!(
        env.iter()
            .any(|e| e.name == "SERVER_ID_BASE" && e.value.as_deref() == Some("1000"))
    );
    let mounts = container.volume_mounts.as_ref().unwrap();
    assert!(mounts.iter().any(|m| m.mount_path == "/etc/my.cnf"
        && m.sub_path.as_deref() == Some("my.cnf")
        && m.name == "initconf"));
    let account = desired
        .get::<ServiceAccount>("ic-sa")
        .expect("the child decodes")
        .unwrap();
    assert_eq!(account.automount_service_account_token, Some(false));
    let router = desired
        .get::<Deployment>("ic-router")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(
        router
            .template
            .spec
            .unwrap()
            .service_account_name
            .as_deref(),
        Some("ic-sa")
    );
}

#[test]
fn the_instances_service_is_headless_and_publishes_unready_pods() {
    let desired = reconcile(&minimal("ic"));
    let service = desired
        .get::<Service>("ic-instances")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(service.cluster_ip.as_deref(), Some("None"));
    assert_eq!(service.publish_not_ready_addresses, Some(true));
    assert_eq!(
        port_target(&service, "mysql"),
        (3306, IntOrString::Int(3306))
    );
    assert_eq!(
        port_target(&service, "mysqlx"),
        (33060, IntOrString::Int(33060))
    );
    assert_eq!(
        port_target(&service, "gr-xcom"),
        (33061, IntOrString::Int(33061))
    );
}

#[test]
fn selectors_are_unique_per_cluster_and_distinct_for_servers_and_routers() {
    let a = reconcile(&minimal("a"));
    let b = reconcile(&minimal("b"));
    let db_selector = |d: &Desired, n: &str| sts(d, n).selector.match_labels.unwrap();
    let router_selector = |d: &Desired, n: &str| {
        d.get::<Deployment>(&format!("{n}-router"))
            .expect("the child decodes")
            .unwrap()
            .spec
            .unwrap()
            .selector
            .match_labels
            .unwrap()
    };
    assert_ne!(db_selector(&a, "a"), db_selector(&b, "b"));
    assert_ne!(router_selector(&a, "a"), router_selector(&b, "b"));
    assert_ne!(db_selector(&a, "a"), router_selector(&a, "a"));
    assert_eq!(db_selector(&a, "a")["tier"], "mysql");
    assert_eq!(router_selector(&a, "a")["tier"], "mysqlrouter");
    // Every selector picks exactly the pods it is meant for.
    let db_pod_labels = template(&a, "a").metadata.unwrap().labels.unwrap();
    let selects = |selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>| {
        selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    };
    assert!(selects(&db_selector(&a, "a"), &db_pod_labels));
    assert!(!selects(&router_selector(&a, "a"), &db_pod_labels));
    let headless = a
        .get::<Service>("a-instances")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(headless.selector.unwrap(), db_selector(&a, "a"));
    let front = a
        .get::<Service>("a")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(front.selector.unwrap(), router_selector(&a, "a"));
    let pdb = a
        .get::<PodDisruptionBudget>("a-pdb")
        .expect("the child decodes")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(pdb.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(
        pdb.selector.unwrap().match_labels.unwrap(),
        db_selector(&a, "a")
    );
}

// --- the configuration hash -------------------------------------------------------------

#[test]
fn the_config_hash_is_the_hash_of_the_configmap_data() {
    let desired = reconcile(&minimal("ic"));
    assert_eq!(
        config_hash_of(&desired, "ic"),
        config::config_hash(&initconf_data(&desired, "ic"))
    );
    assert_eq!(config_hash_of(&desired, "ic").len(), 64);
}

#[test]
fn the_config_hash_changes_exactly_when_the_configuration_does() {
    let base = with(json!({"mycnf": "[mysqld]\nmax_connections=100\n"}));
    let hash =
        |cr: &InnoDBCluster| config_hash_of(&reconcile(cr), &cr.metadata.name.clone().unwrap());
    let before = hash(&base);
    assert_eq!(before, hash(&base.clone()));
    // Configuration changes.
    for change in [
        json!({"mycnf": "[mysqld]\nmax_connections=200\n"}),
        json!({"mycnf": null}),
    ] {
        let mut spec = serde_json::to_value(&base.spec).unwrap();
        for (k, v) in change.as_object().unwrap() {
            spec[k] = v.clone();
        }
        assert_ne!(hash(&cluster("ic", spec)), before, "{change}");
    }
    assert_ne!(
        hash(&cluster_in(
            "other-ns",
            "ic",
            serde_json::to_value(&base.spec).unwrap()
        )),
        before
    );
    // Everything else leaves the configuration (and so the pods) alone.
    for change in [
        json!({"instances": 5}),
        json!({"version": "8.4.7"}),
        json!({"router": {"instances": 0}}),
        json!({"service": {"type": "NodePort", "defaultPort": "mysql-ro"}}),
        json!({"podLabels": {"a": "b"}}),
        json!({"podAnnotations": {"a": "b"}}),
        json!({"resources": {"limits": {"memory": "1Gi"}}}),
        json!({"secretName": "other"}),
    ] {
        let mut spec = serde_json::to_value(&base.spec).unwrap();
        for (k, v) in change.as_object().unwrap() {
            spec[k] = v.clone();
        }
        assert_eq!(hash(&cluster("ic", spec)), before, "{change}");
    }
}

#[test]
fn scaling_does_not_change_the_pod_template() {
    let one = reconcile(&with(json!({"instances": 1})));
    let three = reconcile(&with(json!({"instances": 3})));
    assert_eq!(template(&one, "ic"), template(&three, "ic"));
    assert_eq!(initconf_data(&one, "ic"), initconf_data(&three, "ic"));
}

// --- validation -------------------------------------------------------------------------

#[test]
fn a_name_of_40_characters_is_accepted_and_41_rejected() {
    let forty = "a".repeat(40);
    reconcile(&minimal(&forty));
    let message = rejected(&minimal(&"a".repeat(41)));
    assert!(message.contains("metadata.name"), "{message}");
    assert!(message.contains("at most 40 characters"), "{message}");
    assert!(message.contains("got 41"), "{message}");
}

#[test]
fn a_name_that_cannot_name_a_service_is_rejected() {
    for name in ["1db", "db.prod"] {
        let message = rejected(&minimal(name));
        assert!(message.contains("metadata.name"), "{message}");
        assert!(message.contains("DNS-1035"), "{message}");
    }
}

#[test]
fn invalid_fields_are_rejected_naming_the_field_and_what_was_expected() {
    let cases = [
        (
            json!({"secretName": ""}),
            ["spec.secretName", "must name a Secret"],
        ),
        (
            json!({"secretName": "Bad_Name"}),
            ["spec.secretName", "Bad_Name"],
        ),
        (
            json!({"instances": 0}),
            ["spec.instances", "between 1 and 9, got 0"],
        ),
        (
            json!({"instances": 10}),
            ["spec.instances", "between 1 and 9, got 10"],
        ),
        (
            json!({"version": "8.4"}),
            ["spec.version", "MAJOR.MINOR.PATCH"],
        ),
        (json!({"version": "latest"}), ["spec.version", "\"latest\""]),
        (
            json!({"router": {"instances": -1}}),
            ["spec.router.instances", "0 or more, got -1"],
        ),
        (
            json!({"mycnf": "max_connections=10\n"}),
            ["spec.mycnf", "must contain a [mysqld] section"],
        ),
        (
            json!({"mycnf": "[client]\nuser=x\n"}),
            ["spec.mycnf", "[mysqld]"],
        ),
        (
            json!({"datadirVolumeClaimTemplate": {"storage": "0"}}),
            [
                "spec.datadirVolumeClaimTemplate.storage",
                "positive quantity",
            ],
        ),
        (
            json!({"datadirVolumeClaimTemplate": {"storage": "2 GB"}}),
            ["spec.datadirVolumeClaimTemplate.storage", "\"2 GB\""],
        ),
        (
            json!({"datadirVolumeClaimTemplate": {"storageClassName": "Fast_SSD"}}),
            [
                "spec.datadirVolumeClaimTemplate.storageClassName",
                "StorageClass",
            ],
        ),
        (
            json!({"datadirVolumeClaimTemplate": {"accessModes": []}}),
            [
                "spec.datadirVolumeClaimTemplate.accessModes",
                "at least one",
            ],
        ),
        (
            json!({"podLabels": {"tier": "gold"}}),
            ["spec.podLabels", "\"tier\" is set by the operator"],
        ),
        (
            json!({"podLabels": {"app.kubernetes.io/instance": "x"}}),
            ["spec.podLabels", "set by the operator"],
        ),
        (
            json!({"podLabels": {"team": "has space"}}),
            ["spec.podLabels[\"team\"]", "label value"],
        ),
        (
            json!({"podLabels": {"bad key!": "x"}}),
            ["spec.podLabels", "not a valid key"],
        ),
        (
            json!({"podAnnotations": {"mysql.operator-host.dev/config-hash": "x"}}),
            ["spec.podAnnotations", "configuration hash"],
        ),
    ];
    for (spec, parts) in cases {
        let message = rejected(&with(spec.clone()));
        for part in parts {
            assert!(
                message.contains(part),
                "{spec}: expected {part:?} in {message:?}"
            );
        }
    }
}

#[test]
fn valid_mycnf_variants_are_accepted() {
    for mycnf in [
        "[mysqld]\n",
        "# comment\n[client]\nx=1\n  [mysqld]  \nmax_connections=5",
    ] {
        reconcile(&with(json!({"mycnf": mycnf})));
    }
}

#[test]
fn values_the_schema_rejects_do_not_even_decode() {
    // The CRD makes secretName required and the enums closed; without an API server (render)
    // serde says the same, and the SDK turns it into an invalid spec naming the field.
    let missing = serde_json::from_value::<InnoDBCluster>(json!({
        "apiVersion": "mysql.operator-host.dev/v1alpha1", "kind": "InnoDBCluster",
        "metadata": {"name": "ic"}, "spec": {"instances": 1}
    }))
    .unwrap_err();
    assert!(missing.to_string().contains("secretName"), "{missing}");
    let bad_enum = serde_json::from_value::<InnoDBCluster>(json!({
        "apiVersion": "mysql.operator-host.dev/v1alpha1", "kind": "InnoDBCluster",
        "metadata": {"name": "ic"}, "spec": {"secretName": "s", "service": {"type": "External"}}
    }))
    .unwrap_err();
    assert!(bad_enum.to_string().contains("External"), "{bad_enum}");
}

// --- status -----------------------------------------------------------------------------

/// The child of `kind` the plugin desires for `cr`, as the API server would show it once
/// applied (generation 2, in namespace `db`) with `status`.
fn applied(cr: &InnoDBCluster, kind: &str, status: Value) -> Value {
    let mut object = reconcile(cr)
        .children
        .into_iter()
        .find(|c| c["kind"] == kind)
        .unwrap();
    object["metadata"]["namespace"] = "db".into();
    object["metadata"]["generation"] = 2.into();
    object["status"] = status;
    object
}

/// The StatefulSet applied for a cluster of `replicas` instances with `pods` pods, all of
/// the current revision, `ready` of them ready; its controller has seen its spec when
/// `generation_current`.
fn observed_sts(replicas: i32, pods: i32, ready: i32, generation_current: bool) -> Value {
    let status = StatefulSetStatus {
        replicas: pods,
        ready_replicas: Some(ready),
        updated_replicas: Some(pods),
        current_revision: Some("ic-1".into()),
        update_revision: Some("ic-1".into()),
        observed_generation: Some(if generation_current { 2 } else { 1 }),
        ..Default::default()
    };
    applied(
        &with(json!({"instances": replicas})),
        "StatefulSet",
        serde_json::to_value(status).unwrap(),
    )
}

/// The router Deployment applied for `replicas` routers, `ready` of them ready and rolled out.
fn observed_router(replicas: i32, ready: i32) -> Value {
    let status = DeploymentStatus {
        observed_generation: Some(2),
        replicas: Some(ready),
        ready_replicas: Some(ready),
        updated_replicas: Some(ready),
        available_replicas: Some(ready),
        ..Default::default()
    };
    applied(
        &with(json!({"router": {"instances": replicas}})),
        "Deployment",
        serde_json::to_value(status).unwrap(),
    )
}

/// The create-cluster Job made for `cr` as observed, with its `condition` (`Complete`,
/// `Failed`) if any.
fn create_cluster_job(cr: &InnoDBCluster, condition: Option<&str>) -> Value {
    group_job(cr, "ic-create-cluster", condition)
}

/// A group Job `name` running `cr`'s script, as observed with its `condition` if any.
fn group_job(cr: &InnoDBCluster, name: &str, condition: Option<&str>) -> Value {
    let mut job = applied(cr, "Job", Value::Null);
    job["metadata"]["name"] = name.into();
    if let Some(type_) = condition {
        job["status"] = json!({"conditions": [{"type": type_, "status": "True"}]});
    }
    job
}

/// The environment of the desired Job `name`'s container, by variable name.
fn job_env(desired: &Desired, name: &str) -> BTreeMap<String, EnvVar> {
    let job = desired.get::<Job>(name).unwrap().unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    pod.containers[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect()
}

/// Where the child of `kind` named `name` stands in the answer (children behind a barrier
/// come after it).
fn position(desired: &Desired, kind: &str, name: &str) -> usize {
    desired
        .children
        .iter()
        .position(|c| c["kind"] == kind && c["metadata"]["name"] == name)
        .unwrap()
}

/// The status from `observed`, the group created (its Job Complete) unless `observed` has
/// the Job itself.
fn status_of(cr: &InnoDBCluster, mut observed: Vec<Value>) -> Value {
    if !observed.iter().any(|o| o["kind"] == "Job") {
        observed.push(create_cluster_job(cr, Some("Complete")));
    }
    MySqlOperator::reconcile(cr, &observed_with(observed))
        .unwrap()
        .status
}

fn condition(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap()
}

fn with_previous(mut cr: InnoDBCluster, previous: &str) -> InnoDBCluster {
    cr.status = Some(InnoDBClusterStatus {
        cluster: ClusterStatus {
            status: previous.into(),
            online_instances: 0,
        },
        ..Default::default()
    });
    cr
}

#[test]
fn status_is_pending_until_the_statefulset_is_observed() {
    let status = status_of(&with(json!({"instances": 3})), vec![]);
    assert_eq!(status["cluster"]["status"], PENDING);
    assert_eq!(status["cluster"]["onlineInstances"], 0);
    assert_eq!(status["router"]["readyInstances"], 0);
    let ready = condition(&status, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "Pending");
    assert_eq!(ready["observedGeneration"], 4);
    assert!(ready.get("lastTransitionTime").is_none());
    assert_eq!(
        condition(&status, "RouterReady")["reason"],
        "DeploymentNotFound"
    );
}

#[test]
fn status_is_pending_while_the_statefulset_has_no_pods() {
    let status = status_of(
        &with(json!({"instances": 3})),
        vec![observed_sts(3, 0, 0, true)],
    );
    assert_eq!(status["cluster"]["status"], PENDING);
}

#[test]
fn status_is_initializing_once_pods_exist_but_none_is_ready() {
    let status = status_of(
        &with(json!({"instances": 3})),
        vec![observed_sts(3, 3, 0, true)],
    );
    assert_eq!(status["cluster"]["status"], INITIALIZING);
    assert_eq!(condition(&status, "Ready")["reason"], "Initializing");
}

#[test]
fn status_is_online_partial_while_some_instances_are_ready() {
    let status = status_of(
        &with(json!({"instances": 3})),
        vec![observed_sts(3, 3, 1, true)],
    );
    assert_eq!(status["cluster"]["status"], ONLINE_PARTIAL);
    assert_eq!(status["cluster"]["onlineInstances"], 1);
    let ready = condition(&status, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["message"], "1 of 3 instances are online");
}

#[test]
fn status_is_online_when_every_instance_is_ready_and_the_statefulset_is_current() {
    let status = status_of(
        &with(json!({"instances": 3})),
        vec![observed_sts(3, 3, 3, true)],
    );
    assert_eq!(status["cluster"]["status"], ONLINE);
    assert_eq!(status["cluster"]["onlineInstances"], 3);
    let ready = condition(&status, "Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("True"), Some("Online"))
    );
}

#[test]
fn status_is_not_online_while_the_statefulset_lags_the_spec() {
    // The controller has not seen the latest StatefulSet generation yet.
    let stale = status_of(
        &with(json!({"instances": 3})),
        vec![observed_sts(3, 3, 3, false)],
    );
    assert_eq!(stale["cluster"]["status"], ONLINE_PARTIAL);
    // Scaled up 1 -> 3 but the observed StatefulSet still has 1 replica.
    let scaling = status_of(
        &with(json!({"instances": 3})),
        vec![observed_sts(1, 1, 1, true)],
    );
    assert_eq!(scaling["cluster"]["status"], ONLINE_PARTIAL);
    assert_eq!(condition(&scaling, "Ready")["reason"], "Scaling");
}

#[test]
fn status_is_offline_when_no_instance_is_ready_after_having_been_online() {
    for previous in [ONLINE, ONLINE_PARTIAL, OFFLINE] {
        let cr = with_previous(with(json!({"instances": 3})), previous);
        let status = status_of(&cr, vec![observed_sts(3, 3, 0, true)]);
        assert_eq!(status["cluster"]["status"], OFFLINE, "after {previous}");
        assert_eq!(condition(&status, "Ready")["reason"], "Offline");
    }
    for previous in [PENDING, INITIALIZING, ""] {
        let cr = with_previous(with(json!({"instances": 3})), previous);
        let status = status_of(&cr, vec![observed_sts(3, 3, 0, true)]);
        assert_eq!(
            status["cluster"]["status"], INITIALIZING,
            "after {previous:?}"
        );
    }
    // And back online once an instance is ready.
    let cr = with_previous(with(json!({"instances": 3})), OFFLINE);
    let status = status_of(&cr, vec![observed_sts(3, 3, 2, true)]);
    assert_eq!(status["cluster"]["status"], ONLINE_PARTIAL);
}

#[test]
fn router_status_counts_ready_routers() {
    let cr = with(json!({"router": {"instances": 2}}));
    let partial = status_of(&cr, vec![observed_router(2, 1)]);
    assert_eq!(partial["router"]["readyInstances"], 1);
    let condition_partial = condition(&partial, "RouterReady");
    assert_eq!(condition_partial["status"], "False");
    assert_eq!(condition_partial["message"], "1 of 2 routers are ready");
    let ready = status_of(&cr, vec![observed_router(2, 2)]);
    assert_eq!(ready["router"]["readyInstances"], 2);
    assert_eq!(condition(&ready, "RouterReady")["status"], "True");
    // Observed with an older replica count: not ready yet.
    let scaling = status_of(
        &with(json!({"router": {"instances": 3}})),
        vec![observed_router(2, 2)],
    );
    assert_eq!(condition(&scaling, "RouterReady")["status"], "False");
    let none = status_of(&with(json!({"router": {"instances": 0}})), vec![]);
    let no_router = condition(&none, "RouterReady");
    assert_eq!(
        (no_router["status"].as_str(), no_router["reason"].as_str()),
        (Some("True"), Some("NoRouters"))
    );
}

#[test]
fn the_previous_status_written_by_the_host_decodes() {
    // The host adds observedGeneration and its Reconciled condition with transition times.
    let cr: InnoDBCluster = serde_json::from_value(json!({
        "apiVersion": "mysql.operator-host.dev/v1alpha1", "kind": "InnoDBCluster",
        "metadata": {"name": "ic", "namespace": "db", "generation": 2},
        "spec": {"secretName": "s"},
        "status": {
            "observedGeneration": 2,
            "cluster": {"status": "ONLINE", "onlineInstances": 1},
            "router": {"readyInstances": 1},
            "conditions": [{"type": "Reconciled", "status": "True", "reason": "ReconcileSucceeded",
                            "message": "m", "observedGeneration": 2,
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        }
    }))
    .unwrap();
    let status = status_of(&cr, vec![observed_sts(1, 1, 0, true)]);
    assert_eq!(status["cluster"]["status"], OFFLINE);
}

#[test]
fn status_is_not_online_until_a_new_version_is_rolled_out() {
    // Every instance of the old version is ready: the observed StatefulSet is the one before
    // the host applies the new version, so the new generation is not online yet.
    let new = with(json!({"instances": 3, "version": "9.1.0"}));
    let old_sts = observed_sts(3, 3, 3, true);
    let status = status_of(&new, vec![old_sts.clone()]);
    assert_eq!(status["cluster"]["status"], ONLINE_PARTIAL);
    let ready = condition(&status, "Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("RollingOut"))
    );
    assert!(
        ready["message"].as_str().unwrap().contains("desired spec"),
        "{ready}"
    );
    // Applied, pods ready, but one of the three is still of the old revision.
    let mut rolling = applied(&new, "StatefulSet", old_sts["status"].clone());
    rolling["status"]["updatedReplicas"] = 2.into();
    rolling["status"]["updateRevision"] = "ic-2".into();
    let status = status_of(&new, vec![rolling.clone()]);
    assert_eq!(status["cluster"]["status"], ONLINE_PARTIAL);
    // Done: the controller moves currentRevision to the update revision.
    rolling["status"]["updatedReplicas"] = 3.into();
    rolling["status"]["currentRevision"] = "ic-2".into();
    let status = status_of(&new, vec![rolling]);
    assert_eq!(status["cluster"]["status"], ONLINE);
}

#[test]
fn routers_are_not_ready_until_a_new_version_is_rolled_out() {
    let new = with(json!({"router": {"instances": 2}, "version": "9.1.0"}));
    let old_router = observed_router(2, 2);
    let status = status_of(&new, vec![old_router.clone()]);
    let router = condition(&status, "RouterReady");
    assert_eq!(router["status"], "False");
    assert!(
        router["message"].as_str().unwrap().contains("rollout"),
        "{router}"
    );
    let current = applied(&new, "Deployment", old_router["status"].clone());
    let status = status_of(&new, vec![current]);
    assert_eq!(condition(&status, "RouterReady")["status"], "True");
}

#[test]
fn resources_the_api_server_refuses_are_rejected_with_the_entry() {
    for (resources, field) in [
        // "Limit must be set for non overcommitable resources".
        (
            json!({"requests": {"example.com/gpu": 1}}),
            r#"spec.resources.limits["example.com/gpu"]: "#,
        ),
        (
            json!({"requests": {"example.com/gpu": 1}, "limits": {"example.com/gpu": 2}}),
            r#"spec.resources.requests["example.com/gpu"]: "#,
        ),
        (
            json!({"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}}),
            r#"spec.resources.limits["hugepages-2Mi"]: "#,
        ),
        (
            json!({"requests": {"k": 1}}),
            r#"spec.resources.requests["k"]: "#,
        ),
        (
            json!({"limits": {"memory": "lots"}}),
            r#"spec.resources.limits["memory"]: "#,
        ),
        (
            json!({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}),
            r#"spec.resources.requests["memory"]: "#,
        ),
        (
            json!({"claims": [{"name": "gpu"}]}),
            "spec.resources.claims: ",
        ),
    ] {
        let message = rejected(&with(json!({ "resources": resources })));
        assert!(message.starts_with(field), "{resources}: {message}");
    }
}

#[test]
fn the_mysql_container_gets_resources_as_the_api_server_stores_them() {
    let desired = reconcile(&with(json!({"resources": {
        "requests": {"cpu": 1.5, "example.com/gpu": "1"},
        "limits": {"memory": "1.5Gi", "example.com/gpu": 1},
        "claims": [],
    }})));
    let resources = mysql_container(&desired, "ic").resources.unwrap();
    let requests = resources.requests.unwrap();
    assert_eq!(
        (
            requests["cpu"].0.as_str(),
            requests["example.com/gpu"].0.as_str()
        ),
        ("1500m", "1")
    );
    assert_eq!(resources.limits.unwrap()["memory"].0, "1536Mi");
    assert_eq!(resources.claims, None);
    let empty = reconcile(&with(json!({"resources": {"requests": {}, "limits": {}}})));
    let resources = mysql_container(&empty, "ic").resources.unwrap();
    assert_eq!((resources.requests, resources.limits), (None, None));
}

// --- contract 0.2.0: the root Secret (related) and the create-cluster Job (barrier) ------

#[test]
fn the_router_waits_behind_the_job_that_creates_the_group() {
    let desired = reconcile(&minimal("ic"));
    let options = desired.options_of::<Job>("ic-create-cluster").unwrap();
    assert_eq!(options.update, UpdateStrategy::CreateOnly, "run once");
    assert_eq!(
        options.ready_when,
        Some(Readiness::Condition("Complete".into()))
    );
    let job = position(&desired, "Job", "ic-create-cluster");
    assert!(position(&desired, "StatefulSet", "ic") < job);
    assert!(job < position(&desired, "Deployment", "ic-router"));
    let job = desired.get::<Job>("ic-create-cluster").unwrap().unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert!(pod.containers[0].command.as_ref().unwrap()[2].contains("dba.createCluster"));
    let env = job_env(&desired, "ic-create-cluster");
    assert_eq!(env["FIRST"].value.as_deref(), Some("ic-0.ic-instances"));
    let password = env["MYSQL_PASSWORD"].value_from.as_ref().unwrap();
    assert_eq!(password.secret_key_ref.as_ref().unwrap().name, "mysql-root");
}

#[test]
fn every_instance_ready_is_not_online_until_the_group_is_created() {
    let cr = with(json!({"instances": 3}));
    let status = status_of(
        &cr,
        vec![observed_sts(3, 3, 3, true), create_cluster_job(&cr, None)],
    );
    assert_eq!(status["cluster"]["status"], INITIALIZING);
    assert_eq!(condition(&status, "Ready")["reason"], "CreatingCluster");
    let status = status_of(
        &cr,
        vec![
            observed_sts(3, 3, 3, true),
            create_cluster_job(&cr, Some("Failed")),
        ],
    );
    let ready = condition(&status, "Ready");
    assert_eq!(ready["reason"], "CreateClusterFailed");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("ic-create-cluster")
    );
    let status = status_of(
        &cr,
        vec![
            observed_sts(3, 3, 3, true),
            create_cluster_job(&cr, Some("Complete")),
        ],
    );
    assert_eq!(status["cluster"]["status"], ONLINE);
}

/// A cluster created with `created_with` instances, now of `cr`'s size, as observed with its
/// StatefulSet rolled out and every instance ready.
fn grown_observed(cr: &InnoDBCluster, created_with: i32) -> Vec<Value> {
    let instances = cr.spec.instances;
    vec![
        observed_sts(instances, instances, instances, true),
        create_cluster_job(&with(json!({"instances": created_with})), Some("Complete")),
    ]
}

#[test]
fn a_cluster_grown_after_its_creation_adds_the_new_instances_with_a_job_of_its_size() {
    let cr = with(json!({"instances": 3}));
    let desired = MySqlOperator::reconcile(&cr, &observed_with(grown_observed(&cr, 1))).unwrap();
    let job = desired.get::<Job>("ic-add-instances-3").unwrap().unwrap();
    let options = desired.options_of::<Job>("ic-add-instances-3").unwrap();
    assert_eq!(options.update, UpdateStrategy::CreateOnly, "run once");
    assert_eq!(
        job_env(&desired, "ic-add-instances-3")["MEMBERS"]
            .value
            .as_deref(),
        Some("ic-1.ic-instances,ic-2.ic-instances")
    );
    let annotations = job.metadata.annotations.unwrap();
    assert_eq!(annotations[children::GROUP_INSTANCES_ANNOTATION], "3");
    // After the create-cluster barrier: it never runs before the group exists.
    assert!(
        position(&desired, "Job", "ic-create-cluster")
            < position(&desired, "Job", "ic-add-instances-3")
    );

    // Every instance ready is not ONLINE until the new ones are members.
    let status = &desired.status;
    assert_eq!(status["cluster"]["status"], ONLINE_PARTIAL);
    assert_eq!(condition(status, "Ready")["reason"], "AddingInstances");
    let mut observed = grown_observed(&cr, 1);
    observed.push(group_job(&cr, "ic-add-instances-3", Some("Failed")));
    let status = status_of(&cr, observed);
    let ready = condition(&status, "Ready");
    assert_eq!(ready["reason"], "AddInstancesFailed");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("ic-add-instances-3")
    );
    let mut observed = grown_observed(&cr, 1);
    observed.push(group_job(&cr, "ic-add-instances-3", Some("Complete")));
    assert_eq!(status_of(&cr, observed)["cluster"]["status"], ONLINE);
}

#[test]
fn a_cluster_grown_while_its_group_is_being_created_waits_for_that_job_first() {
    let cr = with(json!({"instances": 3}));
    let observed = vec![
        observed_sts(3, 3, 3, true),
        create_cluster_job(&with(json!({"instances": 1})), None),
    ];
    let desired = MySqlOperator::reconcile(&cr, &observed_with(observed)).unwrap();
    assert!(desired.get::<Job>("ic-add-instances-3").unwrap().is_none());
    assert_eq!(desired.status["cluster"]["status"], INITIALIZING);
    assert_eq!(
        condition(&desired.status, "Ready")["reason"],
        "CreatingCluster"
    );
}

#[test]
fn a_cluster_at_or_below_its_created_size_needs_no_add_job() {
    for (instances, created_with) in [(3, 3), (1, 3), (3, 5)] {
        let cr = with(json!({"instances": instances}));
        let desired =
            MySqlOperator::reconcile(&cr, &observed_with(grown_observed(&cr, created_with)))
                .unwrap();
        assert!(
            !desired.children.iter().any(|c| c["metadata"]["name"]
                .as_str()
                .unwrap()
                .contains("add-instances")),
            "{instances} instances, created with {created_with}"
        );
        assert_eq!(desired.status["cluster"]["status"], ONLINE);
    }
}

/// The answer to `cr` with `observed`.
fn reconciled(cr: &InnoDBCluster, observed: Vec<Value>) -> Desired {
    MySqlOperator::reconcile(cr, &observed_with(observed)).unwrap()
}

/// Whether `desired` holds the Job `name`.
fn has_job(desired: &Desired, name: &str) -> bool {
    desired.get::<Job>(name).unwrap().is_some()
}

/// A cluster of `running` instances (every one ready, created with `created_with`) as
/// observed, with `jobs` too.
fn resized_observed(running: i32, created_with: i32, jobs: Vec<Value>) -> Vec<Value> {
    let mut observed = vec![
        observed_sts(running, running, running, true),
        create_cluster_job(&with(json!({"instances": created_with})), Some("Complete")),
    ];
    observed.extend(jobs);
    observed
}

#[test]
fn a_shrunk_cluster_removes_the_instances_from_the_group_before_the_statefulset_shrinks() {
    let cr = with(json!({"instances": 2}));
    let desired = reconciled(&cr, resized_observed(5, 5, vec![]));
    let job = desired
        .get::<Job>("ic-remove-instances-2")
        .unwrap()
        .unwrap();
    let options = desired.options_of::<Job>("ic-remove-instances-2").unwrap();
    assert_eq!(options.update, UpdateStrategy::CreateOnly, "run once");
    assert_eq!(
        options.ready_when,
        Some(Readiness::Condition("Complete".into()))
    );
    // The last first; the first instance (the one the Job connects through) stays.
    let env = job_env(&desired, "ic-remove-instances-2");
    assert_eq!(
        env["REMOVED"].value.as_deref(),
        Some("ic-4.ic-instances,ic-3.ic-instances,ic-2.ic-instances")
    );
    assert!(!env.contains_key("MEMBERS"));
    let script = &job.spec.unwrap().template.spec.unwrap().containers[0]
        .command
        .clone()
        .unwrap()[2];
    for call in ["removeInstance(", "rescan(", "setPrimaryInstance("] {
        assert!(script.contains(call), "{call}");
    }
    // The StatefulSet (and everything else after it) waits behind the Job.
    assert!(
        position(&desired, "Job", "ic-remove-instances-2")
            < position(&desired, "StatefulSet", "ic")
    );
    assert_eq!(desired.status["cluster"]["status"], ONLINE_PARTIAL);
    assert_eq!(
        condition(&desired.status, "Ready")["reason"],
        "RemovingInstances"
    );

    let failed = group_job(&cr, "ic-remove-instances-2", Some("Failed"));
    let status = status_of(&cr, resized_observed(5, 5, vec![failed]));
    let ready = condition(&status, "Ready");
    assert_eq!(ready["reason"], "RemoveInstancesFailed");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("ic-remove-instances-2")
    );

    // Complete: still desired while the StatefulSet shrinks (the barrier passes), then pruned.
    let complete = group_job(&cr, "ic-remove-instances-2", Some("Complete"));
    let desired = reconciled(&cr, resized_observed(5, 5, vec![complete.clone()]));
    assert!(has_job(&desired, "ic-remove-instances-2"));
    assert_eq!(sts(&desired, "ic").replicas, Some(2));
    let desired = reconciled(&cr, resized_observed(2, 5, vec![complete]));
    assert!(!has_job(&desired, "ic-remove-instances-2"));
    assert_eq!(desired.status["cluster"]["status"], ONLINE);
}

#[test]
fn a_remove_job_still_running_is_never_pruned() {
    // The StatefulSet was scaled by hand meanwhile: the Job is what matters.
    let cr = with(json!({"instances": 2}));
    let running = group_job(&cr, "ic-remove-instances-2", None);
    let desired = reconciled(&cr, resized_observed(2, 5, vec![running]));
    assert!(has_job(&desired, "ic-remove-instances-2"));
}

#[test]
fn a_cluster_grown_again_after_a_shrink_adds_the_instances_the_shrink_removed() {
    // Made with 5, shrunk to 2 (the group has 2 members), now 3: instance 2 must join again.
    let cr = with(json!({"instances": 3}));
    let desired = reconciled(&cr, resized_observed(2, 5, vec![]));
    assert!(has_job(&desired, "ic-add-instances-3"));
    assert_eq!(sts(&desired, "ic").replicas, Some(3));
    // Once the StatefulSet runs 3, the Job stays desired until it completes, then goes.
    let running = group_job(&cr, "ic-add-instances-3", None);
    let observed = resized_observed(3, 5, vec![running]);
    let desired = reconciled(&cr, observed);
    assert!(has_job(&desired, "ic-add-instances-3"));
    assert_eq!(
        condition(&desired.status, "Ready")["reason"],
        "AddingInstances"
    );
    let complete = group_job(&cr, "ic-add-instances-3", Some("Complete"));
    let desired = reconciled(&cr, resized_observed(3, 5, vec![complete]));
    assert!(!has_job(&desired, "ic-add-instances-3"));
    assert_eq!(desired.status["cluster"]["status"], ONLINE);
}

#[test]
fn a_missing_root_secret_creates_no_server_and_says_so() {
    let desired = MySqlOperator::reconcile(&minimal("ic"), &Observed::default()).unwrap();
    for kind in ["StatefulSet", "Job", "Deployment"] {
        assert!(
            !desired.children.iter().any(|c| c["kind"] == kind),
            "no {kind} without the Secret"
        );
    }
    assert_eq!(desired.status["cluster"]["status"], PENDING);
    let ready = condition(&desired.status, "Ready");
    assert_eq!(ready["reason"], "SecretNotFound");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("\"mysql-root\"")
    );
    assert_eq!(condition(&desired.status, "SecretReady")["status"], "False");
}

#[test]
fn a_root_secret_without_a_key_names_the_key() {
    let mut secret = root_secret();
    secret["data"]
        .as_object_mut()
        .unwrap()
        .remove("rootPassword");
    let observed = Observed::default().with_related("root", vec![secret]);
    let desired = MySqlOperator::reconcile(&minimal("ic"), &observed).unwrap();
    assert!(!desired.children.iter().any(|c| c["kind"] == "StatefulSet"));
    let ready = condition(&desired.status, "SecretReady");
    assert_eq!(ready["reason"], "KeysMissing");
    assert!(ready["message"].as_str().unwrap().contains("rootPassword"));
}

#[test]
fn a_running_cluster_keeps_its_children_when_the_secret_goes() {
    let cr = with(json!({"instances": 3}));
    let observed = Observed::new(vec![observed_sts(3, 3, 3, true)]);
    let desired = MySqlOperator::reconcile(&cr, &observed).unwrap();
    for kind in ["StatefulSet", "Job", "Deployment"] {
        assert!(
            desired.children.iter().any(|c| c["kind"] == kind),
            "the {kind} stays"
        );
    }
    assert_eq!(
        condition(&desired.status, "SecretReady")["reason"],
        "SecretNotFound"
    );
}

#[test]
fn the_root_secret_is_read_as_hashes_by_name_from_the_spec() {
    let related = MySqlOperator::related();
    assert_eq!(related.len(), 1);
    assert_eq!(
        related[0].selector,
        operator_host_sdk::RelatedSelector::NameFromPath("spec.secretName".into())
    );
    assert_eq!(
        related[0].secret_view,
        operator_host_sdk::SecretView::DataHash
    );
}

#[test]
fn admission_refuses_what_reconcile_would() {
    let cr = cluster("db", json!({"secretName": "Not A Name"}));
    let errors: Vec<String> = MySqlOperator::validate(&cr, None)
        .errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.secretName: Invalid value: "),
        "{errors:?}"
    );
    assert!(MySqlOperator::validate(&minimal("db"), None).is_valid());
}
