//! The squatter test plugin's parent kind, `Squat` (see `plugins/squatter`), whose CRD only
//! the CRD-ownership tests touch.

use kube::api::ApiResource;

/// The name of the CRD of `Squat`.
pub const SQUAT_CRD: &str = "squats.squatter.operator-host.dev";

/// `squats.squatter.operator-host.dev`, the parent kind of the squatter plugin.
pub fn squat_resource() -> ApiResource {
    ApiResource {
        group: "squatter.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "squatter.operator-host.dev/v1alpha1".into(),
        kind: "Squat".into(),
        plural: "squats".into(),
    }
}
