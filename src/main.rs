//! The `sbx` binary: daemon, CLI and node agent in one. Everything lives in the library.
fn main() -> std::process::ExitCode {
    sbx::cli::main()
}
