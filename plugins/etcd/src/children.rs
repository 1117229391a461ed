//! The children of one EtcdCluster: peer and client Services, the membership ConfigMap, the StatefulSet of members, its PDB, and the membership Jobs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapEnvSource, Container, ContainerPort, EnvFromSource, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, Probe, SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use operator_host_sdk::{
    child_meta, component_labels, restricted_container_security_context,
    restricted_pod_security_context,
};

use crate::members::{
    CLIENT_PORT, Change, ClusterState, METRICS_PORT, Membership, PEER_PORT, Topology, Version,
    quorum,
};
use crate::spec::EtcdClusterSpec;

/// The annotation on the StatefulSet naming the etcd version its template runs.
pub const VERSION_ANNOTATION: &str = "etcd.operator-host.dev/version";
/// The annotation on the pod template holding the hash of the TLS Secret's data, so that a
/// rotated certificate rolls the members.
pub const TLS_HASH_ANNOTATION: &str = "etcd.operator-host.dev/tls-hash";
/// The keys of the membership ConfigMap: etcd reads them as `--initial-cluster` and
/// `--initial-cluster-state` when a member starts with an empty data directory.
pub const INITIAL_CLUSTER_KEY: &str = "ETCD_INITIAL_CLUSTER";
/// See [`INITIAL_CLUSTER_KEY`].
pub const INITIAL_CLUSTER_STATE_KEY: &str = "ETCD_INITIAL_CLUSTER_STATE";
/// Where the TLS Secret is mounted in members and Jobs.
const TLS_DIR: &str = "/etc/etcd/tls";
/// The non-root user of the members (distroless' `nonroot`).
const MEMBER_UID: i64 = 65532;
/// The non-root user of the membership Jobs' image.
const MEMBERSHIP_UID: i64 = 1001;

/// What part of the cluster an object belongs to (`app.kubernetes.io/component`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Component {
    Member,
    Membership,
}

/// The labels of a cluster's objects; with [`Component::Member`] also the pods' selector.
fn labels(name: &str, component: Component) -> BTreeMap<String, String> {
    let component = match component {
        Component::Member => "member",
        Component::Membership => "membership",
    };
    component_labels("etcd", name, component)
}

/// The membership ConfigMap's name.
pub fn membership_name(name: &str) -> String {
    format!("{name}-membership")
}

/// `<name>-membership`: how a member that starts with an empty data directory joins. Kept out
/// of the pod template, so that a membership change does not restart the running members.
pub fn membership(topology: &Topology, membership: Membership) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(
            membership_name(topology.name),
            labels(topology.name, Component::Member),
        ),
        data: Some(BTreeMap::from([
            (
                INITIAL_CLUSTER_KEY.to_string(),
                topology.initial_cluster(membership.members),
            ),
            (
                INITIAL_CLUSTER_STATE_KEY.to_string(),
                membership.state.as_str().to_string(),
            ),
        ])),
        ..ConfigMap::default()
    }
}

/// The membership a ConfigMap written by [`membership`] holds, if it parses.
pub fn membership_of(config_map: &ConfigMap) -> Option<Membership> {
    let data = config_map.data.as_ref()?;
    let state = ClusterState::parse(data.get(INITIAL_CLUSTER_STATE_KEY)?)?;
    let listed = data.get(INITIAL_CLUSTER_KEY)?;
    let members = i32::try_from(listed.split(',').filter(|m| !m.is_empty()).count()).ok()?;
    Some(Membership { state, members })
}

fn port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_string()),
        port,
        target_port: Some(IntOrString::String(name.to_string())),
        ..ServicePort::default()
    }
}

/// `<name>-peer`: headless, publishing members before they are ready, because a member needs
/// its peers' names to become ready at all.
pub fn peer_service(topology: &Topology) -> Service {
    Service {
        metadata: child_meta(
            topology.peer_service(),
            labels(topology.name, Component::Member),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels(topology.name, Component::Member)),
            ports: Some(vec![port("peer", PEER_PORT), port("client", CLIENT_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `<name>-client`: the ready members, for clients.
pub fn client_service(topology: &Topology) -> Service {
    Service {
        metadata: child_meta(
            topology.client_service(),
            labels(topology.name, Component::Member),
        ),
        spec: Some(ServiceSpec {
            selector: Some(labels(topology.name, Component::Member)),
            ports: Some(vec![port("client", CLIENT_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `<name>`: voluntary disruptions (drains) keep a quorum of `members` running.
pub fn pdb(topology: &Topology, members: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: child_meta(topology.name, labels(topology.name, Component::Member)),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(quorum(members))),
            selector: Some(LabelSelector {
                match_labels: Some(labels(topology.name, Component::Member)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

fn tls_volume(spec: &EtcdClusterSpec) -> Option<(Volume, VolumeMount)> {
    let tls = spec.tls.as_ref()?;
    Some((
        Volume {
            name: "tls".to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(tls.secret_name.clone()),
                default_mode: Some(0o400),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: "tls".to_string(),
            mount_path: TLS_DIR.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    ))
}

/// The flags of a member. Per-member values come from the pod's name (`$(POD_NAME)` is
/// expanded by the kubelet: the official images have no shell), the initial cluster from the
/// membership ConfigMap's environment.
fn member_args(topology: &Topology) -> Vec<String> {
    let scheme = topology.scheme();
    let host = format!(
        "$(POD_NAME).{}.{}.svc",
        topology.peer_service(),
        topology.namespace
    );
    let mut args = vec![
        "--name=$(POD_NAME)".to_string(),
        "--data-dir=/var/lib/etcd/data".to_string(),
        format!("--listen-peer-urls={scheme}://0.0.0.0:{PEER_PORT}"),
        format!("--listen-client-urls={scheme}://0.0.0.0:{CLIENT_PORT}"),
        format!("--listen-metrics-urls=http://0.0.0.0:{METRICS_PORT}"),
        format!("--initial-advertise-peer-urls={scheme}://{host}:{PEER_PORT}"),
        format!("--advertise-client-urls={scheme}://{host}:{CLIENT_PORT}"),
        format!(
            "--initial-cluster-token={}-{}",
            topology.namespace, topology.name
        ),
    ];
    if topology.tls {
        for prefix in ["", "peer-"] {
            args.extend([
                format!("--{prefix}client-cert-auth"),
                format!("--{prefix}trusted-ca-file={TLS_DIR}/ca.crt"),
                format!("--{prefix}cert-file={TLS_DIR}/tls.crt"),
                format!("--{prefix}key-file={TLS_DIR}/tls.key"),
            ]);
        }
    }
    args
}

fn http_probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String("metrics".to_string()),
            ..HTTPGetAction::default()
        }),
        ..Probe::default()
    }
}

/// `<name>`: `replicas` members running `version`. Members start together (`Parallel`: a
/// new cluster needs a quorum to become ready), roll one at a time (`RollingUpdate`), and a
/// member removed by a scale-down takes its data with it, so that a member added later under
/// the same name starts empty.
pub fn stateful_set(
    topology: &Topology,
    spec: &EtcdClusterSpec,
    replicas: i32,
    version: Version,
    tls_hash: Option<&str>,
) -> StatefulSet {
    let mut template_annotations = BTreeMap::new();
    if let Some(hash) = tls_hash {
        template_annotations.insert(TLS_HASH_ANNOTATION.to_string(), hash.to_string());
    }
    let tls = tls_volume(spec);
    let mut mounts = vec![VolumeMount {
        name: "data".to_string(),
        mount_path: "/var/lib/etcd".to_string(),
        ..VolumeMount::default()
    }];
    mounts.extend(tls.as_ref().map(|(_, mount)| mount.clone()));
    let container = Container {
        name: "etcd".to_string(),
        image: Some(format!("{}:v{version}", spec.repository)),
        command: Some(vec!["/usr/local/bin/etcd".to_string()]),
        args: Some(member_args(topology)),
        env: Some(vec![EnvVar {
            name: "POD_NAME".to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".to_string(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }]),
        env_from: Some(vec![EnvFromSource {
            config_map_ref: Some(ConfigMapEnvSource {
                name: membership_name(topology.name),
                optional: Some(false),
            }),
            ..EnvFromSource::default()
        }]),
        ports: Some(vec![
            container_port("peer", PEER_PORT),
            container_port("client", CLIENT_PORT),
            container_port("metrics", METRICS_PORT),
        ]),
        // Ready: this member serves linearizable reads, which needs a quorum.
        readiness_probe: Some(Probe {
            period_seconds: Some(5),
            failure_threshold: Some(3),
            ..http_probe("/readyz")
        }),
        liveness_probe: Some(Probe {
            initial_delay_seconds: Some(15),
            period_seconds: Some(10),
            failure_threshold: Some(8),
            ..http_probe("/livez")
        }),
        security_context: Some(restricted_container_security_context()),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let mut metadata = child_meta(topology.name, labels(topology.name, Component::Member));
    metadata.annotations = Some(BTreeMap::from([(
        VERSION_ANNOTATION.to_string(),
        version.to_string(),
    )]));
    StatefulSet {
        metadata,
        spec: Some(StatefulSetSpec {
            service_name: Some(topology.peer_service()),
            replicas: Some(replicas),
            pod_management_policy: Some("Parallel".to_string()),
            selector: LabelSelector {
                match_labels: Some(labels(topology.name, Component::Member)),
                ..LabelSelector::default()
            },
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_scaled: Some("Delete".to_string()),
                    when_deleted: Some("Delete".to_string()),
                },
            ),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(topology.name, Component::Member)),
                    annotations: (!template_annotations.is_empty()).then_some(template_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(restricted_pod_security_context(Some(MEMBER_UID))),
                    containers: vec![container],
                    volumes: tls.map(|(volume, _)| vec![volume]),
                    ..PodSpec::default()
                }),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("data".to_string()),
                    labels: Some(labels(topology.name, Component::Member)),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_string()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(spec.storage.clone()),
                        )])),
                        ..VolumeResourceRequirements::default()
                    }),
                    ..PersistentVolumeClaimSpec::default()
                }),
                status: None,
            }]),
            ..StatefulSetSpec::default()
        }),
        status: None,
    }
}

fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: port,
        ..ContainerPort::default()
    }
}

/// What a membership Job runs: idempotent, since a Job may run its pod more than once.
/// `member list` prints `id, status, name, peer URLs, client URLs, is learner`; a member
/// added but not started yet has an empty name, so members are found by peer URL.
const ADD_SCRIPT: &str = r#"if etcdctl member list | awk -F', ' -v url="$PEER_URL" '$4 == url { found = 1 } END { exit !found }'; then
  echo "$MEMBER ($PEER_URL) is already a member"
else
  etcdctl member add "$MEMBER" --peer-urls="$PEER_URL"
fi"#;

/// See [`ADD_SCRIPT`].
const REMOVE_SCRIPT: &str = r#"id="$(etcdctl member list | awk -F', ' -v url="$PEER_URL" '$4 == url { print $1 }')"
if [ -z "$id" ]; then
  echo "$MEMBER ($PEER_URL) is not a member"
else
  etcdctl member remove "$id"
fi"#;

/// The Job that makes `change` against the running cluster, with `etcdctl` of `version`.
/// The plugin cannot reach etcd; the Job can, and its `Complete` condition is what the
/// plugin observes.
pub fn membership_job(
    topology: &Topology,
    spec: &EtcdClusterSpec,
    version: Version,
    change: Change,
) -> Job {
    let (ordinal, script) = match change {
        Change::Add(ordinal) => (ordinal, ADD_SCRIPT),
        Change::Remove(ordinal) => (ordinal, REMOVE_SCRIPT),
    };
    let mut vars = vec![
        env("ETCDCTL_API", "3"),
        env("ETCDCTL_ENDPOINTS", topology.client_endpoint()),
        env("MEMBER", topology.member(ordinal)),
        env("PEER_URL", topology.peer_url(ordinal)),
    ];
    if topology.tls {
        vars.extend([
            env("ETCDCTL_CACERT", format!("{TLS_DIR}/ca.crt")),
            env("ETCDCTL_CERT", format!("{TLS_DIR}/tls.crt")),
            env("ETCDCTL_KEY", format!("{TLS_DIR}/tls.key")),
        ]);
    }
    let tls = tls_volume(spec);
    Job {
        metadata: child_meta(
            change.job_name(topology.name),
            labels(topology.name, Component::Membership),
        ),
        spec: Some(JobSpec {
            backoff_limit: Some(4),
            active_deadline_seconds: Some(600),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(topology.name, Component::Membership)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    security_context: Some(restricted_pod_security_context(Some(MEMBERSHIP_UID))),
                    containers: vec![Container {
                        name: "etcdctl".to_string(),
                        image: Some(format!("{}:{version}", spec.membership_repository)),
                        command: Some(vec![
                            "/bin/sh".to_string(),
                            "-ec".to_string(),
                            script.to_string(),
                        ]),
                        env: Some(vars),
                        security_context: Some(restricted_container_security_context()),
                        volume_mounts: tls.as_ref().map(|(_, mount)| vec![mount.clone()]),
                        ..Container::default()
                    }],
                    volumes: tls.map(|(volume, _)| vec![volume]),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}
