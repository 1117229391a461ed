//! The live inputs of a diff, read from the API server (lists only, nothing written), and
//! the version the cluster serves, from the plugin's OperatorPlugin.

use std::collections::HashMap;

use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::Value;

use super::ParentInputs;
use crate::api::api_for;
use crate::kinds::Kind;
use crate::labels::managed_children_selector;
use crate::operator_plugin::OperatorPlugin;
use crate::plugin::Plugin;

/// Why the cluster's state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing {what} ({kind}) failed: {source}")]
    List {
        what: &'static str,
        kind: String,
        source: kube::Error,
    },
    #[error(
        "no --against given, and the cluster has no OperatorPlugin named {plugin:?}: a plugin \
         served from a plugin directory is not known to the cluster; name the serving version \
         with --against FILE (the file in the host's plugin directory)"
    )]
    NoOperatorPlugin { plugin: String },
    #[error("reading OperatorPlugin {plugin:?} failed: {source}")]
    ReadOperatorPlugin { plugin: String, source: kube::Error },
    #[error(
        "OperatorPlugin {plugin:?} reports no version served yet (status.replicas and \
         status.digest are empty); name the serving version with --against"
    )]
    NotServed { plugin: String },
    #[error(
        "the replicas of OperatorPlugin {plugin:?} serve different versions ({digests}); name \
         the one to compare with --against"
    )]
    ReplicasDisagree { plugin: String, digests: String },
}

/// Which parents a diff covers.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Namespaces of the parents (and of their children); empty: all.
    pub namespaces: Vec<String>,
    /// A label selector the parents must match.
    pub selector: Option<String>,
}

/// What the host's caches would hold for both versions, read once.
#[derive(Debug, Default)]
pub struct LiveState {
    /// The parents, in namespace and name order.
    parents: Vec<Value>,
    /// The host's children of this plugin, by the UID of the parent that controls them.
    children: HashMap<String, Vec<Value>>,
    /// The objects of each related kind either version declares.
    related: Vec<(Kind, Vec<Value>)>,
}

impl LiveState {
    /// The state of `parents`, `children` (every child of the plugin, whichever parent
    /// controls it) and the objects of each `related` kind.
    pub fn new(
        mut parents: Vec<Value>,
        children: impl IntoIterator<Item = Value>,
        related: Vec<(Kind, Vec<Value>)>,
    ) -> LiveState {
        parents.sort_by_key(crate::render::identity);
        let mut by_parent: HashMap<String, Vec<Value>> = HashMap::new();
        for child in children {
            if let Some(uid) = crate::plan::controller_uid(&child).map(str::to_string) {
                by_parent.entry(uid).or_default().push(child);
            }
        }
        LiveState {
            parents,
            children: by_parent,
            related,
        }
    }
}

impl super::Inputs for LiveState {
    fn parents(&self) -> &[Value] {
        &self.parents
    }

    /// What `version` would be called with for `parent`: the children of the kinds it
    /// watches, and the related objects of its own declarations.
    fn inputs(&self, version: &Plugin, parent: &Value) -> ParentInputs {
        let watched = version.policy.allowed_children(&version.decl);
        let observed = parent["metadata"]["uid"]
            .as_str()
            .and_then(|uid| self.children.get(uid))
            .map(|children| {
                children
                    .iter()
                    .filter(|child| watched.iter().any(|kind| kind.matches(child)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let related = crate::related::objects_for(&version.decl.related, parent, |index| {
            let kind = &version.decl.related[index].kind;
            self.related
                .iter()
                .find(|(listed, _)| listed == kind)
                .map(|(_, objects)| objects.clone())
                .unwrap_or_default()
        });
        ParentInputs {
            parent: parent.clone(),
            observed,
            related,
        }
    }

    /// How many children the parents have, of every kind either version watches.
    fn children(&self) -> usize {
        self.parents
            .iter()
            .filter_map(|parent| parent["metadata"]["uid"].as_str())
            .filter_map(|uid| self.children.get(uid))
            .map(Vec::len)
            .sum()
    }
}

/// Reads the parents of `versions`' kind in `scope`, their children of every kind the versions
/// watch, and the objects of every kind they relate to.
pub async fn read(
    client: &Client,
    versions: [&Plugin; 2],
    scope: &Scope,
) -> Result<LiveState, Error> {
    let decl = &versions[1].decl;
    let namespaces: Vec<Option<&str>> = if scope.namespaces.is_empty() {
        vec![None]
    } else {
        scope
            .namespaces
            .iter()
            .map(|ns| Some(ns.as_str()))
            .collect()
    };
    let mut parent_params = ListParams::default();
    if let Some(selector) = &scope.selector {
        parent_params = parent_params.labels(selector);
    }
    let parents = list(client, &decl.parent, &namespaces, &parent_params, "parents").await?;

    let mut child_kinds: Vec<Kind> = Vec::new();
    let mut related_kinds: Vec<Kind> = Vec::new();
    for version in versions {
        for kind in version.policy.allowed_children(&version.decl) {
            if !child_kinds.contains(&kind) {
                child_kinds.push(kind);
            }
        }
        for related in &version.decl.related {
            if !related_kinds.contains(&related.kind) {
                related_kinds.push(related.kind.clone());
            }
        }
    }
    let managed = ListParams::default().labels(&managed_children_selector(&decl.name));
    let mut children = Vec::new();
    for kind in &child_kinds {
        children.extend(list(client, kind, &namespaces, &managed, "children").await?);
    }
    let mut related = Vec::new();
    for kind in related_kinds {
        let objects = list(
            client,
            &kind,
            &namespaces,
            &ListParams::default(),
            "related objects",
        )
        .await?;
        related.push((kind, objects));
    }
    Ok(LiveState::new(parents, children, related))
}

/// Every object of `kind` in `namespaces` (`None`: all), as the host's caches hold them:
/// JSON with `apiVersion` and `kind`, without `managedFields`.
pub(crate) async fn list(
    client: &Client,
    kind: &Kind,
    namespaces: &[Option<&str>],
    params: &ListParams,
    what: &'static str,
) -> Result<Vec<Value>, Error> {
    let mut objects = Vec::new();
    // A cluster-scoped kind is listed once, whatever the namespaces.
    let scopes = if kind.namespaced { namespaces } else { &[None] };
    for namespace in scopes {
        let listed = list_kind(client, kind, *namespace, params)
            .await
            .map_err(|source| Error::List {
                what,
                kind: kind.to_string(),
                source,
            })?;
        objects.extend(listed);
    }
    Ok(objects)
}

/// The objects of `kind` in `namespace` (`None`, or a cluster-scoped kind: all), as the
/// host's caches hold them: JSON with `apiVersion` and `kind`, without `managedFields`.
pub(crate) async fn list_kind(
    client: &Client,
    kind: &Kind,
    namespace: Option<&str>,
    params: &ListParams,
) -> Result<Vec<Value>, kube::Error> {
    let namespace = namespace.filter(|_| kind.namespaced);
    let api = api_for(client, kind, namespace);
    let listed = api.list(params).await?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|mut object| {
            object.metadata.managed_fields = None;
            kind.to_json(&object)
        })
        .collect())
}

/// Where the serving version of an OperatorPlugin's plugin is: `repository@digest`, and
/// whether its registry speaks plain HTTP.
#[derive(Debug, Clone)]
pub struct Served {
    pub reference: String,
    pub plain_http: bool,
    /// The OperatorPlugin's own policy entry (`spec.policy`), which the plugin serves under.
    pub policy: Option<crate::policy::Rules>,
}

/// The version the replicas of the host serve for `plugin`, from its OperatorPlugin: the digest
/// each replica reports (or, before any did, the one the source resolved to).
pub async fn served_version(client: &Client, plugin: &str) -> Result<Served, Error> {
    let api: Api<OperatorPlugin> = Api::all(client.clone());
    let resource = match api.get_opt(plugin).await {
        Ok(Some(resource)) => resource,
        Ok(None) => {
            return Err(Error::NoOperatorPlugin {
                plugin: plugin.into(),
            });
        }
        // Without the CRD, no OperatorPlugin can name it either.
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return Err(Error::NoOperatorPlugin {
                plugin: plugin.into(),
            });
        }
        Err(source) => {
            return Err(Error::ReadOperatorPlugin {
                plugin: plugin.into(),
                source,
            });
        }
    };
    let status = resource.status.clone().unwrap_or_default();
    let mut digests: Vec<&str> = status.replicas.iter().map(|r| r.digest.as_str()).collect();
    digests.sort_unstable();
    digests.dedup();
    let digest = match digests.as_slice() {
        [] => status.digest.as_deref().ok_or_else(|| Error::NotServed {
            plugin: plugin.into(),
        })?,
        [digest] => digest,
        several => {
            return Err(Error::ReplicasDisagree {
                plugin: plugin.into(),
                digests: several.join(", "),
            });
        }
    };
    // Pinned as the host pins it when it pulls.
    let source = &resource.spec.source;
    Ok(Served {
        reference: format!("{}@{digest}", source.split('@').next().unwrap_or(source)),
        plain_http: resource.spec.plain_http,
        policy: resource.spec.policy.clone(),
    })
}

impl std::fmt::Display for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reference)
    }
}
