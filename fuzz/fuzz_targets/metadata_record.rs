#![no_main]
//! libFuzzer entry for tidelog-fuzz's `metadata_record` target.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tidelog_fuzz::run_target("metadata_record", data));
