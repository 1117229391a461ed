//! Installing a plugin's CRD (`run --install-crds`) without taking over anyone else's.
//!
//! A plugin declares its parent kind and that kind's CRD, but who wrote the plugin is not
//! who runs the cluster: a plugin may declare the kind of an API another operator installed.
//! Applying its CRD with force would rewrite that API (schema, served versions). So the host
//! only writes CRDs it installed itself, for the same plugin:
//!
//! - every CRD the host creates carries the annotation [`INSTALLED_FOR_ANNOTATION`] with the
//!   plugin's name (the plugin's CRD object, that annotation added);
//! - absent: created (a create, not an apply, so that of two concurrent creators one gets
//!   `AlreadyExists`, reads the CRD the other made and follows the rules below);
//! - present and annotated for the same plugin: updated by server-side apply, with the
//!   `resourceVersion` just read as a precondition, so a change made meanwhile is a conflict
//!   (the CRD is read again and the rules followed again) and never overwritten unseen;
//! - present without the annotation, or annotated for another plugin: refused, and nothing
//!   is written ([`Error::NotOurs`] says how to hand the CRD over).
//!
//! Either way the host then waits until the API server serves the CRD (Established). A CRD
//! that is ours, Established and already holds every field the host would apply is left as
//! it is (a restart makes no write and waits for nothing).
//! Without `--install-crds` none of this runs: the host never writes a CRD.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};

use crate::labels::FIELD_MANAGER;
use crate::plugin::Plugin;

/// Marks a CRD the host created, with the name of the plugin it was created for.
pub const INSTALLED_FOR_ANNOTATION: &str = "operator-host.dev/installed-for";

/// How long a created or updated CRD may take to become Established.
pub const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads, creates or updates of a CRD that lost a race with another writer before one of
/// them is given up on. Each retry reads the CRD again and applies the rules again, so a
/// retry never writes over a change it did not see.
const ATTEMPTS: u32 = 5;

/// The pause before the n-th retry is n times this: hosts that start at once (or the API
/// server's own status updates of a new CRD) make the first tries collide.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Why a plugin's CRD could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot read the CRD {crd} of plugin {plugin}: {source}; check that the API server is \
         reachable and that the host may `get` customresourcedefinitions (see \
         `operator-host rbac --install-crds`)"
    )]
    Read {
        plugin: String,
        crd: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "cannot create the CRD {crd} of plugin {plugin}: {source}; the host needs `create` on \
         customresourcedefinitions (see `operator-host rbac --install-crds`), and the CRD must \
         be valid (see `operator-host crd PLUGIN.wasm`)"
    )]
    Create {
        plugin: String,
        crd: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "cannot update the CRD {crd} of plugin {plugin}: {source}; the host needs `patch` on \
         it (see `operator-host rbac --install-crds`), the new CRD must be a valid update of \
         the one installed, and a CRD that others keep changing cannot be updated"
    )]
    Update {
        plugin: String,
        crd: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the CRD {crd} of plugin {plugin} did not become Established within {timeout:?}{}: see \
         its status conditions (kubectl get crd {crd} -o yaml)",
        watch_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
    )]
    NotEstablished {
        plugin: String,
        crd: String,
        timeout: Duration,
        /// Why watching the CRD failed, if it did.
        watch_error: Option<String>,
    },
    #[error("{}", not_ours_message(plugin, crd, installed_for.as_deref()))]
    NotOurs {
        plugin: String,
        crd: String,
        /// The plugin the CRD is annotated for; `None` when it has no annotation.
        installed_for: Option<String>,
    },
    #[error(
        "plugin {plugin}'s CRD {crd} no longer has the version(s) {} that objects are still \
         stored in (status.storedVersions: {}): a release keeps serving a version until the \
         host has migrated the stored objects to the new storage version and dropped it from \
         storedVersions",
        dropped.join(", "),
        stored.join(", ")
    )]
    DropsStoredVersion {
        plugin: String,
        crd: String,
        dropped: Vec<String>,
        stored: Vec<String>,
    },
    #[error(
        "plugin {plugin} reconciles {reconciled} of CRD {crd}, which stores {storage}: without \
         the host's conversion webhook (run --webhook-addr) the API server cannot convert \
         between them"
    )]
    NeedsConversionWebhook {
        plugin: String,
        crd: String,
        reconciled: String,
        storage: String,
    },
    #[error("cannot migrate the stored objects of CRD {crd}: {step}: {source}")]
    Migrate {
        crd: String,
        /// What failed, and to which storage version.
        step: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Whether the API server refused the CRD itself (422 Invalid): the plugin's content is
    /// at fault, not the cluster. Everything else (the API server unreachable, permissions,
    /// a CRD someone else owns, not Established in time) may change without a new plugin.
    pub fn is_about_content(&self) -> bool {
        matches!(
            self,
            Error::Create { source: kube::Error::Api(status), .. }
                | Error::Update { source: kube::Error::Api(status), .. }
                if status.code == 422
        ) || matches!(
            self,
            Error::DropsStoredVersion { .. } | Error::NeedsConversionWebhook { .. }
        )
    }
}

fn not_ours_message(plugin: &str, crd: &str, installed_for: Option<&str>) -> String {
    let (found, overwrite) = match installed_for {
        None => (
            format!("annotation {INSTALLED_FOR_ANNOTATION} is absent"),
            "",
        ),
        Some(other) => (
            format!("it is annotated {INSTALLED_FOR_ANNOTATION}={other}"),
            " --overwrite",
        ),
    };
    format!(
        "the CRD {crd} exists and was not installed by operator-host for plugin {plugin} \
         ({found}); operator-host will not take over a CRD it did not install: delete the CRD, \
         or mark it for this plugin with kubectl annotate{overwrite} crd {crd} \
         {INSTALLED_FOR_ANNOTATION}={plugin}, or run without --install-crds"
    )
}

/// The plugin `installed_for` names on `crd`, if any.
pub fn installed_for(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.metadata
        .annotations
        .as_ref()?
        .get(INSTALLED_FOR_ANNOTATION)
        .map(String::as_str)
}

/// Whether the CRD of `plugin`'s parent kind exists (whoever installed it): what a standby
/// checks instead of installing it.
pub async fn crd_exists(client: &Client, plugin: &Plugin) -> Result<bool, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = desired_crd(plugin).metadata.name.unwrap_or_default();
    let existing = crds.get_opt(&crd).await.map_err(|source| Error::Read {
        plugin: plugin.decl.name.clone(),
        crd,
        source,
    })?;
    Ok(existing.is_some())
}

/// Creates the CRD of `plugin`, or updates it if the host installed it for the same plugin,
/// and waits until it is Established; refuses any other CRD of that name (see the module
/// documentation).
pub async fn install_crd(client: &Client, plugin: &Plugin) -> Result<(), Error> {
    install_crd_converting(client, plugin, None).await
}

/// [`install_crd`] with the CRD's conversion webhook set to `conversion` (a plugin that
/// converts between several versions, with the host's webhooks on), so that no object of
/// another version is read unconverted while the webhook is registered. A new CRD that no
/// longer serves a version objects are stored in is refused.
pub async fn install_crd_converting(
    client: &Client,
    plugin: &Plugin,
    conversion: Option<CustomResourceConversion>,
) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut desired = desired_crd(plugin);
    if conversion.is_some() {
        desired.spec.conversion = conversion;
    } else {
        serve_unconverted(&mut desired, plugin)?;
    }
    let crd = desired.metadata.name.clone().unwrap_or_default();
    let plugin_name = plugin.decl.name.as_str();
    let mut attempt = 0;
    let action = loop {
        if attempt > 0 {
            tokio::time::sleep(RETRY_PAUSE * attempt).await;
        }
        attempt += 1;
        let last_attempt = attempt >= ATTEMPTS;
        let existing = crds.get_opt(&crd).await.map_err(|source| Error::Read {
            plugin: plugin_name.to_string(),
            crd: crd.clone(),
            source,
        })?;
        let Some(existing) = existing else {
            match crds.create(&create_params(), &desired).await {
                Ok(_) => break "created",
                // Someone created it meanwhile: read it and decide again.
                Err(kube::Error::Api(status)) if status.is_already_exists() && !last_attempt => {
                    continue;
                }
                Err(source) => {
                    return Err(Error::Create {
                        plugin: plugin_name.to_string(),
                        crd,
                        source,
                    });
                }
            }
        };
        match installed_for(&existing) {
            Some(owner) if owner == plugin_name => {}
            other => {
                return Err(Error::NotOurs {
                    plugin: plugin_name.to_string(),
                    crd,
                    installed_for: other.map(str::to_string),
                });
            }
        }
        let stored = stored_versions(&existing);
        let dropped: Vec<String> = stored
            .iter()
            .filter(|version| !desired.spec.versions.iter().any(|v| &&v.name == version))
            .cloned()
            .collect();
        if !dropped.is_empty() {
            return Err(Error::DropsStoredVersion {
                plugin: plugin_name.to_string(),
                crd,
                dropped,
                stored,
            });
        }
        // A restart finds its CRDs as it left them: no write, no wait.
        if crd_holds(&existing, &desired)
            && conditions::is_crd_established().matches_object(Some(&existing))
        {
            tracing::debug!(plugin = %plugin_name, %crd, "CRD already installed and established");
            crate::faults::crash_point(crate::faults::Step::CrdInstall);
            return Ok(());
        }
        let mut update = desired.clone();
        // The precondition: applied only to the CRD just checked, else 409 Conflict.
        update.metadata.resource_version = existing.metadata.resource_version.clone();
        // Force: the annotation hands every field of the CRD to the host (someone may have
        // written it with another field manager, e.g. before `kubectl annotate`).
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match crds.patch(&crd, &params, &Patch::Apply(&update)).await {
            Ok(_) => break "updated",
            // Changed (409) or deleted (404) since it was read: read it and decide again.
            Err(kube::Error::Api(status))
                if (status.is_conflict() || status.is_not_found()) && !last_attempt =>
            {
                continue;
            }
            Err(source) => {
                return Err(Error::Update {
                    plugin: plugin_name.to_string(),
                    crd,
                    source,
                });
            }
        }
    };
    crate::faults::crash_point(crate::faults::Step::CrdInstall);
    wait_established(crds, plugin_name, &crd).await?;
    tracing::info!(plugin = %plugin_name, %crd, action, "CRD installed and established");
    Ok(())
}

/// Without a conversion webhook the API server only relabels an object of one version as
/// another: a CRD of several versions is installed serving the version the plugin reconciles
/// alone, which must then be the one stored.
fn serve_unconverted(desired: &mut CustomResourceDefinition, plugin: &Plugin) -> Result<(), Error> {
    if crate::declaration::served_versions(desired).len() < 2 {
        return Ok(());
    }
    let reconciled = plugin.decl.parent.version.clone();
    let storage = storage_version(desired).unwrap_or_default().to_string();
    if storage != reconciled {
        return Err(Error::NeedsConversionWebhook {
            plugin: plugin.decl.name.clone(),
            crd: desired.metadata.name.clone().unwrap_or_default(),
            reconciled,
            storage,
        });
    }
    let others: Vec<String> = desired
        .spec
        .versions
        .iter_mut()
        .filter(|v| v.name != reconciled && v.served)
        .map(|v| {
            v.served = false;
            v.name.clone()
        })
        .collect();
    tracing::warn!(plugin = %plugin.decl.name, version = %reconciled, not_served = ?others, "the CRD is installed serving one version: converting between its versions needs the host's webhooks (run --webhook-addr)");
    Ok(())
}

fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|status| status.stored_versions.clone())
        .unwrap_or_default()
}

/// The version a CRD stores its objects in.
fn storage_version(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.as_str())
}

/// Brings every stored object of `plugin`'s CRD to its storage version, then leaves only that
/// version in `status.storedVersions` (what kube-storage-version-migrator does, without it):
/// each object is written back as read, which the API server stores in the storage version.
/// An object changed meanwhile (409) was stored anew by that change, one gone (404) needs
/// nothing. Writes are paced by `writes_per_second`. Nothing to do when only the storage
/// version is stored; interrupted, the next start does it again from the beginning (a write
/// of an object already migrated changes nothing). Returns the number of objects written.
pub async fn migrate_stored_versions(
    client: &Client,
    plugin: &Plugin,
    writes_per_second: u32,
) -> Result<usize, Error> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = desired_crd(plugin).metadata.name.unwrap_or_default();
    let migrate_error = |step: &str, storage: &str| {
        let (crd, step) = (name.clone(), format!("{step} (storage version {storage})"));
        move |source| Error::Migrate { crd, step, source }
    };
    let crd = crds
        .get(&name)
        .await
        .map_err(migrate_error("read the CRD", "?"))?;
    let Some(storage) = storage_version(&crd).map(str::to_string) else {
        return Ok(0);
    };
    let stored = stored_versions(&crd);
    if stored.iter().all(|version| *version == storage) {
        return Ok(0);
    }
    tracing::info!(crd = %name, %storage, stored = ?stored, "migrating the stored objects to the storage version");
    let parent = &plugin.decl.parent;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&parent.group, &storage, &parent.kind),
        &parent.plural,
    );
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let pause = Duration::from_secs(1) / writes_per_second.max(1);
    let mut written = 0;
    let mut page = ListParams::default().limit(500);
    loop {
        let list = objects
            .list(&page)
            .await
            .map_err(migrate_error("list the objects", &storage))?;
        for object in &list.items {
            let namespaced: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
                Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let object_name = object.metadata.name.clone().unwrap_or_default();
            match namespaced
                .replace(&object_name, &PostParams::default(), object)
                .await
            {
                Ok(_) => written += 1,
                Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
                Err(source) => {
                    return Err(migrate_error(&format!("write {object_name}"), &storage)(
                        source,
                    ));
                }
            }
            tokio::time::sleep(pause).await;
        }
        match list.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => page = page.continue_token(&token),
            None => break,
        }
    }
    let status = serde_json::json!({"status": {"storedVersions": [storage]}});
    crds.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(migrate_error("update status.storedVersions", &storage))?;
    tracing::info!(crd = %name, %storage, written, "stored objects migrated; storedVersions is the storage version alone");
    Ok(written)
}

/// Whether the installed CRD already holds every field the host would apply (the API
/// server's defaults and status aside), so that an apply would change nothing.
fn crd_holds(existing: &CustomResourceDefinition, desired: &CustomResourceDefinition) -> bool {
    match (
        serde_json::to_value(existing),
        serde_json::to_value(desired),
    ) {
        (Ok(existing), Ok(desired)) => crate::plan::holds(&existing, &desired),
        _ => false,
    }
}

/// What the host writes: the plugin's CRD, marked with [`INSTALLED_FOR_ANNOTATION`].
///
/// Of the declared metadata only the name, labels and annotations are kept: the rest
/// (resourceVersion, owner references, finalizers, ...) is the API server's or the
/// cluster's to set, not a plugin's.
fn desired_crd(plugin: &Plugin) -> CustomResourceDefinition {
    let declared = &plugin.decl.crd;
    let name = declared.metadata.name.clone().unwrap_or_else(|| {
        // check_crd makes the declared name this one; kept as a fallback, not relied on.
        format!("{}.{}", plugin.decl.parent.plural, plugin.decl.parent.group)
    });
    let mut annotations = declared.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        INSTALLED_FOR_ANNOTATION.to_string(),
        plugin.decl.name.clone(),
    );
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(name),
            labels: declared.metadata.labels.clone(),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: declared.spec.clone(),
        status: None,
    }
}

fn create_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

async fn wait_established(
    crds: Api<CustomResourceDefinition>,
    plugin: &str,
    crd: &str,
) -> Result<(), Error> {
    let not_established = |watch_error| Error::NotEstablished {
        plugin: plugin.to_string(),
        crd: crd.to_string(),
        timeout: ESTABLISHED_TIMEOUT,
        watch_error,
    };
    match tokio::time::timeout(
        ESTABLISHED_TIMEOUT,
        await_condition(crds, crd, conditions::is_crd_established()),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(not_established(Some(error.to_string()))),
        Err(_elapsed) => Err(not_established(None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_is_under_the_prefix_plugins_may_not_use() {
        assert!(INSTALLED_FOR_ANNOTATION.starts_with(crate::labels::RESERVED_PREFIX));
    }

    fn crd(value: serde_json::Value) -> CustomResourceDefinition {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_installed_crd_with_the_api_servers_defaults_holds_what_the_host_applies() {
        let version = |description: &str| {
            serde_json::json!({"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "description": description}}})
        };
        let desired = crd(serde_json::json!({
            "metadata": {"name": "as.example.com", "annotations": {INSTALLED_FOR_ANNOTATION: "a"}},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "A", "plural": "as"}, "versions": [version("ours")]},
        }));
        let installed = |description: &str| {
            crd(serde_json::json!({
                "metadata": {"name": "as.example.com", "resourceVersion": "7", "uid": "u",
                             "annotations": {INSTALLED_FOR_ANNOTATION: "a", "other": "x"}},
                "spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"kind": "A", "plural": "as", "singular": "a", "listKind": "AList"},
                         "conversion": {"strategy": "None"}, "versions": [version(description)]},
                "status": {"conditions": [{"type": "Established", "status": "True"}]},
            }))
        };
        assert!(crd_holds(&installed("ours"), &desired));
        // Edited by hand: applied again.
        assert!(!crd_holds(&installed("by hand"), &desired));
    }

    #[test]
    fn a_refusal_says_what_was_found_and_what_to_do() {
        let absent = Error::NotOurs {
            plugin: "memcached".into(),
            crd: "memcacheds.cache.example.com".into(),
            installed_for: None,
        }
        .to_string();
        assert_eq!(
            absent,
            "the CRD memcacheds.cache.example.com exists and was not installed by operator-host \
             for plugin memcached (annotation operator-host.dev/installed-for is absent); \
             operator-host will not take over a CRD it did not install: delete the CRD, or mark \
             it for this plugin with kubectl annotate crd memcacheds.cache.example.com \
             operator-host.dev/installed-for=memcached, or run without --install-crds"
        );
        let other = Error::NotOurs {
            plugin: "memcached".into(),
            crd: "memcacheds.cache.example.com".into(),
            installed_for: Some("other".into()),
        }
        .to_string();
        assert!(
            other.contains("(it is annotated operator-host.dev/installed-for=other)"),
            "{other}"
        );
        assert!(
            other.contains("kubectl annotate --overwrite crd memcacheds.cache.example.com"),
            "{other}"
        );
    }
}
