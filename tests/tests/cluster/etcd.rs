//! The etcd plugin against the real API server: 3 -> 5 -> 3 with each membership Job complete before its resize, a version rolled one member at a time, the TLS Secret as a related resource, deletion.
//!
//! Recorders watch Jobs, the StatefulSet and pods from before the cluster exists, so that
//! orders are read from what the API server stored, not from polls that could miss a state.
//! The devcluster has one etcd, whose revisions (`resourceVersion`) order every write of every
//! kind: "the Job was Complete before the StatefulSet grew" is a comparison of two of them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams, WatchParams,
};
use kube::{Api, ResourceExt};
use operator_host_sdk::job_condition_holds;
use operator_host_tests::devcluster::{TestNamespace, wait_for};
use operator_host_tests::host::{Host, plugin_path};
use operator_host_tests::memcached::{condition, patch_spec};
use operator_host_tests::recorder::{Recorder, Seen};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);
const NAME: &str = "ec";
const MEMBERS: &str = "app.kubernetes.io/instance=ec,app.kubernetes.io/component=member";

fn resource() -> ApiResource {
    ApiResource {
        group: "etcd.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "etcd.operator-host.dev/v1alpha1".into(),
        kind: "EtcdCluster".into(),
        plural: "etcdclusters".into(),
    }
}

/// A host serving the etcd plugin under the examples' policy (which lets it read its TLS
/// Secret as hashes), in a namespace of its own.
async fn etcd_host(test: &str) -> (TestNamespace, Host, Api<DynamicObject>) {
    let ns = TestNamespace::new(test).await.unwrap();
    let host = Host::start_with_examples_policy(plugin_path("plugins", "etcd"), ns.name()).await;
    let api = Api::namespaced_with(ns.client(), ns.name(), &resource());
    (ns, host, api)
}

async fn create(api: &Api<DynamicObject>, spec: Value) {
    let cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "etcd.operator-host.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": NAME},
        "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &cr).await.unwrap();
}

/// Waits until the current generation's status is `phase` with `members` members all ready
/// (and, for `Running`, `Ready=True`); returns the CR.
async fn wait_phase(api: &Api<DynamicObject>, phase: &str, members: i64) -> DynamicObject {
    wait_for(
        &format!("{NAME} to be {phase} with {members} ready members"),
        TIMEOUT,
        || async {
            let cr = api.get(NAME).await?;
            let status = &cr.data["status"];
            let ready = condition(&cr, "Ready");
            Ok((status["phase"] == phase
                && status["members"] == members
                && status["readyMembers"] == members
                && ready["observedGeneration"].as_i64() == cr.metadata.generation)
                .then_some(cr))
        },
    )
    .await
    .unwrap()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The StatefulSet sizes stored, in order, each with the revision that first stored it.
fn sizes(seen: &[Seen<StatefulSet>]) -> Vec<(i32, u64)> {
    let mut sizes: Vec<(i32, u64)> = Vec::new();
    for s in seen.iter().filter(|s| !s.deleted) {
        let size = s
            .object
            .spec
            .as_ref()
            .and_then(|spec| spec.replicas)
            .unwrap_or(1);
        if sizes.last().map(|(last, _)| *last) != Some(size) {
            sizes.push((size, s.revision));
        }
    }
    sizes
}

/// The membership Jobs in the order they were created, each with the revision at which it
/// was first stored Complete.
fn jobs(seen: &[Seen<Job>]) -> Vec<(String, Option<u64>)> {
    let mut jobs: Vec<(String, Option<u64>)> = Vec::new();
    for s in seen.iter().filter(|s| !s.deleted) {
        let name = s.object.name_any();
        let index = match jobs.iter().position(|(n, _)| *n == name) {
            Some(index) => index,
            None => {
                jobs.push((name, None));
                jobs.len() - 1
            }
        };
        if jobs[index].1.is_none() && job_condition_holds(&s.object, "Complete") {
            jobs[index].1 = Some(s.revision);
        }
    }
    jobs
}

#[tokio::test]
async fn scaling_3_5_3_completes_each_membership_job_before_its_resize_and_a_version_rolls_one_member_at_a_time()
 {
    let (ns, host, api) = etcd_host("etcd-scale").await;
    let job_log = Recorder::start(&ns.api::<Job>(), WatchParams::default()).await;
    let set_log = Recorder::start(&ns.api::<StatefulSet>(), WatchParams::default()).await;
    create(&api, json!({"replicas": 3})).await;
    let cr = wait_phase(&api, "Running", 3).await;
    assert_eq!(condition(&cr, "Ready")["status"], "True");
    let membership = ns.api::<ConfigMap>().get("ec-membership").await.unwrap();
    assert_eq!(
        membership.data.unwrap()["ETCD_INITIAL_CLUSTER_STATE"],
        "existing",
        "a running cluster's new members join it"
    );

    patch_spec(&api, NAME, json!({"replicas": 5})).await;
    wait_phase(&api, "Running", 5).await;
    patch_spec(&api, NAME, json!({"replicas": 3})).await;
    wait_phase(&api, "Running", 3).await;

    let resizes = sizes(&set_log.seen());
    assert_eq!(
        resizes.iter().map(|(size, _)| *size).collect::<Vec<_>>(),
        [3, 4, 5, 4, 3],
        "one member at a time"
    );
    let changes = jobs(&job_log.seen());
    assert_eq!(
        changes
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["ec-add-3", "ec-add-4", "ec-remove-4", "ec-remove-3"],
        "the membership changes, in order (a new cluster needs none)"
    );
    for ((job, complete), (size, resized)) in changes.iter().zip(&resizes[1..]) {
        let complete = complete.unwrap_or_else(|| panic!("{job} was never Complete"));
        assert!(
            complete < *resized,
            "{job} was Complete at revision {complete}, after the StatefulSet became {size} at {resized}"
        );
    }
    // The Jobs of finished changes are pruned.
    wait_for("the membership Jobs to be pruned", TIMEOUT, || async {
        let left = ns.api::<Job>().list(&ListParams::default()).await?;
        Ok(left.items.is_empty().then_some(()))
    })
    .await
    .unwrap();
    // A removed member's volume goes with it, so a later member of that name starts empty.
    // Its pod may still be terminating meanwhile: wait for it too, so that the roll below
    // sees the deletions of the roll only.
    wait_for(
        "the removed members' claims and pods to be deleted",
        TIMEOUT,
        || async {
            let claims = ns.labelled::<PersistentVolumeClaim>(MEMBERS).await?;
            let claims: BTreeSet<String> = claims.iter().map(ResourceExt::name_any).collect();
            let pods = ns.labelled::<Pod>(MEMBERS).await?;
            let pods: BTreeSet<String> = pods.iter().map(ResourceExt::name_any).collect();
            Ok((claims
                == BTreeSet::from(["data-ec-0".into(), "data-ec-1".into(), "data-ec-2".into()])
                && pods == BTreeSet::from(["ec-0".into(), "ec-1".into(), "ec-2".into()]))
            .then_some(()))
        },
    )
    .await
    .unwrap();

    // A version change: the StatefulSet replaces one member at a time, each after the
    // previous one is ready again, so a quorum (2 of 3) is ready throughout.
    let pod_log = Recorder::start(&ns.api::<Pod>(), WatchParams::default()).await;
    let before = ns.labelled::<Pod>(MEMBERS).await.unwrap();
    let mut ready: BTreeMap<String, bool> =
        before.iter().map(|p| (p.name_any(), is_ready(p))).collect();
    assert_eq!(ready.values().filter(|r| **r).count(), 3);
    patch_spec(&api, NAME, json!({"version": "3.5.18"})).await;
    wait_for(
        "every member to run 3.5.18 and be ready",
        TIMEOUT,
        || async {
            let pods = ns.labelled::<Pod>(MEMBERS).await?;
            let done = pods.len() == 3
                && pods.iter().all(|p| {
                    is_ready(p)
                        && p.spec.as_ref().is_some_and(|s| {
                            s.containers[0].image.as_deref()
                                == Some("gcr.io/etcd-development/etcd:v3.5.18")
                        })
                });
            Ok(done.then_some(()))
        },
    )
    .await
    .unwrap();
    let cr = wait_phase(&api, "Running", 3).await;
    assert_eq!(cr.data["status"]["version"], "3.5.18");
    let mut fewest_ready = 3;
    // (name, uid, image) of every member pod deleted during the roll.
    let mut deleted = Vec::new();
    for seen in pod_log.seen() {
        let labels = seen.object.labels();
        if labels
            .get("app.kubernetes.io/component")
            .map(String::as_str)
            != Some("member")
        {
            continue;
        }
        if seen.deleted {
            let image = seen
                .object
                .spec
                .as_ref()
                .and_then(|s| s.containers[0].image.clone());
            deleted.push((seen.object.name_any(), seen.object.uid(), image));
            ready.remove(&seen.object.name_any());
        } else {
            ready.insert(seen.object.name_any(), is_ready(&seen.object));
        }
        fewest_ready = fewest_ready.min(ready.values().filter(|r| **r).count());
    }
    // Each member is replaced once: every pod from before the roll is deleted, and no pod of
    // the new version is. (The StatefulSet controller may recreate a replaced pod from its
    // current revision while its status lags, and then replace that one too: a pod of the
    // old version, deleted again.)
    let before_uids: BTreeSet<Option<String>> = before.iter().map(ResourceExt::uid).collect();
    let deleted_uids: BTreeSet<Option<String>> =
        deleted.iter().map(|(_, uid, _)| uid.clone()).collect();
    assert!(
        before_uids.is_subset(&deleted_uids),
        "each member is replaced: {deleted:?}"
    );
    let new_image = Some("gcr.io/etcd-development/etcd:v3.5.18".to_string());
    assert!(
        deleted.iter().all(|(_, _, image)| *image != new_image),
        "no member of the new version is replaced: {deleted:?}"
    );
    assert_eq!(
        fewest_ready, 2,
        "one member at a time is down during the roll"
    );
    assert!(
        jobs(&job_log.seen()).len() == 4,
        "a version change needs no membership change"
    );

    // Deleting the cluster collects its children and its volumes.
    api.delete(NAME, &DeleteParams::background()).await.unwrap();
    wait_for("every child and claim to be collected", TIMEOUT, || async {
        let gone = ns.absent::<StatefulSet>(NAME).await?
            && ns.absent::<Service>("ec-peer").await?
            && ns.absent::<Service>("ec-client").await?
            && ns.absent::<ConfigMap>("ec-membership").await?
            && ns.absent::<PodDisruptionBudget>(NAME).await?
            && ns
                .labelled::<PersistentVolumeClaim>(MEMBERS)
                .await?
                .is_empty();
        Ok(gone.then_some(()))
    })
    .await
    .unwrap();
    host.stop().await;
    ns.cleanup().await.unwrap();
}

fn tls_secret(certificate: &str) -> Secret {
    let data = [
        ("ca.crt", "a CA"),
        ("tls.crt", certificate),
        ("tls.key", "a key"),
    ];
    Secret {
        metadata: ObjectMeta {
            name: Some("ec-tls".into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

fn tls_hash(set: &StatefulSet) -> Option<String> {
    set.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get("etcd.operator-host.dev/tls-hash")
        .cloned()
}

#[tokio::test]
async fn the_tls_secret_holds_a_new_cluster_until_it_exists_and_a_new_certificate_rolls_the_members()
 {
    let (ns, host, api) = etcd_host("etcd-tls").await;
    create(
        &api,
        json!({"replicas": 1, "tls": {"secretName": "ec-tls"}}),
    )
    .await;
    let cr = wait_phase(&api, "Pending", 0).await;
    let ready = condition(&cr, "Ready");
    assert_eq!(ready["reason"], "SecretNotFound", "{ready}");
    assert!(
        ns.api::<StatefulSet>()
            .get_opt(NAME)
            .await
            .unwrap()
            .is_none(),
        "no member without its certificate"
    );

    // The Secret appears: a related object, so the parent that names it is reconciled.
    let secrets: Api<Secret> = ns.api();
    secrets
        .create(&PostParams::default(), &tls_secret("certificate one"))
        .await
        .unwrap();
    wait_phase(&api, "Running", 1).await;
    let first = tls_hash(&ns.api::<StatefulSet>().get(NAME).await.unwrap()).unwrap();

    // A renewed certificate changes the template's hash (the plugin sees only hashes).
    secrets
        .replace(
            "ec-tls",
            &PostParams::default(),
            &tls_secret("certificate two"),
        )
        .await
        .unwrap();
    let second = wait_for("the template to carry the new hash", TIMEOUT, || async {
        let hash = tls_hash(&ns.api::<StatefulSet>().get(NAME).await?);
        Ok(hash.filter(|h| *h != first))
    })
    .await
    .unwrap();
    assert_ne!(second, first);

    // A Secret that loses a key freezes the cluster with a condition naming the key.
    let mut broken = tls_secret("certificate two");
    broken.data.as_mut().unwrap().remove("tls.key");
    secrets
        .replace("ec-tls", &PostParams::default(), &broken)
        .await
        .unwrap();
    patch_spec(&api, NAME, json!({"replicas": 3})).await;
    let cr = wait_for("the missing key to be reported", TIMEOUT, || async {
        let cr = api.get(NAME).await?;
        let ready = condition(&cr, "Ready");
        Ok((ready["reason"] == "KeysMissing"
            && ready["observedGeneration"].as_i64() == cr.metadata.generation)
            .then_some(cr))
    })
    .await
    .unwrap();
    assert!(
        condition(&cr, "Ready")["message"]
            .as_str()
            .unwrap()
            .contains("tls.key")
    );
    let set = ns.api::<StatefulSet>().get(NAME).await.unwrap();
    assert_eq!(
        set.spec.as_ref().unwrap().replicas,
        Some(1),
        "no member added"
    );
    assert_eq!(
        tls_hash(&set),
        Some(second),
        "the members keep their certificate"
    );
    assert!(ns.api::<Job>().get_opt("ec-add-1").await.unwrap().is_none());
    host.stop().await;
    ns.cleanup().await.unwrap();
}
