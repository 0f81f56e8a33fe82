//! Rebuilds when a migration is added: `sqlx::migrate!` embeds the folders at compile time,
//! and cargo does not otherwise see a new file there.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
