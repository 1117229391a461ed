//! Upstream's Pod Security fixtures (k8s.io/pod-security-admission v0.35.4) through `check_pod`.
//!
//! The fixtures in `tests/pod-security/` are upstream's `test/testdata/{baseline,restricted}/
//! v1.35/{pass,fail}`: each `pass` pod must be allowed at its level, each `fail` pod
//! refused by the check its file name names (`<check ID in lower case><n>.yaml`; `base*.yaml`
//! are minimal passing pods). Upstream checks the same in `test/fixtures_test.go` and
//! `test/run.go`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use operator_host::policy::pod_security::{Level, Violation, check_pod};
use serde_json::Value;

/// Upstream's check IDs in policy version v1.35 (the `ID`s of `policy/check_*.go`).
const CHECK_IDS: [&str; 19] = [
    "allowPrivilegeEscalation",
    "appArmorProfile",
    "capabilities_baseline",
    "capabilities_restricted",
    "hostNamespaces",
    "hostPathVolumes",
    "hostPorts",
    "hostProbesAndHostLifecycle",
    "privileged",
    "procMount",
    "procMount_restricted",
    "restrictedVolumes",
    "runAsNonRoot",
    "runAsUser",
    "seLinuxOptions",
    "seccompProfile_baseline",
    "seccompProfile_restricted",
    "sysctls",
    "windowsHostProcess",
];

/// At restricted, these restricted checks replace a baseline one (upstream's
/// `OverrideCheckIDs`), so a restricted fixture named after the baseline check fails the
/// restricted one.
const REPLACED_AT_RESTRICTED: [(&str, &str); 4] = [
    ("capabilities_baseline", "capabilities_restricted"),
    ("hostPathVolumes", "restrictedVolumes"),
    ("procMount", "procMount_restricted"),
    ("seccompProfile_baseline", "seccompProfile_restricted"),
];

/// Other checks a fixture also fails, as upstream expects (`test/fixtures_*.go`):
/// - the API server only accepts a hostProcess pod on the host network, so the
///   windowsHostProcess fixtures set `hostNetwork: true` (`test/fixtures_windowsHostProcess.go`);
/// - the API server refuses `privileged: true` with `allowPrivilegeEscalation: false`, so
///   the privileged fixtures unset the latter (`test/fixtures_privileged.go`);
/// - allowPrivilegeEscalation3 drops a container's whole securityContext, and with it
///   `capabilities.drop: [ALL]` (`test/fixtures_allowPrivilegeEscalation.go`).
const ALSO_FAILS: [(&str, &str); 3] = [
    ("windowsHostProcess", "hostNamespaces"),
    ("privileged", "allowPrivilegeEscalation"),
    ("allowPrivilegeEscalation", "capabilities_restricted"),
];

struct Fixture {
    path: PathBuf,
    /// The file name without `.yaml`.
    name: String,
    pod: Value,
}

impl Fixture {
    fn check(&self, level: Level) -> Vec<Violation> {
        check_pod(level, &self.pod["metadata"], &self.pod["spec"], "")
    }

    /// The check the file name names; `None` for the minimal `base*` pods.
    fn named_check(&self) -> Option<&'static str> {
        if self.name.starts_with("base") {
            return None;
        }
        let stem = self.name.trim_end_matches(|c: char| c.is_ascii_digit());
        let id = CHECK_IDS.iter().find(|id| id.to_lowercase() == stem);
        Some(*id.unwrap_or_else(|| panic!("{}: names no check", self.path.display())))
    }
}

/// The fixtures of `level` (`baseline` or `restricted`) and `outcome` (`pass` or `fail`).
fn fixtures(level: &str, outcome: &str) -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pod-security")
        .join(level)
        .join(outcome);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    let fixtures: Vec<Fixture> = paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let pod: Value =
                serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(pod["kind"], "Pod", "{}", path.display());
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            Fixture { path, name, pod }
        })
        .collect();
    // Never pass vacuously.
    assert!(!fixtures.is_empty(), "no fixtures in {}", dir.display());
    println!("checking {} fixtures in {}", fixtures.len(), dir.display());
    fixtures
}

fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("\n  {v}"))
        .collect::<String>()
}

/// Asserts that `fixture` fails at `level`, by `expected` and no unexpected other check.
fn assert_fails(fixture: &Fixture, level: Level, expected: &str) {
    let violations = fixture.check(level);
    let path = fixture.path.display();
    assert!(
        violations.iter().any(|v| v.control == expected),
        "{path} at {level}: expected a violation of {expected}, got:{}",
        describe(&violations)
    );
    let unexpected: Vec<Violation> = violations
        .into_iter()
        .filter(|v| v.control != expected && !ALSO_FAILS.contains(&(expected, v.control)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{path} at {level}: unexpected violations:{}",
        describe(&unexpected)
    );
}

#[test]
fn baseline_pass_fixtures_pass_baseline() {
    for fixture in fixtures("baseline", "pass") {
        let violations = fixture.check(Level::Baseline);
        assert!(
            violations.is_empty(),
            "{}:{}",
            fixture.path.display(),
            describe(&violations)
        );
        fixture.named_check();
    }
}

#[test]
fn baseline_fail_fixtures_fail_their_check() {
    for fixture in fixtures("baseline", "fail") {
        let check = fixture
            .named_check()
            .expect("a fail fixture names its check");
        assert_fails(&fixture, Level::Baseline, check);
        assert!(fixture.check(Level::Privileged).is_empty());
    }
}

#[test]
fn baseline_fail_fixtures_fail_restricted() {
    for fixture in fixtures("baseline", "fail") {
        let violations = fixture.check(Level::Restricted);
        assert!(
            !violations.is_empty(),
            "{} passes at restricted",
            fixture.path.display()
        );
    }
}

#[test]
fn restricted_pass_fixtures_pass_restricted_and_baseline() {
    for fixture in fixtures("restricted", "pass") {
        for level in [Level::Restricted, Level::Baseline, Level::Privileged] {
            let violations = fixture.check(level);
            assert!(
                violations.is_empty(),
                "{} at {level}:{}",
                fixture.path.display(),
                describe(&violations)
            );
        }
        fixture.named_check();
    }
}

#[test]
fn restricted_fail_fixtures_fail_their_check() {
    for fixture in fixtures("restricted", "fail") {
        let named = fixture
            .named_check()
            .expect("a fail fixture names its check");
        let expected = REPLACED_AT_RESTRICTED
            .iter()
            .find(|(baseline, _)| *baseline == named)
            .map_or(named, |(_, restricted)| restricted);
        assert_fails(&fixture, Level::Restricted, expected);
        assert!(fixture.check(Level::Privileged).is_empty());
    }
}

#[test]
fn fail_fixtures_cover_every_check() {
    let mut named = BTreeSet::new();
    for level in ["baseline", "restricted"] {
        named.extend(
            fixtures(level, "fail")
                .iter()
                .filter_map(Fixture::named_check),
        );
    }
    assert_eq!(named, CHECK_IDS.into_iter().collect::<BTreeSet<_>>());
}

#[test]
fn fixtures_in_a_pod_template_report_template_paths() {
    for fixture in fixtures("restricted", "fail") {
        let violations = check_pod(
            Level::Restricted,
            &fixture.pod["metadata"],
            &fixture.pod["spec"],
            "spec.template",
        );
        assert!(!violations.is_empty(), "{}", fixture.path.display());
        for violation in violations {
            assert!(
                violation.path.starts_with("spec.template.spec.")
                    || violation.path.starts_with("spec.template.metadata."),
                "{}: {violation}",
                fixture.path.display()
            );
        }
    }
}
