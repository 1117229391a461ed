//! Fixtures shared by the library's unit tests: kinds and a Memcached declaration.

use crate::declaration::Declaration;
use crate::kinds::Kind;

/// A namespaced kind.
pub fn kind(group: &str, version: &str, kind: &str, plural: &str) -> Kind {
    Kind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
    }
}

/// The Memcached plugin's parent kind.
pub fn memcached_kind() -> Kind {
    kind("cache.example.com", "v1alpha1", "Memcached", "memcacheds")
}

/// The Memcached parent kind as kube-rs's dynamic resource.
pub fn memcached_resource() -> kube::core::ApiResource {
    memcached_kind().api_resource()
}

/// A declaration of plugin `memcached` with these `children`, without a finalizer or CRD.
pub fn memcached_declaration(children: Vec<Kind>) -> Declaration {
    Declaration {
        name: "memcached".into(),
        version: "0.1.0".into(),
        content_hash: "abcdef0123456789".into(),
        parent: memcached_kind(),
        children,
        needs_finalize: false,
        crd: Default::default(),
        related: Vec::new(),
        implements: Default::default(),
    }
}
