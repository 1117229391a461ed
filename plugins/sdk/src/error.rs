//! The error a plugin returns: an invalid spec (not retried) or a transient failure (retried).

use std::fmt;

/// Why a reconcile or finalize did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The parent's spec is invalid; the message names the field and what was expected.
    /// The host waits for the parent to change before calling again.
    InvalidSpec(String),
    /// A transient problem; the host retries with exponential backoff.
    Retry(String),
}

impl Error {
    /// An invalid-spec error for `field` of the parent's spec (`size` names `spec.size`),
    /// saying what was expected.
    pub fn invalid_field(field: &str, expected: impl fmt::Display) -> Self {
        Self::invalid_at(&format!("spec.{field}"), expected)
    }

    /// An invalid-spec error for the field at `path` of the parent, from its top
    /// (`metadata.name`, `spec.template.image`, `metadata.annotations["a/b"]`), saying what
    /// was expected.
    pub fn invalid_at(path: &str, expected: impl fmt::Display) -> Self {
        Error::InvalidSpec(format!("{path}: {expected}"))
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidSpec(m) | Error::Retry(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidSpec(m) => write!(f, "invalid spec: {m}"),
            Error::Retry(m) => write!(f, "retry: {m}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_field_is_under_spec_and_invalid_at_takes_any_path() {
        assert_eq!(
            Error::invalid_field("size", "at least 1").message(),
            "spec.size: at least 1"
        );
        assert_eq!(
            Error::invalid_at("metadata.name", "at most 40 characters").message(),
            "metadata.name: at most 40 characters"
        );
    }
}
