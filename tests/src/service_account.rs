//! A ServiceAccount bound to given roles, and a client and a kubeconfig that authenticate with
//! its token only: for tests that prove the host works under exactly a role (`rbac.rs`,
//! `manifests.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;

use crate::devcluster::{self, TestNamespace, wait_for};

/// The ServiceAccount's name (in the test's namespace).
pub const SERVICE_ACCOUNT: &str = "operator-host";

const TIMEOUT: Duration = Duration::from_secs(60);

/// The ServiceAccount [`bind`] made: a client and a kubeconfig file with its token only.
pub struct BoundAccount {
    pub client: Client,
    /// A kubeconfig for the devcluster with the account's token (for a host as a process).
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

/// A kubeconfig for the devcluster that authenticates with `token` only.
pub fn token_kubeconfig(token: &str, path: &Path) {
    let admin = Kubeconfig::read_from(&devcluster::cluster().kubeconfig).unwrap();
    let mut kubeconfig = serde_json::to_value(&admin).unwrap();
    for user in kubeconfig["users"].as_array_mut().unwrap() {
        user["user"] = json!({"token": token});
    }
    std::fs::write(path, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();
}

/// A client as `operator-host run --kubeconfig PATH` makes it.
pub async fn client_from(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Creates `cluster_role` (and `role`, in `ns` whatever namespace it names), the
/// ServiceAccount [`SERVICE_ACCOUNT`] of `ns`, a ClusterRoleBinding named after the
/// ClusterRole (and a RoleBinding named after the Role), and returns the account's
/// credentials once the authorizer grants the first rule of each role. Delete the ClusterRole
/// and its binding at the end: they are cluster-scoped (the Role goes with the namespace).
pub async fn bind(ns: &TestNamespace, cluster_role: &ClusterRole, roles: &[Role]) -> BoundAccount {
    let admin = ns.client();
    let role_name = cluster_role.metadata.name.clone().unwrap();
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    cluster_roles
        .create(&PostParams::default(), cluster_role)
        .await
        .unwrap();
    let service_accounts: Api<ServiceAccount> = ns.api();
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": SERVICE_ACCOUNT}})).unwrap();
    service_accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let subjects =
        json!([{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns.name()}]);
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": role_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": subjects,
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    for role in roles {
        let mut role = role.clone();
        role.metadata.namespace = Some(ns.name().to_string());
        let name = role.metadata.name.clone().unwrap();
        ns.api::<Role>()
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects,
        }))
        .unwrap();
        ns.api::<RoleBinding>()
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }

    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = service_accounts
        .create_token_request(SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .expect("the TokenRequest has a status")
        .token;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    token_kubeconfig(&token, &kubeconfig);
    let client = client_from(&kubeconfig).await;

    // The authorizer sees a new binding after a moment.
    let first_rules = cluster_role
        .rules
        .iter()
        .flatten()
        .take(1)
        .chain(roles.iter().flat_map(|r| r.rules.iter().flatten().take(1)));
    for rule in first_rules {
        wait_for_grant(&client, rule, ns.name()).await;
    }
    BoundAccount {
        client,
        kubeconfig,
        _dir: dir,
    }
}

/// Waits until `client` may do the first verb of `rule` in `namespace` (asked with a
/// SelfSubjectAccessReview, which every authenticated user may create).
async fn wait_for_grant(client: &Client, rule: &PolicyRule, namespace: &str) {
    let first = |list: &Option<Vec<String>>| list.as_ref().and_then(|l| l.first().cloned());
    // `memcacheds/status`: the resource and its subresource.
    let resource = first(&rule.resources).unwrap_or_default();
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource.to_string(), Some(sub.to_string())),
        None => (resource, None),
    };
    let attributes = ResourceAttributes {
        group: first(&rule.api_groups),
        resource: Some(resource),
        subresource,
        name: first(&rule.resource_names),
        verb: rule.verbs.first().cloned(),
        namespace: Some(namespace.to_string()),
        ..ResourceAttributes::default()
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(attributes.clone()),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    wait_for(
        &format!("the binding to grant {attributes:?}"),
        TIMEOUT,
        || async {
            let answer = reviews.create(&PostParams::default(), &review).await?;
            Ok(answer.status.is_some_and(|s| s.allowed).then_some(()))
        },
    )
    .await
    .unwrap();
}

/// Deletes the ClusterRole `name` and its binding (named after it), as [`bind`] made them.
pub async fn delete_cluster_role(admin: &Client, name: &str) {
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    bindings
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles.delete(name, &DeleteParams::default()).await.unwrap();
}
