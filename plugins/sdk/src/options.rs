//! Contract 0.2.0's additions on the author's side: how the host applies and prunes a child
//! ([`ChildOptions`]), and the other objects a plugin reads ([`Related`]).

use serde::Serialize;

use crate::{Error, Kind};

/// How the host brings an existing child to what the plugin returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UpdateStrategy {
    /// Server-side apply in place (the default). A change the API server refuses as
    /// immutable is reported on the parent and not retried until the child changes again.
    #[default]
    InPlace,
    /// In place, but delete and create again when the API server refuses the change as
    /// immutable (a Job's template, for example).
    Recreate,
    /// Created when absent, never updated afterwards.
    CreateOnly,
}

/// What the host does with a child the plugin no longer returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeletePolicy {
    /// Delete it (the default).
    #[default]
    Delete,
    /// Keep it, without the host's owner reference and labels.
    Orphan,
}

/// When a child counts as ready, for a barrier ([`ChildOptions::ready_when_condition`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `status.conditions` holds this type with status `True`.
    Condition(String),
    /// The field at this dotted path holds this value (JSON text).
    FieldEquals { path: String, value: String },
}

/// How the host handles one child: see [`crate::Desired::child_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildOptions {
    /// How an existing child is updated.
    pub update: UpdateStrategy,
    /// What happens once the plugin stops returning it.
    pub on_prune: DeletePolicy,
    /// A barrier: the children added after this one are applied only once it is ready.
    pub ready_when: Option<Readiness>,
}

impl ChildOptions {
    /// Apply in place, delete on prune, no barrier: what [`crate::Desired::child`] does.
    pub fn new() -> Self {
        Self::default()
    }

    /// Delete and create again when the API server refuses an update as immutable.
    pub fn recreate(mut self) -> Self {
        self.update = UpdateStrategy::Recreate;
        self
    }

    /// Create when absent, never update.
    pub fn create_only(mut self) -> Self {
        self.update = UpdateStrategy::CreateOnly;
        self
    }

    /// Keep the object, without the host's owner reference and labels, once it is no longer
    /// returned.
    pub fn orphan_on_prune(mut self) -> Self {
        self.on_prune = DeletePolicy::Orphan;
        self
    }

    /// A barrier: the children after this one wait until its `status.conditions` has
    /// `condition_type` with status `True` (a Job's `Complete`).
    pub fn ready_when_condition(mut self, condition_type: impl Into<String>) -> Self {
        self.ready_when = Some(Readiness::Condition(condition_type.into()));
        self
    }

    /// A barrier: the children after this one wait until the field at `path` (dotted, e.g.
    /// `status.readyReplicas`) equals `value`.
    pub fn ready_when_field<V: Serialize>(
        mut self,
        path: impl Into<String>,
        value: V,
    ) -> Result<Self, Error> {
        let value = serde_json::to_string(&value)
            .map_err(|e| Error::Retry(format!("cannot serialize a readiness value: {e}")))?;
        self.ready_when = Some(Readiness::FieldEquals {
            path: path.into(),
            value,
        });
        Ok(self)
    }
}

/// How the objects of a related kind are chosen for a parent (in the parent's namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelatedSelector {
    /// The object named by the string at this dotted path of the parent (`spec.tls.secretName`).
    NameFromPath(String),
    /// Every object matching this label selector (`app=web`).
    LabelSelector(String),
}

/// What of a related Secret's data the plugin sees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SecretView {
    /// Each value of `data` replaced by the hex SHA-256 of its bytes (the default): a typed
    /// `Secret`'s `data` then decodes to the hex digest.
    #[default]
    DataHash,
    /// The Secret as stored; the host's policy must allow it.
    Full,
}

/// Another kind of object a plugin reads: declared by [`crate::Reconciler::related`], read with
/// [`crate::Observed::related`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    /// The key the objects come under (a DNS-1123 label, unique within the plugin).
    pub name: String,
    /// Their kind.
    pub kind: Kind,
    /// How they are chosen for a parent.
    pub selector: RelatedSelector,
    /// For Secrets: what of their data the plugin sees.
    pub secret_view: SecretView,
}

impl Related {
    /// The object of `kind` named by the string at `path` in the parent (`spec.configMapName`).
    pub fn by_name_at(name: impl Into<String>, kind: Kind, path: impl Into<String>) -> Self {
        Related {
            name: name.into(),
            kind,
            selector: RelatedSelector::NameFromPath(path.into()),
            secret_view: SecretView::default(),
        }
    }

    /// Every object of `kind` matching the label `selector`.
    pub fn by_labels(name: impl Into<String>, kind: Kind, selector: impl Into<String>) -> Self {
        Related {
            name: name.into(),
            kind,
            selector: RelatedSelector::LabelSelector(selector.into()),
            secret_view: SecretView::default(),
        }
    }

    /// For a Secret: see its data in clear (the host's policy must allow it; the default is a
    /// hash of each value).
    pub fn with_secret_data(mut self) -> Self {
        self.secret_view = SecretView::Full;
        self
    }
}
