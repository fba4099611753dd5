use agentsight_sessions::Provider;
use agentsight_sessions::live::*;
#[test]
fn dump_env() {
    let list = std::env::var("LIVE_FILES").unwrap_or_default();
    for f in list.split_whitespace() {
        let p = if f.contains("/.claude/") {
            Provider::Claude
        } else if f.contains("/.codex/") {
            Provider::Codex
        } else if f.contains("/.gemini/") {
            Provider::Gemini
        } else {
            Provider::Cursor
        };
        let facts = read_tail(p, std::path::Path::new(f), &Thresholds::default());
        println!(
            "== {f}\n{}",
            match facts {
                Ok(f) => serde_json::to_string(&f).unwrap(),
                Err(e) => format!("ERR {e}"),
            }
        );
    }
}
