//! `kubectl operator-host` (this binary linked as `kubectl-operator_host`): the plugins each
//! replica serves, the parents that fail, and one parent explained.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::block_on;
use crate::kinds::Kind;
use crate::labels::PARENT_UID_LABEL;
use crate::plan::{PAUSED, RECONCILED};
use crate::replicas::{self, HostDeployment, PluginReport, ReplicaReport};

/// The name kubectl finds this binary under: `kubectl operator-host` runs
/// `kubectl-operator_host` (a dash in a plugin's name is an underscore in its file's).
pub const KUBECTL_PLUGIN_NAME: &str = "kubectl-operator_host";

/// The arguments of `kubectl` (and of `kubectl operator-host`).
#[derive(Debug, clap::Args)]
pub(super) struct KubectlArgs {
    #[command(subcommand)]
    view: View,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    context: Option<String>,
    /// Only the host deployments of this namespace, where their replicas report (default:
    /// every namespace).
    #[arg(long, global = true, value_name = "NAMESPACE")]
    host_namespace: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
enum View {
    /// Every plugin each replica of the host serves: version, digest, contract, rollout state.
    Plugins,
    /// The parents whose last reconcile failed (Reconciled=False, not paused): why, and since
    /// when.
    Failing {
        /// Only this plugin's parents.
        plugin: Option<String>,
        #[command(flatten)]
        scope: Scope,
    },
    /// One parent: what serves it, its conditions, its children and their state, its events.
    Explain {
        /// PLUGIN/NAME, e.g. memcached/cache (the plugin's parent kind also does: Memcached/cache).
        parent: String,
        #[command(flatten)]
        scope: Scope,
    },
}

#[derive(Debug, clap::Args)]
struct Scope {
    /// The parents' namespace (default: the context's).
    #[arg(short, long)]
    namespace: Option<String>,
    /// Parents of every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
}

/// The command line kubectl gave `kubectl-operator_host`, as this binary's own: `kubectl
/// operator-host plugins` is `operator-host kubectl plugins`.
pub fn as_host_command_line(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let invoked_as = args
        .first()
        .and_then(|arg0| std::path::Path::new(arg0).file_name())
        .map(|name| name.to_string_lossy().into_owned());
    if invoked_as.as_deref() != Some(KUBECTL_PLUGIN_NAME) {
        return args;
    }
    let mut host = vec!["operator-host".into(), "kubectl".into()];
    host.extend(args.into_iter().skip(1));
    host
}

pub(super) fn run(args: KubectlArgs) -> anyhow::Result<()> {
    block_on(async {
        let (client, default_namespace) = connect(&args).await?;
        let now = Timestamp::now();
        let host_namespace = args.host_namespace.as_deref();
        let deployments = replicas::read(&client, host_namespace).await?;
        let output = match args.view {
            View::Plugins => {
                if deployments.iter().all(|d| d.reports.is_empty()) {
                    eprintln!("{}", no_reports(host_namespace));
                    return Ok(());
                }
                Some(plugins_table(&deployments, now))
            }
            View::Failing { plugin, scope } => {
                let namespace = scope.namespace(&default_namespace);
                let failing = failing(
                    &client,
                    &deployments,
                    plugin.as_deref(),
                    namespace.as_deref(),
                    now,
                )
                .await?;
                if failing.is_empty() {
                    eprintln!(
                        "No failing parents{}.",
                        namespace.map_or_else(String::new, |ns| format!(" in namespace {ns}"))
                    );
                }
                (!failing.is_empty()).then(|| failing_table(&failing, scope.all_namespaces, now))
            }
            View::Explain { parent, scope } => {
                let namespace = scope.namespace(&default_namespace);
                Some(explain(&client, &deployments, &parent, namespace.as_deref(), now).await?)
            }
        };
        if let Some(output) = output {
            print!("{output}");
        }
        anyhow::Ok(())
    })?
}

/// The failing parents of `plugin` (of every plugin a replica reports) in `namespace`.
async fn failing(
    client: &Client,
    deployments: &[HostDeployment],
    plugin: Option<&str>,
    namespace: Option<&str>,
    now: Timestamp,
) -> anyhow::Result<Vec<Failure>> {
    let kinds = parent_kinds(deployments, plugin, now);
    if kinds.is_empty() {
        anyhow::bail!(
            "{}",
            match plugin {
                Some(plugin) =>
                    format!("no replica of operator-host reports serving plugin {plugin:?}"),
                None => no_reports(None),
            }
        );
    }
    let mut failing = Vec::new();
    for (plugin, kind) in kinds {
        for parent in list(client, &kind, namespace, None).await? {
            failing.extend(Failure::of(&plugin, &parent));
        }
    }
    Ok(failing)
}

/// `explain PLUGIN/NAME`: the parent, its children and events, and what serves it.
async fn explain(
    client: &Client,
    deployments: &[HostDeployment],
    parent: &str,
    namespace: Option<&str>,
    now: Timestamp,
) -> anyhow::Result<String> {
    let (plugin_or_kind, name) = parent
        .split_once('/')
        .with_context(|| format!("{parent:?} is not PLUGIN/NAME (such as memcached/cache)"))?;
    let (plugin, kind) = parent_kinds(deployments, None, now)
        .into_iter()
        .find(|(plugin, kind)| {
            plugin == plugin_or_kind
                || kind.kind.eq_ignore_ascii_case(plugin_or_kind)
                || kind.plural == plugin_or_kind
        })
        .with_context(|| {
            format!(
                "no replica of operator-host reports serving a plugin or parent kind named \
                 {plugin_or_kind:?} (see `kubectl operator-host plugins`)"
            )
        })?;
    let parent = get(client, &kind, namespace, name).await?;
    let selector = format!("{PARENT_UID_LABEL}={}", parent.uid().unwrap_or_default());
    let mut children = Vec::new();
    for child_kind in child_kinds(deployments, &plugin, now) {
        let listed = list(
            client,
            &child_kind,
            parent.namespace().as_deref(),
            Some(&selector),
        )
        .await?;
        children.extend(
            listed
                .into_iter()
                .map(|child| (child_kind.kind.clone(), child)),
        );
    }
    let events = events_of(client, &parent).await?;
    Ok(explanation(&Explained {
        plugin: &plugin,
        kind: &kind,
        parent: &parent,
        serving: serving_lines(deployments, &plugin, &parent, now),
        children: &children,
        events: &events,
        now,
    }))
}

impl Scope {
    /// `None`: every namespace.
    fn namespace(&self, default: &str) -> Option<String> {
        if self.all_namespaces {
            return None;
        }
        Some(
            self.namespace
                .clone()
                .unwrap_or_else(|| default.to_string()),
        )
    }
}

fn no_reports(namespace: Option<&str>) -> String {
    format!(
        "No operator-host replica reports{} (Leases labelled {}): is a host running, and may \
         it write its report (see `operator-host rbac`)?",
        namespace.map_or_else(String::new, |ns| format!(" in namespace {ns}")),
        replicas::REPORT_LABEL
    )
}

/// A client as kubectl would make it, and the context's namespace.
async fn connect(args: &KubectlArgs) -> anyhow::Result<(Client, String)> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .context("using the kubeconfig's context")?,
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster config")?,
    };
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).context("creating the Kubernetes client")?;
    Ok((client, namespace))
}

/// The reports of replicas still renewing them.
fn live_reports(
    deployments: &[HostDeployment],
    now: Timestamp,
) -> impl Iterator<Item = &ReplicaReport> {
    deployments
        .iter()
        .flat_map(|d| &d.reports)
        .filter(move |report| !report.expired(now))
}

/// The parent kind of each plugin that serves (of `only`, if given), once each.
fn parent_kinds(
    deployments: &[HostDeployment],
    only: Option<&str>,
    now: Timestamp,
) -> Vec<(String, Kind)> {
    let mut kinds: Vec<(String, Kind)> = live_reports(deployments, now)
        .flat_map(|report| &report.plugins)
        .filter(|plugin| only.is_none_or(|only| plugin.name == only))
        .filter_map(|plugin| Some((plugin.name.clone(), plugin.serving.as_ref()?.parent.clone())))
        .collect();
    kinds.sort_by(|a, b| (&a.0, &a.1.kind, &a.1.group).cmp(&(&b.0, &b.1.kind, &b.1.group)));
    kinds.dedup();
    kinds
}

/// The child kinds the serving versions of `plugin` declare, once each.
fn child_kinds(deployments: &[HostDeployment], plugin: &str, now: Timestamp) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = Vec::new();
    for served in live_reports(deployments, now)
        .flat_map(|report| &report.plugins)
        .filter(|p| p.name == plugin)
        .filter_map(|p| p.serving.as_ref())
    {
        for kind in &served.children {
            if !kinds.contains(kind) {
                kinds.push(kind.clone());
            }
        }
    }
    kinds
}

async fn list(
    client: &Client,
    kind: &Kind,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> anyhow::Result<Vec<DynamicObject>> {
    let resource = kind.api_resource();
    let api: Api<DynamicObject> = match namespace.filter(|_| kind.namespaced) {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let mut params = ListParams::default();
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    match api.list(&params).await {
        Ok(listed) => Ok(listed.items),
        // A kind a report names but the API server does not serve (its CRD deleted since):
        // it has no objects.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(error) => Err(error).with_context(|| {
            format!(
                "listing {}{}",
                kind.plural,
                namespace.map_or_else(String::new, |ns| format!(" in namespace {ns}"))
            )
        }),
    }
}

async fn get(
    client: &Client,
    kind: &Kind,
    namespace: Option<&str>,
    name: &str,
) -> anyhow::Result<DynamicObject> {
    let resource = kind.api_resource();
    let api: Api<DynamicObject> = match (kind.namespaced, namespace) {
        (true, Some(namespace)) => Api::namespaced_with(client.clone(), namespace, &resource),
        (true, None) => anyhow::bail!("{} are namespaced: name a namespace with -n", kind.plural),
        (false, _) => Api::all_with(client.clone(), &resource),
    };
    api.get(name).await.with_context(|| {
        format!(
            "reading {} {name}{}",
            kind.kind,
            namespace.map_or_else(String::new, |ns| format!(" in namespace {ns}"))
        )
    })
}

/// The events about `object`, oldest first.
async fn events_of(client: &Client, object: &DynamicObject) -> anyhow::Result<Vec<Event>> {
    let uid = object.uid().unwrap_or_default();
    let api: Api<Event> = match object.namespace() {
        Some(namespace) => Api::namespaced(client.clone(), &namespace),
        None => Api::all(client.clone()),
    };
    let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
    let mut events = api
        .list(&params)
        .await
        .context("listing the parent's events")?
        .items;
    events.sort_by_key(event_time);
    Ok(events)
}

fn event_time(event: &Event) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or(event.last_timestamp.as_ref().map(|t| t.0))
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// A parent whose last reconcile failed.
#[derive(Debug, Clone, PartialEq)]
struct Failure {
    plugin: String,
    namespace: String,
    name: String,
    reason: String,
    /// RFC 3339: since when (the condition's lastTransitionTime).
    since: Option<Timestamp>,
    message: String,
}

impl Failure {
    /// `parent`'s failure, if its `Reconciled` condition says one (a paused parent is not).
    fn of(plugin: &str, parent: &DynamicObject) -> Option<Failure> {
        let condition = condition(&parent.data, RECONCILED)?;
        let reason = condition["reason"].as_str().unwrap_or_default();
        if condition["status"] == "True" || reason == PAUSED {
            return None;
        }
        Some(Failure {
            plugin: plugin.into(),
            namespace: parent.namespace().unwrap_or_default(),
            name: parent.name_any(),
            reason: reason.into(),
            since: condition["lastTransitionTime"]
                .as_str()
                .and_then(|t| t.parse().ok()),
            message: condition["message"].as_str().unwrap_or_default().into(),
        })
    }
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn plugins_table(deployments: &[HostDeployment], now: Timestamp) -> String {
    let mut rows = Vec::new();
    for deployment in deployments {
        let host = format!("{}/{}", deployment.namespace, deployment.lease);
        for report in &deployment.reports {
            let reported = match report.age(now) {
                Some(age) if report.expired(now) => format!("{} (expired)", human_age(age)),
                Some(age) => human_age(age),
                None => "?".into(),
            };
            for plugin in &report.plugins {
                let serving = plugin.serving.as_ref();
                rows.push(vec![
                    host.clone(),
                    report.replica.clone(),
                    report.role.clone(),
                    plugin.name.clone(),
                    serving.map_or("-".into(), |s| s.version.clone()),
                    serving.map_or("-".into(), short_digest),
                    serving.map_or("-".into(), |s| s.contract.clone()),
                    plugin.state.clone(),
                    reported.clone(),
                    state_message(plugin),
                ]);
            }
        }
    }
    table(
        &[
            "HOST", "REPLICA", "ROLE", "PLUGIN", "VERSION", "DIGEST", "CONTRACT", "STATE",
            "REPORTED", "MESSAGE",
        ],
        &rows,
    )
}

/// The OCI digest of a plugin from a registry, else the component's SHA-256; 12 hex digits.
fn short_digest(serving: &replicas::ServingReport) -> String {
    let digest = serving
        .digest
        .as_deref()
        .and_then(|d| d.strip_prefix("sha256:"))
        .unwrap_or(&serving.sha256);
    format!("sha256:{}", &digest[..digest.len().min(12)])
}

/// Why a plugin is not simply serving, on one line.
fn state_message(plugin: &PluginReport) -> String {
    let detail = plugin.detail.as_deref().unwrap_or_default();
    let detail = detail.lines().next().unwrap_or_default();
    match &plugin.candidate {
        Some(candidate) => format!("sha256:{}: {detail}", &candidate[..candidate.len().min(12)]),
        None => detail.into(),
    }
}

fn failing_table(failing: &[Failure], with_namespace: bool, now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = failing
        .iter()
        .map(|f| {
            let mut row = vec![f.plugin.clone()];
            if with_namespace {
                row.push(f.namespace.clone());
            }
            row.extend([
                f.name.clone(),
                f.reason.clone(),
                f.since.map_or("?".into(), |since| age_since(since, now)),
                f.message.lines().next().unwrap_or_default().into(),
            ]);
            row
        })
        .collect();
    let mut headers = vec!["PLUGIN"];
    if with_namespace {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "REASON", "FAILING FOR", "MESSAGE"]);
    table(&headers, &rows)
}

/// What `explain` shows of one parent.
struct Explained<'a> {
    plugin: &'a str,
    kind: &'a Kind,
    parent: &'a DynamicObject,
    /// What serves the plugin, a line per replica.
    serving: Vec<String>,
    children: &'a [(String, DynamicObject)],
    events: &'a [Event],
    now: Timestamp,
}

/// What serves `plugin` on each replica that reconciles `parent` (one in its namespace, or
/// any for a cluster-scoped parent), a line each; with sharding, the replica of its shard is
/// marked.
fn serving_lines(
    deployments: &[HostDeployment],
    plugin: &str,
    parent: &DynamicObject,
    now: Timestamp,
) -> Vec<String> {
    let namespace = parent.namespace();
    let shard = parent.labels().get(crate::shard::SHARD_LABEL);
    live_reports(deployments, now)
        .filter(move |report| {
            namespace
                .as_deref()
                .is_none_or(|ns| report.serves_namespace(ns))
        })
        .flat_map(|report| {
            report
                .plugins
                .iter()
                .filter(|p| p.name == plugin)
                .map(move |p| {
                    let version = p.serving.as_ref().map_or_else(
                        || "nothing".to_string(),
                        |s| format!("{} {}, contract {}", s.version, short_digest(s), s.contract),
                    );
                    let mut line = format!(
                        "{version} on {} ({}, {}",
                        report.replica, report.role, p.state
                    );
                    let message = state_message(p);
                    if !message.is_empty() {
                        line.push_str(": ");
                        line.push_str(&message);
                    }
                    line.push(')');
                    if shard.is_some() && report.shard.as_ref() == shard {
                        line.push_str(" <- its shard");
                    }
                    line
                })
        })
        .collect()
}

fn explanation(explained: &Explained<'_>) -> String {
    let Explained {
        plugin,
        kind,
        parent,
        serving,
        children,
        events,
        now,
    } = explained;
    let data = &parent.data;
    let mut out = String::new();
    let mut field =
        |name: &str, value: String| out.push_str(&format!("{:<12}{value}\n", format!("{name}:")));
    field("Name", parent.name_any());
    if let Some(namespace) = parent.namespace() {
        field("Namespace", namespace);
    }
    field("Kind", format!("{} ({})", kind.kind, kind.api_version()));
    field("Plugin", plugin.to_string());
    for line in serving {
        field("Served by", line.clone());
    }
    field(
        "Generation",
        format!(
            "{} (observed {})",
            parent.metadata.generation.unwrap_or_default(),
            data["status"]["observedGeneration"]
                .as_i64()
                .map_or("never".into(), |g| g.to_string())
        ),
    );
    let paused = parent
        .annotations()
        .get(crate::controller::PAUSED_ANNOTATION)
        .is_some_and(|v| v == "true");
    // Events keep the note of the first of a series: the newest event's trace is the
    // reconcile that published it first.
    if let Some(trace) = events
        .iter()
        .rev()
        .find_map(|e| crate::telemetry::trace_in_note(e.message.as_deref().unwrap_or_default()))
    {
        field(
            "Trace",
            format!("{trace} (of the newest event's reconcile)"),
        );
    }
    field(
        "Paused",
        if paused {
            format!("yes ({}=\"true\")", crate::controller::PAUSED_ANNOTATION)
        } else {
            "no".into()
        },
    );

    let conditions: Vec<Vec<String>> = data["status"]["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or_default().to_string();
            vec![
                text("type"),
                text("status"),
                text("reason"),
                c["lastTransitionTime"]
                    .as_str()
                    .and_then(|t| t.parse().ok())
                    .map_or("?".into(), |t| age_since(t, *now)),
                text("message"),
            ]
        })
        .collect();
    section(
        &mut out,
        "Conditions",
        &["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
        &conditions,
    );

    let children: Vec<Vec<String>> = children
        .iter()
        .map(|(kind, child)| {
            vec![
                kind.clone(),
                child.name_any(),
                child
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or("?".into(), |t| age_since(t.0, *now)),
                child_state(&child.data),
            ]
        })
        .collect();
    section(
        &mut out,
        "Children",
        &["KIND", "NAME", "AGE", "STATE"],
        &children,
    );

    let events: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            vec![
                event_time(e).map_or("?".into(), |t| age_since(t, *now)),
                e.type_.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    section(
        &mut out,
        "Events",
        &["AGE", "TYPE", "REASON", "MESSAGE"],
        &events,
    );
    out
}

/// A titled table, indented, or `<none>`.
fn section(out: &mut String, title: &str, headers: &[&str], rows: &[Vec<String>]) {
    out.push_str(title);
    out.push(':');
    if rows.is_empty() {
        out.push_str(" <none>\n");
        return;
    }
    out.push('\n');
    for line in table(headers, rows).lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
}

/// A child's state from what its kind's status usually says: ready replicas of a workload, a
/// Job's completion, else its conditions.
fn child_state(child: &Value) -> String {
    let status = &child["status"];
    if let Some(wanted) = child["spec"]["replicas"].as_i64() {
        let ready = status["readyReplicas"].as_i64().unwrap_or(0);
        return format!("{ready}/{wanted} ready");
    }
    if let Some(wanted) = status["desiredNumberScheduled"].as_i64() {
        let ready = status["numberReady"].as_i64().unwrap_or(0);
        return format!("{ready}/{wanted} ready");
    }
    let conditions: Vec<String> = status["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            format!(
                "{}={}",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if conditions.is_empty() {
        "-".into()
    } else {
        conditions.join(", ")
    }
}

/// Columns padded to their widest cell, three spaces apart, as kubectl prints them.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}   "));
            }
        }
        line.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn age_since(then: Timestamp, now: Timestamp) -> String {
    human_age(Duration::try_from(now.duration_since(then)).unwrap_or_default())
}

/// An age as kubectl prints one: 45s, 7m, 5h, 3d.
fn human_age(age: Duration) -> String {
    let seconds = age.as_secs();
    match seconds {
        0..120 => format!("{seconds}s"),
        120..7_200 => format!("{}m", seconds / 60),
        7_200..172_800 => format!("{}h", seconds / 3_600),
        _ => format!("{}d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parent(conditions: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": "cache", "namespace": "ns", "uid": "u1", "generation": 2},
            "status": {"observedGeneration": 2, "conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn a_parent_fails_when_reconciled_is_false_for_any_reason_but_a_pause() {
        let failing = parent(json!([{
            "type": "Reconciled", "status": "False", "reason": "InvalidSpec",
            "message": "spec.image: \"not an image\" has whitespace\nmore",
            "lastTransitionTime": "2026-12-07T12:00:00Z",
        }]));
        let failure = Failure::of("memcached", &failing).unwrap();
        assert_eq!(failure.reason, "InvalidSpec");
        let now: Timestamp = "2026-12-07T12:05:00Z".parse().unwrap();
        assert_eq!(
            failing_table(&[failure], false, now),
            "PLUGIN      NAME    REASON        FAILING FOR   MESSAGE\n\
             memcached   cache   InvalidSpec   5m            spec.image: \"not an image\" has whitespace\n"
        );
        let paused = parent(json!([{"type": "Reconciled", "status": "False", "reason": "Paused"}]));
        assert_eq!(Failure::of("memcached", &paused), None);
        let healthy =
            parent(json!([{"type": "Reconciled", "status": "True", "reason": "Reconciled"}]));
        assert_eq!(Failure::of("memcached", &healthy), None);
        assert_eq!(Failure::of("memcached", &parent(json!([]))), None);
    }

    #[test]
    fn explain_lists_the_replicas_of_the_parents_namespace_and_marks_its_shard() {
        let now: Timestamp = "2026-12-07T12:05:00Z".parse().unwrap();
        let report = |replica: &str, shard: Option<&str>, namespaces: &[&str]| ReplicaReport {
            replica: replica.into(),
            role: "leader".into(),
            namespaces: namespaces.iter().map(ToString::to_string).collect(),
            shard: shard.map(Into::into),
            reported: "2026-12-07T12:04:00Z".into(),
            plugins: vec![PluginReport {
                name: "memcached".into(),
                source: "file memcached.wasm".into(),
                state: "Serving".into(),
                detail: None,
                candidate: None,
                serving: None,
            }],
        };
        let deployments = [HostDeployment {
            namespace: "ops".into(),
            lease: "operator-host".into(),
            reports: vec![
                report("a", Some("shard-a"), &[]),
                report("b", Some("shard-b"), &["ns"]),
                report("c", None, &["elsewhere"]),
            ],
        }];
        let mut parent = parent(json!([]));
        parent.metadata.labels =
            Some([(crate::shard::SHARD_LABEL.to_string(), "shard-b".to_string())].into());
        assert_eq!(
            serving_lines(&deployments, "memcached", &parent, now),
            [
                "nothing on a (leader, Serving)",
                "nothing on b (leader, Serving) <- its shard",
            ]
        );
    }

    #[test]
    fn a_child_says_its_readiness_the_way_its_kind_does() {
        assert_eq!(
            child_state(&json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 2}})),
            "2/3 ready"
        );
        assert_eq!(child_state(&json!({"spec": {"replicas": 1}})), "0/1 ready");
        assert_eq!(
            child_state(&json!({"status": {"desiredNumberScheduled": 2, "numberReady": 2}})),
            "2/2 ready"
        );
        assert_eq!(
            child_state(
                &json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
            ),
            "Complete=True"
        );
        assert_eq!(child_state(&json!({"data": {}})), "-");
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        assert_eq!(human_age(Duration::from_secs(45)), "45s");
        assert_eq!(human_age(Duration::from_secs(119)), "119s");
        assert_eq!(human_age(Duration::from_secs(7 * 60)), "7m");
        assert_eq!(human_age(Duration::from_secs(5 * 3600)), "5h");
        assert_eq!(human_age(Duration::from_secs(3 * 86_400)), "3d");
    }

    #[test]
    fn kubectl_runs_this_binary_as_its_kubectl_subcommand() {
        let args = |list: &[&str]| {
            list.iter()
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            as_host_command_line(args(&[
                "/usr/local/bin/kubectl-operator_host",
                "plugins",
                "-A"
            ])),
            args(&["operator-host", "kubectl", "plugins", "-A"])
        );
        assert_eq!(
            as_host_command_line(args(&["operator-host", "run"])),
            args(&["operator-host", "run"])
        );
    }
}
