//! `operator-host` built with crash points (the `fault-injection` feature), for the
//! fault-injection tests: the same command line, which aborts after the write step named by
//! `OPERATOR_HOST_CRASH_AFTER`.

fn main() -> std::process::ExitCode {
    operator_host::cli::main()
}
