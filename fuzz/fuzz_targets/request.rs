#![no_main]
//! libFuzzer entry for tidelog-fuzz's `request` target.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tidelog_fuzz::run_target("request", data));
