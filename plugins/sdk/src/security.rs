//! Security contexts that pass the Pod Security Standard `restricted`, the strictest level a host's policy can require.

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, SeccompProfile, SecurityContext,
};

/// A pod security context for `restricted`: runs as non-root (as `user`, or the image's own
/// non-root user when `None`) with the runtime's default seccomp profile.
pub fn restricted_pod_security_context(user: Option<i64>) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: user,
        run_as_group: user,
        fs_group: user,
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// A container security context for `restricted`: no privilege escalation, every
/// capability dropped.
pub fn restricted_container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}
