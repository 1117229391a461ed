//! Sharding (`run --shard`): the parents of every plugin spread over the live replicas of one
//! host deployment; each replica watches, caches and reconciles only its own, and a parent
//! moves between replicas only through a drain handshake.
//!
//! The design is timebertt/kubernetes-controller-sharding's, with the host's leader as the
//! sharder:
//! - **Membership.** Each replica holds a Lease of its own, `<ring>-shard-<shard>`, labelled
//!   with the ring ([`RING_LABEL`]) and its shard ([`SHARD_LABEL`]), and renews it with the
//!   leader election's code ([`leader::run`]), so it has the same fence: a replica writes only
//!   while its own lease is fresh, and stops before anyone could see the lease expire.
//! - **Assignment.** The leader labels each parent with a shard ([`SHARD_LABEL`]), chosen by
//!   rendezvous hashing of the parent's identity over the live shards ([`Members::pick`]): a
//!   shard that joins or leaves moves only the parents it gains or loses. A replica's parent
//!   and child watches select its own label, so watch and cache cost split with the work; the
//!   host labels every child it applies with its parent's shard.
//! - **Moves.** A parent leaves a live shard only through the drain handshake: the leader
//!   labels it [`DRAIN_LABEL`]; the owner, in its reconciler (so after any reconcile of that
//!   parent in flight, and before any other), removes both labels ([`ack_drain`]); only then,
//!   seeing the parent unassigned, does the leader give it to its new shard. A parent of a
//!   shard whose lease expired moves at once, but only after the leader has taken that lease
//!   over ([`Shards::take_over`]): the replica, should it run again, cannot renew it, so its
//!   fence stays closed. Every label change is a merge patch carrying the resourceVersion
//!   read (a compare-and-swap), so two leaders, or a leader and an owner acking, never both
//!   act on the same state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::api::api_for;
use crate::leader::{self, Leadership};
use crate::metrics::{AssignmentLabels, Metrics, PluginLabels, ShardLabels};

/// The label of a parent (and of the children the host applies for it): the shard that owns
/// it. Also on each shard's Lease, naming its shard.
pub const SHARD_LABEL: &str = "operator-host.dev/shard";
/// The label with which the leader asks a parent's shard to give it up.
pub const DRAIN_LABEL: &str = "operator-host.dev/drain";
/// The label of the shard Leases of one host deployment: the ring's name (its leader Lease's).
pub const RING_LABEL: &str = "operator-host.dev/shard-ring";
/// The holder the leader writes into a dead shard's Lease when it takes it over.
const TAKEN_OVER_BY: &str = "sharder:";
/// How long a taken-over or released shard Lease stays before the leader deletes it.
const GONE_LEASE_KEPT: Duration = Duration::from_secs(60);
/// How often the ring is looked at again (an expired Lease is noticed within this).
const RING_PERIOD: Duration = Duration::from_secs(1);
/// How often the leader looks at every parent again, to retry what failed (changes of the
/// ring and of parents are acted on as they come).
const RESHARD_PERIOD: Duration = Duration::from_secs(10);
/// Label patches the leader sends at once.
const CONCURRENT_PATCHES: usize = 16;
/// How long a parent may stay without a live shard before the leader reports it (log,
/// `/readyz`): longer than a label patch and the watch event that shows it take, with room
/// for a dead shard's Lease to be taken over.
const PLACEMENT_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("labelling {what} {name:?} for sharding failed: {source}")]
    Label {
        what: String,
        name: String,
        source: kube::Error,
    },
    #[error("taking over the Lease {lease} of dead shard {shard} failed: {source}")]
    TakeOver {
        lease: String,
        shard: String,
        source: kube::Error,
    },
}

/// One replica's place in the ring: its shard and the Lease that makes it a member.
#[derive(Clone)]
pub struct Sharding {
    /// The ring: the name of the deployment's leader Lease.
    pub ring: String,
    /// This replica's shard name (a label value).
    pub shard: String,
    /// The election of its shard Lease (it is the only candidate).
    pub membership: leader::LeaderElection,
    /// Open while its shard Lease is fresh: every write of the replica goes through it.
    pub fence: Leadership,
}

impl std::fmt::Debug for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharding")
            .field("ring", &self.ring)
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

impl Sharding {
    /// The shard of `identity` in `ring`, its Lease in `election`'s namespace with the
    /// election's durations.
    pub fn new(ring: &str, election: &leader::ElectionConfig, lease_client: Client) -> Self {
        let shard = shard_name(&election.identity);
        let mut config = election.clone();
        config.lease_name = lease_name(ring, &shard);
        config.labels = BTreeMap::from([
            (RING_LABEL.to_string(), ring.to_string()),
            (SHARD_LABEL.to_string(), shard.clone()),
        ]);
        Sharding {
            ring: ring.into(),
            shard,
            membership: leader::LeaderElection {
                config,
                lease_client,
            },
            fence: Leadership::candidate(),
        }
    }

    /// The label selector of what this shard owns.
    pub fn selector(&self) -> String {
        format!("{SHARD_LABEL}={}", self.shard)
    }
}

/// The Lease of `shard` in `ring`.
pub fn lease_name(ring: &str, shard: &str) -> String {
    format!("{ring}-shard-{shard}")
}

/// A replica's shard name: its identity if that is a DNS label already (as a pod name is),
/// otherwise the identity made one, with a hash of it so that two identities never meet.
pub fn shard_name(identity: &str) -> String {
    let is_label = |s: &str| {
        !s.is_empty()
            && s.len() <= 40
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    if is_label(identity) {
        return identity.to_string();
    }
    let digest = hex::encode(&Sha256::digest(identity.as_bytes())[..4]);
    let base: String = identity
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .take(40)
        .collect();
    let base = base.trim_matches('-');
    if base.is_empty() {
        digest
    } else {
        format!("{base}-{digest}")
    }
}

/// What the ring knows of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardState {
    /// Its replica renews its Lease.
    Live,
    /// Its Lease was not renewed within its duration; its parents wait until the leader has
    /// taken the Lease over.
    Expired,
    /// Released, taken over, or unknown: its replica writes no more, its parents move at once.
    Gone,
}

/// The shards of the ring as the watch of their Leases shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Whether the Leases have been listed: before, nothing is known to be gone.
    pub synced: bool,
    pub shards: BTreeMap<String, ShardState>,
}

impl Members {
    pub fn state(&self, shard: &str) -> ShardState {
        self.shards.get(shard).copied().unwrap_or(ShardState::Gone)
    }

    pub fn live(&self) -> impl Iterator<Item = &str> {
        self.shards
            .iter()
            .filter(|(_, state)| **state == ShardState::Live)
            .map(|(shard, _)| shard.as_str())
    }

    /// The live shard `key` belongs to: the highest hash of shard and key (rendezvous
    /// hashing), so a shard joining takes only keys from others, and one leaving gives only
    /// its own.
    pub fn pick(&self, key: &str) -> Option<&str> {
        self.live().max_by_key(|shard| {
            let digest = Sha256::new()
                .chain_update(shard.as_bytes())
                .chain_update([0])
                .chain_update(key.as_bytes())
                .finalize();
            let mut first = [0u8; 8];
            first.copy_from_slice(&digest[..8]);
            (u64::from_be_bytes(first), *shard)
        })
    }
}

/// What the leader does about one parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Keep,
    /// Label it with this shard (and drop a drain label).
    Assign {
        to: String,
        reason: &'static str,
    },
    /// Ask its live shard to give it up.
    Drain,
    /// It is to stay where it is after all: withdraw the drain request.
    Undrain,
}

/// The sharding of one parent: `current` its shard label, `draining` whether it carries the
/// drain label, `key` its identity. With `handshake` off (fault-injection builds only), a
/// parent leaves a live shard without waiting for it.
pub fn decide(
    members: &Members,
    key: &str,
    current: Option<&str>,
    draining: bool,
    handshake: bool,
) -> Decision {
    let Some(desired) = members.pick(key) else {
        return Decision::Keep;
    };
    let assign = |reason| Decision::Assign {
        to: desired.to_string(),
        reason,
    };
    match current {
        None => assign("unassigned"),
        Some(current) if current == desired => {
            if draining {
                Decision::Undrain
            } else {
                Decision::Keep
            }
        }
        Some(current) => match members.state(current) {
            ShardState::Live if !handshake => assign("moved"),
            ShardState::Live if draining => Decision::Keep,
            ShardState::Live => Decision::Drain,
            ShardState::Expired => Decision::Keep,
            ShardState::Gone => assign("shard-gone"),
        },
    }
}

/// Whether a reconcile of `parent` on `shard` may go on, must ack a drain, or must leave the
/// parent alone (another shard's, as a cache that lags may still show it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    Owned,
    Draining,
    NotOwned,
}

pub fn ownership(parent: &DynamicObject, shard: &str) -> Ownership {
    let labels = parent.labels();
    if labels.get(SHARD_LABEL).map(String::as_str) != Some(shard) {
        Ownership::NotOwned
    } else if labels.contains_key(DRAIN_LABEL) {
        Ownership::Draining
    } else {
        Ownership::Owned
    }
}

/// The owner's half of the handshake: removes the parent's shard and drain labels if it is
/// still the version the reconciler saw (a conflict means it changed: the watch brings the
/// change, or the caller tries again). Returns whether it was given up; a parent that is gone
/// counts as given up.
pub async fn ack_drain(api: &Api<DynamicObject>, parent: &DynamicObject) -> Result<bool, Error> {
    let patch = json!({"metadata": {
        "resourceVersion": parent.resource_version(),
        "labels": {SHARD_LABEL: null, DRAIN_LABEL: null},
    }});
    match api
        .patch(
            &parent.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(Error::Label {
            what: "parent".into(),
            name: parent.name_any(),
            source,
        }),
    }
}

fn lease_duration(lease: &Lease) -> Duration {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.lease_duration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .map_or(leader::DEFAULT_LEASE_DURATION, Duration::from_secs)
}

/// A shard Lease as the watch last showed it, and when it was seen to change (this host's
/// clock: the holder's renewTime is never compared with it).
struct TrackedLease {
    lease: Lease,
    changed_at: Instant,
}

/// The Leases of a ring, followed by every replica; the leader also takes over expired ones
/// and deletes those long gone.
pub struct Shards {
    api: Api<Lease>,
    ring: String,
    leadership: Leadership,
    /// The leader's identity, written as the holder of the Leases it takes over.
    identity: String,
    leases: HashMap<String, TrackedLease>,
    members: watch::Sender<Members>,
}

impl Shards {
    /// Follows the shard Leases of `ring` in `namespace`; `leadership` says when this host
    /// leads (and so takes over dead shards' Leases).
    pub fn new(
        client: Client,
        namespace: &str,
        ring: &str,
        identity: &str,
        leadership: Leadership,
    ) -> Self {
        Shards {
            api: Api::namespaced(client, namespace),
            ring: ring.into(),
            leadership,
            identity: identity.into(),
            leases: HashMap::new(),
            members: watch::channel(Members::default()).0,
        }
    }

    /// The ring as it is now and as it changes.
    pub fn members(&self) -> watch::Receiver<Members> {
        self.members.subscribe()
    }

    /// Follows the Leases until `stop` resolves.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        let selector = format!("{RING_LABEL}={}", self.ring);
        let mut leases = watcher(
            self.api.clone(),
            watcher::Config::default().labels(&selector),
        )
        .default_backoff()
        .boxed();
        let mut listing: Option<HashMap<String, TrackedLease>> = None;
        tokio::pin!(stop);
        loop {
            let wake = self.next_expiry();
            tokio::select! {
                () = &mut stop => return,
                event = leases.next() => match event {
                    Some(Ok(watcher::Event::Init)) => listing = Some(HashMap::new()),
                    Some(Ok(watcher::Event::InitApply(lease))) => {
                        let tracked = self.track(lease);
                        if let (Some(listing), Some((name, tracked))) = (listing.as_mut(), tracked) {
                            listing.insert(name, tracked);
                        }
                    }
                    Some(Ok(watcher::Event::InitDone)) => {
                        if let Some(listed) = listing.take() {
                            self.leases = listed;
                        }
                        self.members.send_modify(|m| m.synced = true);
                    }
                    Some(Ok(watcher::Event::Apply(lease))) => {
                        if let Some((name, tracked)) = self.track(lease) {
                            self.leases.insert(name, tracked);
                        }
                    }
                    Some(Ok(watcher::Event::Delete(lease))) => {
                        self.leases.remove(&lease.name_any());
                    }
                    Some(Err(error)) => tracing::warn!(%error, ring = %self.ring, "watching the shard Leases failed; retrying"),
                    None => return,
                },
                () = tokio::time::sleep_until(wake.into()) => {}
            }
            self.publish();
            if self.leadership.may_write() {
                self.tidy().await;
                self.publish();
            }
        }
    }

    /// When to look at the Leases again: the moment the first live one expires (so a dead
    /// shard is noticed at once), or after [`RING_PERIOD`].
    fn next_expiry(&self) -> Instant {
        let later = Instant::now() + RING_PERIOD;
        self.leases
            .values()
            .filter_map(|tracked| match Self::state_of(tracked) {
                Some((_, ShardState::Live)) => {
                    Some(tracked.changed_at + lease_duration(&tracked.lease))
                }
                _ => None,
            })
            .min()
            .map_or(later, |expiry| expiry.min(later))
    }

    /// The Lease with the instant it was seen to change (kept if its resourceVersion is the
    /// one already seen).
    fn track(&self, lease: Lease) -> Option<(String, TrackedLease)> {
        let name = lease.name_any();
        let changed_at = match self.leases.get(&name) {
            Some(known) if known.lease.resource_version() == lease.resource_version() => {
                known.changed_at
            }
            _ => Instant::now(),
        };
        Some((name, TrackedLease { lease, changed_at }))
    }

    /// The state of the shard a Lease belongs to.
    fn state_of(tracked: &TrackedLease) -> Option<(String, ShardState)> {
        let shard = tracked.lease.labels().get(SHARD_LABEL)?.clone();
        let spec = tracked.lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        if holder.is_empty() || shard_name(&holder) != shard {
            return Some((shard, ShardState::Gone));
        }
        let state = if tracked.changed_at.elapsed() < lease_duration(&tracked.lease) {
            ShardState::Live
        } else {
            ShardState::Expired
        };
        Some((shard, state))
    }

    fn publish(&self) {
        let shards: BTreeMap<String, ShardState> =
            self.leases.values().filter_map(Self::state_of).collect();
        self.members.send_if_modified(|members| {
            let changed = members.shards != shards;
            if changed {
                tracing::info!(ring = %self.ring, shards = ?shards, "shard ring changed");
                members.shards = shards;
            }
            changed
        });
    }

    /// The leader's care of the Leases: takes over those expired, deletes those gone for long.
    async fn tidy(&mut self) {
        let mut taken = Vec::new();
        let mut deleted = Vec::new();
        for (name, tracked) in &self.leases {
            match Self::state_of(tracked) {
                Some((shard, ShardState::Expired)) => {
                    match self.take_over(&tracked.lease, &shard).await {
                        Ok(Some(lease)) => taken.push((name.clone(), lease)),
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(%error, "cannot take over a dead shard's Lease; retrying")
                        }
                    }
                }
                Some((_, ShardState::Gone)) if tracked.changed_at.elapsed() > GONE_LEASE_KEPT => {
                    deleted.push((name.clone(), tracked.lease.resource_version()));
                }
                _ => {}
            }
        }
        for (name, lease) in taken {
            tracing::info!(lease = %name, "took over the Lease of a dead shard: its parents move to the live shards");
            // Known gone from now on, without waiting for the watch to say so.
            if let Some((name, tracked)) = self.track(lease) {
                self.leases.insert(name, tracked);
            }
        }
        for (name, resource_version) in deleted {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version,
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            if let Err(error) = self.api.delete(&name, &params).await {
                tracing::debug!(%error, lease = %name, "cannot delete a gone shard's Lease");
            }
        }
    }

    /// Makes the leader the holder of an expired shard Lease (compare-and-swap on the version
    /// seen), so its replica can never renew it: its fence stays closed. Returns the Lease
    /// taken over; `None` if it changed meanwhile.
    async fn take_over(&self, lease: &Lease, shard: &str) -> Result<Option<Lease>, Error> {
        let mut next = lease.clone();
        let spec = next.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(format!("{TAKEN_OVER_BY}{}", self.identity));
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        ));
        match self
            .api
            .replace(&lease.name_any(), &PostParams::default(), &next)
            .await
        {
            Ok(taken) => Ok(Some(taken)),
            // It changed since: renewed after all, or someone else took it.
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(None),
            Err(source) => Err(Error::TakeOver {
                lease: lease.name_any(),
                shard: shard.into(),
                source,
            }),
        }
    }
}

/// A parent as the leader's metadata watch shows it.
#[derive(Debug, Clone)]
struct ParentMeta {
    name: String,
    /// `None` for a cluster-scoped parent kind.
    namespace: Option<String>,
    resource_version: Option<String>,
    shard: Option<String>,
    draining: bool,
}

/// The sharder of one plugin's parents (in one namespace, or all): while this host leads, it
/// watches their metadata (every parent, whatever its shard) and labels each with its shard.
pub struct Sharder {
    client: Client,
    /// The parent kind: each label patch goes to its parent's own namespace.
    parent_kind: crate::kinds::Kind,
    /// The parents, metadata only: what the leader watches.
    metadata: Api<PartialObjectMeta<DynamicObject>>,
    plugin: String,
    /// What `/readyz` names while parents of this sharder cannot be placed.
    unavailable_as: String,
    /// The parent kind's `group/kind`, part of each parent's hashing key.
    kind: String,
    members: watch::Receiver<Members>,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    /// The shards whose parent counts were last reported.
    reported: Vec<String>,
    /// The parents without a live shard, and since when.
    unplaced: Unplaced,
}

impl Sharder {
    /// The sharder of `plugin`'s parents of `kind` in `namespace` (or all); `/readyz` names
    /// its parents that cannot be placed `unavailable_as`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: &Client,
        plugin: &str,
        kind: &crate::kinds::Kind,
        namespace: Option<&str>,
        members: watch::Receiver<Members>,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        unavailable_as: String,
    ) -> Self {
        let resource = kind.api_resource();
        let metadata = match namespace {
            Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &resource),
            _ => Api::all_with(client.clone(), &resource),
        };
        Sharder {
            client: client.clone(),
            parent_kind: kind.clone(),
            metadata,
            plugin: plugin.into(),
            unavailable_as,
            kind: format!("{}/{}", kind.group, kind.kind),
            members,
            leadership,
            metrics,
            reported: Vec::new(),
            unplaced: Unplaced::default(),
        }
    }

    /// The API of one parent: its namespace's.
    fn parent_api(&self, parent: &ParentMeta) -> Api<DynamicObject> {
        api_for(&self.client, &self.parent_kind, parent.namespace.as_deref())
    }

    /// Shards the parents whenever this host leads, until `stop` resolves.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut role = self.leadership.changes();
        loop {
            let leads = tokio::select! {
                () = &mut stop => return,
                leads = role.wait_for(|_| self.leadership.may_write()) => leads.is_ok(),
            };
            if !leads {
                return;
            }
            tokio::select! {
                () = &mut stop => {
                    self.stop_reporting();
                    return;
                }
                () = self.while_leading() => {}
            }
            // Led no more: another replica places the parents now.
            self.stop_reporting();
            // Wait for the next term.
            let _ = role.changed().await;
        }
    }

    async fn while_leading(&mut self) {
        tracing::info!(plugin = %self.plugin, "sharding the plugin's parents");
        let mut parents = watcher(self.metadata.clone(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut known: HashMap<String, ParentMeta> = HashMap::new();
        let mut listing: Option<HashMap<String, ParentMeta>> = None;
        let mut synced = false;
        let mut tick = tokio::time::interval(RESHARD_PERIOD);
        let mut dirty: HashSet<String> = HashSet::new();
        loop {
            let mut everything = false;
            tokio::select! {
                event = parents.next() => {
                    let mut event = event;
                    // Take every event already there before acting, so a burst is one pass.
                    loop {
                        match event {
                            Some(Ok(event)) => {
                                apply_event(event, &mut known, &mut listing, &mut synced, &mut dirty);
                            }
                            Some(Err(error)) => {
                                tracing::warn!(%error, plugin = %self.plugin, "watching the parents to shard failed; retrying");
                            }
                            None => return,
                        }
                        match parents.next().now_or_never() {
                            Some(next) => event = next,
                            None => break,
                        }
                    }
                }
                changed = self.members.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    everything = true;
                }
                _ = tick.tick() => everything = true,
            }
            if !self.leadership.may_write() {
                return;
            }
            let members = self.members.borrow().clone();
            if !synced || !members.synced {
                continue;
            }
            let keys: Vec<String> = if everything {
                dirty.clear();
                known.keys().cloned().collect()
            } else {
                dirty.drain().collect()
            };
            let decisions: Vec<(ParentMeta, Decision)> = keys
                .iter()
                .filter_map(|key| {
                    let parent = known.get(key)?;
                    let decision = decide(
                        &members,
                        &format!("{}/{key}", self.kind),
                        parent.shard.as_deref(),
                        parent.draining,
                        !crate::faults::shard_moves_skip_the_drain(),
                    );
                    (decision != Decision::Keep).then(|| (parent.clone(), decision))
                })
                .collect();
            let this = &*self;
            let failures: Vec<(String, String)> = futures::stream::iter(decisions)
                .map(|(parent, decision)| async move {
                    let error = this.carry_out(&parent, &decision).await.err()?;
                    tracing::warn!(%error, "resharding a parent failed; retrying");
                    Some((parent_key_of(&parent), error.to_string()))
                })
                .buffer_unordered(CONCURRENT_PATCHES)
                .filter_map(futures::future::ready)
                .collect()
                .await;
            self.count_parents(&known);
            self.report_unplaced(&known, &members, failures);
        }
    }

    /// Reports the parents that have no live shard (a log line, a gauge, `/readyz` on the
    /// leader) once they stayed so past [`PLACEMENT_GRACE`]: a parent nobody can place is
    /// reconciled by no replica, which must not go unseen.
    fn report_unplaced(
        &mut self,
        known: &HashMap<String, ParentMeta>,
        members: &Members,
        failures: Vec<(String, String)>,
    ) {
        let unplaced = known.iter().filter_map(|(key, parent)| {
            let placed = parent
                .shard
                .as_deref()
                .is_some_and(|shard| members.state(shard) != ShardState::Gone);
            (!placed).then_some(key.as_str())
        });
        let newly_stuck = self.unplaced.observe(Instant::now(), unplaced, failures);
        self.metrics
            .shard_unassigned
            .get_or_create(&PluginLabels {
                plugin: self.plugin.clone(),
            })
            .set(i64::try_from(self.unplaced.len()).unwrap_or(i64::MAX));
        let no_live_shard = members.live().next().is_none();
        if !newly_stuck.is_empty() {
            let examples: Vec<String> = newly_stuck
                .iter()
                .take(5)
                .map(|key| self.unplaced.describe(key, no_live_shard))
                .collect();
            tracing::error!(
                plugin = %self.plugin,
                count = newly_stuck.len(),
                examples = %examples.join("; "),
                "parents have no live shard: no replica reconciles them",
            );
        }
        let stuck = self.unplaced.stuck(Instant::now());
        let problem = stuck.first().map(|key| {
            format!(
                "{} parents have had no live shard for over {}s (e.g. {})",
                stuck.len(),
                PLACEMENT_GRACE.as_secs(),
                self.unplaced.describe(key, no_live_shard)
            )
        });
        self.metrics.set_unavailable(&self.unavailable_as, problem);
    }

    /// Gives up what only the leader reports.
    fn stop_reporting(&mut self) {
        self.unplaced = Unplaced::default();
        self.metrics.set_unavailable(&self.unavailable_as, None);
        self.metrics.shard_unassigned.remove(&PluginLabels {
            plugin: self.plugin.clone(),
        });
        for shard in std::mem::take(&mut self.reported) {
            self.metrics.shard_assigned.remove(&ShardLabels {
                plugin: self.plugin.clone(),
                shard,
            });
        }
    }

    async fn carry_out(&self, parent: &ParentMeta, decision: &Decision) -> Result<(), Error> {
        let labels = match decision {
            Decision::Keep => return Ok(()),
            Decision::Assign { to, .. } => json!({SHARD_LABEL: to, DRAIN_LABEL: null}),
            Decision::Drain => json!({DRAIN_LABEL: "true"}),
            Decision::Undrain => json!({DRAIN_LABEL: null}),
        };
        let patch = json!({"metadata": {
            "resourceVersion": parent.resource_version,
            "labels": labels,
        }});
        match self
            .parent_api(parent)
            .patch(&parent.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // Changed since the watch showed it: the watch brings the change, decided anew.
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
                return Ok(());
            }
            Err(source) => {
                return Err(Error::Label {
                    what: format!("{} parent", self.plugin),
                    name: parent.name.clone(),
                    source,
                });
            }
        }
        let reason = match decision {
            Decision::Assign { reason, .. } => *reason,
            Decision::Drain => "drain",
            Decision::Undrain => "undrain",
            Decision::Keep => return Ok(()),
        };
        self.metrics
            .shard_assignments
            .get_or_create(&AssignmentLabels {
                plugin: self.plugin.clone(),
                reason: reason.into(),
            })
            .inc();
        Ok(())
    }

    /// The leader's view of how many parents each shard holds.
    fn count_parents(&mut self, known: &HashMap<String, ParentMeta>) {
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        // Parents without a shard are counted by `shard_unassigned`, not as a shard "".
        for shard in known.values().filter_map(|parent| parent.shard.clone()) {
            *counts.entry(shard).or_default() += 1;
        }
        let labels = |shard: &str| ShardLabels {
            plugin: self.plugin.clone(),
            shard: shard.to_string(),
        };
        for gone in self.reported.iter().filter(|s| !counts.contains_key(*s)) {
            self.metrics.shard_assigned.remove(&labels(gone));
        }
        for (shard, count) in &counts {
            self.metrics
                .shard_assigned
                .get_or_create(&labels(shard))
                .set(*count);
        }
        self.reported = counts.into_keys().collect();
    }
}

fn parent_key(meta: &PartialObjectMeta<DynamicObject>) -> String {
    format!(
        "{}/{}",
        meta.namespace().unwrap_or_default(),
        meta.name_any()
    )
}

fn parent_key_of(parent: &ParentMeta) -> String {
    format!(
        "{}/{}",
        parent.namespace.as_deref().unwrap_or_default(),
        parent.name
    )
}

/// The parents the leader has not placed on a live shard: since when, and the last error of
/// a label patch for each, if one failed.
#[derive(Debug, Default)]
pub struct Unplaced {
    since: HashMap<String, (Instant, Option<String>)>,
    /// When [`Unplaced::observe`] last ran: what was stuck then was reported then.
    observed: Option<Instant>,
}

impl Unplaced {
    /// Takes the parents unplaced now (those not listed are placed, or gone) and the label
    /// patches that failed in this pass; returns the parents that have just outstayed
    /// [`PLACEMENT_GRACE`].
    pub fn observe<'a>(
        &mut self,
        now: Instant,
        unplaced: impl IntoIterator<Item = &'a str>,
        failures: Vec<(String, String)>,
    ) -> Vec<String> {
        let was_stuck: HashSet<String> = match self.observed {
            Some(then) => self.stuck(then).into_iter().collect(),
            None => HashSet::new(),
        };
        self.observed = Some(now);
        let mut next = HashMap::new();
        for key in unplaced {
            let entry = self.since.remove(key).unwrap_or((now, None));
            next.insert(key.to_string(), entry);
        }
        for (key, error) in failures {
            if let Some((_, last_error)) = next.get_mut(&key) {
                *last_error = Some(error);
            }
        }
        self.since = next;
        let mut newly: Vec<String> = self
            .stuck(now)
            .into_iter()
            .filter(|key| !was_stuck.contains(key))
            .collect();
        newly.sort();
        newly
    }

    /// The parents unplaced for longer than [`PLACEMENT_GRACE`] at `now`, sorted.
    pub fn stuck(&self, now: Instant) -> Vec<String> {
        let mut stuck: Vec<String> = self
            .since
            .iter()
            .filter(|(_, (since, _))| now.saturating_duration_since(*since) > PLACEMENT_GRACE)
            .map(|(key, _)| key.clone())
            .collect();
        stuck.sort();
        stuck
    }

    pub fn len(&self) -> usize {
        self.since.len()
    }

    pub fn is_empty(&self) -> bool {
        self.since.is_empty()
    }

    /// `key` and why it has no shard.
    fn describe(&self, key: &str, no_live_shard: bool) -> String {
        let why = match self.since.get(key) {
            Some((_, Some(error))) => error.clone(),
            _ if no_live_shard => "no replica holds a live shard Lease".into(),
            _ => "not labelled yet".into(),
        };
        format!("{key}: {why}")
    }
}

fn parent_meta(meta: &PartialObjectMeta<DynamicObject>) -> ParentMeta {
    let labels = meta.labels();
    ParentMeta {
        name: meta.name_any(),
        namespace: meta.namespace(),
        resource_version: meta.resource_version(),
        shard: labels.get(SHARD_LABEL).cloned(),
        draining: labels.contains_key(DRAIN_LABEL),
    }
}

/// Folds one event of the parents' metadata watch into what the leader knows.
fn apply_event(
    event: watcher::Event<PartialObjectMeta<DynamicObject>>,
    known: &mut HashMap<String, ParentMeta>,
    listing: &mut Option<HashMap<String, ParentMeta>>,
    synced: &mut bool,
    dirty: &mut HashSet<String>,
) {
    match event {
        watcher::Event::Init => *listing = Some(HashMap::new()),
        watcher::Event::InitApply(meta) => {
            if let Some(listing) = listing.as_mut() {
                listing.insert(parent_key(&meta), parent_meta(&meta));
            }
        }
        watcher::Event::InitDone => {
            if let Some(listed) = listing.take() {
                *known = listed;
            }
            *synced = true;
            dirty.extend(known.keys().cloned());
        }
        watcher::Event::Apply(meta) => {
            let key = parent_key(&meta);
            known.insert(key.clone(), parent_meta(&meta));
            dirty.insert(key);
        }
        watcher::Event::Delete(meta) => {
            let key = parent_key(&meta);
            known.remove(&key);
            dirty.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(shards: &[(&str, ShardState)]) -> Members {
        Members {
            synced: true,
            shards: shards.iter().map(|(s, st)| (s.to_string(), *st)).collect(),
        }
    }

    #[test]
    fn a_shard_name_is_a_label_value_and_an_identity_already_one_is_kept() {
        assert_eq!(shard_name("host-a"), "host-a");
        let name = shard_name("operator-host-7d9f_12-18f3a2b4c5d6e");
        assert!(
            name.starts_with("operator-host-7d9f-12-18f3a2b4c5d6e-"),
            "{name}"
        );
        assert!(name.len() <= 63);
        assert_ne!(
            shard_name("A_b"),
            shard_name("a-b"),
            "identities never meet"
        );
        assert_eq!(shard_name("___").len(), 8);
    }

    #[test]
    fn rendezvous_hashing_moves_only_what_a_joining_or_leaving_shard_gains_or_loses() {
        let three = members(&[
            ("a", ShardState::Live),
            ("b", ShardState::Live),
            ("c", ShardState::Live),
        ]);
        let keys: Vec<String> = (0..3000).map(|i| format!("ns/m-{i}")).collect();
        let before: Vec<&str> = keys.iter().map(|k| three.pick(k).unwrap()).collect();
        for shard in ["a", "b", "c"] {
            let share = before.iter().filter(|s| **s == shard).count();
            assert!(
                (800..1200).contains(&share),
                "{shard} holds {share} of 3000"
            );
        }
        let mut four = three.clone();
        four.shards.insert("d".into(), ShardState::Live);
        for (key, was) in keys.iter().zip(&before) {
            let now = four.pick(key).unwrap();
            assert!(now == *was || now == "d", "{key} moved {was} -> {now}");
        }
        let mut two = three.clone();
        two.shards.insert("c".into(), ShardState::Expired);
        for (key, was) in keys.iter().zip(&before) {
            let now = two.pick(key).unwrap();
            assert!(*was == "c" || now == *was, "{key} moved {was} -> {now}");
        }
    }

    #[test]
    fn a_parent_leaves_a_live_shard_only_through_a_drain() {
        let ring = members(&[("a", ShardState::Live), ("b", ShardState::Live)]);
        let key = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| ring.pick(k) == Some("b"))
            .unwrap();
        let decide = |current, draining| decide(&ring, &key, current, draining, true);
        assert_eq!(
            decide(None, false),
            Decision::Assign {
                to: "b".into(),
                reason: "unassigned"
            }
        );
        assert_eq!(decide(Some("b"), false), Decision::Keep);
        assert_eq!(decide(Some("a"), false), Decision::Drain);
        assert_eq!(decide(Some("a"), true), Decision::Keep, "waits for the ack");
        assert_eq!(decide(Some("b"), true), Decision::Undrain);
        assert_eq!(
            super::decide(&ring, &key, Some("a"), false, false),
            Decision::Assign {
                to: "b".into(),
                reason: "moved"
            },
            "without the handshake (fault injection) it moves at once"
        );
    }

    #[test]
    fn a_dead_shards_parents_wait_for_its_lease_to_be_taken_over_then_move_at_once() {
        let mut ring = members(&[("a", ShardState::Live), ("c", ShardState::Expired)]);
        assert_eq!(decide(&ring, "k", Some("c"), false, true), Decision::Keep);
        ring.shards.insert("c".into(), ShardState::Gone);
        assert_eq!(
            decide(&ring, "k", Some("c"), true, true),
            Decision::Assign {
                to: "a".into(),
                reason: "shard-gone"
            }
        );
        assert_eq!(
            decide(&ring, "k", Some("never-seen"), false, true),
            Decision::Assign {
                to: "a".into(),
                reason: "shard-gone"
            }
        );
        let empty = members(&[("c", ShardState::Expired)]);
        assert_eq!(decide(&empty, "k", None, false, true), Decision::Keep);
    }

    #[test]
    fn a_parent_left_without_a_live_shard_is_reported_once_after_the_grace() {
        let start = Instant::now();
        let mut unplaced = Unplaced::default();
        let failure = vec![("ns/a".to_string(), "403 forbidden".to_string())];
        assert!(
            unplaced
                .observe(start, ["ns/a", "ns/b"], failure)
                .is_empty()
        );
        assert_eq!(unplaced.len(), 2, "counted at once");
        let later = start + PLACEMENT_GRACE / 2;
        assert!(unplaced.observe(later, ["ns/a"], vec![]).is_empty());
        assert_eq!(unplaced.len(), 1, "ns/b was placed");
        let past = start + PLACEMENT_GRACE + Duration::from_secs(1);
        assert_eq!(
            unplaced.observe(past, ["ns/a", "ns/c"], vec![]),
            vec!["ns/a".to_string()],
            "reported when it outstays the grace, not before"
        );
        assert!(
            unplaced
                .observe(past + Duration::from_secs(1), ["ns/a", "ns/c"], vec![])
                .is_empty(),
            "and only once"
        );
        assert_eq!(unplaced.stuck(past), vec!["ns/a".to_string()]);
        assert_eq!(unplaced.describe("ns/a", false), "ns/a: 403 forbidden");
        assert_eq!(
            unplaced.describe("ns/c", true),
            "ns/c: no replica holds a live shard Lease"
        );
        unplaced.observe(past, [], vec![]);
        assert!(unplaced.is_empty() && unplaced.stuck(past).is_empty());
    }

    #[test]
    fn a_reconcile_goes_on_only_for_its_own_undrained_parents() {
        let mut parent = DynamicObject::new(
            "m",
            &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        );
        assert_eq!(ownership(&parent, "a"), Ownership::NotOwned);
        parent.labels_mut().insert(SHARD_LABEL.into(), "a".into());
        assert_eq!(ownership(&parent, "a"), Ownership::Owned);
        assert_eq!(ownership(&parent, "b"), Ownership::NotOwned);
        parent
            .labels_mut()
            .insert(DRAIN_LABEL.into(), "true".into());
        assert_eq!(ownership(&parent, "a"), Ownership::Draining);
    }
}
