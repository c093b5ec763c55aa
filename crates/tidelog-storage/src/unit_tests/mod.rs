//! Unit tests of crate-internal modules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod batch_tests;
mod index_tests;
mod partition_metadata_tests;
mod recover_tests;
mod state_tests;
