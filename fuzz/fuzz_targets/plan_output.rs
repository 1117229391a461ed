//! Fuzz target: arbitrary plugin output through the host's plan and policy check.
//!
//! The input layout, the generators and the oracle are in the workspace crate
//! `operator-host-fuzzing` (fuzzing/), where `make lint` compiles them and its tests replay
//! the seeds; see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| operator_host_fuzzing::check_plan_output(data));
