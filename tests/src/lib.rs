//! Integration-test support.
