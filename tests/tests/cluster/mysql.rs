//! The MySQL plugin against the real API server: status from PENDING to ONLINE, scaling, routers, config rolls (not ONLINE until rolled out), GC, rejections.
//!
//! The StatefulSet's claims are bound by the devcluster's default StorageClass (hostPath
//! volumes provisioned by the controller-manager), as a user's cluster would bind them.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Api, ResourceExt};
use operator_host_sdk::job_condition_holds;
use operator_host_tests::devcluster::{TestNamespace, kubectl, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{condition, patch_spec};
use operator_host_tests::recorder::Recorder;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
const NAME: &str = "mycluster";

/// A namespace with the root Secret, and a host running the MySQL plugin for it.
async fn mysql_host(test: &str) -> (TestNamespace, Host, Api<DynamicObject>) {
    let ns = TestNamespace::new(test).await.unwrap();
    operator_host_tests::mysql::create_root_secret(&ns).await;
    // The examples' policy lets the plugin read the root Secret (as hashes).
    let host = Host::start_with_examples_policy(plugin_path("plugins", "mysql"), ns.name()).await;
    let api = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &operator_host_tests::mysql::resource(),
    );
    (ns, host, api)
}

fn cluster_object(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "mysql.operator-host.dev/v1alpha1",
        "kind": "InnoDBCluster",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

async fn create(api: &Api<DynamicObject>, spec: Value) -> DynamicObject {
    api.create(&PostParams::default(), &cluster_object(NAME, spec))
        .await
        .unwrap()
}

/// Waits until the status of the current generation is `state` with `online` instances.
async fn wait_state(api: &Api<DynamicObject>, state: &str, online: i64) -> DynamicObject {
    wait_for(
        &format!("{NAME} to be {state} with {online} online"),
        TIMEOUT,
        || async {
            let cr = api.get(NAME).await?;
            let status = &cr.data["status"];
            Ok((status["cluster"]["status"] == state
                && status["cluster"]["onlineInstances"] == online
                && status["observedGeneration"].as_i64() == cr.metadata.generation)
                .then_some(cr))
        },
    )
    .await
    .unwrap()
}

/// Every `status.cluster.status` the API server stored for the cluster, in order, from a
/// watch started before the change (polling could miss short-lived states).
struct StateLog(Recorder<DynamicObject>);

impl StateLog {
    async fn start(api: &Api<DynamicObject>) -> StateLog {
        let params = WatchParams::default().fields(&format!("metadata.name={NAME}"));
        StateLog(Recorder::start(api, params).await)
    }

    fn states(&self) -> Vec<String> {
        let mut states: Vec<String> = Vec::new();
        for seen in self.0.seen() {
            if let Some(state) = seen.object.data["status"]["cluster"]["status"].as_str()
                && states.last().map(String::as_str) != Some(state)
            {
                states.push(state.to_string());
            }
        }
        states
    }
}

async fn stateful_set(ns: &TestNamespace) -> StatefulSet {
    ns.api::<StatefulSet>().get(NAME).await.unwrap()
}

#[tokio::test]
async fn a_new_cluster_is_pending_then_online_with_its_volume_bound() {
    let (ns, host, api) = mysql_host("mysql-create").await;
    let log = StateLog::start(&api).await;
    let cr = create(&api, json!({"secretName": "mysql-root"})).await;
    let online = wait_state(&api, "ONLINE", 1).await;
    let claim = ns
        .api::<PersistentVolumeClaim>()
        .get(&format!("datadir-{NAME}-0"))
        .await
        .unwrap();
    assert_eq!(
        claim.status.and_then(|s| s.phase).as_deref(),
        Some("Bound"),
        "the data volume claim is bound"
    );

    let states = log.states();
    assert_eq!(
        states.first().map(String::as_str),
        Some("PENDING"),
        "{states:?}"
    );
    assert_eq!(
        states.last().map(String::as_str),
        Some("ONLINE"),
        "{states:?}"
    );
    assert_eq!(condition(&online, "Ready")["status"], "True");
    assert_eq!(condition(&online, "Reconciled")["status"], "True");
    wait_for("the router to be ready", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        Ok((condition(&cr, "RouterReady")["status"] == "True"
            && cr.data["status"]["router"]["readyInstances"] == 1)
            .then_some(()))
    })
    .await
    .unwrap();

    // Every child exists, owned by the cluster; defaults were applied by the API server.
    let uid = cr.metadata.uid.clone();
    let owner = |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
        refs.first().map(|r| r.uid.clone())
    };
    assert_eq!(owner(stateful_set(&ns).await.owner_references()), uid);
    for service in [NAME, "mycluster-instances"] {
        let service = ns.api::<Service>().get(service).await.unwrap();
        assert_eq!(owner(service.owner_references()), uid);
    }
    let router = ns
        .api::<Deployment>()
        .get("mycluster-router")
        .await
        .unwrap();
    assert_eq!(owner(router.owner_references()), uid);
    let config = ns
        .api::<ConfigMap>()
        .get("mycluster-initconf")
        .await
        .unwrap();
    assert_eq!(owner(config.owner_references()), uid);
    let account = ns
        .api::<ServiceAccount>()
        .get("mycluster-sa")
        .await
        .unwrap();
    assert_eq!(owner(account.owner_references()), uid);
    let pdb = ns
        .api::<PodDisruptionBudget>()
        .get("mycluster-pdb")
        .await
        .unwrap();
    assert_eq!(owner(pdb.owner_references()), uid);
    let stored = api.get(NAME).await.unwrap();
    assert_eq!(stored.data["spec"]["instances"], 1);
    assert_eq!(stored.data["spec"]["version"], "8.4.6");
    assert_eq!(stored.data["spec"]["router"]["instances"], 1);
    assert_eq!(
        stored.data["spec"]["datadirVolumeClaimTemplate"]["storage"],
        "2Gi"
    );
    assert_eq!(stored.data["spec"]["service"]["defaultPort"], "mysql-rw");

    let output = kubectl()
        .args(["get", "ic", "-n", ns.name()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let table = String::from_utf8_lossy(&output.stdout);
    let mut lines = table.lines();
    let header: Vec<_> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ONLINE", "INSTANCES", "ROUTERS", "AGE"]
    );
    let row: Vec<_> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], [NAME, "ONLINE", "1", "1", "1"]);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn scaling_1_to_3_to_1_is_followed_by_the_statefulset_the_group_and_the_status() {
    let (ns, host, api) = mysql_host("mysql-scale").await;
    create(&api, json!({"secretName": "mysql-root", "instances": 1})).await;
    wait_state(&api, "ONLINE", 1).await;

    let log = StateLog::start(&api).await;
    patch_spec(&api, NAME, json!({"instances": 3})).await;
    wait_state(&api, "ONLINE", 3).await;
    assert_eq!(stateful_set(&ns).await.spec.unwrap().replicas, Some(3));
    // The first reconcile after the patch still observes one ready pod of three.
    let states = log.states();
    assert!(
        states.contains(&"ONLINE_PARTIAL".to_string()),
        "scaling up went through {states:?}"
    );
    // ONLINE again only once the Job that adds the new instances to the group completed
    // (kwok completes Jobs): the create-cluster Job made a group of one.
    let add = ns
        .api::<Job>()
        .get("mycluster-add-instances-3")
        .await
        .unwrap();
    assert!(
        job_condition_holds(&add, "Complete"),
        "ONLINE before the add Job completed"
    );

    // Shrinking: the instances leave the group (a Job kwok completes) before the
    // StatefulSet lets their pods go. Watched, as both happen within a second.
    let jobs = Recorder::start(&ns.api::<Job>(), WatchParams::default()).await;
    let sets = Recorder::start(&ns.api::<StatefulSet>(), WatchParams::default()).await;
    patch_spec(&api, NAME, json!({"instances": 1})).await;
    wait_state(&api, "ONLINE", 1).await;
    assert_eq!(stateful_set(&ns).await.spec.unwrap().replicas, Some(1));
    let remove = "mycluster-remove-instances-1";
    let removed_at = jobs
        .seen()
        .into_iter()
        .find(|seen| {
            seen.object.name_any() == remove && job_condition_holds(&seen.object, "Complete")
        })
        .unwrap_or_else(|| panic!("no completed {remove} was seen"));
    let container = &removed_at
        .object
        .spec
        .clone()
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0];
    let removed = container
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|var| var.name == "REMOVED");
    assert_eq!(
        removed.and_then(|var| var.value.as_deref()),
        Some("mycluster-2.mycluster-instances,mycluster-1.mycluster-instances")
    );
    let shrunk_at = sets
        .seen()
        .into_iter()
        .find(|seen| seen.object.spec.as_ref().and_then(|s| s.replicas) == Some(1))
        .expect("the StatefulSet shrunk");
    assert!(
        shrunk_at.revision > removed_at.revision,
        "the StatefulSet shrank (revision {}) before {remove} completed (revision {})",
        shrunk_at.revision,
        removed_at.revision
    );
    wait_for("the remove Job to be pruned", TIMEOUT, || async {
        Ok(ns.absent::<Job>(remove).await?.then_some(()))
    })
    .await
    .unwrap();
    // Pruned at the smaller size: a later growth runs it anew.
    wait_for("the add Job to be pruned", TIMEOUT, || async {
        Ok(ns
            .absent::<Job>("mycluster-add-instances-3")
            .await?
            .then_some(()))
    })
    .await
    .unwrap();
    let selector = "mysql.oracle.com/cluster=mycluster,tier=mysql";
    wait_for("one MySQL pod", TIMEOUT, || async {
        let pods = ns.labelled::<Pod>(selector).await?;
        Ok((pods.len() == 1).then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn zero_routers_prune_the_router_deployment_and_keep_the_service() {
    let (ns, host, api) = mysql_host("mysql-router").await;
    create(
        &api,
        json!({"secretName": "mysql-root", "router": {"instances": 2}}),
    )
    .await;
    wait_for("two ready routers", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        Ok((cr.data["status"]["router"]["readyInstances"] == 2).then_some(()))
    })
    .await
    .unwrap();
    let service_uid = ns.api::<Service>().get(NAME).await.unwrap().uid();

    patch_spec(&api, NAME, json!({"router": {"instances": 0}})).await;
    wait_for("the router Deployment to be pruned", TIMEOUT, || async {
        Ok(ns
            .absent::<Deployment>("mycluster-router")
            .await?
            .then_some(()))
    })
    .await
    .unwrap();
    // Until the prune is observed, the status still counts the routers being removed.
    let cr = wait_for("no ready routers", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        Ok((condition(&cr, "RouterReady")["reason"] == "NoRouters"
            && cr.data["status"]["router"]["readyInstances"] == 0)
            .then_some(cr))
    })
    .await
    .unwrap();
    assert_eq!(condition(&cr, "RouterReady")["status"], "True");
    let service = ns.api::<Service>().get(NAME).await.unwrap();
    assert_eq!(service.uid(), service_uid);
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn changing_mycnf_changes_the_config_hash_and_rolls_the_statefulset() {
    let (ns, host, api) = mysql_host("mysql-mycnf").await;
    create(&api, json!({"secretName": "mysql-root"})).await;
    wait_state(&api, "ONLINE", 1).await;
    let hash = |sts: &StatefulSet| {
        sts.spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()["mysql.operator-host.dev/config-hash"]
            .clone()
    };
    let before = stateful_set(&ns).await;
    let old_hash = hash(&before);
    let old_revision = before.status.unwrap().update_revision.unwrap();

    let patched = api
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mycnf": "[mysqld]\nmax_connections=300\n"}})),
        )
        .await
        .unwrap();
    // Every status version of the new generation: ONLINE only once the StatefulSet, read
    // after it (so only further along), has rolled the new configuration out.
    let generation = patched.metadata.generation;
    let mut versions = api
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={NAME}")),
            &patched.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let mut not_online = 0;
    loop {
        let event = tokio::time::timeout(TIMEOUT, versions.next())
            .await
            .expect("ONLINE for the new generation in time")
            .expect("the watch goes on")
            .unwrap();
        let (WatchEvent::Added(cr) | WatchEvent::Modified(cr)) = event else {
            continue;
        };
        let status = &cr.data["status"];
        if status["observedGeneration"].as_i64() != generation {
            continue;
        }
        if status["cluster"]["status"] != "ONLINE" {
            not_online += 1;
            continue;
        }
        let sts = stateful_set(&ns).await;
        let sts_status = sts.status.clone().unwrap_or_default();
        assert!(
            hash(&sts) != old_hash
                && sts_status.observed_generation >= sts.metadata.generation
                && sts_status.update_revision.as_deref() != Some(old_revision.as_str())
                && sts_status.current_revision == sts_status.update_revision
                && sts_status.ready_replicas == Some(1),
            "ONLINE for generation {generation:?} before the StatefulSet rolled it out: {sts_status:?}"
        );
        break;
    }
    assert!(
        not_online > 0,
        "the new generation was never reported not ONLINE before it was"
    );
    let rolled = wait_for("a new StatefulSet revision", TIMEOUT, || async {
        let sts = stateful_set(&ns).await;
        let status = sts.status.clone().unwrap_or_default();
        Ok((hash(&sts) != old_hash
            && status
                .update_revision
                .as_deref()
                .is_some_and(|r| r != old_revision)
            && status.current_revision == status.update_revision
            && status.ready_replicas == Some(1))
        .then_some(sts))
    })
    .await
    .unwrap();
    let config = ns
        .api::<ConfigMap>()
        .get("mycluster-initconf")
        .await
        .unwrap();
    let data = config.data.unwrap();
    assert_eq!(data["99-extra.cnf"], "[mysqld]\nmax_connections=300\n");
    assert!(data["my.cnf"].contains("!include /etc/mysql-initconf/99-extra.cnf"));
    // The pod runs the new revision.
    let pod = ns.api::<Pod>().get("mycluster-0").await.unwrap();
    assert_eq!(
        pod.labels().get("controller-revision-hash"),
        rolled.status.unwrap().update_revision.as_ref()
    );
    wait_state(&api, "ONLINE", 1).await;
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn deleting_the_cluster_garbage_collects_its_children() {
    let (ns, host, api) = mysql_host("mysql-gc").await;
    create(&api, json!({"secretName": "mysql-root"})).await;
    wait_for("the PodDisruptionBudget", TIMEOUT, || async {
        Ok(ns
            .api::<PodDisruptionBudget>()
            .get_opt("mycluster-pdb")
            .await?)
    })
    .await
    .unwrap();
    api.delete(NAME, &DeleteParams::background()).await.unwrap();
    wait_for("every child to be collected", TIMEOUT, || async {
        let gone = ns.absent::<StatefulSet>(NAME).await?
            && ns.absent::<Deployment>("mycluster-router").await?
            && ns.absent::<Service>(NAME).await?
            && ns.absent::<Service>("mycluster-instances").await?
            && ns.absent::<ConfigMap>("mycluster-initconf").await?
            && ns.absent::<ServiceAccount>("mycluster-sa").await?
            && ns.absent::<PodDisruptionBudget>("mycluster-pdb").await?;
        Ok(gone.then_some(()))
    })
    .await
    .unwrap();
    // The user's Secret is not the cluster's to delete.
    assert!(
        ns.api::<Secret>()
            .get_opt("mysql-root")
            .await
            .unwrap()
            .is_some()
    );
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_api_server_rejects_what_the_crd_schema_forbids() {
    let (ns, host, api) = mysql_host("mysql-schema").await;
    let cases = [
        (
            NAME.to_string(),
            json!({"instances": 1}),
            "spec.secretName: Required value",
        ),
        (
            NAME.to_string(),
            json!({"secretName": "mysql-root", "instances": 0}),
            "spec.instances in body should be greater than or equal to 1",
        ),
        (
            NAME.to_string(),
            json!({"secretName": "mysql-root", "instances": 10}),
            "spec.instances in body should be less than or equal to 9",
        ),
        (
            NAME.to_string(),
            json!({"secretName": "mysql-root", "version": "latest"}),
            "spec.version in body should match",
        ),
        (
            NAME.to_string(),
            json!({"secretName": "mysql-root", "service": {"defaultPort": "mysql-admin"}}),
            "spec.service.defaultPort: Unsupported value: \"mysql-admin\"",
        ),
        (
            "a".repeat(41),
            json!({"secretName": "mysql-root"}),
            "metadata.name must be at most 40 characters",
        ),
    ];
    for (name, spec, expected) in cases {
        let err = api
            .create(&PostParams::default(), &cluster_object(&name, spec.clone()))
            .await
            .expect_err(&format!("{spec} was accepted"));
        let message = match err {
            kube::Error::Api(status) => status.message,
            other => panic!("{spec}: unexpected error {other}"),
        };
        assert!(message.contains(expected), "{spec}: {message}");
    }
    // Nothing was created.
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    host.stop().await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_mycnf_without_mysqld_is_reported_and_leaves_the_children_unchanged() {
    let (ns, host, api) = mysql_host("mysql-invalid").await;
    create(
        &api,
        json!({"secretName": "mysql-root", "mycnf": "[mysqld]\nmax_connections=100\n"}),
    )
    .await;
    wait_for("Reconciled=True", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        Ok((condition(&cr, "Reconciled")["status"] == "True"
            && ns.api::<StatefulSet>().get_opt(NAME).await?.is_some())
        .then_some(()))
    })
    .await
    .unwrap();
    let sts_before = stateful_set(&ns).await;
    let config_before = ns
        .api::<ConfigMap>()
        .get("mycluster-initconf")
        .await
        .unwrap();

    patch_spec(&api, NAME, json!({"mycnf": "max_connections=1\n"})).await;
    let reconciled = wait_for("Reconciled=False", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        let reconciled = condition(&cr, "Reconciled");
        Ok((reconciled["status"] == "False").then_some(reconciled))
    })
    .await
    .unwrap();
    assert_eq!(reconciled["reason"], "InvalidSpec");
    let message = reconciled["message"].as_str().unwrap();
    assert!(
        message.contains("spec.mycnf") && message.contains("[mysqld]"),
        "{message}"
    );
    let warnings = ns
        .api::<Event>()
        .list(&ListParams::default().fields("involvedObject.name=mycluster,type=Warning"))
        .await
        .unwrap();
    assert!(
        warnings
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("InvalidSpec"))
    );
    let sts_after = stateful_set(&ns).await;
    assert_eq!(sts_after.uid(), sts_before.uid());
    assert_eq!(sts_after.spec, sts_before.spec);
    let config_after = ns
        .api::<ConfigMap>()
        .get("mycluster-initconf")
        .await
        .unwrap();
    assert_eq!(config_after.data, config_before.data);
    assert_eq!(
        config_after.resource_version(),
        config_before.resource_version()
    );
    host.stop().await;
    ns.cleanup().await.unwrap();
}
