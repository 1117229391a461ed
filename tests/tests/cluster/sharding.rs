//! Sharding (`run --shard`): host processes share the Memcached parents of one namespace; the
//! leader assigns each to a live replica, and moves parents only through the drain handshake
//! (or at once off a replica whose shard Lease it has taken over).
//!
//! Each host talks to the API server through a fault proxy of its own that records every
//! request, so the test knows which replica wrote what and when. A parent's reconcile writes
//! (its children's applies and its status) must come from one replica at a time: sorted by
//! time, the writers of each parent form runs, and no replica has two runs (rendezvous hashing
//! never moves a parent back to a replica it left in this test). With the handshake disabled
//! (`OPERATOR_HOST_UNSAFE_SKIP_DRAIN=1` in the environment of a fault-injection build), the
//! same check fails: the old owner still writes after the new owner has started.
//!
//! A canary rollout on sharded replicas: every replica serves the one split, whichever shard
//! holds a parent, and the split survives a leader change that moves the leader's parents to
//! the replica left.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use operator_host::plugin::Plugin;
use operator_host::shard::{DRAIN_LABEL, SHARD_LABEL};
use operator_host_tests::devcluster::wait_for;
use operator_host_tests::election::{CONVERGE, Candidate, Election, LEASE, held_canary_policy};
use operator_host_tests::host::{plugin_path, publish, runtime};
use operator_host_tests::memcached::on_v2;
use operator_host_tests::oracle::all_converge;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const CRS: usize = 300;

/// The shard of each parent, and the parents that carry a drain label.
async fn assignments(election: &Election) -> (BTreeMap<String, String>, Vec<String>) {
    let parents = election
        .parents
        .list_metadata(&ListParams::default())
        .await
        .unwrap();
    let mut shards = BTreeMap::new();
    let mut draining = Vec::new();
    for parent in parents.items {
        if let Some(shard) = parent.labels().get(SHARD_LABEL) {
            shards.insert(parent.name_any(), shard.clone());
        }
        if parent.labels().contains_key(DRAIN_LABEL) {
            draining.push(parent.name_any());
        }
    }
    (shards, draining)
}

fn shares(shards: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut shares = BTreeMap::new();
    for shard in shards.values() {
        *shares.entry(shard.clone()).or_default() += 1;
    }
    shares
}

/// Waits until every one of the `parents` parents is assigned to one of `live`, none is
/// draining, and each of `live` holds at least `least`; returns the assignment, or what it
/// was at the deadline.
async fn settled(
    election: &Election,
    parents: usize,
    live: &[&str],
    least: usize,
    bound: Duration,
) -> Result<BTreeMap<String, String>, String> {
    let outcome = wait_for(
        "the parents sharded over the live replicas",
        bound,
        || async {
            // Metadata only, and not too often: the API server is what the hosts wait for.
            tokio::time::sleep(Duration::from_millis(400)).await;
            let (shards, draining) = assignments(election).await;
            let shares = shares(&shards);
            let done = shards.len() == parents
                && draining.is_empty()
                && shards.values().all(|s| live.contains(&s.as_str()))
                && live
                    .iter()
                    .all(|s| shares.get(*s).copied().unwrap_or(0) >= least);
            Ok(done.then_some(shards))
        },
    )
    .await;
    match outcome {
        Ok(shards) => Ok(shards),
        Err(e) => Err(format!("{e}: {}", describe(election, parents).await)),
    }
}

/// What the shards hold and how many parents are draining, for a failure message.
async fn describe(election: &Election, parents: usize) -> String {
    let (shards, draining) = assignments(election).await;
    format!(
        "{} of {parents} parents assigned, shares {:?}, {} draining (e.g. {:?})",
        shards.len(),
        shares(&shards),
        draining.len(),
        draining.first()
    )
}

/// Panics with `problem` and the tail of each replica's log (whole logs in the directory
/// `OPERATOR_HOST_TEST_DUMP_LOGS` names, if set).
fn fail(replicas: &[Candidate], problem: String) -> ! {
    if let Ok(dir) = std::env::var("OPERATOR_HOST_TEST_DUMP_LOGS") {
        for replica in replicas {
            let _ = std::fs::write(format!("{dir}/{}.log", replica.name), replica.host.log());
        }
    }
    let tails: Vec<String> = replicas
        .iter()
        .map(|r| format!("--- {}:\n{}", r.name, r.host.log_tail(15)))
        .collect();
    panic!("{problem}\n{}", tails.join("\n"));
}

/// The parent a reconcile write is about: the Memcached's status, or a child (named after its
/// parent). The leader's label patches of parents and the owners' drain acks are the
/// handshake's, not a reconcile's, and events name no parent in their path.
fn parent_written(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match segments.as_slice() {
        [.., "memcacheds", name, "status"] => Some((*name).to_string()),
        [.., "deployments" | "services", name] => Some((*name).to_string()),
        _ => None,
    }
}

/// Fails if any parent was written by two replicas at once: per parent, the writes sorted by
/// time must form one run per replica. Returns the number of parents that changed writer.
fn assert_one_writer_at_a_time(replicas: &[&Candidate]) -> usize {
    let mut writes: HashMap<String, Vec<(Instant, String)>> = HashMap::new();
    for replica in replicas {
        for (at, write) in replica.write_times() {
            let path = write.split_once(' ').map_or("", |(_, p)| p);
            if let Some(parent) = parent_written(path) {
                writes
                    .entry(parent)
                    .or_default()
                    .push((at, replica.name.clone()));
            }
        }
    }
    let mut moved = 0;
    let mut overlaps = Vec::new();
    for (parent, mut writes) in writes {
        writes.sort();
        let mut runs: Vec<&str> = Vec::new();
        for (_, writer) in &writes {
            if runs.last() != Some(&writer.as_str()) {
                runs.push(writer);
            }
        }
        let mut seen = std::collections::HashSet::new();
        if runs.iter().any(|writer| !seen.insert(*writer)) {
            overlaps.push(format!("{parent}: writers in turn {runs:?}"));
        }
        if runs.len() > 1 {
            moved += 1;
        }
    }
    overlaps.sort();
    assert!(
        overlaps.is_empty(),
        "{} parents were written by two replicas at once, e.g. {:?}",
        overlaps.len(),
        &overlaps[..overlaps.len().min(5)]
    );
    moved
}

async fn wait_ready(candidate: &mut Candidate) {
    let said = format!("shard {}", candidate.name);
    let started = Instant::now();
    loop {
        let role = candidate.role().await;
        if role.starts_with("ready:") && role.contains(&said) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} is not ready as a shard: {role:?}; log tail:\n{}",
            candidate.name,
            candidate.host.log_tail(40)
        );
        candidate.host.assert_running("waiting for its shard").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_300_parents_and_a_killed_or_added_replica_moves_them_safely() {
    let election = Election::new(BINARY, "shard-ring").await;
    let plugins = election.v1.path();
    let mut replicas = Vec::new();
    for name in ["host-a", "host-b", "host-c"] {
        let mut replica = election.candidate_with(name, plugins, &["--shard"]).await;
        wait_ready(&mut replica).await;
        replicas.push(replica);
    }
    let names = election.create_many(0, CRS, 1).await;
    let converged = election
        .converge(&election.plugin, &names, "300 CRs over 3 replicas")
        .await;
    let shards = settled(
        &election,
        CRS,
        &["host-a", "host-b", "host-c"],
        CRS / 6,
        Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|e| fail(&replicas, e));
    println!(
        "sharding: 300 CRs converged in {converged:?} over 3 replicas; shares {:?}",
        shares(&shards)
    );

    // SIGKILL one replica: once its Lease has expired and the leader has taken it over, its
    // parents are reassigned, and each new shard reconciles them (applies their children,
    // which then carry its label) within the lease duration and 5 s.
    let mut killed = replicas.pop().unwrap();
    let orphans: Vec<String> = shards
        .iter()
        .filter(|(_, shard)| *shard == "host-c")
        .map(|(name, _)| name.clone())
        .collect();
    let kill_at = Instant::now();
    killed.host.signal("KILL");
    killed.host.exited(Duration::from_secs(5)).await;
    let deployments: Api<Deployment> = Api::namespaced(election.ns.client(), election.ns.name());
    wait_for(
        "the killed replica's parents reassigned and reconciled by their new shards",
        LEASE + Duration::from_secs(20),
        || async {
            let (shards, _) = assignments(&election).await;
            // Metadata only, and not too often: the API server is what the hosts wait for.
            tokio::time::sleep(Duration::from_millis(400)).await;
            let listed = deployments.list_metadata(&ListParams::default()).await?;
            let reconciled = listed
                .items
                .iter()
                .filter(|d| orphans.contains(&d.name_any()))
                .filter(|d| d.labels().get(SHARD_LABEL).is_some_and(|s| s != "host-c"))
                .count();
            let moved = !shards.values().any(|s| s == "host-c");
            Ok((moved && reconciled == orphans.len()).then_some(()))
        },
    )
    .await
    .unwrap();
    let taken_over = kill_at.elapsed();
    println!(
        "sharding: the {} parents of the killed replica reassigned and reconciled by their new shards {taken_over:?} after the kill",
        orphans.len()
    );
    // The goal is the lease and 5 s; on a 2-core machine whose API server also serves three
    // hosts, the fake nodes and the test, ~100 moved parents take 4-6 s of the API server's
    // writes after the takeover, so CI allows 10 s (docs/benchmarks.md has the figures).
    assert!(
        taken_over <= LEASE + Duration::from_secs(10),
        "the killed replica's parents took {taken_over:?} to move (lease {LEASE:?})"
    );
    election.resize(&orphans, 2).await;
    let converged = all_converge(&election.oracle(&election.plugin), &orphans, CONVERGE)
        .await
        .unwrap_or_else(|e| panic!("the killed replica's parents: {e}"));
    println!(
        "sharding: resized, they converged (pods ready, status written) in {converged:?} on their new shards"
    );
    settled(
        &election,
        CRS,
        &["host-a", "host-b"],
        CRS / 4,
        Duration::from_secs(10),
    )
    .await
    .unwrap_or_else(|e| fail(&replicas, e));

    // A fourth replica joins while every parent is being changed: it takes a share through the
    // drain handshake, and no parent has two writers meanwhile.
    election.resize(&names, 3).await;
    let mut joined = election
        .candidate_with("host-d", plugins, &["--shard"])
        .await;
    wait_ready(&mut joined).await;
    replicas.push(joined);
    let shards = settled(
        &election,
        CRS,
        &["host-a", "host-b", "host-d"],
        CRS / 6,
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|e| fail(&replicas, e));
    if let Err(stuck) = all_converge(&election.oracle(&election.plugin), &names, CONVERGE).await {
        let (now, _) = assignments(&election).await;
        let mut stuck_shards: BTreeMap<&str, usize> = BTreeMap::new();
        for (name, _) in &stuck.failed {
            let shard = now.get(name).map_or("unassigned", String::as_str);
            *stuck_shards.entry(shard).or_default() += 1;
        }
        fail(
            &replicas,
            format!(
                "300 CRs after host-d joined: {stuck}; the stuck ones by shard: {stuck_shards:?}"
            ),
        );
    }
    println!(
        "sharding: after host-d joined, shares {:?}",
        shares(&shards)
    );
    let mut writers: Vec<&Candidate> = replicas.iter().collect();
    // The killed replica's writes count too: its tenure ended with the kill.
    writers.push(&killed);
    let moved = assert_one_writer_at_a_time(&writers);
    println!("sharding: {moved} parents changed writer, each with one writer at a time");
    assert!(moved >= CRS / 6, "only {moved} parents moved");
    for replica in replicas {
        replica.host.kill().await;
    }
    election.ns.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_split_is_one_across_shards_and_survives_a_leader_change() {
    const PARENTS: usize = 10;
    let election = Election::new(BINARY, "shard-canary").await;
    let plugins = election.v1.path();
    let policy = held_canary_policy();
    let args = ["--shard", "--policy", policy.path().to_str().unwrap()];
    let mut replicas = Vec::new();
    for name in ["host-a", "host-b"] {
        let mut replica = election.candidate_with(name, plugins, &args).await;
        wait_ready(&mut replica).await;
        replicas.push(replica);
    }
    let names = election.create_many(0, PARENTS, 1).await;
    election
        .converge(&election.plugin, &names, "the parents over 2 shards")
        .await;
    let shards = settled(
        &election,
        PARENTS,
        &["host-a", "host-b"],
        1,
        Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|e| fail(&replicas, e));
    let mut leader = None;
    for (index, replica) in replicas.iter().enumerate() {
        if replica.role().await.starts_with("ready: leader") {
            leader = Some(index);
        }
    }
    let leader = leader.unwrap_or_else(|| fail(&replicas, "no replica leads".into()));

    // v2 lands in the directory both replicas serve: half the parents, the same half
    // whichever shard holds them.
    let v2 = plugin_path("test-plugins", "memcached-v2");
    let file = plugins.join("memcached.wasm");
    publish(&v2, &file);
    let split = wait_for("the canary split", CONVERGE, || async {
        let now = on_v2(&election.ns).await;
        let canary = now.values().filter(|v2| **v2).count();
        Ok((now.len() == PARENTS && canary == PARENTS / 2).then_some(now))
    })
    .await
    .unwrap_or_else(|e| fail(&replicas, e.to_string()));
    let mut canary_by_shard: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in split.iter().filter(|(_, v2)| **v2) {
        *canary_by_shard.entry(shards[name].as_str()).or_default() += 1;
    }
    println!("sharding: canary parents by shard {canary_by_shard:?}");

    // The leader goes: the replica left leads, holds every parent, and serves the same split.
    let mut gone = replicas.remove(leader);
    let left = replicas[0].name.clone();
    gone.host.signal("KILL");
    gone.host.exited(Duration::from_secs(5)).await;
    let deployments: Api<Deployment> = Api::namespaced(election.ns.client(), election.ns.name());
    wait_for(
        "every parent moved to the replica left and reconciled by it",
        LEASE + Duration::from_secs(60),
        || async {
            let (shards, _) = assignments(&election).await;
            let listed = deployments.list_metadata(&ListParams::default()).await?;
            let moved = shards.len() == PARENTS && shards.values().all(|s| *s == left);
            let reconciled = listed
                .items
                .iter()
                .all(|d| d.labels().get(SHARD_LABEL) == Some(&left));
            Ok((moved && reconciled && listed.items.len() == PARENTS).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| fail(&replicas, e.to_string()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        on_v2(&election.ns).await,
        split,
        "the split changed when the leader's parents moved"
    );

    // Approved, the canary is promoted: every parent on v2.
    let hash = Plugin::load(&runtime(), &v2).unwrap().decl.content_hash;
    std::fs::write(format!("{}.approved", file.display()), hash).unwrap();
    wait_for("every parent on v2", CONVERGE, || async {
        Ok(on_v2(&election.ns)
            .await
            .values()
            .all(|v2| *v2)
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| fail(&replicas, e.to_string()));
    election.ns.cleanup().await.unwrap();
}
