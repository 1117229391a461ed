//! The host's one kind type ([`Kind`], and [`KindName`] for a kind a policy names), the kinds
//! of the Kubernetes release the host is built for (k8s-openapi's types), and the rule that a
//! plugin's declared kind must name one of them exactly as the API server serves it: a plural
//! or a scope of the plugin's own choosing would send the host's requests (and `operator-host
//! rbac`'s grants) to another resource than the one the policy judged.

use std::any::TypeId;
use std::sync::OnceLock;

use k8s_openapi::{NamespaceResourceScope, Resource};

use crate::contract::GroupVersionKind;
use crate::names::check_dns_subdomain;

/// A Kubernetes kind: its group, version and kind, with the plural and scope the API server
/// serves it under. The one kind type of the host, from the contract's `group-version-kind` to
/// the policy (and, serialized, the kinds a replica reports it serves).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Kind {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Kind {
    /// `apiVersion` as written in objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `object` (JSON) is of this kind.
    pub fn matches(&self, object: &serde_json::Value) -> bool {
        object["kind"].as_str() == Some(self.kind.as_str())
            && object["apiVersion"].as_str() == Some(self.api_version().as_str())
    }

    /// `object` as a plugin is shown it: JSON with this kind's `apiVersion` and `kind`, which
    /// the objects of a LIST or a watch cache lack. `None` if it cannot be serialized.
    pub fn to_json(&self, object: &kube::core::DynamicObject) -> Option<serde_json::Value> {
        let mut value = serde_json::to_value(object).ok()?;
        value["apiVersion"] = self.api_version().into();
        value["kind"] = self.kind.clone().into();
        Some(value)
    }

    /// Whether `other` is the same kind, whatever the version: the same objects, served under
    /// several API versions.
    pub fn same_kind(&self, other: &Kind) -> bool {
        self.group == other.group && self.kind == other.kind
    }

    /// The kube-rs dynamic API resource of this kind.
    pub fn api_resource(&self) -> kube::core::ApiResource {
        kube::core::ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

impl From<GroupVersionKind> for Kind {
    fn from(gvk: GroupVersionKind) -> Self {
        Kind {
            group: gvk.group,
            version: gvk.version,
            kind: gvk.kind,
            plural: gvk.plural,
            namespaced: gvk.namespaced,
        }
    }
}

/// A kind as a policy names it: `group/version/Kind`, or `version/Kind` in the core group;
/// without the plural and scope a [`Kind`] has, which a policy's text does not give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindName {
    group: String,
    version: String,
    kind: String,
}

impl KindName {
    pub(crate) fn parse(text: &str) -> Option<KindName> {
        let parts: Vec<&str> = text.split('/').collect();
        let (group, version, kind) = match parts.as_slice() {
            [version, kind] => ("", *version, *kind),
            [group, version, kind] => (*group, *version, *kind),
            _ => return None,
        };
        let group_ok = group.is_empty() || check_dns_subdomain(group).is_ok();
        let version_ok = version.starts_with('v')
            && version
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let kind_ok = kind.starts_with(|c: char| c.is_ascii_uppercase())
            && kind.bytes().all(|b| b.is_ascii_alphanumeric());
        (group_ok && version_ok && kind_ok).then(|| KindName {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        })
    }

    pub fn matches(&self, kind: &Kind) -> bool {
        self.group == kind.group && self.version == kind.version && self.kind == kind.kind
    }
}

impl std::fmt::Display for KindName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

fn builtin<T: Resource + 'static>() -> Kind {
    Kind {
        group: T::GROUP.into(),
        version: T::VERSION.into(),
        kind: T::KIND.into(),
        plural: T::URL_PATH_SEGMENT.into(),
        namespaced: TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>(),
    }
}

macro_rules! builtin_kinds {
    ($($type:ty,)*) => {
        vec![$(builtin::<$type>(),)*]
    };
}

/// Every kind of the release's API groups (subresources excluded).
pub fn builtin_kinds() -> &'static [Kind] {
    static KINDS: OnceLock<Vec<Kind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        builtin_kinds![
            k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
            k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy,
            k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
            k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicy,
            k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding,
            k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion,
            k8s_openapi::api::apps::v1::ControllerRevision,
            k8s_openapi::api::apps::v1::DaemonSet,
            k8s_openapi::api::apps::v1::Deployment,
            k8s_openapi::api::apps::v1::ReplicaSet,
            k8s_openapi::api::apps::v1::StatefulSet,
            k8s_openapi::api::authentication::v1::SelfSubjectReview,
            k8s_openapi::api::authentication::v1::TokenReview,
            k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
            k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
            k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
            k8s_openapi::api::authorization::v1::SubjectAccessReview,
            k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
            k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
            k8s_openapi::api::batch::v1::CronJob,
            k8s_openapi::api::batch::v1::Job,
            k8s_openapi::api::certificates::v1::CertificateSigningRequest,
            k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle,
            k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle,
            k8s_openapi::api::certificates::v1beta1::PodCertificateRequest,
            k8s_openapi::api::coordination::v1::Lease,
            k8s_openapi::api::coordination::v1alpha2::LeaseCandidate,
            k8s_openapi::api::coordination::v1beta1::LeaseCandidate,
            k8s_openapi::api::core::v1::Binding,
            k8s_openapi::api::core::v1::ComponentStatus,
            k8s_openapi::api::core::v1::ConfigMap,
            k8s_openapi::api::core::v1::Endpoints,
            k8s_openapi::api::core::v1::Event,
            k8s_openapi::api::core::v1::LimitRange,
            k8s_openapi::api::core::v1::Namespace,
            k8s_openapi::api::core::v1::Node,
            k8s_openapi::api::core::v1::PersistentVolume,
            k8s_openapi::api::core::v1::PersistentVolumeClaim,
            k8s_openapi::api::core::v1::Pod,
            k8s_openapi::api::core::v1::PodTemplate,
            k8s_openapi::api::core::v1::ReplicationController,
            k8s_openapi::api::core::v1::ResourceQuota,
            k8s_openapi::api::core::v1::Secret,
            k8s_openapi::api::core::v1::Service,
            k8s_openapi::api::core::v1::ServiceAccount,
            k8s_openapi::api::discovery::v1::EndpointSlice,
            k8s_openapi::api::events::v1::Event,
            k8s_openapi::api::flowcontrol::v1::FlowSchema,
            k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
            k8s_openapi::api::networking::v1::IPAddress,
            k8s_openapi::api::networking::v1::Ingress,
            k8s_openapi::api::networking::v1::IngressClass,
            k8s_openapi::api::networking::v1::NetworkPolicy,
            k8s_openapi::api::networking::v1::ServiceCIDR,
            k8s_openapi::api::networking::v1beta1::IPAddress,
            k8s_openapi::api::networking::v1beta1::ServiceCIDR,
            k8s_openapi::api::node::v1::RuntimeClass,
            k8s_openapi::api::policy::v1::PodDisruptionBudget,
            k8s_openapi::api::rbac::v1::ClusterRole,
            k8s_openapi::api::rbac::v1::ClusterRoleBinding,
            k8s_openapi::api::rbac::v1::Role,
            k8s_openapi::api::rbac::v1::RoleBinding,
            k8s_openapi::api::resource::v1::DeviceClass,
            k8s_openapi::api::resource::v1::ResourceClaim,
            k8s_openapi::api::resource::v1::ResourceClaimTemplate,
            k8s_openapi::api::resource::v1::ResourceSlice,
            k8s_openapi::api::resource::v1alpha3::DeviceTaintRule,
            k8s_openapi::api::resource::v1beta1::DeviceClass,
            k8s_openapi::api::resource::v1beta1::ResourceClaim,
            k8s_openapi::api::resource::v1beta1::ResourceClaimTemplate,
            k8s_openapi::api::resource::v1beta1::ResourceSlice,
            k8s_openapi::api::resource::v1beta2::DeviceClass,
            k8s_openapi::api::resource::v1beta2::ResourceClaim,
            k8s_openapi::api::resource::v1beta2::ResourceClaimTemplate,
            k8s_openapi::api::resource::v1beta2::ResourceSlice,
            k8s_openapi::api::scheduling::v1::PriorityClass,
            k8s_openapi::api::scheduling::v1alpha1::Workload,
            k8s_openapi::api::storage::v1::CSIDriver,
            k8s_openapi::api::storage::v1::CSINode,
            k8s_openapi::api::storage::v1::CSIStorageCapacity,
            k8s_openapi::api::storage::v1::StorageClass,
            k8s_openapi::api::storage::v1::VolumeAttachment,
            k8s_openapi::api::storage::v1::VolumeAttributesClass,
            k8s_openapi::api::storage::v1beta1::VolumeAttributesClass,
            k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration,
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        ]
    })
}

/// Whether `group` is one of the release's API groups.
pub fn is_builtin_group(group: &str) -> bool {
    builtin_kinds().iter().any(|k| k.group == group)
}

/// The release's kind `group/version/kind`, if it has one.
pub fn lookup(group: &str, version: &str, kind: &str) -> Option<&'static Kind> {
    builtin_kinds()
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
}

/// Checks a declared kind against the release: a kind of the release must come with its
/// plural and scope, and a kind the release does not have (which the API server then does not
/// serve either) may not take the plural of one it has in the same group. Kinds of other groups
/// (custom resources) are checked against the API server's discovery where the host has one.
pub fn check_builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> Result<(), String> {
    let api_version = |version: &str| {
        if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        }
    };
    let scope = |namespaced: bool| {
        if namespaced {
            "namespaced"
        } else {
            "cluster-scoped"
        }
    };
    match lookup(group, version, kind) {
        Some(known) if known.plural != plural || known.namespaced != namespaced => Err(format!(
            "declared as {} {kind} with plural {plural:?}, {}; the API server serves {} {kind} \
             as {:?}, {}",
            api_version(version),
            scope(namespaced),
            api_version(version),
            known.plural,
            scope(known.namespaced)
        )),
        Some(_) => Ok(()),
        None => match builtin_kinds()
            .iter()
            .find(|k| k.group == group && k.plural == plural)
        {
            Some(other) => Err(format!(
                "declared as {} {kind} with plural {plural:?}, which the API server serves as \
                 {} {} (Kubernetes {} has no {} {kind})",
                api_version(version),
                api_version(&other.version),
                other.kind,
                release(),
                api_version(version),
            )),
            None => Ok(()),
        },
    }
}

/// The Kubernetes release of the built-in table.
pub fn release() -> &'static str {
    "1.35"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_the_release_kinds_with_their_plurals_and_scopes() {
        let config_map = lookup("", "v1", "ConfigMap").unwrap();
        assert_eq!(
            (config_map.plural.as_str(), config_map.namespaced),
            ("configmaps", true)
        );
        let binding = lookup("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding").unwrap();
        assert_eq!(
            (binding.plural.as_str(), binding.namespaced),
            ("clusterrolebindings", false)
        );
        assert_eq!(
            lookup("apps", "v1", "Deployment").unwrap().plural,
            "deployments"
        );
        assert!(
            lookup("autoscaling", "v1", "Scale").is_none(),
            "a subresource"
        );
        assert!(is_builtin_group("") && is_builtin_group("apps"));
        assert!(!is_builtin_group("cache.example.com"));
    }

    #[test]
    fn a_kind_spelled_with_another_resources_plural_or_scope_is_refused_naming_both() {
        assert_eq!(
            check_builtin("", "v1", "ConfigMap", "configmaps", true),
            Ok(())
        );
        let lie = check_builtin("", "v1", "ConfigMap", "secrets", true).unwrap_err();
        assert!(
            lie.contains("\"secrets\"") && lie.contains("\"configmaps\""),
            "{lie}"
        );
        let scope = check_builtin("", "v1", "ConfigMap", "configmaps", false).unwrap_err();
        assert!(
            scope.contains("cluster-scoped") && scope.contains("namespaced"),
            "{scope}"
        );
        let borrowed = check_builtin("", "v1", "GhostKind", "secrets", true).unwrap_err();
        assert!(borrowed.contains("v1 Secret"), "{borrowed}");
        assert_eq!(
            check_builtin("", "v1", "GhostKind", "ghostkinds", true),
            Ok(()),
            "a kind the API server does not serve reaches nothing"
        );
        assert_eq!(
            check_builtin("cache.example.com", "v1", "Memcached", "memcacheds", true),
            Ok(()),
            "custom resources are discovery's to check"
        );
    }
}
