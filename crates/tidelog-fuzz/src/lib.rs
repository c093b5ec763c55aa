//! Fuzz targets over everything a client or the disk can hand tidelog, and a seeded
//! mutation driver that runs them on stable Rust.
//!
//! Each target takes arbitrary bytes and panics only when an invariant breaks: a
//! decoder that panics, a validator that accepts what a client decoder cannot read, a
//! log that recovers into something it cannot serve. The same functions are the
//! libFuzzer targets in `fuzz/` (cargo-fuzz, nightly), the inputs of the stable driver
//! (`cargo run -p tidelog-fuzz`), and, through the committed corpora and regressions,
//! a test in CI. See docs/reliability.md.

pub mod driver;
pub mod mutate;
pub mod seeds;
pub mod targets;

pub use targets::{Target, TARGETS};

/// Runs the target called `name` on `data` (the libFuzzer entry points call this).
///
/// # Panics
/// When there is no such target, or the target finds a broken invariant.
pub fn run_target(name: &str, data: &[u8]) {
    match targets::target(name) {
        Some(target) => (target.run)(data),
        None => panic!("no fuzz target {name:?}"),
    }
}
