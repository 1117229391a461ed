//! Generators and oracles of operator-host's fuzz targets, compiled and tested with the workspace.
//!
//! As in wasmtime's layout, the fuzz targets in `fuzz/` (a standalone cargo-fuzz crate,
//! nightly only) are a few lines that call into this crate, and this crate's tests replay
//! the seed corpus and a bounded pseudo-random run on stable. See docs/fuzzing.md.
//!
//! - [`input`]: the input layout and the generators driven by its control bytes.
//! - `oracle`: the model of every invariant of a plan and of each policy's verdict.
//! - `scenario`: the fixed plugin declaration, parent identity and clock.

pub mod input;
mod oracle;
mod scenario;

pub use input::Case;

/// The plugin every input is plugin output of: Memcached with the kinds the policy treats
/// specially, the workloads among them.
pub fn declaration() -> &'static operator_host::declaration::Declaration {
    &scenario::DECLARATION
}

/// The `plan_output` target: decodes `data` into a plugin's output for one reconcile, runs
/// it through `plan_from_response` and `Policy::check`, and panics on a broken invariant.
/// Inputs the generators cannot decode are skipped, as libFuzzer's `Arbitrary` inputs are.
pub fn check_plan_output(data: &[u8]) {
    if let Ok(case) = Case::decode(data) {
        oracle::check(&case);
    }
}
