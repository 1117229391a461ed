//! The trait a plugin implements.

use kube::CustomResourceExt;
use serde::de::DeserializeOwned;

use crate::{Desired, Error, Kind, Observed, Related};

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
    type Parent: CustomResourceExt + DeserializeOwned;

    /// The plugin's name: a DNS-1123 label, unique among a host's plugins.
    const NAME: &'static str;

    /// Whether the host must call [`Reconciler::finalize`] before a parent is deleted.
    const NEEDS_FINALIZE: bool = false;

    /// Every kind `reconcile` may return. The host watches and prunes exactly these.
    fn children() -> Vec<Kind>;

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
}
