//! The API server's side of the webhooks: a Validating- and a MutatingWebhookConfiguration per
//! plugin that validates or defaults, and the conversion webhook of a CRD with several
//! versions, all kept in step with the plugins served.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
    ServiceReference as ApiextensionsServiceReference,
    WebhookClientConfig as ApiextensionsClientConfig, WebhookConversion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::{Endpoint, Error, FailurePolicy};
use crate::declaration::Declaration;

/// The label saying which host deployment (its election Lease's name) made a configuration.
pub const OWNER_LABEL: &str = "operator-host.dev/webhooks-of";
/// The label with the namespace of that Lease: two deployments with the same Lease name in
/// different namespaces (each serving its own namespaces) keep apart their configurations,
/// which are cluster-scoped.
pub const OWNER_NAMESPACE_LABEL: &str = "operator-host.dev/webhooks-of-namespace";
/// The field manager of everything written here.
const FIELD_MANAGER: &str = "operator-host-webhooks";
/// How long the API server waits for an answer.
const TIMEOUT_SECONDS: i32 = 10;

/// Where the webhooks are, and what the API server sends them.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    /// The host deployment: its configurations are named and labelled after it.
    pub owner: &'a Owner,
    pub endpoint: &'a Endpoint,
    /// The CA (PEM) the API server checks the serving certificates with.
    pub ca_bundle: &'a str,
    pub failure_policy: FailurePolicy,
    /// The namespaces the host serves (empty: all): only their objects are sent.
    pub namespaces: &'a [String],
}

/// The host deployment that registers webhooks: its election Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub namespace: String,
    pub lease: String,
}

impl Owner {
    /// The name of `plugin`'s configurations: cluster-scoped, so the Lease's namespace is in it.
    fn configuration_name(&self, plugin: &str) -> String {
        format!("{}.{}.{plugin}", self.lease, self.namespace)
    }

    /// The label selector of every configuration this deployment made.
    pub fn selector(&self) -> String {
        format!(
            "{OWNER_LABEL}={},{OWNER_NAMESPACE_LABEL}={}",
            self.lease, self.namespace
        )
    }

    /// The label selector of the configurations hosts made before they named the Lease's
    /// namespace (`<lease>.<plugin>`): this deployment's, or another's with the same Lease name
    /// in another namespace, told apart by where they call.
    fn legacy_selector(&self) -> String {
        format!("{OWNER_LABEL}={},!{OWNER_NAMESPACE_LABEL}", self.lease)
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.lease)
    }
}

/// A webhook configuration's calls, to tell whose webhooks it calls.
trait ClientConfigs {
    fn client_configs(&self) -> Vec<&WebhookClientConfig>;
}

impl ClientConfigs for ValidatingWebhookConfiguration {
    fn client_configs(&self) -> Vec<&WebhookClientConfig> {
        self.webhooks
            .iter()
            .flatten()
            .map(|w| &w.client_config)
            .collect()
    }
}

impl ClientConfigs for MutatingWebhookConfiguration {
    fn client_configs(&self) -> Vec<&WebhookClientConfig> {
        self.webhooks
            .iter()
            .flatten()
            .map(|w| &w.client_config)
            .collect()
    }
}

/// Whether `config` calls the webhooks at `endpoint`: the same Service, or a URL with the same
/// host (a local host listens on a new port each start).
fn calls(config: &WebhookClientConfig, endpoint: &Endpoint) -> bool {
    let host = |url: &str| {
        url.parse::<http::Uri>()
            .ok()
            .and_then(|uri| uri.host().map(str::to_string))
    };
    match (endpoint, &config.service, &config.url) {
        (
            Endpoint::Service {
                namespace, name, ..
            },
            Some(service),
            _,
        ) => service.namespace == *namespace && service.name == *name,
        (Endpoint::Url(base), None, Some(url)) => host(url).is_some() && host(url) == host(base),
        _ => false,
    }
}

impl Registration<'_> {
    fn client_config(&self, path: &str) -> WebhookClientConfig {
        client_config(self.endpoint, self.ca_bundle, path)
    }

    fn metadata(&self, plugin: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.owner.configuration_name(plugin)),
            labels: Some(BTreeMap::from([
                (OWNER_LABEL.to_string(), self.owner.lease.clone()),
                (
                    OWNER_NAMESPACE_LABEL.to_string(),
                    self.owner.namespace.clone(),
                ),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "operator-host".to_string(),
                ),
            ])),
            ..Default::default()
        }
    }

    fn namespace_selector(&self) -> Option<LabelSelector> {
        (!self.namespaces.is_empty()).then(|| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".to_string(),
                operator: "In".to_string(),
                values: Some(self.namespaces.to_vec()),
            }]),
            match_labels: None,
        })
    }

    fn failure_policy(&self) -> Option<String> {
        Some(
            match self.failure_policy {
                FailurePolicy::Fail => "Fail",
                FailurePolicy::Ignore => "Ignore",
            }
            .to_string(),
        )
    }

    /// The ValidatingWebhookConfiguration of `decl`, if it validates.
    pub fn validating(&self, decl: &Declaration) -> Option<ValidatingWebhookConfiguration> {
        let implements = decl.implements;
        if !implements.validate && !implements.validate_delete {
            return None;
        }
        let mut operations = Vec::new();
        if implements.validate {
            operations.extend(["CREATE", "UPDATE"]);
        }
        if implements.validate_delete {
            operations.push("DELETE");
        }
        Some(ValidatingWebhookConfiguration {
            metadata: self.metadata(&decl.name),
            webhooks: Some(vec![ValidatingWebhook {
                name: format!("validate.{}.operator-host.dev", decl.name),
                client_config: self.client_config(&format!("/validate/{}", decl.name)),
                rules: Some(vec![rule(decl, &operations)]),
                failure_policy: self.failure_policy(),
                match_policy: Some("Equivalent".to_string()),
                namespace_selector: self.namespace_selector(),
                side_effects: "None".to_string(),
                timeout_seconds: Some(TIMEOUT_SECONDS),
                admission_review_versions: vec!["v1".to_string()],
                match_conditions: Some(spec_changed()),
                object_selector: None,
            }]),
        })
    }

    /// The MutatingWebhookConfiguration of `decl`, if it defaults.
    pub fn mutating(&self, decl: &Declaration) -> Option<MutatingWebhookConfiguration> {
        if !decl.implements.default {
            return None;
        }
        Some(MutatingWebhookConfiguration {
            metadata: self.metadata(&decl.name),
            webhooks: Some(vec![MutatingWebhook {
                name: format!("default.{}.operator-host.dev", decl.name),
                client_config: self.client_config(&format!("/default/{}", decl.name)),
                rules: Some(vec![rule(decl, &["CREATE", "UPDATE"])]),
                failure_policy: self.failure_policy(),
                match_policy: Some("Equivalent".to_string()),
                namespace_selector: self.namespace_selector(),
                side_effects: "None".to_string(),
                timeout_seconds: Some(TIMEOUT_SECONDS),
                admission_review_versions: vec!["v1".to_string()],
                match_conditions: Some(spec_changed()),
                object_selector: None,
                reinvocation_policy: Some("Never".to_string()),
            }]),
        })
    }

    /// The CRD's `spec.conversion` for `decl`, if it converts between several versions.
    pub fn conversion(&self, decl: &Declaration) -> Option<CustomResourceConversion> {
        crd_conversion(self.endpoint, self.ca_bundle, decl)
    }
}

/// The CRD's `spec.conversion` of `decl` with the webhooks at `endpoint` (their CA
/// `ca_bundle`), if it converts between several versions: also what the CRD is installed with.
pub fn crd_conversion(
    endpoint: &Endpoint,
    ca_bundle: &str,
    decl: &Declaration,
) -> Option<CustomResourceConversion> {
    if !decl.implements.convert || decl.served_versions().len() < 2 {
        return None;
    }
    let client_config = client_config(endpoint, ca_bundle, &format!("/convert/{}", decl.name));
    Some(CustomResourceConversion {
        strategy: "Webhook".to_string(),
        webhook: Some(WebhookConversion {
            client_config: Some(ApiextensionsClientConfig {
                url: client_config.url,
                service: client_config
                    .service
                    .map(|service| ApiextensionsServiceReference {
                        namespace: service.namespace,
                        name: service.name,
                        path: service.path,
                        port: service.port,
                    }),
                ca_bundle: client_config.ca_bundle,
            }),
            conversion_review_versions: vec!["v1".to_string()],
        }),
    })
}

/// How the API server calls the webhook at `path` of `endpoint`, trusting `ca_bundle`.
fn client_config(endpoint: &Endpoint, ca_bundle: &str, path: &str) -> WebhookClientConfig {
    let ca_bundle = Some(ByteString(ca_bundle.as_bytes().to_vec()));
    match endpoint {
        Endpoint::Url(base) => WebhookClientConfig {
            url: Some(format!("{}{path}", base.trim_end_matches('/'))),
            service: None,
            ca_bundle,
        },
        Endpoint::Service {
            namespace,
            name,
            port,
        } => WebhookClientConfig {
            url: None,
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(path.to_string()),
                port: Some(i32::from(*port)),
            }),
            ca_bundle,
        },
    }
}

/// The requests of `decl`'s parent kind with these operations, in the version it reconciles:
/// with `matchPolicy: Equivalent` the API server converts a request of any other version to it
/// (through the plugin's `convert`) before the plugin sees it, so `validate` and `default`
/// decode one version, as `reconcile` does.
fn rule(decl: &Declaration, operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![decl.parent.group.clone()]),
        api_versions: Some(vec![decl.parent.version.clone()]),
        resources: Some(vec![decl.parent.plural.clone()]),
        operations: Some(operations.iter().map(ToString::to_string).collect()),
        scope: Some(
            if decl.parent.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .to_string(),
        ),
    }
}

/// Updates that leave the spec alone (labels, finalizers, the host's own writes) are not
/// sent: neither they nor the deletion of an object stored before the plugin validated wait
/// on the plugin, or on a host that is not there. The webhook checks the same.
fn spec_changed() -> Vec<MatchCondition> {
    vec![MatchCondition {
        name: "spec-changed".to_string(),
        expression: "request.operation != 'UPDATE' || !has(object.spec) || \
                     !has(oldObject.spec) || object.spec != oldObject.spec"
            .to_string(),
    }]
}

/// Makes the cluster's webhook configurations of `registration.owner` those of `served`:
/// each applied, those of plugins no longer served (or no longer validating or defaulting)
/// deleted, and the conversion webhook of each converting plugin's CRD set.
pub async fn sync(
    client: &Client,
    registration: &Registration<'_>,
    served: &[Declaration],
) -> Result<(), Error> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut wanted_validating = HashSet::new();
    let mut wanted_mutating = HashSet::new();
    for decl in served {
        if let Some(configuration) = registration.validating(decl) {
            wanted_validating.insert(apply(&validating, &configuration).await?);
        }
        if let Some(configuration) = registration.mutating(decl) {
            wanted_mutating.insert(apply(&mutating, &configuration).await?);
        }
        if let Some(conversion) = registration.conversion(decl) {
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            let name = decl.crd.name_any();
            let patch = json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": {"conversion": conversion},
            });
            crds.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|source| Error::Register {
                what: format!("the conversion webhook of CustomResourceDefinition {name}"),
                source,
            })?;
        }
    }
    delete_stale(&validating, registration, &wanted_validating).await?;
    delete_stale(&mutating, registration, &wanted_mutating).await?;
    Ok(())
}

/// Server-side applies `configuration`; returns its name.
async fn apply<K>(api: &Api<K>, configuration: &K) -> Result<String, Error>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let name = configuration.name_any();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(configuration),
    )
    .await
    .map_err(|source| Error::Register {
        what: format!("{} {name}", K::kind(&())),
        source,
    })?;
    Ok(name)
}

/// Deletes the configurations of `registration.owner` not in `wanted` (of plugins no longer
/// served, or no longer validating or defaulting), and those an older host of this deployment
/// made under the names before (which would otherwise call the webhooks twice, and forever).
async fn delete_stale<K>(
    api: &Api<K>,
    registration: &Registration<'_>,
    wanted: &HashSet<String>,
) -> Result<(), Error>
where
    K: kube::Resource<DynamicType = ()>
        + ClientConfigs
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let owner = registration.owner;
    let listing_error = |source| Error::Register {
        what: format!("the {}s of {owner}", K::kind(&())),
        source,
    };
    let mine = api
        .list_metadata(&ListParams::default().labels(&owner.selector()))
        .await
        .map_err(listing_error)?;
    // Whole objects, to see where they call; there are none once every host is new.
    let legacy = api
        .list(&ListParams::default().labels(&owner.legacy_selector()))
        .await
        .map_err(listing_error)?;
    let unserved = mine
        .items
        .iter()
        .map(ResourceExt::name_any)
        .filter(|name| !wanted.contains(name))
        .map(|name| (name, "removed the webhooks of a plugin no longer served"));
    let older = legacy
        .items
        .iter()
        .filter(|configuration| {
            configuration
                .client_configs()
                .iter()
                .any(|config| calls(config, registration.endpoint))
        })
        .map(|configuration| {
            let why = "removed the webhooks an older host of this deployment registered";
            (configuration.name_any(), why)
        });
    for (stale, why) in unserved.chain(older) {
        match api.delete(&stale, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(configuration = %stale, "{why}"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(Error::Register {
                    what: format!("the stale {} {stale}", K::kind(&())),
                    source,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Capabilities;

    fn decl(implements: Capabilities) -> Declaration {
        let mut decl = operator_host_core::test_support::memcached_declaration(Vec::new());
        decl.implements = implements;
        decl
    }

    #[test]
    fn a_plugin_gets_the_entries_of_what_it_implements_for_its_namespaces() {
        let endpoint = Endpoint::Url("https://127.0.0.1:9443/".into());
        let namespaces = vec!["team-a".to_string()];
        let owner = Owner {
            namespace: "system".into(),
            lease: "operator-host".into(),
        };
        let registration = Registration {
            owner: &owner,
            endpoint: &endpoint,
            ca_bundle: "PEM",
            failure_policy: FailurePolicy::Fail,
            namespaces: &namespaces,
        };
        assert!(
            registration
                .validating(&decl(Capabilities::default()))
                .is_none()
        );
        assert!(
            registration
                .mutating(&decl(Capabilities::default()))
                .is_none()
        );
        let validating = registration
            .validating(&decl(Capabilities {
                validate: true,
                validate_delete: true,
                ..Default::default()
            }))
            .unwrap();
        assert_eq!(validating.name_any(), "operator-host.system.memcached");
        assert_eq!(
            validating
                .labels()
                .get(OWNER_NAMESPACE_LABEL)
                .map(String::as_str),
            Some("system")
        );
        let webhook = &validating.webhooks.unwrap()[0];
        assert_eq!(webhook.name, "validate.memcached.operator-host.dev");
        assert_eq!(
            webhook.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate/memcached")
        );
        assert_eq!(
            webhook.rules.as_ref().unwrap()[0].operations,
            Some(vec!["CREATE".into(), "UPDATE".into(), "DELETE".into()])
        );
        assert_eq!(
            webhook
                .namespace_selector
                .as_ref()
                .unwrap()
                .match_expressions
                .as_ref()
                .unwrap()[0]
                .values,
            Some(namespaces.clone())
        );
        let service = Endpoint::Service {
            namespace: "system".into(),
            name: "operator-host-webhooks".into(),
            port: 443,
        };
        let registration = Registration {
            endpoint: &service,
            namespaces: &[],
            ..registration
        };
        let mutating = registration
            .mutating(&decl(Capabilities {
                default: true,
                ..Default::default()
            }))
            .unwrap();
        let webhook = &mutating.webhooks.unwrap()[0];
        assert_eq!(
            webhook
                .client_config
                .service
                .as_ref()
                .unwrap()
                .path
                .as_deref(),
            Some("/default/memcached")
        );
        assert!(webhook.namespace_selector.is_none());
    }

    #[test]
    fn a_configuration_of_an_older_host_is_told_by_where_it_calls() {
        let url = |url: &str| WebhookClientConfig {
            url: Some(url.into()),
            ..Default::default()
        };
        let service = |namespace: &str, name: &str| WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: namespace.into(),
                name: name.into(),
                path: Some("/validate/memcached".into()),
                port: Some(443),
            }),
            ..Default::default()
        };
        let local = Endpoint::Url("https://127.0.0.1:40123".into());
        assert!(calls(
            &url("https://127.0.0.1:39001/validate/memcached"),
            &local
        ));
        assert!(!calls(
            &url("https://10.0.0.9:40123/validate/memcached"),
            &local
        ));
        assert!(!calls(&service("system", "operator-host-webhooks"), &local));
        let in_cluster = Endpoint::Service {
            namespace: "system".into(),
            name: "operator-host-webhooks".into(),
            port: 443,
        };
        assert!(calls(
            &service("system", "operator-host-webhooks"),
            &in_cluster
        ));
        assert!(!calls(
            &service("team-b", "operator-host-webhooks"),
            &in_cluster
        ));
        assert!(!calls(
            &url("https://127.0.0.1:39001/validate/memcached"),
            &in_cluster
        ));
        let owner = Owner {
            namespace: "system".into(),
            lease: "operator-host".into(),
        };
        assert_eq!(
            owner.legacy_selector(),
            "operator-host.dev/webhooks-of=operator-host,!operator-host.dev/webhooks-of-namespace"
        );
    }
}
