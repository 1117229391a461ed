//! OpenTelemetry traces: `operator-host run` with `OTEL_EXPORTER_OTLP_ENDPOINT` pointed at an
//! OTLP receiver exports one trace per reconcile, with the steps inside it and the API
//! server's status code of each write, and puts the trace id in that reconcile's log lines.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::Api;
use kube::api::DynamicObject;
use operator_host_tests::devcluster::{TestNamespace, cluster, wait_for};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::kubectl_plugin::KubectlPlugin;
use operator_host_tests::memcached::{create, memcached_resource, reconciled_condition};
use operator_host_tests::otlp::{ReceivedSpan, Receiver};
use operator_host_tests::process_host::{Launch, ProcessHost};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const TIMEOUT: Duration = Duration::from_secs(60);

/// The spans of one trace, by span id, and their children's ids.
struct Trace {
    spans: BTreeMap<String, ReceivedSpan>,
}

impl Trace {
    fn of(spans: &[ReceivedSpan], trace_id: &str) -> Trace {
        Trace {
            spans: spans
                .iter()
                .filter(|s| s.trace_id == trace_id)
                .map(|s| (s.span_id.clone(), s.clone()))
                .collect(),
        }
    }

    fn children<'a>(&'a self, parent: &'a ReceivedSpan) -> Vec<&'a ReceivedSpan> {
        self.spans
            .values()
            .filter(|s| s.parent_span_id == parent.span_id)
            .collect()
    }

    fn named<'a>(&'a self, parent: &'a ReceivedSpan, name: &str) -> Vec<&'a ReceivedSpan> {
        self.children(parent)
            .into_iter()
            .filter(|s| s.name == name)
            .collect()
    }

    /// The API server's status code of the request made inside `write` (kube-client's span
    /// of it, named after the request's verb).
    fn status_code(&self, write: &ReceivedSpan) -> u16 {
        let requests: Vec<_> = self
            .children(write)
            .into_iter()
            .filter(|s| s.attributes.contains_key("http.status_code"))
            .collect();
        assert_eq!(
            requests.len(),
            1,
            "one request in {write:?}: {:#?}",
            self.spans
        );
        requests[0].attributes["http.status_code"].parse().unwrap()
    }
}

#[tokio::test]
async fn a_reconcile_is_one_trace_with_its_steps_and_the_trace_id_is_in_its_logs() {
    let receiver = Receiver::start().await;
    let ns = TestNamespace::new("traces").await.unwrap();
    let plugins = plugin_dir("plugins", "memcached");
    let host = ProcessHost::start_with_env(
        &Launch {
            binary: Path::new(BINARY),
            plugins: plugins.path(),
            kubeconfig: &cluster().kubeconfig,
            namespace: Some(ns.name()),
            install_crds: true,
            crash_after: None,
            metrics_addr: None,
            args: &[],
        },
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", Some(&receiver.endpoint)),
            // Its replica report in the test's namespace, as a pod's would be in its own.
            ("POD_NAMESPACE", Some(ns.name())),
            // Batches sent every 200 ms rather than every 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", Some("200")),
        ],
    );
    let resource = memcached_resource();
    let parents: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    wait_for("the Memcached CRD", TIMEOUT, || async {
        Ok(parents.list(&Default::default()).await.ok().map(|_| ()))
    })
    .await
    .unwrap();
    create(&parents, &resource, "cache", json!({"size": 1})).await;
    wait_for("Reconciled=True", TIMEOUT, || async {
        let parent = parents.get("cache").await?;
        Ok((reconciled_condition(&parent)["status"] == "True").then_some(()))
    })
    .await
    .unwrap();

    // The reconcile that created the children: two applies under it.
    let parent_key = format!("{}/cache", ns.name());
    let (spans, reconcile) = wait_for("the first reconcile's trace", TIMEOUT, || async {
        let spans = receiver.spans();
        let reconcile = spans
            .iter()
            .filter(|s| s.name == "reconcile" && s.attributes.get("parent") == Some(&parent_key))
            .find(|s| {
                let trace = Trace::of(&spans, &s.trace_id);
                trace.named(s, "apply").len() == 2 && trace.named(s, "status_write").len() == 1
            })
            .cloned();
        Ok(reconcile.map(|r| (spans, r)))
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; received {:#?}\nlog:\n{}",
            receiver.spans(),
            host.log()
        )
    });
    let trace = Trace::of(&spans, &reconcile.trace_id);
    let dump = format!("{:#?}", trace.spans);
    assert_eq!(reconcile.service, "operator-host", "{dump}");
    assert_eq!(reconcile.attributes["plugin"], "memcached", "{dump}");

    // Its root is kube-runtime's span of the reconcile: one trace per reconcile.
    let root = &trace.spans[&reconcile.parent_span_id];
    assert_eq!(root.name, "reconciling object", "{dump}");
    assert_eq!(root.parent_span_id, "", "{dump}");

    // The steps, in the reconcile.
    assert_eq!(trace.named(&reconcile, "cache_wait").len(), 1, "{dump}");
    assert_eq!(trace.named(&reconcile, "policy_check").len(), 1, "{dump}");
    let call = trace.named(&reconcile, "plugin_call");
    assert_eq!(call.len(), 1, "{dump}");
    let call = call[0];
    assert_eq!(
        call.attributes["contract"], "operator-host:reconciler@0.3.0",
        "{dump}"
    );
    assert_eq!(
        call.attributes["version"], reconcile.attributes["version"],
        "{dump}"
    );
    assert_eq!(call.attributes["sha256"].len(), 64, "{dump}");
    let cpu: f64 = call.attributes["cpu_seconds"].parse().unwrap();
    let memory: u64 = call.attributes["peak_memory_bytes"].parse().unwrap();
    assert!(cpu > 0.0 && cpu < 1.0, "{dump}");
    assert!(memory > 64 << 10, "{dump}");

    // Each write, with the API server's answer: the applies created the children.
    let mut applied: Vec<(String, u16)> = trace
        .named(&reconcile, "apply")
        .into_iter()
        .map(|apply| (apply.attributes["kind"].clone(), trace.status_code(apply)))
        .collect();
    applied.sort();
    assert_eq!(
        applied,
        [
            ("Deployment".to_string(), 201),
            ("Service".to_string(), 201)
        ],
        "{dump}"
    );
    let status = trace.named(&reconcile, "status_write")[0];
    assert_eq!(trace.status_code(status), 200, "{dump}");

    // A failing reconcile logs why, with its trace id; its trace holds the failure's status.
    create(
        &parents,
        &resource,
        "broken",
        json!({"size": 1, "image": "not an image"}),
    )
    .await;
    let broken_key = format!("{}/broken", ns.name());
    let failed = wait_for("the failing reconcile's trace", TIMEOUT, || async {
        let spans = receiver.spans();
        let failed = spans
            .iter()
            .filter(|s| s.name == "reconcile" && s.attributes.get("parent") == Some(&broken_key))
            .find(|s| {
                Trace::of(&spans, &s.trace_id)
                    .named(s, "status_write")
                    .len()
                    == 1
            })
            .cloned();
        Ok(failed)
    })
    .await
    .unwrap();
    let log = host.log();
    let line = log
        .lines()
        .find(|line| line.contains("reconcile failed") && line.contains(&broken_key))
        .unwrap_or_else(|| panic!("no failure logged:\n{log}"));
    assert!(
        line.contains(&format!("trace_id={}", failed.trace_id)),
        "the failure's log line names another trace than {}: {line}",
        failed.trace_id
    );
    assert!(
        Trace::of(&receiver.spans(), &failed.trace_id)
            .named(&failed, "plugin_call")
            .len()
            == 1
    );
    // `kubectl operator-host explain` names a trace of its reconciles too: the failure's
    // event carries the one that published it.
    let explain = KubectlPlugin::new(Path::new(BINARY)).run(&[
        "explain",
        "memcached/broken",
        "-n",
        ns.name(),
    ]);
    let named = explain
        .lines()
        .find_map(|line| line.strip_prefix("Trace:"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no trace in:\n{explain}"));
    assert!(
        receiver.spans().iter().any(|s| s.name == "reconcile"
            && s.trace_id == named
            && s.attributes.get("parent") == Some(&broken_key)),
        "{named} is no reconcile of {broken_key}:\n{explain}"
    );

    // The plugin's loading is a trace of its own.
    let reload = spans
        .iter()
        .find(|s| s.name == "reload")
        .unwrap_or_else(|| panic!("no reload span: {spans:#?}"));
    assert_eq!(reload.attributes["change"], "add");
    assert_eq!(reload.attributes["outcome"], "done");
    assert_eq!(reload.parent_span_id, "");
    drop(host);
    ns.cleanup().await.unwrap();
}
