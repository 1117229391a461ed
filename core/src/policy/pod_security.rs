//! The Kubernetes Pod Security Standards, checked on the pod templates of a plugin's output.
//!
//! [`check_pod`] checks one pod's metadata and spec against a [`Level`], control by control,
//! as `k8s.io/pod-security-admission` v0.35.4 defines the latest policy version, v1.35, in
//! its `policy/check_*.go` files. Each control here is one function named after the upstream
//! check, and violations carry upstream's check ID.
//!
//! - [`Level::Privileged`]: unrestricted; no control applies.
//! - [`Level::Baseline`]: prevents known privilege escalations: no host namespaces, host
//!   ports, hostPath volumes or probe hosts, no privileged or Windows hostProcess
//!   containers, only default capabilities, only confined AppArmor, seccomp and SELinux
//!   settings, masked `/proc` and safe sysctls.
//! - [`Level::Restricted`]: baseline plus hardening: only ephemeral and API-backed volume
//!   types, no privilege escalation, no root user, a `RuntimeDefault` or `Localhost` seccomp
//!   profile, every capability dropped but `NET_BIND_SERVICE`. As upstream, some of these
//!   replace the baseline control they tighten, and some exempt pods with
//!   `spec.os.name: windows` or `spec.hostUsers: false`.
//!
//! The input is JSON of any shape. A field upstream reads that holds a JSON type its typed
//! structs could not (e.g. `privileged: "yes"`) is a violation of the control that reads
//! it, never taken as absent: the host must not let something through because it could not
//! parse it. `null` is absent, as it is for the API server.
//!
//! Differences from upstream, each only for pods the API server would reject anyway:
//!
//! - A pod that a restricted control exempts (a Windows pod, for `capabilities_restricted`
//!   and `seccompProfile_restricted`) is still held to the baseline control that the
//!   restricted one replaces, so restricted never allows what baseline forbids.
//! - `restrictedVolumes` refuses a volume that sets any source besides the allowed ones,
//!   where upstream allows a volume as soon as one of its sources is allowed.
//!
//! And like upstream's admission, but unlike its check function alone, `restrictedVolumes`
//! allows a volume without a source: the API server makes it an `emptyDir` first.
//!
//! Upstream's fixtures for v1.35 are vendored in `host/tests/pod-security/` and checked by
//! `host/tests/suite/pod_security.rs`.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// A Pod Security Standards level; each includes the controls of the levels below it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Unrestricted.
    Privileged,
    /// Prevents known privilege escalations.
    #[default]
    Baseline,
    /// Baseline plus current pod-hardening practice.
    Restricted,
}

impl Level {
    /// The level's name as Kubernetes writes it: `privileged`, `baseline` or `restricted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = ParseLevelError;

    fn from_str(text: &str) -> Result<Level, ParseLevelError> {
        match text {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err(ParseLevelError(text.to_string())),
        }
    }
}

/// A string that names no [`Level`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Pod Security level {0:?} (expected privileged, baseline or restricted)")]
pub struct ParseLevelError(pub String);

/// One field of a pod that a control forbids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Upstream's check ID, e.g. `hostNamespaces`, `privileged`, `capabilities_baseline`,
    /// `restrictedVolumes`, `runAsNonRoot`.
    pub control: &'static str,
    /// Field path of the offending field, prefixed with the `path` given to [`check_pod`],
    /// e.g. `spec.template.spec.containers[0].securityContext.privileged`.
    pub path: String,
    /// What is wrong and what is allowed, for a person.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}]", self.path, self.message, self.control)
    }
}

/// Checks one pod (its metadata and spec) against `level`. `path` is the path of the pod
/// spec's parent, e.g. `"spec.template"` for a Deployment or `""` for a Pod; metadata is
/// `<path>.metadata`, spec `<path>.spec`. Violations come in upstream's order of controls
/// (baseline IDs sorted, then restricted ones), each control's in the order it visits
/// fields.
pub fn check_pod(level: Level, metadata: &Value, spec: &Value, path: &str) -> Vec<Violation> {
    let mut violations = Vec::new();
    if level == Level::Privileged {
        return violations;
    }
    let pod = Pod {
        metadata: Node::new(join(path, "metadata"), metadata),
        spec: Node::new(join(path, "spec"), spec),
    };
    for control in CONTROLS.iter().filter(|c| c.level <= level) {
        // At restricted, a control that tightens a baseline one replaces it, unless the
        // pod is exempt from it: then the baseline control still holds.
        let replaced = level == Level::Restricted
            && CONTROLS
                .iter()
                .any(|c| c.overrides == Some(control.id) && !c.exempts(&pod));
        if replaced {
            continue;
        }
        let mut report = Report {
            control,
            violations: &mut violations,
        };
        match control.exemption.map(|e| e.applies(&pod)) {
            Some(Ok(true)) => continue,
            // Fail closed: a malformed field cannot exempt the pod, and is refused.
            Some(Err(malformed)) => report.malformed(malformed),
            Some(Ok(false)) | None => {}
        }
        report.run(|r| (control.check)(&pod, r));
    }
    violations
}

/// Every control of policy version v1.35, in upstream's order (`policy/registry.go`: the
/// baseline IDs sorted, then the restricted ones).
const CONTROLS: &[Control] = &[
    Control::baseline("appArmorProfile", app_armor_profile),
    Control::baseline("capabilities_baseline", capabilities_baseline),
    Control::baseline("hostNamespaces", host_namespaces),
    Control::baseline("hostPathVolumes", host_path_volumes),
    Control::baseline("hostPorts", host_ports),
    Control::baseline("hostProbesAndHostLifecycle", host_probes_and_host_lifecycle),
    Control::baseline("privileged", privileged),
    Control::baseline("procMount", proc_mount).exempt(Exemption::UserNamespace),
    Control::baseline("seLinuxOptions", se_linux_options),
    Control::baseline("seccompProfile_baseline", seccomp_profile_baseline),
    Control::baseline("sysctls", sysctls),
    Control::baseline("windowsHostProcess", windows_host_process),
    Control::restricted("allowPrivilegeEscalation", allow_privilege_escalation)
        .exempt(Exemption::Windows),
    Control::restricted("capabilities_restricted", capabilities_restricted)
        .overrides("capabilities_baseline")
        .exempt(Exemption::Windows),
    Control::restricted("procMount_restricted", proc_mount_restricted).overrides("procMount"),
    Control::restricted("restrictedVolumes", restricted_volumes).overrides("hostPathVolumes"),
    Control::restricted("runAsNonRoot", run_as_non_root).exempt(Exemption::UserNamespace),
    Control::restricted("runAsUser", run_as_user).exempt(Exemption::UserNamespace),
    Control::restricted("seccompProfile_restricted", seccomp_profile_restricted)
        .overrides("seccompProfile_baseline")
        .exempt(Exemption::Windows),
];

/// A control's function: it reports what it forbids in `pod`.
type CheckFn = fn(pod: &Pod<'_>, report: &mut Report<'_>) -> Checked;

/// One upstream check, in its newest version.
struct Control {
    /// Upstream's check ID.
    id: &'static str,
    /// The lowest level that applies it.
    level: Level,
    check: CheckFn,
    /// The baseline control this one replaces at restricted (upstream's `OverrideCheckIDs`).
    overrides: Option<&'static str>,
    /// Pods this control lets pass unchecked.
    exemption: Option<Exemption>,
}

impl Control {
    const fn baseline(id: &'static str, check: CheckFn) -> Self {
        Control {
            id,
            level: Level::Baseline,
            check,
            overrides: None,
            exemption: None,
        }
    }

    const fn restricted(id: &'static str, check: CheckFn) -> Self {
        Control {
            level: Level::Restricted,
            ..Control::baseline(id, check)
        }
    }

    const fn overrides(self, baseline: &'static str) -> Self {
        Control {
            overrides: Some(baseline),
            ..self
        }
    }

    const fn exempt(self, exemption: Exemption) -> Self {
        Control {
            exemption: Some(exemption),
            ..self
        }
    }

    /// Whether this control lets `pod` pass unchecked (a malformed field exempts nothing).
    fn exempts(&self, pod: &Pod<'_>) -> bool {
        matches!(self.exemption.map(|e| e.applies(pod)), Some(Ok(true)))
    }
}

/// Pods some controls let pass, as upstream's newest versions of those checks do.
#[derive(Clone, Copy)]
enum Exemption {
    /// `spec.os.name: windows`: the API server forbids the fields these controls check on
    /// Windows pods (the `*_1_25` versions upstream).
    Windows,
    /// `spec.hostUsers: false`: the pod runs in a user namespace, where root and `/proc`
    /// are not the host's (`relaxPolicyForUserNamespacePod` in `policy/helpers.go`).
    UserNamespace,
}

impl Exemption {
    fn applies(self, pod: &Pod<'_>) -> Result<bool, Malformed> {
        match self {
            Exemption::Windows => Ok(pod.spec.at(&["os", "name"])?.str()? == Some("windows")),
            Exemption::UserNamespace => Ok(pod.spec.get("hostUsers")?.bool()? == Some(false)),
        }
    }
}

/// The capabilities baseline allows adding: the container runtimes' default set.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The sysctls baseline allows: namespaced and isolated from other pods (the v1.32+ list).
const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The SELinux types baseline allows besides empty (the v1.31+ list).
const SELINUX_TYPES: [&str; 4] = [
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// The volume sources restricted allows: ephemeral or backed by the API server or a PVC.
const RESTRICTED_VOLUME_SOURCES: [&str; 9] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The prefix of the deprecated per-container AppArmor annotations.
const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `appArmorProfile` (baseline): AppArmor profiles of type `RuntimeDefault` or `Localhost`
/// only, in the pod's and the containers' `appArmorProfile`, and `runtime/default`,
/// `localhost/*` or empty in the deprecated `container.apparmor.security.beta.kubernetes.io/*`
/// annotations. Upstream: `policy/check_appArmorProfile.go`.
fn app_armor_profile(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    r.run(|r| app_armor_profile_type(r, &pod.security_context()?.get("appArmorProfile")?));
    pod.containers(r, |r, c| {
        app_armor_profile_type(r, &c.at(&["securityContext", "appArmorProfile"])?)
    });
    for (key, value) in pod.metadata.get("annotations")?.entries()? {
        if !key.starts_with(APPARMOR_ANNOTATION_PREFIX) {
            continue;
        }
        r.run(|r| {
            let profile = value.str()?.unwrap_or("");
            if !(profile.is_empty()
                || profile == "runtime/default"
                || profile.starts_with("localhost/"))
            {
                r.fail(
                    value.path,
                    format!("AppArmor profile {}", quote(profile)),
                    "must be runtime/default, localhost/<profile> or empty",
                );
            }
            Ok(())
        });
    }
    Ok(())
}

fn app_armor_profile_type(r: &mut Report<'_>, profile: &Node<'_>) -> Checked {
    if !profile.is_set() {
        return Ok(());
    }
    let kind = profile.get("type")?;
    let value = kind.str()?;
    if !matches!(value, Some("RuntimeDefault" | "Localhost")) {
        r.fail(
            kind.path,
            format!("AppArmor profile type {}", shown(value)),
            "must be RuntimeDefault or Localhost",
        );
    }
    Ok(())
}

/// `capabilities_baseline` (baseline): containers may add only capabilities of the
/// runtimes' default set. Upstream: `policy/check_capabilities_baseline.go`.
fn capabilities_baseline(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    pod.containers(r, |r, c| {
        for capability in c.at(&["securityContext", "capabilities", "add"])?.items()? {
            let name = capability.str()?.unwrap_or("");
            if !BASELINE_CAPABILITIES.contains(&name) {
                r.fail(
                    capability.path,
                    format!("adding capability {}", quote(name)),
                    format!("may add only {}", BASELINE_CAPABILITIES.join(", ")),
                );
            }
        }
        Ok(())
    });
    Ok(())
}

/// `hostNamespaces` (baseline): no sharing of the host's network, PID or IPC namespace.
/// Upstream: `policy/check_hostNamespaces.go`.
fn host_namespaces(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        r.run(|r| {
            let node = pod.spec.get(field)?;
            if node.bool()? == Some(true) {
                r.fail(
                    node.path,
                    format!("{field}: true"),
                    "must be unset or false",
                );
            }
            Ok(())
        });
    }
    Ok(())
}

/// `hostPathVolumes` (baseline): no hostPath volume. Upstream: `policy/check_hostPathVolumes.go`.
fn host_path_volumes(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    for volume in pod.spec.get("volumes")?.items()? {
        r.run(|r| {
            volume.object()?;
            let host_path = volume.get("hostPath")?;
            if host_path.is_set() {
                r.fail(
                    host_path.path,
                    "a hostPath volume",
                    "volumes must not use hostPath",
                );
            }
            Ok(())
        });
    }
    Ok(())
}

/// `hostPorts` (baseline): containers expose no port on the host.
/// Upstream: `policy/check_hostPorts.go`.
fn host_ports(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    pod.containers(r, |r, c| {
        for port in c.get("ports")?.items()? {
            port.object()?;
            let host_port = port.get("hostPort")?;
            if let Some(number) = host_port.int()?
                && number != 0
            {
                r.fail(
                    host_port.path,
                    format!("hostPort: {number}"),
                    "must be unset or 0",
                );
            }
        }
        Ok(())
    });
    Ok(())
}

/// `hostProbesAndHostLifecycle` (baseline, since v1.34): probes and lifecycle handlers
/// leave `host` empty, so they reach the pod itself and not any address of the node's
/// network. Upstream: `policy/check_hostProbesAndhostLifecycle.go`.
fn host_probes_and_host_lifecycle(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    pod.containers(r, |r, c| {
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            handler_host(r, &c.get(probe)?)?;
        }
        let lifecycle = c.get("lifecycle")?;
        for hook in ["postStart", "preStop"] {
            handler_host(r, &lifecycle.get(hook)?)?;
        }
        Ok(())
    });
    Ok(())
}

fn handler_host(r: &mut Report<'_>, handler: &Node<'_>) -> Checked {
    // tcpSocket is deprecated in lifecycle handlers; upstream still checks it there.
    for action in ["httpGet", "tcpSocket"] {
        let host = handler.at(&[action, "host"])?;
        if let Some(name) = host.str()?
            && !name.is_empty()
        {
            r.fail(
                host.path,
                format!("host {}", quote(name)),
                "probes and lifecycle handlers must leave host unset or empty",
            );
        }
    }
    Ok(())
}

/// `privileged` (baseline): no privileged container. Upstream: `policy/check_privileged.go`.
fn privileged(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    pod.containers(r, |r, c| {
        let node = c.at(&["securityContext", "privileged"])?;
        if node.bool()? == Some(true) {
            r.fail(node.path, "privileged: true", "must be unset or false");
        }
        Ok(())
    });
    Ok(())
}

/// `procMount` (baseline): containers keep the default `/proc` masks, unless the pod is in a
/// user namespace (exempt since v1.35). Upstream: `policy/check_procMount_baseline.go`.
fn proc_mount(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    default_proc_mount(
        pod,
        r,
        "must be unset or Default, unless spec.hostUsers is false",
    );
    Ok(())
}

/// `procMount_restricted` (restricted, since v1.35): containers keep the default `/proc`
/// masks, even in a user namespace. Upstream: `policy/check_procMount_restricted.go`.
fn proc_mount_restricted(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    default_proc_mount(pod, r, "must be unset or Default");
    Ok(())
}

fn default_proc_mount(pod: &Pod<'_>, r: &mut Report<'_>, rule: &str) {
    pod.containers(r, |r, c| {
        let node = c.at(&["securityContext", "procMount"])?;
        if let Some(value) = node.str()?
            && value != "Default"
        {
            r.fail(node.path, format!("procMount {}", quote(value)), rule);
        }
        Ok(())
    });
}

/// `seLinuxOptions` (baseline): SELinux type empty or one of the container types, user
/// and role unset, in the pod and the containers. Upstream: `policy/check_seLinuxOptions.go`.
fn se_linux_options(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    r.run(|r| se_linux(r, &pod.security_context()?.get("seLinuxOptions")?));
    pod.containers(r, |r, c| {
        se_linux(r, &c.at(&["securityContext", "seLinuxOptions"])?)
    });
    Ok(())
}

fn se_linux(r: &mut Report<'_>, options: &Node<'_>) -> Checked {
    if !options.is_set() {
        return Ok(());
    }
    let kind = options.get("type")?;
    let value = kind.str()?.unwrap_or("");
    if !value.is_empty() && !SELINUX_TYPES.contains(&value) {
        r.fail(
            kind.path,
            format!("SELinux type {}", quote(value)),
            format!("must be empty or one of {}", SELINUX_TYPES.join(", ")),
        );
    }
    for field in ["user", "role"] {
        let node = options.get(field)?;
        if let Some(value) = node.str()?
            && !value.is_empty()
        {
            r.fail(
                node.path,
                format!("SELinux {field} {}", quote(value)),
                "must be unset or empty",
            );
        }
    }
    Ok(())
}

/// `seccompProfile_baseline` (baseline): seccomp profiles, where set, of type
/// `RuntimeDefault` or `Localhost` (so not `Unconfined`), in the pod and the containers.
/// Upstream: `policy/check_seccompProfile_baseline.go` (the v1.19+ version, on fields).
fn seccomp_profile_baseline(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    r.run(|r| seccomp_profile(r, &pod.security_context()?.get("seccompProfile")?).map(|_| ()));
    pod.containers(r, |r, c| {
        seccomp_profile(r, &c.at(&["securityContext", "seccompProfile"])?).map(|_| ())
    });
    Ok(())
}

/// Checks a `seccompProfile` field: `None` if unset, else whether its type is allowed.
fn seccomp_profile(r: &mut Report<'_>, profile: &Node<'_>) -> Result<Option<bool>, Malformed> {
    if !profile.is_set() {
        return Ok(None);
    }
    let kind = profile.get("type")?;
    let value = kind.str()?;
    let allowed = matches!(value, Some("RuntimeDefault" | "Localhost"));
    if !allowed {
        r.fail(
            kind.path,
            format!("seccomp profile type {}", shown(value)),
            "must be RuntimeDefault or Localhost",
        );
    }
    Ok(Some(allowed))
}

/// `sysctls` (baseline): only the safe sysctls of the v1.32+ list.
/// Upstream: `policy/check_sysctls.go`.
fn sysctls(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    for sysctl in pod.security_context()?.get("sysctls")?.items()? {
        r.run(|r| {
            sysctl.object()?;
            let name = sysctl.get("name")?;
            let value = name.str()?.unwrap_or("");
            if !SAFE_SYSCTLS.contains(&value) {
                r.fail(
                    name.path,
                    format!("sysctl {}", quote(value)),
                    format!("allowed: {}", SAFE_SYSCTLS.join(", ")),
                );
            }
            Ok(())
        });
    }
    Ok(())
}

/// `windowsHostProcess` (baseline): no Windows hostProcess pod or container.
/// Upstream: `policy/check_windowsHostProcess.go`.
fn windows_host_process(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    r.run(|r| host_process(r, &pod.security_context()?));
    pod.containers(r, |r, c| host_process(r, &c.get("securityContext")?));
    Ok(())
}

fn host_process(r: &mut Report<'_>, security_context: &Node<'_>) -> Checked {
    let node = security_context.at(&["windowsOptions", "hostProcess"])?;
    if node.bool()? == Some(true) {
        r.fail(node.path, "hostProcess: true", "must be unset or false");
    }
    Ok(())
}

/// `allowPrivilegeEscalation` (restricted): every container sets
/// `allowPrivilegeEscalation: false`; Windows pods are exempt.
/// Upstream: `policy/check_allowPrivilegeEscalation.go`.
fn allow_privilege_escalation(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    pod.containers(r, |r, c| {
        let node = c.at(&["securityContext", "allowPrivilegeEscalation"])?;
        match node.bool()? {
            Some(false) => {}
            Some(true) => r.fail(node.path, "allowPrivilegeEscalation: true", "must be false"),
            None => r.fail(
                node.path,
                "leaving allowPrivilegeEscalation unset",
                "must be false",
            ),
        }
        Ok(())
    });
    Ok(())
}

/// `capabilities_restricted` (restricted, replaces `capabilities_baseline`): every container
/// drops `ALL` and adds nothing but `NET_BIND_SERVICE`; Windows pods are exempt.
/// Upstream: `policy/check_capabilities_restricted.go`.
fn capabilities_restricted(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    pod.containers(r, |r, c| {
        let capabilities = c.at(&["securityContext", "capabilities"])?;
        let drop = capabilities.get("drop")?;
        let mut drops_all = false;
        for capability in drop.items()? {
            if capability.str()? == Some("ALL") {
                drops_all = true;
                break;
            }
        }
        if !drops_all {
            r.fail(drop.path, "keeping capabilities", "must drop ALL");
        }
        for capability in capabilities.get("add")?.items()? {
            let name = capability.str()?.unwrap_or("");
            if name != "NET_BIND_SERVICE" {
                r.fail(
                    capability.path,
                    format!("adding capability {}", quote(name)),
                    "may add only NET_BIND_SERVICE",
                );
            }
        }
        Ok(())
    });
    Ok(())
}

/// `restrictedVolumes` (restricted, replaces `hostPathVolumes`): volumes only of the
/// ephemeral or API-backed types. Upstream: `policy/check_restrictedVolumes.go`.
fn restricted_volumes(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    for volume in pod.spec.get("volumes")?.items()? {
        r.run(|r| {
            // Every key of a volume but `name` is a source; a volume has exactly one.
            let sources: Vec<&str> = volume
                .object()?
                .iter()
                .filter(|(key, value)| *key != "name" && !value.is_null())
                .map(|(key, _)| key.as_str())
                .collect();
            // No source at all is fine: the API server makes it an emptyDir before
            // admission (`SetDefaults_Volume`), as upstream's fixture restrictedvolumes0
            // shows, though upstream's check alone would call it "unknown".
            for source in sources {
                if !RESTRICTED_VOLUME_SOURCES.contains(&source) {
                    r.fail(
                        join(&volume.path, source),
                        format!("volume type {source}"),
                        format!("allowed: {}", RESTRICTED_VOLUME_SOURCES.join(", ")),
                    );
                }
            }
            Ok(())
        });
    }
    Ok(())
}

/// `runAsNonRoot` (restricted): the pod or every container sets `runAsNonRoot: true`, and
/// none sets it false; pods in a user namespace are exempt (since v1.35).
/// Upstream: `policy/check_runAsNonRoot.go`.
fn run_as_non_root(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    let mut pod_non_root = false;
    r.run(|r| {
        let node = pod.security_context()?.get("runAsNonRoot")?;
        match node.bool()? {
            Some(false) => r.fail(node.path, "runAsNonRoot: false", "must be true"),
            Some(true) => pod_non_root = true,
            None => {}
        }
        Ok(())
    });
    pod.containers(r, |r, c| {
        let node = c.at(&["securityContext", "runAsNonRoot"])?;
        match node.bool()? {
            Some(false) => r.fail(node.path, "runAsNonRoot: false", "must be true"),
            None if !pod_non_root => r.fail(
                node.path,
                "leaving runAsNonRoot unset in both the container and the pod",
                "must be true in the container or the pod",
            ),
            Some(true) | None => {}
        }
        Ok(())
    });
    Ok(())
}

/// `runAsUser` (restricted): neither the pod nor a container sets `runAsUser: 0`; pods in
/// a user namespace are exempt (since v1.35). Upstream: `policy/check_runAsUser.go`.
fn run_as_user(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    r.run(|r| run_as_root(r, &pod.security_context()?));
    pod.containers(r, |r, c| run_as_root(r, &c.get("securityContext")?));
    Ok(())
}

fn run_as_root(r: &mut Report<'_>, security_context: &Node<'_>) -> Checked {
    let node = security_context.get("runAsUser")?;
    if node.int()? == Some(0) {
        r.fail(node.path, "runAsUser: 0", "must be unset or non-zero");
    }
    Ok(())
}

/// `seccompProfile_restricted` (restricted, replaces `seccompProfile_baseline`): the pod or
/// every container sets a seccomp profile of type `RuntimeDefault` or `Localhost`, and none
/// sets another; Windows pods are exempt. Upstream: `policy/check_seccompProfile_restricted.go`.
fn seccomp_profile_restricted(pod: &Pod<'_>, r: &mut Report<'_>) -> Checked {
    let mut pod_confined = false;
    r.run(|r| {
        let profile = pod.security_context()?.get("seccompProfile")?;
        pod_confined = seccomp_profile(r, &profile)? == Some(true);
        Ok(())
    });
    pod.containers(r, |r, c| {
        let profile = c.at(&["securityContext", "seccompProfile"])?;
        if seccomp_profile(r, &profile)?.is_none() && !pod_confined {
            r.fail(
                profile.path,
                "leaving seccompProfile unset in both the container and the pod",
                "type must be RuntimeDefault or Localhost, in the container or the pod",
            );
        }
        Ok(())
    });
    Ok(())
}

/// The pod being checked.
struct Pod<'a> {
    metadata: Node<'a>,
    spec: Node<'a>,
}

impl<'a> Pod<'a> {
    fn security_context(&self) -> Result<Node<'a>, Malformed> {
        self.spec.get("securityContext")
    }

    /// Runs `check` on every container, in upstream's order (`policy/visitor.go`): init
    /// containers, containers, ephemeral containers. A list that is not an array and a
    /// container that is not an object are violations.
    fn containers(
        &self,
        r: &mut Report<'_>,
        mut check: impl FnMut(&mut Report<'_>, &Node<'a>) -> Checked,
    ) {
        for list in ["initContainers", "containers", "ephemeralContainers"] {
            let containers = match self.spec.get(list).and_then(|l| l.items()) {
                Ok(containers) => containers,
                Err(malformed) => {
                    r.malformed(malformed);
                    continue;
                }
            };
            for container in containers {
                r.run(|r| {
                    container.object()?;
                    check(r, &container)
                });
            }
        }
    }
}

/// What a control found: `Err` when it met a field it cannot read, which is a violation.
type Checked = Result<(), Malformed>;

/// A field whose JSON type is not the one upstream's typed structs read there.
#[derive(Debug)]
struct Malformed {
    path: String,
    expected: &'static str,
    found: String,
}

/// The violations of one control, as it finds them.
struct Report<'a> {
    control: &'static Control,
    violations: &'a mut Vec<Violation>,
}

impl Report<'_> {
    /// Reports `what` at `path`, forbidden by `rule`.
    fn fail(&mut self, path: String, what: impl fmt::Display, rule: impl fmt::Display) {
        let level = self.control.level;
        self.push(
            path,
            format!("{what} is forbidden at level {level} ({rule})"),
        );
    }

    fn malformed(&mut self, malformed: Malformed) {
        let Malformed {
            path,
            expected,
            found,
        } = malformed;
        let level = self.control.level;
        self.push(
            path,
            format!(
                "{found} is forbidden at level {level} (must be {expected}: \
                 a field that cannot be checked counts as a violation)"
            ),
        );
    }

    fn push(&mut self, path: String, message: String) {
        let violation = Violation {
            control: self.control.id,
            path,
            message,
        };
        // A malformed parent is met once per field read under it; report it once.
        if !self.violations.contains(&violation) {
            self.violations.push(violation);
        }
    }

    /// Runs `check`, reporting the malformed field it stopped at, if any.
    fn run(&mut self, check: impl FnOnce(&mut Self) -> Checked) {
        if let Err(malformed) = check(self) {
            self.malformed(malformed);
        }
    }
}

/// A field of the input: its path, and its value (`None`: absent or null).
#[derive(Clone)]
struct Node<'a> {
    path: String,
    value: Option<&'a Value>,
}

impl<'a> Node<'a> {
    fn new(path: String, value: &'a Value) -> Node<'a> {
        Node {
            path,
            value: Some(value).filter(|v| !v.is_null()),
        }
    }

    fn is_set(&self) -> bool {
        self.value.is_some()
    }

    fn wrong_type(&self, expected: &'static str) -> Malformed {
        Malformed {
            path: self.path.clone(),
            expected,
            found: describe(self.value),
        }
    }

    /// The field `key` of this object (absent if this is absent).
    fn get(&self, key: &str) -> Result<Node<'a>, Malformed> {
        let path = join(&self.path, key);
        match self.value {
            None => Ok(Node { path, value: None }),
            Some(Value::Object(fields)) => Ok(Node {
                path,
                value: fields.get(key).filter(|v| !v.is_null()),
            }),
            Some(_) => Err(self.wrong_type("an object")),
        }
    }

    /// The field at `keys` under this object.
    fn at(&self, keys: &[&str]) -> Result<Node<'a>, Malformed> {
        keys.iter()
            .try_fold(self.clone(), |node, key| node.get(key))
    }

    /// The items of this array (none if this is absent).
    fn items(&self) -> Result<Vec<Node<'a>>, Malformed> {
        match self.value {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, item)| Node::new(format!("{}[{i}]", self.path), item))
                .collect()),
            Some(_) => Err(self.wrong_type("an array")),
        }
    }

    /// The entries of this map (none if this is absent), each at `path[key]`.
    fn entries(&self) -> Result<Vec<(&'a str, Node<'a>)>, Malformed> {
        match self.value {
            None => Ok(Vec::new()),
            Some(Value::Object(fields)) => Ok(fields
                .iter()
                .map(|(key, value)| {
                    let node = Node::new(format!("{}[{key}]", self.path), value);
                    (key.as_str(), node)
                })
                .collect()),
            Some(_) => Err(self.wrong_type("an object")),
        }
    }

    /// This object's fields; unlike an optional field, it must be there.
    fn object(&self) -> Result<&'a Map<String, Value>, Malformed> {
        match self.value {
            Some(Value::Object(fields)) => Ok(fields),
            _ => Err(self.wrong_type("an object")),
        }
    }

    fn bool(&self) -> Result<Option<bool>, Malformed> {
        match self.value {
            None => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(_) => Err(self.wrong_type("a boolean")),
        }
    }

    fn str(&self) -> Result<Option<&'a str>, Malformed> {
        match self.value {
            None => Ok(None),
            Some(Value::String(value)) => Ok(Some(value)),
            Some(_) => Err(self.wrong_type("a string")),
        }
    }

    fn int(&self) -> Result<Option<i64>, Malformed> {
        match self.value {
            None => Ok(None),
            Some(value) => value
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.wrong_type("an integer")),
        }
    }
}

/// `parent.key`, or `key` at the root.
fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// A string from the input, quoted and cut short: messages stay readable whatever a plugin
/// returns.
fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 64;
    match text.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// An optional string from the input, for messages.
fn shown(text: Option<&str>) -> String {
    text.map_or_else(|| "unset".to_string(), quote)
}

/// A JSON value of the wrong type, for messages.
fn describe(value: Option<&Value>) -> String {
    match value {
        None => "null".to_string(),
        Some(Value::Null) => "null".to_string(),
        Some(Value::Bool(value)) => format!("the boolean {value}"),
        Some(Value::Number(value)) => format!("the number {value}"),
        Some(Value::String(value)) => format!("the string {}", quote(value)),
        Some(Value::Array(_)) => "an array".to_string(),
        Some(Value::Object(_)) => "an object".to_string(),
    }
}

#[cfg(test)]
mod tests;
