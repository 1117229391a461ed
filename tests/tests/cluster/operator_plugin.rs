//! Plugins shipped through the cluster: an `OperatorPlugin` names an artifact in a real
//! registry on loopback; the host pulls, serves and swaps it (by digest, by tag, by a tag that
//! moves), keeps the previous version serving through a missing artifact and a registry
//! outage, and after a restart during the outage serves what it pulled before. A release whose
//! plans would delete workloads is held before serving (`RolloutHeld`) until the resource's
//! annotation approves its digest; `operator-host rollback` goes back to the digest before. A
//! canary (`spec.policy.rollout`) says how far it is and when it was rolled back; each of
//! these is an event on the resource too.
//!
//! Signatures: an artifact serves only if a cosign signature verifies with the keys given;
//! unsigned, signed by another key, or carrying a signature copied from another artifact, it is
//! refused and the previous version keeps serving.
//!
//! Two leader-elected replicas each pull and serve the same digest, and `status.replicas` says
//! so; a replica that stops takes its entry away.
//!
//! `spec.policy` is the plugin's policy entry: it applies at once, one the CRD's schema refuses
//! never reaches the host, and one only the host can check is refused on the resource while
//! the last one keeps applying.
//!
//! OperatorPlugins are cluster-scoped and named as their plugin, so each test serves another
//! plugin, and each host serves only its test's OperatorPlugins (a label selector).

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use operator_host::plugin::Plugin;
use operator_host_tests::devcluster::{TestNamespace, kubectl, wait_for};
use operator_host_tests::election::plugin_dir;
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::memcached::{
    create, managed_children, memcached_resource, patch_spec, wait_for_reason,
};
use operator_host_tests::oci_registry::{TestRegistry, output_of};
use operator_host_tests::operator_plugins;
use operator_host_tests::oracle::{Oracle, all_converge};
use operator_host_tests::process_host::{ProcessHost, free_local_addr, http_get};
use serde_json::{Value, json};
use sha2::Digest as _;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const BOUND: Duration = Duration::from_secs(90);

/// Waits until the resource's status says `digest` serves (or, with `pulled: false`, that
/// the last pull failed while `digest` still serves); returns the status.
async fn wait_status(api: &Api<DynamicObject>, digest: &str, pulled: bool, when: &str) -> Value {
    wait_for_status(api, "memcached", when, |status| {
        status["digest"] == digest
            && condition(status, "Serving").as_deref() == Some("True")
            && condition(status, "Pulled").as_deref() == Some(if pulled { "True" } else { "False" })
    })
    .await
}

/// The status (True, False, Unknown) of condition `kind`.
fn condition(status: &Value, kind: &str) -> Option<String> {
    condition_of(status, kind)["status"]
        .as_str()
        .map(String::from)
}

/// The condition `kind` of `status` whole (reason, message).
fn condition_of(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until OperatorPlugin `name`'s status satisfies `holds`; returns it.
async fn wait_for_status(
    api: &Api<DynamicObject>,
    name: &str,
    when: &str,
    holds: impl Fn(&Value) -> bool,
) -> Value {
    let last = std::sync::Mutex::new(Value::Null);
    wait_for(when, BOUND, || async {
        let status = api.get(name).await?.data["status"].clone();
        *last.lock().unwrap() = status.clone();
        Ok(holds(&status).then_some(status))
    })
    .await
    .unwrap_or_else(|e| panic!("{when}: {e}; the status: {}", last.lock().unwrap()))
}

/// Waits until OperatorPlugin `name` has an event of `reason` whose message names `digest`
/// (events of a cluster-scoped object are kept in `default`).
async fn wait_for_event(ns: &TestNamespace, name: &str, reason: &str, digest: &str) {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(ns.client(), "default");
    let fields =
        format!("involvedObject.kind=OperatorPlugin,involvedObject.name={name},reason={reason}");
    wait_for(
        &format!("the {reason} event of {digest}"),
        BOUND,
        || async {
            let listed = events.list(&ListParams::default().fields(&fields)).await?;
            let found = listed
                .items
                .iter()
                .any(|event| event.message.as_deref().is_some_and(|m| m.contains(digest)));
            Ok(found.then_some(()))
        },
    )
    .await
    .unwrap();
}

/// Merge-patches `spec` into the memcached OperatorPlugin's spec.
async fn patch_operator_plugin(
    api: &Api<DynamicObject>,
    spec: Value,
) -> kube::Result<DynamicObject> {
    api.patch(
        "memcached",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
}

async fn set_source(api: &Api<DynamicObject>, source: &str) {
    patch_operator_plugin(api, json!({ "source": source }))
        .await
        .unwrap();
}

/// Sets (or, with null, removes) the memcached OperatorPlugin's `spec.policy`.
async fn set_policy(api: &Api<DynamicObject>, policy: Value) {
    patch_operator_plugin(api, json!({ "policy": policy }))
        .await
        .unwrap();
}

fn start_host(ns: &TestNamespace, store: &Path, extra: &[&str]) -> ProcessHost {
    operator_plugins::start_host(BINARY, ns, store, extra, None)
}

fn push(plugin: &Path, reference: &str) -> String {
    operator_plugins::push(BINARY, plugin, reference)
}

async fn create_operator_plugin(
    api: &Api<DynamicObject>,
    ns: &TestNamespace,
    name: &str,
    spec: Value,
) {
    operator_plugins::create(api, ns, name, spec, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_plugin_is_pulled_swapped_and_kept_serving_through_registry_outages() {
    let mut registry = TestRegistry::start().await;
    let v1 = plugin_path("plugins", "memcached");
    let v2_dir = plugin_dir("test-plugins", "memcached-v2");
    let v2 = v2_dir.path().join("memcached.wasm");
    let v1_digest = push(&v1, &registry.reference("plugins/memcached:1"));
    let v2_digest = push(&v2, &registry.reference("plugins/memcached:2"));
    assert_ne!(v1_digest, v2_digest);
    let plugin_v1 = Plugin::load(&runtime(), &v1).unwrap();
    let plugin_v2 = Plugin::load(&runtime(), &v2).unwrap();

    let ns = TestNamespace::new("oplugin").await.unwrap();
    let store = tempfile::tempdir().unwrap();
    let host = start_host(&ns, store.path(), &[]);
    let api = operator_plugins::api(ns.client());
    let spec = json!({
        "source": registry.reference("plugins/memcached:1"),
        "plainHTTP": true,
        "pollInterval": "2s",
    });
    create_operator_plugin(&api, &ns, "memcached", spec).await;
    let status = wait_status(&api, &v1_digest, true, "v1 serving").await;
    assert_eq!(status["plugin"], "memcached");
    assert_eq!(status["shortDigest"], v1_digest[7..19]);
    // `kubectl get` says what serves and how, not True or False.
    let shown = kubectl()
        .args(["get", "operatorplugin", "memcached", "--no-headers"])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&shown.stdout).to_string();
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        columns[1..4],
        [&v1_digest[7..19], "0.1.0", "Serving"],
        "{line}"
    );

    let parents = Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    let names: Vec<String> = (0..5).map(|i| format!("m-{i}")).collect();
    for name in &names {
        create(&parents, &memcached_resource(), name, json!({"size": 1})).await;
    }
    let oracle = |plugin| Oracle {
        client: ns.client(),
        plugin,
        namespace: ns.name(),
    };
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();
    let children_before = oracle(&plugin_v1).child_uids("m-0").await.unwrap();

    // `diff` of the next version compares it with the one the OperatorPlugin serves.
    let diffed = std::process::Command::new(BINARY)
        .args([
            "diff",
            &registry.reference("plugins/memcached:2"),
            "--plain-http",
        ])
        .args(["-n", ns.name(), "-o", "json", "--kubeconfig"])
        .arg(&operator_host_tests::devcluster::cluster().kubeconfig)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&diffed.stdout).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}",
            String::from_utf8_lossy(&diffed.stderr)
        )
    });
    assert_eq!(diffed.status.code(), Some(1), "{report:#}");
    assert_eq!(
        report["serving"]["source"],
        format!("{}@{v1_digest}", registry.reference("plugins/memcached:1")),
        "{report:#}"
    );
    assert_eq!(
        report["summary"]["parentsChanged"],
        names.len(),
        "{report:#}"
    );

    // spec.policy is this plugin's policy entry, applied without a new pull.
    set_policy(&api, json!({"maxChildren": 1})).await;
    let violation = wait_for_reason(&parents, "m-0", "PolicyViolation", BOUND).await;
    assert!(
        violation["message"].to_string().contains("at most 1"),
        "{violation}"
    );
    // One the CRD's schema refuses never reaches the host.
    let refused = patch_operator_plugin(&api, json!({"policy": {"podSecurity": "lenient"}}))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("podSecurity"), "{refused}");
    // One only the host can check is refused on the resource; the last one keeps applying.
    set_policy(&api, json!({"kinds": ["Deployment"]})).await;
    let status = wait_for_status(&api, "memcached", "an invalid spec.policy", |status| {
        condition_of(status, "Serving")["reason"] == "Rejected"
    })
    .await;
    let serving = condition_of(&status, "Serving")["message"].to_string();
    assert!(
        serving.contains("spec.policy.kinds[0]") && serving.contains("keeps serving"),
        "{serving}"
    );
    patch_spec(&parents, "m-1", json!({"size": 2})).await;
    wait_for_reason(&parents, "m-1", "PolicyViolation", BOUND).await;
    set_policy(&api, Value::Null).await;
    wait_status(&api, &v1_digest, true, "v1 without spec.policy").await;
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();
    assert_eq!(
        oracle(&plugin_v1).child_uids("m-0").await.unwrap(),
        children_before
    );

    // A new version by digest: a hot swap, no child recreated.
    set_source(
        &api,
        &registry.reference(&format!("plugins/memcached@{v2_digest}")),
    )
    .await;
    wait_status(&api, &v2_digest, true, "v2 by digest").await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();
    assert_eq!(
        oracle(&plugin_v2).child_uids("m-0").await.unwrap(),
        children_before
    );

    // Back to v1 by a tag, which then moves to v2: picked up at the next poll.
    // (Each push stamps its time, so a push of the same plugin is another digest.)
    let stable = push(&v1, &registry.reference("plugins/memcached:stable"));
    set_source(&api, &registry.reference("plugins/memcached:stable")).await;
    wait_status(&api, &stable, true, "v1 by tag").await;
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();
    let stable = push(&v2, &registry.reference("plugins/memcached:stable"));
    wait_status(&api, &stable, true, "the moved tag").await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();

    // A missing artifact: refused, v2 keeps serving.
    set_source(&api, &registry.reference("plugins/memcached:missing")).await;
    let status = wait_status(&api, &stable, false, "a missing artifact").await;
    let pulled = status["conditions"].to_string();
    assert!(
        pulled.contains("PullFailed") && pulled.contains("keeps serving"),
        "{pulled}"
    );
    patch_spec(&parents, "m-1", json!({"size": 2})).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();

    // The registry goes down during a swap: v2 keeps serving.
    registry.stop().await;
    set_source(&api, &registry.reference("plugins/memcached:1")).await;
    wait_status(&api, &stable, false, "the registry down during a swap").await;
    patch_spec(&parents, "m-2", json!({"size": 2})).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();

    // A restart while the registry is still down serves what was pulled before.
    host.kill().await;
    let mut host = start_host(&ns, store.path(), &[]);
    patch_spec(&parents, "m-3", json!({"size": 2})).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "after a restart with the registry down: {e}\n{}",
                host.log_tail(40)
            )
        });
    host.assert_running("with the registry down").await;

    // The registry is back (empty): once v1 is pushed again, the source resolves.
    registry.restart().await;
    let again = push(&v1, &registry.reference("plugins/memcached:1"));
    wait_status(&api, &again, true, "the registry back").await;
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();

    // A release with a bug (no children) is held before it serves, on the resource too; the
    // annotation naming its digest approves it.
    let buggy_dir = plugin_dir("test-plugins", "memcached-no-children");
    let buggy_digest = push(
        &buggy_dir.path().join("memcached.wasm"),
        &registry.reference("plugins/memcached:buggy"),
    );
    let children = managed_children(&ns, "").await.0;
    assert_eq!(children.len(), 2 * names.len());
    set_source(&api, &registry.reference("plugins/memcached:buggy")).await;
    let status = wait_for_status(&api, "memcached", "the buggy release held", |status| {
        status["digest"] == buggy_digest.as_str()
            && condition(status, "RolloutHeld").as_deref() == Some("True")
    })
    .await;
    assert_eq!(condition_of(&status, "Serving")["reason"], "RolloutHeld");
    wait_for_event(&ns, "memcached", "RolloutHeld", &buggy_digest).await;
    let held = condition_of(&status, "RolloutHeld")["message"].to_string();
    assert!(
        held.contains("Deployment 5, Service 5") && held.contains("approve-rollout"),
        "{held}"
    );
    assert_eq!(managed_children(&ns, "").await.0, children);
    api.patch(
        "memcached",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "operator-host.dev/approve-rollout": buggy_digest,
        }}})),
    )
    .await
    .unwrap();
    let status = wait_status(&api, &buggy_digest, true, "the approved release").await;
    assert_eq!(condition(&status, "RolloutHeld").as_deref(), Some("False"));
    wait_for("the approved release's deletions", BOUND, || async {
        Ok(managed_children(&ns, "").await.0.is_empty().then_some(()))
    })
    .await
    .unwrap();

    // `rollback`: back to the digest that served before, in one step.
    assert_eq!(status["previousDigest"], again.as_str(), "{status}");
    let rolled_back = output_of(
        std::process::Command::new(BINARY)
            .args(["rollback", "memcached", "--kubeconfig"])
            .arg(&operator_host_tests::devcluster::cluster().kubeconfig),
    );
    assert!(rolled_back.contains(&again), "{rolled_back}");
    wait_status(&api, &again, true, "rolled back").await;
    all_converge(&oracle(&plugin_v1), &names, BOUND)
        .await
        .unwrap();

    // A canary through spec.policy, applied with the new source in one change as `kubectl
    // apply` does (the new policy makes it a controller restart, which comes with the
    // promotion): v2 serves part of the parents first (RolloutProgressing), then all; the
    // buggy release, let past the gate here, fails on its canary parents (their deletions are
    // held) and is rolled back (RolledBack).
    patch_operator_plugin(
        &api,
        json!({
            "source": registry.reference(&format!("plugins/memcached@{v2_digest}")),
            "policy": {"rollout": {"strategy": "Canary", "canaryPercent": 40,
                                   "analysisSeconds": 5, "holdWorkloadDeletes": false,
                                   "maxDeletePercent": 100}},
        }),
    )
    .await
    .unwrap();
    wait_for_status(&api, "memcached", "v2's canary", |status| {
        status["digest"] == v2_digest.as_str()
            && condition(status, "RolloutProgressing").as_deref() == Some("True")
    })
    .await;
    let status = wait_status(&api, &v2_digest, true, "v2 promoted").await;
    assert_eq!(
        condition(&status, "RolloutProgressing").as_deref(),
        Some("False")
    );
    wait_for_event(&ns, "memcached", "CanaryStarted", &v2_digest).await;
    wait_for_event(&ns, "memcached", "CanaryPromoted", &v2_digest).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();
    let children = managed_children(&ns, "").await.0;
    let buggy_again = push(
        &buggy_dir.path().join("memcached.wasm"),
        &registry.reference("plugins/memcached:buggy-again"),
    );
    set_source(&api, &registry.reference("plugins/memcached:buggy-again")).await;
    let status = wait_for_status(
        &api,
        "memcached",
        "the buggy canary rolled back",
        |status| {
            status["digest"] == buggy_again.as_str()
                && condition(status, "RolledBack").as_deref() == Some("True")
        },
    )
    .await;
    assert_eq!(condition_of(&status, "Serving")["reason"], "RolledBack");
    let rolled_back = condition_of(&status, "RolledBack")["message"].to_string();
    assert!(rolled_back.contains("PruneHeld"), "{rolled_back}");
    wait_for_event(&ns, "memcached", "RolledBack", &buggy_again).await;
    all_converge(&oracle(&plugin_v2), &names, BOUND)
        .await
        .unwrap();
    assert_eq!(managed_children(&ns, "").await.0, children);

    api.delete("memcached", &Default::default()).await.unwrap();
    host.kill().await;
    ns.cleanup().await.unwrap();
}

/// `host generate-key` into `dir`: (private key path, public key PEM).
fn generate_key(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
    output_of(
        std::process::Command::new(BINARY)
            .arg("generate-key")
            .arg(dir.join(name)),
    );
    let public = std::fs::read_to_string(dir.join(format!("{name}.pub"))).unwrap();
    (dir.join(format!("{name}.key")), public)
}

fn sign(key: &Path, reference: &str) {
    output_of(
        std::process::Command::new(BINARY)
            .args(["sign", "--plain-http", "--key"])
            .arg(key)
            .arg(reference),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_serves_only_with_a_signature_by_a_given_key() {
    let registry = TestRegistry::start().await;
    let keys = tempfile::tempdir().unwrap();
    let (publisher, publisher_public) = generate_key(keys.path(), "publisher");
    let (stranger, _) = generate_key(keys.path(), "stranger");
    let mysql = plugin_path("plugins", "mysql");
    let first = registry.reference("plugins/mysql:1");
    let first_digest = push(&mysql, &first);

    let ns = TestNamespace::new("oplugin-signed").await.unwrap();
    let store = tempfile::tempdir().unwrap();
    // The policy requires signatures of every plugin the cluster declares (and lets mysql
    // read its root Secret, as hashes).
    let policy = store.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: operator-host.dev/v1alpha1\nkind: Policy\ndefaults:\n  requireSignature: true\n  allowSecrets: true\n",
    )
    .unwrap();
    let _host = start_host(&ns, store.path(), &["--policy", policy.to_str().unwrap()]);
    let api = operator_plugins::api(ns.client());
    let spec = json!({
        "source": first,
        "plainHTTP": true,
        "pollInterval": "2s",
        "verify": {"keys": [publisher_public]},
    });
    create_operator_plugin(&api, &ns, "mysql", spec).await;
    let refused = |reason: &'static str| {
        move |status: &Value| condition_of(status, "Verified")["reason"] == reason
    };

    // Unsigned: refused, nothing serves.
    let status = wait_for_status(&api, "mysql", "unsigned", refused("Unsigned")).await;
    assert!(
        status["digest"].is_null(),
        "an unsigned artifact was offered: {status}"
    );
    // Signed by another key: refused.
    sign(&stranger, &first);
    wait_for_status(&api, "mysql", "signed by a stranger", refused("WrongKey")).await;
    // Signed by the publisher: it serves.
    sign(&publisher, &first);
    let status = wait_for_status(&api, "mysql", "signed by the publisher", |status| {
        condition(status, "Verified").as_deref() == Some("True")
            && condition(status, "Serving").as_deref() == Some("True")
    })
    .await;
    assert_eq!(status["digest"], first_digest.as_str());

    // Another artifact carrying the first one's signature (copied to its .sig tag): refused,
    // the first keeps serving.
    let second = registry.reference("plugins/mysql:2");
    let second_digest = push(&mysql, &second);
    let access = operator_host::oci::Access {
        plain_http: true,
        ..Default::default()
    };
    let copied = operator_host::oci::pull_signatures(&first, &first_digest, &access)
        .await
        .unwrap();
    for signature in copied {
        operator_host::oci::push_signature(&second, &second_digest, signature, &access)
            .await
            .unwrap();
    }
    api.patch(
        "mysql",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": second}})),
    )
    .await
    .unwrap();
    let status = wait_for_status(&api, "mysql", "a copied signature", refused("OtherDigest")).await;
    assert_eq!(status["digest"], first_digest.as_str(), "{status}");
    let message = condition_of(&status, "Verified")["message"].to_string();
    assert!(message.contains("keeps serving"), "{message}");
    assert_eq!(condition(&status, "Serving").as_deref(), Some("True"));

    // No key at all while the policy requires a signature: refused.
    api.patch(
        "mysql",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"verify": null}})),
    )
    .await
    .unwrap();
    wait_for_status(&api, "mysql", "no key", refused("NoKey")).await;

    api.delete("mysql", &Default::default()).await.unwrap();
    ns.cleanup().await.unwrap();
}

/// The content hashes plugin `name` serves on the host whose metrics are at `metrics`.
async fn served_hashes(metrics: std::net::SocketAddr, name: &str) -> Vec<String> {
    let (_, text) = http_get(metrics, "/metrics").await.unwrap_or_default();
    text.lines()
        .filter(|line| line.contains(&format!("plugin=\"{name}\"")) && line.contains("sha256=\""))
        .filter_map(|line| {
            line.split("sha256=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(String::from)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leader_elected_replicas_serve_the_same_digest() {
    let registry = TestRegistry::start().await;
    let plugin = plugin_path("test-plugins", "hostile");
    let source = registry.reference("plugins/hostile:1");
    let digest = push(&plugin, &source);
    let content_hash = hex::encode(sha2::Sha256::digest(std::fs::read(&plugin).unwrap()));
    let ns = TestNamespace::new("oplugin-ha").await.unwrap();
    let api = operator_plugins::api(ns.client());
    let (stores, metrics): (Vec<_>, Vec<_>) = (0..2)
        .map(|_| (tempfile::tempdir().unwrap(), free_local_addr()))
        .unzip();
    let hosts: Vec<ProcessHost> = (0..2)
        .map(|i| {
            let identity = format!("replica-{i}");
            operator_plugins::start_host(
                BINARY,
                &ns,
                stores[i].path(),
                &[
                    "--leader-elect",
                    "--leader-elect-namespace",
                    ns.name(),
                    "--leader-elect-identity",
                    &identity,
                ],
                Some(metrics[i]),
            )
        })
        .collect();
    let spec = json!({"source": source, "plainHTTP": true, "pollInterval": "2s"});
    create_operator_plugin(&api, &ns, "hostile", spec).await;
    // Each replica pulls into its own store and serves the same content, the standby too.
    for (i, addr) in metrics.iter().enumerate() {
        wait_for(
            &format!("replica {i} to serve the digest"),
            BOUND,
            || async {
                Ok((served_hashes(*addr, "hostile").await == [content_hash.clone()]).then_some(()))
            },
        )
        .await
        .unwrap();
        assert!(
            stores[i]
                .path()
                .join(format!("{}.wasm", digest.replace(':', "-")))
                .exists()
        );
    }
    // The status is the leader's, and says what each replica serves.
    let replicas = |status: &Value| -> Vec<(String, String)> {
        let mut listed: Vec<(String, String)> = status["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let field = |key: &str| r[key].as_str().unwrap_or_default().to_string();
                (field("name"), field("digest"))
            })
            .collect();
        listed.sort();
        listed
    };
    let both: Vec<(String, String)> = (0..2)
        .map(|i| (format!("replica-{i}"), digest.clone()))
        .collect();
    wait_for_status(
        &api,
        "hostile",
        "the leader's status and both replicas",
        |status| {
            status["digest"] == digest.as_str()
                && condition(status, "Serving").as_deref() == Some("True")
                && replicas(status) == both
        },
    )
    .await;
    // A replica that stops takes its entry away.
    let mut hosts = hosts.into_iter();
    let mut stopping = hosts.next().unwrap();
    stopping.signal("TERM");
    assert!(
        stopping
            .exited(Duration::from_secs(10))
            .await
            .is_some_and(|s| s.success())
    );
    wait_for_status(
        &api,
        "hostile",
        "the stopped replica's entry gone",
        |status| replicas(status) == both[1..],
    )
    .await;
    api.delete("hostile", &Default::default()).await.unwrap();
    for host in hosts {
        host.kill().await;
    }
    ns.cleanup().await.unwrap();
}
