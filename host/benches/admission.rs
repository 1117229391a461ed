//! Admission latency: the Memcached plugin's `validate` answered through the host's webhook,
//! against a native Rust webhook making the same check, both on the host's HTTPS stack, at a
//! fixed 200 requests/s.
//!
//! Both servers run in this process on one runtime, taking turns in one-second slices (so that
//! the machine's drift falls on both alike), with the same client: what differs is the plugin
//! call (a fresh sandboxed instance per request, on the call threads) against the check
//! compiled natively. Requests alternate a valid and an invalid
//! Memcached, so both answers (allowed, and refused with field errors) are timed. The load is
//! open-loop: requests start on a 5 ms grid whatever the answers take, so a slow server shows
//! as latency, not as fewer requests. Figures: p50, p99 and max latency, the requests timed,
//! and the plugin's p99 over the native one (the goal: at most 1.5).
//!
//! Run with `make bench` (after `make test-plugins`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::response::IntoResponse;
use axum::routing::post;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use operator_host::plugin::Plugin;
use operator_host::runtime::{Runtime, RuntimeConfig};
use operator_host::webhook::{self, Ca, FailurePolicy, ServedPlugins, WebhookConfig};
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

const RATE: u32 = 200;
const WARM_UP: Duration = Duration::from_secs(1);
const MEASURED: Duration = Duration::from_secs(10);
const GOAL_P99_RATIO: f64 = 1.5;
/// Calls of `validate` timed without the webhook, for each spacing.
const CALLS_ALONE: u32 = 400;
/// How long each server is driven before the other takes its turn.
const SLICE: Duration = Duration::from_secs(1);
/// The serving certificates' validity: longer than the run, so none is renewed during it.
const VALIDITY: Duration = Duration::from_secs(3600);

/// An AdmissionReview of the create of `examples/memcached.yaml`, as written or with an
/// invalid image.
fn review(example: &Value, index: usize, valid: bool) -> Vec<u8> {
    let mut object = example.clone();
    object["metadata"]["namespace"] = json!("default");
    if !valid {
        object["spec"]["image"] = json!("not an image");
    }
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{index:012}"),
            "kind": {"group": "cache.example.com", "version": "v1alpha1", "kind": "Memcached"},
            "resource": {"group": "cache.example.com", "version": "v1alpha1", "resource": "memcacheds"},
            "name": "bench", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": object,
            "dryRun": false,
        },
    }))
    .unwrap()
}

/// The native baseline: the same decode, check and answer, with the plugin's logic compiled
/// into this process.
async fn native_validate(body: Bytes) -> axum::response::Response {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&body).unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    let mut response = AdmissionResponse::from(&request);
    let object = serde_json::to_value(request.object.as_ref().unwrap()).unwrap();
    let memcached: memcached::Memcached = serde_json::from_value(object).unwrap();
    if let Err(error) = memcached::validate(&memcached.spec) {
        response = response.deny(format!(
            "Memcached.cache.example.com {:?} is invalid: {}",
            request.name,
            error.message()
        ));
        response.result.code = 422;
    }
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&response.into_review()).unwrap(),
    )
        .into_response()
}

/// Latencies of `RATE` requests/s to `url` for `length`, and the answers' check: every valid
/// request allowed, every invalid one refused. `first` numbers the requests (their UIDs).
async fn drive(
    client: &reqwest::Client,
    url: &str,
    example: &Value,
    length: Duration,
    first: usize,
) -> Vec<Duration> {
    let interval = Duration::from_secs(1) / RATE;
    let count = (length.as_secs_f64() * f64::from(RATE)) as usize;
    let started = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for index in first..first + count {
        tokio::time::sleep_until(started + interval * (index - first) as u32).await;
        let (client, url, example) = (client.clone(), url.to_string(), example.clone());
        tasks.push(tokio::spawn(async move {
            let valid = index % 2 == 0;
            let sent = Instant::now();
            let answer: Value = client
                .post(&url)
                .body(review(&example, index, valid))
                .send()
                .await
                .expect("the webhook answers")
                .json()
                .await
                .expect("an AdmissionReview");
            let took = sent.elapsed();
            assert_eq!(answer["response"]["allowed"], valid, "{answer}");
            took
        }));
    }
    let mut latencies = Vec::with_capacity(count);
    for task in tasks {
        latencies.push(task.await.unwrap());
    }
    latencies
}

/// The mean time of the plugin's `validate` of `request` called directly (no HTTP, no
/// thread), back to back and then once every 5 ms of busy waiting as under the load: what the
/// sandboxed call itself costs, warm and as the webhook meets it.
fn call_alone(plugin: &Plugin, example: &Value) {
    let mut object = example.clone();
    object["metadata"]["namespace"] = json!("default");
    let request = operator_host::runtime::AdmissionRequest {
        operation: operator_host::runtime::Operation::Create,
        object: Some(object.to_string()),
        old_object: None,
        user: "bench".into(),
        dry_run: false,
    };
    let mean_with_gap = |gap: Duration| {
        let mut total = Duration::ZERO;
        for _ in 0..CALLS_ALONE {
            let idle = Instant::now();
            while idle.elapsed() < gap {
                std::hint::spin_loop();
            }
            let started = Instant::now();
            plugin.compiled.validate(&request, "bench").unwrap();
            total += started.elapsed();
        }
        total / CALLS_ALONE
    };
    mean_with_gap(Duration::ZERO);
    println!(
        "  validate alone (no HTTP): {:.3} ms back to back, {:.3} ms every 5 ms",
        ms(mean_with_gap(Duration::ZERO)),
        ms(mean_with_gap(Duration::from_secs(1) / RATE)),
    );
}

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    sorted[((sorted.len() as f64 * share) as usize).min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let async_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    async_runtime.block_on(async {
        let ca = Ca::self_signed("admission benchmark").unwrap();
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(common::repo_root().join("target/test-compile-cache")),
            ..RuntimeConfig::default()
        })
        .unwrap();
        let path = common::built(common::repo_root().join("target/plugins/memcached.wasm"));
        // The plugin's calls run on the call threads, as `run`'s do.
        let plugin = Arc::new(Plugin::load(&runtime, &path).unwrap());
        let served = ServedPlugins::default();
        served.serve(plugin.clone());
        let config = WebhookConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            endpoint: None,
            failure_policy: FailurePolicy::Fail,
            // Not read: the CA is given to `start_with_ca`.
            certificates: webhook::Certificates::OwnCa {
                secret: (String::new(), String::new()),
                validity: VALIDITY,
                ca_validity: VALIDITY,
            },
            owner: webhook::Owner {
                namespace: "bench".into(),
                lease: "bench".into(),
            },
        };
        let metrics = Arc::new(operator_host::metrics::Metrics::new());
        let hooks = webhook::start_with_ca(
            ca.clone(),
            VALIDITY,
            &config,
            served,
            metrics,
            std::future::pending(),
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let native_addr = listener.local_addr().unwrap();
        webhook::serve_https(
            listener,
            ca.clone(),
            vec!["127.0.0.1".into()],
            VALIDITY,
            Router::new().route("/validate/memcached", post(native_validate)),
            std::future::pending(),
        )
        .unwrap();

        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .build()
            .unwrap();

        println!(
            "admission: {RATE} requests/s for {MEASURED:?} (after {WARM_UP:?}), valid and invalid Memcacheds alternating"
        );
        let example = common::memcached_example();
        let urls = [
            ("native", format!("https://{native_addr}/validate/memcached")),
            ("plugin", format!("https://{}/validate/memcached", hooks.local_addr)),
        ];
        // Slices of a second, the two servers taking turns: the machine's drift (this VM's
        // speed varies by tens of percent over a minute) falls on both alike.
        let mut latencies: [Vec<Duration>; 2] = Default::default();
        let mut first = 0;
        let slices = (MEASURED.as_secs() + WARM_UP.as_secs()) as usize;
        for slice in 0..slices {
            for (server, (_, url)) in urls.iter().enumerate() {
                let took = drive(&client, url, &example, SLICE, first).await;
                first += took.len();
                if slice >= WARM_UP.as_secs() as usize {
                    latencies[server].extend(took);
                }
            }
        }
        let mut p99s = Vec::new();
        for ((name, _), mut latencies) in urls.iter().zip(latencies) {
            latencies.sort();
            let p99 = percentile(&latencies, 0.99);
            println!(
                "  {name:<7} p50 {:6.2} ms  p99 {:6.2} ms  max {:6.2} ms  {} requests",
                ms(percentile(&latencies, 0.50)),
                ms(p99),
                ms(*latencies.last().unwrap()),
                latencies.len(),
            );
            p99s.push(p99);
        }
        call_alone(&plugin, &example);
        let ratio = p99s[1].as_secs_f64() / p99s[0].as_secs_f64();
        println!(
            "  plugin p99 / native p99: {ratio:.2} (goal at most {GOAL_P99_RATIO}: {})",
            if ratio <= GOAL_P99_RATIO { "met" } else { "missed" }
        );
    });
}
