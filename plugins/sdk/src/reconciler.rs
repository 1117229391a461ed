//! The trait a plugin implements.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Desired, Error, Kind, Observed, Related, Validation};

/// The outcome of a successful `finalize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finalized {
    /// Clean-up is complete; the host removes its finalizer and the parent goes away.
    Done,
    /// Clean-up is still in progress; call again after this long.
    Pending(std::time::Duration),
}

/// A reconciler: the logic of one operator, as pure functions of their input.
pub trait Reconciler {
    /// The custom resource this plugin reconciles; its CRD is what `info` declares.
    type Parent: CustomResourceExt + DeserializeOwned + Serialize;

    /// The plugin's name: a DNS-1123 label, unique among a host's plugins.
    const NAME: &'static str;

    /// Whether the host must call [`Reconciler::finalize`] before a parent is deleted.
    const NEEDS_FINALIZE: bool = false;

    /// Every kind `reconcile` may return. The host watches and prunes exactly these.
    fn children() -> Vec<Kind>;

    /// The parent kind's CustomResourceDefinition: by default the one `Parent` derives. A
    /// CRD that serves several versions (`kube::core::crd::merge_crds` of each version's) is
    /// returned here, with `CONVERT` and [`Reconciler::convert`] between them.
    fn crd() -> CustomResourceDefinition {
        Self::Parent::crd()
    }

    /// Other objects the plugin reads (a Secret named in the spec, ConfigMaps by label): the
    /// host watches them, passes them in [`Observed::related`], and reconciles the parents
    /// that refer to one when it changes. None by default.
    fn related() -> Vec<Related> {
        Vec::new()
    }

    /// The desired children and status of `parent`, given the children the host observed.
    fn reconcile(parent: &Self::Parent, observed: &Observed) -> Result<Desired, Error>;

    /// Clean up before `parent` is deleted; only called when `NEEDS_FINALIZE` is true.
    fn finalize(parent: &Self::Parent, observed: &Observed) -> Result<Finalized, Error> {
        let _ = (parent, observed);
        Ok(Finalized::Done)
    }

    /// Whether the host calls [`Reconciler::validate`] when a parent is created or updated
    /// (the API server's validating admission webhook).
    const VALIDATE: bool = false;

    /// Whether the host calls [`Reconciler::validate_delete`] when a parent is deleted.
    const VALIDATE_DELETE: bool = false;

    /// Whether the host calls [`Reconciler::default`] when a parent is created or updated
    /// (the mutating admission webhook), before `validate`.
    const DEFAULT: bool = false;

    /// Whether the host calls [`Reconciler::convert`] (the CRD's conversion webhook): needed
    /// when the CRD serves more than one version.
    const CONVERT: bool = false;

    /// Admission: what refuses `parent`, created (`old` is `None`) or updated from `old`,
    /// before it is stored; `kubectl apply` shows the field errors and warnings. A parent
    /// that does not decode as [`Reconciler::Parent`] is refused with the field that does not
    /// before this is called. Called only when [`Reconciler::VALIDATE`] is true.
    fn validate(parent: &Self::Parent, old: Option<&Self::Parent>) -> Validation {
        let _ = (parent, old);
        Validation::new()
    }

    /// Admission: what refuses the deletion of `parent`. Called only when
    /// [`Reconciler::VALIDATE_DELETE`] is true.
    fn validate_delete(parent: &Self::Parent) -> Validation {
        let _ = parent;
        Validation::new()
    }

    /// Admission: fill in defaults. Only the fields changed here change in the stored
    /// object; it must be idempotent. Called only when [`Reconciler::DEFAULT`] is true.
    fn default(parent: &mut Self::Parent) {
        let _ = parent;
    }

    /// The parent `object` (of any version the CRD serves, as JSON) converted to
    /// `to_version`, `apiVersion` included. Converting to the object's own version must give
    /// it back unchanged, and a round trip must too. Called only when [`Reconciler::CONVERT`]
    /// is true.
    fn convert(object: serde_json::Value, to_version: &str) -> Result<serde_json::Value, Error> {
        let _ = object;
        Err(Error::InvalidSpec(format!(
            "this plugin does not convert between versions (asked for {to_version})"
        )))
    }
}
