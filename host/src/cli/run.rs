//! `operator-host run`: every plugin of a directory (and of the cluster's OperatorPlugins) served as a controller.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::{LeaderElectArgs, kube_config};
use crate::controller::{self, ControllerConfig, RunConfig, ShutdownSignal};
use crate::leader::{self, Leadership};
use crate::policy::Policy;
use crate::runtime::{CompileCache, Runtime};
use crate::webhook;

/// The arguments of `run`.
#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// Directory of plugin components (*.wasm), watched for changes.
    #[arg(long, default_value = "target/plugins")]
    plugins: PathBuf,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Only watch and reconcile parents in this namespace; repeat for several
    /// (default: all namespaces).
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    namespaces: Vec<String>,
    /// Install each plugin's CRD and wait until it is Established before starting the
    /// plugin: created if absent, updated if this host installed it for the same plugin
    /// (annotation operator-host.dev/installed-for), any other CRD of that name refused.
    #[arg(long)]
    install_crds: bool,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Reconcile every parent at least this often, in seconds.
    #[arg(long, default_value_t = 300)]
    resync_secs: u64,
    /// Most reconciles running at once per plugin and namespace.
    #[arg(long, default_value_t = 32)]
    concurrency: u16,
    /// Policy file: what each plugin may produce, and its limits (default: the safe
    /// defaults, see the README).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
    #[command(flatten)]
    leader_election: LeaderElectArgs,
    /// This host's identity in the election (default: $POD_NAME or the hostname, and the
    /// process id).
    #[arg(long)]
    leader_elect_identity: Option<String>,
    /// How long a Lease holds without renewal, in seconds.
    #[arg(long, default_value_t = leader::DEFAULT_LEASE_DURATION.as_secs())]
    leader_elect_lease_duration: u64,
    /// How long the leader keeps writing without a successful renewal, in seconds (less
    /// than the lease duration: the margin is the fence's).
    #[arg(long, default_value_t = leader::DEFAULT_RENEW_DEADLINE.as_secs())]
    leader_elect_renew_deadline: u64,
    /// How often candidates try to take, and the leader to renew, the Lease, in seconds.
    #[arg(long, default_value_t = leader::DEFAULT_RETRY_PERIOD.as_secs())]
    leader_elect_retry_period: u64,
    /// Also serve the plugins the cluster declares as OperatorPlugins
    /// (operator-host.dev/v1alpha1), pulled from OCI registries; with --install-crds the
    /// host installs that CRD too.
    #[arg(long)]
    plugins_from_cluster: bool,
    /// Where pulled plugins are kept by digest, so a restart during a registry outage
    /// serves them (default: <cache dir>/pulled).
    #[arg(long, value_name = "DIR")]
    plugin_store: Option<PathBuf>,
    /// Serve only the OperatorPlugins with these labels (a label selector such as
    /// team=payments), so several host deployments can share a cluster.
    #[arg(long, value_name = "SELECTOR")]
    operator_plugin_selector: Option<String>,
    /// The flight recorder: keep the inputs of each parent's last reconcile in
    /// DIR/<plugin>/<namespace>/<name>.json (Secret data only as hashes), for
    /// `operator-host replay`.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Serve the admission and conversion webhooks of the plugins that implement
    /// `validate`, `default` or `convert` (contract 0.3.0) on this address, over HTTPS with the
    /// host's own CA (a Secret beside the election Lease); with --install-crds the host also
    /// registers them with the API server.
    #[arg(long, value_name = "ADDR")]
    webhook_addr: Option<std::net::SocketAddr>,
    /// How the API server reaches the webhooks when the host runs outside the cluster
    /// (default: https:// and --webhook-addr, 127.0.0.1 for an unspecified address).
    #[arg(long, value_name = "URL", conflicts_with = "webhook_service")]
    webhook_url: Option<String>,
    /// The Service in front of the host's pods that the API server calls the webhooks
    /// through: [NAMESPACE/]NAME[:PORT] (by default the election Lease's namespace: the
    /// pod's own unless --leader-elect-namespace says otherwise; port 443).
    #[arg(long, value_name = "[NAMESPACE/]NAME[:PORT]", value_parser = parse_service)]
    webhook_service: Option<WebhookService>,
    /// What a webhook does when the plugin's call fails (traps, runs out of time or
    /// memory), and what the API server does when it cannot reach the host.
    #[arg(long, value_enum, default_value = "fail")]
    webhook_failure_policy: webhook::FailurePolicy,
    /// Serve the certificate of this directory (`tls.crt`, `tls.key`, and `ca.crt`: the CA
    /// the API server is told to trust), e.g. a mounted Secret that cert-manager issues and
    /// renews, instead of the host's own CA; reloaded when its files change.
    #[arg(
        long,
        value_name = "DIR",
        requires = "webhook_addr",
        conflicts_with_all = ["webhook_certificate_validity", "webhook_ca_validity"]
    )]
    webhook_cert_dir: Option<PathBuf>,
    /// How long each serving certificate of the host's own CA is valid; it is renewed after
    /// two thirds of it (e.g. 7d, 12h).
    #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = humantime::parse_duration)]
    webhook_certificate_validity: Duration,
    /// How long the host's own CA is valid (kept in the Secret `<lease>-webhook-ca`); with a
    /// third of it left, a new CA replaces it without interrupting the webhooks.
    #[arg(long, value_name = "DURATION", default_value = "10y", value_parser = humantime::parse_duration)]
    webhook_ca_validity: Duration,
}

/// `--webhook-service`, before the namespace it leaves out is known.
#[derive(Debug, Clone)]
struct WebhookService {
    namespace: Option<String>,
    name: String,
    port: u16,
}

impl WebhookService {
    /// The endpoint, in `default_namespace` unless it names one.
    fn endpoint(self, default_namespace: String) -> webhook::Endpoint {
        webhook::Endpoint::Service {
            namespace: self.namespace.unwrap_or(default_namespace),
            name: self.name,
            port: self.port,
        }
    }
}

/// `--webhook-service`: `[NAMESPACE/]NAME[:PORT]`.
fn parse_service(text: &str) -> Result<WebhookService, String> {
    let expected = || format!("{text:?} is not [NAMESPACE/]NAME[:PORT]");
    let (namespace, rest) = match text.split_once('/') {
        Some((namespace, rest)) if !namespace.is_empty() => (Some(namespace.to_string()), rest),
        Some(_) => return Err(expected()),
        None => (None, text),
    };
    let (name, port) = match rest.split_once(':') {
        Some((name, port)) => (
            name,
            port.parse()
                .ok()
                .filter(|port| *port != 0)
                .ok_or_else(|| format!("the port of {text:?} is not a number from 1 to 65535"))?,
        ),
        None => (rest, 443),
    };
    if name.is_empty() || name.contains('/') {
        return Err(expected());
    }
    Ok(WebhookService {
        namespace,
        name: name.to_string(),
        port,
    })
}

/// Serves until SIGTERM or SIGINT, on `serving`: the async runtime `main` started first, and
/// the handlers of those signals it installed on it.
pub(super) fn run(
    args: RunArgs,
    runtime: Arc<Runtime>,
    policy: Arc<Policy>,
    serving: (tokio::runtime::Runtime, ShutdownSignal),
    cache_dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    let RunArgs {
        plugins,
        kubeconfig,
        namespaces,
        install_crds,
        metrics_addr,
        resync_secs,
        concurrency,
        policy: _,
        leader_election,
        leader_elect_identity,
        leader_elect_lease_duration,
        leader_elect_renew_deadline,
        leader_elect_retry_period,
        plugins_from_cluster,
        plugin_store,
        operator_plugin_selector,
        record,
        webhook_addr,
        webhook_url,
        webhook_service,
        webhook_failure_policy,
        webhook_cert_dir,
        webhook_certificate_validity,
        webhook_ca_validity,
    } = args;
    let webhooks = webhook_addr.map(|addr| webhook::WebhookConfig {
        addr,
        endpoint: webhook_service
            .map(|service| service.endpoint(leader_election.namespace()))
            .or(webhook_url.map(webhook::Endpoint::Url)),
        failure_policy: webhook_failure_policy,
        certificates: match webhook_cert_dir {
            Some(dir) => webhook::Certificates::Dir(dir),
            None => webhook::Certificates::OwnCa {
                secret: (
                    leader_election.namespace(),
                    webhook::ca_secret_name(&leader_election.leader_elect_lease),
                ),
                validity: webhook_certificate_validity,
                ca_validity: webhook_ca_validity,
            },
        },
        owner: webhook::Owner {
            namespace: leader_election.namespace(),
            lease: leader_election.leader_elect_lease.clone(),
        },
    });
    let cluster_plugins = plugins_from_cluster.then(|| controller::ClusterPluginsConfig {
        store_dir: plugin_store
            .or_else(|| cache_dir.map(|d| d.join("pulled")))
            .or_else(|| CompileCache::default_dir().map(|d| d.join("pulled")))
            .unwrap_or_else(|| PathBuf::from("pulled-plugins")),
        namespace: leader_election.namespace(),
        selector: operator_plugin_selector,
    });
    let election = leader_election
        .leader_elect
        .then(|| leader::ElectionConfig {
            namespace: leader_election.namespace(),
            lease_name: leader_election.leader_elect_lease.clone(),
            identity: leader_elect_identity.unwrap_or_else(leader::default_identity),
            lease_duration: Duration::from_secs(leader_elect_lease_duration),
            renew_deadline: Duration::from_secs(leader_elect_renew_deadline),
            retry_period: Duration::from_secs(leader_elect_retry_period),
            labels: Default::default(),
        });
    if let Some(election) = &election {
        election.validate()?;
    }
    let leadership = match election {
        Some(_) => Leadership::candidate(),
        None => Leadership::unelected(),
    };
    // Every replica says what it serves, for `kubectl operator-host`, beside the Lease it
    // elects with (or would).
    let report = controller::ReportTarget {
        namespace: leader_election.namespace(),
        lease: leader_election.leader_elect_lease.clone(),
    };
    let shard = leader_election.shard;
    let ring = leader_election.leader_elect_lease.clone();
    let (async_runtime, shutdown) = serving;
    async_runtime.block_on(async move {
            let kube_config = kube_config(kubeconfig.as_deref()).await?;
            // Every write of the host goes through the fence; only the Lease's own
            // renewals do not.
            let (client, leader_election, sharding) = match election {
                Some(election) => {
                    let lease_client = kube::Client::try_from(kube_config.clone())
                        .context("creating the Kubernetes client")?;
                    tracing::info!(lease = %format!("{}/{}", election.namespace, election.lease_name), identity = %election.identity, "leader election on: standing by until this host holds the lease");
                    let sharding = shard.then(|| {
                        crate::shard::Sharding::new(&ring, &election, lease_client.clone())
                    });
                    // A sharded replica writes while its own shard Lease is fresh;
                    // what only the leader does is checked against the election.
                    let fence = sharding.as_ref().map_or(&leadership, |s| &s.fence);
                    (
                        leader::fenced_client(kube_config, fence)?,
                        Some(leader::LeaderElection {
                            config: election,
                            lease_client,
                        }),
                        sharding,
                    )
                }
                None => (
                    kube::Client::try_from(kube_config)
                        .context("creating the Kubernetes client")?,
                    None,
                    None,
                ),
            };
            let config = RunConfig {
                plugins_dir: plugins,
                install_crds,
                metrics_addr: Some(metrics_addr),
                controllers: ControllerConfig {
                    namespaces,
                    resync: Duration::from_secs(resync_secs),
                    concurrency,
                    leadership,
                    shard: None,
                    record: record.map(crate::recording::FlightRecorder::new),
                    canary_failed: Default::default(),
                },
                policy,
                leader_election,
                cluster_plugins,
                sharding,
                report: Some(report),
                webhooks,
            };
            controller::run(client, runtime, config, shutdown).await?;
            anyhow::Ok(())
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_service_without_namespace_is_in_the_lease_namespace() {
        let endpoint = |text: &str| parse_service(text).map(|s| s.endpoint("pods-ns".into()));
        assert_eq!(
            endpoint("hooks").unwrap(),
            webhook::Endpoint::Service {
                namespace: "pods-ns".into(),
                name: "hooks".into(),
                port: 443
            }
        );
        assert_eq!(
            endpoint("system/hooks:8443").unwrap(),
            webhook::Endpoint::Service {
                namespace: "system".into(),
                name: "hooks".into(),
                port: 8443
            }
        );
        for bad in ["/hooks", "system/", "a/b/c", "hooks:x", "hooks:0", ""] {
            assert!(parse_service(bad).is_err(), "{bad}");
        }
    }
}
