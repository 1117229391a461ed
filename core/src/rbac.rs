//! The ClusterRole the host needs to serve a set of plugins under a policy.
//!
//! [`cluster_role`] is a pure function of the plugins' declarations and the policy:
//!
//! - each parent kind: `get`, `list`, `watch`, `patch`, `update` (the finalizer), the same
//!   on `<plural>/finalizers` (owner references with `blockOwnerDeletion` need it where the
//!   `OwnerReferencesPermissionEnforcement` admission plugin runs), and `get`, `patch`,
//!   `update` on `<plural>/status`;
//! - each child kind the policy allows: `get`, `list`, `watch`, `create`, `patch`, `update`,
//!   `delete` (kinds the policy forbids are never watched nor applied, so they get nothing);
//! - `events` in the core group and in `events.k8s.io`: `create`, `patch`;
//! - with `--install-crds`, `customresourcedefinitions`: `get`, `list`, `watch`, `create` on
//!   all, and `patch`, `update` only on the plugins' own CRDs (`resourceNames`: each
//!   `<plural>.<group>`, and their `/status`, where the host leaves only the storage version in
//!   `storedVersions` once it migrated the stored objects), in a rule of their own. `create` cannot be narrowed to names: RBAC
//!   authorizes a create before the object exists, so it cannot know its name ("You cannot
//!   restrict `create` or `deletecollection` requests by their resource name", see
//!   <https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources>).
//!   Which existing CRD the host writes is up to its ownership rules
//!   (the host's `controller::install_crd`: only one it installed for the same plugin), and RBAC
//!   keeps it from writing a CRD of any other name.
//!
//! Rules are merged per API group (resources with the same verbs share a rule), groups sorted
//! with the core group first, verbs in a fixed order.
//!
//! With leader election (`run --leader-elect`), [`leader_election_role`] is a namespaced Role
//! for the Lease alone: `get` and `update` on the host's Lease (`resourceNames`), `create` on
//! leases of its namespace (a create cannot be narrowed to a name, see above). Nothing in the
//! ClusterRole touches leases, so the host can take no other deployment's lease. With
//! sharding (`run --shard`) each replica also holds a Lease named after itself, and the leader
//! takes over and deletes dead replicas' Leases: the Role then grants every verb on leases
//! of the namespace (names cannot be known in advance), which is why the host belongs in a
//! namespace of its own.
//!
//! Every replica of `run` says what it serves (for `kubectl operator-host`) in one annotation
//! of the Lease `<lease>-replicas` of its namespace: [`replica_report_role`] grants `get` and
//! `patch` on that Lease alone, and `create` on leases of the namespace.
//!
//! With `run --plugins-from-cluster`, the ClusterRole also reads `operatorplugins` and writes
//! their status (and, with `--install-crds`, patches their CRD), and [`pull_secret_role`] is a
//! namespaced Role: `get` on the Secrets of the host's namespace, where an OperatorPlugin's
//! `spec.pullSecret` is read. The kinds of the plugins the OperatorPlugins name are not known
//! here: pass their artifacts (files, or references to pull) like any plugin, so each gets
//! exactly the rules it needs and no plugin gets a wildcard.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::declaration::Declaration;
use crate::policy::Policy;

/// The default name of the ClusterRole.
pub const DEFAULT_NAME: &str = "operator-host";

/// The order verbs are written in.
const VERB_ORDER: [&str; 7] = [
    "get", "list", "watch", "create", "patch", "update", "delete",
];

const PARENT_VERBS: &[&str] = &["get", "list", "watch", "patch", "update"];
const FINALIZER_VERBS: &[&str] = &["patch", "update"];
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];
const CHILD_VERBS: &[&str] = &[
    "get", "list", "watch", "create", "patch", "update", "delete",
];
/// What the host does with the objects a plugin reads (contract 0.2.0's related resources).
const RELATED_VERBS: &[&str] = &["get", "list", "watch"];
const EVENT_VERBS: &[&str] = &["create", "patch"];
/// On OperatorPlugins: the host watches them and writes only their status.
const OPERATOR_PLUGIN_VERBS: &[&str] = &["get", "list", "watch"];
/// On every CRD: reading (the host checks who installed an existing CRD) and creating.
const CRD_VERBS: &[&str] = &["get", "list", "watch", "create"];
/// Only on the CRDs of the plugins served.
const OWN_CRD_VERBS: &[&str] = &["patch", "update"];
const CRD_GROUP: &str = "apiextensions.k8s.io";
/// With webhooks and `--install-crds`: the host keeps the webhook configurations of its
/// plugins (server-side apply, which creates them), lists its own to delete those of plugins
/// gone. Cluster-scoped, and named after plugins not known in advance.
const WEBHOOK_CONFIGURATION_VERBS: &[&str] = &["get", "list", "create", "patch", "delete"];
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
const CRD_RESOURCE: &str = "customresourcedefinitions";

/// What else the role must cover.
#[derive(Debug, Clone)]
pub struct Options {
    /// The ClusterRole's name.
    pub name: String,
    /// Whether the host installs the plugins' CRDs (`run --install-crds`).
    pub install_crds: bool,
    /// The Lease of `run --leader-elect`, if leader election is on.
    pub lease: Option<LeaseName>,
    /// With `run --plugins-from-cluster`: where the OperatorPlugins are and pull Secrets read.
    pub plugins_from_cluster: Option<ClusterPlugins>,
    /// The Lease `run` reports what each replica serves in (`None`: print no Role for it).
    pub replica_report: Option<ReportLease>,
    /// With `run --webhook-addr`: the Secret of the webhooks' CA.
    pub webhooks: Option<WebhookCa>,
}

/// The Secret `run --webhook-addr` keeps its CA in: `<lease>-webhook-ca` in the host's
/// namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookCa {
    pub namespace: String,
    pub secret: String,
}

/// The Lease the replicas of `run` report what they serve in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportLease {
    pub namespace: String,
    pub name: String,
}

/// The OperatorPlugin resource a host with `run --plugins-from-cluster` reads, and the host's
/// namespace, where it reads pull Secrets.
#[derive(Debug, Clone)]
pub struct ClusterPlugins {
    pub namespace: String,
    pub group: String,
    pub plural: String,
}

/// Where the Lease of a leader-elected host lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseName {
    pub namespace: String,
    pub name: String,
    /// With `run --shard`: every replica also holds a shard Lease of its own.
    pub sharded: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: DEFAULT_NAME.into(),
            install_crds: false,
            lease: None,
            plugins_from_cluster: None,
            replica_report: None,
            webhooks: None,
        }
    }
}

const LEASE_GROUP: &str = "coordination.k8s.io";
const LEASE_VERBS: &[&str] = &["get", "update"];
/// The report Lease is written by server-side apply (each replica's annotation its own).
const REPORT_LEASE_VERBS: &[&str] = &["get", "patch"];
/// With sharding: the shard Leases are named after each replica, so no rule can name them;
/// the leader lists and watches them, takes over a dead shard's and deletes it later.
const SHARD_LEASE_VERBS: &[&str] = &["get", "list", "watch", "create", "update", "delete"];

/// A rule on leases: those named, or all of the namespace.
fn lease_rule(names: Option<Vec<String>>, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![LEASE_GROUP.into()]),
        resources: Some(vec!["leases".into()]),
        resource_names: names,
        verbs: verbs.iter().map(ToString::to_string).collect(),
        ..PolicyRule::default()
    }
}

fn labels() -> Option<BTreeMap<String, String>> {
    Some(BTreeMap::from([(
        "app.kubernetes.io/name".to_string(),
        "operator-host".to_string(),
    )]))
}

/// The Role `run --leader-elect` needs for its Lease (named `<name>-leader-election`), or
/// `None` without leader election.
pub fn leader_election_role(options: &Options) -> Option<Role> {
    let lease = options.lease.as_ref()?;
    Some(Role {
        metadata: ObjectMeta {
            name: Some(format!("{}-leader-election", options.name)),
            namespace: Some(lease.namespace.clone()),
            labels: labels(),
            ..ObjectMeta::default()
        },
        rules: Some(if lease.sharded {
            vec![lease_rule(None, SHARD_LEASE_VERBS)]
        } else {
            vec![
                lease_rule(Some(vec![lease.name.clone()]), LEASE_VERBS),
                lease_rule(None, &["create"]),
            ]
        }),
    })
}

/// The Role `run` needs to report what each replica serves (named `<name>-replica-report`, in
/// the host's namespace), or `None` if the options name no report Lease.
pub fn replica_report_role(options: &Options) -> Option<Role> {
    let lease = options.replica_report.as_ref()?;
    Some(Role {
        metadata: ObjectMeta {
            name: Some(format!("{}-replica-report", options.name)),
            namespace: Some(lease.namespace.clone()),
            labels: labels(),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            lease_rule(Some(vec![lease.name.clone()]), REPORT_LEASE_VERBS),
            lease_rule(None, &["create"]),
        ]),
    })
}

/// The Role `run --plugins-from-cluster` needs for pull Secrets (named `<name>-pull-secrets`,
/// in the host's namespace), or `None` without it.
pub fn pull_secret_role(options: &Options) -> Option<Role> {
    let namespace = &options.plugins_from_cluster.as_ref()?.namespace;
    Some(Role {
        metadata: ObjectMeta {
            name: Some(format!("{}-pull-secrets", options.name)),
            namespace: Some(namespace.clone()),
            labels: labels(),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
    })
}

/// The Role `run --webhook-addr` needs for its CA Secret (named `<name>-webhook-ca`, in the
/// host's namespace): `get` and `update` on that Secret (a replica replaces the CA before it
/// expires), `create` in the namespace (the first replica makes it), or `None` without
/// webhooks.
pub fn webhook_ca_role(options: &Options) -> Option<Role> {
    let ca = options.webhooks.as_ref()?;
    let secrets = |names: Option<Vec<String>>, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".into()]),
        resource_names: names,
        verbs: verbs.iter().map(ToString::to_string).collect(),
        ..PolicyRule::default()
    };
    Some(Role {
        metadata: ObjectMeta {
            name: Some(format!("{}-webhook-ca", options.name)),
            namespace: Some(ca.namespace.clone()),
            labels: labels(),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            secrets(Some(vec![ca.secret.clone()]), &["get", "update"]),
            secrets(None, &["create"]),
        ]),
    })
}

/// The ClusterRole `operator-host run` needs to serve `plugins` under `policy`.
pub fn cluster_role(plugins: &[Declaration], policy: &Policy, options: &Options) -> ClusterRole {
    // group -> resource -> verbs
    let mut grants: BTreeMap<String, BTreeMap<String, BTreeSet<&'static str>>> = BTreeMap::new();
    let mut grant = |group: &str, resource: String, verbs: &[&'static str]| {
        grants
            .entry(group.to_string())
            .or_default()
            .entry(resource)
            .or_default()
            .extend(verbs.iter().copied());
    };
    for decl in plugins {
        let parent = &decl.parent;
        grant(&parent.group, parent.plural.clone(), PARENT_VERBS);
        grant(
            &parent.group,
            format!("{}/finalizers", parent.plural),
            FINALIZER_VERBS,
        );
        grant(
            &parent.group,
            format!("{}/status", parent.plural),
            STATUS_VERBS,
        );
        for child in policy.allowed_children(decl) {
            grant(&child.group, child.plural.clone(), CHILD_VERBS);
        }
        // A plugin whose related kinds the policy does not allow is refused at load, so
        // what it declares is what it reads.
        for related in &decl.related {
            grant(
                &related.kind.group,
                related.kind.plural.clone(),
                RELATED_VERBS,
            );
        }
    }
    grant("", "events".into(), EVENT_VERBS);
    grant("events.k8s.io", "events".into(), EVENT_VERBS);
    let operator_plugins = options.plugins_from_cluster.as_ref();
    if let Some(ClusterPlugins { group, plural, .. }) = operator_plugins {
        grant(group, plural.clone(), OPERATOR_PLUGIN_VERBS);
        grant(group, format!("{plural}/status"), STATUS_VERBS);
    }
    // Rules that name objects (`resourceNames`) are not merged with others; per group.
    let mut named_rules: BTreeMap<String, Vec<PolicyRule>> = BTreeMap::new();
    if options.install_crds && options.webhooks.is_some() {
        for resource in [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ] {
            grant(
                ADMISSION_GROUP,
                resource.into(),
                WEBHOOK_CONFIGURATION_VERBS,
            );
        }
    }
    if options.install_crds {
        // `create` stays unrestricted: RBAC cannot restrict create by resourceName, "because
        // the name of the new object may not be known at authorization time"
        // (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources).
        // list and watch stay unrestricted too: restricted by name, they would need a
        // metadata.name field selector on every request (same page).
        grant(CRD_GROUP, CRD_RESOURCE.into(), CRD_VERBS);
        let names: BTreeSet<String> = plugins
            .iter()
            .map(|decl| {
                decl.crd
                    .metadata
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{}.{}", decl.parent.plural, decl.parent.group))
            })
            .chain(operator_plugins.map(|p| format!("{}.{}", p.plural, p.group)))
            .collect();
        // No names would mean no restriction at all (an empty resourceNames matches every
        // object): then no rule.
        if !names.is_empty() {
            named_rules
                .entry(CRD_GROUP.into())
                .or_default()
                .push(PolicyRule {
                    api_groups: Some(vec![CRD_GROUP.into()]),
                    // The status: the host leaves only the storage version in storedVersions
                    // once it has migrated the stored objects.
                    resources: Some(vec![CRD_RESOURCE.into(), format!("{CRD_RESOURCE}/status")]),
                    resource_names: Some(names.into_iter().collect()),
                    verbs: OWN_CRD_VERBS.iter().map(ToString::to_string).collect(),
                    ..PolicyRule::default()
                });
        }
    }

    let mut rules = Vec::new();
    for (group, resources) in grants {
        // verbs (in VERB_ORDER) -> resources, so resources with the same verbs share a rule.
        let mut by_verbs: BTreeMap<Vec<usize>, Vec<String>> = BTreeMap::new();
        for (resource, verbs) in resources {
            let key = VERB_ORDER
                .iter()
                .enumerate()
                .filter(|(_, v)| verbs.contains(*v))
                .map(|(i, _)| i)
                .collect();
            by_verbs.entry(key).or_default().push(resource);
        }
        let mut group_rules: Vec<PolicyRule> = by_verbs
            .into_iter()
            .map(|(verbs, resources)| PolicyRule {
                api_groups: Some(vec![group.clone()]),
                resources: Some(resources),
                verbs: verbs
                    .into_iter()
                    .map(|i| VERB_ORDER[i].to_string())
                    .collect(),
                ..PolicyRule::default()
            })
            .collect();
        group_rules.sort_by(|a, b| a.resources.cmp(&b.resources));
        rules.extend(group_rules);
        rules.extend(named_rules.remove(&group).unwrap_or_default());
    }
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            labels: labels(),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

/// The ClusterRole and the namespaced Roles `options` call for ([`leader_election_role`],
/// [`replica_report_role`], [`pull_secret_role`]) as YAML documents, with a comment naming
/// the plugins they serve.
pub fn to_yaml(
    role: &ClusterRole,
    options: &Options,
    plugins: &[Declaration],
) -> Result<String, serde_yaml::Error> {
    let mut out = String::from("# The ClusterRole operator-host needs to serve:\n");
    for decl in plugins {
        out.push_str(&format!(
            "#   {}@{} (sha256:{}), parent {}\n",
            decl.name,
            decl.version,
            &decl.content_hash[..decl.content_hash.len().min(12)],
            decl.parent
        ));
    }
    out.push_str("# Bind it to the host's ServiceAccount with a ClusterRoleBinding.\n");
    out.push_str(&serde_yaml::to_string(role)?);
    match leader_election_role(options) {
        Some(lease_role) => {
            out.push_str(
                "---\n# The Lease of `run --leader-elect`; bind it to the same ServiceAccount \
                 with a RoleBinding.\n",
            );
            out.push_str(&serde_yaml::to_string(&lease_role)?);
        }
        None => out.push_str("# No election Lease: without --leader-elect the host takes none.\n"),
    }
    if let Some(report_role) = replica_report_role(options) {
        out.push_str(
            "---\n# The Lease each replica says what it serves in (`kubectl operator-host`); bind \
             it to the same ServiceAccount with a RoleBinding.\n",
        );
        out.push_str(&serde_yaml::to_string(&report_role)?);
    }
    if let Some(ca_role) = webhook_ca_role(options) {
        out.push_str(
            "---\n# The Secret of the webhooks' CA (`run --webhook-addr`); bind it to the same \
             ServiceAccount with a RoleBinding.\n",
        );
        out.push_str(&serde_yaml::to_string(&ca_role)?);
    }
    if let Some(pull_secret_role) = pull_secret_role(options) {
        out.push_str(
            "---\n# The pull Secrets of `run --plugins-from-cluster`; bind it to the same \
             ServiceAccount with a RoleBinding.\n",
        );
        out.push_str(&serde_yaml::to_string(&pull_secret_role)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;

    fn kind(group: &str, kind: &str, plural: &str) -> Kind {
        Kind {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
        }
    }

    fn declaration(name: &str, parent: Kind, children: Vec<Kind>) -> Declaration {
        Declaration {
            name: name.into(),
            version: "0.1.0".into(),
            content_hash: "0123456789abcdef".into(),
            parent,
            children,
            needs_finalize: false,
            crd: Default::default(),
            related: Vec::new(),
            implements: Default::default(),
        }
    }

    fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            api_groups: Some(vec![group.into()]),
            resources: Some(resources.iter().map(ToString::to_string).collect()),
            verbs: verbs.iter().map(ToString::to_string).collect(),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn without_install_crds_there_is_no_crd_rule() {
        let plugins = [declaration("a", kind("a.example.com", "A", "as"), vec![])];
        let role = cluster_role(&plugins, &Policy::default(), &Options::default());
        let rules = role.rules.unwrap();
        assert!(
            rules
                .iter()
                .all(|r| r.api_groups.as_deref() != Some(&[CRD_GROUP.to_string()][..])),
            "{rules:?}"
        );
    }

    #[test]
    fn with_install_crds_but_no_plugin_nothing_may_patch_a_crd() {
        let role = cluster_role(
            &[],
            &Policy::default(),
            &Options {
                name: "x".into(),
                install_crds: true,
                ..Options::default()
            },
        );
        let rules = role.rules.unwrap();
        assert!(
            rules
                .iter()
                .all(|r| !r.verbs.iter().any(|v| v == "patch" || v == "update")
                    || r.resources.as_deref() != Some(&[CRD_RESOURCE.to_string()][..])),
            "{rules:?}"
        );
    }

    #[test]
    fn rules_are_merged_per_group_in_a_stable_order() {
        let plugins = [
            declaration(
                "b",
                kind("b.example.com", "B", "bs"),
                vec![
                    kind("", "Service", "services"),
                    kind("", "Secret", "secrets"),
                ],
            ),
            declaration(
                "a",
                kind("a.example.com", "A", "as"),
                vec![
                    kind("apps", "Deployment", "deployments"),
                    kind("", "Service", "services"),
                ],
            ),
        ];
        let role = cluster_role(
            &plugins,
            &Policy::default(),
            &Options {
                name: "x".into(),
                install_crds: true,
                ..Options::default()
            },
        );
        assert_eq!(role.metadata.name.as_deref(), Some("x"));
        let all = CHILD_VERBS;
        assert_eq!(
            role.rules.unwrap(),
            [
                rule("", &["events"], EVENT_VERBS),
                rule("", &["services"], all),
                rule("a.example.com", &["as"], PARENT_VERBS),
                rule("a.example.com", &["as/finalizers"], FINALIZER_VERBS),
                rule("a.example.com", &["as/status"], STATUS_VERBS),
                rule(
                    "apiextensions.k8s.io",
                    &["customresourcedefinitions"],
                    CRD_VERBS
                ),
                PolicyRule {
                    resource_names: Some(vec![
                        "as.a.example.com".into(),
                        "bs.b.example.com".into()
                    ]),
                    ..rule(
                        "apiextensions.k8s.io",
                        &[
                            "customresourcedefinitions",
                            "customresourcedefinitions/status"
                        ],
                        OWN_CRD_VERBS
                    )
                },
                rule("apps", &["deployments"], all),
                rule("b.example.com", &["bs"], PARENT_VERBS),
                rule("b.example.com", &["bs/finalizers"], FINALIZER_VERBS),
                rule("b.example.com", &["bs/status"], STATUS_VERBS),
                rule("events.k8s.io", &["events"], EVENT_VERBS),
            ]
        );
    }

    #[test]
    fn webhooks_get_their_ca_secret_and_with_install_crds_the_configurations() {
        assert!(webhook_ca_role(&Options::default()).is_none());
        let options = Options {
            webhooks: Some(WebhookCa {
                namespace: "ops".into(),
                secret: "operator-host-webhook-ca".into(),
            }),
            ..Options::default()
        };
        let role = webhook_ca_role(&options).unwrap();
        assert_eq!(role.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(
            role.rules.unwrap(),
            [
                PolicyRule {
                    resource_names: Some(vec!["operator-host-webhook-ca".into()]),
                    ..rule("", &["secrets"], &["get", "update"])
                },
                rule("", &["secrets"], &["create"]),
            ]
        );
        let has_configurations = |options: &Options| {
            cluster_role(&[], &Policy::default(), options)
                .rules
                .unwrap()
                .iter()
                .any(|r| r.api_groups == Some(vec![ADMISSION_GROUP.to_string()]))
        };
        assert!(
            !has_configurations(&options),
            "only a host that installs CRDs registers"
        );
        let installing = Options {
            install_crds: true,
            ..options
        };
        let role = cluster_role(&[], &Policy::default(), &installing);
        let rule_of = role
            .rules
            .unwrap()
            .into_iter()
            .find(|r| r.api_groups == Some(vec![ADMISSION_GROUP.to_string()]))
            .unwrap();
        assert_eq!(
            rule_of,
            rule(
                ADMISSION_GROUP,
                &[
                    "mutatingwebhookconfigurations",
                    "validatingwebhookconfigurations"
                ],
                &["get", "list", "create", "patch", "delete"]
            )
        );
    }

    #[test]
    fn the_replica_report_role_names_the_report_lease_and_nothing_else() {
        assert!(replica_report_role(&Options::default()).is_none());
        let options = Options {
            replica_report: Some(ReportLease {
                namespace: "ops".into(),
                name: "my-lease-replicas".into(),
            }),
            ..Options::default()
        };
        let role = replica_report_role(&options).unwrap();
        assert_eq!(role.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(
            role.rules.unwrap(),
            [
                PolicyRule {
                    resource_names: Some(vec!["my-lease-replicas".into()]),
                    ..rule(LEASE_GROUP, &["leases"], &["get", "patch"])
                },
                rule(LEASE_GROUP, &["leases"], &["create"]),
            ]
        );
        let yaml = to_yaml(
            &cluster_role(&[], &Policy::default(), &options),
            &options,
            &[],
        );
        assert!(yaml.unwrap().contains("name: operator-host-replica-report"));
    }

    #[test]
    fn only_leader_election_gets_a_lease_role_and_it_names_its_lease() {
        assert!(leader_election_role(&Options::default()).is_none());
        let options = Options {
            lease: Some(LeaseName {
                namespace: "ops".into(),
                name: "my-lease".into(),
                sharded: false,
            }),
            ..Options::default()
        };
        let role = leader_election_role(&options).unwrap();
        assert_eq!(role.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(
            role.rules.unwrap(),
            [
                PolicyRule {
                    resource_names: Some(vec!["my-lease".into()]),
                    ..rule(LEASE_GROUP, &["leases"], LEASE_VERBS)
                },
                rule(LEASE_GROUP, &["leases"], &["create"]),
            ]
        );
        let mut sharded = options.clone();
        sharded.lease.as_mut().unwrap().sharded = true;
        assert_eq!(
            leader_election_role(&sharded).unwrap().rules.unwrap(),
            [rule(LEASE_GROUP, &["leases"], SHARD_LEASE_VERBS)],
            "shard Leases are named after replicas: no resourceNames"
        );
        let cluster_role = cluster_role(&[], &Policy::default(), &options);
        assert!(
            cluster_role
                .rules
                .unwrap()
                .iter()
                .all(|r| r.api_groups.as_deref() != Some(&[LEASE_GROUP.to_string()][..]))
        );
    }

    #[test]
    fn plugins_from_cluster_read_operator_plugins_and_the_pull_secrets_of_one_namespace() {
        assert!(pull_secret_role(&Options::default()).is_none());
        let options = Options {
            install_crds: true,
            plugins_from_cluster: Some(ClusterPlugins {
                namespace: "ops".into(),
                group: "operator-host.dev".into(),
                plural: "operatorplugins".into(),
            }),
            ..Options::default()
        };
        let role = pull_secret_role(&options).unwrap();
        assert_eq!(role.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(role.rules.unwrap(), [rule("", &["secrets"], &["get"])]);
        let rules = cluster_role(&[], &Policy::default(), &options)
            .rules
            .unwrap();
        assert!(rules.contains(&rule(
            "operator-host.dev",
            &["operatorplugins"],
            OPERATOR_PLUGIN_VERBS
        )));
        assert!(rules.contains(&rule(
            "operator-host.dev",
            &["operatorplugins/status"],
            STATUS_VERBS
        )));
        // Its CRD is the one the host may patch; no Secret anywhere in the ClusterRole.
        assert!(rules.contains(&PolicyRule {
            resource_names: Some(vec!["operatorplugins.operator-host.dev".into()]),
            ..rule(
                CRD_GROUP,
                &[CRD_RESOURCE, "customresourcedefinitions/status"],
                OWN_CRD_VERBS
            )
        }));
        assert!(
            rules
                .iter()
                .all(|r| !r.resources.iter().flatten().any(|x| x == "secrets"))
        );
    }
}
