//! Unit tests of crate-internal modules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod batch_tests;
mod index_tests;
mod partition_metadata_tests;
mod records_tests;
mod recover_tests;
mod state_tests;

/// Bit-at-a-time CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): an independent
/// reference for the table/SSE implementation the crate uses.
pub(crate) fn reference_crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
