//! The monitoring shipped in deploy/install/monitoring, checked the way Prometheus and Grafana
//! will use it: the alert rules by `promtool check rules` and `promtool test rules` (built
//! from Prometheus' Go module by the tools' build.sh), and every dashboard query evaluated by
//! Prometheus' PromQL engine over a real host's /metrics.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use operator_host_tests::devcluster::{repo_root, wait_for};
use operator_host_tests::election::{CONVERGE, Election, held_canary_policy};
use operator_host_tests::host::{plugin_path, publish};
use operator_host_tests::hostile::{attack_resource, release_attacks};
use operator_host_tests::manifests::{one, render};
use operator_host_tests::memcached::{
    create, custom_resource, memcached_resource, patch_spec, wait_for_reason,
};
use operator_host_tests::process_host::http_get;
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");

/// How far apart the two scrapes are: dashcheck's `scrapeInterval`.
const SCRAPE_INTERVAL: Duration = Duration::from_secs(15);

fn monitoring_dir() -> PathBuf {
    repo_root().join("deploy/install/monitoring")
}

/// The bin dir of promtool and dashcheck.test, built once per version.
fn monitoring_tools() -> PathBuf {
    let script = monitoring_dir().join("tools/build.sh");
    let output = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// Runs `command`; panics with its output unless it succeeds, returns its stdout otherwise.
fn run_ok(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    // Indented: CI's summary counts go test's own `--- FAIL:` lines as failed tests.
    let indented = |text: &str| text.lines().map(|l| format!("  {l}\n")).collect::<String>();
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        indented(&stdout),
        indented(&String::from_utf8_lossy(&output.stderr))
    );
    stdout
}

/// The objects `kubectl kustomize deploy/install/monitoring` renders: what ships.
fn rendered() -> Vec<Value> {
    render(&monitoring_dir())
}

/// Each alerting rule of the rendered PrometheusRule, by alert name.
fn alerts(rules: &Value) -> Vec<(String, &Value)> {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap())
        .filter_map(|rule| Some((rule["alert"].as_str()?.to_string(), rule)))
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_each_fires_in_its_unit_tests() {
    let objects = rendered();
    let rules = &one(&objects, "PrometheusRule")["spec"];
    let alerts = alerts(rules);
    assert!(!alerts.is_empty(), "the PrometheusRule has no alerts");
    let tests_path = monitoring_dir().join("alerts.test.yaml");
    let mut tests: Value =
        serde_yaml::from_str(&std::fs::read_to_string(&tests_path).unwrap()).unwrap();
    // The cases give the templated summary; each rule's runbook is static text, added here
    // rather than copied into the cases.
    let mut fired = std::collections::BTreeSet::new();
    for case in tests["tests"].as_array_mut().unwrap() {
        for alert_test in case["alert_rule_test"].as_array_mut().unwrap() {
            let name = alert_test["alertname"].as_str().unwrap().to_string();
            let (_, rule) = alerts
                .iter()
                .find(|(alert, _)| *alert == name)
                .unwrap_or_else(|| panic!("{}: no alert {name}", tests_path.display()));
            for expected in alert_test["exp_alerts"].as_array_mut().unwrap() {
                fired.insert(name.clone());
                expected["exp_annotations"]["runbook"] = rule["annotations"]["runbook"].clone();
            }
        }
    }
    for (name, rule) in &alerts {
        for annotation in ["summary", "runbook"] {
            assert!(
                rule["annotations"][annotation]
                    .as_str()
                    .is_some_and(|t| !t.is_empty()),
                "alert {name} has no {annotation}"
            );
        }
        assert!(
            fired.contains(name),
            "no case of {} makes {name} fire",
            tests_path.display()
        );
    }

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(rules).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("alerts.test.yaml"),
        serde_yaml::to_string(&tests).unwrap(),
    )
    .unwrap();
    let promtool = monitoring_tools().join("promtool");
    let checked = run_ok(
        Command::new(&promtool)
            .args(["check", "rules", "rules.yaml"])
            .current_dir(dir.path()),
    );
    println!("{checked}");
    let tested = run_ok(
        Command::new(&promtool)
            .args(["test", "rules", "alerts.test.yaml"])
            .current_dir(dir.path()),
    );
    println!("{tested}");
}

/// A host that did what every panel shows: served two plugins with --shard and webhooks,
/// reconciled, applied, skipped an apply, pruned, hit a sandbox limit, started a canary, and
/// answered an admission request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_series_from_a_real_hosts_metrics() {
    let election = Election::new(BINARY, "monitoring").await;
    let plugins = election.v1.path();
    std::fs::copy(
        plugin_path("test-plugins", "hostile"),
        plugins.join("hostile.wasm"),
    )
    .unwrap();
    let policy = held_canary_policy();
    let host = election
        .candidate_with(
            "host-a",
            plugins,
            &[
                "--shard",
                "--policy",
                policy.path().to_str().unwrap(),
                "--webhook-addr",
                "127.0.0.1:0",
            ],
        )
        .await;
    let names = election.create_many(0, 2, 1).await;
    election
        .converge(&election.plugin, &names, "the parents")
        .await;
    // Its webhooks answer a create (a server-side dry run) once the leader registered them.
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let webhooked = custom_resource(&memcached_resource(), "dry-run", json!({"size": 1}));
    wait_for("a webhook request counted", CONVERGE, || async {
        election.parents.create(&dry_run, &webhooked).await?;
        let metrics = scrape(&host.metrics).await;
        Ok(metrics
            .contains("operator_host_webhook_requests_total{")
            .then_some(()))
    })
    .await
    .unwrap();
    // A change of metadata only: the children are as wanted, their applies skipped.
    election
        .parents
        .patch(
            &names[0],
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();

    // The hostile plugin: a child, then none (a prune), then a loop (a sandbox limit).
    let attacks: Api<DynamicObject> =
        Api::namespaced_with(election.ns.client(), election.ns.name(), &attack_resource());
    wait_for("the Attack CRD", CONVERGE, || async {
        Ok(attacks.list(&Default::default()).await.ok().map(|_| ()))
    })
    .await
    .unwrap();
    create(&attacks, &attack_resource(), "a", json!({"attack": "none"})).await;
    wait_for_reason(&attacks, "a", "ReconcileSucceeded", CONVERGE).await;
    patch_spec(&attacks, "a", json!({"attack": "idle"})).await;
    wait_for("the attack's ConfigMap pruned", CONVERGE, || async {
        let metrics = scrape(&host.metrics).await;
        Ok(metrics
            .contains("operator_host_prunes_total{")
            .then_some(()))
    })
    .await
    .unwrap();
    patch_spec(&attacks, "a", json!({"attack": "loop"})).await;
    wait_for_reason(&attacks, "a", "PluginTimeout", CONVERGE).await;

    // A new Memcached version: a canary on half the parents.
    publish(
        &plugin_path("test-plugins", "memcached-v2"),
        &plugins.join("memcached.wasm"),
    );
    wait_for("the canary", CONVERGE, || async {
        let metrics = scrape(&host.metrics).await;
        Ok(metrics
            .lines()
            .any(|l| l.starts_with("operator_host_canary_parents{") && !l.ends_with(" 0"))
            .then_some(()))
    })
    .await
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.txt");
    std::fs::write(&first, scrape(&host.metrics).await).unwrap();
    tokio::time::sleep(SCRAPE_INTERVAL).await;
    let second = dir.path().join("second.txt");
    std::fs::write(&second, scrape(&host.metrics).await).unwrap();
    let objects = rendered();
    let dashboard = dir.path().join("dashboard.json");
    let shipped = one(&objects, "ConfigMap")["data"]["dashboard.json"]
        .as_str()
        .expect("the dashboard ConfigMap holds dashboard.json");
    std::fs::write(&dashboard, shipped).unwrap();

    let checked = tokio::task::spawn_blocking(move || {
        run_ok(
            Command::new(monitoring_tools().join("dashcheck.test"))
                .args(["-test.run", "TestDashboardQueries"])
                .env("DASHBOARD", &dashboard)
                .env("SCRAPES", scrapes_arg(&[&first, &second])),
        )
    })
    .await
    .unwrap();
    println!("{checked}");

    release_attacks(&election.ns).await;
    drop(host);
    operator_host_tests::webhooks::remove_configurations(
        &election.ns.client(),
        election.ns.name(),
        operator_host::leader::DEFAULT_LEASE_NAME,
    )
    .await;
    election.ns.cleanup().await.unwrap();
}

/// The host's /metrics.
async fn scrape(metrics: &std::net::SocketAddr) -> String {
    let (status, body) = http_get(*metrics, "/metrics")
        .await
        .expect("the host serves /metrics");
    assert_eq!(status, 200, "/metrics: {body}");
    body
}

fn scrapes_arg(paths: &[&Path]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}
