//! Fuzz target: arbitrary plugin output through the host's validation, plan and policy check.
//!
//! Input layout: `control [NUL status] [NUL child]...`. The control bytes drive a generator
//! (parent, observed children, extra Kubernetes-like children, status, requeue) and decide for
//! each raw child whether it is used as is, perturbed or replaced; raw segments keep the
//! seeds readable and let libFuzzer mutate real plugin output. On success every invariant
//! the host promises about a plan is checked against this file's own model of it.
#![no_main]

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use operator_host::plan::{Plan, PlanError, plan_from_response};
use operator_host::plugin::{Declaration, KindRef};
use operator_host::policy::Policy;
use operator_host::runtime::ReconcileResponse;
use serde_json::{Map, Value, json};

const PLUGIN: &str = "memcached";
const PARENT_API_VERSION: &str = "cache.example.com/v1alpha1";
const PARENT_KIND: &str = "Memcached";
const PARENT_NAME: &str = "mc";
const NAMESPACE: &str = "ns";
const UID: &str = "uid-1";
const NOW: &str = "2026-11-30T00:00:00Z";
const EARLIER: &str = "2026-01-01T00:00:00Z";
// The host's metadata, spelled out (not imported) so a change of the contract is noticed.
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
const MANAGED_BY: &str = "operator-host";
const PLUGIN_LABEL: &str = "operator-host.dev/plugin";
const PARENT_UID_LABEL: &str = "operator-host.dev/parent-uid";
const RESERVED_PREFIX: &str = "operator-host.dev/";
const HOST_ONLY_FIELDS: [&str; 6] = [
    "ownerReferences",
    "finalizers",
    "uid",
    "resourceVersion",
    "managedFields",
    "deletionTimestamp",
];

fn kind_ref(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> KindRef {
    KindRef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
    }
}

/// The shape of host/src/plan/tests.rs, plus the kinds the policy treats specially and one
/// cluster-scoped kind (declared, so only the host's scope check stands in the way).
static DECLARATION: LazyLock<Declaration> = LazyLock::new(|| Declaration {
    name: PLUGIN.into(),
    version: "0.1.0".into(),
    content_hash: "abcdef0123456789".into(),
    parent: kind_ref(
        "cache.example.com",
        "v1alpha1",
        PARENT_KIND,
        "memcacheds",
        true,
    ),
    children: vec![
        kind_ref("apps", "v1", "Deployment", "deployments", true),
        kind_ref("", "v1", "Service", "services", true),
        kind_ref("", "v1", "ConfigMap", "configmaps", true),
        kind_ref("", "v1", "Secret", "secrets", true),
        kind_ref("", "v1", "ServiceAccount", "serviceaccounts", true),
        kind_ref("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
        kind_ref(
            "monitoring.coreos.com",
            "v1",
            "ServiceMonitor",
            "servicemonitors",
            true,
        ),
        kind_ref(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
        ),
    ],
    needs_finalize: false,
    crd: Default::default(),
});

/// Plugin entry overriding `defaults`: kinds narrowed, namespaces and maxChildren replaced,
/// allowSecrets turned off again; allowRbac and tokens come from `defaults`.
const STRICT_POLICY: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  namespaces: [other]
  allowSecrets: true
  allowRbac: true
  allowServiceAccountTokens: true
plugins:
  memcached:
    kinds: [apps/v1/Deployment, v1/Service, v1/ConfigMap, v1/Secret, rbac.authorization.k8s.io/v1/Role]
    namespaces: [ns, default]
    maxChildren: 3
    allowSecrets: false
";
const STRICT_KINDS: [&str; 5] = ["Deployment", "Service", "ConfigMap", "Secret", "Role"];
const STRICT_NAMESPACES: [&str; 2] = ["ns", "default"];
const STRICT_MAX_CHILDREN: usize = 3;

const PERMISSIVE_POLICY: &str = "apiVersion: operator-host.dev/v1alpha1
kind: Policy
defaults:
  allowSecrets: true
  allowRbac: true
  allowServiceAccountTokens: true
";

static STRICT: LazyLock<Policy> = LazyLock::new(|| {
    Policy::parse(STRICT_POLICY, Path::new("strict.yaml")).expect("the strict policy is valid")
});
static PERMISSIVE: LazyLock<Policy> = LazyLock::new(|| {
    Policy::parse(PERMISSIVE_POLICY, Path::new("permissive.yaml"))
        .expect("the permissive policy is valid")
});

/// One decoded input: what the host sees for one reconcile.
struct Case {
    parent: Value,
    observed: Vec<Value>,
    children: Vec<String>,
    status: String,
    requeue_after_ms: Option<u64>,
}

// JSON text rather than `Value`'s Debug, so `cargo fuzz fmt` prints a readable case.
impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "parent: {}", self.parent)?;
        for o in &self.observed {
            writeln!(f, "observed: {o}")?;
        }
        for c in &self.children {
            writeln!(f, "child: {c:?}")?;
        }
        writeln!(f, "status: {:?}", self.status)?;
        write!(f, "requeue_after_ms: {:?}", self.requeue_after_ms)
    }
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let bytes = u.bytes(u.len())?;
        Case::decode(bytes)
    }

    fn arbitrary_take_rest(u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Case::decode(u.take_rest())
    }
}

impl Case {
    fn decode(data: &[u8]) -> arbitrary::Result<Case> {
        let mut segments = data.split(|b| *b == 0);
        let control = segments.next().unwrap_or_default();
        let raw_status = segments
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned());
        let raw_children: Vec<String> = segments
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        // Exhausted control bytes take the first (or `usually`) branch of every choice: a
        // valid parent with a UID, nothing observed, the raw children that are JSON.
        let u = &mut Unstructured::new(control);
        let parent = gen_parent(u)?;
        let mut observed = Vec::new();
        for index in 0..u.int_in_range(0..=6u8)? {
            observed.push(gen_observed(u, index)?);
        }
        let mut children = Vec::new();
        for raw in raw_children {
            // Mutations mostly break JSON; replacing most broken texts keeps plans reachable.
            if !is_json(&raw) && usually(u)? {
                children.push(gen_child(u)?);
                continue;
            }
            children.push(match u.int_in_range(0..=3u8)? {
                0 | 1 => raw,
                2 => perturb(u, raw)?,
                _ => gen_child(u)?,
            });
        }
        for _ in 0..u.int_in_range(0..=6u8)? {
            children.push(gen_child(u)?);
        }
        let status = gen_status(u, raw_status)?;
        let requeue_after_ms = u.arbitrary()?;
        Ok(Case {
            parent,
            observed,
            children,
            status,
            requeue_after_ms,
        })
    }
}

fn is_json(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok()
}

fn pick<T: Clone>(u: &mut Unstructured<'_>, items: &[T]) -> arbitrary::Result<T> {
    Ok(u.choose(items)?.clone())
}

/// Mostly true, so most generated objects pass and the invariants get exercised; also true
/// on exhausted control bytes (`ratio`'s rule), making validity the default.
fn usually(u: &mut Unstructured<'_>) -> arbitrary::Result<bool> {
    u.ratio(3u8, 4)
}

/// Names around the DNS-1123 subdomain rules: valid, just invalid, huge, unicode, empty.
fn gen_name(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    const VALID: &[&str] = &[
        "mc",
        "web",
        "mc-config",
        "old",
        "a",
        "a.b",
        "a-b",
        "0",
        "x9",
    ];
    const EDGES: &[&str] = &[
        "-a", "a-", "A", "", "a..b", ".a", "a.", "a_b", "a b", "ü", "名前", "mc\u{0}", "mc\n",
    ];
    const ALPHABET: &[char] = &['a', 'z', '0', '9', '-', '.', 'A', '_', 'é'];
    if usually(u)? {
        return Ok(pick(u, VALID)?.to_string());
    }
    Ok(match u.int_in_range(0..=3u8)? {
        0 => pick(u, EDGES)?.to_string(),
        1 => {
            let len = u.int_in_range(0..=300usize)?;
            let mut name = String::with_capacity(len);
            for _ in 0..len {
                name.push(pick(u, ALPHABET)?);
            }
            name
        }
        2 => {
            let label63 = "a".repeat(63);
            pick(
                u,
                &[
                    "a".repeat(253),
                    "a".repeat(254),
                    format!("{label63}.{label63}.{label63}.{}", "b".repeat(61)),
                    format!("{label63}.{label63}.{label63}.{}", "b".repeat(62)),
                    format!("{}-", "a".repeat(252)),
                    "é".repeat(126),
                ],
            )?
        }
        _ => u.arbitrary::<&str>()?.to_string(),
    })
}

fn label_key(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    // Keys the host must let through (some only look reserved)...
    const PLAIN: &[&str] = &[
        "app",
        "app.kubernetes.io/name",
        "example.com/x",
        "operator-host.dev",
        "xoperator-host.dev/plugin",
        "Operator-Host.dev/plugin",
        "example.com/operator-host.dev/x",
    ];
    // ...and keys it must refuse.
    const RESERVED: &[&str] = &[
        MANAGED_BY_LABEL,
        PLUGIN_LABEL,
        PARENT_UID_LABEL,
        RESERVED_PREFIX,
        "operator-host.dev/extra",
    ];
    Ok(if usually(u)? {
        pick(u, PLAIN)?.to_string()
    } else if u.arbitrary()? {
        pick(u, RESERVED)?.to_string()
    } else {
        u.arbitrary::<&str>()?.to_string()
    })
}

fn label_value(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    pick(
        u,
        &[
            json!("mc"),
            json!(PLUGIN),
            json!(MANAGED_BY),
            json!(UID),
            json!(""),
            json!(1),
            Value::Null,
            json!({}),
        ],
    )
}

/// An owner reference to the parent, as a plugin might forge it.
fn parent_ref(uid: &str, controller: Value) -> Value {
    json!({
        "apiVersion": PARENT_API_VERSION,
        "kind": PARENT_KIND,
        "name": PARENT_NAME,
        "uid": uid,
        "controller": controller,
    })
}

/// Sets one field of a child's metadata to an interesting value; `field` picks which.
fn set_metadata_field(
    u: &mut Unstructured<'_>,
    metadata: &mut Map<String, Value>,
    field: u8,
) -> arbitrary::Result<()> {
    match field {
        0 => {
            metadata.insert("name".into(), gen_name(u)?.into());
        }
        1 => {
            let namespace = pick(
                u,
                &[
                    json!(NAMESPACE),
                    Value::Null,
                    json!("default"),
                    json!("other"),
                    json!(""),
                    json!("NS"),
                    json!(5),
                ],
            )?;
            metadata.insert("namespace".into(), namespace);
        }
        2 | 3 => {
            let map = if field == 2 { "labels" } else { "annotations" };
            let entries = object_at(metadata.entry(map).or_insert(Value::Null));
            for _ in 0..u.int_in_range(1..=3u8)? {
                let key = label_key(u)?;
                entries.insert(key, label_value(u)?);
            }
        }
        4 => {
            let refs = pick(
                u,
                &[
                    Value::Null,
                    json!([]),
                    json!([parent_ref(UID, json!(true))]),
                    json!([parent_ref("uid-2", json!(false))]),
                    json!("x"),
                ],
            )?;
            metadata.insert("ownerReferences".into(), refs);
        }
        5 => {
            let finalizers = pick(u, &[Value::Null, json!([]), json!(["example.com/x"])])?;
            metadata.insert("finalizers".into(), finalizers);
        }
        6 => {
            let field = pick(u, &HOST_ONLY_FIELDS[2..])?;
            let value = if u.arbitrary()? {
                Value::Null
            } else {
                pick(u, &[json!("x"), json!([]), json!(EARLIER)])?
            };
            metadata.insert(field.into(), value);
        }
        7 => {
            let map = pick(u, &["labels", "annotations"])?;
            let value = pick(u, &[Value::Null, json!("x"), json!([]), json!(1)])?;
            metadata.insert(map.into(), value);
        }
        _ => {
            metadata.remove("name");
        }
    }
    Ok(())
}
const METADATA_FIELDS: u8 = 8;

/// apiVersion/kind pairs: mostly declared and namespaced; otherwise declared cluster-scoped,
/// undeclared, or near misses of declared ones.
fn gen_kind(u: &mut Unstructured<'_>) -> arbitrary::Result<(&'static str, &'static str)> {
    const DECLARED: &[(&str, &str)] = &[
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ];
    const OTHERS: &[(&str, &str)] = &[
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("v1", "Namespace"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1beta1", "Deployment"),
        ("v1", "configmap"),
        ("core/v1", "Service"),
        ("/v1", "Service"),
        (PARENT_API_VERSION, PARENT_KIND),
    ];
    if usually(u)? {
        pick(u, DECLARED)
    } else {
        pick(u, OTHERS)
    }
}

/// A Kubernetes-like child, sometimes subtly or grossly wrong.
fn gen_structured_child(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let (api_version, kind) = gen_kind(u)?;
    let mut child = json!({"apiVersion": api_version, "kind": kind});
    // Where each kind would hand pods a service-account token.
    let token = pick(
        u,
        &[
            None,
            Some(json!(true)),
            Some(json!(false)),
            Some(json!("true")),
            Some(Value::Null),
        ],
    )?;
    match kind {
        "Secret" => {
            child["stringData"] = json!({"key": "value"});
            if let Some(t) = token {
                child["type"] = match t {
                    Value::Bool(true) => json!("kubernetes.io/service-account-token"),
                    Value::Bool(false) => json!("Opaque"),
                    _ => json!("kubernetes.io/Service-Account-Token"),
                };
            }
        }
        "ServiceAccount" => {
            if let Some(t) = token {
                child["automountServiceAccountToken"] = t;
            }
        }
        "ConfigMap" => {
            child["data"] = json!({"key": "value"});
        }
        "Service" => {
            child["spec"] = json!({"ports": [{"port": 11211}], "selector": {"app": "mc"}});
        }
        _ => {
            child["spec"] = json!({
                "replicas": 1,
                "selector": {"matchLabels": {"app": "mc"}},
                "template": {
                    "metadata": {"labels": {"app": "mc"}},
                    "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
                },
            });
            if let Some(t) = token {
                child["spec"]["template"]["spec"]["automountServiceAccountToken"] = t;
            }
        }
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), gen_name(u)?.into());
    if !usually(u)? {
        for _ in 0..u.int_in_range(1..=3u8)? {
            let field = u.int_in_range(0..=METADATA_FIELDS)?;
            set_metadata_field(u, &mut metadata, field)?;
        }
    }
    child["metadata"] = Value::Object(metadata);
    vary_object(u, &mut child)?;
    Ok(child)
}

/// Whole-object variations: a status, a non-object metadata, non-string apiVersion/kind.
fn vary_object(u: &mut Unstructured<'_>, child: &mut Value) -> arbitrary::Result<()> {
    if usually(u)? {
        return Ok(());
    }
    match u.int_in_range(0..=3u8)? {
        0 => child["status"] = json!({"readyReplicas": 1}),
        1 => child["metadata"] = pick(u, &[Value::Null, json!("mc"), json!([]), json!(1)])?,
        2 => {
            let field = pick(u, &["apiVersion", "kind"])?;
            child[field] = pick(u, &[Value::Null, json!(1), json!(["v1"])])?;
        }
        _ => set_path(
            child,
            &["spec", "template", "spec", "automountServiceAccountToken"],
            json!(true),
        ),
    }
    Ok(())
}

/// Sets `value` at `path`, replacing whatever is in the way (indexing a non-object panics).
fn set_path(object: &mut Value, path: &[&str], value: Value) {
    let mut at = object;
    for key in path {
        at = object_at(at).entry(*key).or_insert(Value::Null);
    }
    *at = value;
}

/// `value` as a JSON object, replaced by an empty one first if it is anything else.
fn object_at(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    value.as_object_mut().expect("an object was just put there")
}

/// A child text: mostly a structured object, sometimes free text or non-object JSON.
fn gen_child(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    if usually(u)? {
        return Ok(gen_structured_child(u)?.to_string());
    }
    Ok(if u.arbitrary()? {
        u.arbitrary::<&str>()?.to_string()
    } else {
        let texts = [
            "null",
            "[]",
            "\"x\"",
            "1",
            "{}",
            "{\"apiVersion\":\"v1\"}",
            "{",
        ];
        pick(u, &texts)?.into()
    })
}

/// A raw child with a few structured changes, if it is a JSON object.
fn perturb(u: &mut Unstructured<'_>, raw: String) -> arbitrary::Result<String> {
    let Ok(mut child @ Value::Object(_)) = serde_json::from_str::<Value>(&raw) else {
        return Ok(raw);
    };
    for _ in 0..u.int_in_range(1..=3u8)? {
        match u.int_in_range(0..=METADATA_FIELDS + 2)? {
            field @ 0..=METADATA_FIELDS => {
                set_metadata_field(u, object_at(&mut child["metadata"]), field)?;
            }
            f if f == METADATA_FIELDS + 1 => {
                let (api_version, kind) = gen_kind(u)?;
                child["apiVersion"] = api_version.into();
                child["kind"] = kind.into();
            }
            _ => vary_object(u, &mut child)?,
        }
    }
    Ok(child.to_string())
}

/// The parent: mostly a valid Memcached (with or without a UID, namespace, generation,
/// previous status), sometimes malformed.
fn gen_parent(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let mut metadata = Map::new();
    let name = pick(u, &[json!(PARENT_NAME), json!("a".repeat(253))])?;
    let namespace = pick(
        u,
        &[
            Some(json!(NAMESPACE)),
            Some(json!("default")),
            None,
            Some(json!("")),
            Some(json!(5)),
            Some(json!("other")),
        ],
    )?;
    let uid = pick(
        u,
        &[
            Some(json!(UID)),
            None,
            Some(json!("")),
            Some(json!(7)),
            Some(json!("uid-2")),
        ],
    )?;
    let generation = pick(
        u,
        &[
            Some(json!(4)),
            None,
            Some(json!(-1)),
            Some(json!("4")),
            Some(json!(i64::MAX)),
            Some(json!(u64::MAX)),
            Some(json!(1.5)),
        ],
    )?;
    metadata.insert("name".into(), name);
    for (key, value) in [
        ("namespace", namespace),
        ("uid", uid),
        ("generation", generation),
    ] {
        if let Some(value) = value {
            metadata.insert(key.into(), value);
        }
    }
    let mut parent = json!({
        "apiVersion": PARENT_API_VERSION,
        "kind": PARENT_KIND,
        "metadata": metadata,
        "spec": {"size": 3},
    });
    let reconciled = |status: &str, time: Value| json!({"type": "Reconciled", "status": status, "lastTransitionTime": time});
    let previous = pick(
        u,
        &[
            None,
            Some(json!({"conditions": [reconciled("True", json!(EARLIER))]})),
            Some(json!({"conditions": [reconciled("False", json!(EARLIER))]})),
            Some(json!({"conditions": [reconciled("True", json!(5))]})),
            Some(json!({"conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": EARLIER},
                {"type": "Reconciled", "status": "True"},
            ]})),
            Some(json!({"conditions": [
                reconciled("False", json!(EARLIER)),
                reconciled("True", json!("2025-01-01T00:00:00Z")),
            ]})),
            Some(json!({"conditions": "x"})),
            Some(json!({"conditions": [1, null, {"type": "Available", "status": "False"}]})),
            Some(json!("x")),
            Some(json!({"readyReplicas": 2})),
        ],
    )?;
    if let Some(previous) = previous {
        parent["status"] = previous;
    }
    if usually(u)? {
        return Ok(parent);
    }
    match u.int_in_range(0..=7u8)? {
        0 => parent["kind"] = json!("Memcache"),
        1 => parent["apiVersion"] = json!("cache.example.com/v1"),
        2 => parent["kind"] = json!(1),
        3 => parent["metadata"] = json!("mc"),
        4 => parent["metadata"]["name"] = pick(u, &[json!(""), Value::Null, json!(5)])?,
        5 => {
            if let Some(object) = parent.as_object_mut() {
                object.remove("apiVersion");
            }
        }
        6 => parent["metadata"]["name"] = json!("a".repeat(254)),
        _ => parent = pick(u, &[Value::Null, json!([]), json!("mc"), json!({})])?,
    }
    Ok(parent)
}

/// An observed child: owned by the parent, or not in exactly one of the ways ownership can
/// fail.
fn gen_observed(u: &mut Unstructured<'_>, index: u8) -> arbitrary::Result<Value> {
    const KINDS: &[(&str, &str, bool)] = &[
        ("apps/v1", "Deployment", true),
        ("v1", "Service", true),
        ("v1", "ConfigMap", true),
        ("v1", "Secret", true),
        ("v1", "ServiceAccount", true),
        ("rbac.authorization.k8s.io/v1", "Role", true),
        ("monitoring.coreos.com/v1", "ServiceMonitor", true),
        // The API server never gives a cluster-scoped object a namespace.
        ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
        ("apps/v1", "StatefulSet", true),
    ];
    let (api_version, kind, namespaced) = pick(u, KINDS)?;
    let name = pick(u, &["old", "mc", "web", "mc-config"])?;
    let mut object = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "uid": format!("child-{index}"),
            "labels": {
                MANAGED_BY_LABEL: MANAGED_BY, PLUGIN_LABEL: PLUGIN, PARENT_UID_LABEL: UID,
                "app": "mc",
            },
            "ownerReferences": [parent_ref(UID, json!(true))],
        },
    });
    if namespaced {
        object["metadata"]["namespace"] = NAMESPACE.into();
    }
    if u.arbitrary()? {
        object["status"] = json!({"readyReplicas": 1});
    }
    if usually(u)? {
        return Ok(object);
    }
    let metadata = &mut object["metadata"];
    let labels = &mut metadata["labels"];
    match u.int_in_range(0..=15u8)? {
        0 => metadata["name"] = json!(5),
        1 => metadata["uid"] = pick(u, &[Value::Null, json!(5), json!("")])?,
        2 => metadata["namespace"] = pick(u, &[json!("default"), json!("other"), Value::Null])?,
        3 => labels[PARENT_UID_LABEL] = json!("uid-2"),
        4 => labels[PLUGIN_LABEL] = json!("mysql"),
        5 => labels[MANAGED_BY_LABEL] = json!("Operator-Host"),
        6 => *labels = json!({MANAGED_BY_LABEL: MANAGED_BY, PLUGIN_LABEL: PLUGIN}),
        7 => *labels = json!({"app": "mc"}),
        8 => *labels = json!("x"),
        9 => metadata["ownerReferences"] = json!([parent_ref(UID, json!(false))]),
        10 => metadata["ownerReferences"] = json!([parent_ref(UID, json!("true"))]),
        11 => metadata["ownerReferences"] = json!([parent_ref("uid-2", json!(true))]),
        12 => metadata["ownerReferences"] = pick(u, &[Value::Null, json!("x"), json!([])])?,
        13 => {
            metadata["ownerReferences"] = json!([
                parent_ref(UID, json!(false)),
                parent_ref("uid-2", json!(true)),
            ])
        }
        14 => {
            // Still owned: the controller reference need not be the first.
            metadata["ownerReferences"] = json!([
                parent_ref("uid-2", json!(false)),
                parent_ref(UID, json!(true)),
            ])
        }
        _ => object["apiVersion"] = json!("apps/v1beta1"),
    }
    Ok(object)
}

/// The status text: the raw segment, or generated around the condition rules.
fn gen_status(u: &mut Unstructured<'_>, raw: Option<String>) -> arbitrary::Result<String> {
    if let Some(raw) = raw
        && usually(u)?
        && (is_json(&raw) || !usually(u)?)
    {
        return Ok(raw);
    }
    let condition = |u: &mut Unstructured<'_>| -> arbitrary::Result<Value> {
        pick(
            u,
            &[
                json!({"type": "Available", "status": "True"}),
                json!({"type": "Available", "status": "False", "lastTransitionTime": EARLIER}),
                json!({"type": "Available", "status": "True", "lastTransitionTime": 5}),
                json!({"type": "Reconciled", "status": "False", "reason": "Spoofed"}),
                json!({"type": "Reconciled", "status": "True", "lastTransitionTime": EARLIER}),
                json!({"status": "True"}),
                json!({}),
                json!({"type": 1, "status": "True"}),
                Value::Null,
                json!(1),
                json!("Available"),
                json!([]),
            ],
        )
    };
    let status = match u.int_in_range(0..=7u8)? {
        0 => json!({}),
        1 | 2 => {
            let mut conditions = Vec::new();
            for _ in 0..u.int_in_range(0..=4u8)? {
                conditions.push(condition(u)?);
            }
            json!({"readyReplicas": 1, "selector": "app=mc", "conditions": conditions})
        }
        3 => json!({"observedGeneration": 99, "conditions": []}),
        4 => json!({"conditions": pick(u, &[Value::Null, json!("x"), json!({})])?}),
        5 => pick(u, &[json!([]), json!("ok"), json!(1), Value::Null])?,
        6 => return Ok("{".into()),
        _ => return Ok(u.arbitrary::<&str>()?.to_string()),
    };
    Ok(status.to_string())
}

fuzz_target!(|case: Case| {
    let decl = &*DECLARATION;
    let response = ReconcileResponse {
        children: case.children.clone(),
        status: case.status.clone(),
        requeue_after_ms: case.requeue_after_ms,
    };
    let result = plan_from_response(decl, &case.parent, &case.observed, response, NOW);
    let parent_valid = case.parent["apiVersion"] == PARENT_API_VERSION
        && case.parent["kind"] == PARENT_KIND
        && case.parent["metadata"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
    match &result {
        Err(PlanError::InvalidParent(_)) => {
            assert!(!parent_valid, "a valid parent was refused: {result:?}")
        }
        _ => assert!(parent_valid, "an invalid parent was accepted: {result:?}"),
    }
    let Ok(plan) = result else {
        return;
    };
    let namespace = case.parent["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    check_apply(&case, &plan, namespace);
    check_prune(&case, &plan, namespace);
    check_status(&case, &plan);
    assert_eq!(
        plan.requeue_after,
        case.requeue_after_ms.map(Duration::from_millis)
    );
    check_policies(&plan, namespace);
});

/// The parent's UID as the host must use it: a non-empty string, or none.
fn parent_uid(case: &Case) -> Option<&str> {
    case.parent["metadata"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
}

/// A DNS-1123 subdomain, as Kubernetes validates most object names.
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The documented dependency order: config and identities, Services, other kinds,
/// workloads (pruning runs in reverse).
fn dependency_rank(kind: &str) -> u8 {
    match kind {
        "ConfigMap" | "Secret" | "ServiceAccount" | "Role" => 1,
        "Service" => 2,
        "Deployment" => 4,
        _ => 3,
    }
}

fn check_apply(case: &Case, plan: &Plan, namespace: &str) {
    let uid = parent_uid(case);
    let originals: Vec<Value> = case
        .children
        .iter()
        .map(|text| serde_json::from_str(text).expect("an accepted child is valid JSON"))
        .collect();
    assert_eq!(
        plan.apply.len(),
        originals.len(),
        "every child is applied or the plan fails"
    );
    let mut seen = HashSet::new();
    let mut previous: Option<(u8, usize)> = None;
    for child in &plan.apply {
        let kind = DECLARATION
            .children
            .iter()
            .find(|k| k.matches(child))
            .unwrap_or_else(|| panic!("undeclared kind applied: {child}"));
        assert!(kind.namespaced, "cluster-scoped kind applied: {child}");
        // `Value` indexing (a missing key is null), not `Map` indexing (which panics).
        let metadata = &child["metadata"];
        assert!(
            metadata.is_object(),
            "applied child without metadata: {child}"
        );
        let name = metadata["name"]
            .as_str()
            .unwrap_or_else(|| panic!("applied child without a name: {child}"));
        assert!(is_dns_subdomain(name), "invalid name {name:?} applied");
        assert!(
            seen.insert((kind.kind.clone(), name.to_string())),
            "{kind} {name:?} applied twice"
        );
        assert_eq!(metadata["namespace"], namespace, "{child}");
        assert!(child.get("status").is_none(), "status applied: {child}");
        for field in &HOST_ONLY_FIELDS[1..] {
            assert!(
                metadata.get(*field).is_none_or(Value::is_null),
                "metadata.{field} applied: {child}"
            );
        }
        let labels = &metadata["labels"];
        let label_keys = labels
            .as_object()
            .unwrap_or_else(|| panic!("applied child without labels: {child}"))
            .keys();
        assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY, "{child}");
        assert_eq!(labels[PLUGIN_LABEL], PLUGIN, "{child}");
        match uid {
            Some(uid) => {
                assert_eq!(
                    metadata["ownerReferences"],
                    json!([{
                        "apiVersion": PARENT_API_VERSION,
                        "kind": PARENT_KIND,
                        "name": case.parent["metadata"]["name"],
                        "uid": uid,
                        "controller": true,
                        "blockOwnerDeletion": true,
                    }]),
                    "{child}"
                );
                assert_eq!(labels[PARENT_UID_LABEL], uid, "{child}");
            }
            None => {
                assert!(
                    metadata.get("ownerReferences").is_none_or(Value::is_null),
                    "owner reference without a parent UID: {child}"
                );
                assert!(labels.get(PARENT_UID_LABEL).is_none(), "{child}");
            }
        }
        for key in label_keys {
            assert!(
                !key.starts_with(RESERVED_PREFIX) || key == PLUGIN_LABEL || key == PARENT_UID_LABEL,
                "reserved label {key:?} applied: {child}"
            );
        }
        if let Some(annotations) = metadata.get("annotations").and_then(Value::as_object) {
            for key in annotations.keys() {
                assert!(
                    !key.starts_with(RESERVED_PREFIX) && key != MANAGED_BY_LABEL,
                    "reserved annotation {key:?} applied: {child}"
                );
            }
        }

        // Apart from the host's metadata, the child is exactly what the plugin returned.
        let index = originals
            .iter()
            .position(|o| o["kind"] == child["kind"] && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("applied child the plugin did not return: {child}"));
        let original = &originals[index];
        let host_fields = ["namespace", "labels", "ownerReferences"];
        for (key, value) in original.as_object().into_iter().flatten() {
            if key != "status" && key != "metadata" {
                assert_eq!(&child[key], value, "field {key} changed");
            }
        }
        for (key, value) in original["metadata"].as_object().into_iter().flatten() {
            if !host_fields.contains(&key.as_str()) {
                assert_eq!(&metadata[key], value, "metadata.{key} changed");
            }
        }
        for (key, value) in original["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
        {
            assert_eq!(&labels[key], value, "label {key} changed");
        }
        for key in child.as_object().into_iter().flatten().map(|(k, _)| k) {
            assert!(original.get(key).is_some(), "field {key} added");
        }
        for key in metadata.as_object().into_iter().flatten().map(|(k, _)| k) {
            assert!(
                original["metadata"].get(key).is_some() || host_fields.contains(&key.as_str()),
                "metadata.{key} added"
            );
        }

        // Dependency order; the plugin's order among equals (a stable sort).
        let position = (dependency_rank(&kind.kind), index);
        if let Some(before) = previous {
            assert!(
                before < position,
                "apply order {before:?} then {position:?}"
            );
        }
        previous = Some(position);
    }
}

/// Whether `object` is provably this parent's child: labels and a controller reference.
fn owned(object: &Value, uid: &str, namespace: &str) -> bool {
    let metadata = &object["metadata"];
    let labels = &metadata["labels"];
    labels[MANAGED_BY_LABEL] == MANAGED_BY
        && labels[PLUGIN_LABEL] == PLUGIN
        && labels[PARENT_UID_LABEL] == uid
        && metadata["ownerReferences"].as_array().is_some_and(|refs| {
            refs.iter()
                .any(|r| r["uid"] == uid && r["controller"] == true)
        })
        && metadata["namespace"] == namespace
}

fn check_prune(case: &Case, plan: &Plan, namespace: &str) {
    let Some(uid) = parent_uid(case) else {
        assert!(
            plan.prune.is_empty(),
            "prune without a parent UID: {plan:?}"
        );
        return;
    };
    let desired: HashSet<(&str, &str)> = plan
        .apply
        .iter()
        .filter_map(|c| Some((c["kind"].as_str()?, c["metadata"]["name"].as_str()?)))
        .collect();
    let mut previous_rank = u8::MAX;
    for target in &plan.prune {
        assert!(
            !desired.contains(&(target.kind.kind.as_str(), target.name.as_str())),
            "desired child pruned: {target:?}"
        );
        assert_eq!(target.namespace, namespace);
        assert!(
            DECLARATION.children.contains(&target.kind),
            "undeclared kind pruned: {target:?}"
        );
        let observed = case.observed.iter().any(|o| {
            target.kind.matches(o)
                && o["metadata"]["name"] == target.name.as_str()
                && o["metadata"]["uid"] == target.uid.as_str()
                && owned(o, uid, namespace)
        });
        assert!(
            observed,
            "pruned an object not observed as owned: {target:?}"
        );
        let rank = dependency_rank(&target.kind.kind);
        assert!(rank <= previous_rank, "prune order: {:?}", plan.prune);
        previous_rank = rank;
    }
    // Completeness: every owned, undesired, deletable (name and UID) object is pruned.
    let expected = case
        .observed
        .iter()
        .filter(|o| DECLARATION.children.iter().any(|k| k.matches(o)))
        .filter(|o| owned(o, uid, namespace))
        .filter_map(|o| Some((o["kind"].as_str()?, o["metadata"]["name"].as_str()?, o)))
        .filter(|(kind, name, o)| {
            !desired.contains(&(kind, name)) && o["metadata"]["uid"].is_string()
        })
        .count();
    assert_eq!(
        plan.prune.len(),
        expected,
        "owned, undesired objects left: {plan:?}"
    );
}

/// `lastTransitionTime` as the host must stamp a condition without one: the previous time
/// while the status is unchanged, `now` otherwise. `None`: ambiguous (several of a type).
fn expected_transition(previous: &Value, condition: &Value) -> Option<String> {
    let same_type: Vec<&Value> = previous["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == condition["type"])
        .collect();
    match same_type.as_slice() {
        [] => Some(NOW.into()),
        [earlier] if earlier["status"] == condition["status"] => Some(
            earlier["lastTransitionTime"]
                .as_str()
                .unwrap_or(NOW)
                .to_string(),
        ),
        [_] => Some(NOW.into()),
        _ => None,
    }
}

fn check_status(case: &Case, plan: &Plan) {
    let given: Value = serde_json::from_str(&case.status).expect("an accepted status is JSON");
    let given = given.as_object().expect("an accepted status is an object");
    let status = &plan.status;
    assert!(status.is_object(), "the status is not an object: {status}");
    let previous = case.parent.get("status").unwrap_or(&Value::Null);
    let generation = case.parent["metadata"]["generation"].as_i64();
    for (key, value) in given {
        if key != "conditions" && key != "observedGeneration" {
            assert_eq!(&status[key], value, "status.{key} changed");
        }
    }
    match generation {
        Some(g) => assert_eq!(status["observedGeneration"], g),
        None => assert_eq!(
            status.get("observedGeneration"),
            given.get("observedGeneration")
        ),
    }
    let conditions = status["conditions"]
        .as_array()
        .expect("status.conditions is a list");
    let (host, kept) = conditions
        .split_last()
        .expect("the host's condition is last");
    assert_eq!(host["type"], "Reconciled");
    assert_eq!(host["status"], "True");
    assert_eq!(host["reason"], "ReconcileSucceeded");
    assert_eq!(
        host.get("observedGeneration"),
        generation.map(Value::from).as_ref()
    );
    if let Some(time) = expected_transition(previous, host) {
        assert_eq!(host["lastTransitionTime"], time.as_str(), "{status:?}");
    }
    // The plugin's conditions, minus any `Reconciled` it tried to set, in its order.
    let plugin: Vec<&Value> = given
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "Reconciled")
        .collect();
    assert_eq!(
        kept.len(),
        plugin.len(),
        "conditions lost or added: {status:?}"
    );
    for (after, before) in kept.iter().zip(plugin) {
        // The host refuses conditions that are not objects (status.conditions[i]).
        let before_fields = before.as_object().expect("accepted conditions are objects");
        for (key, value) in before_fields {
            if key != "lastTransitionTime" || value.is_string() {
                assert_eq!(&after[key], value, "condition field {key} changed");
            }
        }
        assert!(after["lastTransitionTime"].is_string(), "{after}");
        if !before["lastTransitionTime"].is_string()
            && let Some(time) = expected_transition(previous, before)
        {
            assert_eq!(after["lastTransitionTime"], time.as_str(), "{after}");
        }
    }
}

/// How a child would hand pods a service-account token (host/src/policy.rs's rules).
fn gives_token(child: &Value) -> bool {
    match (child["apiVersion"].as_str(), child["kind"].as_str()) {
        (Some("v1"), Some("Secret")) => child["type"] == "kubernetes.io/service-account-token",
        (Some("v1"), Some("ServiceAccount")) => child["automountServiceAccountToken"] != false,
        _ => child["spec"]["template"]["spec"]["automountServiceAccountToken"] == true,
    }
}

/// Each policy's verdict against this file's model of it: a wrong `Ok` is a bypass.
fn check_policies(plan: &Plan, namespace: &str) {
    let decl = &*DECLARATION;
    let kind_is = |child: &Value, group_version: &str, kind: &str| {
        child["apiVersion"] == group_version && child["kind"] == kind
    };
    let default_refuses = plan.apply.iter().any(|c| {
        kind_is(c, "v1", "Secret")
            || kind_is(c, "rbac.authorization.k8s.io/v1", "Role")
            || gives_token(c)
    });
    let verdict = Policy::default().check(decl, namespace, plan);
    assert_eq!(
        verdict.is_err(),
        default_refuses,
        "default policy: {verdict:?}"
    );

    let strict_refuses = !STRICT_NAMESPACES.contains(&namespace)
        || plan.apply.len() > STRICT_MAX_CHILDREN
        || plan.apply.iter().any(|c| {
            !STRICT_KINDS.contains(&c["kind"].as_str().unwrap_or_default())
                || kind_is(c, "v1", "Secret")
        });
    let verdict = STRICT.check(decl, namespace, plan);
    assert_eq!(
        verdict.is_err(),
        strict_refuses,
        "strict policy: {verdict:?}"
    );

    let verdict = PERMISSIVE.check(decl, namespace, plan);
    assert!(verdict.is_ok(), "permissive policy: {verdict:?}");
}
