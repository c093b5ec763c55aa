#![no_main]
//! libFuzzer entry for tidelog-fuzz's `segment` target.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tidelog_fuzz::run_target("segment", data));
