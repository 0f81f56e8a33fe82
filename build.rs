//! Rebuilds when a migration is added: `sqlx::migrate!` embeds the folders at compile time,
//! and cargo does not otherwise see a new file there. Hands the binary the names of the
//! crates it is built from (`PRACTICE_LOG_CRATES`), the targets its logs can come from, so
//! that a `PRACTICE_LOG` naming none of them (`practise_api=debug`, `inof`) is refused
//! rather than switching the logs off without a word.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=Cargo.lock");
    // Without a lock file (a build that made none), the list is empty and the check is off.
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let crates: Vec<String> = lock
        .lines()
        .filter_map(|line| line.strip_prefix("name = \"")?.strip_suffix('"'))
        .map(|name| name.replace('-', "_"))
        .collect();
    println!("cargo:rustc-env=PRACTICE_LOG_CRATES={}", crates.join(","));
}
