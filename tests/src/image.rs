//! The host's image build (`deploy/image/build.sh`) started early, so it overlaps the tests that wait on the API server.
//!
//! The image tests and the real-node test run the script, whose musl release build of the host
//! takes minutes after any change of it: run when those tests come up, it stalls every test
//! thread waiting on it (they hold the cargo build lock in turn). With
//! `OPERATOR_HOST_TEST_PREBUILD_IMAGE=1` (`make test` sets it), the first use of the cluster
//! starts one run of the script in the background; the tests' own runs then find the build
//! fresh. Unset (one area run by hand), nothing is built that the area does not ask for.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// Set to `1`, [`prebuild_in_background`] starts the build.
pub const PREBUILD_ENV: &str = "OPERATOR_HOST_TEST_PREBUILD_IMAGE";

/// Starts one background run of `deploy/image/build.sh` in this process, if
/// [`PREBUILD_ENV`] asks for it. Its outcome is only logged: the tests that need the image
/// run the script themselves and report its failure.
pub fn prebuild_in_background(repo_root: &Path) {
    static STARTED: OnceLock<()> = OnceLock::new();
    if std::env::var(PREBUILD_ENV).as_deref() != Ok("1") {
        return;
    }
    STARTED.get_or_init(|| {
        let script = repo_root.join("deploy/image/build.sh");
        std::thread::spawn(move || {
            let out = match tempfile::tempdir() {
                Ok(out) => out,
                Err(e) => return eprintln!("image prebuild: no temporary directory: {e}"),
            };
            let started = std::time::Instant::now();
            match Command::new(&script).env("IMAGE_OUT", out.path()).output() {
                Ok(output) if output.status.success() => {
                    eprintln!("image prebuild: built in {:?}", started.elapsed())
                }
                Ok(output) => eprintln!(
                    "image prebuild: {} failed ({}): {}",
                    script.display(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ),
                Err(e) => eprintln!("image prebuild: running {}: {e}", script.display()),
            }
        });
    });
}
