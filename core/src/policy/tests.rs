//! Unit tests of the policy: parsing, every validation error, defaults, each check.

use super::*;
use crate::contract::UpdateStrategy;
use crate::plan::{PlannedChild, check_child};
use crate::test_support::{kind, memcached_declaration};
use serde_json::json;

fn declaration(children: Vec<Kind>) -> Declaration {
    memcached_declaration(children)
}

fn deployment_kind() -> Kind {
    kind("apps", "v1", "Deployment", "deployments")
}
fn service_kind() -> Kind {
    kind("", "v1", "Service", "services")
}
fn secret_kind() -> Kind {
    kind("", "v1", "Secret", "secrets")
}
fn role_kind() -> Kind {
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles")
}
fn service_account_kind() -> Kind {
    kind("", "v1", "ServiceAccount", "serviceaccounts")
}

fn every_kind() -> Declaration {
    declaration(vec![
        deployment_kind(),
        service_kind(),
        secret_kind(),
        role_kind(),
        service_account_kind(),
    ])
}

fn plan(children: Vec<Value>) -> Plan {
    Plan {
        apply: children
            .into_iter()
            .map(|object| PlannedChild {
                object,
                update: UpdateStrategy::InPlace,
                stage: 0,
                barrier: None,
            })
            .collect(),
        prune: Vec::new(),
        status: json!({}),
        requeue_after: None,
    }
}

fn parent_in(namespace: &str) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"secretName": "chosen-by-the-author"},
    })
}

fn object(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "ns"}})
}

fn parse(text: &str) -> Result<Policy, Error> {
    Policy::parse(text, Path::new("policy.yaml"))
}

fn policy(body: &str) -> Policy {
    parse(&format!(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"
    ))
    .unwrap()
}

/// The error message of parsing `body` under a valid header.
fn invalid(body: &str) -> String {
    parse(&format!(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"
    ))
    .unwrap_err()
    .to_string()
}

fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "expected {part:?} in: {text}");
    }
}

#[test]
fn the_documented_example_parses() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policy.yaml"),
    )
    .unwrap();
    let policy = parse(&text).unwrap();
    let rules = policy.rules("memcached");
    assert!(rules.kinds.is_some());
}

#[test]
fn an_empty_policy_is_the_safe_defaults() {
    let policy = policy("");
    assert_eq!(policy, Policy::default());
    let rules = policy.rules("anything");
    assert_eq!(rules.kinds, None);
    assert!(rules.namespaces.is_empty());
    assert!(!rules.allow_rbac);
    assert!(!rules.allow_secrets);
    assert!(!rules.allow_service_account_tokens);
    assert_eq!(rules.max_children, 1000);
    assert_eq!(rules.limits, PolicyLimits::default());
}

#[test]
fn plugin_entries_override_defaults_field_by_field() {
    let policy = policy(
        "defaults:\n  allowSecrets: true\n  namespaces: [a]\n  maxChildren: 10\n  limits: {callTimeoutMs: 500, memoryMiB: 32}\n\
         plugins:\n  memcached:\n    namespaces: [b]\n    limits: {memoryMiB: 128}\n",
    );
    let rules = policy.rules("memcached");
    assert!(rules.allow_secrets);
    assert_eq!(rules.namespaces, ["b"]);
    assert_eq!(rules.max_children, 10);
    assert_eq!(rules.limits.call_timeout_ms, Some(500));
    assert_eq!(rules.limits.memory_mib, Some(128));
    assert_eq!(policy.rules("other").namespaces, ["a"]);
    assert_eq!(policy.max_memory_bytes(), Some(128 << 20));
}

#[test]
fn limits_fall_back_to_the_command_line() {
    let base = Limits {
        call_timeout: Duration::from_millis(700),
        max_memory_bytes: 48 << 20,
        ..Limits::default()
    };
    let policy = policy(
        "defaults:\n  limits: {maxResponseMiB: 2}\nplugins:\n  memcached:\n    limits: {callTimeoutMs: 200, maxConcurrentCalls: 3}\n",
    )
    .with_default_limits(&base);
    let limits = policy.limits("memcached", &Limits::default());
    assert_eq!(limits.call_timeout, Duration::from_millis(200));
    assert_eq!(limits.max_memory_bytes, 48 << 20);
    assert_eq!(limits.max_response_bytes, 2 << 20);
    assert_eq!(policy.max_concurrent_calls("memcached"), Some(3));
    let other = policy.limits("other", &Limits::default());
    assert_eq!(other.call_timeout, Duration::from_millis(700));
    assert_eq!(policy.max_concurrent_calls("other"), None);
    // Without a policy file: exactly the command line's limits.
    assert_eq!(
        Policy::default()
            .with_default_limits(&base)
            .limits("x", &Limits::default()),
        base
    );
}

#[test]
fn unreadable_files_name_the_file() {
    let err = Policy::load(Path::new("/nonexistent/policy.yaml")).unwrap_err();
    assert!(matches!(err, Error::Read { .. }));
    assert_contains(&err.to_string(), &["/nonexistent/policy.yaml"]);
}

#[test]
fn malformed_yaml_and_unknown_fields_are_parse_errors() {
    let err = parse("apiVersion: [").unwrap_err();
    assert!(matches!(err, Error::Parse { .. }), "{err}");
    assert_contains(&err.to_string(), &["policy.yaml"]);
    let message = invalid("defaults:\n  allowSecret: true\n");
    assert_contains(&message, &["policy.yaml", "allowSecret", "allowSecrets"]);
    let message = invalid("plugins:\n  memcached:\n    limits: {memory: 3}\n");
    assert_contains(&message, &["memory", "memoryMiB"]);
    let message = invalid("extra: 1\n");
    assert_contains(&message, &["extra"]);
    let message = parse("kind: Policy\n").unwrap_err().to_string();
    assert_contains(&message, &["apiVersion"]);
}

#[test]
fn the_header_is_validated() {
    let err = parse("apiVersion: v1\nkind: Policy\n").unwrap_err();
    assert!(matches!(err, Error::Validate { .. }));
    assert_contains(
        &err.to_string(),
        &[
            "policy.yaml",
            "apiVersion",
            "\"v1\"",
            "operator-host.dev/v1alpha1",
        ],
    );
    let message = parse("apiVersion: operator-host.dev/v1alpha1\nkind: ConfigMap\n")
        .unwrap_err()
        .to_string();
    assert_contains(&message, &["kind is \"ConfigMap\"", "\"Policy\""]);
}

#[test]
fn each_field_is_validated() {
    for (body, parts) in [
        (
            "defaults:\n  kinds: [Deployment]\n",
            &["defaults.kinds[0]", "\"Deployment\"", "group/version/Kind"][..],
        ),
        (
            "plugins:\n  memcached:\n    kinds: [v1/Service, apps/v1/deployment]\n",
            &["plugins.memcached.kinds[1]", "apps/v1/deployment"],
        ),
        ("defaults:\n  kinds: [apps/1/Deployment]\n", &["kinds[0]"]),
        (
            "defaults:\n  namespaces: [Team_A]\n",
            &["defaults.namespaces[0]", "Team_A", "DNS-1123"],
        ),
        (
            "defaults:\n  allowClusterScoped: true\n",
            &["defaults.allowClusterScoped", "expected false"],
        ),
        (
            "defaults:\n  maxChildren: 0\n",
            &["defaults.maxChildren is 0", "from 1 to 1000"],
        ),
        ("defaults:\n  maxChildren: 1001\n", &["maxChildren is 1001"]),
        (
            "defaults:\n  limits: {callTimeoutMs: 0}\n",
            &["defaults.limits.callTimeoutMs is 0", "greater than 0"],
        ),
        (
            "plugins:\n  memcached:\n    limits: {memoryMiB: 0}\n",
            &["plugins.memcached.limits.memoryMiB"],
        ),
        (
            "defaults:\n  limits: {maxResponseMiB: 0}\n",
            &["maxResponseMiB"],
        ),
        (
            "defaults:\n  limits: {maxConcurrentCalls: 0}\n",
            &["maxConcurrentCalls"],
        ),
        (
            "plugins:\n  Mem_cached: {}\n",
            &["a key of plugins", "Mem_cached", "plugin name"],
        ),
    ] {
        let err = parse(&format!(
            "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"
        ))
        .unwrap_err();
        assert!(matches!(err, Error::Validate { .. }), "{body}: {err}");
        let mut expected = vec!["policy.yaml"];
        expected.extend_from_slice(parts);
        assert_contains(&err.to_string(), &expected);
    }
    // Negative numbers are refused by the types.
    assert_contains(&invalid("defaults:\n  maxChildren: -1\n"), &["maxChildren"]);
    // Well-formed kinds of all shapes.
    policy(
        "defaults:\n  kinds: [v1/ConfigMap, apps/v1/StatefulSet, policy.example.com/v1beta1/Thing]\n",
    );
}

#[test]
fn declared_and_listed_kinds_are_allowed() {
    let decl = declaration(vec![deployment_kind(), service_kind()]);
    let policy = policy("plugins:\n  memcached:\n    kinds: [apps/v1/Deployment, v1/ConfigMap]\n");
    assert_eq!(policy.allowed_children(&decl), [deployment_kind()]);
    let ok = plan(vec![object("apps/v1", "Deployment", "d")]);
    assert_eq!(policy.check(&decl, &parent_in("ns"), &ok), Ok(()));
    let err = policy
        .check(
            &decl,
            &parent_in("ns"),
            &plan(vec![object("v1", "Service", "s")]),
        )
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "v1/Service \"s\"",
            "kinds for plugin memcached",
            "apps/v1/Deployment",
        ],
    );
    assert_eq!(PlanError::from(err).reason(), "PolicyViolation");
    // Without `kinds`, every declared kind.
    assert_eq!(Policy::default().allowed_children(&decl), decl.children);
}

#[test]
fn secrets_need_allow_secrets() {
    let decl = every_kind();
    let secret = plan(vec![object("v1", "Secret", "s")]);
    let err = Policy::default()
        .check(&decl, &parent_in("ns"), &secret)
        .unwrap_err();
    assert_contains(&err.0, &["v1/Secret \"s\"", "allowSecrets is false"]);
    let allowed = policy("plugins:\n  memcached:\n    allowSecrets: true\n");
    assert_eq!(allowed.check(&decl, &parent_in("ns"), &secret), Ok(()));
    assert!(
        !Policy::default()
            .allowed_children(&decl)
            .contains(&secret_kind())
    );
}

#[test]
fn rbac_kinds_need_allow_rbac() {
    let decl = every_kind();
    let role = plan(vec![object("rbac.authorization.k8s.io/v1", "Role", "r")]);
    let err = Policy::default()
        .check(&decl, &parent_in("ns"), &role)
        .unwrap_err();
    assert_contains(&err.0, &["Role \"r\"", "allowRbac is false"]);
    let allowed = policy("defaults:\n  allowRbac: true\n");
    assert_eq!(allowed.check(&decl, &parent_in("ns"), &role), Ok(()));
}

#[test]
fn service_account_tokens_need_allow_service_account_tokens() {
    let decl = every_kind();
    let permissive = policy("defaults:\n  allowSecrets: true\n");
    let mut token = object("v1", "Secret", "t");
    token["type"] = SERVICE_ACCOUNT_TOKEN_TYPE.into();
    let err = permissive
        .check(&decl, &parent_in("ns"), &plan(vec![token.clone()]))
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "service-account-token",
            "allowServiceAccountTokens is false",
        ],
    );

    let mut account = object("v1", "ServiceAccount", "sa");
    let err = permissive
        .check(&decl, &parent_in("ns"), &plan(vec![account.clone()]))
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "ServiceAccount \"sa\"",
            "automountServiceAccountToken: false",
        ],
    );
    account["automountServiceAccountToken"] = false.into();
    assert_eq!(
        permissive.check(&decl, &parent_in("ns"), &plan(vec![account])),
        Ok(())
    );

    let mut deployment = object("apps/v1", "Deployment", "d");
    deployment["spec"] = json!({"template": {"spec": {"automountServiceAccountToken": true}}});
    let err = permissive
        .check(&decl, &parent_in("ns"), &plan(vec![deployment.clone()]))
        .unwrap_err();
    assert_contains(&err.0, &["Deployment \"d\"", "pod spec"]);
    // A pod template that says nothing keeps the ServiceAccount's choice.
    deployment["spec"] = json!({"template": {"spec": {}}});
    assert_eq!(
        permissive.check(&decl, &parent_in("ns"), &plan(vec![deployment])),
        Ok(())
    );

    let tokens = policy("defaults:\n  allowSecrets: true\n  allowServiceAccountTokens: true\n");
    assert_eq!(
        tokens.check(&decl, &parent_in("ns"), &plan(vec![token])),
        Ok(())
    );
}

#[test]
fn parents_must_be_in_an_allowed_namespace() {
    let decl = every_kind();
    let policy = policy("plugins:\n  memcached:\n    namespaces: [team-a, team-b]\n");
    assert_eq!(
        policy.check(&decl, &parent_in("team-b"), &plan(vec![])),
        Ok(())
    );
    let err = policy
        .check(&decl, &parent_in("default"), &plan(vec![]))
        .unwrap_err();
    assert_contains(&err.0, &["namespace \"default\"", "team-a, team-b"]);
    // Another plugin is not confined.
    let other = Declaration {
        name: "other".into(),
        ..decl
    };
    assert_eq!(
        policy.check(&other, &parent_in("default"), &plan(vec![])),
        Ok(())
    );
}

#[test]
fn children_are_counted() {
    let decl = every_kind();
    let policy = policy("defaults:\n  maxChildren: 2\n");
    let two: Vec<Value> = (0..2)
        .map(|i| object("v1", "Service", &format!("s{i}")))
        .collect();
    assert_eq!(
        policy.check(&decl, &parent_in("ns"), &plan(two.clone())),
        Ok(())
    );
    let mut three = two;
    three.push(object("v1", "Service", "s2"));
    let err = policy
        .check(&decl, &parent_in("ns"), &plan(three))
        .unwrap_err();
    assert_contains(&err.0, &["3 children", "at most 2"]);
}

#[test]
fn undeclared_kinds_are_refused_too() {
    let decl = declaration(vec![service_kind()]);
    let err = Policy::default()
        .check(
            &decl,
            &parent_in("ns"),
            &plan(vec![object("apps/v1", "Deployment", "d")]),
        )
        .unwrap_err();
    assert_contains(
        &err.0,
        &["apps/v1/Deployment", "not a kind plugin memcached declared"],
    );
}

#[test]
fn admission_warns_about_forbidden_kinds_and_refuses_useless_plugins() {
    let decl = declaration(vec![deployment_kind(), secret_kind()]);
    let warnings = Policy::default().admit(&decl).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_contains(&warnings[0], &["v1/Secret", "allowSecrets"]);

    let listed = policy("defaults:\n  kinds: [apps/v1/Deployment, v1/ConfigMap]\n");
    let warnings = listed.admit(&decl).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("v1/ConfigMap") && w.contains("does not declare")),
        "{warnings:?}"
    );

    let nothing = policy("plugins:\n  memcached:\n    kinds: []\n");
    let err = nothing.admit(&decl).unwrap_err();
    assert!(matches!(err, Error::Admit { .. }));
    assert_contains(
        &err.to_string(),
        &[
            "refuses plugin memcached",
            "cache.example.com/v1alpha1/Memcached",
            "none of the child kinds",
        ],
    );

    let mut cluster_scoped = kind("", "v1", "Namespace", "namespaces");
    cluster_scoped.namespaced = false;
    let warnings = Policy::default()
        .admit(&declaration(vec![deployment_kind(), cluster_scoped]))
        .unwrap();
    assert_contains(&warnings[0], &["v1/Namespace", "cluster-scoped"]);
}

fn deployment_with(pod_spec: Value) -> Value {
    let mut deployment = object("apps/v1", "Deployment", "d");
    deployment["spec"] = json!({"template": {"metadata": {}, "spec": pod_spec}});
    deployment
}

/// A pod spec that passes every Pod Security level (upstream's minimal restricted pod).
fn restricted_pod_spec(extra: Value) -> Value {
    let mut spec = json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "c",
            "image": "registry.k8s.io/pause",
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
            },
        }],
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    spec
}

#[test]
fn pod_templates_are_checked_against_the_pod_security_level() {
    let decl = every_kind();
    let privileged = deployment_with(json!({
        "containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}}],
    }));
    let err = Policy::default()
        .check(&decl, &parent_in("ns"), &plan(vec![privileged.clone()]))
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "apps/v1/Deployment \"d\"",
            "spec.template.spec.containers[0].securityContext.privileged",
            "privileged",
            "podSecurity is baseline for plugin memcached",
        ],
    );
    let lenient = policy("plugins:\n  memcached:\n    podSecurity: privileged\n");
    assert_eq!(
        lenient.check(&decl, &parent_in("ns"), &plan(vec![privileged])),
        Ok(())
    );

    // Baseline allows running as root; restricted does not.
    let plain = deployment_with(json!({"containers": [{"name": "c", "image": "x"}]}));
    assert_eq!(
        Policy::default().check(&decl, &parent_in("ns"), &plan(vec![plain.clone()])),
        Ok(())
    );
    let strict = policy("defaults:\n  podSecurity: restricted\n");
    let err = strict
        .check(&decl, &parent_in("ns"), &plan(vec![plain]))
        .unwrap_err();
    assert_contains(&err.0, &["podSecurity is restricted"]);
    let hardened = deployment_with(restricted_pod_spec(json!({})));
    assert_eq!(
        strict.check(&decl, &parent_in("ns"), &plan(vec![hardened])),
        Ok(())
    );
}

#[test]
fn every_workload_kind_has_its_pod_template_checked() {
    let host_network = json!({"hostNetwork": true, "containers": [{"name": "c", "image": "x"}]});
    for (api_version, kind, template_at) in [
        ("v1", "Pod", vec![]),
        ("v1", "PodTemplate", vec!["template"]),
        ("v1", "ReplicationController", vec!["spec", "template"]),
        ("apps/v1", "Deployment", vec!["spec", "template"]),
        ("apps/v1", "StatefulSet", vec!["spec", "template"]),
        ("apps/v1", "DaemonSet", vec!["spec", "template"]),
        ("apps/v1", "ReplicaSet", vec!["spec", "template"]),
        ("batch/v1", "Job", vec!["spec", "template"]),
        (
            "batch/v1",
            "CronJob",
            vec!["spec", "jobTemplate", "spec", "template"],
        ),
    ] {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let decl = declaration(vec![kind_ref(group, version, kind)]);
        let mut child = object(api_version, kind, "w");
        let holder = template_at
            .iter()
            .fold(&mut child, |value, key| &mut value[*key]);
        holder["spec"] = host_network.clone();
        let err = Policy::default()
            .check(&decl, &parent_in("ns"), &plan(vec![child]))
            .unwrap_err();
        assert_contains(&err.0, &[kind, "hostNetwork"]);
    }
}

fn kind_ref(group: &str, version: &str, kind_name: &str) -> Kind {
    kind(
        group,
        version,
        kind_name,
        &format!("{}s", kind_name.to_lowercase()),
    )
}

#[test]
fn secret_references_must_come_from_the_parents_spec_or_the_plugin() {
    let decl = every_kind();
    let policy = policy("defaults:\n  allowSecrets: true\n");
    let references = [
        json!({"volumes": [{"name": "v", "secret": {"secretName": "S"}}]}),
        json!({"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "S"}}]}}]}),
        json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "S"}}}]}),
        json!({"imagePullSecrets": [{"name": "S"}]}),
        json!({"containers": [{"name": "c", "image": "x",
            "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "S", "key": "k"}}}]}]}),
        json!({"initContainers": [{"name": "c", "image": "x",
            "envFrom": [{"secretRef": {"name": "S"}}]}]}),
    ];
    for reference in references {
        let text = reference.to_string();
        let foreign: Value = serde_json::from_str(&text.replace("\"S\"", "\"foreign\"")).unwrap();
        let mut spec = json!({"containers": [{"name": "c", "image": "x"}]});
        if let (Some(into), Value::Object(extra)) = (spec.as_object_mut(), foreign) {
            into.extend(extra);
        }
        let err = policy
            .check(
                &decl,
                &parent_in("ns"),
                &plan(vec![deployment_with(spec.clone())]),
            )
            .unwrap_err();
        assert_contains(
            &err.0,
            &[
                "references Secret \"foreign\"",
                "secretReferences is parentSpec",
            ],
        );

        // The same reference to the Secret the parent's spec names is allowed ...
        let chosen = serde_json::to_string(&spec)
            .unwrap()
            .replace("foreign", "chosen-by-the-author");
        let chosen = deployment_with(serde_json::from_str(&chosen).unwrap());
        assert_eq!(
            policy.check(&decl, &parent_in("ns"), &plan(vec![chosen.clone()])),
            Ok(()),
            "{text}"
        );
        // ... and refused when the policy allows none.
        let none = self::policy("defaults:\n  secretReferences: none\n");
        assert!(
            none.check(&decl, &parent_in("ns"), &plan(vec![chosen]))
                .is_err()
        );

        // A Secret the plugin creates itself is allowed; `any` allows anything.
        let own = serde_json::to_string(&spec)
            .unwrap()
            .replace("foreign", "own");
        let mut children = vec![deployment_with(serde_json::from_str(&own).unwrap())];
        children.push(object("v1", "Secret", "own"));
        assert_eq!(
            policy.check(&decl, &parent_in("ns"), &plan(children)),
            Ok(())
        );
        let any = self::policy("defaults:\n  secretReferences: any\n");
        assert_eq!(
            any.check(&decl, &parent_in("ns"), &plan(vec![deployment_with(spec)])),
            Ok(())
        );
    }
}

#[test]
fn pods_run_as_the_default_service_account_or_their_own() {
    let decl = every_kind();
    let runs_as = |name: &str| {
        deployment_with(
            json!({"serviceAccountName": name, "containers": [{"name": "c", "image": "x"}]}),
        )
    };
    let err = Policy::default()
        .check(&decl, &parent_in("ns"), &plan(vec![runs_as("admin")]))
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "spec.template.spec.serviceAccountName is \"admin\"",
            "defaultOrOwn",
        ],
    );
    assert_eq!(
        Policy::default().check(&decl, &parent_in("ns"), &plan(vec![runs_as("default")])),
        Ok(())
    );
    let mut own = object("v1", "ServiceAccount", "mine");
    own["automountServiceAccountToken"] = false.into();
    assert_eq!(
        Policy::default().check(&decl, &parent_in("ns"), &plan(vec![own, runs_as("mine")])),
        Ok(())
    );
    let deprecated = deployment_with(
        json!({"serviceAccount": "admin", "containers": [{"name": "c", "image": "x"}]}),
    );
    assert!(
        Policy::default()
            .check(&decl, &parent_in("ns"), &plan(vec![deprecated]))
            .is_err()
    );
    let any = policy("defaults:\n  serviceAccountReferences: any\n");
    assert_eq!(
        any.check(&decl, &parent_in("ns"), &plan(vec![runs_as("admin")])),
        Ok(())
    );
}

#[test]
fn a_projected_service_account_token_counts_as_a_token() {
    let decl = every_kind();
    let projected = deployment_with(json!({
        "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}],
    }));
    let err = Policy::default()
        .check(&decl, &parent_in("ns"), &plan(vec![projected.clone()]))
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "projected service-account token",
            "allowServiceAccountTokens is false",
        ],
    );
    let tokens = policy("defaults:\n  allowServiceAccountTokens: true\n");
    assert_eq!(
        tokens.check(&decl, &parent_in("ns"), &plan(vec![projected])),
        Ok(())
    );
}

#[test]
fn parent_groups_of_kubernetes_and_the_host_are_never_allowed() {
    for group in [
        "apps.k8s.io",
        "k8s.io",
        "storage.kubernetes.io",
        "cluster.x-k8s.io",
        "operator-host.dev",
    ] {
        let mut decl = declaration(vec![deployment_kind()]);
        decl.parent.group = group.into();
        let err = Policy::default().admit(&decl).unwrap_err();
        assert_contains(&err.to_string(), &[group, "no plugin may own its kinds"]);
    }
    // Look-alikes and subgroups of the examples are fine.
    for group in ["mysql.operator-host.dev", "notk8s.io", "cache.example.com"] {
        let mut decl = declaration(vec![deployment_kind()]);
        decl.parent.group = group.into();
        assert!(Policy::default().admit(&decl).is_ok(), "{group}");
    }
    let listed =
        policy("plugins:\n  memcached:\n    parentGroups: [example.org, '*.example.com']\n");
    assert!(listed.admit(&declaration(vec![deployment_kind()])).is_ok());
    let mut elsewhere = declaration(vec![deployment_kind()]);
    elsewhere.parent.group = "other.org".into();
    let err = listed.admit(&elsewhere).unwrap_err();
    assert_contains(
        &err.to_string(),
        &["parentGroups", "other.org", "example.org, *.example.com"],
    );
}

#[test]
fn a_content_pin_refuses_other_content() {
    let decl = declaration(vec![deployment_kind()]);
    let pinned = |hex: &str| {
        policy(&format!(
            "plugins:\n  memcached:\n    sha256: \"sha256:{hex}\"\n"
        ))
    };
    let other = "0".repeat(64);
    let err = pinned(&other).admit(&decl).unwrap_err();
    assert_contains(
        &err.to_string(),
        &["plugins.memcached.sha256", &other, "abcdef0123456789"],
    );
    let mut exact = decl.clone();
    exact.content_hash = "a".repeat(64);
    assert!(pinned(&"a".repeat(64)).admit(&exact).is_ok());
    assert_contains(
        &invalid("plugins:\n  memcached:\n    sha256: abc\n"),
        &["plugins.memcached.sha256", "64 lower-case hex"],
    );
    assert_contains(
        &invalid("defaults:\n  sha256: \"sha256:abc\"\n"),
        &["defaults.sha256"],
    );
}

#[test]
fn the_write_budget_and_requeue_floor_resolve_field_by_field() {
    let rules = Policy::default();
    let rules = rules.rules("x");
    assert_eq!(rules.min_requeue, DEFAULT_MIN_REQUEUE);
    assert_eq!(rules.writes_per_second, DEFAULT_WRITES_PER_SECOND);
    assert_eq!(rules.write_burst, DEFAULT_WRITE_BURST);
    assert_eq!(rules.status_churn_limit, DEFAULT_STATUS_CHURN_LIMIT);
    assert_eq!(rules.pod_security, PodSecurityLevel::Baseline);
    let policy = policy(
        "defaults:\n  writeBudget: {perSecond: 50}\n  minRequeueSeconds: 1\nplugins:\n  memcached:\n    writeBudget: {burst: 7}\n    statusChurnLimit: 3\n",
    );
    let rules = policy.rules("memcached");
    assert_eq!((rules.writes_per_second, rules.write_burst), (50, 7));
    assert_eq!(rules.min_requeue, Duration::from_secs(1));
    assert_eq!(rules.status_churn_limit, 3);
    assert_contains(
        &invalid("defaults:\n  writeBudget: {perSecond: 0}\n"),
        &["defaults.writeBudget.perSecond"],
    );
    assert_contains(
        &invalid("defaults:\n  podSecurity: strict\n"),
        &["podSecurity", "strict"],
    );
}

#[test]
fn contract_checks_refuse_reserved_metadata() {
    let decl = every_kind();
    let mut child = object("v1", "Service", "s");
    child["metadata"]["annotations"] = json!({"operator-host.dev/anything": "x"});
    let err = check_child(&decl, "ns", 0, &child).unwrap_err();
    assert_eq!(err.reason(), "PolicyViolation");
    child["metadata"]["annotations"] = json!("not a map");
    let err = check_child(&decl, "ns", 0, &child).unwrap_err();
    assert_eq!(err.reason(), "InvalidPluginOutput");
}

fn entry(yaml: &str) -> Rules {
    serde_yaml::from_str(yaml).unwrap()
}

#[test]
fn an_operator_plugins_entry_resolves_over_the_files_defaults() {
    let file = parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n\
         defaults: {maxChildren: 7, allowSecrets: true, requireSignature: true}\n",
    )
    .unwrap();
    let policy = file
        .with_entry(
            "memcached",
            entry("{maxChildren: 3}"),
            "spec.policy of OperatorPlugin memcached",
        )
        .unwrap();
    let rules = policy.rules("memcached");
    assert_eq!(rules.max_children, 3);
    assert!(rules.allow_secrets, "the rest comes from defaults");
    assert!(rules.require_signature, "the file's signature rule stays");
    assert_eq!(
        policy.rules("mysql").max_children,
        7,
        "other plugins keep defaults"
    );
    assert_ne!(policy, file);
}

#[test]
fn an_operator_plugins_entry_cannot_replace_the_files_nor_its_signature_rules() {
    let owner = "spec.policy of OperatorPlugin memcached";
    let file = parse(
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\nplugins:\n  memcached: {maxChildren: 2}\n",
    )
    .unwrap();
    let error = file
        .with_entry("memcached", entry("{maxChildren: 3}"), owner)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(owner) && error.contains("has an entry for memcached"),
        "{error}"
    );
    let policy = Policy::default();
    for (written, field) in [
        ("{requireSignature: false}", "spec.policy.requireSignature"),
        ("{signatureKeys: []}", "spec.policy.signatureKeys"),
        ("{kinds: [Deployment]}", "spec.policy.kinds[0]"),
    ] {
        let error = policy
            .with_entry("memcached", entry(written), owner)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(owner) && error.contains(field),
            "{written}: {error}"
        );
    }
}

#[test]
fn the_prune_guard_resolves_field_by_field_and_refuses_a_share_out_of_range() {
    let defaults = Policy::default();
    let rules = defaults.rules("x");
    assert_eq!(rules.prune_guard_percent, DEFAULT_PRUNE_GUARD_PERCENT);
    assert_eq!(rules.prune_guard_window, DEFAULT_PRUNE_GUARD_WINDOW);
    let policy = policy(
        "defaults:\n  pruneGuard: {maxPercent: 25}\nplugins:\n  memcached:\n    pruneGuard: {windowSeconds: 60}\n",
    );
    let rules = policy.rules("memcached");
    assert_eq!(rules.prune_guard_percent, 25);
    assert_eq!(rules.prune_guard_window, Duration::from_secs(60));
    for percent in ["0", "101"] {
        assert_contains(
            &invalid(&format!(
                "defaults:\n  pruneGuard: {{maxPercent: {percent}}}\n"
            )),
            &["defaults.pruneGuard.maxPercent", percent, "from 1 to 100"],
        );
    }
    assert_contains(
        &invalid("plugins:\n  memcached:\n    pruneGuard: {windowSeconds: 0}\n"),
        &["pruneGuard.windowSeconds"],
    );
}

#[test]
fn the_rollout_rules_resolve_field_by_field_and_refuse_a_share_out_of_range() {
    let rules = Policy::default().rules("x").clone();
    assert_eq!(rules.rollout_strategy, RolloutStrategy::Planned);
    assert_eq!(rules.rollout_delete_percent, DEFAULT_ROLLOUT_DELETE_PERCENT);
    assert!(rules.rollout_holds_workload_deletes);
    let entries = policy(
        "defaults:\n  rollout: {maxDeletePercent: 30, holdWorkloadDeletes: false}\nplugins:\n  memcached:\n    rollout: {strategy: Immediate}\n",
    );
    let rules = entries.rules("memcached");
    assert_eq!(rules.rollout_strategy, RolloutStrategy::Immediate);
    assert_eq!(rules.rollout_delete_percent, 30);
    assert!(!rules.rollout_holds_workload_deletes);
    assert_contains(
        &invalid("defaults:\n  rollout: {maxDeletePercent: 0}\n"),
        &["defaults.rollout.maxDeletePercent", "from 1 to 100"],
    );
    assert_contains(
        &invalid("defaults:\n  rollout: {strategy: Gradual}\n"),
        &["rollout", "Gradual"],
    );
    let canary =
        policy("defaults:\n  rollout: {strategy: Canary, canaryPercent: 25, analysisSeconds: 5}\n");
    let rules = canary.rules("x");
    assert_eq!(rules.rollout_strategy, RolloutStrategy::Canary);
    assert_eq!(rules.rollout_canary_percent, 25);
    assert_eq!(rules.rollout_analysis, Duration::from_secs(5));
    assert_contains(
        &invalid("defaults:\n  rollout: {canaryPercent: 0}\n"),
        &["defaults.rollout.canaryPercent", "from 1 to 100"],
    );
    let selected = policy(
        "defaults:\n  rollout: {strategy: Canary}\nplugins:\n  x:\n    rollout: {canarySelector: tier=canary}\n",
    );
    assert_eq!(
        selected.rules("x").rollout_canary_selector.as_deref(),
        Some("tier=canary")
    );
    assert_eq!(selected.rules("y").rollout_canary_selector, None);
    assert_contains(
        &invalid("defaults:\n  rollout: {canarySelector: 'tier in (a'}\n"),
        &["defaults.rollout.canarySelector", "label selector"],
    );
}

#[test]
fn observe_mode_is_a_plugin_entry_over_the_defaults() {
    assert_eq!(Policy::default().rules("x").mode, PluginMode::Reconcile);
    let policy =
        policy("defaults:\n  mode: Observe\nplugins:\n  memcached:\n    mode: Reconcile\n");
    assert_eq!(policy.rules("memcached").mode, PluginMode::Reconcile);
    assert_eq!(policy.rules("other").mode, PluginMode::Observe);
}
