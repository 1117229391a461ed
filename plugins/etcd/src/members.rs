//! Member arithmetic: names and URLs, `initial-cluster`, quorum, version steps, and the one next step from the observed cluster towards the spec.
//!
//! Everything here is a pure function of numbers and names, so the rules that keep an etcd
//! cluster safe (one membership change at a time, the change before the resize, an in-flight
//! change finished before another starts, no resize while members are unready or rolling,
//! upgrades one minor version at a time) are unit-tested without Kubernetes objects.

use std::fmt;

/// Peer traffic (raft).
pub const PEER_PORT: i32 = 2380;
/// Client traffic.
pub const CLIENT_PORT: i32 = 2379;
/// Plain-HTTP `/health`, `/readyz`, `/livez` and `/metrics`, for probes.
pub const METRICS_PORT: i32 = 2381;

/// Where the members of one cluster live: every name and URL derives from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology<'a> {
    /// The EtcdCluster's name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Whether peers and clients speak TLS.
    pub tls: bool,
}

impl Topology<'_> {
    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// The member (and pod) with `ordinal`: `<name>-<ordinal>`.
    pub fn member(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.name)
    }

    /// The headless Service that gives each member a DNS name.
    pub fn peer_service(&self) -> String {
        format!("{}-peer", self.name)
    }

    /// The Service clients connect to.
    pub fn client_service(&self) -> String {
        format!("{}-client", self.name)
    }

    /// The DNS name of member `ordinal`.
    pub fn member_host(&self, ordinal: i32) -> String {
        format!(
            "{}.{}.{}.svc",
            self.member(ordinal),
            self.peer_service(),
            self.namespace
        )
    }

    /// The peer URL of member `ordinal`.
    pub fn peer_url(&self, ordinal: i32) -> String {
        format!(
            "{}://{}:{PEER_PORT}",
            self.scheme(),
            self.member_host(ordinal)
        )
    }

    /// The client endpoint of the whole cluster (through the client Service).
    pub fn client_endpoint(&self) -> String {
        format!(
            "{}://{}.{}.svc:{CLIENT_PORT}",
            self.scheme(),
            self.client_service(),
            self.namespace
        )
    }

    /// etcd's `--initial-cluster` for members `0..members`: `name-0=url,name-1=url,...`.
    pub fn initial_cluster(&self, members: i32) -> String {
        (0..members)
            .map(|i| format!("{}={}", self.member(i), self.peer_url(i)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Members that must agree for the cluster to make progress.
pub fn quorum(members: i32) -> i32 {
    members / 2 + 1
}

/// Members that may fail without losing quorum.
pub fn fault_tolerance(members: i32) -> i32 {
    (members - 1).max(0) / 2
}

/// How a member that starts with an empty data directory joins: etcd's
/// `--initial-cluster-state`, and how many members `--initial-cluster` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    /// `new` while the cluster bootstraps, `existing` once it runs.
    pub state: ClusterState,
    /// Members `0..members` are listed.
    pub members: i32,
}

/// etcd's `--initial-cluster-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// Bootstrapping: every listed member starts together.
    New,
    /// Joining a running cluster after `member add`.
    Existing,
}

impl ClusterState {
    /// The flag's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        }
    }

    /// The state named by `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "new" => Some(ClusterState::New),
            "existing" => Some(ClusterState::Existing),
            _ => None,
        }
    }
}

/// An etcd version `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl Version {
    /// `text` as a version, if it is `MAJOR.MINOR.PATCH` in decimal.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|p| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        });
        let version = Version {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(version)
    }

    /// Whether a cluster running `self` may be rolled to `to`: etcd supports upgrades of one
    /// minor version at a time within a major version (patch releases in any direction), and
    /// a downgrade of a minor version only through its own downgrade procedure.
    pub fn may_roll_to(self, to: Version) -> Result<(), String> {
        if to.major != self.major {
            Err(format!(
                "{self} -> {to} changes the major version, which etcd cannot do in place"
            ))
        } else if to.minor < self.minor {
            Err(format!(
                "{self} -> {to} is a downgrade, which needs etcd's downgrade procedure"
            ))
        } else if to.minor > self.minor + 1 {
            Err(format!(
                "{self} -> {to} skips a minor version: upgrade to {}.{}.x first",
                self.major,
                self.minor + 1
            ))
        } else {
            Ok(())
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A membership change, by the ordinal of the member it adds or removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `etcdctl member add <name>-<ordinal>`.
    Add(i32),
    /// `etcdctl member remove` of `<name>-<ordinal>`.
    Remove(i32),
}

impl Change {
    /// The Job that makes this change: `<name>-add-<ordinal>` or `<name>-remove-<ordinal>`.
    pub fn job_name(self, cluster: &str) -> String {
        match self {
            Change::Add(ordinal) => format!("{cluster}-add-{ordinal}"),
            Change::Remove(ordinal) => format!("{cluster}-remove-{ordinal}"),
        }
    }

    /// The change a Job of `cluster` named `job` makes, if it is one of its membership Jobs.
    pub fn of_job(cluster: &str, job: &str) -> Option<Self> {
        let rest = job.strip_prefix(cluster)?.strip_prefix('-')?;
        let (verb, ordinal) = rest.split_once('-')?;
        let ordinal = (!ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
            .then(|| ordinal.parse().ok())
            .flatten()?;
        match verb {
            "add" => Some(Change::Add(ordinal)),
            "remove" => Some(Change::Remove(ordinal)),
            _ => None,
        }
    }
}

/// Where an observed membership Job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Neither complete nor failed.
    Running,
    /// Its `Complete` condition is `True`: the change is made.
    Complete,
    /// Its `Failed` condition is `True`: it gave up.
    Failed,
}

/// What the plugin observed of an existing cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedCluster {
    /// The StatefulSet's `spec.replicas`: the members it runs.
    pub replicas: i32,
    /// The version its pod template runs.
    pub version: Version,
    /// Whether every member runs the current template and is ready (`kubectl rollout
    /// status`'s rules, including the controller having seen the latest spec).
    pub rolled_out: bool,
    /// The membership Jobs that exist, with their state.
    pub jobs: Vec<(Change, JobState)>,
}

/// The one thing to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No cluster yet: create every member at once, as a new cluster.
    Bootstrap,
    /// Size and version are as desired and every member is ready.
    Steady,
    /// Members are starting, unready or rolling: change nothing until they are ready.
    Wait,
    /// Add member `ordinal` (the Job, then one more pod).
    Add(i32),
    /// Remove member `ordinal` (the Job, then one pod fewer).
    Remove(i32),
    /// Roll the members to this version, one at a time.
    Roll(Version),
    /// The desired version cannot be reached from the running one; why.
    VersionRefused(String),
    /// A membership Job failed: nothing changes until it is deleted (and so retried).
    Stuck(Change),
}

impl Step {
    /// The membership change this step makes or waits for, if any.
    pub fn change(&self) -> Option<Change> {
        match *self {
            Step::Add(ordinal) => Some(Change::Add(ordinal)),
            Step::Remove(ordinal) => Some(Change::Remove(ordinal)),
            Step::Stuck(change) => Some(change),
            _ => None,
        }
    }
}

/// The next step from `observed` (None: no StatefulSet yet) towards `replicas` members
/// running `version`.
pub fn next_step(replicas: i32, version: Version, observed: Option<&ObservedCluster>) -> Step {
    let Some(cluster) = observed else {
        return Step::Bootstrap;
    };
    // A change that etcd may already have made is finished before anything else: a member
    // added but never started, or removed but still running, costs the cluster a vote.
    let current = [
        Change::Add(cluster.replicas),
        Change::Remove(cluster.replicas - 1),
    ];
    if let Some(&(change, state)) = cluster
        .jobs
        .iter()
        .find(|(change, _)| current.contains(change))
    {
        return match (state, change) {
            (JobState::Failed, _) => Step::Stuck(change),
            (_, Change::Add(ordinal)) => Step::Add(ordinal),
            (_, Change::Remove(ordinal)) => Step::Remove(ordinal),
        };
    }
    if !cluster.rolled_out {
        Step::Wait
    } else if cluster.replicas < replicas {
        Step::Add(cluster.replicas)
    } else if cluster.replicas > replicas {
        Step::Remove(cluster.replicas - 1)
    } else if version != cluster.version {
        match cluster.version.may_roll_to(version) {
            Ok(()) => Step::Roll(version),
            Err(why) => Step::VersionRefused(why),
        }
    } else {
        Step::Steady
    }
}
