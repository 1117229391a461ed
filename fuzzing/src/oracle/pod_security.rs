//! A small model of the Kubernetes Pod Security Standards (v1.35): which pods a level refuses.
//!
//! Written from the standard (kubernetes.io/docs/concepts/security/pod-security-standards and
//! `k8s.io/pod-security-admission`'s checks), not from the host's code, and only as far as
//! a verdict needs: the first control that refuses, not every violation. As the host
//! documents, `null` is absent, and a field of a JSON type the API's structs could not hold
//! is a violation of the control that reads it; restricted replaces the baseline control
//! it tightens unless the pod is exempt from the restricted one; Windows pods are exempt from
//! the restricted privilege-escalation, capabilities and seccomp controls, pods with
//! `hostUsers: false` from the procMount (baseline), runAsNonRoot and runAsUser controls.

use serde_json::{Map, Value};

/// A Pod Security Standards level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

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
const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];
const SELINUX_TYPES: [&str; 4] = [
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];
const RESTRICTED_VOLUMES: [&str; 9] = [
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
const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

/// A field that holds a JSON type the API's structs could not: a violation wherever read.
struct Malformed;

/// A field's value; `None` when missing or null.
type Field<'a> = Result<Option<&'a Value>, Malformed>;
/// Whether a control found a violation (a malformed field is one).
type Found = Result<bool, Malformed>;

fn get<'a>(object: Option<&'a Value>, key: &str) -> Field<'a> {
    match object {
        None => Ok(None),
        Some(Value::Object(fields)) => Ok(fields.get(key).filter(|v| !v.is_null())),
        Some(_) => Err(Malformed),
    }
}

fn at<'a>(object: Option<&'a Value>, keys: &[&str]) -> Field<'a> {
    keys.iter().try_fold(object, |value, key| get(value, key))
}

fn items(list: Option<&Value>) -> Result<Vec<Option<&Value>>, Malformed> {
    match list {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items
            .iter()
            .map(|v| Some(v).filter(|v| !v.is_null()))
            .collect()),
        Some(_) => Err(Malformed),
    }
}

fn object(value: Option<&Value>) -> Result<&Map<String, Value>, Malformed> {
    value.and_then(Value::as_object).ok_or(Malformed)
}

fn boolean(value: Option<&Value>) -> Result<Option<bool>, Malformed> {
    value.map(|v| v.as_bool().ok_or(Malformed)).transpose()
}

fn string(value: Option<&Value>) -> Result<Option<&str>, Malformed> {
    value.map(|v| v.as_str().ok_or(Malformed)).transpose()
}

fn integer(value: Option<&Value>) -> Result<Option<i64>, Malformed> {
    value.map(|v| v.as_i64().ok_or(Malformed)).transpose()
}

/// The pod being judged.
struct Pod<'a> {
    metadata: Option<&'a Value>,
    spec: Option<&'a Value>,
}

impl<'a> Pod<'a> {
    fn security_context(&self) -> Field<'a> {
        get(self.spec, "securityContext")
    }

    /// Init, regular and ephemeral containers; each must be an object.
    fn containers(&self) -> Result<Vec<&'a Value>, Malformed> {
        let mut all = Vec::new();
        for list in ["initContainers", "containers", "ephemeralContainers"] {
            for container in items(get(self.spec, list)?)? {
                object(container)?;
                all.extend(container);
            }
        }
        Ok(all)
    }

    /// Whether any container breaks `rule`.
    fn any_container(&self, rule: impl Fn(Option<&'a Value>) -> Found) -> Found {
        for container in self.containers()? {
            if rule(Some(container))? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn windows(&self) -> Result<bool, Malformed> {
        Ok(string(at(self.spec, &["os", "name"])?)? == Some("windows"))
    }

    fn user_namespace(&self) -> Result<bool, Malformed> {
        Ok(boolean(get(self.spec, "hostUsers")?)? == Some(false))
    }
}

/// The first control of `level` that refuses the pod, by upstream's check ID; `None` if
/// the pod passes.
pub fn refusing_control(level: Level, metadata: &Value, spec: &Value) -> Option<&'static str> {
    if level == Level::Privileged {
        return None;
    }
    let pod = Pod {
        metadata: Some(metadata).filter(|v| !v.is_null()),
        spec: Some(spec).filter(|v| !v.is_null()),
    };
    let restricted = level == Level::Restricted;
    let windows = pod.windows();
    let user_namespace = pod.user_namespace();
    let windows_exempt = matches!(windows, Ok(true));
    let always = Gate::Run;
    let at_restricted = |exemption| Gate::new(restricted, exemption);
    type Check = fn(&Pod<'_>) -> Found;
    let controls: [(&str, Gate, Check); 19] = [
        ("appArmorProfile", always, app_armor_profile),
        // Replaced at restricted by the restricted control, unless that one exempts the pod.
        (
            "capabilities_baseline",
            Gate::new(!restricted || windows_exempt, None),
            capabilities_baseline,
        ),
        ("hostNamespaces", always, host_namespaces),
        (
            "hostPathVolumes",
            Gate::new(!restricted, None),
            host_path_volumes,
        ),
        ("hostPorts", always, host_ports),
        ("hostProbesAndHostLifecycle", always, host_probes),
        ("privileged", always, privileged),
        (
            "procMount",
            Gate::new(!restricted, Some(&user_namespace)),
            proc_mount,
        ),
        ("seLinuxOptions", always, se_linux_options),
        (
            "seccompProfile_baseline",
            Gate::new(!restricted || windows_exempt, None),
            seccomp_profile_baseline,
        ),
        ("sysctls", always, sysctls),
        ("windowsHostProcess", always, windows_host_process),
        (
            "allowPrivilegeEscalation",
            at_restricted(Some(&windows)),
            allow_privilege_escalation,
        ),
        (
            "capabilities_restricted",
            at_restricted(Some(&windows)),
            capabilities_restricted,
        ),
        ("procMount_restricted", at_restricted(None), proc_mount),
        ("restrictedVolumes", at_restricted(None), restricted_volumes),
        (
            "runAsNonRoot",
            at_restricted(Some(&user_namespace)),
            run_as_non_root,
        ),
        (
            "runAsUser",
            at_restricted(Some(&user_namespace)),
            run_as_user,
        ),
        (
            "seccompProfile_restricted",
            at_restricted(Some(&windows)),
            seccomp_profile_restricted,
        ),
    ];
    controls
        .into_iter()
        .find(|(_, gate, check)| match gate {
            Gate::Skip => false,
            Gate::Refuse => true,
            Gate::Run => check(&pod).unwrap_or(true),
        })
        .map(|(id, ..)| id)
}

/// Whether a control judges a pod.
#[derive(Debug, Clone, Copy)]
enum Gate {
    /// Not at this level, replaced, or the pod is exempt.
    Skip,
    Run,
    /// The exemption cannot be read: it exempts nothing and is refused itself.
    Refuse,
}

impl Gate {
    fn new(applies: bool, exemption: Option<&Result<bool, Malformed>>) -> Gate {
        match (applies, exemption) {
            (false, _) | (true, Some(Ok(true))) => Gate::Skip,
            (true, Some(Err(Malformed))) => Gate::Refuse,
            (true, Some(Ok(false)) | None) => Gate::Run,
        }
    }
}

/// A seccomp or AppArmor profile: unset is fine, else its type must be a confined one.
fn profile_refused(profile: Option<&Value>) -> Found {
    Ok(profile_state(profile)? == Some(false))
}

/// `None` when unset; else whether its type is `RuntimeDefault` or `Localhost`.
fn profile_state(profile: Option<&Value>) -> Result<Option<bool>, Malformed> {
    if profile.is_none() {
        return Ok(None);
    }
    let kind = string(get(profile, "type")?)?;
    Ok(Some(matches!(kind, Some("RuntimeDefault" | "Localhost"))))
}

fn app_armor_profile(pod: &Pod<'_>) -> Found {
    if profile_refused(get(pod.security_context()?, "appArmorProfile")?)?
        || pod
            .any_container(|c| profile_refused(at(c, &["securityContext", "appArmorProfile"])?))?
    {
        return Ok(true);
    }
    let Some(annotations) = get(pod.metadata, "annotations")? else {
        return Ok(false);
    };
    for (key, value) in object(Some(annotations))? {
        if !key.starts_with(APPARMOR_ANNOTATION) {
            continue;
        }
        let profile = string(Some(value).filter(|v| !v.is_null()))?.unwrap_or("");
        if !(profile.is_empty()
            || profile == "runtime/default"
            || profile.starts_with("localhost/"))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

fn capabilities_baseline(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| {
        for capability in items(at(c, &["securityContext", "capabilities", "add"])?)? {
            if !BASELINE_CAPABILITIES.contains(&string(capability)?.unwrap_or("")) {
                return Ok(true);
            }
        }
        Ok(false)
    })
}

fn host_namespaces(pod: &Pod<'_>) -> Found {
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if boolean(get(pod.spec, field)?)? == Some(true) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn host_path_volumes(pod: &Pod<'_>) -> Found {
    for volume in items(get(pod.spec, "volumes")?)? {
        object(volume)?;
        if get(volume, "hostPath")?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

fn host_ports(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| {
        for port in items(get(c, "ports")?)? {
            object(port)?;
            if integer(get(port, "hostPort")?)?.is_some_and(|p| p != 0) {
                return Ok(true);
            }
        }
        Ok(false)
    })
}

fn host_probes(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| {
        let lifecycle = get(c, "lifecycle")?;
        let handlers = [
            get(c, "livenessProbe")?,
            get(c, "readinessProbe")?,
            get(c, "startupProbe")?,
            get(lifecycle, "postStart")?,
            get(lifecycle, "preStop")?,
        ];
        for handler in handlers {
            for action in ["httpGet", "tcpSocket"] {
                if string(at(handler, &[action, "host"])?)?.is_some_and(|h| !h.is_empty()) {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    })
}

fn privileged(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| Ok(boolean(at(c, &["securityContext", "privileged"])?)? == Some(true)))
}

fn proc_mount(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| {
        let value = string(at(c, &["securityContext", "procMount"])?)?;
        Ok(value.is_some_and(|v| v != "Default"))
    })
}

fn se_linux_options(pod: &Pod<'_>) -> Found {
    let refused = |options: Option<&Value>| -> Found {
        if options.is_none() {
            return Ok(false);
        }
        let kind = string(get(options, "type")?)?.unwrap_or("");
        if !kind.is_empty() && !SELINUX_TYPES.contains(&kind) {
            return Ok(true);
        }
        for field in ["user", "role"] {
            if string(get(options, field)?)?.is_some_and(|v| !v.is_empty()) {
                return Ok(true);
            }
        }
        Ok(false)
    };
    Ok(refused(get(pod.security_context()?, "seLinuxOptions")?)?
        || pod.any_container(|c| refused(at(c, &["securityContext", "seLinuxOptions"])?))?)
}

fn seccomp_profile_baseline(pod: &Pod<'_>) -> Found {
    Ok(
        profile_refused(get(pod.security_context()?, "seccompProfile")?)?
            || pod.any_container(|c| {
                profile_refused(at(c, &["securityContext", "seccompProfile"])?)
            })?,
    )
}

fn sysctls(pod: &Pod<'_>) -> Found {
    for sysctl in items(get(pod.security_context()?, "sysctls")?)? {
        object(sysctl)?;
        if !SAFE_SYSCTLS.contains(&string(get(sysctl, "name")?)?.unwrap_or("")) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn windows_host_process(pod: &Pod<'_>) -> Found {
    let host_process = &["windowsOptions", "hostProcess"];
    Ok(
        boolean(at(pod.security_context()?, host_process)?)? == Some(true)
            || pod.any_container(|c| {
                Ok(boolean(at(get(c, "securityContext")?, host_process)?)? == Some(true))
            })?,
    )
}

fn allow_privilege_escalation(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| {
        let value = boolean(at(c, &["securityContext", "allowPrivilegeEscalation"])?)?;
        Ok(value != Some(false))
    })
}

fn capabilities_restricted(pod: &Pod<'_>) -> Found {
    pod.any_container(|c| {
        let capabilities = at(c, &["securityContext", "capabilities"])?;
        let mut drops_all = false;
        // Read up to the first "ALL", as upstream does: what follows it is not looked at.
        for capability in items(get(capabilities, "drop")?)? {
            if string(capability)? == Some("ALL") {
                drops_all = true;
                break;
            }
        }
        if !drops_all {
            return Ok(true);
        }
        for capability in items(get(capabilities, "add")?)? {
            if string(capability)?.unwrap_or("") != "NET_BIND_SERVICE" {
                return Ok(true);
            }
        }
        Ok(false)
    })
}

fn restricted_volumes(pod: &Pod<'_>) -> Found {
    for volume in items(get(pod.spec, "volumes")?)? {
        let sources = object(volume)?
            .iter()
            .filter(|(key, value)| *key != "name" && !value.is_null());
        for (source, _) in sources {
            if !RESTRICTED_VOLUMES.contains(&source.as_str()) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn run_as_non_root(pod: &Pod<'_>) -> Found {
    let pod_level = boolean(get(pod.security_context()?, "runAsNonRoot")?)?;
    if pod_level == Some(false) {
        return Ok(true);
    }
    pod.any_container(|c| {
        Ok(
            match boolean(at(c, &["securityContext", "runAsNonRoot"])?)? {
                Some(value) => !value,
                None => pod_level != Some(true),
            },
        )
    })
}

fn run_as_user(pod: &Pod<'_>) -> Found {
    Ok(
        integer(get(pod.security_context()?, "runAsUser")?)? == Some(0)
            || pod.any_container(|c| {
                Ok(integer(at(c, &["securityContext", "runAsUser"])?)? == Some(0))
            })?,
    )
}

fn seccomp_profile_restricted(pod: &Pod<'_>) -> Found {
    let pod_level = profile_state(get(pod.security_context()?, "seccompProfile")?)?;
    if pod_level == Some(false) {
        return Ok(true);
    }
    pod.any_container(|c| {
        Ok(
            match profile_state(at(c, &["securityContext", "seccompProfile"])?)? {
                Some(allowed) => !allowed,
                None => pod_level != Some(true),
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Level, refusing_control};

    fn hardened() -> Value {
        json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
            }}],
        })
    }

    fn control(level: Level, spec: &Value) -> Option<&'static str> {
        refusing_control(level, &Value::Null, spec)
    }

    #[test]
    fn a_hardened_pod_passes_restricted_and_a_plain_one_baseline_only() {
        assert_eq!(control(Level::Restricted, &hardened()), None);
        let plain = json!({"containers": [{"name": "c"}]});
        assert_eq!(control(Level::Baseline, &plain), None);
        assert_eq!(
            control(Level::Restricted, &plain),
            Some("allowPrivilegeEscalation")
        );
        let privileged =
            json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]});
        assert_eq!(control(Level::Privileged, &privileged), None);
        assert_eq!(control(Level::Baseline, &privileged), Some("privileged"));
    }

    #[test]
    fn a_windows_pod_is_held_to_baseline_where_restricted_exempts_it() {
        let mut windows = json!({
            "os": {"name": "windows"},
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c"}],
        });
        assert_eq!(control(Level::Restricted, &windows), None);
        let adds_net_raw = json!({"capabilities": {"add": ["NET_RAW"]}});
        windows["containers"][0]["securityContext"] = adds_net_raw;
        assert_eq!(
            control(Level::Restricted, &windows),
            Some("capabilities_baseline")
        );
        windows["os"] = json!("windows");
        assert_eq!(
            control(Level::Restricted, &windows),
            Some("allowPrivilegeEscalation"),
            "an unreadable exemption exempts nothing"
        );
    }

    #[test]
    fn a_user_namespace_exempts_from_run_as_non_root_only() {
        let mut pod = hardened();
        pod["securityContext"] = json!({"seccompProfile": {"type": "RuntimeDefault"}});
        assert_eq!(control(Level::Restricted, &pod), Some("runAsNonRoot"));
        pod["hostUsers"] = json!(false);
        assert_eq!(control(Level::Restricted, &pod), None);
        pod["hostUsers"] = json!("false");
        assert_eq!(control(Level::Baseline, &pod), Some("procMount"));
    }

    #[test]
    fn a_field_of_the_wrong_type_is_a_violation_of_the_control_reading_it() {
        let mut pod = hardened();
        pod["containers"][0]["securityContext"]["capabilities"]["drop"] = json!(["ALL", 1]);
        assert_eq!(control(Level::Restricted, &pod), None, "read up to ALL");
        pod["containers"][0]["securityContext"]["capabilities"]["drop"] = json!([1, "ALL"]);
        assert_eq!(
            control(Level::Restricted, &pod),
            Some("capabilities_restricted")
        );
        assert_eq!(
            control(Level::Baseline, &json!({"hostNetwork": "true"})),
            Some("hostNamespaces")
        );
        assert_eq!(
            control(Level::Baseline, &json!({"containers": "x"})),
            Some("appArmorProfile")
        );
        assert_eq!(
            control(Level::Baseline, &json!("x")),
            Some("appArmorProfile")
        );
    }
}
