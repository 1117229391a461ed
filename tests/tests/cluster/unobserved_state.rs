//! Unobserved states (Sieve's bug class): what happens while the host is not looking must not leave a trace it should not.
//!
//! The host runs as a process (`operator-host-faulty`) through a fault proxy on the shared
//! cluster, serving the Memcached plugin in a namespace of its own. It is frozen with SIGSTOP
//! (its watches stay open, it reads nothing) or killed with SIGKILL while the test edits CRs, so
//! some states of a CR exist only while it is not looking. A watch the test runs on the children
//! kinds (Deployments, Services) for the whole test records every version of every child, which
//! proves what never happened: a child written with a state the host did not need to see, a
//! child made for a CR that no longer exists, a child deleted and made again. At the end the
//! oracle (the plugin's `plan` on the live state) must hold and the host must fall quiet.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use operator_host_tests::campaign::{BOUND, Scenario};
use operator_host_tests::devcluster::{wait_for, wait_for_crd_established};
use operator_host_tests::memcached::memcached_resource;
use operator_host_tests::process_host::ProcessHost;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

const CRD: &str = "memcacheds.cache.example.com";

/// How long the host stays frozen: long enough for the edits to land, short enough that the
/// API server keeps its watches open.
const FROZEN: Duration = Duration::from_secs(2);

/// One version of a child, as the test's watch saw it.
#[derive(Debug, Clone)]
struct Version {
    /// `Kind/name`.
    child: String,
    uid: String,
    resource_version: String,
    generation: Option<i64>,
    /// `spec.replicas` of a Deployment.
    replicas: Option<i64>,
}

/// Every version of the namespace's Deployments and Services since the recording started.
struct Recording {
    versions: Arc<Mutex<Vec<Version>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Recording {
    async fn start(scenario: &Scenario) -> Recording {
        let versions = Arc::new(Mutex::new(Vec::new()));
        let tasks = vec![
            record::<Deployment>(scenario.ns.api(), versions.clone()).await,
            record::<Service>(scenario.ns.api(), versions.clone()).await,
        ];
        Recording { versions, tasks }
    }

    fn versions(&self) -> Vec<Version> {
        self.versions.lock().unwrap().clone()
    }

    /// Every child seen with more than one UID (deleted and made again), with its UIDs.
    fn recreated(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut uids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for v in self.versions() {
            uids.entry(v.child).or_default().insert(v.uid);
        }
        uids.retain(|_, uids| uids.len() > 1);
        uids
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts a watcher of `api` appending every version it sees to `versions`; returns once its
/// initial list is in, so nothing after this call is missed.
async fn record<K>(api: Api<K>, versions: Arc<Mutex<Vec<Version>>>) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                }
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    let value = serde_json::to_value(&object).unwrap_or(Value::Null);
                    versions.lock().unwrap().push(Version {
                        child: format!("{}/{}", K::kind(&()), object.name_any()),
                        uid: object.uid().unwrap_or_default(),
                        resource_version: object.resource_version().unwrap_or_default(),
                        generation: object.meta().generation,
                        replicas: value["spec"]["replicas"].as_i64(),
                    });
                }
                Ok(watcher::Event::Delete(_) | watcher::Event::Init) | Err(_) => {}
            }
        }
    });
    tokio::time::timeout(BOUND, ready_rx)
        .await
        .expect("the recording watch's initial list did not finish")
        .expect("the recording watch ended");
    task
}

/// Starts the host and waits until its CRD is served.
async fn start_host(scenario: &Scenario) -> ProcessHost {
    let host = scenario.host(None);
    let crds: Api<CustomResourceDefinition> = Api::all(scenario.ns.client());
    if let Err(e) = wait_for_crd_established(&crds, CRD, BOUND).await {
        panic!(
            "the host did not install {CRD}: {e}; log tail:\n{}",
            host.log_tail(80)
        );
    }
    host
}

/// Creates `name` (retrying while the CRD the host just installed is not served yet).
async fn create(scenario: &Scenario, name: &str, spec: Value) {
    let object: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    wait_for(&format!("creating {name}"), BOUND, || async {
        match scenario.parents.create(&Default::default(), &object).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some(())),
            Err(e) => Err(e.into()),
        }
    })
    .await
    .unwrap();
}

/// Waits for parent `name` to converge; panics with the host's log tail otherwise.
async fn converges(scenario: &Scenario, host: &ProcessHost, name: &str, when: &str) -> Duration {
    scenario
        .oracle()
        .converges(name, BOUND)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{when}, {name} did not converge within {BOUND:?}: {e}; host log tail:\n{}",
                host.log_tail(80)
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_flipped_and_back_while_the_host_is_frozen_leaves_the_children_untouched() {
    let scenario =
        Scenario::new(BINARY, "flip", "plugins", "memcached", memcached_resource()).await;
    let mut host = start_host(&scenario).await;
    create(&scenario, "cache", json!({"size": 1})).await;
    converges(&scenario, &host, "cache", "before the freeze").await;
    let deployments = scenario.ns.api::<Deployment>();
    let before = deployments.get("cache").await.unwrap();
    let service = scenario.ns.api::<Service>().get("cache").await.unwrap();
    let recording = Recording::start(&scenario).await;

    // A -> B -> A while the host reads nothing: B lives only in the API server's history.
    host.signal("STOP");
    scenario.patch_spec("cache", json!({"size": 3})).await;
    tokio::time::sleep(FROZEN / 2).await;
    scenario.patch_spec("cache", json!({"size": 1})).await;
    tokio::time::sleep(FROZEN / 2).await;
    host.signal("CONT");
    let resumed = Instant::now();
    let took = converges(&scenario, &host, "cache", "after SIGCONT").await;
    scenario.assert_quiet(&host, "the A -> B -> A flip").await;
    host.assert_running("after the flip").await;

    let parent = scenario.parents.get("cache").await.unwrap();
    assert_eq!(
        parent.metadata.generation,
        Some(3),
        "the CR went through two spec changes"
    );
    let after = deployments.get("cache").await.unwrap();
    // Every version of the Deployment since the freeze: status updates may come (pods), but
    // no spec write (a new generation), and never one with B's replicas.
    let history: Vec<Version> = recording
        .versions()
        .into_iter()
        .filter(|v| v.child == "Deployment/cache")
        .collect();
    let written_with_b: Vec<&Version> = history
        .iter()
        .filter(|v| v.replicas == Some(3) || v.generation != before.metadata.generation)
        .collect();
    assert!(
        written_with_b.is_empty(),
        "the Deployment's spec was written during the flip (size 3 or a new generation, \
         before: generation {:?}): {written_with_b:?}; host log tail:\n{}",
        before.metadata.generation,
        host.log_tail(80)
    );
    assert_eq!(
        (after.uid(), after.metadata.generation),
        (before.uid(), before.metadata.generation),
        "the Deployment (uid, generation) changed across the flip; host log tail:\n{}",
        host.log_tail(80)
    );
    let service_after = scenario.ns.api::<Service>().get("cache").await.unwrap();
    assert_eq!(
        service_after.uid(),
        service.uid(),
        "the Service was recreated"
    );
    assert!(
        recording.recreated().is_empty(),
        "{:?}",
        recording.recreated()
    );
    eprintln!(
        "size 1 -> 3 -> 1 while frozen {FROZEN:?}: converged {took:?} after SIGCONT, quiet \
         {:?} after it; the Deployment kept generation {:?} through {} versions ({} -> {})",
        resumed.elapsed(),
        before.metadata.generation,
        history.len(),
        history.first().map_or("", |v| v.resource_version.as_str()),
        history.last().map_or("", |v| v.resource_version.as_str()),
    );
    host.kill().await;
    scenario.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_created_and_deleted_while_the_host_is_frozen_leaves_nothing() {
    let scenario = Scenario::new(
        BINARY,
        "ghost",
        "plugins",
        "memcached",
        memcached_resource(),
    )
    .await;
    let mut host = start_host(&scenario).await;
    // A CR the host serves, so its watches and caches are known to be up before the freeze.
    create(&scenario, "keeper", json!({"size": 1})).await;
    converges(&scenario, &host, "keeper", "before the freeze").await;
    let recording = Recording::start(&scenario).await;

    host.signal("STOP");
    create(&scenario, "ghost", json!({"size": 1})).await;
    scenario
        .parents
        .delete("ghost", &DeleteParams::default())
        .await
        .unwrap();
    // Nobody put a finalizer on it: it is gone at once.
    wait_for("ghost to be gone", BOUND, || async {
        Ok(scenario
            .parents
            .get_opt("ghost")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    tokio::time::sleep(FROZEN).await;
    host.signal("CONT");
    let resumed = Instant::now();
    // The settle window: the host catches up, then makes no write for the quiet window.
    scenario.assert_quiet(&host, "the ghost CR").await;
    host.assert_running("after the ghost CR").await;

    let ghosts: Vec<Version> = recording
        .versions()
        .into_iter()
        .filter(|v| v.child.ends_with("/ghost"))
        .collect();
    assert!(
        ghosts.is_empty(),
        "children were made for a CR deleted before the host could see it: {ghosts:?}; host \
         log tail:\n{}",
        host.log_tail(80)
    );
    let params = ListParams::default().labels("app.kubernetes.io/instance=ghost");
    assert!(
        scenario
            .ns
            .api::<Deployment>()
            .list(&params)
            .await
            .unwrap()
            .items
            .is_empty()
            && scenario
                .ns
                .api::<Service>()
                .list(&params)
                .await
                .unwrap()
                .items
                .is_empty(),
        "a child of ghost exists"
    );
    assert!(
        recording.recreated().is_empty(),
        "{:?}",
        recording.recreated()
    );
    eprintln!(
        "a CR created and deleted while frozen: nothing made for it, quiet {:?} after SIGCONT",
        resumed.elapsed()
    );
    host.kill().await;
    scenario.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_killed_and_restarted_while_crs_are_edited_converges_without_recreating() {
    const CRS: usize = 8;
    let scenario = Scenario::new(
        BINARY,
        "kill-edits",
        "plugins",
        "memcached",
        memcached_resource(),
    )
    .await;
    let first = start_host(&scenario).await;
    let names: Vec<String> = (0..CRS).map(|i| format!("mc-{i}")).collect();
    for name in &names {
        create(&scenario, name, json!({"size": 1})).await;
    }
    for name in &names {
        converges(&scenario, &first, name, "before the kill").await;
    }
    let recording = Recording::start(&scenario).await;

    // Edits every 100 ms, in rounds over the CRs (size 2, then 1, ...), for 4 s; the host
    // is killed 1.5 s in and a new one started at once.
    let editor = tokio::spawn({
        let (parents, names) = (scenario.parents.clone(), names.clone());
        async move {
            let started = Instant::now();
            let mut edits = 0usize;
            while started.elapsed() < Duration::from_secs(4) {
                let name = &names[edits % names.len()];
                let size = 1 + (edits / names.len() + 1) % 2;
                parents
                    .patch(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"size": size}})),
                    )
                    .await
                    .unwrap();
                edits += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            edits
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.signal("KILL");
    let mut first = first;
    assert!(
        first.exited(Duration::from_secs(5)).await.is_some(),
        "SIGKILL did not end the host"
    );
    let mut second = scenario.host(None);
    let edits = editor.await.unwrap();
    let edited = Instant::now();
    for name in &names {
        converges(&scenario, &second, name, "after the kill and restart").await;
    }
    let took = edited.elapsed();
    scenario
        .assert_quiet(&second, "SIGKILL while editing")
        .await;
    second.assert_running("after the restart").await;
    let recreated = recording.recreated();
    assert!(
        recreated.is_empty(),
        "children were deleted and made again across the kill: {recreated:?}; new host's log \
         tail:\n{}",
        second.log_tail(80)
    );
    let children: BTreeSet<String> = recording.versions().into_iter().map(|v| v.child).collect();
    assert_eq!(children.len(), 2 * CRS, "children seen: {children:?}");
    eprintln!(
        "SIGKILL and restart during {edits} edits of {CRS} CRs: all converged {took:?} after the \
         last edit"
    );
    second.kill().await;
    scenario.cleanup().await;
}
