//! The `operator-host` binary: the command line of [`operator_host::cli`].

fn main() -> std::process::ExitCode {
    operator_host::cli::main()
}
