//! Is the session already running outside agentsight? Two writers to one
//! transcript interleave and corrupt it, so a message is refused when a live
//! process tree of the same agent is bound to the session by the matching
//! ladder (an open transcript, then the one-to-one cwd fallback, as
//! `agentsight pid` answers), or Claude Code's own registry says it is live.

use std::path::Path;

use crate::procinfo::{self, AgentName};
use crate::sessions::{
    Provider,
    live::{ProcessTruth, registry},
};
use crate::views::pid::{PidQuery, lookup_in};

/// What shows the session live elsewhere, in words; `None`: nothing does.
pub fn running_elsewhere(
    provider: Provider,
    session_id: &str,
    home: &Path,
    exclude_pid: u32,
) -> Option<String> {
    if provider == Provider::Claude
        && let Some(e) = registry::load(&home.join(".claude/sessions"))
            .by_session
            .get(session_id)
        && e.process_truth(Path::new("/proc")) != ProcessTruth::Exited
    {
        return Some(format!(
            "Claude Code pid {} has it open (its registry file {}/.claude/sessions/{}.json)",
            e.pid,
            home.display(),
            e.pid
        ));
    }
    let agent = match provider {
        Provider::Claude => AgentName::Claude,
        Provider::Codex => AgentName::Codex,
        Provider::Gemini => AgentName::Gemini,
        Provider::Cursor => AgentName::Cursor,
        Provider::Copilot => AgentName::Copilot,
        Provider::Opencode => AgentName::Opencode,
        Provider::Qwen => AgentName::Qwen,
    };
    let procs = procinfo::snapshot();
    for p in &procs {
        if p.pid == exclude_pid || !agent.matches(p) {
            continue;
        }
        let query = PidQuery {
            pid: p.pid,
            dbs: Vec::new(),
            home: Some(home.to_path_buf()),
            sticky: false,
        };
        let Ok(ans) = lookup_in(&procs, &query) else {
            continue;
        };
        if ans.session_id.as_deref() == Some(session_id) {
            let how = ans.evidence.map_or("", |e| e.as_str());
            return Some(format!("{} pid {} ({how}: {})", agent, p.pid, ans.detail));
        }
    }
    None
}
