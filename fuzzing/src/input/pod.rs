//! Pod templates: a plain or hardened base, changed in the ways the policy's pod rules look at.
//!
//! The changes draw from the Pod Security Standards' fields (privileged, host namespaces,
//! hostPath, host ports, capabilities, seccomp, AppArmor, SELinux, sysctls, the user, the
//! volume types, Windows and user-namespace pods), from Secret references (to names the parent's
//! spec holds, the plugin's own Secret children may have, or neither), from ServiceAccount
//! names and tokens, and from shapes the API server would reject.

use arbitrary::Unstructured;
use serde_json::{Map, Value, json};

use super::{object_at, pick, usually};
use crate::scenario::PARENT_SPEC_SECRETS;

/// The name of the base container; AppArmor annotations name it.
const CONTAINER: &str = "memcached";

/// A pod template (`{metadata, spec}`) from one of four bases, then up to three changes.
/// The bases: plain (passes `baseline`); hardened (passes `restricted`); and two that pass
/// `restricted` only through an exemption, so one change can show whether the host honours
/// it no further than the standard says: a Windows pod (exempt from the privilege-escalation,
/// capabilities and seccomp controls) and a pod in a user namespace (`hostUsers: false`,
/// exempt from runAsNonRoot). `token` is the spec's `automountServiceAccountToken`, if set.
pub(super) fn gen_template(
    u: &mut Unstructured<'_>,
    token: Option<Value>,
) -> arbitrary::Result<Value> {
    let mut spec = match u.int_in_range(0..=3u8)? {
        0 => json!({"containers": [container(CONTAINER, false)]}),
        1 => json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container(CONTAINER, true)],
        }),
        2 => json!({
            "os": {"name": "windows"},
            "securityContext": {"runAsNonRoot": true},
            "containers": [container(CONTAINER, false)],
        }),
        _ => json!({
            "hostUsers": false,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container(CONTAINER, true)],
        }),
    };
    if let Some(token) = token {
        spec["automountServiceAccountToken"] = token;
    }
    let mut template = json!({"metadata": {"labels": {"app": "mc"}}, "spec": spec});
    for _ in 0..u.int_in_range(0..=3u8)? {
        vary_template(u, &mut template)?;
    }
    Ok(template)
}

fn container(name: &str, hardened: bool) -> Value {
    let mut container = json!({
        "name": name,
        "image": "memcached:1.6",
        "ports": [{"containerPort": 11211}],
    });
    if hardened {
        container["securityContext"] =
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    }
    container
}

/// One change to `template` (made an object first if it is not one).
pub(super) fn vary_template(
    u: &mut Unstructured<'_>,
    template: &mut Value,
) -> arbitrary::Result<()> {
    let template = object_at(template);
    match u.int_in_range(0..=23u8)? {
        0 => {
            let value = pick(u, &[json!(true), json!(false), json!("true")])?;
            container_security_context(u, template)?.insert("privileged".into(), value);
        }
        1 => {
            let field = pick(u, &["hostNetwork", "hostPID", "hostIPC"])?;
            let value = pick(u, &[json!(true), json!(false), json!("true")])?;
            spec(template).insert(field.into(), value);
        }
        2 => push(
            spec(template),
            "volumes",
            json!({"name": "host", "hostPath": {"path": "/var/run"}}),
        ),
        3 => {
            let host_port = pick(
                u,
                &[json!(8080), json!(0), json!("8080"), json!(-1), json!(1.5)],
            )?;
            let port = json!({"containerPort": 8080, "hostPort": host_port});
            push(object_at(some_container(u, template)?), "ports", port);
        }
        4 => {
            let capability = pick(
                u,
                &[
                    json!("NET_BIND_SERVICE"),
                    json!("CHOWN"),
                    json!("SYS_ADMIN"),
                    json!("NET_RAW"),
                    json!("ALL"),
                    json!("net_admin"),
                    json!(1),
                ],
            )?;
            let capabilities = container_security_context(u, template)?
                .entry("capabilities")
                .or_insert(Value::Null);
            push(object_at(capabilities), "add", capability);
        }
        5 => {
            let drop = pick(
                u,
                &[
                    json!(["ALL"]),
                    json!([]),
                    json!(["NET_RAW"]),
                    json!(["NET_RAW", "ALL"]),
                    json!("ALL"),
                    json!([1, "ALL"]),
                    json!(["ALL", 1]),
                    json!(["all"]),
                ],
            )?;
            let capabilities = container_security_context(u, template)?
                .entry("capabilities")
                .or_insert(Value::Null);
            object_at(capabilities).insert("drop".into(), drop);
        }
        6 => {
            let profile = pick(
                u,
                &[
                    json!({"type": "RuntimeDefault"}),
                    json!({"type": "Localhost", "localhostProfile": "profiles/memcached.json"}),
                    json!({"type": "Unconfined"}),
                    json!({}),
                    Value::Null,
                    json!("RuntimeDefault"),
                ],
            )?;
            security_context(u, template)?.insert("seccompProfile".into(), profile);
        }
        7 => {
            if u.arbitrary()? {
                let profile = pick(
                    u,
                    &[
                        json!({"type": "RuntimeDefault"}),
                        json!({"type": "Localhost", "localhostProfile": "memcached"}),
                        json!({"type": "Unconfined"}),
                        json!({}),
                    ],
                )?;
                security_context(u, template)?.insert("appArmorProfile".into(), profile);
            } else {
                let value = pick(
                    u,
                    &[
                        json!("runtime/default"),
                        json!("localhost/memcached"),
                        json!("unconfined"),
                        json!(""),
                        json!(1),
                    ],
                )?;
                let metadata = object_at(template.entry("metadata").or_insert(Value::Null));
                let annotations = object_at(metadata.entry("annotations").or_insert(Value::Null));
                let key = format!("container.apparmor.security.beta.kubernetes.io/{CONTAINER}");
                annotations.insert(key, value);
            }
        }
        8 => {
            let options = pick(
                u,
                &[
                    json!({"type": "container_t"}),
                    json!({"type": "spc_t"}),
                    json!({"type": ""}),
                    json!({"user": "system_u"}),
                    json!({"role": "sysadm_r"}),
                    json!({"level": "s0:c123,c456"}),
                ],
            )?;
            security_context(u, template)?.insert("seLinuxOptions".into(), options);
        }
        9 => {
            let name = pick(
                u,
                &[
                    json!("net.ipv4.tcp_syncookies"),
                    json!("kernel.shm_rmid_forced"),
                    json!("kernel.msgmax"),
                    json!("net.core.somaxconn"),
                    Value::Null,
                ],
            )?;
            pod_security_context(template)
                .insert("sysctls".into(), json!([{"name": name, "value": "1"}]));
        }
        10 => {
            let value = pick(u, &[json!(true), json!(false), json!("true")])?;
            security_context(u, template)?.insert("runAsNonRoot".into(), value);
        }
        11 => {
            let value = pick(u, &[json!(1000), json!(0), json!("0"), json!(-1)])?;
            security_context(u, template)?.insert("runAsUser".into(), value);
        }
        12 => {
            let value = pick(u, &[json!(false), json!(true), Value::Null, json!("false")])?;
            container_security_context(u, template)?
                .insert("allowPrivilegeEscalation".into(), value);
        }
        13 => {
            let volume = pick(
                u,
                &[
                    json!({"name": "cache", "emptyDir": {}}),
                    json!({"name": "config", "configMap": {"name": "mc-config"}}),
                    json!({"name": "data", "persistentVolumeClaim": {"claimName": "data"}}),
                    json!({"name": "info", "downwardAPI": {"items": []}}),
                    json!({"name": "nfs", "nfs": {"server": "nfs", "path": "/"}}),
                    json!({"name": "git", "gitRepo": {"repository": "https://example.com/r"}}),
                    json!({"name": "defaulted"}),
                    json!({"name": "two", "emptyDir": {}, "hostPath": {"path": "/"}}),
                    json!({"name": "null-source", "emptyDir": {}, "nfs": null}),
                    json!("cache"),
                ],
            )?;
            push(spec(template), "volumes", volume);
        }
        14 => {
            let os = pick(
                u,
                &[
                    json!({"name": "windows"}),
                    json!({"name": "linux"}),
                    json!({"name": 1}),
                    json!("windows"),
                ],
            )?;
            spec(template).insert("os".into(), os);
        }
        15 => {
            let value = pick(u, &[json!(false), json!(true), json!("false")])?;
            spec(template).insert("hostUsers".into(), value);
        }
        16 => {
            let value = pick(u, &[json!("Unmasked"), json!("Default"), json!(1)])?;
            container_security_context(u, template)?.insert("procMount".into(), value);
        }
        17 => {
            let value = pick(u, &[json!(true), json!(false)])?;
            security_context(u, template)?
                .insert("windowsOptions".into(), json!({"hostProcess": value}));
        }
        18 => {
            let host = pick(u, &[json!("10.0.0.1"), json!(""), json!(5)])?;
            let (probe, handler) = pick(
                u,
                &[
                    (
                        "livenessProbe",
                        json!({"httpGet": {"path": "/", "port": 80, "host": host}}),
                    ),
                    (
                        "readinessProbe",
                        json!({"tcpSocket": {"port": 80, "host": host}}),
                    ),
                    (
                        "lifecycle",
                        json!({"preStop": {"httpGet": {"port": 80, "host": host}}}),
                    ),
                ],
            )?;
            object_at(some_container(u, template)?).insert(probe.into(), handler);
        }
        19 => add_secret_reference(u, template)?,
        20 => {
            let field = pick(u, &["serviceAccountName", "serviceAccount"])?;
            let name = pick(
                u,
                &[
                    json!("default"),
                    json!(""),
                    json!("mc"),
                    json!("web"),
                    json!("admin"),
                    json!("Default"),
                    json!(1),
                ],
            )?;
            spec(template).insert(field.into(), name);
        }
        21 => {
            let sources = json!([{"serviceAccountToken": {"path": "token", "audience": "vault"}}]);
            push(
                spec(template),
                "volumes",
                json!({"name": "token", "projected": {"sources": sources}}),
            );
        }
        22 => {
            let value = pick(u, &[json!(true), json!(false), json!("true")])?;
            spec(template).insert("automountServiceAccountToken".into(), value);
        }
        _ => malform(u, template)?,
    }
    Ok(())
}

/// A reference to a Secret from one of the places a pod can name one. The name is in the
/// parent's spec, may be one of the plugin's own Secrets (`mc`, `web`: common child names),
/// is foreign, or is not a name at all.
fn add_secret_reference(
    u: &mut Unstructured<'_>,
    template: &mut Map<String, Value>,
) -> arbitrary::Result<()> {
    let [auth, tls] = PARENT_SPEC_SECRETS;
    let name = pick(
        u,
        &[
            json!(auth),
            json!(tls),
            json!("mc"),
            json!("web"),
            json!("other"),
            json!(""),
            json!(5),
        ],
    )?;
    match u.int_in_range(0..=8u8)? {
        0 => push(
            spec(template),
            "volumes",
            json!({"name": "secret", "secret": {"secretName": name}}),
        ),
        1 => {
            let sources = json!([{"configMap": {"name": "mc-config"}}, {"secret": {"name": name}}]);
            push(
                spec(template),
                "volumes",
                json!({"name": "projected", "projected": {"sources": sources}}),
            );
        }
        2 => {
            let key = json!({"name": name, "key": "password"});
            let env = json!({"name": "PASSWORD", "valueFrom": {"secretKeyRef": key}});
            push(object_at(some_container(u, template)?), "env", env);
        }
        3 => {
            let from = json!({"secretRef": {"name": name}});
            push(object_at(some_container(u, template)?), "envFrom", from);
        }
        4 => push(spec(template), "imagePullSecrets", json!({"name": name})),
        5 => {
            let driver = "secrets-store.csi.k8s.io";
            let csi = json!({"driver": driver, "nodePublishSecretRef": {"name": name}});
            push(
                spec(template),
                "volumes",
                json!({"name": "csi", "csi": csi}),
            );
        }
        6 => {
            let cephfs = json!({"monitors": ["10.0.0.1:6789"], "secretRef": {"name": name}});
            push(
                spec(template),
                "volumes",
                json!({"name": "ceph", "cephfs": cephfs}),
            );
        }
        7 => {
            let azure = json!({"secretName": name, "shareName": "share"});
            push(
                spec(template),
                "volumes",
                json!({"name": "azure", "azureFile": azure}),
            );
        }
        _ => {
            // Not a reference: a ConfigMap's key of the same name.
            let key = json!({"name": name, "key": "other"});
            let env = json!({"name": "X", "valueFrom": {"configMapKeyRef": key}});
            push(object_at(some_container(u, template)?), "env", env);
        }
    }
    Ok(())
}

/// Shapes the API server would reject; the host must not take them as absent.
fn malform(u: &mut Unstructured<'_>, template: &mut Map<String, Value>) -> arbitrary::Result<()> {
    match u.int_in_range(0..=7u8)? {
        0 => {
            let list = pick(u, &["containers", "initContainers", "ephemeralContainers"])?;
            spec(template).insert(list.into(), pick(u, &[json!("x"), json!({})])?);
        }
        1 => {
            let field = pick(u, &["volumes", "securityContext", "os"])?;
            spec(template).insert(field.into(), pick(u, &[json!("x"), json!([1])])?);
        }
        2 => {
            let container = pick(u, &[json!(1), Value::Null, json!([])])?;
            *some_container(u, template)? = container;
        }
        3 => {
            object_at(some_container(u, template)?)
                .insert("securityContext".into(), json!("privileged"));
        }
        4 => {
            template.insert(
                "spec".into(),
                pick(u, &[json!("x"), json!([]), Value::Null])?,
            );
        }
        5 => {
            template.insert("metadata".into(), pick(u, &[json!("x"), Value::Null])?);
        }
        6 => {
            let metadata = object_at(template.entry("metadata").or_insert(Value::Null));
            metadata.insert("annotations".into(), json!(["x"]));
        }
        _ => {
            object_at(some_container(u, template)?).insert("ports".into(), json!({"hostPort": 1}));
        }
    }
    Ok(())
}

fn spec(template: &mut Map<String, Value>) -> &mut Map<String, Value> {
    object_at(template.entry("spec").or_insert(Value::Null))
}

/// Appends `item` to the list `key` of `object` (made a list first if it is not one).
fn push(object: &mut Map<String, Value>, key: &str, item: Value) {
    let list = object.entry(key).or_insert(Value::Null);
    if !list.is_array() {
        *list = json!([]);
    }
    if let Value::Array(items) = list {
        items.push(item);
    }
}

/// A container of one of the three lists: mostly an existing one, sometimes a new one.
fn some_container<'a>(
    u: &mut Unstructured<'_>,
    template: &'a mut Map<String, Value>,
) -> arbitrary::Result<&'a mut Value> {
    let list = pick(
        u,
        &[
            "containers",
            "containers",
            "initContainers",
            "ephemeralContainers",
        ],
    )?;
    let containers = spec(template).entry(list).or_insert(Value::Null);
    if !containers.is_array() {
        *containers = json!([]);
    }
    let Value::Array(containers) = containers else {
        unreachable!("made a list above");
    };
    if containers.is_empty() || !usually(u)? {
        let hardened = u.arbitrary()?;
        containers.push(container(&format!("{list}-{}", containers.len()), hardened));
    }
    let index = u.choose_index(containers.len())?;
    Ok(&mut containers[index])
}

fn pod_security_context(template: &mut Map<String, Value>) -> &mut Map<String, Value> {
    object_at(
        spec(template)
            .entry("securityContext")
            .or_insert(Value::Null),
    )
}

fn container_security_context<'a>(
    u: &mut Unstructured<'_>,
    template: &'a mut Map<String, Value>,
) -> arbitrary::Result<&'a mut Map<String, Value>> {
    let container = object_at(some_container(u, template)?);
    Ok(object_at(
        container.entry("securityContext").or_insert(Value::Null),
    ))
}

/// The pod's or a container's security context: most fields exist at both levels.
fn security_context<'a>(
    u: &mut Unstructured<'_>,
    template: &'a mut Map<String, Value>,
) -> arbitrary::Result<&'a mut Map<String, Value>> {
    if u.arbitrary()? {
        Ok(pod_security_context(template))
    } else {
        container_security_context(u, template)
    }
}
