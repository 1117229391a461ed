//! A plugin's logic run natively through the host's own checks, for the plugin's `cargo test`.
//!
//! This crate is what a plugin author adds as a dev-dependency: the host's validation and
//! policy (`operator-host-core` without its `runtime` feature) and the SDK, and nothing of the
//! wasm engine, kube's client or the controller, so a new plugin's first `cargo test` compiles
//! little beyond what the plugin itself needs.
//!
//! `render` and `run` validate what a plugin answers (the declaration, each child's kind,
//! name and metadata, the status) and check it against the policy. A plugin author wants
//! those failures from `cargo test`, before building the component: [`reconcile`] calls the
//! plugin's [`Reconciler`] natively with the request the host would send and passes its answer
//! through the same [`plan_from_response`](operator_host_core::plan::plan_from_response) and
//! [`Policy::check`] as the host.

//!
//! ```
//! use memcached::{DEFAULT_IMAGE, DEFAULT_PORT, Memcached, MemcachedOperator, MemcachedSpec};
//! use operator_host_testing::{self as testing, Policy};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policy.yaml");
//! let policy = Policy::load(file.as_ref())?;
//! let spec = MemcachedSpec {
//!     size: 2,
//!     image: DEFAULT_IMAGE.into(),
//!     container_port: DEFAULT_PORT,
//!     resources: None,
//! };
//! let parent = Memcached::new("mc", spec);
//! let plan = testing::reconcile::<MemcachedOperator>(&parent, &[], Some(&policy))?;
//! assert_eq!(plan.apply.len(), 2); // a Deployment and a Service, as the host would apply them
//! assert!(testing::warnings(&plan).is_empty());
//! # Ok(())
//! # }
//! ```

use std::path::Path;

use operator_host_contract::{
    Capabilities, Child, FieldValue, GroupVersionKind, PluginInfo, ReconcileResponse,
    RelatedResource, RelatedSelector, SecretView,
};
use operator_host_core::declaration::{self, Declaration};
use operator_host_core::related;
use operator_host_sdk::Reconciler;
use operator_host_sdk::bindings::operator_host::reconciler::types as guest;
use serde_json::Value;

// What a test reads a plan with, and the policy it checks against.
pub use operator_host_contract::{DeletePolicy, Readiness, UpdateStrategy};
pub use operator_host_core::plan::{self, Plan, PlanError, PlannedChild, PruneTarget};
pub use operator_host_core::policy::{self, Policy};

/// The time conditions are stamped with: plans made here do not depend on the clock.
pub const NOW: &str = "2026-01-01T00:00:00Z";

/// Why the host would not apply a plugin's answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Declaration(#[from] declaration::Error),
    #[error(transparent)]
    Admission(#[from] policy::Error),
    #[error("the parent does not serialize: {0}")]
    EncodeParent(serde_json::Error),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

impl Error {
    /// The reason of the `Reconciled=False` condition the parent would show (`InvalidSpec`,
    /// `InvalidPluginOutput`, `PolicyViolation`, ...); `None` for an error that would keep
    /// the host from loading the plugin at all (its declaration, or the policy refusing it).
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Error::Plan(error) => Some(error.reason()),
            Error::Declaration(_) | Error::Admission(_) | Error::EncodeParent(_) => None,
        }
    }
}

/// The plan the host would make of `R`'s answer for `parent` with `observed` children
/// (whole objects, as the API server returns them), checked against `policy` as `run
/// --policy` does (with `None`, the default policy). A parent without a namespace is in
/// `default`, as `render` reads it.
pub fn reconcile<R: Reconciler>(
    parent: &R::Parent,
    observed: &[Value],
    policy: Option<&Policy>,
) -> Result<Plan, Error>
where
    R::Parent: serde::Serialize,
{
    reconcile_with::<R>(parent, observed, &[], policy)
}

/// [`reconcile`] in a cluster that also holds `others` (whole objects, e.g. the Secret a
/// parent names): what the plugin's related declarations choose from, as `run` chooses from
/// the API server's.
pub fn reconcile_with<R: Reconciler>(
    parent: &R::Parent,
    observed: &[Value],
    others: &[Value],
    policy: Option<&Policy>,
) -> Result<Plan, Error>
where
    R::Parent: serde::Serialize,
{
    let default_policy = Policy::default();
    let policy = policy.unwrap_or(&default_policy);
    let decl = declaration::<R>()?;
    policy.admit(&decl)?;
    let mut parent = serde_json::to_value(parent).map_err(Error::EncodeParent)?;
    related::default_namespace(&mut parent);
    let related = related::objects_for(&decl.related, &parent, |_| {
        others
            .iter()
            .cloned()
            .map(|mut other| {
                related::default_namespace(&mut other);
                other
            })
            .collect()
    });
    let (request, _seed) = plan::request("reconcile", &parent, observed, related);
    let response = operator_host_sdk::__private::reconcile::<R>(guest::ReconcileRequest {
        parent: request.parent,
        observed: request.observed,
        related: request
            .related
            .into_iter()
            .map(|related| guest::RelatedObjects {
                name: related.name,
                objects: related.objects,
            })
            .collect(),
    })
    .map_err(|error| match error {
        guest::ReconcileError::InvalidSpec(message) => PlanError::InvalidSpec(message),
        guest::ReconcileError::Retry(message) => PlanError::PluginRetry(message),
    })?;
    let response = ReconcileResponse {
        children: response.children.into_iter().map(child).collect(),
        status: response.status,
        requeue_after_ms: response.requeue_after_ms,
    };
    let plan = plan::plan_from_response(&decl, &parent, observed, response, NOW)?;
    policy
        .check(&decl, &parent, &plan)
        .map_err(PlanError::from)?;
    Ok(plan)
}

/// The warnings `render` and `conformance` print for `plan`: a Service, PodDisruptionBudget
/// or workload whose selector takes in another child's pods (see
/// [`operator_host_core::selectors`]). `assert!(warnings(&plan).is_empty())` in a test.
pub fn warnings(plan: &Plan) -> Vec<String> {
    operator_host_core::selectors::overlaps(plan.objects())
}

/// `R`'s `info`, validated as the host validates a loaded plugin's.
pub fn declaration<R: Reconciler>() -> Result<Declaration, declaration::Error> {
    let info = operator_host_sdk::__private::info::<R>("0.0.0");
    let info = PluginInfo {
        name: info.name,
        version: info.version,
        parent: kind(info.parent),
        children: info.children.into_iter().map(kind).collect(),
        needs_finalize: info.needs_finalize,
        crd: info.crd,
        related: info.related.into_iter().map(related).collect(),
        implements: Capabilities {
            validate: R::VALIDATE,
            validate_delete: R::VALIDATE_DELETE,
            default: R::DEFAULT,
            convert: R::CONVERT,
        },
    };
    Declaration::from_info(Path::new(R::NAME), info, "native".to_string())
}

// The SDK's guest bindings and the host's are generated from the same WIT, as distinct types.

fn kind(gvk: guest::GroupVersionKind) -> GroupVersionKind {
    GroupVersionKind {
        group: gvk.group,
        version: gvk.version,
        kind: gvk.kind,
        plural: gvk.plural,
        namespaced: gvk.namespaced,
    }
}

fn related(related: guest::RelatedResource) -> RelatedResource {
    RelatedResource {
        name: related.name,
        kind: kind(related.kind),
        selector: match related.selector {
            guest::RelatedSelector::NameFromPath(path) => RelatedSelector::NameFromPath(path),
            guest::RelatedSelector::LabelSelector(s) => RelatedSelector::LabelSelector(s),
        },
        secret_view: match related.secret_view {
            guest::SecretView::Full => SecretView::Full,
            guest::SecretView::DataHash => SecretView::DataHash,
        },
    }
}

fn child(child: guest::Child) -> Child {
    Child {
        object: child.object,
        update: match child.update {
            guest::UpdateStrategy::InPlace => UpdateStrategy::InPlace,
            guest::UpdateStrategy::Recreate => UpdateStrategy::Recreate,
            guest::UpdateStrategy::CreateOnly => UpdateStrategy::CreateOnly,
        },
        on_prune: match child.on_prune {
            guest::DeletePolicy::Delete => DeletePolicy::Delete,
            guest::DeletePolicy::Orphan => DeletePolicy::Orphan,
        },
        ready_when: child.ready_when.map(|readiness| match readiness {
            guest::Readiness::Condition(type_) => Readiness::Condition(type_),
            guest::Readiness::FieldEquals(field) => Readiness::FieldEquals(FieldValue {
                path: field.path,
                value: field.value,
            }),
        }),
    }
}
