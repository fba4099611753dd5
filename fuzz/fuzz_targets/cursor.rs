#![no_main]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::run(
        agentsight_sessions::Provider::Cursor,
        "22222222-0000-4000-8000-000000000000.jsonl",
        data,
    );
});
