//! Test-only plugin: each `Attack` CR picks one way to misbehave, so tests can prove the host contains it.
//!
//! It implements the contract through the raw bindings rather than the SDK's `Reconciler`
//! trait, because some attacks (invalid JSON, forged metadata) are exactly what the SDK's
//! typed API makes impossible.

// Everything here is reached only through the wasm exports.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::{CustomResource, CustomResourceExt};
use operator_host_sdk::bindings::exports::operator_host::reconciler::plugin::Guest;
use operator_host_sdk::bindings::operator_host::reconciler::types::{
    FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What the plugin should do when reconciling this CR.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "hostile.operator-host.dev",
    version = "v1alpha1",
    kind = "Attack",
    namespaced,
    status = "AttackStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AttackSpec {
    /// One of the attacks in `reconcile`.
    pub attack: String,
    /// A size parameter (bytes, children, lines), by attack.
    #[serde(default)]
    pub count: u64,
}

/// Whatever an attack reports; free-form.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct AttackStatus(serde_json::Map<String, serde_json::Value>);

impl JsonSchema for AttackStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AttackStatus".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    }
}

struct Hostile;

static CALLS: AtomicU64 = AtomicU64::new(0);

fn config_map(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
        .to_string()
}

fn ok(
    children: Vec<String>,
    status: serde_json::Value,
) -> Result<ReconcileResponse, ReconcileError> {
    Ok(ReconcileResponse {
        children,
        status: status.to_string(),
        requeue_after_ms: None,
    })
}

#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    black_box(recurse(black_box(depth + 1)) + 1)
}

/// What the sandbox let the guest see of the outside world.
fn probe_capabilities() -> serde_json::Value {
    json!({
        "readRoot": std::fs::read_dir("/").map(|d| d.count()).map_err(|e| e.to_string()).is_ok(),
        "readEtcPasswd": std::fs::read_to_string("/etc/passwd").is_ok(),
        "envVars": std::env::vars().count(),
        "args": std::env::args().count(),
        "tcpConnect": std::net::TcpStream::connect("127.0.0.1:6443").is_ok(),
        "tcpBind": std::net::TcpListener::bind("127.0.0.1:0").is_ok(),
        "dnsLookup": std::net::ToSocketAddrs::to_socket_addrs("localhost:80").is_ok(),
        "wallClockSecs": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    })
}

impl Guest for Hostile {
    fn info() -> PluginInfo {
        let resource = Attack::api_resource();
        PluginInfo {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            parent: GroupVersionKind {
                group: resource.group,
                version: resource.version,
                kind: resource.kind,
                plural: resource.plural,
                namespaced: true,
            },
            children: vec![GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
            }],
            // Every Attack gets the host's finalizer; `hold-finalizer` keeps it until changed.
            needs_finalize: true,
            crd: serde_json::to_string(&Attack::crd()).unwrap_or_default(),
        }
    }

    fn reconcile(request: ReconcileRequest) -> Result<ReconcileResponse, ReconcileError> {
        let parent: Attack = serde_json::from_str(&request.parent)
            .map_err(|e| ReconcileError::InvalidSpec(e.to_string()))?;
        let name = parent.metadata.name.clone().unwrap_or_default();
        let count = parent.spec.count;
        match parent.spec.attack.as_str() {
            "none" | "hold-finalizer" => ok(vec![config_map(&name)], json!({"attack": "none"})),
            "loop" => loop {
                black_box(());
            },
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            "stack-overflow" => ok(vec![], json!({"depth": recurse(0)})),
            "panic" => panic!("hostile plugin panics on purpose"),
            "big-response" => ok(vec![], json!({"blob": "x".repeat(count as usize)})),
            "many-children" => ok(
                (0..count)
                    .map(|i| config_map(&format!("{name}-{i}")))
                    .collect(),
                json!({}),
            ),
            "invalid-json" => ok(vec!["{this is not json".into()], json!({})),
            "stdout-flood" => {
                for i in 0..count {
                    println!("flooding stdout, line {i}");
                }
                ok(vec![config_map(&name)], json!({"printed": count}))
            }
            "capabilities" => ok(vec![], probe_capabilities()),
            // State that survived from an earlier call would show up as a count above 1.
            "counter" => ok(
                vec![],
                json!({"calls": CALLS.fetch_add(1, Ordering::SeqCst) + 1}),
            ),
            other => Err(ReconcileError::InvalidSpec(format!(
                "spec.attack: unknown attack {other:?}"
            ))),
        }
    }

    fn finalize(request: ReconcileRequest) -> Result<FinalizeResponse, ReconcileError> {
        let parent: Attack = serde_json::from_str(&request.parent)
            .map_err(|e| ReconcileError::InvalidSpec(e.to_string()))?;
        let hold = parent.spec.attack == "hold-finalizer";
        Ok(FinalizeResponse {
            done: !hold,
            requeue_after_ms: hold.then_some(200),
        })
    }
}

// Exported only from the wasm build; native builds just type-check the logic.
#[cfg(target_arch = "wasm32")]
operator_host_sdk::bindings::__export_reconciler_bindings!(Hostile with_types_in operator_host_sdk::bindings);
