#![no_main]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the layout: legacy whole-file .json or .jsonl log.
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let name = if sel & 1 == 0 {
        "session-f.json"
    } else {
        "session-f.jsonl"
    };
    common::run(agentsight_sessions::Provider::Gemini, name, rest);
});
