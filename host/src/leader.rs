//! Leader election with fencing: the hosts of one deployment share a `coordination.k8s.io`
//! Lease, only its holder writes, and a holder that cannot renew stops writing before the lease
//! can expire.
//!
//! The algorithm is client-go's (`tools/leaderelection`): a candidate takes the Lease when it
//! is free (no holder, as a released Lease has) or when its record has not changed for
//! `leaseDurationSeconds` as measured by the candidate's own clock since it last saw the record
//! change (the holder's `renewTime` is never compared with the local clock, so clock skew does
//! not matter); the holder renews every retry period; every change is an update carrying the
//! `resourceVersion` read, so two candidates never both win.
//!
//! Fencing: the holder may write until `renew_deadline` after the instant it *sent* its last
//! successful renewal (monotonic clock). Nobody else may take the Lease before
//! `lease_duration` after they saw that renewal, which is later still, so the two never write
//! at once however long the holder is frozen (SIGSTOP, a stalled node): once it runs again,
//! the clock has moved on and [`Leadership::may_write`] is false before it sends anything. The
//! check is made by the client's HTTP stack ([`fenced_client`]) on every write the host makes,
//! as late as it can be made, and by the reconciler before it starts.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::client::ClientBuilder;
use kube::{Client, ResourceExt};
use tokio::sync::watch;

/// controller-runtime's defaults.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The Lease's default name.
pub const DEFAULT_LEASE_NAME: &str = "operator-host";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "leader election needs lease duration > renew deadline > retry period, got {lease:?}, {renew:?}, {retry:?}"
    )]
    Durations {
        lease: Duration,
        renew: Duration,
        retry: Duration,
    },
    #[error("reading Lease {lease} failed: {source}")]
    Read { lease: String, source: kube::Error },
    #[error("creating Lease {lease} failed: {source}")]
    Create { lease: String, source: kube::Error },
    #[error("updating Lease {lease} failed: {source}")]
    Update { lease: String, source: kube::Error },
    #[error("the request for Lease {lease} took longer than {after:?}")]
    Timeout { lease: String, after: Duration },
    #[error("building the fenced client failed: {0}")]
    Client(#[source] kube::Error),
}

/// How one host takes part in the election.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub namespace: String,
    pub lease_name: String,
    /// Unique per process: a restarted host is a new candidate.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Labels of the Lease when this host creates it (the shard leases are found by theirs).
    pub labels: std::collections::BTreeMap<String, String>,
}

impl ElectionConfig {
    /// A configuration with controller-runtime's durations.
    pub fn new(namespace: &str, lease_name: &str, identity: &str) -> Self {
        ElectionConfig {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            labels: Default::default(),
        }
    }

    /// Fails unless lease duration > renew deadline > retry period (as client-go requires):
    /// the gap between the first two is the fence's margin.
    pub fn validate(&self) -> Result<(), Error> {
        if self.lease_duration > self.renew_deadline && self.renew_deadline > self.retry_period {
            return Ok(());
        }
        Err(Error::Durations {
            lease: self.lease_duration,
            renew: self.renew_deadline,
            retry: self.retry_period,
        })
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.lease_name)
    }
}

/// An election to take part in, with the client that renews the Lease (unfenced: it must
/// write while the fence is closed).
#[derive(Clone)]
pub struct LeaderElection {
    pub config: ElectionConfig,
    pub lease_client: Client,
}

impl std::fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElection")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A change of this host's role, as a trace of its own (see [`crate::telemetry`]).
fn role_change(config: &ElectionConfig, role: &str) -> tracing::Span {
    tracing::info_span!("leader_change", lease = %config.lease(), identity = %config.identity, role)
}

/// The identity a host uses by default: the pod's name (or the hostname), then the process id
/// and its start time, so two processes on one machine, and a container restarted in the same
/// pod (pid 1 again), are different candidates: a restarted host must not take over the Lease
/// of its previous incarnation as if it were still the one holding it.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .or_else(|_| std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()))
        .unwrap_or_else(|_| "operator-host".into());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{base}_{}-{:x}", std::process::id(), started.as_micros())
}

/// Where a host is in the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// No election: this host is the only writer.
    Unelected,
    Leader,
    /// Another host (named, if known) leads; this one keeps its plugins and caches warm.
    Standby {
        leader: Option<String>,
    },
}

/// Whether this host may write now, shared by everything that writes.
#[derive(Debug, Clone)]
pub struct Leadership {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    elected: bool,
    /// While leading: the instant the fence closes.
    writes_until: Mutex<Option<Instant>>,
    role: watch::Sender<Role>,
    /// How many times this host became the leader, or had its fence reopen after it closed: a
    /// loss and a gain between two looks at the role would otherwise go unseen.
    gains: watch::Sender<u64>,
}

impl Leadership {
    /// No election: every write is allowed.
    pub fn unelected() -> Self {
        Self::with(false, Role::Unelected)
    }

    /// An election candidate: no write is allowed until it leads.
    pub fn candidate() -> Self {
        Self::with(true, Role::Standby { leader: None })
    }

    fn with(elected: bool, role: Role) -> Self {
        Leadership {
            state: Arc::new(State {
                elected,
                writes_until: Mutex::new(None),
                role: watch::channel(role).0,
                gains: watch::channel(0).0,
            }),
        }
    }

    /// Whether a write sent now is the leader's (always, without an election).
    pub fn may_write(&self) -> bool {
        if !self.state.elected {
            return true;
        }
        self.writes_until()
            .is_some_and(|until| Instant::now() < until)
    }

    pub fn role(&self) -> Role {
        self.state.role.borrow().clone()
    }

    /// A stream that yields each time this host becomes the leader, or may write again after
    /// its fence closed (at once if it leads).
    pub fn gained(&self) -> futures::stream::BoxStream<'static, ()> {
        use futures::StreamExt;
        let mut gains = self.state.gains.subscribe();
        if *self.state.role.borrow() == Role::Leader {
            gains.mark_changed();
        }
        futures::stream::unfold(gains, |mut gains| async move {
            gains.changed().await.ok()?;
            Some(((), gains))
        })
        .boxed()
    }

    /// The role now and each change of it.
    pub fn changes(&self) -> watch::Receiver<Role> {
        self.state.role.subscribe()
    }

    fn writes_until(&self) -> Option<Instant> {
        *self
            .state
            .writes_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn lead_until(&self, until: Instant) {
        let previous = self
            .state
            .writes_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(until);
        // A renewal that came after the fence had closed reopens it: reconciles that ran
        // meanwhile wrote nothing and will not run again by themselves, so this counts as
        // becoming the leader again.
        let lapsed = previous.is_some_and(|closed_at| Instant::now() >= closed_at);
        let became_leader = self.state.role.send_if_modified(|role| {
            let changed = *role != Role::Leader;
            *role = Role::Leader;
            changed
        });
        if became_leader || lapsed {
            self.state.gains.send_modify(|gains| *gains += 1);
        }
    }

    fn stand_by(&self, leader: Option<String>) {
        *self
            .state
            .writes_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        self.state.role.send_if_modified(|role| {
            let next = Role::Standby { leader };
            let changed = *role != next;
            *role = next;
            changed
        });
    }
}

/// A client whose every write (any method but GET) is refused unless `leadership` allows it
/// at the moment the request enters the HTTP stack.
pub fn fenced_client(config: kube::Config, leadership: &Leadership) -> Result<Client, Error> {
    let fence = leadership.clone();
    let builder = ClientBuilder::try_from(config).map_err(Error::Client)?;
    Ok(builder
        .with_layer(&tower::filter::FilterLayer::new(
            move |request: http::Request<kube::client::Body>| {
                if request.method() == http::Method::GET || fence.may_write() {
                    Ok(request)
                } else {
                    Err(Box::new(NotLeader) as tower::BoxError)
                }
            },
        ))
        .build())
}

/// The error of a write refused by the fence.
#[derive(Debug, thiserror::Error)]
#[error("not written: this host is not the leader (or its lease could not be renewed in time)")]
pub struct NotLeader;

/// What the candidate last saw of the Lease, and when (its own monotonic clock).
#[derive(Debug)]
struct Observed {
    holder: Option<String>,
    resource_version: Option<String>,
    lease_duration: Duration,
    at: Instant,
}

/// Takes part in the election until `stop` resolves, then releases the Lease if it holds it
/// (so a standby takes over within a retry period). Role changes are logged and published on
/// `leadership`.
pub async fn run(election: LeaderElection, leadership: Leadership, stop: impl Future<Output = ()>) {
    let LeaderElection {
        config,
        lease_client,
    } = election;
    let api: Api<Lease> = Api::namespaced(lease_client, &config.namespace);
    let mut observed: Option<Observed> = None;
    tokio::pin!(stop);
    loop {
        let sent = Instant::now();
        let attempt = tokio::time::timeout(
            config.renew_deadline,
            try_acquire_or_renew(&api, &config, &mut observed),
        );
        // While leading, the fence closing is itself an event: say so when it happens, even if
        // the renewal is still hanging.
        let outcome = tokio::select! {
            () = &mut stop => break,
            outcome = attempt => outcome.unwrap_or_else(|_| Err(Error::Timeout { lease: config.lease(), after: config.renew_deadline })),
            () = fence_closed(&leadership) => Err(Error::Timeout { lease: config.lease(), after: config.renew_deadline }),
        };
        let was_leader = leadership.role() == Role::Leader;
        match outcome {
            Ok(true) => {
                leadership.lead_until(sent + config.renew_deadline);
                if !was_leader {
                    role_change(&config, "leader").in_scope(|| {
                        tracing::info!(lease = %config.lease(), identity = %config.identity, "became the leader: reconciling");
                    });
                }
            }
            Ok(false) => {
                let leader = observed.as_ref().and_then(|o| o.holder.clone());
                if was_leader {
                    role_change(&config, "standby").in_scope(|| {
                        tracing::warn!(lease = %config.lease(), leader = ?leader, "lost the lease to another host: stopped writing, standing by");
                    });
                } else if leadership.role()
                    != (Role::Standby {
                        leader: leader.clone(),
                    })
                {
                    role_change(&config, "standby").in_scope(|| {
                        tracing::info!(lease = %config.lease(), leader = ?leader, "standing by: plugins loaded and caches warm, not writing");
                    });
                }
                leadership.stand_by(leader);
            }
            Err(error) => {
                if was_leader && !leadership.may_write() {
                    role_change(&config, "standby").in_scope(|| {
                        tracing::warn!(lease = %config.lease(), %error, deadline = ?config.renew_deadline, "could not renew the lease within the renew deadline: stopped writing, standing by");
                    });
                    leadership.stand_by(None);
                } else {
                    tracing::warn!(lease = %config.lease(), %error, "leader election attempt failed; retrying");
                }
            }
        }
        // A renewal that took most of the renew deadline leaves the fence to close before the
        // next attempt: the host must then stand by at once, so that leading again is a gain
        // (which reconciles every parent) and not a silent return after ignored events.
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(next_attempt(&config, observed.as_ref(), &leadership)) => {}
            () = fence_closed(&leadership) => {
                role_change(&config, "standby").in_scope(|| {
                    tracing::warn!(lease = %config.lease(), deadline = ?config.renew_deadline, "the renew deadline passed before the next renewal: stopped writing, standing by");
                });
                leadership.stand_by(None);
            }
        }
    }
    if leadership.role() == Role::Leader {
        leadership.stand_by(None);
        match release(&api, &config).await {
            Ok(()) => tracing::info!(lease = %config.lease(), "released the lease"),
            Err(error) => {
                tracing::warn!(lease = %config.lease(), %error, "could not release the lease; a standby takes over once it expires")
            }
        }
    }
}

/// Resolves when the fence closes (never while the host does not lead).
async fn fence_closed(leadership: &Leadership) {
    match leadership.writes_until() {
        Some(until) => tokio::time::sleep_until(until.into()).await,
        None => std::future::pending().await,
    }
}

/// When to try again: a retry period from now, or, for a standby, the moment the holder's
/// lease expires if that comes first (so a dead leader is replaced within its lease duration
/// of its last renewal, not up to a retry period later).
fn next_attempt(
    config: &ElectionConfig,
    observed: Option<&Observed>,
    leadership: &Leadership,
) -> Duration {
    let retry = config.retry_period;
    if leadership.role() == Role::Leader {
        return retry;
    }
    match observed {
        Some(o) if o.holder.is_some() => {
            let expires_in = o.lease_duration.saturating_sub(o.at.elapsed());
            retry.min(expires_in + Duration::from_millis(10))
        }
        _ => retry,
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// One round of client-go's `tryAcquireOrRenew`: `Ok(true)` if this host holds the Lease
/// afterwards, `Ok(false)` if another does.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &ElectionConfig,
    observed: &mut Option<Observed>,
) -> Result<bool, Error> {
    let lease_ref = config.lease();
    let current = api
        .get_opt(&config.lease_name)
        .await
        .map_err(|source| Error::Read {
            lease: lease_ref.clone(),
            source,
        })?;
    let Some(mut lease) = current else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.lease_name.clone()),
                namespace: Some(config.namespace.clone()),
                labels: (!config.labels.is_empty()).then(|| config.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(seconds(config.lease_duration)),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                *observed = Some(observe(&created, config));
                Ok(true)
            }
            // Another candidate created it first.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(source) => Err(Error::Create {
                lease: lease_ref,
                source,
            }),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    // The local clock starts when the record is seen to change, not when it was written.
    let changed = observed
        .as_ref()
        .is_none_or(|o| o.resource_version.as_deref() != lease.resource_version().as_deref());
    if changed {
        *observed = Some(observe(&lease, config));
    }
    let seen = observed.as_ref().map(|o| (o.at, o.lease_duration));
    let held_by_me = holder.as_deref() == Some(config.identity.as_str());
    if let (Some(_), false, Some((at, duration))) = (&holder, held_by_me, seen)
        && at.elapsed() < duration
    {
        return Ok(false);
    }
    let mut next = spec.clone();
    next.holder_identity = Some(config.identity.clone());
    next.lease_duration_seconds = Some(seconds(config.lease_duration));
    next.renew_time = Some(now());
    if !held_by_me {
        next.acquire_time = Some(now());
        next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    lease.spec = Some(next);
    // The resourceVersion read makes this a compare-and-swap: of two candidates, one wins.
    match api
        .replace(&config.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(updated) => {
            *observed = Some(observe(&updated, config));
            Ok(true)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(Error::Update {
            lease: lease_ref,
            source,
        }),
    }
}

fn observe(lease: &Lease, config: &ElectionConfig) -> Observed {
    let spec = lease.spec.as_ref();
    Observed {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        resource_version: lease.resource_version(),
        lease_duration: spec
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(config.lease_duration, Duration::from_secs),
        at: Instant::now(),
    }
}

/// Gives the Lease up as client-go's `ReleaseOnCancel` does: no holder, a one-second duration.
async fn release(api: &Api<Lease>, config: &ElectionConfig) -> Result<(), Error> {
    let lease_ref = config.lease();
    let Some(mut lease) = api
        .get_opt(&config.lease_name)
        .await
        .map_err(|source| Error::Read {
            lease: lease_ref.clone(),
            source,
        })?
    else {
        return Ok(());
    };
    let mut spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(now());
    lease.spec = Some(spec);
    api.replace(&config.lease_name, &PostParams::default(), &lease)
        .await
        .map_err(|source| Error::Update {
            lease: lease_ref,
            source,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_election_every_write_is_allowed() {
        assert!(Leadership::unelected().may_write());
        assert!(!Leadership::candidate().may_write());
    }

    #[tokio::test]
    async fn the_fence_closes_at_its_deadline_on_the_monotonic_clock() {
        let leadership = Leadership::candidate();
        leadership.lead_until(Instant::now() + Duration::from_millis(50));
        assert!(leadership.may_write());
        assert_eq!(leadership.role(), Role::Leader);
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(
            !leadership.may_write(),
            "past its deadline the leader must not write"
        );
        leadership.stand_by(Some("other".into()));
        assert!(!leadership.may_write());
    }

    #[tokio::test]
    async fn gained_yields_on_each_transition_to_leader() {
        use futures::StreamExt;
        let leadership = Leadership::candidate();
        let mut gained = leadership.gained();
        let far = Instant::now() + Duration::from_secs(60);
        leadership.lead_until(far);
        assert_eq!(gained.next().await, Some(()));
        leadership.stand_by(None);
        leadership.lead_until(far);
        tokio::time::timeout(Duration::from_secs(1), gained.next())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_renewal_after_the_fence_closed_counts_as_a_gain() {
        use futures::StreamExt;
        let leadership = Leadership::candidate();
        let mut gained = leadership.gained();
        leadership.lead_until(Instant::now() + Duration::from_millis(20));
        assert_eq!(gained.next().await, Some(()));
        // Renewed in time: still the same tenure, nothing to reconcile again.
        leadership.lead_until(Instant::now() + Duration::from_millis(20));
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(
            !leadership.may_write(),
            "the renewal came late: the fence closed"
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(1), gained.next())
                .await
                .is_err(),
            "a fence closing by time is not a gain"
        );
        leadership.lead_until(Instant::now() + Duration::from_secs(60));
        assert!(leadership.may_write());
        tokio::time::timeout(Duration::from_secs(1), gained.next())
            .await
            .expect("reopening the fence must reconcile everything again");
    }

    #[test]
    fn durations_must_leave_the_fence_a_margin() {
        let mut config = ElectionConfig::new("ns", "l", "me");
        config.validate().unwrap();
        config.renew_deadline = config.lease_duration;
        assert!(config.validate().is_err());
    }
}
