//! operator-host plugin for Memcached: one Deployment and one Service per `Memcached` CR.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Service,
    ServicePort, ServiceSpec, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, ResourceExt};
use operator_host_sdk::{
    Condition, Desired, Error, Kind, Observed, Reconciler, Validation, WorkloadView, app_labels,
    child_meta, component_labels, kind_of, restricted_container_security_context,
    restricted_pod_security_context, validate_container_resources,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest `spec.size` accepted (the CRD schema says the same).
pub const MAX_SIZE: i32 = 100;
/// The image used when `spec.image` is not set.
pub const DEFAULT_IMAGE: &str = "memcached:1.6.39-alpine";
/// The port used when `spec.containerPort` is not set.
pub const DEFAULT_PORT: i32 = 11211;

/// The desired state of a Memcached cache.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    plural = "memcacheds",
    shortname = "mc",
    namespaced,
    status = "MemcachedStatus",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Image","type":"string","priority":1,"jsonPath":".spec.image"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of Memcached pods.
    #[schemars(range(min = 0, max = 100))]
    pub size: i32,
    /// Container image.
    #[serde(default = "default_image")]
    pub image: String,
    /// Port Memcached listens on, and the Service's port.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: i32,
    /// Compute resources of the Memcached container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

fn default_image() -> String {
    DEFAULT_IMAGE.to_string()
}

fn default_port() -> i32 {
    DEFAULT_PORT
}

/// The observed state of a Memcached cache.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Pods of the Deployment that are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The label selector of the pods, as a string.
    #[serde(default)]
    pub selector: String,
    /// `Available`: whether the Deployment has rolled out the current spec (image, port,
    /// resources, size) and its `size` pods are ready.
    #[serde(default)]
    #[schemars(schema_with = "operator_host_sdk::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// The Memcached reconciler.
pub struct MemcachedOperator;

impl Reconciler for MemcachedOperator {
    type Parent = Memcached;
    const NAME: &'static str = "memcached";

    fn children() -> Vec<Kind> {
        #[allow(unused_mut)]
        let mut kinds = vec![kind_of::<Deployment>(), kind_of::<Service>()];
        #[cfg(feature = "pdb")]
        kinds.push(kind_of::<k8s_openapi::api::policy::v1::PodDisruptionBudget>());
        kinds
    }

    fn reconcile(parent: &Memcached, observed: &Observed) -> Result<Desired, Error> {
        let spec = validate(&parent.spec)?;
        let name = parent.name_any();
        let labels = selector_labels(&name);
        let mut desired = Desired::new();
        desired.child(&deployment(&name, &spec, &labels))?;
        desired.child(&service(&name, &spec, &labels))?;
        #[cfg(feature = "pdb")]
        desired.child(&disruption_budget(&name, &labels))?;
        let observed_deployment = observed.view::<Deployment, WorkloadView>(&name)?;
        let status = status(parent, observed_deployment.as_ref(), &desired, &labels);
        #[cfg(feature = "no-children")]
        let mut desired = Desired::new();
        desired.status(&status)?;
        Ok(desired)
    }

    const VALIDATE: bool = true;
    const DEFAULT: bool = true;

    /// Refuses at `kubectl apply` what `reconcile` would report as an invalid spec.
    fn validate(parent: &Memcached, _old: Option<&Memcached>) -> Validation {
        let mut validation = Validation::new();
        validation.check(validate(&parent.spec));
        if parent.spec.size == 0 {
            validation.warn(format!(
                "Memcached {}: spec.size is 0, so no Memcached pod runs",
                parent.name_any()
            ));
        }
        validation
    }

    /// An image given without a tag or digest gets the tag this plugin is tested with, so a
    /// cache never runs whatever `latest` is that day.
    fn default(parent: &mut Memcached) {
        if let Some(pinned) = pinned_image(&parent.spec.image) {
            parent.spec.image = pinned;
        }
    }
}

/// `image` with [`DEFAULT_IMAGE`]'s tag when it names the `memcached` repository without a
/// tag or digest (`memcached`, `mirror.example.com/library/memcached`); `None` otherwise.
pub fn pinned_image(image: &str) -> Option<String> {
    let last = image.rsplit('/').next().unwrap_or(image);
    let tag = DEFAULT_IMAGE.split_once(':').map(|(_, tag)| tag)?;
    (last == "memcached" && !image.contains('@')).then(|| format!("{image}:{tag}"))
}

// Behind a feature so a plugin that reuses this crate (plugins/fleet) exports only itself.
#[cfg(feature = "export")]
operator_host_sdk::export_reconciler!(MemcachedOperator);

/// Checks what the CRD schema cannot express, and what `render` sees without an API server;
/// returns the spec the children are made from: `resources` as the API server stores them
/// (see [`validate_container_resources`]), so the applied Deployment is the one observed.
pub fn validate(spec: &MemcachedSpec) -> Result<MemcachedSpec, Error> {
    if !(0..=MAX_SIZE).contains(&spec.size) {
        return Err(Error::invalid_field(
            "size",
            format!("must be between 0 and {MAX_SIZE}, got {}", spec.size),
        ));
    }
    if !(1..=65535).contains(&spec.container_port) {
        return Err(Error::invalid_field(
            "containerPort",
            format!("must be between 1 and 65535, got {}", spec.container_port),
        ));
    }
    if spec.image.trim().is_empty() || spec.image.contains(char::is_whitespace) {
        return Err(Error::invalid_field(
            "image",
            format!("must be a container image reference, got {:?}", spec.image),
        ));
    }
    let resources = spec
        .resources
        .as_ref()
        .map(|r| validate_container_resources("resources", r))
        .transpose()?;
    Ok(MemcachedSpec {
        resources,
        ..spec.clone()
    })
}

/// Labels that select exactly one CR's pods: two CRs in a namespace never share them.
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    app_labels("memcached", name)
}

/// The children's and their pods' labels: the selector's and the component.
fn child_labels(name: &str) -> BTreeMap<String, String> {
    component_labels("memcached", name, "cache")
}

/// Metadata of a child; the `v2` build marks every child so hot reloads can be observed.
fn meta(name: &str) -> ObjectMeta {
    #[allow(unused_mut)]
    let mut meta = child_meta(name, child_labels(name));
    #[cfg(feature = "v2")]
    {
        meta.annotations = Some(BTreeMap::from([(
            "cache.example.com/plugin-variant".to_string(),
            "v2".to_string(),
        )]));
    }
    meta
}

fn deployment(name: &str, spec: &MemcachedSpec, selector: &BTreeMap<String, String>) -> Deployment {
    let probe = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("memcached".into()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(10),
        ..Probe::default()
    };
    Deployment {
        metadata: meta(name),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.size),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(child_labels(name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "memcached".into(),
                        image: Some(spec.image.clone()),
                        args: Some(vec![
                            "-m=64".into(),
                            "-o".into(),
                            "modern".into(),
                            format!("-p={}", spec.container_port),
                        ]),
                        ports: Some(vec![ContainerPort {
                            name: Some("memcached".into()),
                            container_port: spec.container_port,
                            protocol: Some("TCP".into()),
                            ..ContainerPort::default()
                        }]),
                        resources: spec.resources.clone(),
                        readiness_probe: Some(probe.clone()),
                        liveness_probe: Some(probe),
                        security_context: Some(restricted_container_security_context()),
                        ..Container::default()
                    }],
                    // The image runs as its own non-root user (memcache).
                    security_context: Some(restricted_pod_security_context(None)),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn service(name: &str, spec: &MemcachedSpec, selector: &BTreeMap<String, String>) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            selector: Some(selector.clone()),
            ports: Some(vec![ServicePort {
                name: Some("memcached".into()),
                port: spec.container_port,
                target_port: Some(IntOrString::String("memcached".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The `pdb` build's extra child: at most one pod of the cache unavailable at a time.
#[cfg(feature = "pdb")]
fn disruption_budget(
    name: &str,
    selector: &BTreeMap<String, String>,
) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
    use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
    PodDisruptionBudget {
        metadata: meta(name),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// Status from the observed Deployment: nothing is assumed that was not observed.
///
/// `Available` is true only once the Deployment carries the spec in `desired` (the one the
/// host is about to apply for this generation) and has rolled it out by `kubectl rollout
/// status`'s rules: the Deployment observed here is the one *before* this answer is applied,
/// so after an image change it is the old one, ready but not current.
fn status(
    parent: &Memcached,
    observed: Option<&WorkloadView>,
    desired: &Desired,
    selector: &BTreeMap<String, String>,
) -> MemcachedStatus {
    let generation = parent.metadata.generation;
    let size = parent.spec.size;
    let ready = observed.and_then(|d| d.status.ready_replicas).unwrap_or(0);
    let available = match observed {
        None => Condition::new(
            "Available",
            false,
            "DeploymentNotFound",
            "the Deployment has not been observed yet",
            generation,
        ),
        Some(d) if d.spec.replicas != Some(size) => Condition::new(
            "Available",
            false,
            "Scaling",
            format!("the Deployment is being scaled to {size} replicas"),
            generation,
        ),
        Some(d) => {
            let rollout = d.rollout_of(desired);
            let message = if rollout.is_complete() {
                format!("{ready} of {size} pods are ready")
            } else {
                format!(
                    "{ready} of {size} pods are ready; rollout: {}",
                    rollout.message()
                )
            };
            let reason = if rollout.is_complete() {
                "MinimumReplicasReady"
            } else {
                rollout.reason()
            };
            Condition::new(
                "Available",
                rollout.is_complete(),
                reason,
                message,
                generation,
            )
        }
    };
    MemcachedStatus {
        ready_replicas: ready,
        selector: selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        conditions: vec![available],
    }
}

#[cfg(test)]
mod tests;
