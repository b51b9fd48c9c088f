#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz_harness::pg::pg_messages(data));
