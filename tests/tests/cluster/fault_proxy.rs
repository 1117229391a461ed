//! The fault proxy against the shared devcluster, and apiserver and etcd restarts on a cluster of its own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use operator_host_tests::devcluster::{self, TestNamespace, wait_for};
use operator_host_tests::fault_proxy::{FaultProxy, Matcher, StatusFault};
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The isolated cluster of this area (its apiserver and etcd get restarted).
const ISOLATED: &str = "fault-proxy";

/// One control-plane fault at a time: two tests restarting parts of the same cluster would
/// break each other's assertions.
static FAULTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn proxy_to_shared_cluster() -> FaultProxy {
    let cluster = tokio::task::spawn_blocking(devcluster::cluster)
        .await
        .unwrap();
    FaultProxy::start(cluster.config().await.unwrap())
        .await
        .unwrap()
}

/// On every config map these tests make, so lists and watches leave out the namespace's own
/// (`kube-root-ca.crt`, made by the controller-manager at its own pace).
const LABEL: &str = "operator-host.test/fault-proxy=true";

fn ours() -> ListParams {
    ListParams::default().labels(LABEL)
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    "operator-host.test/fault-proxy".to_string(),
                    "true".to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_string(), name.to_string())].into()),
        ..ConfigMap::default()
    }
}

/// A namespace for `test`, a proxy to the shared cluster, and the namespace's ConfigMaps
/// through it.
async fn proxied(test: &str) -> (TestNamespace, FaultProxy, Api<ConfigMap>) {
    let ns = TestNamespace::new(test).await.unwrap();
    let proxy = proxy_to_shared_cluster().await;
    let via_proxy = Api::namespaced(proxy.client().unwrap(), ns.name());
    (ns, proxy, via_proxy)
}

/// A raw watch of our config maps of `api` from `resource_version`, bookmarks left out.
async fn raw_watch(
    api: &Api<ConfigMap>,
    resource_version: &str,
) -> BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>> {
    api.watch(
        &WatchParams::default().labels(LABEL).timeout(60),
        resource_version,
    )
    .await
    .unwrap()
    .filter(|e| std::future::ready(!matches!(e, Ok(WatchEvent::Bookmark(_)))))
    .boxed()
}

fn added_name(event: kube::Result<WatchEvent<ConfigMap>>) -> String {
    match event {
        Ok(WatchEvent::Added(cm)) => cm.name_any(),
        other => panic!("expected an Added event, got {other:?}"),
    }
}

fn list_version(list: &kube::api::ObjectList<ConfigMap>) -> String {
    list.metadata.resource_version.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_list_and_a_watch_go_through_the_proxy() {
    let (ns, proxy, via_proxy) = proxied("a_list_and_a_watch_go_through_the_proxy").await;

    via_proxy
        .create(&PostParams::default(), &config_map("through"))
        .await
        .unwrap();
    let list = via_proxy.list(&ours()).await.unwrap();
    let names: Vec<String> = list.items.iter().map(|c| c.name_any()).collect();
    assert!(names.contains(&"through".to_string()), "listed: {names:?}");

    let mut events = raw_watch(&via_proxy, &list_version(&list)).await;
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &config_map("direct"))
        .await
        .unwrap();
    let event = tokio::time::timeout(TIMEOUT, events.next())
        .await
        .expect("no watch event through the proxy")
        .expect("the watch ended");
    assert_eq!(added_name(event), "direct");

    let in_ns = Matcher::any().path_contains(format!("/namespaces/{}/", ns.name()));
    assert_eq!(
        proxy.forwarded(&Matcher::writes().path_contains(ns.name())),
        1
    );
    assert_eq!(proxy.count(&in_ns.clone().watch()), 1);
    assert_eq!(proxy.count(&in_ns.not_watch().method(Method::GET)), 1);
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_held_watch_delivers_nothing_until_released_then_every_event_in_order() {
    let (ns, proxy, via_proxy) = proxied("a_held_watch_delivers_nothing_until_released").await;
    let list = via_proxy.list(&ours()).await.unwrap();
    let mut events = raw_watch(&via_proxy, &list_version(&list)).await;

    // Held after the watch opened: the fault applies to a live stream.
    let hold = proxy.hold_watch(
        Matcher::any().path_prefix(format!("/api/v1/namespaces/{}/configmaps", ns.name())),
    );
    let direct: Api<ConfigMap> = ns.api();
    let names = ["first", "second", "third"];
    for name in names {
        direct
            .create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    // The API server has them, and has had time to send the events.
    assert_eq!(direct.list(&ours()).await.unwrap().items.len(), 3);
    let early = tokio::time::timeout(Duration::from_secs(2), events.next()).await;
    assert!(early.is_err(), "delivered while held: {early:?}");

    hold.release();
    let mut delivered = Vec::new();
    for _ in names {
        let event = tokio::time::timeout(TIMEOUT, events.next())
            .await
            .expect("held events not delivered after the release")
            .expect("the watch ended");
        delivered.push(added_name(event));
    }
    assert_eq!(delivered, names);
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_injected_status_fails_requests_then_they_pass() {
    let ns = TestNamespace::new("an_injected_status_fails_requests_then_they_pass")
        .await
        .unwrap();
    let proxy = proxy_to_shared_cluster().await;
    // kube retries 429/503/504 by default; without that the client sees each answer.
    let mut config = proxy.config().unwrap();
    config.default_retry = false;
    let no_retry_client = Client::try_from(config).unwrap();
    let no_retry: Api<ConfigMap> = Api::namespaced(no_retry_client.clone(), ns.name());
    let reads = Matcher::any()
        .method(Method::GET)
        .path_contains(format!("/namespaces/{}/", ns.name()));

    // 503 for the next two requests, then through.
    let unavailable = proxy.respond_status(
        reads.clone(),
        StatusFault::new(StatusCode::SERVICE_UNAVAILABLE).times(2),
    );
    for _ in 0..2 {
        match no_retry.list(&ours()).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(
                    (status.code, status.reason.as_str()),
                    (503, "ServiceUnavailable")
                )
            }
            other => panic!("expected a 503, got {other:?}"),
        }
    }
    no_retry.list(&ours()).await.unwrap();
    unavailable.release();

    // 429 with Retry-After for a window of 1.5 s.
    let throttled = proxy.respond_status(
        reads.clone(),
        StatusFault::new(StatusCode::TOO_MANY_REQUESTS)
            .retry_after(Duration::from_secs(1))
            .lasting(Duration::from_millis(1500)),
    );
    let window = Instant::now();
    let raw = http::Request::get(format!("/api/v1/namespaces/{}/configmaps", ns.name()))
        .body(kube::client::Body::empty())
        .unwrap();
    let response = no_retry_client.send(raw).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()[http::header::RETRY_AFTER], "1");
    match no_retry.list(&ours()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (429, "TooManyRequests")
            )
        }
        other => panic!("expected a 429, got {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(window.elapsed())).await;
    no_retry.list(&ours()).await.unwrap();
    drop(throttled);

    // kube's default client rides out one 503 by itself: two requests, one injected.
    let before = proxy.count(&reads);
    let _once = proxy.respond_status(
        reads.clone(),
        StatusFault::new(StatusCode::SERVICE_UNAVAILABLE).times(1),
    );
    let retrying: Api<ConfigMap> = Api::namespaced(proxy.client().unwrap(), ns.name());
    retrying.list(&ours()).await.unwrap();
    assert_eq!(proxy.count(&reads) - before, 2);
    assert_eq!(proxy.count(&Matcher::writes()), 0);
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_delay_holds_back_matching_requests_only() {
    let ns = TestNamespace::new("a_delay_holds_back_matching_requests_only")
        .await
        .unwrap();
    let proxy = proxy_to_shared_cluster().await;
    let client = proxy.client().unwrap();
    let via_proxy: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let delay = Duration::from_secs(2);
    let _slow = proxy.delay(
        Matcher::any().path_contains(format!("/namespaces/{}/configmaps", ns.name())),
        delay,
    );

    let started = Instant::now();
    via_proxy.list(&ours()).await.unwrap();
    let delayed = started.elapsed();
    let started = Instant::now();
    client.apiserver_version().await.unwrap();
    let undelayed = started.elapsed();
    assert!(delayed >= delay, "the list took {delayed:?}");
    assert!(undelayed < delay, "/version took {undelayed:?}");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn dropping_connections_ends_a_watch_and_a_watcher_recovers() {
    let (ns, proxy, via_proxy) = proxied("dropping_connections_ends_a_watch").await;
    let list = via_proxy.list(&ours()).await.unwrap();

    // A raw watch ends (an error or the end of the stream) when its connection is dropped.
    let mut events = raw_watch(&via_proxy, &list_version(&list)).await;
    proxy.drop_connections();
    let ended = tokio::time::timeout(TIMEOUT, async {
        while let Some(event) = events.next().await {
            if event.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the watch went on after its connection was dropped"
    );

    // A kube-runtime watcher re-watches through a new connection and sees what came after.
    let seen = spawn_watcher(via_proxy.clone());
    let mut seen = seen.await;
    let watches = Matcher::any()
        .path_contains(format!("/namespaces/{}/configmaps", ns.name()))
        .watch();
    let (watches_before, connections_before) =
        (proxy.count(&watches), proxy.connections_accepted());
    proxy.drop_connections();
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &config_map("after-drop"))
        .await
        .unwrap();
    seen.wait_for("after-drop").await;
    assert!(proxy.count(&watches) > watches_before, "no new watch");
    assert!(
        proxy.connections_accepted() > connections_before,
        "no new connection"
    );
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_counters_record_each_request_by_method_and_path() {
    let (ns, proxy, via_proxy) = proxied("the_counters_record_each_request").await;
    via_proxy
        .create(&PostParams::default(), &config_map("counted"))
        .await
        .unwrap();
    via_proxy.get("counted").await.unwrap();
    via_proxy
        .patch(
            "counted",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"k": "patched"}})),
        )
        .await
        .unwrap();
    via_proxy.list(&ours()).await.unwrap();
    via_proxy
        .delete("counted", &DeleteParams::default())
        .await
        .unwrap();

    let base = format!("/api/v1/namespaces/{}/configmaps", ns.name());
    let object = format!("{base}/counted");
    let expected: BTreeMap<(String, String), usize> = [
        (("DELETE", &object), 1),
        (("GET", &base), 1),
        (("GET", &object), 1),
        (("PATCH", &object), 1),
        (("POST", &base), 1),
    ]
    .into_iter()
    .map(|((m, p), n)| ((m.to_string(), p.to_string()), n))
    .collect();
    let counts: BTreeMap<_, _> = proxy
        .counts()
        .into_iter()
        .filter(|((_, path), _)| path.starts_with(&base))
        .collect();
    assert_eq!(counts, expected);
    let writes = Matcher::writes().path_prefix(&base);
    assert_eq!(proxy.forwarded(&writes), 3);

    // A window with reads only: no write goes through.
    let before = proxy.forwarded(&writes);
    via_proxy.list(&ours()).await.unwrap();
    assert_eq!(via_proxy.get_opt("counted").await.unwrap(), None);
    assert_eq!(proxy.forwarded(&writes), before);
    ns.cleanup().await.unwrap();
}

/// The names a kube-runtime watcher applied, fed from a task of its own.
struct Seen {
    rx: mpsc::UnboundedReceiver<String>,
    names: Vec<String>,
}

impl Seen {
    async fn wait_for(&mut self, name: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !self.names.iter().any(|n| n == name) {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(n)) => self.names.push(n),
                Ok(None) => panic!("the watcher ended before it saw {name}"),
                Err(_) => panic!("the watcher did not see {name}; it saw {:?}", self.names),
            }
        }
    }
}

/// Starts a watcher (with kube's default backoff) and returns once its initial list is done.
async fn spawn_watcher(api: Api<ConfigMap>) -> Seen {
    let (tx, rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    if let Some(r) = ready.take() {
                        let _ = r.send(());
                    }
                }
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                    if tx.send(cm.name_any()).is_err() {
                        return;
                    }
                }
                // Errors while the control plane is down are what these tests cause.
                Ok(watcher::Event::Delete(_) | watcher::Event::Init) | Err(_) => {}
            }
        }
    });
    tokio::time::timeout(TIMEOUT, ready_rx)
        .await
        .expect("the watcher's initial list did not finish")
        .expect("the watcher ended");
    Seen {
        rx,
        names: Vec::new(),
    }
}

/// A namespace in the isolated cluster (thrown away with it).
async fn isolated_namespace(client: &Client, test: &str) -> String {
    let name = devcluster::unique_name(test);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

/// Creates a config map, retrying while the control plane settles after a fault (a retry
/// after a create that did land finds it there).
async fn create_after_fault(api: &Api<ConfigMap>, name: &str) {
    wait_for(&format!("creating {name}"), TIMEOUT, || async {
        match api.create(&PostParams::default(), &config_map(name)).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some(())),
            Err(e) => Err(e.into()),
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_watcher_through_the_proxy_resumes_after_the_apiserver_restarts() {
    let _one_fault = FAULTS.lock().await;
    let cluster = devcluster::isolated_cluster(ISOLATED).await;
    let client = cluster.client().await.unwrap();
    let ns = isolated_namespace(&client, "apiserver-restart").await;
    let proxy = FaultProxy::start(cluster.config().await.unwrap())
        .await
        .unwrap();
    let mut seen = spawn_watcher(Api::namespaced(proxy.client().unwrap(), &ns)).await;

    let took = cluster
        .restart_apiserver(Duration::from_secs(1))
        .await
        .unwrap();
    eprintln!("apiserver restart (1 s down) took {took:?}");
    // Right after /readyz is ok the apiserver answers: a plain read, no retry needed.
    client.apiserver_version().await.unwrap();
    create_after_fault(&Api::namespaced(client.clone(), &ns), "after-restart").await;
    seen.wait_for("after-restart").await;

    // Stop and start separately: while it is down, the proxy answers 502.
    cluster.stop_apiserver().await.unwrap();
    let mut config = proxy.config().unwrap();
    config.default_retry = false;
    let down = Api::<ConfigMap>::namespaced(Client::try_from(config).unwrap(), &ns)
        .list(&ours())
        .await;
    assert!(
        matches!(&down, Err(kube::Error::Api(s)) if s.code == 502),
        "a list while the apiserver is down: {down:?}"
    );
    cluster.start_apiserver().await.unwrap();
    create_after_fault(&Api::namespaced(client.clone(), &ns), "after-start").await;
    seen.wait_for("after-start").await;
}

#[tokio::test]
async fn a_watcher_resumes_after_etcd_stops_and_starts() {
    let _one_fault = FAULTS.lock().await;
    let cluster = devcluster::isolated_cluster(ISOLATED).await;
    let client = cluster.client().await.unwrap();
    let ns = isolated_namespace(&client, "etcd-restart").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut seen = spawn_watcher(api.clone()).await;

    cluster.stop_etcd().await.unwrap();
    // The apiserver notices: /readyz fails (its etcd check).
    wait_for("/readyz to fail without etcd", TIMEOUT, || async {
        let readyz = http::Request::get("/readyz").body(Vec::new())?;
        Ok(client.request_text(readyz).await.is_err().then_some(()))
    })
    .await
    .unwrap();
    let took = cluster.start_etcd().await.unwrap();
    eprintln!("etcd start until /readyz ok took {took:?}");
    create_after_fault(&api, "after-etcd").await;
    seen.wait_for("after-etcd").await;

    let took = cluster.restart_etcd(Duration::from_secs(1)).await.unwrap();
    eprintln!("etcd restart (1 s down) took {took:?}");
    create_after_fault(&api, "after-etcd-restart").await;
    seen.wait_for("after-etcd-restart").await;
}
