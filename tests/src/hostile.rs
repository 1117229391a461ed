//! The hostile test plugin's parent kind, `Attack` (see `plugins/hostile`).

use kube::api::ApiResource;

/// `attacks.hostile.operator-host.dev`, the parent kind of the hostile plugin.
pub fn attack_resource() -> ApiResource {
    ApiResource {
        group: "hostile.operator-host.dev".into(),
        version: "v1alpha1".into(),
        api_version: "hostile.operator-host.dev/v1alpha1".into(),
        kind: "Attack".into(),
        plural: "attacks".into(),
    }
}
