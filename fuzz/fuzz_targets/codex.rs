#![no_main]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::run(
        agentsight_sessions::Provider::Codex,
        "rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-00000000abcd.jsonl",
        data,
    );
});
