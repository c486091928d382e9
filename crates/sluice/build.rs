//! Stamps the binary with the commit it was built from, so `sluice --version` (and the benchmark
//! records that quote it) name the exact code measured.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| String::from("unknown commit"));
    println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
    // Rebuild the stamp when HEAD moves (a commit, a checkout).
    if let Ok(git_dir) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
    {
        let git_dir = String::from_utf8_lossy(&git_dir.stdout).trim().to_string();
        if !git_dir.is_empty() {
            println!("cargo:rerun-if-changed={git_dir}/HEAD");
            println!("cargo:rerun-if-changed={git_dir}/refs/heads");
        }
    }
}
