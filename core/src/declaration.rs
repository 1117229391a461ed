//! What a plugin declares about itself in `info` (its name, version, parent and child kinds,
//! CRD and related objects), validated.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::contract::{Capabilities, PluginInfo, RelatedSelector, SecretView};
use crate::kinds::Kind;
use crate::labels::RESERVED_PREFIX;
use crate::names::{check_dns_label, check_dns_subdomain};

/// Why a declaration is refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("plugin {} declares an invalid {field}: {problem}", path.display())]
    Invalid {
        path: PathBuf,
        field: &'static str,
        problem: String,
    },
}

/// What a plugin declared about itself in `info`, validated, plus its content hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    pub name: String,
    pub version: String,
    /// Hex SHA-256 of the component: identifies exactly which build produced a state.
    pub content_hash: String,
    pub parent: Kind,
    pub children: Vec<Kind>,
    pub needs_finalize: bool,
    pub crd: CustomResourceDefinition,
    /// Other objects the plugin reads (contract 0.2.0), in the order it declared them.
    pub related: Vec<Related>,
    /// Which of `validate`, `default` and `convert` the host calls (contract 0.3.0).
    pub implements: Capabilities,
}

/// One kind of object a plugin reads but does not own, and how its objects are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Related {
    /// The key the request carries them under.
    pub name: String,
    pub kind: Kind,
    pub selector: RelatedSelector,
    /// For Secrets: their data in clear, or each value's SHA-256.
    pub secret_view: SecretView,
}

impl Related {
    /// Whether these are Secrets (whose data the policy governs).
    pub fn is_secret(&self) -> bool {
        self.kind.group.is_empty() && self.kind.kind == "Secret"
    }
}

impl Declaration {
    /// Validates what the plugin at `path` (of content hash `content_hash`) answered to `info`.
    pub fn from_info(path: &Path, info: PluginInfo, content_hash: String) -> Result<Self, Error> {
        let invalid = |field: &'static str, problem: String| Error::Invalid {
            path: path.to_path_buf(),
            field,
            problem,
        };
        check_dns_label(&info.name).map_err(|p| invalid("name", p))?;
        check_version(&info.version).map_err(|p| invalid("version", p))?;
        let parent = Kind::from(info.parent);
        check_kind(&parent, true).map_err(|p| invalid("parent kind", p))?;
        let children: Vec<Kind> = info.children.into_iter().map(Kind::from).collect();
        for child in &children {
            check_kind(child, false).map_err(|p| invalid("child kind", format!("{child}: {p}")))?;
        }
        let mut crd: serde_json::Value = serde_json::from_str(&info.crd)
            .map_err(|e| invalid("CRD", format!("not valid JSON: {e}")))?;
        add_host_status_fields(&mut crd);
        let crd: CustomResourceDefinition = serde_json::from_value(crd)
            .map_err(|e| invalid("CRD", format!("not a CustomResourceDefinition: {e}")))?;
        check_crd(&crd, &parent).map_err(|p| invalid("CRD", p))?;
        let served = served_versions(&crd);
        if served.len() > 1 && !info.implements.convert {
            return Err(invalid(
                "CRD",
                format!(
                    "it serves the versions {} but the plugin does not implement `convert` \
                     (contract 0.3.0): the API server could not convert between them",
                    served.join(", ")
                ),
            ));
        }
        let mut related = Vec::with_capacity(info.related.len());
        for declared in info.related {
            let problem =
                |p: String| invalid("related resource", format!("{:?}: {p}", declared.name));
            check_dns_label(&declared.name).map_err(problem)?;
            if related.iter().any(|r: &Related| r.name == declared.name) {
                return Err(problem("declared twice".into()));
            }
            let kind = Kind::from(declared.kind);
            check_kind(&kind, false).map_err(|p| problem(format!("{kind}: {p}")))?;
            if !kind.namespaced {
                return Err(problem(format!(
                    "{kind} is cluster-scoped; related objects are read in the parent's namespace"
                )));
            }
            match &declared.selector {
                RelatedSelector::NameFromPath(path) => check_path(path).map_err(problem)?,
                RelatedSelector::LabelSelector(selector) => {
                    crate::labels::parse(selector).map_err(problem)?;
                }
            }
            related.push(Related {
                name: declared.name,
                kind,
                selector: declared.selector,
                secret_view: declared.secret_view,
            });
        }
        Ok(Declaration {
            name: info.name,
            version: info.version,
            content_hash,
            parent,
            children,
            needs_finalize: info.needs_finalize,
            crd,
            related,
            implements: info.implements,
        })
    }
}

/// The versions `crd` serves, in its order.
pub fn served_versions(crd: &CustomResourceDefinition) -> Vec<&str> {
    crd.spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect()
}

impl Declaration {
    /// The versions of the parent's CRD that are served.
    pub fn served_versions(&self) -> Vec<&str> {
        served_versions(&self.crd)
    }
}

/// A dotted path into the parent, `spec.tls.secretName`: non-empty segments.
fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(format!(
            "the path {path:?} is not a dotted path such as spec.tls.secretName"
        ));
    }
    Ok(())
}

fn check_version(version: &str) -> Result<(), String> {
    let core = version.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<_> = core.split('.').collect();
    if parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        Ok(())
    } else {
        Err(format!("{version:?} is not a semantic version like 1.2.3"))
    }
}

fn check_kind(kind: &Kind, is_parent: bool) -> Result<(), String> {
    if is_parent && !kind.group.contains('.') {
        return Err(format!(
            "group {:?} must be a domain name such as example.com",
            kind.group
        ));
    }
    if kind.version.is_empty() || !kind.kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Err(format!(
            "version {:?} and kind {:?} must be non-empty, kind in CamelCase",
            kind.version, kind.kind
        ));
    }
    // Each is a segment of the URLs the host requests and of the rules `rbac` grants: a `/`
    // or a `*` would reach other resources than the kind the policy judges.
    if !kind.group.is_empty() {
        check_dns_subdomain(&kind.group).map_err(|p| format!("group: {p}"))?;
    }
    check_dns_label(&kind.version).map_err(|p| format!("version: {p}"))?;
    if !kind.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!("kind {:?} must be alphanumeric", kind.kind));
    }
    check_dns_label(&kind.plural).map_err(|p| format!("plural: {p}"))?;
    crate::kinds::check_builtin(
        &kind.group,
        &kind.version,
        &kind.kind,
        &kind.plural,
        kind.namespaced,
    )
}

/// Declares the status fields the host itself writes (`observedGeneration`, `conditions`)
/// in every version's status schema that lacks them, so the API server keeps them.
fn add_host_status_fields(crd: &mut serde_json::Value) {
    let Some(versions) = crd["spec"]["versions"].as_array_mut() else {
        return;
    };
    for version in versions {
        // `get_mut`, not indexing: indexing a missing key would insert a null.
        let properties = [
            "schema",
            "openAPIV3Schema",
            "properties",
            "status",
            "properties",
        ]
        .iter()
        .try_fold(&mut *version, |value, key| value.get_mut(*key))
        .and_then(|p| p.as_object_mut());
        let Some(properties) = properties else {
            continue; // no structured status schema (e.g. preserve-unknown-fields): nothing to add
        };
        properties
            .entry("observedGeneration")
            .or_insert_with(|| serde_json::json!({"type": "integer", "format": "int64"}));
        properties.entry("conditions").or_insert_with(|| {
            serde_json::json!({
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                          "required": ["type"], "properties": {"type": {"type": "string"}}}
            })
        });
    }
}

fn check_crd(crd: &CustomResourceDefinition, parent: &Kind) -> Result<(), String> {
    let spec = &crd.spec;
    let expected_name = format!("{}.{}", parent.plural, parent.group);
    if crd.metadata.name.as_deref() != Some(expected_name.as_str()) {
        return Err(format!(
            "metadata.name is {:?}, expected {expected_name:?}",
            crd.metadata.name
        ));
    }
    if spec.group != parent.group
        || spec.names.kind != parent.kind
        || spec.names.plural != parent.plural
    {
        return Err(format!(
            "it defines {}/{} ({}), but the plugin declares {} ({})",
            spec.group, spec.names.kind, spec.names.plural, parent, parent.plural
        ));
    }
    let scope = if parent.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    };
    if spec.scope != scope {
        return Err(format!("scope is {:?}, expected {scope:?}", spec.scope));
    }
    let version = spec
        .versions
        .iter()
        .find(|v| v.name == parent.version)
        .ok_or_else(|| format!("it has no version {:?}", parent.version))?;
    if !version.served {
        return Err(format!("version {:?} is not served", parent.version));
    }
    if version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .is_none()
    {
        return Err(format!(
            "version {:?} has no openAPIV3Schema",
            parent.version
        ));
    }
    // The API server calls a conversion webhook's URL or Service itself: a sandboxed plugin
    // that could name one would reach the network (and see every CR) through it.
    if let Some(conversion) = &spec.conversion
        && (conversion.strategy != "None" || conversion.webhook.is_some())
    {
        return Err(format!(
            "spec.conversion has strategy {:?}{}, expected strategy \"None\" and no webhook: \
             a conversion webhook would let a sandboxed plugin reach the network through the \
             API server",
            conversion.strategy,
            if conversion.webhook.is_some() {
                " and a webhook"
            } else {
                ""
            }
        ));
    }
    let reserved = crd
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(key, _)| key)
        .find(|key| key.starts_with(RESERVED_PREFIX));
    if let Some(key) = reserved {
        return Err(format!(
            "metadata.annotations has {key:?}, expected no annotation under \
             {RESERVED_PREFIX:?}: that prefix is reserved for the host (it marks the \
             CRDs it installs, and for which plugin)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(check_version("0.1.0").is_ok());
        assert!(check_version("1.2.3-rc.1").is_ok());
        assert!(check_version("1.2").is_err());
        assert!(check_version("v1.2.3").is_err());
    }

    #[test]
    fn a_kind_that_names_another_resource_or_an_unsafe_url_segment_is_refused() {
        let kind = |group: &str, version: &str, kind: &str, plural: &str, namespaced: bool| Kind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        };
        assert!(check_kind(&kind("", "v1", "ConfigMap", "configmaps", true), false).is_ok());
        for (lie, expected) in [
            (
                kind("", "v1", "ConfigMap", "secrets", true),
                "\"configmaps\"",
            ),
            (
                kind("", "v1", "ConfigMap", "configmaps", false),
                "namespaced",
            ),
            (kind("", "v1", "Ghost", "secrets", true), "v1 Secret"),
            (
                kind(
                    "rbac.authorization.k8s.io",
                    "v1",
                    "Role",
                    "clusterroles",
                    true,
                ),
                "roles",
            ),
            (kind("*", "v1", "Widget", "widgets", true), "group"),
            (
                kind("example.com", "v1/../..", "Widget", "widgets", true),
                "version",
            ),
            (
                kind("example.com", "v1", "Wid/get", "widgets", true),
                "alphanumeric",
            ),
        ] {
            let refused = check_kind(&lie, false).unwrap_err();
            assert!(refused.contains(expected), "{lie:?}: {refused}");
        }
    }

    fn widget_kind() -> Kind {
        Kind {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            namespaced: true,
        }
    }

    /// A valid CRD of [`widget_kind`], with `extra` merged into its top level (one level deep
    /// into `metadata` and `spec`).
    fn widget_crd(extra: serde_json::Value) -> CustomResourceDefinition {
        let mut crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}
                }]
            }
        });
        for (section, fields) in extra.as_object().into_iter().flatten() {
            for (key, value) in fields.as_object().into_iter().flatten() {
                crd[section][key] = value.clone();
            }
        }
        serde_json::from_value(crd).unwrap()
    }

    #[test]
    fn a_crd_that_matches_the_declaration_is_accepted() {
        assert_eq!(
            check_crd(&widget_crd(serde_json::json!({})), &widget_kind()),
            Ok(())
        );
        let none = widget_crd(serde_json::json!({"spec": {"conversion": {"strategy": "None"}}}));
        assert_eq!(check_crd(&none, &widget_kind()), Ok(()));
        let annotated = widget_crd(serde_json::json!({"metadata": {"annotations": {
            "example.com/owner": "team-a", "operator-host.dev": "not a prefix match"
        }}}));
        assert_eq!(check_crd(&annotated, &widget_kind()), Ok(()));
    }

    #[test]
    fn a_conversion_webhook_is_refused() {
        let webhook = serde_json::json!({"spec": {"conversion": {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://attacker.example/convert"}
            }
        }}});
        let error = check_crd(&widget_crd(webhook), &widget_kind()).unwrap_err();
        assert!(
            error.contains("strategy \"Webhook\" and a webhook")
                && error.contains("expected strategy \"None\"")
                && error.contains("reach the network through the API server"),
            "{error}"
        );
        // A webhook under strategy None is not served today, but must not be waiting there.
        let dormant = serde_json::json!({"spec": {"conversion": {
            "strategy": "None",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": "default", "name": "convert"}}
            }
        }}});
        let error = check_crd(&widget_crd(dormant), &widget_kind()).unwrap_err();
        assert!(error.contains("strategy \"None\" and a webhook"), "{error}");
        let strategy_only = serde_json::json!({"spec": {"conversion": {"strategy": "Webhook"}}});
        let error = check_crd(&widget_crd(strategy_only), &widget_kind()).unwrap_err();
        assert!(
            error.starts_with("spec.conversion has strategy \"Webhook\", expected"),
            "{error}"
        );
    }

    #[test]
    fn annotations_under_the_host_prefix_are_refused() {
        let premarked = serde_json::json!({"metadata": {"annotations": {
            "operator-host.dev/installed-for": "memcached"
        }}});
        let error = check_crd(&widget_crd(premarked), &widget_kind()).unwrap_err();
        assert!(
            error.contains("\"operator-host.dev/installed-for\"")
                && error.contains("reserved for the host"),
            "{error}"
        );
        let other = serde_json::json!({"metadata": {"annotations": {"operator-host.dev/x": ""}}});
        assert!(check_crd(&widget_crd(other), &widget_kind()).is_err());
    }
}
