#![no_main]
//! The live tail readers and the classifier: byte 0 picks the provider and
//! whether the bytes start at the file's beginning; the rest is the tail.
use std::path::Path;

use agentsight_sessions::Provider;
use agentsight_sessions::live::{
    LiveInputs, ProcessTruth, Thresholds, Timestamp, Tracker, read_tail_bytes,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, tail)) = data.split_first() else {
        return;
    };
    let provider = Provider::ALL[usize::from(sel & 3)];
    let facts = read_tail_bytes(provider, tail, sel & 4 != 0);
    let _ = serde_json::to_vec(&facts);
    let now = facts.last_activity.unwrap_or(Timestamp::UNIX_EPOCH);
    let mut tr = Tracker::new(now, Thresholds::default());
    for process in [ProcessTruth::Unknown, ProcessTruth::Exited, ProcessTruth::RunningTools] {
        let inputs = LiveInputs {
            facts: &facts,
            mtime: Some(now),
            desktop_activity: None,
            process,
            registry_status: None,
        };
        let _ = tr.classify(Path::new("/fuzz"), &inputs, now);
    }
});
