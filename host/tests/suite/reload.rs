//! Hot reload without a cluster: the registry's decisions and the directory watcher.

use crate::util;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use operator_host::metrics::Metrics;
use operator_host::registry::{Proposal, Registry, TierUp};
use operator_host::runtime::{Limits, Runtime, RuntimeConfig, Tier};
use operator_host::watch;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use util::{runtime_with, test_plugin};

/// A plugin directory, a registry over it, and what the registry reports.
struct Fixture {
    dir: tempfile::TempDir,
    registry: Registry,
    metrics: Arc<Metrics>,
    tier_ups: UnboundedReceiver<TierUp>,
}

impl Fixture {
    fn new() -> Self {
        Self::with_runtime(warm_runtime())
    }

    fn with_runtime(runtime: Arc<Runtime>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::new());
        let (sender, tier_ups) = unbounded_channel();
        let registry = Registry::new(runtime, dir.path(), metrics.clone(), sender);
        Fixture {
            dir,
            registry,
            metrics,
            tier_ups,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Scans and commits every proposal, as the run loop does when nothing fails.
    fn sync(&mut self) -> Vec<Proposal> {
        let proposals = self.registry.scan().unwrap();
        for proposal in &proposals {
            self.registry.commit(proposal);
        }
        proposals
    }

    fn served_hash(&self, name: &str) -> Option<String> {
        self.registry
            .served(&self.path(name))
            .map(|p| p.decl.content_hash.clone())
    }

    /// `operator_host_plugin_instance_slots` of `plugin`, if it is exported.
    fn instance_slots(&self, plugin: &str) -> Option<u64> {
        let prefix = format!("operator_host_plugin_instance_slots{{plugin=\"{plugin}\"}} ");
        let encoded = self.metrics.encode();
        let line = encoded.lines().find(|l| l.starts_with(&prefix))?;
        line[prefix.len()..].parse().ok()
    }

    fn reloads(&self, result: &str) -> u64 {
        self.metrics
            .encode()
            .lines()
            .filter(|l| {
                l.starts_with("operator_host_plugin_reloads_total")
                    && l.contains(&format!("result=\"{result}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

/// A runtime whose compile cache already holds the plugins these tests use, so loads are
/// cache hits (optimized, no tier-up thread) unless a test wants otherwise.
fn warm_runtime() -> Arc<Runtime> {
    let runtime = runtime_with(Default::default());
    for name in ["memcached-v1", "memcached-v2", "hostile"] {
        runtime.load(&test_plugin(name)).unwrap();
    }
    runtime
}

fn v1() -> Vec<u8> {
    std::fs::read(test_plugin("memcached-v1")).unwrap()
}

fn v2() -> Vec<u8> {
    std::fs::read(test_plugin("memcached-v2")).unwrap()
}

fn hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Writes `bytes` to a temporary name and renames it over `path`, as editors and
/// `kubectl cp`-style tools do.
fn write_by_rename(path: &Path, bytes: &[u8]) {
    let tmp = path.with_file_name(".incoming.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Reproduces how the kubelet lays out a ConfigMap volume: `name -> ..data/name`, and
/// `..data -> ..<timestamp>`, updated by swapping the `..data` symlink atomically.
struct ConfigMapVolume {
    dir: PathBuf,
    generation: u32,
}

impl ConfigMapVolume {
    fn new(dir: &Path, file: &str, bytes: &[u8]) -> Self {
        let mut volume = ConfigMapVolume {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        volume.update(file, bytes);
        std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).unwrap();
        volume
    }

    fn update(&mut self, file: &str, bytes: &[u8]) {
        self.generation += 1;
        let data_dir = format!(
            "..2026_11_30_00_00_{:02}.{}",
            self.generation, self.generation
        );
        std::fs::create_dir(self.dir.join(&data_dir)).unwrap();
        std::fs::write(self.dir.join(&data_dir).join(file), bytes).unwrap();
        let tmp_link = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&data_dir, &tmp_link).unwrap();
        std::fs::rename(&tmp_link, self.dir.join("..data")).unwrap();
    }
}

#[test]
fn a_new_file_is_added_and_an_unchanged_one_is_not_reloaded() {
    let mut fixture = Fixture::new();
    assert!(
        fixture.sync().is_empty(),
        "an empty directory proposes nothing"
    );
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    let proposals = fixture.sync();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Add { plugin }] if plugin.decl.name == "memcached")
    );
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v1())));
    // Rewriting identical content is not a reload.
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    assert!(fixture.sync().is_empty());
    assert_eq!(fixture.reloads("added"), 1);
    assert_eq!(fixture.reloads("replaced"), 0);
}

#[test]
fn new_content_written_in_place_replaces_the_version_without_a_restart() {
    let mut fixture = Fixture::new();
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    fixture.sync();
    std::fs::write(fixture.path("memcached.wasm"), v2()).unwrap();
    let proposals = fixture.sync();
    let [proposal @ Proposal::Replace { old, new }] = proposals.as_slice() else {
        panic!("expected one replacement, got {proposals:?}");
    };
    assert_eq!(old.decl.content_hash, hash(&v1()));
    assert_eq!(new.decl.content_hash, hash(&v2()));
    assert!(
        !proposal.needs_restart(),
        "same parent and children: swap under the running controller"
    );
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
}

#[test]
fn new_content_renamed_over_the_file_replaces_the_version() {
    let mut fixture = Fixture::new();
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    fixture.sync();
    write_by_rename(&fixture.path("memcached.wasm"), &v2());
    let proposals = fixture.sync();
    assert!(matches!(proposals.as_slice(), [Proposal::Replace { .. }]));
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
}

#[test]
fn a_configmap_volume_update_through_the_data_symlink_replaces_the_version() {
    let mut fixture = Fixture::new();
    let mut volume = ConfigMapVolume::new(fixture.dir.path(), "memcached.wasm", &v1());
    let proposals = fixture.sync();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Add { .. }]),
        "only the plugin file is served, not the ..data machinery: {proposals:?}"
    );
    volume.update("memcached.wasm", &v2());
    let proposals = fixture.sync();
    assert!(matches!(proposals.as_slice(), [Proposal::Replace { .. }]));
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
}

#[test]
fn a_deleted_file_is_removed() {
    let mut fixture = Fixture::new();
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    fixture.sync();
    std::fs::remove_file(fixture.path("memcached.wasm")).unwrap();
    let proposals = fixture.sync();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Remove { old }] if old.decl.name == "memcached")
    );
    assert_eq!(fixture.served_hash("memcached.wasm"), None);
    assert_eq!(fixture.registry.all_served().count(), 0);
}

#[test]
fn broken_content_keeps_the_previous_version_until_good_content_arrives() {
    let mut fixture = Fixture::new();
    let path = fixture.path("memcached.wasm");
    std::fs::write(&path, v1()).unwrap();
    fixture.sync();
    let broken_contents: [(&str, Vec<u8>); 3] = [
        ("not wasm", b"this is not a component".to_vec()),
        (
            "truncated (still being written)",
            v2()[..v2().len() / 2].to_vec(),
        ),
        (
            "another contract",
            std::fs::read(test_plugin("wrong-contract")).unwrap(),
        ),
    ];
    for (expected_rejections, (what, bytes)) in (1..).zip(broken_contents) {
        std::fs::write(&path, &bytes).unwrap();
        assert!(fixture.sync().is_empty(), "{what}: nothing changes");
        assert_eq!(
            fixture.served_hash("memcached.wasm"),
            Some(hash(&v1())),
            "{what}: v1 keeps serving"
        );
        assert_eq!(fixture.reloads("rejected"), expected_rejections, "{what}");
        // The same broken content is not retried on every scan.
        assert!(fixture.sync().is_empty());
        assert_eq!(fixture.reloads("rejected"), expected_rejections, "{what}");
    }
    std::fs::write(&path, v2()).unwrap();
    assert!(matches!(
        fixture.sync().as_slice(),
        [Proposal::Replace { .. }]
    ));
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
}

/// What a replica reports to `kubectl operator-host`: what serves, and what became of newer
/// content.
#[test]
fn the_replica_report_says_what_serves_and_why_newer_content_does_not() {
    let mut fixture = Fixture::new();
    assert!(fixture.registry.replica_report().is_empty());
    let path = fixture.path("memcached.wasm");
    std::fs::write(&path, v1()).unwrap();
    fixture.sync();
    let [serving] = fixture.registry.replica_report().try_into().unwrap();
    assert_eq!(
        (
            serving.name.as_str(),
            serving.source.as_str(),
            serving.state.as_str()
        ),
        ("memcached", "file memcached.wasm", "Serving")
    );
    let served = serving.serving.unwrap();
    assert_eq!(served.sha256, hash(&v1()));
    assert_eq!((served.contract.as_str(), served.digest), ("0.3.0", None));
    assert_eq!(served.parent.kind, "Memcached");
    assert_eq!(
        served
            .children
            .iter()
            .map(|k| k.kind.as_str())
            .collect::<Vec<_>>(),
        ["Deployment", "Service"]
    );

    let broken = &v2()[..1000];
    std::fs::write(&path, broken).unwrap();
    fixture.sync();
    let [rejected] = fixture.registry.replica_report().try_into().unwrap();
    assert_eq!(rejected.state, "Rejected");
    assert_eq!(rejected.candidate, Some(hash(broken)));
    assert!(rejected.detail.is_some_and(|d| !d.is_empty()));
    assert_eq!(
        rejected.serving.map(|s| s.sha256),
        Some(hash(&v1())),
        "v1 keeps serving"
    );
}

#[test]
fn a_broken_new_plugin_is_retried_when_its_file_changes() {
    let mut fixture = Fixture::new();
    let path = fixture.path("memcached.wasm");
    std::fs::write(&path, &v1()[..1000]).unwrap();
    assert!(fixture.sync().is_empty());
    assert_eq!(fixture.reloads("rejected"), 1);
    std::fs::write(&path, v1()).unwrap();
    assert!(matches!(fixture.sync().as_slice(), [Proposal::Add { .. }]));
}

/// `info` out of CPU time is more often a starved host than the plugin (CI once saw a 2 ms
/// `info` stopped at 200 ms): the content is loaded again, after a backoff the run loop
/// keeps, a few times before it is rejected like other broken content.
#[test]
fn content_whose_info_runs_out_of_cpu_time_is_loaded_again_a_few_times_then_rejected() {
    let runtime = Runtime::new(RuntimeConfig {
        limits: Limits {
            info_timeout: Duration::from_millis(20),
            ..Limits::default()
        },
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut fixture = Fixture::with_runtime(runtime);
    let path = fixture.path("many-memories.wasm");
    std::fs::write(&path, looping_at_start(640)).unwrap();
    for attempt in 1..4 {
        assert!(fixture.sync().is_empty(), "attempt {attempt}");
        assert!(
            fixture.registry.wants_load_again(),
            "attempt {attempt} is followed by another"
        );
        assert_eq!(fixture.reloads("rejected"), 0, "attempt {attempt}");
    }
    assert!(fixture.sync().is_empty());
    assert!(
        !fixture.registry.wants_load_again(),
        "the 4th attempt is the last"
    );
    assert_eq!(fixture.reloads("rejected"), 1);
    assert!(fixture.sync().is_empty());
    assert_eq!(
        fixture.reloads("rejected"),
        1,
        "rejected content is not loaded again"
    );

    // New content starts with every attempt again.
    std::fs::write(&path, looping_at_start(320)).unwrap();
    assert!(fixture.sync().is_empty());
    assert!(fixture.registry.wants_load_again());
}

/// The hand-written plugin of `many_memories`, looping in its start function: each load
/// runs out of time however busy the machine is (a merely short deadline does not: a call
/// of 2 ms can end before a starved epoch ticker ticks). `main_pages` varies the content.
fn looping_at_start(main_pages: u32) -> Vec<u8> {
    let text = many_memories_text("many-memories", "v1alpha1")
        .replace(
            "(global $loop_at_start i32 (i32.const 0))",
            "(global $loop_at_start i32 (i32.const 1))",
        )
        .replace(
            "(global $main_pages i32 (i32.const 640))",
            &format!("(global $main_pages i32 (i32.const {main_pages}))"),
        );
    wat::parse_str(&text).unwrap()
}

#[test]
fn a_plugin_is_known_by_its_file_name_not_by_the_name_it_declares() {
    let mut fixture = Fixture::new();
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    fixture.sync();
    // The Memcached plugin under another file name: it would borrow `mysql`'s policy entry.
    std::fs::write(fixture.path("mysql.wasm"), v2()).unwrap();
    assert!(fixture.sync().is_empty());
    assert_eq!(fixture.reloads("rejected"), 1);
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v1())));
    assert_eq!(fixture.served_hash("mysql.wasm"), None);
    // Renaming it to the name it declares, once the other file is gone, serves it.
    std::fs::remove_file(fixture.path("memcached.wasm")).unwrap();
    std::fs::rename(fixture.path("mysql.wasm"), fixture.path("memcached.wasm")).unwrap();
    let proposals = fixture.sync();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Replace { .. }]),
        "{proposals:?}"
    );
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
}

#[test]
fn another_parent_kind_needs_a_new_controller() {
    let runtime = warm_runtime();
    let load = |name: &str| {
        Arc::new(operator_host::plugin::Plugin::load(&runtime, &test_plugin(name)).unwrap())
    };
    let replace = |old: &str, new: &str| Proposal::Replace {
        old: load(old),
        new: load(new),
    };
    assert!(replace("memcached-v1", "hostile").needs_restart());
    assert!(!replace("memcached-v1", "memcached-v2").needs_restart());
}

#[test]
fn a_rejected_proposal_leaves_the_old_version_serving() {
    let mut fixture = Fixture::new();
    let path = fixture.path("memcached.wasm");
    std::fs::write(&path, v1()).unwrap();
    fixture.sync();
    std::fs::write(&path, v2()).unwrap();
    let proposals = fixture.registry.scan().unwrap();
    // E.g. the new CRD could not be installed.
    fixture
        .registry
        .reject(&proposals[0], &"the CRD was refused");
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v1())));
    assert_eq!(fixture.reloads("rejected"), 1);
    assert!(
        fixture.registry.scan().unwrap().is_empty(),
        "not retried until the file changes"
    );
}

#[test]
fn a_deferred_proposal_is_proposed_again_and_a_rejected_one_is_not() {
    let mut fixture = Fixture::new();
    let path = fixture.path("memcached.wasm");
    std::fs::write(&path, v1()).unwrap();
    let proposals = fixture.registry.scan().unwrap();
    // E.g. the API server was restarting while the CRD was installed.
    fixture
        .registry
        .defer(&proposals[0], &"the API server is unavailable");
    assert_eq!(fixture.served_hash("memcached.wasm"), None);
    assert_eq!(fixture.reloads("rejected"), 1);
    let again = fixture.registry.scan().unwrap();
    assert!(
        matches!(again.as_slice(), [Proposal::Add { .. }]),
        "retried without a change of the file: {again:?}"
    );
    fixture.registry.reject(&again[0], &"the CRD is invalid");
    assert!(fixture.registry.scan().unwrap().is_empty());
}

#[test]
fn content_the_cache_has_not_seen_serves_a_baseline_build_then_the_optimized_one() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut fixture = Fixture::with_runtime(runtime.clone());
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    let proposals = fixture.sync();
    let [Proposal::Add { plugin }] = proposals.as_slice() else {
        panic!("expected an add, got {proposals:?}");
    };
    assert_eq!(plugin.compiled.tier(), Tier::Baseline);
    let tier_up = fixture
        .tier_ups
        .blocking_recv()
        .expect("the optimizing compile reports back");
    let optimized = fixture
        .registry
        .finish_tier_up(tier_up)
        .expect("the optimized build is swapped in");
    assert_eq!(optimized.compiled.tier(), Tier::Optimized);
    assert_eq!(optimized.decl, plugin.decl);
    assert_eq!(
        fixture
            .registry
            .served(&fixture.path("memcached.wasm"))
            .unwrap()
            .compiled
            .tier(),
        Tier::Optimized
    );
    // Both builds compute the same thing.
    let request = operator_host::runtime::ReconcileRequest {
        parent: r#"{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"ns","uid":"u"},"spec":{"size":2}}"#.into(),
        observed: vec![],
        related: vec![],
    };
    let baseline = plugin
        .compiled
        .reconcile(&request, "test")
        .unwrap()
        .unwrap();
    let fast = optimized
        .compiled
        .reconcile(&request, "test")
        .unwrap()
        .unwrap();
    assert_eq!(baseline.children, fast.children);
    assert_eq!(baseline.status, fast.status);
    // The next load of that content is a cache hit, straight to the optimized build.
    let again = runtime
        .load_quick(&fixture.path("memcached.wasm"), &v1(), None)
        .unwrap();
    assert_eq!(again.tier(), Tier::Optimized);
}

/// [`Fixture::sync`] on a blocking thread: loading compiles, which must not stall the runtime.
async fn sync_off_runtime(mut fixture: Fixture) -> (Fixture, Vec<Proposal>) {
    tokio::task::spawn_blocking(move || {
        let proposals = fixture.sync();
        (fixture, proposals)
    })
    .await
    .unwrap()
}

/// Waits for the watcher's next signal; `None` if there is none within `timeout`.
async fn next_signal(signals: &mut UnboundedReceiver<()>, timeout: Duration) -> Option<()> {
    tokio::time::timeout(timeout, signals.recv())
        .await
        .ok()
        .flatten()
}

/// Consumes the signals that arrive within `quiet` of each other.
async fn drain(signals: &mut UnboundedReceiver<()>, quiet: Duration) {
    while next_signal(signals, quiet).await.is_some() {}
}

/// Asserts a signal for `change` within `within`, then consumes the rest of its burst.
async fn expect_signal(signals: &mut UnboundedReceiver<()>, within: Duration, change: &str) {
    assert!(next_signal(signals, within).await.is_some(), "{change}");
    drain(signals, Duration::from_millis(200)).await;
}

/// Makes each kind of change to a plugin file in `dir` (create, in place, rename, delete, a
/// ConfigMap volume and its `..data` swap) and asserts a signal `within` each.
async fn assert_each_change_signalled(
    dir: &Path,
    signals: &mut UnboundedReceiver<()>,
    within: Duration,
) {
    let path = dir.join("memcached.wasm");
    std::fs::write(&path, v1()).unwrap();
    expect_signal(signals, within, "create").await;
    std::fs::write(&path, v2()).unwrap();
    expect_signal(signals, within, "in place").await;
    write_by_rename(&path, &v1());
    expect_signal(signals, within, "rename").await;
    std::fs::remove_file(&path).unwrap();
    expect_signal(signals, within, "delete").await;
    let mut volume = ConfigMapVolume::new(dir, "memcached.wasm", &v1());
    expect_signal(signals, within, "volume").await;
    volume.update("memcached.wasm", &v2());
    expect_signal(signals, within, "..data symlink swap").await;
}

#[tokio::test]
async fn the_watcher_signals_each_kind_of_change_and_is_quiet_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let (_watcher, mut signals) = watch::watch_dir(dir.path(), watch::DEFAULT_DEBOUNCE).unwrap();
    let no_signal_within = Duration::from_millis(300);
    assert!(
        next_signal(&mut signals, no_signal_within).await.is_none(),
        "no change, no signal"
    );
    assert_each_change_signalled(dir.path(), &mut signals, Duration::from_secs(2)).await;
    // Reading is not a change (the registry reads every file it scans).
    std::fs::read(dir.path().join("memcached.wasm")).unwrap();
    assert!(
        next_signal(&mut signals, no_signal_within).await.is_none(),
        "a read made a signal"
    );
}

#[tokio::test]
async fn a_completed_write_is_signalled_without_waiting_for_the_debounce() {
    let dir = tempfile::tempdir().unwrap();
    let (_watcher, mut signals) = watch::watch_dir(dir.path(), Duration::from_secs(5)).unwrap();
    assert_each_change_signalled(dir.path(), &mut signals, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_burst_of_writes_becomes_one_reload_of_the_final_content() {
    let fixture = tokio::task::spawn_blocking(Fixture::new).await.unwrap();
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    let (fixture, _) = sync_off_runtime(fixture).await;
    let (_watcher, mut signals) =
        watch::watch_dir(fixture.dir.path(), watch::DEFAULT_DEBOUNCE).unwrap();
    // `cp` of the new build: truncate, then the bytes in 64 KiB chunks.
    let started = Instant::now();
    {
        use std::io::Write;
        let mut file = std::fs::File::create(fixture.path("memcached.wasm")).unwrap();
        for chunk in v2().chunks(64 << 10) {
            file.write_all(chunk).unwrap();
            file.flush().unwrap();
        }
    }
    let written = started.elapsed();
    assert!(
        next_signal(&mut signals, Duration::from_secs(2))
            .await
            .is_some()
    );
    // The first signal already finds the final content: one reload, nothing half-written.
    let (fixture, proposals) = sync_off_runtime(fixture).await;
    assert!(
        matches!(proposals.as_slice(), [Proposal::Replace { .. }]),
        "burst written in {written:?}: {proposals:?}"
    );
    // Later signals of the same burst (the debounced one) find nothing new.
    drain(&mut signals, Duration::from_millis(300)).await;
    let (mut fixture, proposals) = sync_off_runtime(fixture).await;
    assert!(proposals.is_empty(), "{proposals:?}");
    assert_eq!(
        fixture.reloads("rejected"),
        0,
        "no half-written content was loaded"
    );
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
    assert!(fixture.tier_ups.try_recv().is_err());
}

/// The hand-written plugin (host/tests/fixtures/many-memories.wat) named `name` (13
/// characters, as its data layout wants) serving its kind in API version `version` (8).
fn many_memories(name: &str, version: &str) -> Vec<u8> {
    wat::parse_str(many_memories_text(name, version)).unwrap()
}

fn many_memories_text(name: &str, version: &str) -> String {
    assert_eq!((name.len(), version.len()), (13, 8));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/many-memories.wat");
    std::fs::read_to_string(fixture)
        .unwrap()
        .replace("\"many-memories\"", &format!("{name:?}"))
        .replace("\"v1alpha1\"", &format!("{version:?}"))
        // ... and in its CRD, a JSON string inside a WAT string.
        .replace(r#"\"v1alpha1\""#, &format!(r#"\"{version}\""#))
}

#[test]
fn two_files_serving_one_kind_under_different_api_versions_are_refused() {
    let mut fixture = Fixture::new();
    // Both present at the first scan: only one of them is served.
    std::fs::write(
        fixture.path("many-memories.wasm"),
        many_memories("many-memories", "v1alpha1"),
    )
    .unwrap();
    std::fs::write(
        fixture.path("many-memorie2.wasm"),
        many_memories("many-memorie2", "v1alpha2"),
    )
    .unwrap();
    let proposals = fixture.sync();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert_eq!(fixture.reloads("rejected"), 1);
    let files = ["many-memories.wasm", "many-memorie2.wasm"];
    let served: Vec<_> = files
        .into_iter()
        .filter(|f| fixture.served_hash(f).is_some())
        .collect();
    assert_eq!(served.len(), 1, "{served:?}");
    // Refused again while the other serves, whatever its content; served once it is gone.
    let other = files.into_iter().find(|f| *f != served[0]).unwrap();
    assert!(fixture.sync().is_empty());
    assert_eq!(fixture.served_hash(other), None);
    std::fs::remove_file(fixture.path(served[0])).unwrap();
    let proposals = fixture.sync();
    assert!(
        matches!(
            proposals.as_slice(),
            [Proposal::Remove { .. }, Proposal::Add { .. }]
        ),
        "{proposals:?}"
    );
    assert!(fixture.served_hash(other).is_some());
}

/// An OperatorPlugin's `spec.policy` travels with its content: a new entry is a replacement
/// under the new policy (a controller restart, the same content), an invalid one is refused
/// once while the last one keeps applying, and removing it goes back to the host's policy.
#[test]
fn a_cluster_plugins_policy_entry_is_swapped_with_it_and_an_invalid_one_is_refused() {
    use operator_host::policy::Rules;
    use operator_host::registry::{ClusterOffer, ClusterPlugins, Outcome};
    let cluster = ClusterPlugins::default();
    let mut fixture = Fixture::new();
    fixture.registry = fixture.registry.with_cluster_plugins(cluster.clone());
    let id = ClusterPlugins::id("memcached");
    let offer = |policy: Option<&str>| ClusterOffer {
        digest: "sha256:0".into(),
        bytes: v1().into(),
        policy: policy.map(|yaml| serde_yaml::from_str::<Rules>(yaml).unwrap()),
        approval: None,
    };
    cluster.offer("memcached", offer(None));
    assert!(matches!(fixture.sync().as_slice(), [Proposal::Add { .. }]));

    cluster.offer("memcached", offer(Some("{maxChildren: 1}")));
    let proposals = fixture.sync();
    let [proposal @ Proposal::Replace { new, .. }] = proposals.as_slice() else {
        panic!("{proposals:?}");
    };
    assert!(
        proposal.needs_restart(),
        "the policy sets the write budget and the watches"
    );
    assert_eq!(new.policy.rules("memcached").max_children, 1);

    cluster.offer("memcached", offer(Some("{kinds: [Deployment]}")));
    assert!(fixture.sync().is_empty());
    let Outcome::Rejected { error, serving, .. } = fixture.registry.outcome(&id) else {
        panic!("{:?}", fixture.registry.outcome(&id));
    };
    assert!(
        error.contains("spec.policy of OperatorPlugin memcached"),
        "{error}"
    );
    assert_eq!(serving, Some(hash(&v1())));
    assert_eq!(
        fixture
            .registry
            .served(&id)
            .unwrap()
            .policy
            .rules("memcached")
            .max_children,
        1
    );
    assert!(
        fixture.sync().is_empty(),
        "the same refused entry is not tried again"
    );

    cluster.offer("memcached", offer(None));
    let proposals = fixture.sync();
    let [Proposal::Replace { new, .. }] = proposals.as_slice() else {
        panic!("{proposals:?}");
    };
    assert_eq!(new.policy.rules("memcached").max_children, 1000);
}

#[test]
fn a_new_version_takes_over_the_instance_slots_of_the_one_it_replaces() {
    // Every slot is the plugin's: a second reservation would not fit, so a swap that reserved
    // one would be refused while the old version still serves.
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(util::shared_cache_dir()),
        max_instances: 4,
        max_concurrent_calls: 4,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut fixture = Fixture::with_runtime(runtime.clone());
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    fixture.sync();
    assert_eq!(runtime.free_instance_slots(), 0);
    assert_eq!(
        fixture.instance_slots("memcached"),
        Some(4),
        "its share, in the metrics"
    );
    write_by_rename(&fixture.path("memcached.wasm"), &v2());
    let proposals = fixture.sync();
    assert!(
        matches!(proposals.as_slice(), [Proposal::Replace { .. }]),
        "{proposals:?}"
    );
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v2())));
    drop(proposals);
    assert_eq!(
        runtime.free_instance_slots(),
        0,
        "the new version holds the share"
    );
    assert_eq!(fixture.instance_slots("memcached"), Some(4));
    std::fs::remove_file(fixture.path("memcached.wasm")).unwrap();
    drop(fixture.sync());
    assert_eq!(
        runtime.free_instance_slots(),
        4,
        "the removed plugin returned it"
    );
    assert_eq!(fixture.instance_slots("memcached"), None);
}

#[test]
fn a_held_version_a_canary_and_a_rolled_back_one_are_told_apart() {
    use operator_host::registry::Outcome;
    let mut fixture = Fixture::new();
    std::fs::write(fixture.path("memcached.wasm"), v1()).unwrap();
    fixture.sync();
    std::fs::write(fixture.path("memcached.wasm"), v2()).unwrap();
    let id = fixture.path("memcached.wasm");
    let proposals = fixture.registry.scan().unwrap();
    let [proposal] = proposals.as_slice() else {
        panic!("{proposals:?}");
    };
    fixture
        .registry
        .hold(proposal, &"its plans would delete 8 children");
    assert!(
        matches!(fixture.registry.outcome(&id), Outcome::Held { reason, .. } if reason.contains("8 children"))
    );
    // Held content is proposed again, to be planned again or approved.
    let proposals = fixture.registry.scan().unwrap();
    let [proposal] = proposals.as_slice() else {
        panic!("{proposals:?}");
    };
    fixture.registry.canary(proposal, &"1 of 2 reconciled");
    assert!(matches!(
        fixture.registry.outcome(&id),
        Outcome::Canary { progress, serving: Some(_), .. } if progress == "1 of 2 reconciled"
    ));
    fixture.registry.roll_back(proposal, &"m-0: PruneHeld");
    assert!(matches!(
        fixture.registry.outcome(&id),
        Outcome::RolledBack { reason, .. } if reason.contains("PruneHeld")
    ));
    // Rolled back: not proposed again until the content changes.
    assert!(fixture.registry.scan().unwrap().is_empty());
    assert_eq!(fixture.served_hash("memcached.wasm"), Some(hash(&v1())));
}
