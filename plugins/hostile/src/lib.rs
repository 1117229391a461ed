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
    AdmissionRequest, Capabilities, Child, DeletePolicy, FieldError, FieldErrorType,
    FinalizeResponse, GroupVersionKind, PluginInfo, ReconcileError, ReconcileRequest,
    ReconcileResponse, UpdateStrategy, Validation,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Variants of the declaration that spell a kind to reach another resource, one per build
/// feature (`make test-plugins` builds each as `hostile-<feature>.wasm`): the host must refuse
/// every one at load, before it sends any request.
mod spelling_lies {
    use operator_host_sdk::bindings::operator_host::reconciler::types::{
        GroupVersionKind, RelatedResource, RelatedSelector, SecretView,
    };

    /// `lie-child-plural`: the ConfigMap child kind with the plural of Secrets.
    pub const CONFIG_MAP_PLURAL: &str = if cfg!(feature = "lie-child-plural") {
        "secrets"
    } else {
        "configmaps"
    };
    /// `lie-scope`: the ConfigMap child kind declared cluster-scoped.
    pub const CONFIG_MAP_NAMESPACED: bool = !cfg!(feature = "lie-scope");

    /// `lie-related-plural`: every "ConfigMap" of the namespace to read, by the plural of
    /// Secrets: their data in clear if the host believed it.
    pub fn related() -> Vec<RelatedResource> {
        if !cfg!(feature = "lie-related-plural") {
            return Vec::new();
        }
        vec![RelatedResource {
            name: "settings".into(),
            kind: GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "secrets".into(),
                namespaced: true,
            },
            selector: RelatedSelector::LabelSelector("!operator-host.dev/none".into()),
            secret_view: SecretView::Full,
        }]
    }
}

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
    /// The object an attack aims at: a namespace or a name, by attack.
    #[serde(default)]
    pub target: String,
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
    config_map_with(name, json!({}))
}

/// A ConfigMap named `name` with `metadata` merged into its metadata.
fn config_map_with(name: &str, metadata: serde_json::Value) -> String {
    let mut merged = json!({"name": name});
    if let (Some(into), serde_json::Value::Object(extra)) = (merged.as_object_mut(), metadata) {
        into.extend(extra);
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": merged, "data": {"k": "v"}})
        .to_string()
}

/// A Deployment named `name` whose pod spec is a plain container plus `pod_spec`'s fields:
/// how a plugin would try to run its own code on a node with more than it was given.
fn deployment_with(name: &str, pod_spec: serde_json::Value) -> String {
    let mut spec = json!({"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]});
    if let (Some(into), serde_json::Value::Object(extra)) = (spec.as_object_mut(), pod_spec) {
        into.extend(extra);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"attack": name}},
            "template": {"metadata": {"labels": {"attack": name}}, "spec": spec},
        },
    })
    .to_string()
}

/// A container of `deployment_with` with `fields` added.
fn container_with(fields: serde_json::Value) -> serde_json::Value {
    let mut container = json!({"name": "main", "image": "registry.k8s.io/pause:3.10"});
    if let (Some(into), serde_json::Value::Object(extra)) = (container.as_object_mut(), fields) {
        into.extend(extra);
    }
    json!({"containers": [container]})
}

/// The Secret the reference attacks try to read: not named anywhere in the Attack's spec.
const FOREIGN_SECRET: &str = "db-credentials";
/// The ServiceAccount the identity attack tries to run as.
const FOREIGN_SERVICE_ACCOUNT: &str = "admin";

/// A status of about `bytes` bytes, filled in place (a copy would double the guest's memory,
/// char by char would not fit in the deadline).
fn big_status(bytes: usize) -> String {
    let (head, tail) = (b"{\"blob\":\"", b"\"}");
    let mut status = vec![b'x'; bytes + head.len() + tail.len()];
    status[..head.len()].copy_from_slice(head);
    let end = status.len() - tail.len();
    status[end..].copy_from_slice(tail);
    String::from_utf8(status).unwrap_or_default()
}

fn ok(
    children: Vec<String>,
    status: serde_json::Value,
) -> Result<ReconcileResponse, ReconcileError> {
    Ok(ReconcileResponse {
        children: children.into_iter().map(in_place).collect(),
        status: status.to_string(),
        requeue_after_ms: None,
    })
}

/// A child applied in place, deleted on prune, no barrier.
fn in_place(object: String) -> Child {
    Child {
        object,
        update: UpdateStrategy::InPlace,
        on_prune: DeletePolicy::Delete,
        ready_when: None,
    }
}

/// Executes the wasm `unreachable` instruction (a trap without a panic message).
fn unreachable_instruction() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    std::process::abort();
}

#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    black_box(recurse(black_box(depth + 1)) + 1)
}

/// What the guest draws from WASI's randomness: the keys of a hash map (std seeds them from
/// WASI) and 16 bytes of `wasi:random/random` (wasi-libc's `getentropy`), so a test can see
/// whether the same request gets the same "random" output.
fn random_draws() -> serde_json::Value {
    use std::hash::{BuildHasher, RandomState};
    let mut entropy = [0u8; 16];
    fill_entropy(&mut entropy);
    json!({
        "hashMapSeed": RandomState::new().hash_one("operator-host"),
        "entropy": entropy.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    })
}

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // wasi-libc's `getentropy`, the one way to WASI randomness without a crate
fn fill_entropy(buffer: &mut [u8]) {
    unsafe extern "C" {
        fn getentropy(buffer: *mut u8, len: usize) -> i32;
    }
    // SAFETY: `buffer` is valid for writes of its length, at most 256 bytes as required.
    let _ = unsafe { getentropy(buffer.as_mut_ptr(), buffer.len().min(256)) };
}

#[cfg(not(target_arch = "wasm32"))]
fn fill_entropy(_: &mut [u8]) {}

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

/// The `spec.attack` of an Attack given as JSON; empty when there is none.
fn attack_of(object: &str) -> String {
    serde_json::from_str::<serde_json::Value>(object)
        .ok()
        .and_then(|value| value["spec"]["attack"].as_str().map(str::to_string))
        .unwrap_or_default()
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
            children: vec![
                GroupVersionKind {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                    plural: spelling_lies::CONFIG_MAP_PLURAL.into(),
                    namespaced: spelling_lies::CONFIG_MAP_NAMESPACED,
                },
                // Pod templates: what the Pod Security and reference rules must refuse.
                GroupVersionKind {
                    group: "apps".into(),
                    version: "v1".into(),
                    kind: "Deployment".into(),
                    plural: "deployments".into(),
                    namespaced: true,
                },
                // Declared so that the attack reaches the policy, which must refuse it.
                GroupVersionKind {
                    group: "rbac.authorization.k8s.io".into(),
                    version: "v1".into(),
                    kind: "ClusterRoleBinding".into(),
                    plural: "clusterrolebindings".into(),
                    namespaced: false,
                },
            ],
            // Every Attack gets the host's finalizer; `hold-finalizer` keeps it until changed.
            needs_finalize: true,
            crd: serde_json::to_string(&Attack::crd()).unwrap_or_default(),
            related: spelling_lies::related(),
            // Admission attacks: `validate-*` and `default-*` below.
            implements: Capabilities::VALIDATE | Capabilities::DEFAULT,
        }
    }

    /// `validate-loop` runs out of CPU time, `validate-panic` traps, `validate-refuse` refuses
    /// `spec.attack`; every other Attack passes.
    fn validate(request: AdmissionRequest) -> Validation {
        let attack = request.object.as_deref().map(attack_of).unwrap_or_default();
        match attack.as_str() {
            "validate-loop" => loop {
                black_box(());
            },
            "validate-panic" => panic!("hostile plugin panics in validate on purpose"),
            "validate-refuse" => Validation {
                errors: vec![FieldError {
                    reason: FieldErrorType::Forbidden,
                    field: "spec.attack".into(),
                    value: Some(json!(attack).to_string()),
                    detail: "refused on purpose".into(),
                }],
                warnings: vec!["hostile validate ran".into()],
            },
            _ => Validation {
                errors: Vec::new(),
                warnings: Vec::new(),
            },
        }
    }

    /// `default-rename` renames the object, `default-namespace` moves it and `default-status`
    /// writes its status: what the host must refuse from a default. Others are unchanged.
    fn default(object: String) -> Result<String, String> {
        let mut value: serde_json::Value =
            serde_json::from_str(&object).map_err(|e| e.to_string())?;
        match attack_of(&object).as_str() {
            "default-rename" => value["metadata"]["name"] = json!("renamed-by-default"),
            "default-namespace" => value["metadata"]["namespace"] = json!("kube-system"),
            "default-status" => value["status"] = json!({"forged": true}),
            "default-loop" => loop {
                black_box(());
            },
            _ => return Ok(object),
        }
        Ok(value.to_string())
    }

    fn convert(object: String, _to_version: String) -> Result<String, String> {
        Ok(object)
    }

    fn reconcile(request: ReconcileRequest) -> Result<ReconcileResponse, ReconcileError> {
        let parent: Attack = serde_json::from_str(&request.parent)
            .map_err(|e| ReconcileError::InvalidSpec(e.to_string()))?;
        let name = parent.metadata.name.clone().unwrap_or_default();
        let count = parent.spec.count;
        match parent.spec.attack.as_str() {
            "none" | "hold-finalizer" => ok(vec![config_map(&name)], json!({"attack": "none"})),
            "idle" => ok(vec![], json!({"attack": "idle"})),
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
            "unreachable" => unreachable_instruction(),
            "big-response" => Ok(ReconcileResponse {
                children: vec![],
                status: big_status(count as usize),
                requeue_after_ms: None,
            }),
            // Formatted rather than serialized: 100,000 children must fit in the deadline.
            "many-children" => ok(
                (0..count)
                    .map(|i| {
                        format!(
                            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-{i}"}}}}"#
                        )
                    })
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
            "random" => ok(vec![], random_draws()),
            "random-error" => Err(ReconcileError::Retry(format!(
                "a different message every time? {}",
                random_draws()
            ))),
            "privileged" => ok(
                vec![deployment_with(
                    &name,
                    container_with(json!({"securityContext": {"privileged": true}})),
                )],
                json!({}),
            ),
            "host-path" => ok(
                vec![deployment_with(
                    &name,
                    json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
                )],
                json!({}),
            ),
            "host-namespaces" => ok(
                vec![deployment_with(
                    &name,
                    json!({"hostNetwork": true, "hostPID": true}),
                )],
                json!({}),
            ),
            "add-capabilities" => ok(
                vec![deployment_with(
                    &name,
                    container_with(
                        json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
                    ),
                )],
                json!({}),
            ),
            "secret-volume" => ok(
                vec![deployment_with(
                    &name,
                    json!({"volumes": [{"name": "loot", "secret": {"secretName": FOREIGN_SECRET}}]}),
                )],
                json!({}),
            ),
            "secret-env" => ok(
                vec![deployment_with(
                    &name,
                    container_with(json!({"env": [{"name": "PASSWORD", "valueFrom":
                        {"secretKeyRef": {"name": FOREIGN_SECRET, "key": "password"}}}]})),
                )],
                json!({}),
            ),
            "foreign-service-account" => ok(
                vec![deployment_with(
                    &name,
                    json!({"serviceAccountName": FOREIGN_SERVICE_ACCOUNT}),
                )],
                json!({}),
            ),
            "projected-token" => ok(
                vec![deployment_with(
                    &name,
                    json!({"volumes": [{"name": "token", "projected": {"sources":
                        [{"serviceAccountToken": {"path": "token", "audience": "elsewhere"}}]}}]}),
                )],
                json!({}),
            ),
            // Derived from the status the host wrote last: different on every call. With
            // target `requeue-now` it also asks to be called again at once.
            "status-counter" => {
                let previous = serde_json::from_str::<serde_json::Value>(&request.parent)
                    .ok()
                    .and_then(|p| p["status"]["count"].as_u64())
                    .unwrap_or(0);
                Ok(ReconcileResponse {
                    children: vec![in_place(config_map(&name))],
                    status: json!({"count": previous + 1}).to_string(),
                    requeue_after_ms: (parent.spec.target == "requeue-now").then_some(0),
                })
            }
            // A child derived from what the host last wrote: its data carries the
            // resourceVersion the observed ConfigMap has, which every apply changes, and every
            // change reconciles the parent again.
            "child-churn" => {
                let written = request
                    .observed
                    .iter()
                    .filter_map(|o| serde_json::from_str::<serde_json::Value>(o).ok())
                    .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name.as_str())
                    .and_then(|o| o["metadata"]["resourceVersion"].as_str().map(String::from))
                    .unwrap_or_default();
                let child = json!({
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                    "data": {"written": written},
                });
                ok(vec![child.to_string()], json!({}))
            }
            "requeue-zero" => Ok(ReconcileResponse {
                children: vec![in_place(config_map(&name))],
                status: json!({"attack": "requeue-zero"}).to_string(),
                requeue_after_ms: Some(0),
            }),
            "undeclared-kind" => ok(
                vec![
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                           "stringData": {"stolen": "credentials"}})
                    .to_string(),
                ],
                json!({}),
            ),
            "other-namespace" => ok(
                vec![config_map_with(
                    &name,
                    json!({"namespace": parent.spec.target}),
                )],
                json!({}),
            ),
            "cluster-admin" => ok(
                vec![
                    json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "ClusterRoleBinding",
                        "metadata": {"name": name},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": parent.metadata.namespace}],
                    })
                    .to_string(),
                ],
                json!({}),
            ),
            // Claims an object the host does not own, so that deleting it would delete ours.
            "forged-owner" => ok(
                vec![config_map_with(
                    &name,
                    json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                        "name": parent.spec.target, "uid": "00000000-0000-0000-0000-000000000000",
                        "controller": true}]}),
                )],
                json!({}),
            ),
            // Poses as a child of another parent, so that its prune would delete this one.
            "forged-labels" => ok(
                vec![config_map_with(
                    &name,
                    json!({"labels": {"operator-host.dev/parent-uid": "00000000-0000-0000-0000-000000000000"}}),
                )],
                json!({}),
            ),
            "namesake" => ok(vec![config_map(&parent.spec.target)], json!({})),
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
