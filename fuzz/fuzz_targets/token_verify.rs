#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz_harness::token::token_verify(data));
