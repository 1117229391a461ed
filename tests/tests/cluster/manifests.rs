//! The install manifests (`deploy/install`): they render, the API server accepts them (server
//! dry-run, Pod Security `restricted` included), their roles are what `operator-host rbac`
//! prints for the bundled plugins, the host runs as deployed under exactly those roles, and
//! applied for real their pods are admitted and scheduled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use operator_host::plugin::Plugin;
use operator_host::policy::Policy;
use operator_host::rbac;
use operator_host_tests::devcluster::{self, TestNamespace, unique_name, wait_for};
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::manifests::{
    BUNDLED_PLUGINS, Overlay, base_dir, cert_manager_crds, documents, flag, generated_crd_path,
    generated_rbac, generated_rbac_path, host_args, host_container, kubectl_ok, one, overlay_dir,
    render,
};
use operator_host_tests::memcached::{
    create, memcached_resource, wait_for_first_reconcile, wait_for_webhook_refusal,
};
use operator_host_tests::process_host::{free_local_addr, http_get};
use operator_host_tests::service_account;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The kinds the base must hold.
const BASE_KINDS: [&str; 11] = [
    "CustomResourceDefinition",
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "Role",
    "ClusterRoleBinding",
    "RoleBinding",
    "ConfigMap",
    "Service",
    "Deployment",
    "PodDisruptionBudget",
];

/// The rendered base, checked for what the install promises.
fn rendered_base() -> Vec<Value> {
    let objects = render(&base_dir());
    for kind in BASE_KINDS {
        assert!(
            objects.iter().any(|o| o["kind"] == kind),
            "no {kind} among the rendered objects"
        );
    }
    objects
}

/// The policy file the base ships (its ConfigMap's `policy.yaml`), parsed as the host does.
fn base_policy(dir: &Path) -> Policy {
    let path = dir.join("policy.yaml");
    Policy::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Waits until namespace `name` is absent (a previous run's may still be terminating).
async fn wait_until_gone(namespaces: &Api<Namespace>, name: &str) {
    wait_for(&format!("namespace {name} to be gone"), TIMEOUT, || async {
        Ok(namespaces.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_base_renders_and_the_api_server_accepts_it_on_a_dry_run() {
    let objects = rendered_base();
    let namespace = one(&objects, "Namespace");
    let name = namespace["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "{namespace}"
    );
    // A server dry-run of namespaced objects needs their namespace to exist (it is not
    // created by the dry-run of the Namespace): create the base's Namespace for real, with
    // its Pod Security labels, unless it exists, and delete it afterwards if it was made here.
    let client = devcluster::client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existing = namespaces.get_opt(&name).await.unwrap();
    if existing
        .as_ref()
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_some())
    {
        wait_until_gone(&namespaces, &name).await;
    }
    let _created = match existing.filter(|ns| ns.metadata.deletion_timestamp.is_none()) {
        Some(_) => None,
        None => {
            // With kubectl apply, as a user would (it records what it applied).
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), namespace.to_string()).unwrap();
            kubectl_ok(&["apply", "-f", &file.path().to_string_lossy()]);
            Some(DeleteOnDrop(name.clone()))
        }
    };

    // The cert-manager overlay's Issuers and Certificates, checked by cert-manager's CRDs.
    let crds = cert_manager_crds();
    for kind in ["issuers", "certificates"] {
        let crd = crds.join(format!("cert-manager.io_{kind}.yaml"));
        kubectl_ok(&["apply", "--server-side", "-f", &crd.to_string_lossy()]);
        devcluster::wait_for_crd_established(
            &Api::all(client.clone()),
            &format!("{kind}.cert-manager.io"),
            TIMEOUT,
        )
        .await
        .unwrap();
    }

    for dir in [base_dir(), overlay_dir("pvc"), overlay_dir("cert-manager")] {
        let (stdout, stderr) = kubectl_ok(&[
            "apply",
            "--dry-run=server",
            "-k",
            &dir.to_string_lossy(),
            "-o",
            "json",
        ]);
        // The namespace enforces `restricted`: a pod template that does not meet it would
        // be admitted as a Deployment but with this warning, and its pods refused.
        // (A namespace made by another client than kubectl apply is warned about, harmlessly.)
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.contains("last-applied-configuration annotation"))
            .collect();
        assert!(
            warnings.is_empty(),
            "{}: the API server warned:\n{stderr}",
            dir.display()
        );
        let answer: Value = serde_json::from_str(&stdout).unwrap();
        let items = answer["items"].as_array().expect("a List of the objects");
        let added = if dir.ends_with("pvc") {
            1
        } else if dir.ends_with("cert-manager") {
            4
        } else {
            0
        };
        assert_eq!(items.len(), objects.len() + added);
        let deployment = one(items, "Deployment");
        let plugins = deployment["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["name"] == "plugins"))
            .unwrap_or_else(|| panic!("the API server dropped the plugins volume: {deployment}"));
        if dir.ends_with("pvc") {
            assert!(plugins.get("image").is_none(), "{plugins}");
            assert!(
                plugins["persistentVolumeClaim"]["readOnly"] == true,
                "{plugins}"
            );
        } else {
            // ImageVolume is beta and on by default in 1.35; with the gate off the API server
            // would drop the volume source.
            let rendered = one(&objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .and_then(|vs| vs.iter().find(|v| v["name"] == "plugins"))
                .map(|v| v["image"]["reference"].clone());
            assert!(plugins["image"]["reference"].is_string(), "{plugins}");
            assert_eq!(Some(&plugins["image"]["reference"]), rendered.as_ref());
        }
    }
}

/// The cert-manager overlay serves the certificate cert-manager issues: the host reads the
/// Secret of the serving Certificate from a mount of it, and that certificate names the
/// Service the API server calls.
#[test]
fn the_cert_manager_overlay_mounts_the_certificate_issued_for_the_webhook_service() {
    let objects = render(&overlay_dir("cert-manager"));
    let args = host_args(&objects);
    let dir = flag(&args, "--webhook-cert-dir").expect("--webhook-cert-dir");
    let container = host_container(&objects);
    let mount = container["volumeMounts"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["mountPath"] == dir))
        .unwrap_or_else(|| panic!("nothing is mounted at {dir}: {container}"));
    let volume = one(&objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == mount["name"]))
        .expect("the mount's volume");
    let secret = volume["secret"]["secretName"]
        .as_str()
        .expect("a Secret volume");
    let serving = objects
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == secret)
        .unwrap_or_else(|| panic!("no Certificate writes the Secret {secret}"));
    assert!(serving["spec"]["isCA"] != true, "{serving}");
    let namespace = one(&objects, "Namespace")["metadata"]["name"]
        .as_str()
        .unwrap();
    let service = flag(&args, "--webhook-service").expect("--webhook-service");
    let service_name = service.split(':').next().unwrap();
    assert!(
        !service_name.contains('/'),
        "the Service is in the pods' namespace: {service}"
    );
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "Service" && o["metadata"]["name"] == service_name),
        "no Service {service_name}"
    );
    let dns_names = serving["spec"]["dnsNames"].as_array().unwrap();
    assert!(
        dns_names.contains(&json!(format!("{service_name}.{namespace}.svc"))),
        "{serving}"
    );
    // Its issuer is an Issuer of the overlay, whose CA is what ca.crt holds.
    let issuer = &serving["spec"]["issuerRef"]["name"];
    let ca_issuer = objects
        .iter()
        .find(|o| o["kind"] == "Issuer" && o["metadata"]["name"] == *issuer)
        .unwrap_or_else(|| panic!("no Issuer {issuer}"));
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    assert!(
        objects.iter().any(|o| o["kind"] == "Certificate"
            && o["spec"]["isCA"] == true
            && o["spec"]["secretName"] == *ca_secret),
        "no CA Certificate writes {ca_secret}"
    );
}

/// Deletes the namespace it names when dropped (also when the test fails), without waiting.
struct DeleteOnDrop(String);

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        let mut command = devcluster::kubectl();
        command.args([
            "delete",
            "namespace",
            &self.0,
            "--ignore-not-found",
            "--wait=false",
        ]);
        let status = std::thread::spawn(move || command.output()).join();
        if !matches!(&status, Ok(Ok(o)) if o.status.success()) && !std::thread::panicking() {
            panic!("deleting namespace {}: {status:?}", self.0);
        }
    }
}

/// What `operator-host rbac` prints for the bundled plugins under the base's policy, with the
/// options the rendered `objects` run the host with (its Lease, `--shard`, the cluster's
/// plugins) and the name of the ClusterRole `name`: the roles and the text.
fn printed_roles(objects: &[Value], name: String) -> (ClusterRole, Vec<Role>, String) {
    let namespace = one(objects, "Namespace")["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    // The Lease the Deployment's host takes: `--leader-elect-lease` in its namespace.
    let args = host_args(objects);
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    assert!(args.iter().any(|a| a == "--install-crds"), "{args:?}");
    let lease = flag(&args, "--leader-elect-lease")
        .unwrap_or(operator_host::leader::DEFAULT_LEASE_NAME)
        .to_string();
    assert!(
        args.iter().any(|a| a == "--plugins-from-cluster"),
        "{args:?}"
    );
    let runtime = runtime();
    let plugins: Vec<_> = BUNDLED_PLUGINS
        .iter()
        .map(|p| {
            Plugin::load(&runtime, &plugin_path("plugins", p))
                .unwrap()
                .decl
        })
        .collect();
    // The Deployment serves webhooks: the CA Secret beside its Lease.
    let webhooks = args
        .iter()
        .any(|a| a.starts_with("--webhook-addr"))
        .then(|| rbac::WebhookCa {
            namespace: namespace.clone(),
            secret: operator_host::webhook::ca_secret_name(&lease),
        });
    let options = rbac::Options {
        name,
        install_crds: true,
        lease: Some(rbac::LeaseName {
            namespace: namespace.clone(),
            name: lease.clone(),
            sharded: args.iter().any(|a| a == "--shard"),
        }),
        plugins_from_cluster: Some(operator_host::operator_plugin::rbac_grants(
            namespace.clone(),
        )),
        replica_report: Some(rbac::ReportLease {
            namespace,
            name: operator_host::replicas::report_lease_name(&lease),
        }),
        webhooks,
    };
    let policy = base_policy(&base_dir());
    let printed = rbac::to_yaml(
        &rbac::cluster_role(&plugins, &policy, &options),
        &options,
        &plugins,
    )
    .unwrap();
    let (role, roles) = operator_host_tests::manifests::roles_of(&documents(&printed));
    (role, roles, printed)
}

#[tokio::test]
async fn the_generated_rbac_is_what_operator_host_rbac_prints() {
    let objects = rendered_base();
    let (committed_role, committed_roles) = generated_rbac();
    let name = committed_role.metadata.name.clone().unwrap();
    let (printed_role, printed_roles, printed) = printed_roles(&objects, name);
    // The documents, not the text: the comment lines name the plugins' content hashes,
    // which differ between machines (the wasm files embed the cargo registry's paths).
    let drift = format!(
        "{} is not what `operator-host rbac` prints for {BUNDLED_PLUGINS:?} under the base's \
         policy: run `make manifests` and commit the result. It prints:\n{printed}",
        generated_rbac_path().display()
    );
    assert_eq!(committed_role, printed_role, "{drift}");
    assert_eq!(committed_roles, printed_roles, "{drift}");
    assert_eq!(committed_roles.len(), 4, "{drift}");
    // The OperatorPlugin CRD the base ships is the one the host installs.
    let committed_crd = std::fs::read_to_string(generated_crd_path()).unwrap();
    let crd = <operator_host::operator_plugin::OperatorPlugin as kube::CustomResourceExt>::crd();
    assert_eq!(
        documents(&committed_crd),
        [serde_json::to_value(&crd).unwrap()],
        "{} is not what `operator-host crd --operator-plugin` prints: run `make manifests` \
         and commit the result",
        generated_crd_path().display()
    );

    // The bindings name exactly those roles, for the base's ServiceAccount.
    let account = one(&objects, "ServiceAccount")["metadata"]["name"].clone();
    let deployment = one(&objects, "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"], account,
        "{deployment}"
    );
    let role_bindings: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding")
        .collect();
    assert_eq!(
        role_bindings.len(),
        committed_roles.len(),
        "{role_bindings:?}"
    );
    let bindings = std::iter::once((
        one(&objects, "ClusterRoleBinding"),
        committed_role.metadata.name.clone(),
    ))
    .chain(committed_roles.iter().map(|role| {
        let binding = role_bindings
            .iter()
            .find(|b| b["roleRef"]["name"].as_str() == role.metadata.name.as_deref())
            .unwrap_or_else(|| panic!("no RoleBinding of {:?}", role.metadata.name));
        (*binding, role.metadata.name.clone())
    }));
    for (binding, role) in bindings {
        assert_eq!(
            binding["roleRef"]["name"].as_str(),
            role.as_deref(),
            "{binding}"
        );
        assert_eq!(binding["subjects"][0]["name"], account, "{binding}");
        assert_eq!(
            binding["subjects"][0]["namespace"],
            one(&objects, "Namespace")["metadata"]["name"],
            "{binding}"
        );
    }
}

#[tokio::test]
async fn the_sharded_overlay_runs_three_shards_under_the_roles_rbac_prints_for_them() {
    let objects = render(&overlay_dir("sharded"));
    let deployment = one(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3, "{deployment}");
    let args = host_args(&objects);
    assert!(args.iter().any(|a| a == "--shard"), "{args:?}");
    let (rendered_role, rendered_roles) = operator_host_tests::manifests::roles_of(&objects);
    let name = rendered_role.metadata.name.clone().unwrap();
    let (printed_role, printed_roles, printed) = printed_roles(&objects, name);
    let drift = format!(
        "the roles of {} are not what `operator-host rbac --shard` prints: run `make manifests` \
         and commit the result. It prints:\n{printed}",
        overlay_dir("sharded").display()
    );
    // Names and rules: kustomize adds the base's labels to what it renders.
    let rules = |role: &ClusterRole| (role.metadata.name.clone(), role.rules.clone());
    assert_eq!(rules(&rendered_role), rules(&printed_role), "{drift}");
    // By name: kustomize renders the Roles in its own order.
    let rules = |roles: &[Role]| -> Vec<_> {
        let mut rules: Vec<_> = roles
            .iter()
            .map(|r| (r.metadata.name.clone(), r.rules.clone()))
            .collect();
        rules.sort_by(|a, b| a.0.cmp(&b.0));
        rules
    };
    assert_eq!(rules(&rendered_roles), rules(&printed_roles), "{drift}");
    // The shard Leases are named after the pods: the election Role's Lease rule names no
    // resource (the report Role names its one Lease).
    let lease_rules: Vec<_> = rendered_roles
        .iter()
        .filter(|r| r.metadata.name.as_deref() == Some("operator-host-leader-election"))
        .flat_map(|r| r.rules.iter().flatten())
        .filter(|rule| rule.resources.iter().flatten().any(|r| r == "leases"))
        .collect();
    assert!(
        !lease_rules.is_empty() && lease_rules.iter().all(|r| r.resource_names.is_none()),
        "{lease_rules:?}"
    );
}

/// Where the host of the Deployment finds its files, on this machine: each of the
/// container's mount paths mapped to a local directory with the volume's content.
struct Mounts {
    by_path: BTreeMap<String, PathBuf>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Mounts {
    /// The plugins volume (the plugin image's layout: `plugins/<name>.wasm`) with the
    /// bundled plugins, ConfigMap volumes with their rendered data, the cache with the tests'
    /// compile cache.
    fn of(objects: &[Value]) -> Mounts {
        let spec = &one(objects, "Deployment")["spec"]["template"]["spec"];
        let volumes = spec["volumes"].as_array().expect("volumes");
        let mut by_path = BTreeMap::new();
        let mut dirs = Vec::new();
        let mounts = host_container(objects)["volumeMounts"]
            .as_array()
            .expect("volumeMounts");
        for mount in mounts {
            let path = mount["mountPath"].as_str().unwrap().to_string();
            let volume = volumes
                .iter()
                .find(|v| v["name"] == mount["name"])
                .expect("a volume for each mount");
            let local = if volume.get("image").is_some() {
                let dir = tempfile::tempdir().unwrap();
                std::fs::create_dir(dir.path().join("plugins")).unwrap();
                for plugin in BUNDLED_PLUGINS {
                    let file = format!("{plugin}.wasm");
                    std::fs::copy(
                        plugin_path("plugins", plugin),
                        dir.path().join("plugins").join(file),
                    )
                    .unwrap();
                }
                let local = dir.path().to_path_buf();
                dirs.push(dir);
                local
            } else if let Some(name) = volume["configMap"]["name"].as_str() {
                let config_map = objects
                    .iter()
                    .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name)
                    .expect("the ConfigMap of the volume is rendered");
                let dir = tempfile::tempdir().unwrap();
                for (key, value) in config_map["data"].as_object().expect("data") {
                    std::fs::write(dir.path().join(key), value.as_str().unwrap()).unwrap();
                }
                let local = dir.path().to_path_buf();
                dirs.push(dir);
                local
            } else if volume.get("emptyDir").is_some() {
                devcluster::repo_root().join("target/test-compile-cache")
            } else {
                panic!("a volume this test cannot stand in for: {volume}");
            };
            by_path.insert(path, local);
        }
        Mounts {
            by_path,
            _dirs: dirs,
        }
    }

    /// `value` with a mount path at its start replaced by the local directory.
    fn local(&self, value: &str) -> String {
        for (path, local) in &self.by_path {
            if let Some(rest) = value.strip_prefix(path.as_str())
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return format!("{}{rest}", local.display());
            }
        }
        value.to_string()
    }

    /// `--flag=value` with its value made local.
    fn arg(&self, arg: &str) -> String {
        match arg.split_once('=') {
            Some((flag, value)) => format!("{flag}={}", self.local(value)),
            None => self.local(arg),
        }
    }
}

/// The sum of `operator_host_reconciles_total` samples that did not succeed, in `metrics`.
fn failed_reconciles(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("operator_host_reconciles_total{"))
        .filter(|l| !l.contains("result=\"success\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn the_host_runs_as_deployed_under_exactly_the_generated_roles() {
    let ns = TestNamespace::new("manifests-host").await.unwrap();
    let admin = ns.client();
    let objects = rendered_base();
    // The roles as committed, under a name of this test's (the ClusterRole is
    // cluster-scoped); the Lease Role in the test's namespace, where POD_NAMESPACE puts the
    // Lease.
    let (mut cluster_role, roles) = generated_rbac();
    let role_name = format!("operator-host-{}", ns.name());
    cluster_role.metadata.name = Some(role_name.clone());
    let account = service_account::bind(&ns, &cluster_role, &roles).await;

    // The Deployment's command line, with its mount paths mapped to local directories
    // holding what the volumes hold, confined to the test's namespace (the deployed host
    // watches every namespace: here that would reconcile other tests' objects).
    let mounts = Mounts::of(&objects);
    let container = host_container(&objects);
    // Addresses of this machine; the API server reaches the webhooks at a URL instead of the
    // Service in front of the pods.
    let metrics_addr = free_local_addr();
    let webhook_addr = free_local_addr();
    let mut args: Vec<String> = Vec::new();
    for arg in host_args(&objects) {
        if arg.starts_with("--metrics-addr") {
            args.push(format!("--metrics-addr={metrics_addr}"));
        } else if arg.starts_with("--webhook-addr") {
            args.push(format!("--webhook-addr={webhook_addr}"));
        } else if arg.starts_with("--webhook-service") {
            args.push(format!("--webhook-url=https://{webhook_addr}"));
        } else {
            args.push(mounts.arg(&arg));
        }
    }
    for replaced in ["--metrics-addr=", "--webhook-addr=", "--webhook-url="] {
        assert_eq!(
            args.iter().filter(|a| a.starts_with(replaced)).count(),
            1,
            "{replaced} {args:?}"
        );
    }
    args.push(format!("--kubeconfig={}", account.kubeconfig.display()));
    args.push(format!("--namespace={}", ns.name()));
    // Only this test's OperatorPlugins (none): others' are not this host's to serve.
    args.push(format!(
        "--operator-plugin-selector=operator-host.dev/test={}",
        ns.name()
    ));
    let pod_name = format!("{}-pod", ns.name());
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap().to_string();
        let value = match (
            &var["value"],
            var["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        ) {
            (Value::String(v), _) => mounts.local(v),
            (_, Some("metadata.name")) => pod_name.clone(),
            (_, Some("metadata.namespace")) => ns.name().to_string(),
            other => panic!("an env var this test cannot stand in for: {var} {other:?}"),
        };
        env.insert(name, value);
    }
    assert!(
        env.contains_key("POD_NAME") && env.contains_key("POD_NAMESPACE"),
        "{env:?}"
    );
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("host.log");
    let host = tokio::process::Command::new(env!("CARGO_BIN_EXE_operator-host-faulty"))
        .args(&args)
        .envs(&env)
        .env_remove(operator_host::faults::CRASH_AFTER_ENV)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let host = std::cell::RefCell::new(host);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    wait_for("the host's /readyz to be ready", TIMEOUT, || async {
        let exited = host.borrow_mut().try_wait();
        if let Ok(Some(status)) = exited {
            anyhow::bail!("the host exited ({status}); log:\n{}", log());
        }
        Ok(http_get(metrics_addr, "/readyz")
            .await
            .is_some_and(|(status, _)| status == 200)
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));

    // It takes the Lease as POD_NAME, installs the CRDs, and serves a Memcached.
    let leases: Api<Lease> = ns.api();
    let lease_name = flag(&args, "--leader-elect-lease")
        .unwrap_or(operator_host::leader::DEFAULT_LEASE_NAME)
        .to_string();
    wait_for("the host to hold the Lease", TIMEOUT, || async {
        let holder = leases
            .get_opt(&lease_name)
            .await?
            .and_then(|l| l.spec?.holder_identity);
        Ok(holder.filter(|h| h.starts_with(&pod_name)).map(|_| ()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));
    // It says what it serves for `kubectl operator-host`, which its roles allow.
    wait_for("the host's report", TIMEOUT, || async {
        let deployments = operator_host::replicas::read(&admin, Some(ns.name())).await?;
        Ok(deployments
            .iter()
            .flat_map(|d| &d.reports)
            .any(|r| r.replica.starts_with(&pod_name) && !r.plugins.is_empty())
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));
    let resource = memcached_resource();
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns.name(), &resource);
    create(&memcacheds, &resource, "cache", json!({"size": 2})).await;
    wait_for_first_reconcile(&memcacheds, "cache", TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));
    let deployment = ns.api::<Deployment>().get("cache").await.unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(2));
    // Its webhooks, registered under the same roles, refuse what the plugin refuses.
    wait_for_webhook_refusal(&memcacheds, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));
    ns.api::<Service>().get("cache").await.unwrap();
    ns.wait_for_event("an event published by the host", |e: &Event| {
        e.involved_object.name.as_deref() == Some("cache")
    })
    .await;

    let (_, metrics) = http_get(metrics_addr, "/metrics").await.expect("/metrics");
    let log = log();
    assert_eq!(
        failed_reconciles(&metrics),
        0.0,
        "a reconcile failed under the generated roles; log:\n{log}"
    );
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "a request was forbidden under the generated roles; log:\n{log}"
    );

    host.into_inner().kill().await.unwrap();
    service_account::delete_cluster_role(&admin, &role_name).await;
    ns.cleanup().await.unwrap();
}

/// The ReplicaSet's pods in `namespace`, once it has made `replicas` of them, each scheduled.
async fn scheduled_pods(client: &Client, namespace: &str, replicas: usize) -> Vec<Pod> {
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    wait_for(
        &format!("{replicas} host pods admitted and scheduled in {namespace}"),
        TIMEOUT,
        || async {
            // A pod Pod Security refuses is a FailedCreate event and a ReplicaFailure
            // condition of the ReplicaSet: fail at once, with the reason.
            for event in events.list(&ListParams::default()).await? {
                if event.reason.as_deref() == Some("FailedCreate") {
                    panic!("the ReplicaSet could not create a pod: {:?}", event.message);
                }
            }
            for rs in replica_sets.list(&ListParams::default()).await? {
                for condition in rs.status.and_then(|s| s.conditions).into_iter().flatten() {
                    assert_ne!(condition.type_, "ReplicaFailure", "{:?}", condition.message);
                }
            }
            let listed = pods.list(&ListParams::default()).await?.items;
            let scheduled = listed
                .iter()
                .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                .count();
            Ok((listed.len() == replicas && scheduled == replicas).then_some(listed))
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn applied_for_real_its_pods_pass_restricted_admission() {
    let client = devcluster::client().await;
    let namespace = unique_name("manifests-apply");
    let mut overlay = Overlay::new(&base_dir(), &namespace);
    let objects = overlay.render();
    let name_of = |kind: &str| {
        one(&objects, kind)["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(name_of("Namespace"), namespace);
    let suffix = format!("-{namespace}");
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(name_of(kind).ends_with(&suffix), "{kind} {}", name_of(kind));
    }
    let (_, stderr) = overlay.apply();
    assert!(
        !stderr.to_lowercase().contains("warning"),
        "kubectl apply warned:\n{stderr}"
    );

    // Everything is there, under the overlay's names (`kubectl get -k` fails on a missing one).
    let (stdout, _) = kubectl_ok(&["get", "-k", &overlay.dir().to_string_lossy(), "-o", "json"]);
    let live: Value = serde_json::from_str(&stdout).unwrap();
    let live = live["items"].as_array().expect("a List");
    let kinds = |objects: &[Value]| {
        let mut kinds: Vec<String> = objects
            .iter()
            .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"]))
            .collect();
        kinds.sort();
        kinds
    };
    assert_eq!(kinds(live), kinds(&objects));
    assert_eq!(one(live, "Deployment")["spec"]["replicas"], 2);
    assert!(
        one(live, "ConfigMap")["data"]["policy.yaml"].is_string(),
        "the policy ConfigMap has policy.yaml"
    );

    // The ReplicaSet's pods pass Pod Security `restricted` (enforced by the namespace) and
    // are scheduled on the fake nodes (which "run" them without running anything).
    let pods = scheduled_pods(&client, &namespace, 2).await;
    for pod in &pods {
        assert_eq!(
            pod.spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone()),
            Some(name_of("ServiceAccount")),
            "{}",
            pod.name_any()
        );
    }
    // The namespace really enforces it: a pod that does not meet `restricted` is refused.
    let offender: Pod = serde_json::from_value(json!({
        "metadata": {"name": "not-restricted"},
        "spec": {"containers": [{"name": "c", "image": "localhost/operator-host:0.1.0"}]},
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match Api::<Pod>::namespaced(client.clone(), &namespace)
        .create(&dry_run, &offender)
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(status.message.contains("PodSecurity"), "{status:?}");
        }
        other => panic!("the namespace admitted a pod that is not restricted: {other:?}"),
    }

    overlay.delete();
}
