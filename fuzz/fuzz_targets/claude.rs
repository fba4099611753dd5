#![no_main]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::run(
        agentsight_sessions::Provider::Claude,
        "11111111-0000-4000-8000-000000000000.jsonl",
        data,
    );
});
