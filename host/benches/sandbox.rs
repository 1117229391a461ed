//! Sandboxed vs native reconcile of the Memcached plugin, plus compile and cache-load times.
//!
//! Every figure is taken in the same run, side by side with its baseline:
//!
//! - `reconcile/native`: the Memcached logic compiled natively (bench profile), called through
//!   the same JSON glue the guest runs (`operator_host_sdk::__private::reconcile`).
//! - `reconcile/sandboxed`: `CompiledPlugin::reconcile`, i.e. a fresh `Store` and instance per
//!   call, the request lowered into and the response lifted out of the guest.
//! - `reconcile/plan`: `Plugin::plan`, i.e. the sandboxed call plus output validation and the
//!   plan (host labels, owner references, status merge), which is what the controller runs.
//! - `load/cold_compile` and `load/warm_cache`: `Runtime::load` without a compile cache
//!   (Cranelift) and from a populated cache (deserialise + `InstancePre`).
//!
//! The request is a steady-state reconcile: the parent from `examples/memcached.yaml` and the
//! two children it owns as the API server returns them (defaults, `managedFields`, status).
//!
//! After criterion, a summary measures the same calls in interleaved rounds (so background load
//! hits both sides alike) and prints the ratios. Run with `make bench`; the plugin is taken
//! from `target/plugins/memcached.wasm` or `$OPERATOR_HOST_BENCH_PLUGIN`.

mod common;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode};
use operator_host::plugin::Plugin;
use operator_host::runtime::{self, Runtime, RuntimeConfig};
use operator_host_sdk::bindings::operator_host::reconciler::types as guest_types;
use serde_json::{Value, json};

const PARENT_UID: &str = "0b1c7a52-5d3e-4c1f-9a57-3f1e2d4c5b6a";
const NOW: &str = "2026-12-01T10:00:00Z";
/// The brief's target: a sandboxed call costs at most this many native calls.
const TARGET_RATIO: f64 = 2.0;

fn plugin_path() -> PathBuf {
    common::built(
        std::env::var_os("OPERATOR_HOST_BENCH_PLUGIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| common::repo_root().join("target/plugins/memcached.wasm")),
    )
}

/// The parent: `examples/memcached.yaml` as the API server returns it.
fn parent() -> Value {
    let mut parent = common::memcached_example();
    let metadata = parent["metadata"].as_object_mut().expect("metadata");
    metadata.insert("namespace".into(), "default".into());
    metadata.insert("uid".into(), PARENT_UID.into());
    metadata.insert("generation".into(), 2.into());
    metadata.insert("resourceVersion".into(), "48213".into());
    metadata.insert("creationTimestamp".into(), "2026-12-01T09:58:00Z".into());
    parent
}

/// What the host adds to every child (`plan::validate_child`), as observed later.
fn host_metadata(child: &mut Value, uid: &str, resource_version: &str) {
    let api_version = child["apiVersion"].clone();
    let metadata = &mut child["metadata"];
    metadata["namespace"] = "default".into();
    metadata["uid"] = uid.into();
    metadata["resourceVersion"] = resource_version.into();
    metadata["generation"] = 1.into();
    metadata["creationTimestamp"] = "2026-12-01T09:58:01Z".into();
    let labels = &mut metadata["labels"];
    labels[operator_host::labels::MANAGED_BY_LABEL] = operator_host::labels::MANAGED_BY.into();
    labels[operator_host::labels::PLUGIN_LABEL] = "memcached".into();
    labels[operator_host::labels::PARENT_UID_LABEL] = PARENT_UID.into();
    metadata["ownerReferences"] = json!([{
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "name": "memcached-sample", "uid": PARENT_UID,
        "controller": true, "blockOwnerDeletion": true,
    }]);
    metadata["managedFields"] = json!([{
        "manager": "operator-host", "operation": "Apply", "apiVersion": api_version,
        "time": "2026-12-01T09:58:01Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/component": {},
            "f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/managed-by": {},
            "f:app.kubernetes.io/name": {}, "f:operator-host.dev/parent-uid": {},
            "f:operator-host.dev/plugin": {}},
            "f:ownerReferences": {"k:{\"uid\":\"0b1c7a52-5d3e-4c1f-9a57-3f1e2d4c5b6a\"}": {}}},
            "f:spec": {}}
    }, {
        "manager": "kube-controller-manager", "operation": "Update", "apiVersion": api_version,
        "time": "2026-12-01T09:58:03Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {"f:status": {"f:availableReplicas": {}, "f:conditions": {}, "f:observedGeneration": {},
            "f:readyReplicas": {}, "f:replicas": {}, "f:updatedReplicas": {}}}
    }]);
}

/// The two children, as observed in steady state: server defaults, host metadata, status.
fn observed(parent: &Value) -> Vec<Value> {
    let response = operator_host_sdk::__private::reconcile::<memcached::MemcachedOperator>(
        guest_types::ReconcileRequest {
            parent: parent.to_string(),
            observed: Vec::new(),
            related: Vec::new(),
        },
    )
    .unwrap_or_else(|e| panic!("native reconcile of the fixture failed: {e:?}"));
    let mut children: Vec<Value> = response
        .children
        .iter()
        .map(|c| serde_json::from_str(&c.object).expect("child JSON"))
        .collect();
    for child in &mut children {
        match child["kind"].as_str() {
            Some("Deployment") => {
                host_metadata(child, "6f1d2c3b-0000-4000-8000-00000000d001", "48220");
                let spec = &mut child["spec"];
                spec["strategy"] = json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}});
                spec["revisionHistoryLimit"] = 10.into();
                spec["progressDeadlineSeconds"] = 600.into();
                let pod = &mut spec["template"]["spec"];
                pod["restartPolicy"] = "Always".into();
                pod["terminationGracePeriodSeconds"] = 30.into();
                pod["dnsPolicy"] = "ClusterFirst".into();
                pod["schedulerName"] = "default-scheduler".into();
                pod["securityContext"] = json!({});
                child["status"] = json!({
                    "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
                    "readyReplicas": 3, "availableReplicas": 3,
                    "conditions": [
                        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                         "message": "Deployment has minimum availability.",
                         "lastUpdateTime": "2026-12-01T09:58:03Z", "lastTransitionTime": "2026-12-01T09:58:03Z"},
                        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                         "message": "ReplicaSet \"memcached-sample-6d9f7c9b8d\" has successfully progressed.",
                         "lastUpdateTime": "2026-12-01T09:58:03Z", "lastTransitionTime": "2026-12-01T09:58:01Z"}
                    ]
                });
            }
            Some("Service") => {
                host_metadata(child, "6f1d2c3b-0000-4000-8000-00000000c002", "48218");
                let spec = &mut child["spec"];
                spec["type"] = "ClusterIP".into();
                spec["clusterIP"] = "10.96.14.7".into();
                spec["clusterIPs"] = json!(["10.96.14.7"]);
                spec["sessionAffinity"] = "None".into();
                spec["ipFamilies"] = json!(["IPv4"]);
                spec["ipFamilyPolicy"] = "SingleStack".into();
                spec["internalTrafficPolicy"] = "Cluster".into();
                child["status"] = json!({"loadBalancer": {}});
            }
            other => panic!("unexpected child kind {other:?}"),
        }
    }
    children
}

struct Fixture {
    parent: Value,
    observed: Vec<Value>,
    native_request: guest_types::ReconcileRequest,
    host_request: runtime::ReconcileRequest,
    plugin: Plugin,
    /// Keeps the compile cache of `plugin` alive.
    cache_dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let parent = parent();
        let observed = observed(&parent);
        let parent_text = parent.to_string();
        let observed_text: Vec<String> = observed.iter().map(Value::to_string).collect();
        let cache_dir = tempfile::tempdir().expect("temp dir");
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(cache_dir.path().to_path_buf()),
            ..RuntimeConfig::default()
        })
        .expect("runtime");
        let plugin = Plugin::load(&runtime, &plugin_path()).expect("loading the plugin");
        let fixture = Fixture {
            native_request: guest_types::ReconcileRequest {
                parent: parent_text.clone(),
                observed: observed_text.clone(),
                related: Vec::new(),
            },
            host_request: runtime::ReconcileRequest {
                parent: parent_text,
                observed: observed_text,
                related: Vec::new(),
            },
            parent,
            observed,
            plugin,
            cache_dir,
        };
        fixture.check_same_answer();
        fixture
    }

    /// Both sides must do the same work: same children, same status, no error.
    fn check_same_answer(&self) {
        let native = self.native().expect("native reconcile");
        let sandboxed = self.sandboxed();
        let objects =
            |children: &mut dyn Iterator<Item = &String>| children.cloned().collect::<Vec<_>>();
        assert_eq!(
            objects(&mut native.children.iter().map(|c| &c.object)),
            objects(&mut sandboxed.children.iter().map(|c| &c.object)),
            "children differ"
        );
        assert_eq!(native.status, sandboxed.status, "status differs");
        let request_bytes = self.host_request.parent.len()
            + self
                .host_request
                .observed
                .iter()
                .map(String::len)
                .sum::<usize>();
        let response_bytes = native.status.len()
            + native
                .children
                .iter()
                .map(|c| c.object.len())
                .sum::<usize>();
        println!(
            "fixture: request {request_bytes} bytes (parent + {} observed children), \
             response {response_bytes} bytes ({} children); plugin {} ({} bytes)",
            self.observed.len(),
            native.children.len(),
            self.plugin.path.display(),
            self.plugin.compiled.size(),
        );
    }

    fn native(&self) -> Result<guest_types::ReconcileResponse, guest_types::ReconcileError> {
        operator_host_sdk::__private::reconcile::<memcached::MemcachedOperator>(
            self.native_request.clone(),
        )
    }

    fn sandboxed(&self) -> runtime::ReconcileResponse {
        self.plugin
            .compiled
            .reconcile(&self.host_request, "bench")
            .expect("sandboxed call")
            .expect("reconcile succeeded")
    }

    fn plan(&self) -> operator_host::plan::Plan {
        self.plugin
            .plan(&self.parent, &self.observed, Vec::new(), NOW)
            .expect("plan")
    }
}

fn reconcile_benches(c: &mut Criterion, fixture: &Fixture) {
    let mut group = c.benchmark_group("reconcile");
    group.bench_function("native", |b| {
        b.iter_batched(
            || fixture.native_request.clone(),
            |request| {
                black_box(operator_host_sdk::__private::reconcile::<
                    memcached::MemcachedOperator,
                >(request))
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("sandboxed", |b| b.iter(|| black_box(fixture.sandboxed())));
    group.bench_function("plan", |b| b.iter(|| black_box(fixture.plan())));
    group.finish();
}

fn load_benches(c: &mut Criterion, fixture: &Fixture) {
    let path = plugin_path();
    let mut group = c.benchmark_group("load");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    let uncached = Runtime::new(RuntimeConfig {
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    group.bench_function("cold_compile", |b| {
        b.iter(|| black_box(uncached.load(&path).expect("compile")))
    });
    // A second runtime on the cache the fixture's runtime filled: what a restart sees.
    let cached = Runtime::new(RuntimeConfig {
        cache_dir: Some(fixture.cache_dir.path().to_path_buf()),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    group.bench_function("warm_cache", |b| {
        b.iter(|| {
            let compiled = cached.load(&path).expect("load");
            assert_eq!(compiled.cache_outcome(), runtime::CacheOutcome::Hit);
            black_box(compiled)
        })
    });
    group.finish();
}

/// Per-call time of `f`, over `calls` calls.
fn time_calls(calls: u32, mut f: impl FnMut()) -> Duration {
    let started = Instant::now();
    for _ in 0..calls {
        f();
    }
    started.elapsed() / calls
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn micros(d: Duration) -> String {
    format!("{:8.1} us", d.as_secs_f64() * 1e6)
}

/// Interleaved rounds of the three reconcile variants, then one compile and one cache load.
fn summary(fixture: &Fixture) {
    const ROUNDS: usize = 15;
    const CALLS: u32 = 300;
    let (mut native, mut sandboxed, mut plan) = (Vec::new(), Vec::new(), Vec::new());
    let requests: Vec<_> = (0..CALLS).map(|_| fixture.native_request.clone()).collect();
    for _ in 0..ROUNDS {
        let mut batch = requests.clone().into_iter();
        native.push(time_calls(CALLS, || {
            let request = batch.next().expect("one request per call");
            black_box(operator_host_sdk::__private::reconcile::<
                memcached::MemcachedOperator,
            >(request))
            .ok();
        }));
        sandboxed.push(time_calls(CALLS, || {
            black_box(fixture.sandboxed());
        }));
        plan.push(time_calls(CALLS, || {
            black_box(fixture.plan());
        }));
    }
    let (native, sandboxed, plan) = (median(native), median(sandboxed), median(plan));
    let ratio = sandboxed.as_secs_f64() / native.as_secs_f64();
    let plan_ratio = plan.as_secs_f64() / native.as_secs_f64();
    let verdict = if ratio <= TARGET_RATIO {
        "met"
    } else {
        "MISSED"
    };

    let path = plugin_path();
    let uncached = Runtime::new(RuntimeConfig {
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let cold = median(
        (0..3)
            .map(|_| time_calls(1, || drop(uncached.load(&path).expect("compile"))))
            .collect(),
    );
    let cached = Runtime::new(RuntimeConfig {
        cache_dir: Some(fixture.cache_dir.path().to_path_buf()),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let warm = median(
        (0..3)
            .map(|_| time_calls(10, || drop(cached.load(&path).expect("load"))))
            .collect(),
    );

    println!();
    println!(
        "summary: median of {ROUNDS} interleaved rounds of {CALLS} calls each, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("  native reconcile (JSON glue)       {}", micros(native));
    println!(
        "  sandboxed reconcile (fresh store)  {}   {ratio:.2}x native   (target <= {TARGET_RATIO}x: {verdict})",
        micros(sandboxed)
    );
    println!(
        "  plan (sandboxed + validate + plan) {}   {plan_ratio:.2}x native",
        micros(plan)
    );
    println!(
        "  cold compile {:.1} ms, load from the compile cache {:.2} ms ({:.0}x faster)",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3,
        cold.as_secs_f64() / warm.as_secs_f64()
    );
    println!("SANDBOXED/NATIVE RATIO: {ratio:.2}");
}

fn main() {
    let fixture = Fixture::new();
    let mut criterion = Criterion::default().configure_from_args();
    reconcile_benches(&mut criterion, &fixture);
    load_benches(&mut criterion, &fixture);
    criterion.final_summary();
    // `cargo test --benches` runs each benchmark once with `--test`; skip the summary there.
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    if !quick {
        summary(&fixture);
    }
}
