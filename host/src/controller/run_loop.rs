//! The run loop: the host's tasks (registry, watcher, leader election, sharding) until shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;

use super::RunError;
use super::config::{RunConfig, ShardScope};
use super::shutdown::ShutdownSignal;
use super::supervisor::{LoadRetry, Supervisor, lock};
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::runtime::Runtime;
use crate::shard::Sharding;
use crate::{leader, operator_plugin, shard, watch};

/// How long a shutdown waits for reconciles in flight: a Kubernetes pod gets 30 s after
/// SIGTERM by default, and the host promises to exit within 10 s whatever it is doing.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// Serves every plugin in `config.plugins_dir`, following changes to the directory, until
/// `shutdown` has received SIGTERM or SIGINT.
pub async fn run(
    client: Client,
    runtime: Arc<Runtime>,
    config: RunConfig,
    shutdown: ShutdownSignal,
) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::new());
    if let Some(addr) = config.metrics_addr {
        let bound = metrics.clone().serve(addr).await?;
        tracing::info!(%bound, "serving /metrics, /healthz and /readyz");
    }
    run_with_metrics(client, runtime, config, metrics, shutdown.received()).await
}

/// [`run`] with the caller's metrics, until `shutdown` resolves (tests use both).
pub async fn run_with_metrics(
    client: Client,
    runtime: Arc<Runtime>,
    config: RunConfig,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let mut config = config;
    let dir = config.plugins_dir.clone();
    let sharding = config
        .sharding
        .clone()
        .map(|sharding| start_sharding(sharding, &config, &metrics));
    if let Some(sharding) = &sharding {
        config.controllers.shard = Some(sharding.scope.clone());
    }
    // Watch before the first scan, so a change made during it is not missed.
    let (_watcher, mut dir_changed) = watch::watch_dir(&dir, watch::DEFAULT_DEBOUNCE)?;
    let (tier_ups, mut tiered_up) = tokio::sync::mpsc::unbounded_channel();
    let mut registry =
        Registry::new(runtime, &dir, metrics.clone(), tier_ups).with_policy(config.policy.clone());
    let cluster = config
        .cluster_plugins
        .as_ref()
        .map(|_| crate::registry::ClusterPlugins::default());
    if let Some(cluster) = &cluster {
        registry = registry.with_cluster_plugins(cluster.clone());
    }
    let registry = Arc::new(Mutex::new(registry));
    let leadership = config.controllers.leadership.clone();
    let election = config.leader_election.clone().map(|election| {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(leader::run(election, leadership.clone(), async {
            let _ = stopped.await;
        }));
        (stop, task)
    });
    let role_metrics = tokio::spawn({
        let metrics = metrics.clone();
        let mut changes = leadership.changes();
        async move {
            loop {
                metrics.set_role(&changes.borrow_and_update().clone());
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
    });
    let (stop_cluster_plugins, cluster_plugins_stopped) = tokio::sync::watch::channel(false);
    // One identity for everything this replica reports (the default one differs per call).
    let replica = this_replica(&config, &client);
    let (served, served_changes) = tokio::sync::watch::channel(Vec::new());
    let report_task = config.report.clone().map(|target| {
        let mut stopped = cluster_plugins_stopped.clone();
        tokio::spawn(crate::replicas::run(
            crate::replicas::ReportConfig {
                namespace: target.namespace,
                lease: target.lease,
                identity: replica.name.clone(),
                client: replica.client.clone(),
                namespaces: config.controllers.namespaces.clone(),
                shard: config.controllers.shard.as_ref().map(|s| s.shard.clone()),
            },
            served_changes,
            leadership.clone(),
            async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            },
        ))
    });
    let cluster_task = match (&config.cluster_plugins, &cluster) {
        (Some(cluster_config), Some(cluster)) => {
            if config.install_crds && leadership.may_write() {
                operator_plugin::install_crd(&client).await?;
            }
            let mut stopped = cluster_plugins_stopped.clone();
            Some(tokio::spawn(operator_plugin::run(
                operator_plugin::Config {
                    client: client.clone(),
                    cluster: cluster.clone(),
                    store: operator_plugin::DigestStore::new(&cluster_config.store_dir),
                    namespace: cluster_config.namespace.clone(),
                    leadership: leadership.clone(),
                    policy: config.policy.clone(),
                    selector: cluster_config.selector.clone(),
                    replica: replica.clone(),
                },
                cluster.synced(),
                async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                },
            )))
        }
        _ => None,
    };
    let webhook_plugins = crate::webhook::ServedPlugins::default();
    let (webhooks, webhook_task) = match &config.webhooks {
        Some(webhook_config) => {
            let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            let webhooks = crate::webhook::start(
                &replica.client,
                webhook_config,
                webhook_plugins.clone(),
                metrics.clone(),
                until_stopped(cluster_plugins_stopped.clone()),
            )
            .await?;
            // Only a host that installs the CRDs tells the API server about their webhooks.
            let registering = config.install_crds.then(|| {
                tokio::spawn(crate::webhook::keep_registered(
                    replica.client.clone(),
                    webhook_config.clone(),
                    webhooks.clone(),
                    config.controllers.namespaces.clone(),
                    webhook_plugins.clone(),
                    leadership.clone(),
                    until_stopped(cluster_plugins_stopped.clone()),
                ))
            });
            (Some(webhooks), registering)
        }
        None => (None, None),
    };
    let mut gained = leadership.gained();
    let canary_failed = config.controllers.canary_failed.clone();
    let mut supervisor = Supervisor {
        client,
        config,
        metrics: metrics.clone(),
        controllers: HashMap::new(),
        crds_left_to_leader: Default::default(),
        cluster: cluster.clone(),
        webhook_plugins,
        webhooks,
    };
    tokio::pin!(shutdown);
    let mut retry = LoadRetry::default();
    // The first pass scans the directory; later ones wait for a reason to scan again.
    let mut rescan = true;
    loop {
        if rescan {
            // A sync can wait on the API server (a CRD install, a controller that stops):
            // shutdown interrupts it rather than waiting behind it.
            tokio::select! {
                deferred = supervisor.sync(&registry) => retry.after_sync(deferred),
                () = &mut shutdown => break,
            }
            {
                let registry = lock(&registry);
                registry.report_cluster_outcomes();
                served.send_if_modified(|served| {
                    replace_if_changed(served, registry.replica_report())
                });
            }
            if !metrics.is_ready() {
                if supervisor.controllers.is_empty() {
                    tracing::warn!(dir = %dir.display(), "no plugin is being served yet; watching the directory for plugins");
                }
                metrics.set_ready(true);
            }
        }
        rescan = tokio::select! {
            () = &mut shutdown => break,
            Some(()) = dir_changed.recv() => true,
            // A change offered meanwhile is kept by the notifier until this waits again.
            () = cluster_changed(cluster.as_ref()) => true,
            () = retry.due() => true,
            () = canary_failed.notified() => true,
            Some(()) = gained.next() => {
                supervisor.take_over().await;
                true
            }
            Some(tier_up) = tiered_up.recv() => {
                let optimized = lock(&registry).finish_tier_up(tier_up);
                if let Some(optimized) = optimized {
                    supervisor.tier_up(optimized);
                    let report = lock(&registry).replica_report();
                    served.send_if_modified(|served| replace_if_changed(served, report));
                    crate::runtime::release_free_memory();
                }
                false
            }
        };
    }
    tracing::info!("shutting down: no new reconciles; waiting for those in flight");
    metrics.set_ready(false);
    let _ = stop_cluster_plugins.send(true);
    if tokio::time::timeout(SHUTDOWN_GRACE, supervisor.stop_all())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "reconciles still in flight after the shutdown grace period are abandoned"
        );
    }
    for task in [cluster_task, report_task, webhook_task]
        .into_iter()
        .flatten()
    {
        let _ = task.await;
    }
    // Only now that nothing reconciles any more are the Leases given up: the shard's first
    // (the leader then moves its parents at once), then the leader's.
    if let Some(sharding) = sharding {
        sharding.stop().await;
    }
    if let Some((stop, task)) = election {
        let _ = stop.send(());
        let _ = task.await;
    }
    role_metrics.abort();
    Ok(())
}

/// The tasks of a sharded replica: its shard Lease, and the ring it follows.
pub(super) struct ShardTasks {
    pub(super) scope: ShardScope,
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) membership: tokio::task::JoinHandle<()>,
    pub(super) ring: tokio::task::JoinHandle<()>,
    pub(super) readiness: tokio::task::JoinHandle<()>,
}

impl ShardTasks {
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.membership.await;
        let _ = self.ring.await;
        self.readiness.abort();
    }
}

/// Takes this replica's shard Lease and follows the ring (the leader also tidies it).
pub(super) fn start_sharding(
    sharding: Sharding,
    config: &RunConfig,
    metrics: &Arc<Metrics>,
) -> ShardTasks {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let identity = sharding.membership.config.identity.clone();
    let shards = shard::Shards::new(
        sharding.membership.lease_client.clone(),
        &sharding.membership.config.namespace,
        &sharding.ring,
        &identity,
        config.controllers.leadership.clone(),
    );
    let members = shards.members();
    tracing::info!(shard = %sharding.shard, ring = %sharding.ring, "sharding on: reconciling the parents the leader assigns to this shard");
    let ring = tokio::spawn(shards.run(until_stopped(stopped.clone())));
    let membership = tokio::spawn(leader::run(
        sharding.membership.clone(),
        sharding.fence.clone(),
        until_stopped(stopped),
    ));
    let readiness = tokio::spawn({
        let metrics = metrics.clone();
        let shard = sharding.shard.clone();
        let mut changes = sharding.fence.changes();
        async move {
            loop {
                let member = *changes.borrow_and_update() == leader::Role::Leader;
                metrics.set_shard(&shard, member);
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
    });
    ShardTasks {
        scope: ShardScope {
            shard: sharding.shard,
            fence: sharding.fence,
            members,
        },
        stop,
        membership,
        ring,
        readiness,
    }
}

/// This host as `status.replicas` of OperatorPlugins names it: its identity in the election
/// (or the one it would have), writing with the Lease's unfenced client when it has one.
pub(super) fn this_replica(config: &RunConfig, client: &Client) -> operator_plugin::Replica {
    match &config.leader_election {
        Some(election) => operator_plugin::Replica {
            name: election.config.identity.clone(),
            client: election.lease_client.clone(),
        },
        None => operator_plugin::Replica {
            name: leader::default_identity(),
            client: client.clone(),
        },
    }
}

/// Sets `current` to `new` if they differ; whether it did.
fn replace_if_changed<T: PartialEq>(current: &mut T, new: T) -> bool {
    let changed = *current != new;
    if changed {
        *current = new;
    }
    changed
}

pub(super) async fn cluster_changed(cluster: Option<&crate::registry::ClusterPlugins>) {
    match cluster {
        Some(cluster) => cluster.changed().await,
        None => std::future::pending().await,
    }
}
