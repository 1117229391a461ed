//! The registry of live plugins: which version each file of the plugin directory serves.
//!
//! The registry is level-triggered: [`Registry::scan`] compares the directory with what is
//! served and proposes the changes (add, replace, remove). A proposal takes effect when the
//! caller [`commit`](Registry::commit)s it after starting or swapping the controller, or is
//! [`reject`](Registry::reject)ed if that failed. Content that does not load is rejected
//! during the scan and the previous version keeps serving; the same broken content is not
//! retried until the file changes again, unless its `info` call ran out of CPU time (a host
//! starved of CPU can do that to any plugin): that is tried again a few times first.
//!
//! New content the compile cache has not seen is served by a quick Winch build at once, and
//! compiled by Cranelift on a thread of its own; the result comes back through the channel
//! given to [`Registry::new`] and takes effect with [`Registry::finish_tier_up`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::mpsc::UnboundedSender;

use crate::metrics::{Metrics, PluginLabels, ReloadLabels, VersionLabels};
use crate::plugin::{self, Plugin};
use crate::policy::{Policy, Rules};
use crate::runtime::{CallError, Runtime, Tier};

/// How many times content whose `info` call ran out of CPU time is loaded before it is
/// rejected until it changes: `info` takes a few milliseconds of its 200, so a timeout is
/// more often the host starved of CPU (a busy or oversubscribed machine) than the plugin.
const TIMED_OUT_LOAD_ATTEMPTS: u32 = 4;

/// Why the plugin directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the plugin directory {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// A change to what is served, proposed by [`Registry::scan`].
#[derive(Debug, Clone)]
pub enum Proposal {
    /// A new plugin file loaded.
    Add { plugin: Arc<Plugin> },
    /// New content for a served file; `old` serves until the proposal is committed.
    Replace { old: Arc<Plugin>, new: Arc<Plugin> },
    /// A served file is gone.
    Remove { old: Arc<Plugin> },
}

impl Proposal {
    /// The plugin file this proposal is about.
    pub fn path(&self) -> &Path {
        match self {
            Proposal::Add { plugin } => &plugin.path,
            Proposal::Replace { new, .. } => &new.path,
            Proposal::Remove { old } => &old.path,
        }
    }

    /// Whether a replacement needs a new controller: the watched kinds changed (children, or
    /// the related declarations, whose caches are kept by index), or the policy (which sets
    /// the watched kinds, the write budget and the call slots).
    pub fn needs_restart(&self) -> bool {
        match self {
            Proposal::Replace { old, new } => {
                old.decl.parent != new.decl.parent
                    || old.decl.children != new.decl.children
                    || old.decl.related != new.decl.related
                    || old.policy != new.policy
            }
            _ => false,
        }
    }
}

/// The Cranelift build of a plugin that is served by its Winch build.
#[derive(Debug)]
pub struct TierUp {
    pub path: PathBuf,
    pub content_hash: String,
    pub result: Result<Plugin, plugin::Error>,
}

#[derive(Debug, Default)]
struct Entry {
    served: Option<Arc<Plugin>>,
    /// What the last scan found offered: the content hash, and for a plugin of the cluster
    /// the policy entry it comes with.
    offered: Offered,
    /// An offer that failed to load, so an unchanged broken file is not reloaded in a loop.
    rejected: Option<Offered>,
    /// How many loads of the offer failed in a way that may pass (see
    /// [`TIMED_OUT_LOAD_ATTEMPTS`]).
    timed_out_loads: u32,
    /// The last content refused (its hash, and why), also for a reason that is retried (a
    /// kind another plugin serves): what the cluster's status says.
    refusal: Option<Refusal>,
}

/// Content that does not serve (yet): its hash, why, and what keeps it.
#[derive(Debug, Clone)]
struct Refusal {
    content_hash: String,
    error: String,
    kind: RefusalKind,
}

/// What keeps content from serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefusalKind {
    /// An error: its content, or the cluster (retried).
    Error,
    /// The rollout gate holds it until it is approved.
    Held,
    /// It serves its canary parents; `error` says how far the canary is.
    Canary,
    /// Its canary failed and it was rolled back; not tried again until it changes.
    RolledBack,
}

/// Content and policy entry offered under an identity: what a refusal is remembered by.
#[derive(Debug, Clone, Default, PartialEq)]
struct Offered {
    content_hash: String,
    entry: Option<Rules>,
}

/// What became of the content offered under an identity, as the last scan left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not loaded yet (or nothing was offered).
    Pending,
    /// This content (hex SHA-256) serves.
    Serving { content_hash: String },
    /// This content was refused, and why; what served before (if anything) still serves.
    Rejected {
        content_hash: String,
        error: String,
        serving: Option<String>,
    },
    /// This content is held before serving by the rollout gate (why), until it is approved;
    /// what served before still serves.
    Held {
        content_hash: String,
        reason: String,
        serving: Option<String>,
    },
    /// This content serves its canary parents (how far the canary is); what served before
    /// serves the others.
    Canary {
        content_hash: String,
        progress: String,
        serving: Option<String>,
    },
    /// This content failed on its canary parents and was rolled back (why); what served
    /// before serves every parent.
    RolledBack {
        content_hash: String,
        reason: String,
        serving: Option<String>,
    },
}

/// Plugins the cluster declares (`OperatorPlugin`s), by name, once their content was pulled:
/// the registry's second source besides the plugin directory. Each is known as
/// `OperatorPlugin/<name>`, the way a file is known by its path. After each sync the
/// registry reports here what became of each, for the resources' status.
#[derive(Debug, Clone)]
pub struct ClusterPlugins {
    state: Arc<std::sync::Mutex<ClusterState>>,
    changed: Arc<tokio::sync::Notify>,
    synced: Arc<tokio::sync::watch::Sender<u64>>,
}

/// What serves as a plugin of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The name and version the artifact declares.
    pub plugin: String,
    pub version: String,
    /// The artifact's manifest digest.
    pub digest: String,
    /// Hex SHA-256 of the component.
    pub content_hash: String,
}

/// A plugin of the cluster as its OperatorPlugin offers it.
#[derive(Debug, Clone)]
pub struct ClusterOffer {
    /// The artifact's manifest digest.
    pub digest: String,
    /// The component.
    pub bytes: Arc<[u8]>,
    /// Its policy entry (`spec.policy`), if it has one.
    pub policy: Option<Rules>,
    /// What its OperatorPlugin's approve-rollout annotation names, if anything: a version
    /// the rollout gate holds serves once this names it.
    pub approval: Option<String>,
}

#[derive(Debug, Default)]
struct ClusterState {
    /// By name.
    offered: BTreeMap<String, ClusterOffer>,
    /// By name: what the last sync made of it, and what serves.
    outcomes: BTreeMap<String, (Outcome, Option<Served>)>,
}

impl Default for ClusterPlugins {
    fn default() -> Self {
        ClusterPlugins {
            state: Arc::default(),
            changed: Arc::default(),
            synced: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }
}

impl ClusterPlugins {
    /// The identity the registry knows plugin `name` of the cluster by.
    pub fn id(name: &str) -> PathBuf {
        PathBuf::from(format!("OperatorPlugin/{name}"))
    }

    /// Whether `id` is the identity of one of the cluster's plugins (not a file).
    pub fn is_id(id: &Path) -> bool {
        id.starts_with("OperatorPlugin")
    }

    /// Offers an artifact as plugin `name`; the registry rescans if that changed anything.
    pub fn offer(&self, name: &str, offer: ClusterOffer) {
        let changed = |previous: &ClusterOffer| {
            previous.digest != offer.digest
                || previous.policy != offer.policy
                || previous.approval != offer.approval
        };
        let previous = self.lock().offered.insert(name.to_string(), offer.clone());
        if previous.is_none_or(|previous| changed(&previous)) {
            self.changed.notify_one();
        }
    }

    /// Gives the plugin offered as `name` (if any) the policy entry `policy`, without a new
    /// pull: a policy change takes effect while the registry is unreachable.
    pub fn set_policy(&self, name: &str, policy: Option<Rules>) {
        let mut state = self.lock();
        if let Some(offer) = state.offered.get_mut(name)
            && offer.policy != policy
        {
            offer.policy = policy;
            self.changed.notify_one();
        }
    }

    /// What the OperatorPlugin of plugin `name` approves (see [`ClusterOffer::approval`]).
    pub fn approval(&self, name: &str) -> Option<String> {
        self.lock()
            .offered
            .get(name)
            .and_then(|offer| offer.approval.clone())
    }

    /// The digest offered as plugin `name`, if any.
    pub fn offered_digest(&self, name: &str) -> Option<String> {
        self.lock()
            .offered
            .get(name)
            .map(|offer| offer.digest.clone())
    }

    /// Withdraws every plugin whose name `keep` refuses (their resources are gone); the
    /// registry rescans if that changed anything.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut state = self.lock();
        let before = state.offered.len();
        state.offered.retain(|name, _| keep(name));
        state.outcomes.retain(|name, _| keep(name));
        if state.offered.len() != before {
            self.changed.notify_one();
        }
    }

    /// Resolves after an offer or a withdrawal that changed something.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// What the last sync made of plugin `name`, and what serves as it.
    pub fn outcome(&self, name: &str) -> Option<(Outcome, Option<Served>)> {
        self.lock().outcomes.get(name).cloned()
    }

    /// A stream that yields after each sync that reported outcomes.
    pub fn synced(&self) -> futures::stream::BoxStream<'static, ()> {
        use futures::StreamExt;
        futures::stream::unfold(self.synced.subscribe(), |mut synced| async move {
            synced.changed().await.ok()?;
            Some(((), synced))
        })
        .boxed()
    }

    fn snapshot(&self) -> BTreeMap<PathBuf, ClusterOffer> {
        self.lock()
            .offered
            .iter()
            .map(|(name, offer)| (Self::id(name), offer.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What each plugin file serves.
pub struct Registry {
    runtime: Arc<Runtime>,
    dir: PathBuf,
    metrics: Arc<Metrics>,
    entries: BTreeMap<PathBuf, Entry>,
    tier_ups: UnboundedSender<TierUp>,
    /// Admits each plugin and sets its limits; `None`: [`Policy::default`].
    policy: Option<Arc<Policy>>,
    /// The cluster's plugins, if the host serves them.
    cluster: Option<ClusterPlugins>,
    /// Whether the last scan left content to load again (see [`TIMED_OUT_LOAD_ATTEMPTS`]).
    load_again: bool,
}

/// Why offered content did not load, and whether loading it again may succeed.
struct LoadFailure {
    message: String,
    may_pass: bool,
}

impl From<String> for LoadFailure {
    fn from(message: String) -> Self {
        LoadFailure {
            message,
            may_pass: false,
        }
    }
}

impl From<plugin::Error> for LoadFailure {
    fn from(error: plugin::Error) -> Self {
        let may_pass = matches!(
            &error,
            plugin::Error::Info {
                source: CallError::Timeout { .. } | CallError::Stalled { .. },
                ..
            }
        );
        LoadFailure {
            message: error.to_string(),
            may_pass,
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("dir", &self.dir)
            .field("files", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry of the plugins in `dir`; tier-up results are sent to `tier_ups`.
    pub fn new(
        runtime: Arc<Runtime>,
        dir: &Path,
        metrics: Arc<Metrics>,
        tier_ups: UnboundedSender<TierUp>,
    ) -> Self {
        Registry {
            runtime,
            dir: dir.to_path_buf(),
            metrics,
            entries: BTreeMap::new(),
            tier_ups,
            policy: None,
            cluster: None,
            load_again: false,
        }
    }

    /// Serves the cluster's plugins as well as the directory's.
    pub fn with_cluster_plugins(mut self, cluster: ClusterPlugins) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Tells the cluster's plugins what became of each of them (after a sync).
    pub fn report_cluster_outcomes(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let (offered, previous) = {
            let state = cluster.lock();
            (state.offered.clone(), state.outcomes.clone())
        };
        let outcomes = offered
            .into_iter()
            .map(|(name, offer)| {
                let id = ClusterPlugins::id(&name);
                let served = self.served(&id).map(|plugin| {
                    let content_hash = plugin.decl.content_hash.clone();
                    // The offer's digest if its content serves; else the one that served
                    // before (the offer was refused, or not loaded yet).
                    let digest = if hex::encode(Sha256::digest(&offer.bytes)) == content_hash {
                        offer.digest.clone()
                    } else {
                        previous
                            .get(&name)
                            .and_then(|(_, served)| served.as_ref())
                            .filter(|served| served.content_hash == content_hash)
                            .map(|served| served.digest.clone())
                            .unwrap_or_default()
                    };
                    Served {
                        plugin: plugin.decl.name.clone(),
                        version: plugin.decl.version.clone(),
                        digest,
                        content_hash,
                    }
                });
                (name, (self.outcome(&id), served))
            })
            .collect();
        cluster.lock().outcomes = outcomes;
        cluster.synced.send_modify(|count| *count += 1);
    }

    /// What this replica serves, for its report to `kubectl operator-host`: every plugin file
    /// and OperatorPlugin it knows of, with what serves and what became of the newest offer.
    pub fn replica_report(&self) -> Vec<crate::replicas::PluginReport> {
        use crate::replicas::{PluginReport, ServingReport};
        self.entries
            .iter()
            .map(|(id, entry)| {
                let of_cluster = ClusterPlugins::is_id(id);
                let name = known_name(id);
                let source = if of_cluster {
                    format!("OperatorPlugin {name}")
                } else {
                    format!("file {}", file_name(id))
                };
                let digest = self
                    .cluster
                    .as_ref()
                    .filter(|_| of_cluster)
                    .and_then(|cluster| cluster.outcome(&name))
                    .and_then(|(_, served)| served)
                    .map(|served| served.digest)
                    .filter(|digest| !digest.is_empty());
                let serving = entry.served.as_ref().map(|plugin| ServingReport {
                    version: plugin.decl.version.clone(),
                    sha256: plugin.decl.content_hash.clone(),
                    digest,
                    contract: contract_version(plugin),
                    tier: version_labels(plugin).tier,
                    parent: plugin.decl.parent.clone(),
                    children: plugin.decl.children.clone(),
                });
                let (state, detail, candidate) = match self.outcome(id) {
                    Outcome::Pending => ("Pending", None, None),
                    Outcome::Serving { .. } => ("Serving", None, None),
                    Outcome::Rejected {
                        content_hash,
                        error,
                        ..
                    } => ("Rejected", Some(error), Some(content_hash)),
                    Outcome::Held {
                        content_hash,
                        reason,
                        ..
                    } => ("Held", Some(reason), Some(content_hash)),
                    Outcome::Canary {
                        content_hash,
                        progress,
                        ..
                    } => ("Canary", Some(progress), Some(content_hash)),
                    Outcome::RolledBack {
                        content_hash,
                        reason,
                        ..
                    } => ("RolledBack", Some(reason), Some(content_hash)),
                };
                PluginReport {
                    name,
                    source,
                    state: state.into(),
                    detail,
                    candidate,
                    serving,
                }
            })
            .collect()
    }

    /// What became of the content last offered as `id`.
    pub fn outcome(&self, id: &Path) -> Outcome {
        let Some(entry) = self.entries.get(id) else {
            return Outcome::Pending;
        };
        let serving = entry.served.as_ref().map(|p| p.decl.content_hash.clone());
        match (&entry.refusal, serving) {
            (Some(refusal), serving) => {
                let (content_hash, reason) = (refusal.content_hash.clone(), refusal.error.clone());
                match refusal.kind {
                    RefusalKind::Held => Outcome::Held {
                        content_hash,
                        reason,
                        serving,
                    },
                    RefusalKind::Canary => Outcome::Canary {
                        content_hash,
                        progress: reason,
                        serving,
                    },
                    RefusalKind::RolledBack => Outcome::RolledBack {
                        content_hash,
                        reason,
                        serving,
                    },
                    RefusalKind::Error => Outcome::Rejected {
                        content_hash,
                        error: reason,
                        serving,
                    },
                }
            }
            (None, Some(content_hash)) => Outcome::Serving { content_hash },
            (None, None) => Outcome::Pending,
        }
    }

    /// Loads plugins under `policy`: each must be admitted by it, and gets its limits.
    pub fn with_policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The plugin served from `path`, if any.
    pub fn served(&self, path: &Path) -> Option<&Arc<Plugin>> {
        self.entries.get(path).and_then(|e| e.served.as_ref())
    }

    /// Every plugin served, by file.
    pub fn all_served(&self) -> impl Iterator<Item = &Arc<Plugin>> {
        self.entries.values().filter_map(|e| e.served.as_ref())
    }

    /// Whether the last [`Registry::scan`] left content to load again after a backoff: its
    /// `info` call ran out of CPU time, which a starved host can cause.
    pub fn wants_load_again(&self) -> bool {
        self.load_again
    }

    /// Compares the directory with what is served; loads new content off to the side.
    pub fn scan(&mut self) -> Result<Vec<Proposal>, Error> {
        self.load_again = false;
        // Identities offered now: the directory's files, then the cluster's plugins.
        let mut files = plugin_files(&self.dir)?;
        let cluster = self
            .cluster
            .as_ref()
            .map(ClusterPlugins::snapshot)
            .unwrap_or_default();
        files.extend(cluster.keys().cloned());
        // Removals first, so a plugin moved to another file name is not refused as a
        // duplicate of its own old file.
        let mut proposals: Vec<Proposal> = self
            .entries
            .iter()
            .filter(|(path, _)| !files.contains(path))
            .filter_map(|(_, entry)| entry.served.clone())
            .map(|old| Proposal::Remove { old })
            .collect();
        for path in &files {
            // A file can vanish or be half-replaced between listing and reading; the
            // watcher reports the next change, so skipping it here loses nothing.
            let (bytes, entry_rules): (Arc<[u8]>, Option<Rules>) = match cluster.get(path) {
                Some(offer) => (offer.bytes.clone(), offer.policy.clone()),
                None => match std::fs::read(path) {
                    Ok(bytes) => (bytes.into(), None),
                    Err(error) => {
                        tracing::debug!(path = %path.display(), %error, "plugin file not readable now");
                        continue;
                    }
                },
            };
            let offered = Offered {
                content_hash: hex::encode(Sha256::digest(&bytes)),
                entry: entry_rules,
            };
            let hash = offered.content_hash.clone();
            let policy = self.policy_for(path, offered.entry.clone());
            let entry = self.entries.entry(path.clone()).or_default();
            if entry.offered != offered {
                entry.timed_out_loads = 0;
            }
            entry.offered = offered.clone();
            let served = entry.served.clone();
            let same_policy = |plugin: &Plugin| match &policy {
                Ok(policy) => plugin.policy == *policy,
                Err(_) => false,
            };
            if served
                .as_ref()
                .is_some_and(|p| p.decl.content_hash == hash && same_policy(p))
            {
                entry.rejected = None;
                entry.refusal = None;
                continue;
            }
            if entry.rejected.as_ref() == Some(&offered) {
                continue;
            }
            let new = match policy
                .map_err(LoadFailure::from)
                .and_then(|policy| self.load(path, &bytes, policy, served.as_deref()))
            {
                Ok(new) => new,
                Err(failure) => {
                    self.load_failed(path, &hash, served.as_deref(), failure);
                    continue;
                }
            };
            if let Some(conflict) = self.kind_taken(&new, &files, &proposals) {
                // Not remembered by hash: once the other file goes, this one is served.
                self.count_reload(&new.decl.name, "rejected");
                tracing::error!(path = %path.display(), sha256 = %hash, error = %conflict, "plugin not loaded");
                if let Some(entry) = self.entries.get_mut(path) {
                    entry.refusal = Some(Refusal {
                        content_hash: hash,
                        error: conflict,
                        kind: RefusalKind::Error,
                    });
                }
                continue;
            }
            proposals.push(match served {
                Some(old) => Proposal::Replace { old, new },
                None => Proposal::Add { plugin: new },
            });
        }
        self.entries
            .retain(|path, entry| entry.served.is_some() || files.contains(path));
        Ok(proposals)
    }

    /// The policy the plugin offered as `path` serves under: the host's, with its own
    /// `entry` (an OperatorPlugin's `spec.policy`) if it has one.
    fn policy_for(&self, path: &Path, entry: Option<Rules>) -> Result<Arc<Policy>, String> {
        let base = self.policy.clone().unwrap_or_default();
        let Some(rules) = entry else {
            return Ok(base);
        };
        let name = known_name(path);
        let owner = format!("spec.policy of OperatorPlugin {name}");
        let policy = base
            .with_entry(&name, rules, &owner)
            .map_err(|e| e.to_string())?;
        // The instance slots were sized when the host started: an entry cannot grow them.
        let largest = self.runtime.limits().max_memory_bytes;
        if let Some(asked) = policy.rules(&name).limits.memory_mib
            && asked << 20 > largest
        {
            return Err(format!(
                "{owner} is invalid: limits.memoryMiB is {asked}, expected at most {} (the \
                 host's instance size, set by --memory-limit-mib or the policy file's largest \
                 memoryMiB when it starts)",
                largest >> 20
            ));
        }
        Ok(Arc::new(policy))
    }

    /// Loads `bytes` as the new content of `path`, to serve under `policy` in place of
    /// `served`.
    fn load(
        &self,
        path: &Path,
        bytes: &[u8],
        policy: Arc<Policy>,
        served: Option<&Plugin>,
    ) -> Result<Arc<Plugin>, LoadFailure> {
        let known_as = known_name(path);
        // The new version takes over the served one's instance slots, unless it is to have
        // another number of them: resizing a shared share would change the served version's
        // before the new one is accepted.
        let calls = policy
            .max_concurrent_calls(&known_as)
            .unwrap_or(self.runtime.default_max_concurrent_calls());
        let replacing = served
            .map(|plugin| &plugin.compiled)
            .filter(|compiled| compiled.max_concurrent_calls() == calls);
        let compiled = self
            .runtime
            .load_quick(path, bytes, replacing)
            .map_err(|e| e.to_string())?;
        let mut plugin = Plugin::from_compiled(path, compiled)?;
        // A plugin is known by its file name or resource name, which the administrator chose: a
        // name it gives itself must not reach another plugin's policy entry.
        if plugin.decl.name != known_as {
            let fix = if ClusterPlugins::is_id(path) {
                format!("name the OperatorPlugin {:?}", plugin.decl.name)
            } else {
                format!("rename the file to {}.wasm", plugin.decl.name)
            };
            return Err(format!(
                "{} declares the name {:?}, but a plugin is known by the name it is given \
                 ({known_as:?}): {fix} or build the plugin with the name {known_as:?}",
                path.display(),
                plugin.decl.name,
            )
            .into());
        }
        for warning in policy.admit(&plugin.decl).map_err(|e| e.to_string())? {
            tracing::warn!(plugin = %plugin.decl.name, path = %path.display(), "{warning}");
        }
        plugin.limit_by(&policy, self.runtime.limits());
        // Its share of the instance pool: calls beyond it wait rather than take
        // another plugin's slots (a no-op when the load reserved or took over that many).
        plugin
            .compiled
            .set_max_concurrent_calls(calls)
            .map_err(|e| e.to_string())?;
        plugin.policy = policy;
        Ok(Arc::new(plugin))
    }

    /// Why `plugin` may not serve its parent kind: another file of `files` serves that kind,
    /// in any API version, or is about to (`pending`).
    fn kind_taken(
        &self,
        plugin: &Plugin,
        files: &[PathBuf],
        pending: &[Proposal],
    ) -> Option<String> {
        let path = plugin.path.as_path();
        let served = self
            .entries
            .iter()
            .filter(|(other, _)| other.as_path() != path && files.contains(other))
            .filter_map(|(_, e)| e.served.as_ref());
        let proposed = pending.iter().filter_map(|p| match p {
            Proposal::Add { plugin } | Proposal::Replace { new: plugin, .. } => Some(plugin),
            Proposal::Remove { .. } => None,
        });
        let others: Vec<&Arc<Plugin>> = served
            .chain(proposed)
            .filter(|other| other.path != path)
            .collect();
        // Names are unique in the directory, and among the cluster's plugins, but a file and
        // an OperatorPlugin may share one: a name has one plugin (its policy entry, budget).
        if let Some(other) = others.iter().find(|o| o.decl.name == plugin.decl.name) {
            return Some(format!(
                "{} is named {:?}, which {} already serves: one name has one plugin",
                path.display(),
                plugin.decl.name,
                other.path.display()
            ));
        }
        let other = others
            .into_iter()
            .find(|other| other.decl.parent.same_kind(&plugin.decl.parent))?;
        Some(format!(
            "{} reconciles {}, which {} already reconciles (as {}): one kind has one plugin, \
             whatever the API version",
            path.display(),
            plugin.decl.parent,
            other.path.display(),
            other.decl.parent
        ))
    }

    /// Rejects the content that failed to load, or leaves it to be loaded again if its
    /// failure may pass and it has attempts left.
    fn load_failed(
        &mut self,
        path: &Path,
        hash: &str,
        serving: Option<&Plugin>,
        failure: LoadFailure,
    ) {
        if failure.may_pass
            && let Some(entry) = self.entries.get_mut(path)
            && entry.timed_out_loads + 1 < TIMED_OUT_LOAD_ATTEMPTS
        {
            entry.timed_out_loads += 1;
            self.load_again = true;
            let error = format!("{} (loading it again)", failure.message);
            tracing::warn!(path = %path.display(), sha256 = %hash, attempt = entry.timed_out_loads, %error, "new plugin content did not load");
            entry.refusal = Some(Refusal {
                content_hash: hash.to_string(),
                error,
                kind: RefusalKind::Error,
            });
            return;
        }
        self.reject_content(path, hash, serving, &failure.message);
    }

    fn reject_content(
        &mut self,
        path: &Path,
        hash: &str,
        serving: Option<&Plugin>,
        error: &dyn std::fmt::Display,
    ) {
        if let Some(entry) = self.entries.get_mut(path) {
            entry.rejected = Some(entry.offered.clone());
            entry.refusal = Some(Refusal {
                content_hash: hash.to_string(),
                error: error.to_string(),
                kind: RefusalKind::Error,
            });
        }
        let plugin = serving.map_or_else(|| known_name(path), |p| p.decl.name.clone());
        self.count_reload(&plugin, "rejected");
        match serving {
            Some(old) => tracing::error!(
                path = %path.display(),
                sha256 = %hash,
                serving = %old.decl.version,
                serving_sha256 = %old.decl.content_hash,
                %error,
                "new plugin content rejected; the previous version keeps serving"
            ),
            None => {
                tracing::error!(path = %path.display(), sha256 = %hash, %error, "plugin not loaded")
            }
        }
    }

    /// Records that `proposal` took effect.
    pub fn commit(&mut self, proposal: &Proposal) {
        let path = proposal.path().to_path_buf();
        match proposal {
            Proposal::Add { plugin } => {
                tracing::info!(
                    plugin = %plugin.decl.name,
                    version = %plugin.decl.version,
                    sha256 = %plugin.decl.content_hash,
                    parent = %plugin.decl.parent,
                    tier = ?plugin.compiled.tier(),
                    cache = ?plugin.compiled.cache_outcome(),
                    "plugin loaded"
                );
                self.count_reload(&plugin.decl.name, "added");
                self.set_served(path, Some(plugin.clone()));
            }
            Proposal::Replace { old, new } => {
                tracing::info!(
                    plugin = %new.decl.name,
                    old_version = %old.decl.version,
                    old_sha256 = %old.decl.content_hash,
                    version = %new.decl.version,
                    sha256 = %new.decl.content_hash,
                    tier = ?new.compiled.tier(),
                    cache = ?new.compiled.cache_outcome(),
                    restart = proposal.needs_restart(),
                    "plugin replaced"
                );
                self.count_reload(&new.decl.name, "replaced");
                self.set_served(path, Some(new.clone()));
            }
            Proposal::Remove { old } => {
                tracing::info!(
                    plugin = %old.decl.name,
                    version = %old.decl.version,
                    sha256 = %old.decl.content_hash,
                    "plugin removed; the objects it manages are left as they are"
                );
                self.count_reload(&old.decl.name, "removed");
                self.set_served(path, None);
            }
        }
    }

    /// Records that `proposal` could not take effect for a reason that is not its content
    /// (the API server, a CRD someone else owns, permissions): what served before keeps
    /// serving, and the next scan proposes the same content again.
    pub fn defer(&mut self, proposal: &Proposal, error: &dyn std::fmt::Display) {
        self.refuse_for_now(proposal, error, RefusalKind::Error);
    }

    /// Records that `proposal` is held by the rollout gate: what served before keeps serving,
    /// and the next scan proposes the same content again (to be planned again, or approved).
    pub fn hold(&mut self, proposal: &Proposal, reason: &dyn std::fmt::Display) {
        self.refuse_for_now(proposal, reason, RefusalKind::Held);
    }

    /// Records that `proposal` serves its canary parents (`progress`); the next scan proposes
    /// it again, to judge the canary.
    pub fn canary(&mut self, proposal: &Proposal, progress: &dyn std::fmt::Display) {
        if let Proposal::Replace { new, .. } = proposal {
            self.entries.entry(new.path.clone()).or_default().refusal = Some(Refusal {
                content_hash: new.decl.content_hash.clone(),
                error: progress.to_string(),
                kind: RefusalKind::Canary,
            });
        }
    }

    /// Records that `proposal` failed on its canary parents and was rolled back: refused like
    /// content that does not load, and said so.
    pub fn roll_back(&mut self, proposal: &Proposal, error: &dyn std::fmt::Display) {
        self.reject(proposal, error);
        if let Some(refusal) = self
            .entries
            .get_mut(proposal.path())
            .and_then(|entry| entry.refusal.as_mut())
        {
            refusal.kind = RefusalKind::RolledBack;
        }
    }

    fn refuse_for_now(
        &mut self,
        proposal: &Proposal,
        error: &dyn std::fmt::Display,
        kind: RefusalKind,
    ) {
        let held = kind == RefusalKind::Held;
        if let Proposal::Add { plugin } | Proposal::Replace { new: plugin, .. } = proposal {
            self.count_reload(&plugin.decl.name, if held { "held" } else { "rejected" });
            self.entries.entry(plugin.path.clone()).or_default().refusal = Some(Refusal {
                content_hash: plugin.decl.content_hash.clone(),
                error: error.to_string(),
                kind,
            });
            if held {
                tracing::warn!(
                    path = %plugin.path.display(),
                    sha256 = %plugin.decl.content_hash,
                    %error,
                    "new plugin version held before serving; planned again with backoff"
                );
            } else {
                tracing::warn!(
                    path = %plugin.path.display(),
                    sha256 = %plugin.decl.content_hash,
                    %error,
                    "plugin change could not take effect; it is retried with backoff"
                );
            }
        }
    }

    /// Records that `proposal` could not take effect because of its content; what served
    /// before keeps serving, and the same content is not tried again until the file changes.
    pub fn reject(&mut self, proposal: &Proposal, error: &dyn std::fmt::Display) {
        let (hash, serving) = match proposal {
            Proposal::Add { plugin } => (&plugin.decl.content_hash, None),
            Proposal::Replace { old, new } => (&new.decl.content_hash, Some(old.clone())),
            // Stopping a controller cannot fail; nothing to record.
            Proposal::Remove { .. } => return,
        };
        let path = proposal.path().to_path_buf();
        self.entries.entry(path.clone()).or_default();
        self.reject_content(&path, hash, serving.as_deref(), error);
    }

    /// Applies the result of a tier-up if its content is still the one served; returns the
    /// optimized plugin to swap in.
    pub fn finish_tier_up(&mut self, tier_up: TierUp) -> Option<Arc<Plugin>> {
        let served = self.served(&tier_up.path)?;
        if served.decl.content_hash != tier_up.content_hash {
            return None; // replaced meanwhile
        }
        match tier_up.result {
            Ok(optimized) => {
                let optimized = Arc::new(optimized);
                tracing::info!(
                    plugin = %optimized.decl.name,
                    sha256 = %optimized.decl.content_hash,
                    "plugin now runs its optimized build"
                );
                self.set_served(tier_up.path, Some(optimized.clone()));
                Some(optimized)
            }
            Err(error) => {
                // The baseline build keeps serving correctly, only slower.
                tracing::warn!(path = %tier_up.path.display(), %error, "optimizing the plugin failed");
                None
            }
        }
    }

    fn set_served(&mut self, path: PathBuf, plugin: Option<Arc<Plugin>>) {
        let entry = self.entries.entry(path.clone()).or_default();
        if let Some(old) = &entry.served {
            self.metrics.plugin_info.remove(&version_labels(old));
            self.metrics.plugin_instance_slots.remove(&PluginLabels {
                plugin: old.decl.name.clone(),
            });
        }
        if let Some(new) = &plugin {
            self.metrics
                .plugin_info
                .get_or_create(&version_labels(new))
                .set(1);
            self.metrics
                .plugin_instance_slots
                .get_or_create(&PluginLabels {
                    plugin: new.decl.name.clone(),
                })
                .set(new.compiled.max_concurrent_calls() as i64);
            if new.compiled.tier() == Tier::Baseline {
                spawn_tier_up(&self.runtime, new.clone(), self.tier_ups.clone());
            }
        }
        entry.rejected = None;
        entry.refusal = None;
        entry.served = plugin;
        if entry.served.is_none() {
            self.entries.remove(&path);
        }
    }

    fn count_reload(&self, plugin: &str, result: &str) {
        self.metrics
            .reloads
            .get_or_create(&ReloadLabels {
                plugin: plugin.to_string(),
                result: result.to_string(),
            })
            .inc();
    }
}

fn version_labels(plugin: &Plugin) -> VersionLabels {
    VersionLabels {
        plugin: plugin.decl.name.clone(),
        version: plugin.decl.version.clone(),
        sha256: plugin.decl.content_hash.clone(),
        tier: match plugin.compiled.tier() {
            Tier::Baseline => "baseline".into(),
            Tier::Optimized => "optimized".into(),
        },
    }
}

/// Compiles `plugin` with Cranelift on a thread of its own (seconds of CPU for a large
/// component, which must not hold up the async runtime or the next reload).
fn spawn_tier_up(runtime: &Arc<Runtime>, plugin: Arc<Plugin>, results: UnboundedSender<TierUp>) {
    let runtime = runtime.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("tier-up-{}", plugin.decl.name))
        .spawn(move || {
            let result = runtime
                .optimize(&plugin.compiled, &plugin.path)
                .map_err(plugin::Error::from)
                .map(|compiled| Plugin {
                    path: plugin.path.clone(),
                    decl: plugin.decl.clone(),
                    compiled,
                    policy: plugin.policy.clone(),
                });
            let _ = results.send(TierUp {
                path: plugin.path.clone(),
                content_hash: plugin.decl.content_hash.clone(),
                result,
            });
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the optimizing compile; the baseline build serves");
    }
}

/// The plugin files of `dir`: `*.wasm` entries (following symlinks, as a Kubernetes volume
/// presents them), except hidden ones (editors' temporary files, `..data` machinery).
pub fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::ReadDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|x| x == "wasm")
                && !path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                && std::fs::metadata(path).is_ok_and(|m| m.is_file())
        })
        .collect();
    files.sort();
    Ok(files)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// The contract version a plugin speaks, as its package names it (`0.2.0`).
fn contract_version(plugin: &Plugin) -> String {
    let package = plugin.compiled.contract().package();
    package.rsplit('@').next().unwrap_or(package).into()
}

/// The name the plugin offered as `id` is known by: an OperatorPlugin's name, or a file's stem
/// with `_` read as `-`. Cargo writes a crate's `-` as `_` (`web_app.wasm` for `web-app`) and a
/// plugin's name is a DNS label, which has no `_`: so the file a build writes is served as it
/// is, and two files naming one plugin meet the one-name-one-plugin check.
fn known_name(id: &Path) -> String {
    if ClusterPlugins::is_id(id) {
        return file_name(id);
    }
    id.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().replace('_', "-"))
}
