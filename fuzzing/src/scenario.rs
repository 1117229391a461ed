//! The fixed world every input runs in: the plugin's declaration, its parent's identity, the clock.

use std::sync::LazyLock;

use operator_host::declaration::Declaration;
use operator_host::kinds::Kind;

pub const PLUGIN: &str = "memcached";
pub const PARENT_API_VERSION: &str = "cache.example.com/v1alpha1";
pub const PARENT_KIND: &str = "Memcached";
pub const PARENT_NAME: &str = "mc";
pub const NAMESPACE: &str = "ns";
pub const UID: &str = "uid-1";
pub const NOW: &str = "2026-11-30T00:00:00Z";
pub const EARLIER: &str = "2026-01-01T00:00:00Z";
// The host's metadata, spelled out (not imported) so a change of the contract is noticed.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "operator-host";
pub const PLUGIN_LABEL: &str = "operator-host.dev/plugin";
pub const PARENT_UID_LABEL: &str = "operator-host.dev/parent-uid";
pub const RESERVED_PREFIX: &str = "operator-host.dev/";
pub const HOST_ONLY_FIELDS: [&str; 6] = [
    "ownerReferences",
    "finalizers",
    "uid",
    "resourceVersion",
    "managedFields",
    "deletionTimestamp",
];

/// Secret names the generated parent's spec mentions, so a pod template may use them under
/// `secretReferences: parentSpec`.
pub const PARENT_SPEC_SECRETS: [&str; 2] = ["mc-auth", "mc-tls"];

fn kind_ref(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Kind {
    Kind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
    }
}

/// The shape of host/src/plan/tests.rs, plus the kinds the policy treats specially: Secret,
/// ServiceAccount, Role, every kind with a pod template, and one cluster-scoped kind
/// (declared, so only the host's scope check stands in the way).
pub static DECLARATION: LazyLock<Declaration> = LazyLock::new(|| Declaration {
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
        kind_ref("apps", "v1", "StatefulSet", "statefulsets", true),
        kind_ref("apps", "v1", "DaemonSet", "daemonsets", true),
        kind_ref("apps", "v1", "ReplicaSet", "replicasets", true),
        kind_ref("batch", "v1", "Job", "jobs", true),
        kind_ref("batch", "v1", "CronJob", "cronjobs", true),
        kind_ref("", "v1", "Pod", "pods", true),
        kind_ref("", "v1", "PodTemplate", "podtemplates", true),
        kind_ref(
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            true,
        ),
    ],
    needs_finalize: false,
    crd: Default::default(),
    related: Vec::new(),
    implements: Default::default(),
});

/// Where a kind keeps its pod template (the object holding `metadata` and `spec`): `Some("")`
/// for a Pod itself, `None` for kinds that run no pods. Kubernetes' API reference, not the
/// host's code, is the source.
pub fn pod_template_path(api_version: &str, kind: &str) -> Option<&'static str> {
    Some(match (api_version, kind) {
        ("v1", "Pod") => "",
        ("v1", "PodTemplate") => "template",
        ("v1", "ReplicationController")
        | ("apps/v1", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch/v1", "Job") => "spec.template",
        ("batch/v1", "CronJob") => "spec.jobTemplate.spec.template",
        _ => return None,
    })
}
