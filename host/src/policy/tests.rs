//! Unit tests of the policy: parsing, every validation error, defaults, each check.

use super::*;
use serde_json::json;

fn kind(group: &str, version: &str, kind: &str, plural: &str) -> KindRef {
    KindRef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
    }
}

fn declaration(children: Vec<KindRef>) -> Declaration {
    Declaration {
        name: "memcached".into(),
        version: "0.1.0".into(),
        content_hash: "abcdef0123456789".into(),
        parent: kind("cache.example.com", "v1alpha1", "Memcached", "memcacheds"),
        children,
        needs_finalize: false,
        crd: Default::default(),
    }
}

fn deployment_kind() -> KindRef {
    kind("apps", "v1", "Deployment", "deployments")
}
fn service_kind() -> KindRef {
    kind("", "v1", "Service", "services")
}
fn secret_kind() -> KindRef {
    kind("", "v1", "Secret", "secrets")
}
fn role_kind() -> KindRef {
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles")
}
fn service_account_kind() -> KindRef {
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
        apply: children,
        prune: Vec::new(),
        status: json!({}),
        requeue_after: None,
    }
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
    assert_eq!(policy.check(&decl, "ns", &ok), Ok(()));
    let err = policy
        .check(&decl, "ns", &plan(vec![object("v1", "Service", "s")]))
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
    let err = Policy::default().check(&decl, "ns", &secret).unwrap_err();
    assert_contains(&err.0, &["v1/Secret \"s\"", "allowSecrets is false"]);
    let allowed = policy("plugins:\n  memcached:\n    allowSecrets: true\n");
    assert_eq!(allowed.check(&decl, "ns", &secret), Ok(()));
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
    let err = Policy::default().check(&decl, "ns", &role).unwrap_err();
    assert_contains(&err.0, &["Role \"r\"", "allowRbac is false"]);
    let allowed = policy("defaults:\n  allowRbac: true\n");
    assert_eq!(allowed.check(&decl, "ns", &role), Ok(()));
}

#[test]
fn service_account_tokens_need_allow_service_account_tokens() {
    let decl = every_kind();
    let permissive = policy("defaults:\n  allowSecrets: true\n");
    let mut token = object("v1", "Secret", "t");
    token["type"] = SERVICE_ACCOUNT_TOKEN_TYPE.into();
    let err = permissive
        .check(&decl, "ns", &plan(vec![token.clone()]))
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
        .check(&decl, "ns", &plan(vec![account.clone()]))
        .unwrap_err();
    assert_contains(
        &err.0,
        &[
            "ServiceAccount \"sa\"",
            "automountServiceAccountToken: false",
        ],
    );
    account["automountServiceAccountToken"] = false.into();
    assert_eq!(permissive.check(&decl, "ns", &plan(vec![account])), Ok(()));

    let mut deployment = object("apps/v1", "Deployment", "d");
    deployment["spec"] = json!({"template": {"spec": {"automountServiceAccountToken": true}}});
    let err = permissive
        .check(&decl, "ns", &plan(vec![deployment.clone()]))
        .unwrap_err();
    assert_contains(&err.0, &["Deployment \"d\"", "pod spec"]);
    // A pod template that says nothing keeps the ServiceAccount's choice.
    deployment["spec"] = json!({"template": {"spec": {}}});
    assert_eq!(
        permissive.check(&decl, "ns", &plan(vec![deployment])),
        Ok(())
    );

    let tokens = policy("defaults:\n  allowSecrets: true\n  allowServiceAccountTokens: true\n");
    assert_eq!(tokens.check(&decl, "ns", &plan(vec![token])), Ok(()));
}

#[test]
fn parents_must_be_in_an_allowed_namespace() {
    let decl = every_kind();
    let policy = policy("plugins:\n  memcached:\n    namespaces: [team-a, team-b]\n");
    assert_eq!(policy.check(&decl, "team-b", &plan(vec![])), Ok(()));
    let err = policy.check(&decl, "default", &plan(vec![])).unwrap_err();
    assert_contains(&err.0, &["namespace \"default\"", "team-a, team-b"]);
    // Another plugin is not confined.
    let other = Declaration {
        name: "other".into(),
        ..decl
    };
    assert_eq!(policy.check(&other, "default", &plan(vec![])), Ok(()));
}

#[test]
fn children_are_counted() {
    let decl = every_kind();
    let policy = policy("defaults:\n  maxChildren: 2\n");
    let two: Vec<Value> = (0..2)
        .map(|i| object("v1", "Service", &format!("s{i}")))
        .collect();
    assert_eq!(policy.check(&decl, "ns", &plan(two.clone())), Ok(()));
    let mut three = two;
    three.push(object("v1", "Service", "s2"));
    let err = policy.check(&decl, "ns", &plan(three)).unwrap_err();
    assert_contains(&err.0, &["3 children", "at most 2"]);
}

#[test]
fn undeclared_kinds_are_refused_too() {
    let decl = declaration(vec![service_kind()]);
    let err = Policy::default()
        .check(
            &decl,
            "ns",
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
