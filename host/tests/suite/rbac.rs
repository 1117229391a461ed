//! `operator-host rbac`: the ClusterRole for the memcached plugin, with and without a policy.

use crate::util;

use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use serde::Deserialize;
use util::{example_plugin, operator_host};

fn rbac(extra: &[&str]) -> (ClusterRole, String) {
    let plugin = example_plugin("memcached");
    let mut args = vec!["rbac", plugin.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = operator_host(&args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = stdout.clone();
    let mut documents = serde_yaml::Deserializer::from_str(&text);
    let first = documents.next().expect("a first document");
    let role = ClusterRole::deserialize(first).expect("the first document is a ClusterRole");
    // Every `run` reports what it serves: the Role for its report Lease follows.
    let report_role = Role::deserialize(documents.next().expect("a second document"))
        .expect("the second document is a Role");
    assert_eq!(
        report_role.metadata.name.as_deref(),
        Some(format!("{}-replica-report", role.metadata.name.as_deref().unwrap()).as_str()),
        "{stdout}"
    );
    assert!(documents.next().is_none(), "{stdout}");
    (role, stdout)
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(ToString::to_string).collect()),
        verbs: verbs.iter().map(ToString::to_string).collect(),
        ..PolicyRule::default()
    }
}

const CHILD: &[&str] = &[
    "get", "list", "watch", "create", "patch", "update", "delete",
];
const EVENTS: &[&str] = &["create", "patch"];

fn parent_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            "cache.example.com",
            &["memcacheds"],
            &["get", "list", "watch", "patch", "update"],
        ),
        rule(
            "cache.example.com",
            &["memcacheds/finalizers"],
            &["patch", "update"],
        ),
        rule(
            "cache.example.com",
            &["memcacheds/status"],
            &["get", "patch", "update"],
        ),
    ]
}

fn policy_file(dir: &tempfile::TempDir, body: &str) -> String {
    let path = dir.path().join("policy.yaml");
    std::fs::write(
        &path,
        format!("apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{body}"),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn the_memcached_role_has_exactly_the_expected_rules() {
    let (role, text) = rbac(&[]);
    assert_eq!(role.metadata.name.as_deref(), Some("operator-host"));
    let mut expected = vec![
        rule("", &["events"], EVENTS),
        rule("", &["services"], CHILD),
        rule("apps", &["deployments"], CHILD),
    ];
    expected.extend(parent_rules());
    expected.push(rule("events.k8s.io", &["events"], EVENTS));
    assert_eq!(role.rules.unwrap(), expected);
    assert!(text.contains("memcached@"), "{text}");
    assert!(text.contains("# No election Lease"), "{text}");
}

#[test]
fn install_crds_and_name_add_to_the_role() {
    let (role, _) = rbac(&["--install-crds", "--name", "my-host"]);
    assert_eq!(role.metadata.name.as_deref(), Some("my-host"));
    let rules = role.rules.unwrap();
    // Creating cannot be narrowed to a name; changing can, to the plugin's own CRD.
    let crd_rules = [
        rule(
            "apiextensions.k8s.io",
            &["customresourcedefinitions"],
            &["get", "list", "watch", "create"],
        ),
        PolicyRule {
            resource_names: Some(vec!["memcacheds.cache.example.com".into()]),
            ..rule(
                "apiextensions.k8s.io",
                &[
                    "customresourcedefinitions",
                    "customresourcedefinitions/status",
                ],
                &["patch", "update"],
            )
        },
    ];
    let mut expected = vec![
        rule("", &["events"], EVENTS),
        rule("", &["services"], CHILD),
    ];
    expected.extend(crd_rules);
    expected.push(rule("apps", &["deployments"], CHILD));
    expected.extend(parent_rules());
    expected.push(rule("events.k8s.io", &["events"], EVENTS));
    assert_eq!(rules, expected);
}

#[test]
fn a_kind_the_policy_forbids_gets_no_rule() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(
        &dir,
        "plugins:\n  memcached:\n    kinds: [apps/v1/Deployment]\n",
    );
    let (role, _) = rbac(&["--policy", &policy]);
    let mut expected = vec![
        rule("", &["events"], EVENTS),
        rule("apps", &["deployments"], CHILD),
    ];
    expected.extend(parent_rules());
    expected.push(rule("events.k8s.io", &["events"], EVENTS));
    assert_eq!(role.rules.unwrap(), expected);
}

#[test]
fn bad_policies_and_refused_plugins_exit_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = example_plugin("memcached");
    let plugin = plugin.to_str().unwrap();
    for (body, parts) in [
        (
            "defaults:\n  allowSecret: true\n",
            &["policy.yaml", "allowSecret"][..],
        ),
        (
            "plugins:\n  memcached:\n    kinds: [v1/ConfigMap]\n",
            &["refuses plugin memcached", "none of the child kinds"],
        ),
    ] {
        let policy = policy_file(&dir, body);
        let output = operator_host(&["rbac", plugin, "--policy", &policy]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        for part in parts {
            assert!(stderr.contains(part), "expected {part:?} in {stderr}");
        }
    }
    let output = operator_host(&["rbac", plugin, "--policy", "/nonexistent/p.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(Path::new(plugin).exists());
}

#[test]
fn kinds_spelled_to_reach_another_resource_are_refused_by_rbac_render_and_inspect_alike() {
    for (lie, expected) in [
        (
            "hostile-lie-child-plural",
            "the API server serves v1 ConfigMap as \"configmaps\"",
        ),
        (
            "hostile-lie-related-plural",
            "the API server serves v1 ConfigMap as \"configmaps\"",
        ),
        (
            "hostile-lie-scope",
            "cluster-scoped; the API server serves v1 ConfigMap",
        ),
    ] {
        let plugin = util::test_plugin(lie);
        let plugin = plugin.to_str().unwrap();
        let example = util::example("memcached.yaml");
        for command in [
            vec!["rbac", plugin],
            vec!["inspect", plugin],
            vec!["render", plugin, util::path_str(&example)],
        ] {
            let output = operator_host(&command);
            let stderr = util::stderr(&output);
            assert!(!output.status.success(), "{command:?} accepted {lie}");
            assert!(stderr.contains(expected), "{command:?}: {stderr}");
            assert!(
                util::stdout(&output).is_empty(),
                "{command:?} printed something for {lie}: nothing may be granted"
            );
        }
    }
}
