#![no_main]
//! libFuzzer entry for tidelog-fuzz's `record_batch` target.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tidelog_fuzz::run_target("record_batch", data));
