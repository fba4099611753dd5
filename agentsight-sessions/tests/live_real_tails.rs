//! What the tails real CLIs wrote on a failed model call say
//! (`fixtures/live/real/`, from the runs of `tests/tests/top_agents.rs`):
//! the Claude and Codex tails start inside a line, as a tail read does.
use std::path::Path;

use agentsight_sessions::Provider;
use agentsight_sessions::live::{Signal, TailFacts, TurnStatus, read_tail_bytes};

fn tail(name: &str, provider: Provider, from_begin: bool) -> TailFacts {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/live/real")
        .join(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    read_tail_bytes(provider, &bytes, from_begin)
}

fn rate_limited(f: &TailFacts) -> bool {
    matches!(f.signal, Some(Signal::RateLimited { .. }))
}

#[test]
fn claude_429_is_rate_limited() {
    let f = tail("claude-2.1.328-429.tail.jsonl", Provider::Claude, false);
    assert!(rate_limited(&f), "{f:?}");
    assert_eq!(
        f.session_id.as_deref(),
        Some("b7119f15-2379-4494-8d3f-182395ba1e38")
    );
}

#[test]
fn claude_401_is_auth_required() {
    let f = tail("claude-2.1.328-401.tail.jsonl", Provider::Claude, false);
    assert_eq!(f.signal, Some(Signal::AuthRequired), "{f:?}");
}

#[test]
fn codex_429_is_rate_limited() {
    let f = tail("codex-0.169.0-429.tail.jsonl", Provider::Codex, false);
    assert!(rate_limited(&f), "{f:?}");
}

#[test]
fn codex_401_is_auth_required() {
    let f = tail("codex-0.169.0-401.tail.jsonl", Provider::Codex, false);
    assert_eq!(f.signal, Some(Signal::AuthRequired), "{f:?}");
}

/// Gemini CLI 0.61 writes nothing about a 429: while it retries, the chat
/// ends with the user's prompt, an open turn.
#[test]
fn gemini_429_leaves_an_open_turn() {
    let f = tail("gemini-0.61.0-429.jsonl", Provider::Gemini, true);
    assert_eq!(f.signal, None, "{f:?}");
    assert_eq!(f.turn, TurnStatus::Open, "{f:?}");
}

/// …nor about a 401: it exits and rewrites the history back to the injected
/// session context, which holds no turn record.
#[test]
fn gemini_401_leaves_no_turn() {
    let f = tail("gemini-0.61.0-401.jsonl", Provider::Gemini, true);
    assert_eq!(f.signal, None, "{f:?}");
    assert_eq!(f.turn, TurnStatus::Unknown, "{f:?}");
}
