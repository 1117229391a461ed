//! The webhooks of the plugins (contract 0.3.0): `operator-host run --webhook-addr` with
//! `--install-crds` registers the admission webhooks of the plugins that validate or default,
//! and `kubectl apply` shows their field errors, warnings and defaults as the API server's own;
//! a CRD of two versions reads and writes either through the plugin's conversion, and a new
//! storage version has the stored objects migrated.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use kube::api::DynamicObject;
use operator_host::plugin::Plugin;
use operator_host::policy::Policy;
use operator_host::rbac;
use operator_host_tests::devcluster::{TestNamespace, cluster, kubectl, repo_root, wait_for};
use operator_host_tests::host::{plugin_path, runtime};
use operator_host_tests::memcached::{memcached_resource, reconciled_condition};
use operator_host_tests::process_host::{Launch, ProcessHost};
use operator_host_tests::service_account;
use operator_host_tests::webhooks::remove_configurations;

const BINARY: &str = env!("CARGO_BIN_EXE_operator-host-faulty");
const TIMEOUT: Duration = Duration::from_secs(60);

/// A plugin directory holding each `(dir, plugin)` of `target/` as `plugin.wasm`.
fn plugins(plugins: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (from, plugin) in plugins {
        // `versioned-storage-v2` is a release of `versioned`.
        let name = plugin.split('-').next().unwrap_or(plugin);
        std::fs::copy(
            plugin_path(from, plugin),
            dir.path().join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    dir
}

/// `operator-host run` in `ns` with webhooks on a port of the OS's, its CA Secret in `ns`
/// and its webhook configurations named after `lease` (unique per test).
fn start_host(ns: &TestNamespace, plugins: &Path, lease: &str, args: &[&str]) -> ProcessHost {
    start_host_as(ns, plugins, lease, args, &cluster().kubeconfig)
}

/// [`start_host`] with the credentials of `kubeconfig`.
fn start_host_as(
    ns: &TestNamespace,
    plugins: &Path,
    lease: &str,
    args: &[&str],
    kubeconfig: &Path,
) -> ProcessHost {
    let policy = repo_root().join("examples/policy.yaml");
    let mut all = vec![
        "--webhook-addr",
        "127.0.0.1:0",
        "--leader-elect-lease",
        lease,
        "--policy",
        policy.to_str().unwrap(),
    ];
    all.extend(args);
    ProcessHost::start_with_env(
        &Launch {
            binary: Path::new(BINARY),
            plugins,
            kubeconfig,
            namespace: Some(ns.name()),
            install_crds: true,
            crash_after: None,
            metrics_addr: None,
            args: &all,
        },
        &[("POD_NAMESPACE", Some(ns.name()))],
    )
}

/// `kubectl <args> -f -` with `yaml` on stdin.
fn kubectl_stdin(args: &[&str], yaml: &str) -> Output {
    let mut child = kubectl()
        .args(args)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Waits until the API server refuses `yaml` (a server-side dry run, so nothing is stored
/// while the webhook is not called yet); returns the refusal.
async fn refused_once_registered(host: &ProcessHost, yaml: &str) -> String {
    wait_for(
        "the webhook to be registered and called",
        TIMEOUT,
        || async {
            let output = kubectl_stdin(&["apply", "--dry-run=server"], yaml);
            let message = stderr(&output);
            let refused = message.contains("is invalid") || message.contains("denied the request");
            Ok((!output.status.success() && refused).then_some(message))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)))
}

fn memcached_yaml(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {{name: {name}, \
         namespace: {ns}}}\nspec: {spec}\n"
    )
}

/// A Gadget of the versioned test plugin, as `version` (`v1` or `v2`) writes it.
fn gadget_yaml(ns: &str, name: &str, version: &str, spec: &str) -> String {
    format!(
        "apiVersion: versioned.operator-host.dev/{version}\nkind: Gadget\nmetadata: {{name: \
         {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

fn gadgets(ns: &TestNamespace, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("versioned.operator-host.dev", version, "Gadget"),
            "gadgets",
        ),
    )
}

/// What `operator-host rbac --install-crds --webhooks` prints for the plugins of `dir`, bound
/// to a ServiceAccount of `ns`: the host runs with exactly that.
async fn printed_rbac_account(
    ns: &TestNamespace,
    dir: &Path,
    lease: &str,
) -> (service_account::BoundAccount, String) {
    let policy_path = repo_root().join("examples/policy.yaml");
    let policy = Policy::parse(
        &std::fs::read_to_string(&policy_path).unwrap(),
        &policy_path,
    )
    .unwrap();
    let declarations: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            Plugin::load(&runtime(), &entry.unwrap().path())
                .unwrap()
                .decl
        })
        .collect();
    let name = format!("operator-host-{}", ns.name());
    let options = rbac::Options {
        name: name.clone(),
        install_crds: true,
        lease: None,
        plugins_from_cluster: None,
        replica_report: Some(rbac::ReportLease {
            namespace: ns.name().to_string(),
            name: operator_host::replicas::report_lease_name(lease),
        }),
        webhooks: Some(rbac::WebhookCa {
            namespace: ns.name().to_string(),
            secret: operator_host::webhook::ca_secret_name(lease),
        }),
    };
    let roles: Vec<_> = [
        rbac::webhook_ca_role(&options),
        rbac::replica_report_role(&options),
    ]
    .into_iter()
    .flatten()
    .collect();
    let account = service_account::bind(
        ns,
        &rbac::cluster_role(&declarations, &policy, &options),
        &roles,
    )
    .await;
    (account, name)
}

#[tokio::test]
async fn kubectl_apply_shows_the_plugins_field_errors_warnings_and_defaults() {
    let ns = TestNamespace::new("admission").await.unwrap();
    let lease = format!("admission-{}", ns.name());
    let dir = plugins(&[("plugins", "memcached")]);
    // Under exactly the RBAC `operator-host rbac --install-crds --webhooks` prints.
    let (account, role) = printed_rbac_account(&ns, dir.path(), &lease).await;
    // What a host before the configurations named the Lease's namespace left: its own, which
    // the new host replaces, and another deployment's of the same Lease name, left alone.
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(ns.client());
    let legacy = |name: &str, client_config: serde_json::Value| -> ValidatingWebhookConfiguration {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"operator-host.dev/webhooks-of": lease}},
            "webhooks": [{
                "name": "validate.memcached.operator-host.dev",
                "clientConfig": client_config,
                "rules": [{"apiGroups": ["cache.example.com"], "apiVersions": ["v1alpha1"],
                           "resources": ["memcacheds"], "operations": ["CREATE"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name()}},
                "failurePolicy": "Ignore", "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        }))
        .unwrap()
    };
    let ours = format!("{lease}.memcached");
    let theirs = format!("{lease}.memcached.of-another-namespace");
    configurations
        .create(
            &Default::default(),
            &legacy(
                &ours,
                serde_json::json!(
            {"url": "https://127.0.0.1:1/validate/memcached"}),
            ),
        )
        .await
        .unwrap();
    configurations
        .create(
            &Default::default(),
            &legacy(
                &theirs,
                serde_json::json!(
            {"service": {"namespace": "elsewhere", "name": "operator-host-webhooks"}}),
            ),
        )
        .await
        .unwrap();
    let host = start_host_as(&ns, dir.path(), &lease, &[], &account.kubeconfig);

    // A spec the CRD schema cannot refuse: the plugin's own check, shown by kubectl as it
    // shows the API server's (the cause's field and message), and nothing stored.
    let bad = memcached_yaml(ns.name(), "bad", "{size: 1, image: 'not an image'}");
    let refusal = refused_once_registered(&host, &bad).await;
    assert!(
        refusal.contains(
            "The Memcached \"bad\" is invalid: spec.image: Invalid value: must be a container \
             image reference, got \"not an image\""
        ),
        "{refusal}"
    );
    let output = kubectl_stdin(&["apply"], &bad);
    assert!(!output.status.success());
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &memcached_resource());
    assert!(memcacheds.get_opt("bad").await.unwrap().is_none());
    // Deleted in the registration that applied the new one: at once.
    wait_for(
        "the older host's configuration deleted",
        TIMEOUT,
        || async { Ok(configurations.get_opt(&ours).await?.is_none().then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)));
    assert!(configurations.get_opt(&theirs).await.unwrap().is_some());
    configurations
        .delete(&theirs, &Default::default())
        .await
        .unwrap();

    // Defaulted (an untagged image is pinned), with the plugin's warning, and reconciled.
    let good = memcached_yaml(ns.name(), "good", "{size: 0, image: memcached}");
    let output = kubectl_stdin(&["apply"], &good);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Warning: Memcached good: spec.size is 0"),
        "{}",
        stderr(&output)
    );
    let stored = memcacheds.get("good").await.unwrap();
    assert_eq!(stored.data["spec"]["image"], "memcached:1.6.39-alpine");
    wait_for("good reconciled", TIMEOUT, || async {
        let cr = memcacheds.get("good").await?;
        Ok((reconciled_condition(&cr)["status"] == "True").then_some(()))
    })
    .await
    .unwrap();
    // A write that leaves the spec alone is not the plugin's to refuse.
    let output = kubectl()
        .args(["label", "-n", ns.name(), "memcached", "good", "team=a"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));

    host.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    service_account::delete_cluster_role(&ns.client(), &role).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_validate_that_traps_or_runs_out_of_time_follows_the_failure_policy() {
    let ns = TestNamespace::new("admission-failure").await.unwrap();
    let lease = format!("admission-{}", ns.name());
    let dir = plugins(&[("test-plugins", "hostile")]);
    let attack = |name: &str, attack: &str| {
        format!(
            "apiVersion: hostile.operator-host.dev/v1alpha1\nkind: Attack\nmetadata: {{name: {name}, \
             namespace: {}}}\nspec: {{attack: {attack}}}\n",
            ns.name()
        )
    };
    let host = start_host(&ns, dir.path(), &lease, &[]);
    let refusal = refused_once_registered(&host, &attack("refuse", "validate-refuse")).await;
    assert!(
        refusal.contains("spec.attack: Forbidden: refused on purpose"),
        "{refusal}"
    );
    for (name, expected) in [
        (
            "validate-panic",
            "plugin hostile could not validate: the plugin trapped",
        ),
        (
            "validate-loop",
            "plugin hostile could not validate: the plugin did not finish within its CPU deadline",
        ),
        (
            "default-rename",
            "plugin hostile's default changes /metadata/name, where a default may change only",
        ),
        ("default-status", "plugin hostile's default changes /status"),
    ] {
        let output = kubectl_stdin(&["apply"], &attack(name, name));
        assert!(!output.status.success(), "{name} was accepted");
        assert!(
            stderr(&output).contains(expected),
            "{name}: {}",
            stderr(&output)
        );
    }
    host.kill().await;

    // The administrator's other choice: let it through, saying so.
    let host = start_host(
        &ns,
        dir.path(),
        &lease,
        &["--webhook-failure-policy", "ignore"],
    );
    let ignored = attack("ignored", "validate-panic");
    let accepted = wait_for("a failing validate let through", TIMEOUT, || async {
        let output = kubectl_stdin(&["apply", "--dry-run=server"], &ignored);
        let message = stderr(&output);
        Ok(
            (output.status.success() && message.contains("failurePolicy Ignore"))
                .then_some(message),
        )
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)));
    assert!(
        accepted.contains("plugin hostile could not validate: the plugin trapped"),
        "{accepted}"
    );
    host.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    operator_host_tests::hostile::release_attacks(&ns).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_webhooks_serve_through_a_hot_swap_and_certificate_renewals() {
    let ns = TestNamespace::new("admission-swap").await.unwrap();
    let lease = format!("admission-{}", ns.name());
    let dir = plugins(&[("plugins", "memcached")]);
    // Renewed every two seconds.
    let host = start_host(
        &ns,
        dir.path(),
        &lease,
        &["--webhook-certificate-validity", "3s"],
    );
    let bad = memcached_yaml(ns.name(), "bad", "{size: 1, image: 'not an image'}");
    refused_once_registered(&host, &bad).await;
    // A new version of the plugin: served by the webhook as soon as by the controller.
    operator_host_tests::host::publish(
        &plugin_path("test-plugins", "memcached-v2"),
        &dir.path().join("memcached.wasm"),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    let mut refusals = 0;
    while tokio::time::Instant::now() < deadline {
        let output = kubectl_stdin(&["apply", "--dry-run=server"], &bad);
        assert!(
            !output.status.success() && stderr(&output).contains("spec.image: Invalid value"),
            "a refusal was missed: {}\nhost log:\n{}",
            stderr(&output),
            host.log_tail(40)
        );
        refusals += 1;
    }
    let log = host.log();
    assert!(
        log.matches("renewed the webhooks' serving certificate")
            .count()
            >= 2,
        "{log}"
    );
    assert!(log.contains("plugin replaced plugin=memcached"), "{log}");
    println!("admission: {refusals} refusals through a hot swap and certificate renewals");
    host.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    ns.cleanup().await.unwrap();
}

/// The host's own CA is replaced before it expires: the new CA is registered beside the old
/// one, the serving certificate moves to it, the old one leaves the bundle when it expires, and
/// not one request in between fails its TLS handshake (a CA that lives 24 seconds here; ten
/// years by default).
#[tokio::test]
async fn the_hosts_ca_is_replaced_before_it_expires_without_a_failed_call() {
    let ns = TestNamespace::new("admission-ca").await.unwrap();
    let lease = format!("admission-{}", ns.name());
    let dir = plugins(&[("plugins", "memcached")]);
    // Under the RBAC `operator-host rbac --webhooks` prints: the CA Secret is replaced, too.
    let (account, role) = printed_rbac_account(&ns, dir.path(), &lease).await;
    let host = start_host_as(
        &ns,
        dir.path(),
        &lease,
        &[
            "--webhook-ca-validity",
            "24s",
            "--webhook-certificate-validity",
            "6s",
        ],
        &account.kubeconfig,
    );
    let bad = memcached_yaml(ns.name(), "bad", "{size: 1, image: 'not an image'}");
    refused_once_registered(&host, &bad).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(ns.client(), ns.name());
    let ca_of = |secret: k8s_openapi::api::core::v1::Secret| {
        String::from_utf8(secret.data.unwrap()["tls.crt"].0.clone()).unwrap()
    };
    let first_ca = ca_of(secrets.get(&format!("{lease}-webhook-ca")).await.unwrap());
    let configuration = format!("{lease}.{}.memcached", ns.name());
    assert_eq!(
        registered_ca_bundle(&configuration).await.as_deref(),
        Some(first_ca.as_str())
    );

    // Every request is answered by the plugin until the bundle holds the new CA alone.
    let (mut both_registered, mut refusals) = (false, 0);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let second_ca = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old CA never left the bundle; host log:\n{}",
            host.log_tail(40)
        );
        let output = kubectl_stdin(&["apply", "--dry-run=server"], &bad);
        assert!(
            !output.status.success() && stderr(&output).contains("spec.image: Invalid value"),
            "a call failed during the CA's replacement: {}\nhost log:\n{}",
            stderr(&output),
            host.log_tail(40)
        );
        refusals += 1;
        let bundle = registered_ca_bundle(&configuration)
            .await
            .unwrap_or_default();
        both_registered |=
            bundle.contains(first_ca.as_str()) && bundle.matches("BEGIN").count() == 2;
        if !bundle.contains(first_ca.as_str()) {
            break bundle;
        }
    };
    assert!(
        both_registered,
        "the new CA was never registered beside the old one"
    );
    assert_eq!(
        ca_of(secrets.get(&format!("{lease}-webhook-ca")).await.unwrap()),
        second_ca
    );
    let served_by = registered_url(&configuration).await;
    let served_by = served_by
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap();
    handshake_trusting(served_by, &second_ca)
        .await
        .expect("the serving certificate is of the new CA");
    let log = host.log();
    assert!(log.contains("made the webhooks' new CA"), "{log}");
    assert!(
        log.contains("signing the webhooks' certificates with the new CA"),
        "{log}"
    );
    println!("admission: {refusals} refusals through a replacement of the host's CA");
    host.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    service_account::delete_cluster_role(&ns.client(), &role).await;
    ns.cleanup().await.unwrap();
}

/// `line` without the terminal colours' escape sequences, if the log has them.
fn without_colours(line: &str) -> String {
    let mut parts = line.split('\x1b');
    let first = parts.next().unwrap_or_default().to_string();
    parts.fold(first, |mut plain, part| {
        plain.push_str(part.split_once('m').map_or(part, |(_, rest)| rest));
        plain
    })
}

/// Where `host` serves its webhooks (its log's `addr=`), once it does.
async fn serving_addr(host: &ProcessHost) -> String {
    wait_for("the host to serve webhooks", TIMEOUT, || async {
        Ok(host.log().lines().find_map(|line| {
            let plain = without_colours(line);
            let rest = plain
                .split("serving admission and conversion webhooks")
                .nth(1)?;
            let addr = rest.split("addr=").nth(1)?;
            Some(addr.split_whitespace().next()?.to_string())
        }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)))
}

/// Two replicas share one CA and move to its successor together: one of them makes it (the
/// other's write loses on the Secret's version, or it finds the rotation made), and each
/// replica's certificate is trusted by the bundle the API server has throughout, the
/// standby's too (every replica serves webhooks behind a Service).
#[tokio::test]
async fn two_replicas_replace_their_shared_ca_once_and_stay_trusted() {
    let ns = TestNamespace::new("admission-ca-replicas").await.unwrap();
    let lease = format!("admission-{}", ns.name());
    let dir = plugins(&[("plugins", "memcached")]);
    let replica = |identity: &'static str| {
        [
            "--leader-elect",
            "--leader-elect-identity",
            identity,
            "--webhook-ca-validity",
            "24s",
            "--webhook-certificate-validity",
            "6s",
        ]
    };
    let leader = start_host(&ns, dir.path(), &lease, &replica("a"));
    let bad = memcached_yaml(ns.name(), "bad", "{size: 1, image: 'not an image'}");
    refused_once_registered(&leader, &bad).await;
    let standby = start_host(&ns, dir.path(), &lease, &replica("b"));
    let addrs = [serving_addr(&leader).await, serving_addr(&standby).await];
    let configuration = format!("{lease}.{}.memcached", ns.name());
    let first_ca = registered_ca_bundle(&configuration).await.unwrap();

    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut handshakes = 0;
    loop {
        let bundle = registered_ca_bundle(&configuration)
            .await
            .unwrap_or_default();
        for addr in &addrs {
            handshake_trusting(addr, &bundle).await.unwrap_or_else(|e| {
                panic!(
                    "{addr} is not trusted by the registered bundle: {e}\nleader log:\n{}\nstandby log:\n{}",
                    leader.log_tail(20),
                    standby.log_tail(20)
                )
            });
            handshakes += 1;
        }
        if !bundle.contains(first_ca.as_str()) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first CA never left the bundle"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let logs = [leader.log(), standby.log()];
    let made = logs
        .iter()
        .map(|log| log.matches("made the webhooks' new CA").count())
        .sum::<usize>();
    assert_eq!(made, 1, "the successor CA was made {made} times");
    for log in &logs {
        assert!(
            log.contains("signing the webhooks' certificates with the new CA"),
            "{log}"
        );
    }
    println!("webhooks: {handshakes} handshakes with two replicas through a CA replacement");
    leader.kill().await;
    standby.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    ns.cleanup().await.unwrap();
}

/// Writes into `dir` what cert-manager's CA issuer writes into a Certificate's Secret (as
/// mounted: `tls.crt`, `tls.key`, `ca.crt`): a new CA named `ca_name` and a certificate of
/// 127.0.0.1 (where the API server calls the test's host) it signed. Each file is written
/// aside and renamed, as the kubelet swaps a mounted Secret's files.
fn issue_as_cert_manager(dir: &Path, ca_name: &str) -> String {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    for (file, content) in [
        ("ca.crt", ca.pem()),
        ("tls.key", key.serialize_pem()),
        ("tls.crt", cert.pem()),
    ] {
        let aside = dir.join(format!(".{file}.new"));
        std::fs::write(&aside, content).unwrap();
        std::fs::rename(&aside, dir.join(file)).unwrap();
    }
    ca.pem()
}

/// The caBundle of the validating webhook configuration `name`, once there is one.
async fn registered_ca_bundle(name: &str) -> Option<String> {
    let configurations: Api<ValidatingWebhookConfiguration> =
        Api::all(operator_host_tests::devcluster::client().await);
    let configuration = configurations.get_opt(name).await.ok().flatten()?;
    let bundle = configuration
        .webhooks?
        .first()?
        .client_config
        .ca_bundle
        .clone()?;
    String::from_utf8(bundle.0).ok()
}

/// The URL the validating webhook configuration `name` sends requests to.
async fn registered_url(name: &str) -> String {
    let configurations: Api<ValidatingWebhookConfiguration> =
        Api::all(operator_host_tests::devcluster::client().await);
    let configuration = configurations.get(name).await.unwrap();
    configuration.webhooks.unwrap()[0]
        .client_config
        .url
        .clone()
        .expect("a URL: the test's host is outside the cluster")
}

/// A TLS handshake with `addr` (`127.0.0.1:PORT`) trusting only the CA `ca_pem`.
async fn handshake_trusting(addr: &str, ca_pem: &str) -> std::io::Result<()> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let host = addr.split(':').next().unwrap().to_string();
    let name = rustls::pki_types::ServerName::try_from(host).unwrap();
    connector.connect(name, tcp).await.map(|_| ())
}

/// `run --webhook-cert-dir`: the host serves the certificate of a directory laid out as
/// cert-manager's mounted Secret, registers its `ca.crt`, and when cert-manager renews it
/// with a new CA, serves the new certificate and registers the new CA (beside the old one for
/// a grace period) without a restart.
#[tokio::test]
async fn a_certificate_directory_is_served_and_a_new_ca_in_it_followed() {
    let ns = TestNamespace::new("admission-certdir").await.unwrap();
    let lease = format!("admission-{}", ns.name());
    let plugins = plugins(&[("plugins", "memcached")]);
    let certs = tempfile::tempdir().unwrap();
    let first_ca = issue_as_cert_manager(certs.path(), "first CA");
    let host = start_host(
        &ns,
        plugins.path(),
        &lease,
        &["--webhook-cert-dir", certs.path().to_str().unwrap()],
    );
    let bad = memcached_yaml(ns.name(), "bad", "{size: 1, image: 'not an image'}");
    refused_once_registered(&host, &bad).await;
    let configuration = format!("{lease}.{}.memcached", ns.name());
    assert_eq!(
        registered_ca_bundle(&configuration).await.as_deref(),
        Some(first_ca.as_str())
    );

    let second_ca = issue_as_cert_manager(certs.path(), "second CA");
    // At once, the new CA beside the old one (other replicas serve certificates of the old CA
    // until their kubelets update the Secret).
    wait_for("the new CA registered", TIMEOUT, || async {
        let bundle = registered_ca_bundle(&configuration)
            .await
            .unwrap_or_default();
        Ok(
            (bundle.starts_with(second_ca.as_str()) && bundle.contains(first_ca.as_str()))
                .then_some(()),
        )
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)));
    // The new certificate is served: a client trusting only the new CA accepts it.
    let url = registered_url(&configuration).await;
    let served_by = url
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    wait_for("the new certificate served", TIMEOUT, || async {
        Ok(handshake_trusting(&served_by, &second_ca).await.ok())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)));
    let refusal = refused_once_registered(&host, &bad).await;
    assert!(refusal.contains("spec.image"), "{refusal}");
    assert!(
        host.log().contains("reloaded the webhooks' certificate"),
        "{}",
        host.log()
    );
    host.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    ns.cleanup().await.unwrap();
}

/// The versioned test plugin's CRD, as the API server has it.
async fn gadget_crd(
    client: &kube::Client,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    Api::all(client.clone())
        .get("gadgets.versioned.operator-host.dev")
        .await
        .unwrap()
}

/// Deletes the versioned test plugin's CRD (and so its Gadgets), if it exists.
async fn delete_gadget_crd(client: &kube::Client) {
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    let name = "gadgets.versioned.operator-host.dev";
    match crds.delete(name, &Default::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => panic!("deleting {name}: {error}"),
    }
    wait_for("the Gadget CRD gone", TIMEOUT, || async {
        Ok(crds.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn either_version_reads_and_writes_through_conversion_and_a_new_storage_version_migrates() {
    let ns = TestNamespace::new("conversion").await.unwrap();
    let lease = format!("conversion-{}", ns.name());
    let client = ns.client();
    // A CRD an interrupted run left behind would convert through a host that is gone.
    delete_gadget_crd(&client).await;
    let dir = plugins(&[("test-plugins", "versioned")]);
    let host = start_host(&ns, dir.path(), &lease, &[]);
    wait_for("the CRD converting through the webhook", TIMEOUT, || async {
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            Api::all(client.clone()).get("gadgets.versioned.operator-host.dev").await?;
        let strategy = crd.spec.conversion.map(|c| c.strategy);
        let served = crd.spec.versions.iter().filter(|v| v.served).count();
        Ok((strategy.as_deref() == Some("Webhook") && served == 2).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)));

    // Written as v1, read as v2; written as v2, read as v1.
    for (name, version, spec) in [
        ("one", "v1", "{replicas: 3, zone: a}"),
        ("two", "v2", "{replicas: {count: 4}, zone: b}"),
    ] {
        let output = kubectl_stdin(&["apply"], &gadget_yaml(ns.name(), name, version, spec));
        assert!(output.status.success(), "{name}: {}", stderr(&output));
    }
    let one = gadgets(&ns, "v2").get("one").await.unwrap();
    assert_eq!(
        one.data["spec"]["replicas"],
        serde_json::json!({"count": 3})
    );
    let two = gadgets(&ns, "v1").get("two").await.unwrap();
    assert_eq!(two.data["spec"]["replicas"], 4);
    // A round trip: one, read as v2 and written back as such, reads as v1 as it was.
    let mut as_v2 = one.clone();
    as_v2.data["spec"]["zone"] = serde_json::json!("a");
    gadgets(&ns, "v2")
        .replace("one", &Default::default(), &as_v2)
        .await
        .unwrap();
    let back = gadgets(&ns, "v1").get("one").await.unwrap();
    assert_eq!(
        back.data["spec"],
        serde_json::json!({"replicas": 3, "zone": "a"})
    );
    // The plugin reconciles v1 whatever was written: both have their ConfigMap.
    for (name, replicas) in [("one", "3"), ("two", "4")] {
        wait_for(&format!("{name}'s ConfigMap"), TIMEOUT, || async {
            let config = ns
                .api::<k8s_openapi::api::core::v1::ConfigMap>()
                .get_opt(name)
                .await?;
            Ok(config
                .and_then(|c| c.data)
                .filter(|data| data.get("replicas").map(String::as_str) == Some(replicas))
                .map(|_| ()))
        })
        .await
        .unwrap();
    }
    assert_eq!(
        gadget_crd(&client).await.status.unwrap().stored_versions,
        Some(vec!["v1".to_string()])
    );

    // An update the plugin forbids: a Gadget's zone is immutable.
    let gadget = gadget_yaml(ns.name(), "g", "v1", "{replicas: 1, zone: a}");
    let output = kubectl_stdin(&["apply"], &gadget);
    assert!(output.status.success(), "{}", stderr(&output));
    let moved = gadget_yaml(ns.name(), "g", "v1", "{replicas: 2, zone: b}");
    let output = kubectl_stdin(&["apply"], &moved);
    assert!(!output.status.success(), "a new zone was accepted");
    assert!(
        stderr(&output).contains(
            "The Gadget \"g\" is invalid: spec.zone: Invalid value: \"b\": field is immutable"
        ),
        "{}",
        stderr(&output)
    );
    let stored = gadgets(&ns, "v1").get("g").await.unwrap();
    assert_eq!(
        stored.data["spec"],
        serde_json::json!({"replicas": 1, "zone": "a"})
    );

    // A release that drops v1 while objects are stored as v1 is refused, the CRD untouched.
    let v1_plugin = Plugin::load(&runtime(), &dir.path().join("versioned.wasm")).unwrap();
    let mut dropping = v1_plugin.clone();
    dropping.decl.crd.spec.versions.retain(|v| v.name == "v2");
    dropping.decl.crd.spec.versions[0].storage = true;
    let refused = operator_host::controller::install_crd(&client, &dropping)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("no longer has the version(s) v1 that objects are still stored in"),
        "{refused}"
    );
    assert_eq!(gadget_crd(&client).await.spec.versions.len(), 2);

    // The release that stores v2: every stored Gadget (one, two, g) is stored again as v2,
    // then only v2 is in storedVersions.
    operator_host_tests::host::publish(
        &plugin_path("test-plugins", "versioned-storage-v2"),
        &dir.path().join("versioned.wasm"),
    );
    wait_for("storedVersions to be v2 alone", TIMEOUT, || async {
        let stored = gadget_crd(&client)
            .await
            .status
            .and_then(|s| s.stored_versions);
        Ok((stored == Some(vec!["v2".to_string()])).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; host log:\n{}", host.log_tail(40)));
    // (An object the reconciles wrote meanwhile was stored as v2 by that write: the migration
    // skips it, so how many it wrote itself varies.)
    wait_for("the migration's log line", TIMEOUT, || async {
        Ok(host.log().contains("stored objects migrated").then_some(()))
    })
    .await
    .unwrap();
    // Still readable as either version.
    assert_eq!(
        gadgets(&ns, "v1").get("two").await.unwrap().data["spec"]["replicas"],
        4
    );

    // The CRD goes while its webhook still converts: nothing is left that reads through a
    // webhook that is gone (the Gadgets go with it).
    delete_gadget_crd(&client).await;
    host.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn after_a_leader_change_the_new_leader_points_the_webhooks_at_itself() {
    let ns = TestNamespace::new("webhook-failover").await.unwrap();
    let lease = format!("failover-{}", ns.name());
    let dir = plugins(&[("plugins", "memcached")]);
    let elected = |identity: &'static str| {
        [
            "--leader-elect",
            "--leader-elect-identity",
            identity,
            "--leader-elect-lease-duration",
            "4",
            "--leader-elect-renew-deadline",
            "3",
            "--leader-elect-retry-period",
            "1",
        ]
    };
    let leader = start_host(&ns, dir.path(), &lease, &elected("a"));
    let bad = memcached_yaml(ns.name(), "bad", "{size: 1, image: 'not an image'}");
    refused_once_registered(&leader, &bad).await;
    // Every replica serves webhooks; the leader's configuration names its own address.
    let standby = start_host(&ns, dir.path(), &lease, &elected("b"));
    wait_for("the standby to serve", TIMEOUT, || async {
        Ok(standby
            .log()
            .contains("serving admission and conversion webhooks")
            .then_some(()))
    })
    .await
    .unwrap();
    leader.kill().await;
    let killed = tokio::time::Instant::now();
    let refusal = refused_once_registered(&standby, &bad).await;
    assert!(refusal.contains("spec.image: Invalid value"), "{refusal}");
    println!(
        "webhooks: served again {:.1} s after the leader was killed (lease 4 s)",
        killed.elapsed().as_secs_f64()
    );
    standby.kill().await;
    remove_configurations(&ns.client(), ns.name(), &lease).await;
    ns.cleanup().await.unwrap();
}
