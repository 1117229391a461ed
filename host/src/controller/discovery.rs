//! Every kind a plugin declares, checked against what the API server serves before the host
//! sends a request for it: the release's own kinds are checked when the declaration is
//! validated ([`crate::kinds`]), custom resources here through discovery. A declared plural or
//! scope that is not the server's would aim the host's watches and writes at another resource
//! than the kind the policy judged.

use std::collections::HashMap;

use kube::Client;
use kube::core::GroupVersion;
use kube::discovery::{ApiGroup, Scope};

use crate::declaration::Declaration;
use crate::kinds::Kind;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("plugin {plugin}: {kind} is declared {declared}, but the API server serves {served}")]
    Mismatch {
        plugin: String,
        kind: String,
        declared: String,
        served: String,
    },
    #[error("discovering {group_version} on the API server failed: {source}")]
    Discover {
        group_version: String,
        source: kube::Error,
    },
}

impl Error {
    /// A mismatch is the plugin's (remembered until its content changes); a failed discovery
    /// is the cluster's (retried).
    pub fn is_about_content(&self) -> bool {
        matches!(self, Error::Mismatch { .. })
    }
}

fn scope(namespaced: bool) -> &'static str {
    if namespaced {
        "namespaced"
    } else {
        "cluster-scoped"
    }
}

/// Checks each child and related kind of `decl` outside the release's API groups against the
/// API server: a served kind must have the declared plural and scope, and an unserved one may
/// not take the plural of a served resource of its group and version. A group or version the
/// server does not serve at all reaches nothing (the kind is reported unavailable until it is).
pub async fn check_served_kinds(client: &Client, decl: &Declaration) -> Result<(), Error> {
    let mut groups: HashMap<String, Option<ApiGroup>> = HashMap::new();
    let kinds = decl
        .children
        .iter()
        .chain(decl.related.iter().map(|related| &related.kind))
        .filter(|kind| !crate::kinds::is_builtin_group(&kind.group))
        // The parent's own kind: its CRD is the plugin's, checked against the declaration.
        .filter(|kind| !kind.same_kind(&decl.parent));
    for kind in kinds {
        let group_version = kind.api_version();
        if !groups.contains_key(&group_version) {
            let served = match kube::discovery::pinned_group(client, &gv(kind)).await {
                Ok(group) => Some(group),
                Err(kube::Error::Api(status)) if status.code == 404 => None,
                Err(source) => {
                    return Err(Error::Discover {
                        group_version,
                        source,
                    });
                }
            };
            groups.insert(group_version.clone(), served);
        }
        let Some(Some(group)) = groups.get(&group_version) else {
            continue;
        };
        check_kind(&decl.name, kind, &group.versioned_resources(&kind.version))?;
    }
    Ok(())
}

fn gv(kind: &Kind) -> GroupVersion {
    GroupVersion::gv(&kind.group, &kind.version)
}

/// The check of one declared kind against the resources its group version serves.
fn check_kind(
    plugin: &str,
    kind: &Kind,
    served: &[(kube::core::ApiResource, kube::discovery::ApiCapabilities)],
) -> Result<(), Error> {
    let mismatch = |served: String| Error::Mismatch {
        plugin: plugin.to_string(),
        kind: format!("{} {}", kind.api_version(), kind.kind),
        declared: format!("as {:?}, {}", kind.plural, scope(kind.namespaced)),
        served,
    };
    let namespaced = |caps: &kube::discovery::ApiCapabilities| caps.scope == Scope::Namespaced;
    if let Some((resource, caps)) = served.iter().find(|(r, _)| r.kind == kind.kind) {
        if resource.plural != kind.plural || namespaced(caps) != kind.namespaced {
            return Err(mismatch(format!(
                "it as {:?}, {}",
                resource.plural,
                scope(namespaced(caps))
            )));
        }
        return Ok(());
    }
    match served.iter().find(|(r, _)| r.plural == kind.plural) {
        Some((resource, _)) => Err(mismatch(format!(
            "{:?} as the resource of {} (and no {})",
            kind.plural, resource.kind, kind.kind
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ApiResource;
    use kube::discovery::ApiCapabilities;

    fn served(kind: &str, plural: &str, namespaced: bool) -> (ApiResource, ApiCapabilities) {
        (
            ApiResource {
                group: "cert-manager.io".into(),
                version: "v1".into(),
                api_version: "cert-manager.io/v1".into(),
                kind: kind.into(),
                plural: plural.into(),
            },
            ApiCapabilities {
                scope: if namespaced {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                },
                subresources: Vec::new(),
                operations: Vec::new(),
            },
        )
    }

    fn declared(kind: &str, plural: &str, namespaced: bool) -> Kind {
        Kind {
            group: "cert-manager.io".into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    #[test]
    fn a_custom_kind_must_be_declared_as_the_api_server_serves_it() {
        let server = [
            served("Certificate", "certificates", true),
            served("ClusterIssuer", "clusterissuers", false),
        ];
        let check = |kind| check_kind("p", &kind, &server);
        assert!(check(declared("Certificate", "certificates", true)).is_ok());
        let plural = check(declared("Certificate", "clusterissuers", true)).unwrap_err();
        assert!(plural.is_about_content());
        assert!(
            plural.to_string().contains("\"clusterissuers\"")
                && plural.to_string().contains("\"certificates\""),
            "{plural}"
        );
        let scope = check(declared("ClusterIssuer", "clusterissuers", true)).unwrap_err();
        assert!(scope.to_string().contains("cluster-scoped"), "{scope}");
        let borrowed = check(declared("Issuer", "certificates", true)).unwrap_err();
        assert!(
            borrowed.to_string().contains("resource of Certificate"),
            "{borrowed}"
        );
        assert!(
            check(declared("Issuer", "issuers", true)).is_ok(),
            "not served: reaches nothing"
        );
    }
}
