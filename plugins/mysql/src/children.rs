//! The children of one InnoDBCluster: ServiceAccount, ConfigMap, Services, StatefulSet, PDB, the group Jobs, router Deployment.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, ExecAction, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, Probe, SecretKeySelector, Service, ServiceAccount, ServicePort, ServiceSpec,
    TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use operator_host_sdk::{
    child_meta, component_labels, restricted_container_security_context,
    restricted_pod_security_context,
};

use crate::config::{INITCONF_DIR, MY_CNF};
use crate::spec::{CONFIG_HASH_ANNOTATION, InnoDBClusterSpec, MAX_INSTANCES};

/// MySQL classic protocol.
pub const MYSQL_PORT: i32 = 3306;
/// MySQL X protocol.
pub const MYSQLX_PORT: i32 = 33060;
/// Group Replication (XCom) communication.
pub const GR_PORT: i32 = 33061;
/// Router: classic protocol, read-write.
pub const ROUTER_RW_PORT: i32 = 6446;
/// Router: classic protocol, read-only.
pub const ROUTER_RO_PORT: i32 = 6447;
/// Router: X protocol, read-write.
pub const ROUTER_X_RW_PORT: i32 = 6448;
/// Router: X protocol, read-only.
pub const ROUTER_X_RO_PORT: i32 = 6449;
/// Router: classic protocol, read-write splitting.
pub const ROUTER_RW_SPLIT_PORT: i32 = 6450;
/// Router: REST API.
pub const ROUTER_REST_PORT: i32 = 8443;
/// `server_id` of the instance with ordinal 0; instance `i` gets base + i.
pub const SERVER_ID_BASE: i32 = 1000;
/// The MySQL server image repository; the tag is `spec.version`.
pub const SERVER_IMAGE: &str = "container-registry.oracle.com/mysql/community-server";
/// The MySQL Router image repository; the tag is `spec.version`.
pub const ROUTER_IMAGE: &str = "container-registry.oracle.com/mysql/community-router";
/// The uid and gid of `mysql` in the server image.
const MYSQL_UID: i64 = 27;

pub(crate) const MAX_INSTANCES_USIZE: usize = MAX_INSTANCES as usize;

/// The headless Service that gives each instance a stable DNS name.
pub fn instances_service(name: &str) -> String {
    format!("{name}-instances")
}

/// The ConfigMap holding the server configuration.
pub fn initconf_name(name: &str) -> String {
    format!("{name}-initconf")
}

/// The router Deployment.
pub fn router_name(name: &str) -> String {
    format!("{name}-router")
}

/// The PodDisruptionBudget of the MySQL pods.
pub fn pdb_name(name: &str) -> String {
    format!("{name}-pdb")
}

/// The ServiceAccount of every pod of the cluster.
pub fn service_account_name(name: &str) -> String {
    format!("{name}-sa")
}

/// What part of the cluster an object belongs to (`app.kubernetes.io/component`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// The MySQL servers and what serves them.
    Database,
    /// MySQL Router.
    Router,
    /// Shared by both (the ServiceAccount).
    Cluster,
}

impl Component {
    fn as_str(self) -> &'static str {
        match self {
            Component::Database => "database",
            Component::Router => "router",
            Component::Cluster => "cluster",
        }
    }

    fn tier(self) -> Option<&'static str> {
        match self {
            Component::Database => Some("mysql"),
            Component::Router => Some("mysqlrouter"),
            Component::Cluster => None,
        }
    }
}

/// Labels in the style of the upstream MySQL Operator. For `Database` and `Router` they are
/// also the pod selectors: unique per cluster (`instance`, `mysql.oracle.com/cluster`) and
/// distinct between servers and routers (`component`, `tier`).
pub fn labels(name: &str, component: Component) -> BTreeMap<String, String> {
    let instance = format!("mysql-innodbcluster-{name}");
    let mut labels = component_labels("mysql-innodbcluster", &instance, component.as_str());
    labels.insert("mysql.oracle.com/cluster".to_string(), name.to_string());
    if let Some(tier) = component.tier() {
        labels.insert("tier".to_string(), tier.to_string());
    }
    labels
}

/// Pod labels: the selector plus `managed-by` (the host adds it to the children it applies,
/// not to the pods their controllers create).
fn pod_labels(name: &str, component: Component) -> BTreeMap<String, String> {
    let mut labels = labels(name, component);
    labels.insert(
        "app.kubernetes.io/managed-by".to_string(),
        "operator-host".to_string(),
    );
    labels
}

fn selector(name: &str, component: Component) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(name, component)),
        ..LabelSelector::default()
    }
}

fn tcp_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: port,
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}

fn service_port(name: &str, port: i32, target: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_string()),
        port,
        target_port: Some(IntOrString::Int(target)),
        protocol: Some("TCP".to_string()),
        ..ServicePort::default()
    }
}

/// An environment variable read from the user's Secret: the data is referenced, never copied.
fn secret_env(env: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: env.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// `<name>-sa`: the identity of the cluster's pods. They do not call the API, so no token.
pub fn service_account(name: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: child_meta(service_account_name(name), labels(name, Component::Cluster)),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// `<name>-initconf`: the server configuration (see [`crate::config::initconf`]).
pub fn initconf(name: &str, data: &BTreeMap<String, String>) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(initconf_name(name), labels(name, Component::Database)),
        data: Some(data.clone()),
        ..ConfigMap::default()
    }
}

/// `<name>-instances`: headless, and publishing pods before they are ready, because members
/// must find each other to become ready at all.
pub fn instances(name: &str) -> Service {
    Service {
        metadata: child_meta(instances_service(name), labels(name, Component::Database)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels(name, Component::Database)),
            ports: Some(vec![
                service_port("mysql", MYSQL_PORT, MYSQL_PORT),
                service_port("mysqlx", MYSQLX_PORT, MYSQLX_PORT),
                service_port("gr-xcom", GR_PORT, GR_PORT),
            ]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `<name>`: the clients' entry point, in front of the routers. It stays when there are no
/// routers, so clients keep a stable address.
pub fn router_service(name: &str, spec: &InnoDBClusterSpec) -> Service {
    Service {
        metadata: child_meta(name, labels(name, Component::Router)),
        spec: Some(ServiceSpec {
            type_: Some(spec.service.type_.as_str().to_string()),
            selector: Some(labels(name, Component::Router)),
            ports: Some(vec![
                service_port("mysql", MYSQL_PORT, spec.service.default_port.router_port()),
                service_port("mysqlx", MYSQLX_PORT, ROUTER_X_RW_PORT),
                service_port("mysql-ro", ROUTER_RO_PORT, ROUTER_RO_PORT),
                service_port("mysqlx-ro", ROUTER_X_RO_PORT, ROUTER_X_RO_PORT),
                service_port("mysql-rw-split", ROUTER_RW_SPLIT_PORT, ROUTER_RW_SPLIT_PORT),
                service_port("router-rest", ROUTER_REST_PORT, ROUTER_REST_PORT),
            ]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Starts the server with the options that differ per pod, derived from the pod's ordinal
/// (`<name>-<ordinal>`). `let` rather than `$((...))`, which Kubernetes would take for a
/// variable reference.
fn server_script(name: &str) -> String {
    let service = instances_service(name);
    format!(
        "set -e\n\
         ordinal=\"${{HOSTNAME##*-}}\"\n\
         let \"server_id = SERVER_ID_BASE + ordinal\"\n\
         exec /entrypoint.sh mysqld \\\n  \
         --server-id=\"$server_id\" \\\n  \
         --report-host=\"$HOSTNAME.{service}\" \\\n  \
         --loose-group-replication-local-address=\"$HOSTNAME.{service}:{GR_PORT}\"\n"
    )
}

/// `<name>`: the MySQL servers. `config_hash` goes into the pod template, so a change of the
/// configuration rolls the pods (a mounted ConfigMap alone would not restart mysqld).
pub fn stateful_set(name: &str, spec: &InnoDBClusterSpec, config_hash: &str) -> StatefulSet {
    let mut template_labels = spec.pod_labels.clone();
    template_labels.extend(pod_labels(name, Component::Database));
    let mut annotations = spec.pod_annotations.clone();
    annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), config_hash.to_string());
    // `mysqladmin ping` succeeds when the server answers, even with "access denied": no
    // credentials are needed in the probe.
    let ping = Probe {
        exec: Some(ExecAction {
            command: Some(vec![
                "mysqladmin".to_string(),
                "ping".to_string(),
                "--protocol=socket".to_string(),
                "--socket=/var/run/mysqld/mysqld.sock".to_string(),
            ]),
        }),
        ..Probe::default()
    };
    let container = Container {
        name: "mysql".to_string(),
        image: Some(format!("{SERVER_IMAGE}:{}", spec.version)),
        command: Some(vec!["/bin/bash".to_string(), "-c".to_string()]),
        args: Some(vec![server_script(name)]),
        env: Some(vec![
            secret_env("MYSQL_ROOT_PASSWORD", &spec.secret_name, "rootPassword"),
            secret_env("MYSQL_ROOT_HOST", &spec.secret_name, "rootHost"),
            env("SERVER_ID_BASE", SERVER_ID_BASE.to_string()),
        ]),
        ports: Some(vec![
            tcp_port("mysql", MYSQL_PORT),
            tcp_port("mysqlx", MYSQLX_PORT),
            tcp_port("gr-xcom", GR_PORT),
        ]),
        readiness_probe: Some(Probe {
            initial_delay_seconds: Some(10),
            period_seconds: Some(5),
            failure_threshold: Some(3),
            ..ping.clone()
        }),
        liveness_probe: Some(Probe {
            initial_delay_seconds: Some(60),
            period_seconds: Some(15),
            failure_threshold: Some(10),
            ..ping
        }),
        resources: spec.resources.clone(),
        security_context: Some(restricted_container_security_context()),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "datadir".to_string(),
                mount_path: "/var/lib/mysql".to_string(),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "initconf".to_string(),
                mount_path: INITCONF_DIR.to_string(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "initconf".to_string(),
                mount_path: "/etc/my.cnf".to_string(),
                sub_path: Some(MY_CNF.to_string()),
                read_only: Some(true),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "rundir".to_string(),
                mount_path: "/var/run/mysqld".to_string(),
                ..VolumeMount::default()
            },
        ]),
        ..Container::default()
    };
    let datadir = &spec.datadir_volume_claim_template;
    StatefulSet {
        metadata: child_meta(name, labels(name, Component::Database)),
        spec: Some(StatefulSetSpec {
            service_name: Some(instances_service(name)),
            replicas: Some(spec.instances),
            pod_management_policy: Some("Parallel".to_string()),
            selector: selector(name, Component::Database),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(template_labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(service_account_name(name)),
                    termination_grace_period_seconds: Some(120),
                    security_context: Some(restricted_pod_security_context(Some(MYSQL_UID))),
                    containers: vec![container],
                    volumes: Some(vec![
                        Volume {
                            name: "initconf".to_string(),
                            config_map: Some(ConfigMapVolumeSource {
                                name: initconf_name(name),
                                ..ConfigMapVolumeSource::default()
                            }),
                            ..Volume::default()
                        },
                        Volume {
                            name: "rundir".to_string(),
                            empty_dir: Some(EmptyDirVolumeSource::default()),
                            ..Volume::default()
                        },
                    ]),
                    ..PodSpec::default()
                }),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("datadir".to_string()),
                    labels: Some(labels(name, Component::Database)),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(
                        datadir
                            .access_modes
                            .iter()
                            .map(|m| m.as_str().to_string())
                            .collect(),
                    ),
                    storage_class_name: datadir.storage_class_name.clone(),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(datadir.storage.clone()),
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

/// `<name>-router`: MySQL Router, bootstrapped against the instances with the user's
/// credentials (referenced from the Secret).
pub fn router_deployment(name: &str, spec: &InnoDBClusterSpec) -> Deployment {
    let probe = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("mysql-rw".to_string()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(10),
        ..Probe::default()
    };
    Deployment {
        metadata: child_meta(router_name(name), labels(name, Component::Router)),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.router.instances),
            selector: selector(name, Component::Router),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels(name, Component::Router)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(service_account_name(name)),
                    containers: vec![Container {
                        name: "router".to_string(),
                        image: Some(format!("{ROUTER_IMAGE}:{}", spec.version)),
                        env: Some(vec![
                            env("MYSQL_HOST", instances_service(name)),
                            env("MYSQL_PORT", MYSQL_PORT.to_string()),
                            secret_env("MYSQL_USER", &spec.secret_name, "rootUser"),
                            secret_env("MYSQL_PASSWORD", &spec.secret_name, "rootPassword"),
                        ]),
                        ports: Some(vec![
                            tcp_port("mysql-rw", ROUTER_RW_PORT),
                            tcp_port("mysql-ro", ROUTER_RO_PORT),
                            tcp_port("mysqlx-rw", ROUTER_X_RW_PORT),
                            tcp_port("mysqlx-ro", ROUTER_X_RO_PORT),
                            tcp_port("mysql-rw-split", ROUTER_RW_SPLIT_PORT),
                            tcp_port("router-rest", ROUTER_REST_PORT),
                        ]),
                        readiness_probe: Some(probe.clone()),
                        liveness_probe: Some(Probe {
                            initial_delay_seconds: Some(30),
                            ..probe
                        }),
                        security_context: Some(restricted_container_security_context()),
                        ..Container::default()
                    }],
                    // The image runs as its own non-root user (mysqlrouter).
                    security_context: Some(restricted_pod_security_context(None)),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// `<name>-pdb`: voluntary disruptions (drains) take at most one server at a time, so the
/// group keeps its majority.
pub fn pdb(name: &str) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: child_meta(pdb_name(name), labels(name, Component::Database)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(selector(name, Component::Database)),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// The Job that creates the InnoDB Cluster.
pub fn create_cluster_name(name: &str) -> String {
    format!("{name}-create-cluster")
}

/// The Job that adds the instances of a cluster grown to `instances` after its creation.
pub fn add_instances_name(name: &str, instances: i32) -> String {
    format!("{name}-add-instances-{instances}")
}

/// The Job that removes from the group the instances a cluster shrunk to `instances` drops.
pub fn remove_instances_name(name: &str, instances: i32) -> String {
    format!("{name}-remove-instances-{instances}")
}

/// On a group Job: how many instances it makes members of the group. The plugin reads it back
/// from the observed create-cluster Job to tell whether a larger cluster needs an add Job.
pub const GROUP_INSTANCES_ANNOTATION: &str = "mysql.operator-host.dev/instances";

/// The instance count a group Job was made for (its annotation), if it carries one.
pub fn group_instances_of(job: &Job) -> Option<i32> {
    job.metadata
        .annotations
        .as_ref()?
        .get(GROUP_INSTANCES_ANNOTATION)?
        .parse()
        .ok()
}

/// What a group Job runs: wait until the first instance and each other one answer, create the
/// cluster on the first unless it exists (`dba.createCluster()`), then add every instance not
/// in it yet, so that a retried pod, or the Job of a grown cluster, finishes what an earlier
/// one started.
const GROUP_SCRIPT: &str = r#"for host in "$FIRST" $(echo "${MEMBERS:-}" | tr , ' '); do
  until mysqlsh --uri "$MYSQL_USER@$host:3306" --password="$MYSQL_PASSWORD" --sql -e 'SELECT 1' >/dev/null 2>&1; do
    echo "waiting for $host"
    sleep 5
  done
done
mysqlsh --uri "$MYSQL_USER@$FIRST:3306" --password="$MYSQL_PASSWORD" --js -e '
var cluster;
try { cluster = dba.getCluster(os.getenv("CLUSTER")); }
catch (e) { cluster = dba.createCluster(os.getenv("CLUSTER")); }
var topology = cluster.status().defaultReplicaSet.topology;
(os.getenv("MEMBERS") || "").split(",").filter(function (m) { return m && !topology[m + ":3306"]; })
  .forEach(function (m) {
    cluster.addInstance(os.getenv("MYSQL_USER") + "@" + m + ":3306",
      {password: os.getenv("MYSQL_PASSWORD"), recoveryMethod: "clone"});
  });'"#;

/// What the remove Job runs: wait until the first instance answers, make it the primary if
/// the primary is one of those that go, remove each that is still a member, the last first
/// (`force` for one that no longer answers: its pod is gone or failing), then `rescan` so the
/// cluster's metadata forgets what the group no longer has. A retried pod finds done what an
/// earlier one did.
const REMOVE_SCRIPT: &str = r#"until mysqlsh --uri "$MYSQL_USER@$FIRST:3306" --password="$MYSQL_PASSWORD" --sql -e 'SELECT 1' >/dev/null 2>&1; do
  echo "waiting for $FIRST"
  sleep 5
done
mysqlsh --uri "$MYSQL_USER@$FIRST:3306" --password="$MYSQL_PASSWORD" --js -e '
var cluster = dba.getCluster(os.getenv("CLUSTER"));
var replicaSet = cluster.status().defaultReplicaSet;
(os.getenv("REMOVED") || "").split(",").filter(function (m) { return replicaSet.topology[m + ":3306"]; })
  .forEach(function (m) {
    if (replicaSet.primary === m + ":3306") { cluster.setPrimaryInstance(os.getenv("FIRST") + ":3306"); }
    cluster.removeInstance(os.getenv("MYSQL_USER") + "@" + m + ":3306",
      {password: os.getenv("MYSQL_PASSWORD"), force: replicaSet.topology[m + ":3306"].status !== "ONLINE"});
  });
cluster.rescan({removeInstances: "auto"});'"#;

/// `<name>-create-cluster`: `dba.createCluster()` on instance 0 and `addInstance` of the
/// others, with MySQL Shell from the server image and the credentials of the user's Secret.
/// The plugin cannot reach MySQL; the Job can, and its `Complete` condition is what tells the
/// plugin that the group exists.
pub fn create_cluster_job(name: &str, spec: &InnoDBClusterSpec) -> Job {
    let job_name = create_cluster_name(name);
    group_job(
        name,
        spec,
        job_name,
        "create-cluster",
        GROUP_SCRIPT,
        members(name, spec),
    )
}

/// `<name>-add-instances-<instances>`: the same script for a cluster grown after its creation;
/// it finds the group and adds the instances that are not in it.
pub fn add_instances_job(name: &str, spec: &InnoDBClusterSpec) -> Job {
    let job_name = add_instances_name(name, spec.instances);
    group_job(
        name,
        spec,
        job_name,
        "add-instances",
        GROUP_SCRIPT,
        members(name, spec),
    )
}

/// `<name>-remove-instances-<instances>`: the instances from `instances` up to `running` (the
/// size the StatefulSet runs at) removed from the group, the last first, before the
/// StatefulSet shrinks; see [`REMOVE_SCRIPT`].
pub fn remove_instances_job(name: &str, spec: &InnoDBClusterSpec, running: i32) -> Job {
    let removed = (spec.instances..running)
        .rev()
        .map(|i| member_host(name, i))
        .collect();
    let job_name = remove_instances_name(name, spec.instances);
    let listed = ("REMOVED", removed);
    group_job(
        name,
        spec,
        job_name,
        "remove-instances",
        REMOVE_SCRIPT,
        listed,
    )
}

/// The host name of instance `ordinal` in the group (its pod's name in the headless Service).
fn member_host(name: &str, ordinal: i32) -> String {
    format!("{name}-{ordinal}.{}", instances_service(name))
}

/// `MEMBERS`: the instances after the first, for the group script to add.
fn members(name: &str, spec: &InnoDBClusterSpec) -> (&'static str, Vec<String>) {
    let hosts = (1..spec.instances).map(|i| member_host(name, i)).collect();
    ("MEMBERS", hosts)
}

/// A Job running `script` with MySQL Shell against the group, `listed` the variable naming
/// the instances it works on.
fn group_job(
    name: &str,
    spec: &InnoDBClusterSpec,
    job_name: String,
    container: &str,
    script: &str,
    (variable, hosts): (&str, Vec<String>),
) -> Job {
    let mut vars = vec![
        env("CLUSTER", name),
        env("FIRST", member_host(name, 0)),
        secret_env("MYSQL_USER", &spec.secret_name, "rootUser"),
        secret_env("MYSQL_PASSWORD", &spec.secret_name, "rootPassword"),
    ];
    // The API server stores an empty value as none: a one-instance cluster has no MEMBERS.
    if !hosts.is_empty() {
        vars.push(env(variable, hosts.join(",")));
    }
    let mut metadata = child_meta(job_name, labels(name, Component::Cluster));
    metadata.annotations = Some(BTreeMap::from([(
        GROUP_INSTANCES_ANNOTATION.to_string(),
        spec.instances.to_string(),
    )]));
    Job {
        metadata,
        spec: Some(JobSpec {
            backoff_limit: Some(6),
            active_deadline_seconds: Some(1800),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(name, Component::Cluster)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(service_account_name(name)),
                    restart_policy: Some("Never".to_string()),
                    security_context: Some(restricted_pod_security_context(Some(MYSQL_UID))),
                    containers: vec![Container {
                        name: container.to_string(),
                        image: Some(format!("{SERVER_IMAGE}:{}", spec.version)),
                        command: Some(vec![
                            "/bin/sh".to_string(),
                            "-ec".to_string(),
                            script.to_string(),
                        ]),
                        env: Some(vars),
                        security_context: Some(restricted_container_security_context()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}
