//! The install manifests (`deploy/install`): rendering them with the devcluster's kubectl,
//! their generated roles, and overlays of the base with a namespace and names of a test's own.

use std::path::{Path, PathBuf};

use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use serde_json::Value;

use crate::devcluster::{kubectl, repo_root};

/// The bundled plugins (what the plugin image holds): `target/plugins/<name>.wasm`.
pub const BUNDLED_PLUGINS: [&str; 2] = ["memcached", "mysql"];

/// `deploy/install/base`.
pub fn base_dir() -> PathBuf {
    repo_root().join("deploy/install/base")
}

/// `deploy/install/overlays/<name>`.
pub fn overlay_dir(name: &str) -> PathBuf {
    repo_root().join("deploy/install/overlays").join(name)
}

/// The cert-manager release whose CRDs `overlays/cert-manager` is checked against.
pub const CERT_MANAGER_VERSION: &str = "v1.21.2";

/// The CRDs of cert-manager (`deploy/crds` of its Go module, fetched from the Go module
/// proxy into the module cache once): the schemas the API server checks the cert-manager
/// overlay's Issuers and Certificates with. cert-manager itself is not run (its controller's
/// module is not on the proxy), so the host's side is tested with certificates written in
/// cert-manager's layout.
pub fn cert_manager_crds() -> PathBuf {
    let module = format!("github.com/cert-manager/cert-manager@{CERT_MANAGER_VERSION}");
    let output = std::process::Command::new("go")
        .args(["mod", "download", "-json", &module])
        .env("GO111MODULE", "on")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap_or_else(|e| panic!("running go mod download {module}: {e}"));
    assert!(
        output.status.success(),
        "go mod download {module}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let downloaded: Value = serde_json::from_slice(&output.stdout).expect("go's JSON");
    PathBuf::from(downloaded["Dir"].as_str().expect("the module's directory")).join("deploy/crds")
}

/// The generated roles, `deploy/install/base/rbac.generated.yaml`.
pub fn generated_rbac_path() -> PathBuf {
    base_dir().join("rbac.generated.yaml")
}

/// Runs the devcluster's kubectl with `args`; panics with its output unless it succeeds.
/// Returns stdout and stderr (warnings).
pub fn kubectl_ok(args: &[&str]) -> (String, String) {
    let output = kubectl()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kubectl {args:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "kubectl {} failed ({}):\n{stdout}{stderr}",
        args.join(" "),
        output.status
    );
    (stdout, stderr)
}

/// The documents of a YAML stream, as JSON values (empty documents skipped).
pub fn documents(yaml: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).expect("a YAML document"))
        .filter(|value| !value.is_null())
        .collect()
}

/// `kubectl kustomize DIR`: the objects the kustomization renders.
pub fn render(dir: &Path) -> Vec<Value> {
    let (stdout, _) = kubectl_ok(&["kustomize", &dir.to_string_lossy()]);
    documents(&stdout)
}

/// The one object of `kind` among `objects`; panics if there is none or several.
pub fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let mut found = objects.iter().filter(|o| o["kind"] == kind);
    let first = found
        .next()
        .unwrap_or_else(|| panic!("no {kind} among the rendered objects"));
    assert!(found.next().is_none(), "several {kind}s");
    first
}

/// The ClusterRole and the Roles (the Lease's, the pull Secrets') of `rbac.generated.yaml`, as
/// committed.
pub fn generated_rbac() -> (ClusterRole, Vec<Role>) {
    let path = generated_rbac_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    roles_of(&documents(&text))
}

/// The ClusterRole (exactly one) and the Roles among `documents`.
pub fn roles_of(documents: &[Value]) -> (ClusterRole, Vec<Role>) {
    let cluster_role =
        serde_json::from_value(one(documents, "ClusterRole").clone()).expect("a valid ClusterRole");
    let roles = documents
        .iter()
        .filter(|d| d["kind"] == "Role")
        .map(|r| serde_json::from_value(r.clone()).expect("a valid Role"))
        .collect();
    (cluster_role, roles)
}

/// The OperatorPlugin CRD the base ships (`make manifests`: `operator-host crd
/// --operator-plugin`).
pub fn generated_crd_path() -> PathBuf {
    base_dir().join("operatorplugin-crd.generated.yaml")
}

/// The value of `--flag=value` (or `--flag value`) in `args`.
pub fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let prefix = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, arg)| {
        if let Some(value) = arg.strip_prefix(&prefix) {
            Some(value)
        } else if arg == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            None
        }
    })
}

/// The host container of the rendered Deployment.
pub fn host_container(objects: &[Value]) -> &Value {
    let containers = &one(objects, "Deployment")["spec"]["template"]["spec"]["containers"];
    containers
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "operator-host"))
        .expect("the Deployment has a container operator-host")
}

/// The host container's `args`.
pub fn host_args(objects: &[Value]) -> Vec<String> {
    serde_json::from_value(host_container(objects)["args"].clone()).expect("args are strings")
}

/// An overlay of the base with a namespace and names of its own (every name gets the suffix
/// `-<namespace>`), so that applying it disturbs nothing else on the cluster. It lives in a
/// temporary directory under `target/` (kustomize takes only relative paths to a base) and
/// deletes what it applied when dropped.
pub struct Overlay {
    pub namespace: String,
    dir: tempfile::TempDir,
    applied: bool,
}

impl Overlay {
    /// An overlay of `base` (a kustomization directory inside the repository) into
    /// `namespace`, labelled as a test namespace.
    pub fn new(base: &Path, namespace: &str) -> Overlay {
        let target = repo_root().join("target");
        let dir = tempfile::Builder::new()
            .prefix("manifests-overlay-")
            .tempdir_in(&target)
            .expect("a temporary overlay directory");
        let relative = base
            .strip_prefix(repo_root())
            .expect("the base is inside the repository");
        let kustomization = format!(
            r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {namespace}
nameSuffix: -{namespace}
resources:
  - ../../{base}
patches:
  - target: {{kind: Namespace}}
    patch: |-
      - op: add
        path: /metadata/labels/{label}
        value: "true"
  # The OperatorPlugin CRD is the cluster's one (no suffix makes it the test's): the tests'
  # hosts install and share it, so the overlay neither applies nor deletes it.
  - target: {{kind: CustomResourceDefinition}}
    patch: |-
      $patch: delete
      apiVersion: apiextensions.k8s.io/v1
      kind: CustomResourceDefinition
      metadata:
        name: any
"#,
            base = relative.display(),
            label = crate::devcluster::TEST_NAMESPACE_LABEL.replace('/', "~1"),
        );
        std::fs::write(dir.path().join("kustomization.yaml"), kustomization)
            .expect("the overlay is written");
        Overlay {
            namespace: namespace.to_string(),
            dir,
            applied: false,
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The objects it renders.
    pub fn render(&self) -> Vec<Value> {
        render(self.dir())
    }

    /// `kubectl apply -k` (for real); returns kubectl's stdout and stderr.
    pub fn apply(&mut self) -> (String, String) {
        self.applied = true;
        kubectl_ok(&["apply", "-k", &self.dir().to_string_lossy()])
    }

    /// Deletes what it applied (the namespace with its contents, and the cluster-scoped
    /// ClusterRole and ClusterRoleBinding), without waiting for the namespace to go.
    pub fn delete(&mut self) {
        if std::mem::take(&mut self.applied) {
            kubectl_ok(&[
                "delete",
                "-k",
                &self.dir().to_string_lossy(),
                "--ignore-not-found",
                "--wait=false",
            ]);
        }
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        // Best effort on a failed test: kubectl on a plain thread, errors ignored.
        if std::mem::take(&mut self.applied) {
            let mut command = kubectl();
            command
                .args(["delete", "-k"])
                .arg(self.dir.path())
                .args(["--ignore-not-found", "--wait=false"]);
            let _ = std::thread::spawn(move || command.output()).join();
        }
    }
}
