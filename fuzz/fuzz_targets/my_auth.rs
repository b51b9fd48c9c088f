#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz_harness::mysql::my_auth(data));
