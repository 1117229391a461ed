//! Native unit tests of the etcd reconcile logic: member arithmetic, the step rules, the children of each step, TLS, status.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResourceExt;
use operator_host_sdk::{Desired, Error, Observed, Readiness, Reconciler, UpdateStrategy};
use serde_json::{Value, json};

use super::*;
use crate::children::{INITIAL_CLUSTER_KEY, INITIAL_CLUSTER_STATE_KEY};
use crate::members::{fault_tolerance, quorum};

const V3517: Version = Version {
    major: 3,
    minor: 5,
    patch: 17,
};

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn topology(tls: bool) -> Topology<'static> {
    Topology {
        name: "ec",
        namespace: "db",
        tls,
    }
}

// ---- member arithmetic ----

#[test]
fn names_and_urls_derive_from_the_cluster_name_and_namespace() {
    let t = topology(false);
    assert_eq!(t.member(2), "ec-2");
    assert_eq!(t.peer_url(2), "http://ec-2.ec-peer.db.svc:2380");
    assert_eq!(t.client_endpoint(), "http://ec-client.db.svc:2379");
    let t = topology(true);
    assert_eq!(t.peer_url(0), "https://ec-0.ec-peer.db.svc:2380");
    assert_eq!(t.client_endpoint(), "https://ec-client.db.svc:2379");
}

#[test]
fn initial_cluster_lists_members_zero_to_n_in_order() {
    let t = topology(false);
    assert_eq!(t.initial_cluster(1), "ec-0=http://ec-0.ec-peer.db.svc:2380");
    assert_eq!(
        t.initial_cluster(3),
        "ec-0=http://ec-0.ec-peer.db.svc:2380,ec-1=http://ec-1.ec-peer.db.svc:2380,\
         ec-2=http://ec-2.ec-peer.db.svc:2380"
    );
    assert_eq!(t.initial_cluster(0), "");
}

#[test]
fn quorum_and_fault_tolerance_follow_raft() {
    for (members, q, f) in [
        (1, 1, 0),
        (2, 2, 0),
        (3, 2, 1),
        (4, 3, 1),
        (5, 3, 2),
        (7, 4, 3),
    ] {
        assert_eq!(quorum(members), q, "quorum of {members}");
        assert_eq!(fault_tolerance(members), f, "fault tolerance of {members}");
    }
}

#[test]
fn versions_parse_strictly() {
    assert_eq!(v("3.5.17"), V3517);
    for bad in [
        "3.5", "3.5.17.1", "v3.5.17", "3.5.x", "", "3..1", "3.5.-1", "3.5.17 ",
    ] {
        assert_eq!(Version::parse(bad), None, "{bad:?}");
    }
    assert_eq!(v("3.10.0").to_string(), "3.10.0");
    assert!(v("3.10.0") > v("3.9.9"));
}

#[test]
fn a_version_rolls_one_minor_up_or_any_patch_within_a_minor() {
    assert!(v("3.5.17").may_roll_to(v("3.5.18")).is_ok());
    assert!(v("3.5.17").may_roll_to(v("3.5.1")).is_ok());
    assert!(v("3.5.17").may_roll_to(v("3.6.0")).is_ok());
    let skip = v("3.4.30").may_roll_to(v("3.6.0")).unwrap_err();
    assert!(
        skip.contains("skips a minor") && skip.contains("3.5.x"),
        "{skip}"
    );
    let down = v("3.6.0").may_roll_to(v("3.5.17")).unwrap_err();
    assert!(down.contains("downgrade"), "{down}");
    let major = v("3.6.0").may_roll_to(v("4.0.0")).unwrap_err();
    assert!(major.contains("major"), "{major}");
}

#[test]
fn membership_job_names_round_trip_and_other_names_are_not_membership_jobs() {
    for change in [Change::Add(0), Change::Add(6), Change::Remove(4)] {
        assert_eq!(Change::of_job("ec", &change.job_name("ec")), Some(change));
    }
    for other in [
        "ec-add-",
        "ec-add-x",
        "ec-grow-3",
        "ecx-add-3",
        "ec",
        "other-add-1",
    ] {
        assert_eq!(Change::of_job("ec", other), None, "{other}");
    }
    // A cluster whose name is another's prefix does not take its Jobs.
    assert_eq!(Change::of_job("ec", "ec-b-add-1"), None);
}

// ---- the step rules ----

fn cluster(replicas: i32, rolled_out: bool, jobs: Vec<(Change, JobState)>) -> ObservedCluster {
    ObservedCluster {
        replicas,
        version: V3517,
        rolled_out,
        jobs,
    }
}

#[test]
fn no_statefulset_bootstraps() {
    assert_eq!(next_step(3, V3517, None), Step::Bootstrap);
}

#[test]
fn scaling_goes_one_member_at_a_time_and_only_from_a_ready_cluster() {
    // (desired members, StatefulSet size, rolled out) -> the next step.
    for (desired, size, rolled_out, step) in [
        (5, 3, true, Step::Add(3)),
        (5, 4, true, Step::Add(4)),
        (3, 5, true, Step::Remove(4)),
        (3, 4, true, Step::Remove(3)),
        (5, 3, false, Step::Wait),
        (1, 3, false, Step::Wait),
        (3, 3, true, Step::Steady),
    ] {
        assert_eq!(
            next_step(desired, V3517, Some(&cluster(size, rolled_out, vec![]))),
            step,
            "{desired} desired, {size} running, rolled out: {rolled_out}"
        );
    }
}

#[test]
fn a_membership_change_under_way_is_finished_before_anything_else() {
    // Added in etcd, not started yet: the new member is started even if the spec went back
    // to 3 meanwhile, and even while another member is unready.
    let added = cluster(3, false, vec![(Change::Add(3), JobState::Complete)]);
    assert_eq!(next_step(3, V3517, Some(&added)), Step::Add(3));
    let adding = cluster(3, true, vec![(Change::Add(3), JobState::Running)]);
    assert_eq!(next_step(1, V3517, Some(&adding)), Step::Add(3));
    let removed = cluster(5, false, vec![(Change::Remove(4), JobState::Complete)]);
    assert_eq!(next_step(7, V3517, Some(&removed)), Step::Remove(4));
    // A version change waits for it too.
    assert_eq!(next_step(3, v("3.6.0"), Some(&added)), Step::Add(3));
}

#[test]
fn jobs_of_earlier_changes_are_not_taken_for_the_current_one() {
    // add-3 made the StatefulSet 4: the next change is add-4, and the old Job is let go.
    let after = cluster(4, true, vec![(Change::Add(3), JobState::Complete)]);
    assert_eq!(next_step(5, V3517, Some(&after)), Step::Add(4));
    assert_eq!(next_step(4, V3517, Some(&after)), Step::Steady);
    // remove-4 made it 4: steady at 4.
    let after = cluster(4, true, vec![(Change::Remove(4), JobState::Complete)]);
    assert_eq!(next_step(4, V3517, Some(&after)), Step::Steady);
}

#[test]
fn a_failed_membership_job_stops_everything_until_it_is_deleted() {
    let failed = cluster(3, true, vec![(Change::Add(3), JobState::Failed)]);
    assert_eq!(
        next_step(5, V3517, Some(&failed)),
        Step::Stuck(Change::Add(3))
    );
    assert_eq!(
        next_step(3, v("3.6.0"), Some(&failed)),
        Step::Stuck(Change::Add(3))
    );
    // Deleted: the change starts again.
    assert_eq!(
        next_step(5, V3517, Some(&cluster(3, true, vec![]))),
        Step::Add(3)
    );
}

#[test]
fn a_version_change_rolls_only_at_the_desired_size_when_ready_and_allowed() {
    let ready = cluster(3, true, vec![]);
    assert_eq!(
        next_step(3, v("3.6.1"), Some(&ready)),
        Step::Roll(v("3.6.1"))
    );
    assert_eq!(next_step(5, v("3.6.1"), Some(&ready)), Step::Add(3));
    assert_eq!(
        next_step(3, v("3.6.1"), Some(&cluster(3, false, vec![]))),
        Step::Wait
    );
    match next_step(3, v("3.7.0"), Some(&ready)) {
        Step::VersionRefused(why) => assert!(why.contains("skips a minor"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// ---- the children of each step ----

fn etcd(spec: Value) -> EtcdCluster {
    serde_json::from_value(json!({
        "apiVersion": "etcd.operator-host.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "ec", "namespace": "db", "generation": 2},
        "spec": spec,
    }))
    .unwrap()
}

fn reconcile(cr: &EtcdCluster, observed: &Observed) -> Desired {
    EtcdOperator::reconcile(cr, observed).unwrap()
}

fn rejected(cr: &EtcdCluster) -> String {
    match EtcdOperator::reconcile(cr, &Observed::default()) {
        Err(Error::InvalidSpec(message)) => message,
        other => panic!("expected an invalid spec, got {other:?}"),
    }
}

/// The StatefulSet as the API server would hold it after the plugin's `desired`, with a
/// status of `ready` ready pods, rolled out when `rolled_out`.
fn applied_sts(desired: &Desired, ready: i32, rolled_out: bool) -> Value {
    let mut sts = serde_json::to_value(desired.get::<StatefulSet>("ec").unwrap().unwrap()).unwrap();
    let replicas = sts["spec"]["replicas"].as_i64().unwrap();
    sts["metadata"]["generation"] = json!(3);
    sts["status"] = json!({
        "observedGeneration": 3,
        "replicas": replicas,
        "readyReplicas": ready,
        "updatedReplicas": if rolled_out { replicas } else { 0 },
        "currentRevision": if rolled_out { "ec-b" } else { "ec-a" },
        "updateRevision": "ec-b",
    });
    sts
}

fn applied(desired: &Desired, name: &str) -> Value {
    let config_map = desired.get::<ConfigMap>(name).unwrap().unwrap();
    serde_json::to_value(config_map).unwrap()
}

fn job_with(desired: &Desired, name: &str, condition: Option<&str>) -> Value {
    let mut job = serde_json::to_value(desired.get::<Job>(name).unwrap().unwrap()).unwrap();
    if let Some(type_) = condition {
        job["status"] = json!({"conditions": [{"type": type_, "status": "True"}]});
    }
    job
}

/// The observed children after `desired` was applied and settled: every member ready.
fn settled(desired: &Desired) -> Vec<Value> {
    let sts = desired.get::<StatefulSet>("ec").unwrap().unwrap();
    let replicas = sts.spec.unwrap().replicas.unwrap();
    vec![
        applied_sts(desired, replicas, true),
        applied(desired, "ec-membership"),
    ]
}

fn replicas(desired: &Desired) -> i32 {
    desired
        .get::<StatefulSet>("ec")
        .unwrap()
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap()
}

fn names(desired: &Desired) -> Vec<String> {
    desired
        .children
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c["kind"].as_str().unwrap(),
                c["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn status(desired: &Desired) -> Value {
    desired.status.clone()
}

fn condition(desired: &Desired, type_: &str) -> Value {
    status(desired)["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap()
        .clone()
}

fn ready_condition(desired: &Desired) -> Value {
    condition(desired, "Ready")
}

/// The TLS data hash on the desired StatefulSet's pod template.
fn tls_hash(desired: &Desired) -> String {
    desired
        .get::<StatefulSet>("ec")
        .unwrap()
        .unwrap()
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap()[TLS_HASH_ANNOTATION]
        .clone()
}

fn membership_data(desired: &Desired) -> (String, String) {
    let data = desired
        .get::<ConfigMap>("ec-membership")
        .unwrap()
        .unwrap()
        .data
        .unwrap();
    (
        data[INITIAL_CLUSTER_KEY].clone(),
        data[INITIAL_CLUSTER_STATE_KEY].clone(),
    )
}

#[test]
fn a_new_cluster_starts_every_member_as_a_new_cluster() {
    let desired = reconcile(&etcd(json!({})), &Observed::default());
    assert_eq!(
        names(&desired),
        [
            "Service/ec-peer",
            "Service/ec-client",
            "ConfigMap/ec-membership",
            "StatefulSet/ec",
            "PodDisruptionBudget/ec",
        ]
    );
    assert_eq!(replicas(&desired), 3);
    let (initial, state) = membership_data(&desired);
    assert_eq!(initial, topology(false).initial_cluster(3));
    assert_eq!(state, "new");
    assert_eq!(status(&desired)["phase"], "Creating");
    assert_eq!(ready_condition(&desired)["status"], "False");
}

#[test]
fn the_statefulset_runs_distroless_members_from_their_pod_name_and_the_membership_configmap() {
    let desired = reconcile(&etcd(json!({"version": "3.5.18"})), &Observed::default());
    let sts = desired.get::<StatefulSet>("ec").unwrap().unwrap();
    assert_eq!(
        sts.metadata.annotations.unwrap()[VERSION_ANNOTATION],
        "3.5.18"
    );
    let spec = sts.spec.unwrap();
    assert_eq!(spec.service_name.as_deref(), Some("ec-peer"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    let retention = spec.persistent_volume_claim_retention_policy.unwrap();
    assert_eq!(retention.when_scaled.as_deref(), Some("Delete"));
    let pod = spec.template.spec.unwrap();
    let container = &pod.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("gcr.io/etcd-development/etcd:v3.5.18")
    );
    let args = container.args.clone().unwrap();
    assert!(args.contains(&"--name=$(POD_NAME)".to_string()), "{args:?}");
    assert!(
        args.contains(
            &"--initial-advertise-peer-urls=http://$(POD_NAME).ec-peer.db.svc:2380".to_string()
        ),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--initial-cluster=")),
        "{args:?}"
    );
    let env_from = container.env_from.clone().unwrap();
    assert_eq!(
        env_from[0].config_map_ref.as_ref().unwrap().name,
        "ec-membership"
    );
    let security = pod.security_context.unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
}

#[test]
fn services_are_a_headless_peer_service_publishing_unready_members_and_a_client_service() {
    let desired = reconcile(&etcd(json!({})), &Observed::default());
    let peer = desired
        .get::<Service>("ec-peer")
        .unwrap()
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(peer.cluster_ip.as_deref(), Some("None"));
    assert_eq!(peer.publish_not_ready_addresses, Some(true));
    let client = desired
        .get::<Service>("ec-client")
        .unwrap()
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(client.cluster_ip, None);
    assert_eq!(client.ports.unwrap()[0].port, 2379);
    assert_eq!(peer.selector, client.selector);
}

#[test]
fn the_pdb_keeps_a_quorum() {
    for (size, min) in [(1, 1), (3, 2), (5, 3)] {
        let desired = reconcile(&etcd(json!({"replicas": size})), &Observed::default());
        let pdb = desired.get::<PodDisruptionBudget>("ec").unwrap().unwrap();
        assert_eq!(pdb.spec.unwrap().min_available, Some(IntOrString::Int(min)));
    }
}

#[test]
fn a_ready_cluster_at_its_size_is_running_and_its_membership_says_existing() {
    let cr = etcd(json!({}));
    let first = reconcile(&cr, &Observed::default());
    let desired = reconcile(&cr, &Observed::new(settled(&first)));
    assert_eq!(replicas(&desired), 3);
    assert_eq!(membership_data(&desired).1, "existing");
    assert_eq!(status(&desired)["phase"], "Running");
    assert_eq!(status(&desired)["readyMembers"], 3);
    assert_eq!(ready_condition(&desired)["status"], "True");
    assert!(desired.get::<Job>("ec-add-3").unwrap().is_none());
}

#[test]
fn bootstrapping_members_keep_the_new_membership_until_they_are_ready() {
    let cr = etcd(json!({}));
    let first = reconcile(&cr, &Observed::default());
    let starting = vec![
        applied_sts(&first, 1, false),
        applied(&first, "ec-membership"),
    ];
    let desired = reconcile(&cr, &Observed::new(starting));
    assert_eq!(membership_data(&desired).1, "new");
    assert_eq!(status(&desired)["phase"], "Creating");
}

#[test]
fn scaling_up_adds_the_member_in_a_job_behind_a_barrier_then_resizes() {
    let three = reconcile(&etcd(json!({})), &Observed::default());
    let cr = etcd(json!({"replicas": 5}));
    let desired = reconcile(&cr, &Observed::new(settled(&three)));
    assert_eq!(
        names(&desired),
        [
            "Service/ec-peer",
            "Service/ec-client",
            "Job/ec-add-3",
            "ConfigMap/ec-membership",
            "StatefulSet/ec",
            "PodDisruptionBudget/ec",
        ]
    );
    let options = desired.options_of::<Job>("ec-add-3").unwrap();
    assert_eq!(options.update, UpdateStrategy::Recreate);
    assert_eq!(
        options.ready_when,
        Some(Readiness::Condition("Complete".into()))
    );
    // What the barrier releases: one more member, joining the existing cluster.
    assert_eq!(replicas(&desired), 4);
    let (initial, state) = membership_data(&desired);
    assert_eq!(
        (initial, state),
        (topology(false).initial_cluster(4), "existing".to_string())
    );
    let status = status(&desired);
    assert_eq!(status["phase"], "Scaling");
    assert_eq!(status["membershipChange"], "adding ec-3");
    assert_eq!(status["members"], 3);

    let job = desired.get::<Job>("ec-add-3").unwrap().unwrap();
    let container = &job.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("docker.io/bitnami/etcd:3.5.17")
    );
    let env: std::collections::BTreeMap<_, _> = container
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap()))
        .collect();
    assert_eq!(env["MEMBER"], "ec-3");
    assert_eq!(env["PEER_URL"], "http://ec-3.ec-peer.db.svc:2380");
    assert_eq!(env["ETCDCTL_ENDPOINTS"], "http://ec-client.db.svc:2379");
    assert!(container.command.as_ref().unwrap()[2].contains("member add \"$MEMBER\""));
}

/// Drives the plugin as the host and Kubernetes would: every Job completes, every member
/// becomes ready. Returns the StatefulSet sizes the host applied, in order, and the Jobs.
fn drive(cr: &EtcdCluster, mut observed: Vec<Value>) -> (Vec<i32>, Vec<String>, Vec<Value>) {
    let mut sizes = Vec::new();
    let mut jobs = Vec::new();
    for _ in 0..20 {
        let desired = reconcile(cr, &Observed::new(observed.clone()));
        let job = desired
            .children
            .iter()
            .find(|c| c["kind"] == "Job")
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_string());
        match job {
            Some(job)
                if !observed
                    .iter()
                    .any(|o| o["metadata"]["name"] == job.as_str()) =>
            {
                // The host applies the Job and stops at the barrier: the Job runs, then completes.
                jobs.push(job.clone());
                observed.push(job_with(&desired, &job, Some("Complete")));
            }
            _ => {
                let size = replicas(&desired);
                if sizes.last() != Some(&size) {
                    sizes.push(size);
                }
                let mut next = settled(&desired);
                // Jobs the plugin still returns stay; the others are pruned.
                next.extend(
                    observed
                        .iter()
                        .filter(|o| {
                            o["kind"] == "Job"
                                && desired.children.iter().any(|c| {
                                    c["kind"] == "Job"
                                        && c["metadata"]["name"] == o["metadata"]["name"]
                                })
                        })
                        .cloned(),
                );
                if next == observed {
                    return (sizes, jobs, observed);
                }
                observed = next;
            }
        }
    }
    panic!("did not settle: {observed:#?}");
}

#[test]
fn three_to_five_to_three_changes_membership_one_member_at_a_time_in_order() {
    let (_, _, three) = drive(&etcd(json!({})), vec![]);
    let (sizes, jobs, five) = drive(&etcd(json!({"replicas": 5})), three);
    assert_eq!(sizes, [4, 5]);
    assert_eq!(jobs, ["ec-add-3", "ec-add-4"]);
    let (sizes, jobs, _) = drive(&etcd(json!({"replicas": 3})), five);
    assert_eq!(sizes, [4, 3]);
    assert_eq!(jobs, ["ec-remove-4", "ec-remove-3"]);
}

#[test]
fn scaling_down_removes_the_highest_member_first_and_keeps_the_version() {
    let five = reconcile(&etcd(json!({"replicas": 5})), &Observed::default());
    let desired = reconcile(
        &etcd(json!({"replicas": 3, "version": "3.6.0"})),
        &Observed::new(settled(&five)),
    );
    assert!(desired.get::<Job>("ec-remove-4").unwrap().is_some());
    assert_eq!(replicas(&desired), 4);
    assert_eq!(
        membership_data(&desired).0,
        topology(false).initial_cluster(4)
    );
    let job = desired.get::<Job>("ec-remove-4").unwrap().unwrap();
    let script = &job.spec.unwrap().template.spec.unwrap().containers[0]
        .command
        .clone()
        .unwrap()[2];
    assert!(script.contains("member remove \"$id\""), "{script}");
    let sts = desired.get::<StatefulSet>("ec").unwrap().unwrap();
    assert_eq!(
        sts.metadata.annotations.unwrap()[VERSION_ANNOTATION],
        "3.5.17"
    );
}

#[test]
fn a_version_change_rolls_the_template_and_waits_for_the_roll() {
    let three = reconcile(&etcd(json!({})), &Observed::default());
    let cr = etcd(json!({"version": "3.6.0"}));
    let desired = reconcile(&cr, &Observed::new(settled(&three)));
    let sts = desired.get::<StatefulSet>("ec").unwrap().unwrap();
    assert_eq!(
        sts.metadata.annotations.clone().unwrap()[VERSION_ANNOTATION],
        "3.6.0"
    );
    let spec = sts.spec.unwrap();
    assert_eq!(
        spec.template.spec.unwrap().containers[0].image.as_deref(),
        Some("gcr.io/etcd-development/etcd:v3.6.0")
    );
    // The StatefulSet's own rolling update replaces one member at a time, each after the
    // previous one is ready.
    assert!(
        spec.update_strategy
            .is_none_or(|s| s.type_.as_deref() != Some("OnDelete"))
    );
    assert_eq!(status(&desired)["phase"], "Upgrading");

    // Rolling: asking for 5 meanwhile changes nothing until the roll is done.
    let rolling = vec![
        applied_sts(&desired, 2, false),
        applied(&desired, "ec-membership"),
    ];
    let during = reconcile(
        &etcd(json!({"version": "3.6.0", "replicas": 5})),
        &Observed::new(rolling),
    );
    assert!(during.get::<Job>("ec-add-3").unwrap().is_none());
    assert_eq!(replicas(&during), 3);
    assert_eq!(status(&during)["phase"], "Upgrading");
}

#[test]
fn a_refused_version_change_keeps_the_running_version_and_says_why() {
    let three = reconcile(&etcd(json!({})), &Observed::default());
    let desired = reconcile(
        &etcd(json!({"version": "3.7.0"})),
        &Observed::new(settled(&three)),
    );
    let sts = desired.get::<StatefulSet>("ec").unwrap().unwrap();
    assert_eq!(
        sts.metadata.annotations.unwrap()[VERSION_ANNOTATION],
        "3.5.17"
    );
    let ready = ready_condition(&desired);
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "VersionChangeRefused");
    assert!(
        ready["message"].as_str().unwrap().contains("3.6.x"),
        "{ready}"
    );
}

#[test]
fn a_failed_membership_job_is_kept_and_reported() {
    let three = reconcile(&etcd(json!({})), &Observed::default());
    let cr = etcd(json!({"replicas": 5}));
    let adding = reconcile(&cr, &Observed::new(settled(&three)));
    let mut observed = settled(&three);
    observed.push(job_with(&adding, "ec-add-3", Some("Failed")));
    let desired = reconcile(&cr, &Observed::new(observed));
    assert!(
        desired.get::<Job>("ec-add-3").unwrap().is_some(),
        "the Job is kept for its logs"
    );
    let status = status(&desired);
    assert_eq!(status["phase"], "Failed");
    let ready = ready_condition(&desired);
    assert_eq!(ready["reason"], "MembershipChangeFailed");
    assert!(
        ready["message"].as_str().unwrap().contains("ec-add-3"),
        "{ready}"
    );
}

// ---- TLS ----

/// A Secret as the host passes it under the data-hash view: each value a digest.
fn tls_secret(keys: &[&str]) -> Value {
    secret_with(keys.iter().map(|k| (*k, format!("digest-of-{k}"))))
}

fn secret_with<'a>(values: impl Iterator<Item = (&'a str, String)>) -> Value {
    let secret = Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("ec-tls".into()),
            namespace: Some("db".into()),
            ..Default::default()
        },
        data: Some(
            values
                .map(|(k, v)| (k.to_string(), k8s_openapi::ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    };
    serde_json::to_value(secret).unwrap()
}

fn with_tls(observed: Vec<Value>, secret: Option<Value>) -> Observed {
    Observed::new(observed).with_related("tls", secret.into_iter().collect())
}

#[test]
fn tls_mounts_the_secret_and_switches_every_url_and_flag_to_https() {
    let cr = etcd(json!({"tls": {"secretName": "ec-tls"}}));
    let desired = reconcile(&cr, &with_tls(vec![], Some(tls_secret(&TLS_KEYS))));
    assert!(!tls_hash(&desired).is_empty());
    let sts = desired.get::<StatefulSet>("ec").unwrap().unwrap();
    let pod = sts.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.volumes.unwrap()[0]
            .secret
            .as_ref()
            .unwrap()
            .secret_name
            .as_deref(),
        Some("ec-tls")
    );
    let args = pod.containers[0].args.clone().unwrap();
    for flag in [
        "--client-cert-auth",
        "--peer-client-cert-auth",
        "--peer-cert-file=/etc/etcd/tls/tls.crt",
    ] {
        assert!(args.contains(&flag.to_string()), "{flag} in {args:?}");
    }
    assert!(args.contains(&"--listen-client-urls=https://0.0.0.0:2379".to_string()));
    assert!(membership_data(&desired).0.starts_with("ec-0=https://"));
    assert_eq!(condition(&desired, "TLSSecretReady")["status"], "True");
}

#[test]
fn a_changed_certificate_changes_the_template_hash_so_members_roll() {
    let cr = etcd(json!({"tls": {"secretName": "ec-tls"}}));
    let hash = |secret: Value| tls_hash(&reconcile(&cr, &with_tls(vec![], Some(secret))));
    let before = hash(tls_secret(&TLS_KEYS));
    let rotated = secret_with(TLS_KEYS.iter().map(|k| {
        let digest = if *k == "tls.crt" {
            "another digest".to_string()
        } else {
            format!("digest-of-{k}")
        };
        (*k, digest)
    }));
    assert_ne!(before, hash(rotated));
    assert_eq!(before, hash(tls_secret(&TLS_KEYS)));
}

#[test]
fn a_missing_tls_secret_creates_no_member_and_says_so() {
    let cr = etcd(json!({"tls": {"secretName": "ec-tls"}}));
    let desired = reconcile(&cr, &with_tls(vec![], None));
    assert!(desired.get::<StatefulSet>("ec").unwrap().is_none());
    assert_eq!(status(&desired)["phase"], "Pending");
    let ready = ready_condition(&desired);
    assert_eq!(ready["reason"], "SecretNotFound");
    assert!(
        ready["message"].as_str().unwrap().contains("\"ec-tls\""),
        "{ready}"
    );
}

#[test]
fn a_tls_secret_without_a_key_freezes_a_running_cluster_and_names_the_key() {
    let cr = etcd(json!({"tls": {"secretName": "ec-tls"}}));
    let first = reconcile(&cr, &with_tls(vec![], Some(tls_secret(&TLS_KEYS))));
    let hash_before = tls_hash(&first);
    let scaled = etcd(json!({"tls": {"secretName": "ec-tls"}, "replicas": 5}));
    let desired = reconcile(
        &scaled,
        &with_tls(settled(&first), Some(tls_secret(&["ca.crt", "tls.crt"]))),
    );
    assert!(
        desired.get::<Job>("ec-add-3").unwrap().is_none(),
        "no member is added"
    );
    assert_eq!(replicas(&desired), 3);
    assert_eq!(tls_hash(&desired), hash_before);
    let ready = ready_condition(&desired);
    assert_eq!(ready["reason"], "KeysMissing");
    assert!(
        ready["message"].as_str().unwrap().contains("tls.key"),
        "{ready}"
    );
}

#[test]
fn the_tls_secret_is_read_as_hashes_by_name_from_the_spec() {
    let related = EtcdOperator::related();
    assert_eq!(related.len(), 1);
    assert_eq!(
        related[0].selector,
        operator_host_sdk::RelatedSelector::NameFromPath("spec.tls.secretName".into())
    );
    assert_eq!(
        related[0].secret_view,
        operator_host_sdk::SecretView::DataHash
    );
}

// ---- validation and the CRD ----

#[test]
fn invalid_specs_are_rejected_naming_the_field() {
    for (spec, field) in [
        (json!({"replicas": 0}), "replicas"),
        (json!({"replicas": 8}), "replicas"),
        (json!({"version": "3.5"}), "version"),
        (
            json!({"repository": "quay.io/coreos/etcd:v3.5.17"}),
            "repository",
        ),
        (
            json!({"membershipRepository": "busybox@sha256:00"}),
            "membershipRepository",
        ),
        (
            json!({"tls": {"secretName": "Not_A_Name"}}),
            "tls.secretName",
        ),
    ] {
        let message = rejected(&etcd(spec.clone()));
        assert!(message.contains(field), "{spec}: {message}");
    }
    // A registry port is not a tag.
    reconcile(
        &etcd(json!({"repository": "registry:5000/etcd"})),
        &Observed::default(),
    );
}

#[test]
fn a_long_name_is_rejected() {
    let mut cr = etcd(json!({}));
    cr.metadata.name = Some("e".repeat(41));
    assert!(rejected(&cr).contains("metadata.name"));
}

#[test]
fn the_crd_declares_defaults_bounds_and_columns() {
    let crd = serde_json::to_value(EtcdCluster::crd()).unwrap();
    let version = &crd["spec"]["versions"][0];
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["replicas"]["minimum"].as_f64(), Some(1.0));
    assert_eq!(spec["replicas"]["maximum"].as_f64(), Some(7.0));
    assert_eq!(spec["replicas"]["default"], 3);
    assert_eq!(spec["version"]["default"], "3.5.17");
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        ["Phase", "Ready", "Members", "Desired", "Version", "Age"]
    );
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "etcd");
}

#[test]
fn reconcile_is_deterministic() {
    let cr = etcd(json!({"replicas": 5}));
    let a = reconcile(&cr, &Observed::default());
    let b = reconcile(&cr, &Observed::default());
    assert_eq!(a.children, b.children);
    assert_eq!(a.status, b.status);
}

#[test]
fn a_member_starting_after_a_scaling_step_is_scaling_not_degraded() {
    let four = reconcile(&etcd(json!({"replicas": 4})), &Observed::default());
    let mut cr = etcd(json!({"replicas": 4}));
    // After the bootstrap the membership says existing; the last status said Scaling.
    let mut observed = vec![applied_sts(&four, 3, true), applied(&four, "ec-membership")];
    observed[1]["data"]["ETCD_INITIAL_CLUSTER_STATE"] = json!("existing");
    cr.status = Some(EtcdClusterStatus {
        phase: "Scaling".into(),
        ..EtcdClusterStatus::default()
    });
    let desired = reconcile(&cr, &Observed::new(observed.clone()));
    assert_eq!(status(&desired)["phase"], "Scaling");
    assert_eq!(ready_condition(&desired)["reason"], "MemberStarting");
    // The same unready member with a Running cluster before it: degraded.
    cr.status = Some(EtcdClusterStatus {
        phase: "Running".into(),
        ..EtcdClusterStatus::default()
    });
    let desired = reconcile(&cr, &Observed::new(observed));
    assert_eq!(status(&desired)["phase"], "Degraded");
}

#[test]
fn admission_refuses_a_new_volume_size_and_a_version_etcd_cannot_roll_to() {
    let old = etcd(json!({"replicas": 3, "version": "3.5.17"}));
    let printed = |new: &EtcdCluster, old: Option<&EtcdCluster>| -> Vec<String> {
        EtcdOperator::validate(new, old)
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert!(printed(&old, None).is_empty());
    assert!(
        printed(
            &etcd(json!({"replicas": 5, "version": "3.6.0"})),
            Some(&old)
        )
        .is_empty()
    );
    assert_eq!(
        printed(
            &etcd(json!({"replicas": 3, "version": "3.5.17", "storage": "9Gi"})),
            Some(&old)
        ),
        ["spec.storage: Invalid value: \"9Gi\": field is immutable"]
    );
    let skipped = printed(
        &etcd(json!({"replicas": 3, "version": "3.7.0"})),
        Some(&old),
    );
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0].starts_with("spec.version: Invalid value: \"3.7.0\": 3.5.17 -> 3.7.0 skips"),
        "{skipped:?}"
    );
    assert_eq!(
        printed(&etcd(json!({"replicas": 9})), None),
        ["spec.replicas: Invalid value: must be between 1 and 7, got 9"]
    );
}

#[test]
fn conversion_between_the_versions_round_trips_and_keeps_what_it_does_not_know() {
    let alpha = json!({"apiVersion": "etcd.operator-host.dev/v1alpha1", "kind": "EtcdCluster",
        "metadata": {"name": "a", "uid": "u"},
        "spec": {"replicas": 3, "storage": "2Gi", "future": true},
        "status": {"phase": "Running"}});
    let beta = crate::v1beta1::convert(alpha.clone(), "v1beta1").unwrap();
    assert_eq!(beta["apiVersion"], "etcd.operator-host.dev/v1beta1");
    assert_eq!(beta["spec"]["storage"], json!({"size": "2Gi"}));
    assert_eq!(beta["spec"]["future"], true);
    assert_eq!(beta["status"], alpha["status"]);
    assert_eq!(
        crate::v1beta1::convert(beta.clone(), "v1alpha1").unwrap(),
        alpha
    );
    assert_eq!(
        crate::v1beta1::convert(beta.clone(), "v1beta1").unwrap(),
        beta
    );
    // A v1beta1 object decodes as the v1beta1 type, and the CRD serves both.
    let typed: crate::v1beta1::EtcdCluster = serde_json::from_value(beta).unwrap();
    assert_eq!(typed.spec.storage.size, "2Gi");
    let crd = EtcdOperator::crd();
    let versions: Vec<(&str, bool)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.storage))
        .collect();
    assert_eq!(versions, [("v1alpha1", true), ("v1beta1", false)]);
    assert!(crate::v1beta1::convert(alpha, "v2").is_err());
}
