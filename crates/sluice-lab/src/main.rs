//! `sluice-lab`: see the library's docs and docs/TESTBED.md.

fn main() -> std::process::ExitCode {
    sluice_lab::cli::main()
}
