//! The input layout and its generators: one fuzz input decoded into one reconcile's worth of data.
//!
//! Layout: `control [NUL status] [NUL child]...`. The control bytes drive the generators
//! through [`Unstructured`] (parent, observed children, extra Kubernetes-like children,
//! status, requeue, the parent's spec) and decide for each raw child whether it is used as
//! is, perturbed or replaced; raw segments keep the seeds readable and let libFuzzer mutate
//! real plugin output. Exhausted control bytes take the first choice everywhere.

mod pod;

use std::fmt;

use arbitrary::Unstructured;
use serde_json::{Map, Value, json};

use crate::scenario::{
    EARLIER, HOST_ONLY_FIELDS, MANAGED_BY, MANAGED_BY_LABEL, NAMESPACE, PARENT_API_VERSION,
    PARENT_KIND, PARENT_NAME, PARENT_SPEC_SECRETS, PARENT_UID_LABEL, PLUGIN, PLUGIN_LABEL,
    RESERVED_PREFIX, UID, pod_template_path,
};

/// One decoded input: what the host sees for one reconcile.
pub struct Case {
    pub parent: Value,
    pub observed: Vec<Value>,
    /// The plugin's children, as the text it returned.
    pub children: Vec<String>,
    /// The plugin's status, as the text it returned.
    pub status: String,
    pub requeue_after_ms: Option<u64>,
}

// JSON text rather than `Value`'s Debug, so the `plan_output_case` example prints a readable
// case.
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

impl Case {
    /// Decodes one fuzz input; `Err` only if the generators ask for more than `Unstructured`
    /// can give, which the target skips (as libFuzzer's `Arbitrary` inputs do).
    pub fn decode(data: &[u8]) -> arbitrary::Result<Case> {
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
        // Chosen last, so the parent and observed children of older inputs stay what they were.
        let mut parent = parent;
        if parent.is_object() {
            parent["spec"] = gen_parent_spec(u)?;
        }
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
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "ReplicaSet"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("v1", "Pod"),
        ("v1", "PodTemplate"),
        ("v1", "ReplicationController"),
    ];
    const OTHERS: &[(&str, &str)] = &[
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("v1", "Namespace"),
        ("apps/v1", "ControllerRevision"),
        ("apps/v1beta1", "Deployment"),
        ("batch/v1beta1", "CronJob"),
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
    let mut metadata = Map::new();
    match (kind, pod_template_path(api_version, kind)) {
        ("Secret", _) => {
            child["stringData"] = json!({"key": "value"});
            if let Some(t) = token {
                child["type"] = match t {
                    Value::Bool(true) => json!("kubernetes.io/service-account-token"),
                    Value::Bool(false) => json!("Opaque"),
                    _ => json!("kubernetes.io/Service-Account-Token"),
                };
            }
        }
        ("ServiceAccount", _) => {
            if let Some(t) = token {
                child["automountServiceAccountToken"] = t;
            }
        }
        ("ConfigMap", _) => {
            child["data"] = json!({"key": "value"});
        }
        ("Service", _) => {
            child["spec"] = json!({"ports": [{"port": 11211}], "selector": {"app": "mc"}});
        }
        // A Pod is its own template: the template's metadata is the Pod's.
        (_, Some("")) => {
            let template = pod::gen_template(u, token)?;
            if let Value::Object(template_metadata) = &template["metadata"] {
                metadata = template_metadata.clone();
            }
            child["spec"] = template["spec"].clone();
        }
        (_, Some(path)) => {
            child["spec"] = workload_spec(kind);
            let template = pod::gen_template(u, token)?;
            let path: Vec<&str> = path.split('.').collect();
            set_path(&mut child, &path, template);
        }
        // Kinds that run no pods: a pod template there is only data, which the policy must
        // leave alone (a Deployment-like spec keeps the shape of older inputs).
        _ => {
            child["spec"] = workload_spec("Deployment");
            child["spec"]["template"] = pod::gen_template(u, token)?;
        }
    }
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

/// The spec of a workload kind around its pod template (put in by the caller).
fn workload_spec(kind: &str) -> Value {
    let selector = json!({"matchLabels": {"app": "mc"}});
    match kind {
        "Job" => json!({"backoffLimit": 1}),
        "CronJob" => json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {}}}),
        "DaemonSet" => json!({"selector": selector}),
        "ReplicationController" => json!({"replicas": 1, "selector": {"app": "mc"}}),
        "PodTemplate" => Value::Null,
        _ => json!({"replicas": 1, "selector": selector}),
    }
}

/// Whole-object variations: a status, a non-object metadata, non-string apiVersion/kind, a
/// token or another change in the pod template.
fn vary_object(u: &mut Unstructured<'_>, child: &mut Value) -> arbitrary::Result<()> {
    if usually(u)? {
        return Ok(());
    }
    match u.int_in_range(0..=4u8)? {
        0 => child["status"] = json!({"readyReplicas": 1}),
        1 => child["metadata"] = pick(u, &[Value::Null, json!("mc"), json!([]), json!(1)])?,
        2 => {
            let field = pick(u, &["apiVersion", "kind"])?;
            child[field] = pick(u, &[Value::Null, json!(1), json!(["v1"])])?;
        }
        3 => set_path(
            child,
            &["spec", "template", "spec", "automountServiceAccountToken"],
            json!(true),
        ),
        _ => vary_pod_template(u, child)?,
    }
    Ok(())
}

/// One interesting change to the pod template of `child`, wherever its kind keeps it (a
/// Deployment's place for kinds without one).
fn vary_pod_template(u: &mut Unstructured<'_>, child: &mut Value) -> arbitrary::Result<()> {
    let path = pod_template_path(
        child["apiVersion"].as_str().unwrap_or_default(),
        child["kind"].as_str().unwrap_or_default(),
    )
    .unwrap_or("spec.template");
    if path.is_empty() {
        // A Pod: its metadata and spec are the template's.
        let mut template =
            json!({"metadata": child["metadata"].take(), "spec": child["spec"].take()});
        pod::vary_template(u, &mut template)?;
        child["metadata"] = template["metadata"].take();
        child["spec"] = template["spec"].take();
        return Ok(());
    }
    let mut at = &mut *child;
    for key in path.split('.') {
        at = object_at(at).entry(key).or_insert(Value::Null);
    }
    pod::vary_template(u, at)
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
        match u.int_in_range(0..=METADATA_FIELDS + 3)? {
            field @ 0..=METADATA_FIELDS => {
                set_metadata_field(u, object_at(&mut child["metadata"]), field)?;
            }
            f if f == METADATA_FIELDS + 1 => {
                let (api_version, kind) = gen_kind(u)?;
                child["apiVersion"] = api_version.into();
                child["kind"] = kind.into();
            }
            f if f == METADATA_FIELDS + 2 => vary_object(u, &mut child)?,
            _ => vary_pod_template(u, &mut child)?,
        }
    }
    Ok(child.to_string())
}

/// The parent's spec: where the CR's author names the Secrets a pod template may use under
/// `secretReferences: parentSpec` (any string value counts, a key does not).
fn gen_parent_spec(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let [auth, tls] = PARENT_SPEC_SECRETS;
    pick(
        u,
        &[
            json!({"size": 3, "auth": {"secretName": auth}, "tls": [{"secret": tls}]}),
            json!({"size": 3}),
            json!({"size": 3, auth: {"enabled": true}, "tls": {tls: 1}}),
            json!({"size": 3, "extraSecrets": ["other", auth]}),
            json!(auth),
            Value::Null,
        ],
    )
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
        // Undeclared, so never pruned.
        ("apps/v1", "ControllerRevision", true),
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
