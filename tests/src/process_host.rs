//! The host as a process of its own (`operator-host-faulty run`), for tests that crash, kill,
//! stop or restart it: the same command line as `operator-host`, with crash points.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::devcluster::repo_root;

/// SIGABRT's number on Linux (what `std::process::abort` raises).
const SIGABRT: i32 = 6;

/// A running `operator-host-faulty run`; killed when dropped.
pub struct ProcessHost {
    child: Child,
    /// Its stderr (the log), kept for the failure message.
    log: PathBuf,
    _log_dir: tempfile::TempDir,
}

/// How to start a [`ProcessHost`].
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// `env!("CARGO_BIN_EXE_operator-host-faulty")` of the calling test.
    pub binary: &'a Path,
    pub plugins: &'a Path,
    pub kubeconfig: &'a Path,
    /// `--namespace`; `None` serves every namespace, as the install manifests run the host.
    pub namespace: Option<&'a str>,
    /// `--install-crds`.
    pub install_crds: bool,
    /// `OPERATOR_HOST_CRASH_AFTER`: abort after this write step (`apply:2`, `status`, ...).
    pub crash_after: Option<&'a str>,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (default: a port of the OS's).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// More arguments of `run` (e.g. `--leader-elect ...`).
    pub args: &'a [&'a str],
}

impl ProcessHost {
    /// Starts the host, its compile cache shared with the other tests.
    pub fn start(launch: &Launch<'_>) -> ProcessHost {
        Self::start_with_env(launch, &[])
    }

    /// [`ProcessHost::start`] with environment variables set (`Some`) or removed (`None`), as
    /// a pod's `POD_NAME` and `POD_NAMESPACE`.
    pub fn start_with_env(launch: &Launch<'_>, env: &[(&str, Option<&str>)]) -> ProcessHost {
        let log_dir = tempfile::tempdir().expect("a log directory");
        let log = log_dir.path().join("host.log");
        let stderr = std::fs::File::create(&log).expect("the host's log file");
        let mut command = Command::new(launch.binary);
        command
            .args(["run", "--metrics-addr"])
            .arg(
                launch
                    .metrics_addr
                    .map_or_else(|| "127.0.0.1:0".to_string(), |a| a.to_string()),
            )
            .arg("--plugins")
            .arg(launch.plugins)
            .arg("--kubeconfig")
            .arg(launch.kubeconfig)
            .args(launch.namespace.iter().flat_map(|ns| ["--namespace", ns]))
            .args(launch.install_crds.then_some("--install-crds"))
            .args(launch.args)
            .arg("--cache-dir")
            .arg(repo_root().join("target/test-compile-cache"))
            // OPERATOR_HOST_TEST_HOST_LOG overrides the filter, to see more of a failing run.
            .env(
                "RUST_LOG",
                std::env::var("OPERATOR_HOST_TEST_HOST_LOG")
                    .unwrap_or_else(|_| "operator_host=info".into()),
            )
            .env_remove(operator_host::faults::CRASH_AFTER_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true);
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        if let Some(step) = launch.crash_after {
            command.env(operator_host::faults::CRASH_AFTER_ENV, step);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", launch.binary.display()));
        ProcessHost {
            child,
            log,
            _log_dir: log_dir,
        }
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the host is running")
    }

    /// What the host logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Panics with the log's tail if the host has exited (`when` says at which point).
    pub async fn assert_running(&mut self, when: &str) {
        if let Some(status) = self.exited(Duration::from_millis(100)).await {
            panic!(
                "the host exited {when} ({status}); log tail:\n{}",
                self.log_tail(80)
            );
        }
    }

    /// Waits at most `timeout` for the host to exit by itself.
    pub async fn exited(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Waits for the host to reach its armed crash point and abort; panics with its log if
    /// it exits otherwise or not within `timeout`.
    pub async fn crashed(&mut self, timeout: Duration) {
        use std::os::unix::process::ExitStatusExt;
        let status = self.exited(timeout).await;
        let aborted = status.and_then(|s| s.signal()) == Some(SIGABRT);
        assert!(
            aborted && self.log().contains("crash point"),
            "expected the host to abort at its crash point, got {status:?}; log:\n{}",
            self.log()
        );
    }

    /// Sends `signal` (e.g. "STOP", "CONT", "TERM", "KILL") to the host.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// Kills the host and waits for it.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A free port on 127.0.0.1 for a host's metrics (free when asked; the host binds it next).
pub fn free_local_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free local port")
}

/// The HTTP status of `GET path` on `addr` (e.g. a host's `/readyz`), or `None` if nothing
/// answers yet.
pub async fn http_status(addr: std::net::SocketAddr, path: &str) -> Option<u16> {
    http_get(addr, path).await.map(|(status, _)| status)
}

/// The HTTP status and body of `GET path` on `addr`, or `None` if nothing answers yet.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8_lossy(&response);
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    Some((status, body.to_string()))
}

/// VmRSS and VmHWM of `pid`, in MiB.
pub fn memory_mib(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
