//! A real OCI registry on loopback for the tests (deploy/registry: go-containerregistry's
//! registry, optionally behind HTTP basic auth), and the oras and cosign CLIs, the reference
//! clients that the interop tests read and write artifacts and signatures with.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::devcluster::repo_root;

/// The directory holding `registry`, `oras` and `cosign`, built once per version by
/// `deploy/registry/build.sh` (a cache hit after the first build).
pub fn tools_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let output = std::process::Command::new(repo_root().join("deploy/registry/build.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("deploy/registry/build.sh runs");
        assert!(
            output.status.success(),
            "deploy/registry/build.sh failed: {}",
            output.status
        );
        PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
    })
    .clone()
}

/// A registry process on a free loopback port; killed when dropped.
pub struct TestRegistry {
    child: Option<Child>,
    /// `127.0.0.1:<port>`: the registry part of its references.
    pub addr: String,
    user: Option<(String, String)>,
    dir: tempfile::TempDir,
}

impl TestRegistry {
    /// An anonymous registry.
    pub async fn start() -> TestRegistry {
        Self::spawn(None, None).await
    }

    /// A registry that answers 401 unless a request carries `user`'s basic auth.
    pub async fn with_basic_auth(user: &str, password: &str) -> TestRegistry {
        Self::spawn(Some((user.into(), password.into())), None).await
    }

    async fn spawn(user: Option<(String, String)>, addr: Option<&str>) -> TestRegistry {
        let dir = tempfile::tempdir().unwrap();
        let addr_file = dir.path().join("addr");
        let mut command = Command::new(tools_dir().join("registry"));
        command
            .arg("--addr")
            .arg(addr.unwrap_or("127.0.0.1:0"))
            .arg("--addr-file")
            .arg(&addr_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Some((name, password)) = &user {
            command
                .arg("--user")
                .arg(name)
                .env("REGISTRY_PASSWORD", password);
        }
        let child = command.spawn().expect("the registry starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        let addr = loop {
            if let Ok(addr) = std::fs::read_to_string(&addr_file) {
                break addr.trim().to_string();
            }
            assert!(
                Instant::now() < deadline,
                "the registry did not start within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        TestRegistry {
            child: Some(child),
            addr,
            user,
            dir,
        }
    }

    /// `<addr>/<repository_and_tag>`.
    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("{}/{repository_and_tag}", self.addr)
    }

    /// Stops the registry (its content is lost: it keeps it in memory).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts an empty registry again on the same address.
    pub async fn restart(&mut self) {
        self.stop().await;
        let again = Self::spawn(self.user.clone(), Some(&self.addr)).await;
        *self = again;
    }

    /// A docker config directory (for `DOCKER_CONFIG`) holding this registry's credentials.
    pub fn docker_config(&self) -> PathBuf {
        use base64::Engine;
        let (user, password) = self.user.clone().unwrap_or_default();
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let config = serde_json::json!({"auths": {self.addr.clone(): {"auth": auth}}});
        let path = self.dir.path().join("docker");
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("config.json"), config.to_string()).unwrap();
        path
    }

    /// An `oras` command speaking plain HTTP to this registry, with its credentials and no
    /// other docker config. Those flags come after `args`, so an option of `args` must carry
    /// its value in the same argument (`--output=DIR`).
    pub fn oras(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(tools_dir().join("oras"));
        command.args(args).arg("--plain-http");
        if let Some((user, password)) = &self.user {
            command.args(["--username", user, "--password", password]);
        }
        command.env("DOCKER_CONFIG", self.dir.path().join("oras-config"));
        command
    }
}

/// A `cosign` command (the CLI, built by `deploy/registry/build.sh`) run in `dir`, where its
/// key pair is (`cosign.key` with the password `pw`), with no docker config of the user's.
pub fn cosign(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(tools_dir().join("cosign"));
    command
        .args(args)
        .current_dir(dir)
        .env("COSIGN_PASSWORD", "pw")
        .env("DOCKER_CONFIG", dir.join("docker"))
        .env("HOME", dir)
        .env_remove("SIGSTORE_ROOT_FILE");
    command
}

/// Runs `command`; its stdout, or a panic with its stderr.
pub fn output_of(command: &mut std::process::Command) -> String {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}
