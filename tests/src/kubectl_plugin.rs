//! `kubectl operator-host` as kubectl runs it: the host binary linked as
//! `kubectl-operator_host` in a directory put first on PATH, and the devcluster's kubectl.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::devcluster::{cluster, kubectl_path};

/// The plugin on a PATH of its own.
pub struct KubectlPlugin {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl KubectlPlugin {
    /// `binary`: `env!("CARGO_BIN_EXE_operator-host-faulty")` of the calling test.
    pub fn new(binary: &Path) -> KubectlPlugin {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(binary, dir.path().join("kubectl-operator_host")).unwrap();
        KubectlPlugin {
            dir,
            kubeconfig: cluster().kubeconfig.clone(),
        }
    }

    /// `kubectl operator-host ARGS` against the shared cluster: its stdout, or a panic with
    /// its stderr.
    pub fn run(&self, args: &[&str]) -> String {
        let path = std::env::join_paths(std::iter::once(self.dir.path().to_path_buf()).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ))
        .unwrap();
        let output = Command::new(kubectl_path())
            .arg("operator-host")
            .args(args)
            .env("PATH", path)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl operator-host {args:?} failed: {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }
}

/// The rows of the tables in `output` that have a cell `cell`, split into cells.
pub fn rows_with<'a>(output: &'a str, cell: &str) -> Vec<Vec<&'a str>> {
    output
        .lines()
        .map(|line| {
            line.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|cells| cells.contains(&cell))
        .collect()
}
