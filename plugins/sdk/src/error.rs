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
    /// An invalid-spec error for `field`, saying what was expected.
    pub fn invalid_field(field: &str, expected: impl fmt::Display) -> Self {
        Error::InvalidSpec(format!("spec.{field}: {expected}"))
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
