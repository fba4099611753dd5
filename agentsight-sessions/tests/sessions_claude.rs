//! Claude Code transcripts: split records, three subagent layouts, errors.
mod sessions_common;

use agentsight_sessions::{ErrorKind, PathAccess, Provider, TokenUsage, ToolCategory, ToolStatus};
use sessions_common::{parse, ts};

const SHOP: &str = ".claude/projects/-home-dev-shop/aaaaaaaa-0000-4000-8000-000000000001.jsonl";
const LEGACY: &str = ".claude/projects/-home-dev-legacy/bbbbbbbb-0000-4000-8000-000000000002.jsonl";
const MID: &str = ".claude/projects/-home-dev-mid/cccccccc-0000-4000-8000-000000000003.jsonl";

fn paths(t: &agentsight_sessions::ToolEvent) -> Vec<(&str, PathAccess)> {
    t.paths
        .iter()
        .map(|p| (p.path.as_str(), p.access))
        .collect()
}

#[test]
fn v2_1_session_identity_and_prompts() {
    let s = parse(Provider::Claude, SHOP);
    assert_eq!(s.session_id, "aaaaaaaa-0000-4000-8000-000000000001");
    assert_eq!(
        s.conversation_id.as_deref(),
        Some("aaaaaaaa-0000-4000-8000-000000000001")
    );
    assert_eq!(s.cwd.as_deref(), Some("/home/dev/shop"));
    assert_eq!(s.git_branch.as_deref(), Some("main"));
    assert_eq!(s.agent_version.as_deref(), Some("2.1.40"));
    assert_eq!(s.models, ["claude-opus-4-6", "claude-sonnet-4-5-20250929"]);
    assert_eq!(s.title.as_deref(), Some("Rename helper in utils"));
    assert_eq!(s.start_ms, ts("2026-03-01T08:59:59.000Z"));
    assert_eq!(s.end_ms, ts("2026-03-01T09:10:02.000Z"));
    // Meta caveat, slash command and the interruption marker are not prompts.
    let prompts: Vec<(usize, &str)> = s
        .prompts
        .iter()
        .map(|p| (p.index, p.text.as_str()))
        .collect();
    assert_eq!(
        prompts,
        [
            (0, "Rename the helper in utils.py"),
            (1, "Now fetch the docs page and spawn an agent to review"),
            (2, "thanks")
        ]
    );
    // Stable keys: index + FNV-1a 64 of the text.
    assert_eq!(s.prompts[0].key, "0:a593b3ada118d1bb");
    assert_eq!(s.prompts[2].key, "2:add8f636db2a2770");
    assert_eq!(s.prompts[1].ts_ms, ts("2026-03-01T09:05:00.000Z"));
    assert_eq!(s.stats.unknown_records, 1);
    assert_eq!(s.stats.bad_lines, 0);
}

#[test]
fn v2_1_split_records_merge_and_usage() {
    let s = parse(Provider::Claude, SHOP);
    // 7 main responses + 2 subagent + 1 compaction; the replayed msg_05 in
    // the subagent file and the synthetic error line are not responses.
    assert_eq!(s.response_count, 10);
    assert_eq!(s.stats.replayed_skipped, 1);
    let r1 = &s.responses[0];
    assert_eq!(r1.native_id.as_deref(), Some("msg_01"));
    assert_eq!(r1.request_id.as_deref(), Some("req_01"));
    assert_eq!(r1.text, "Let me look at the file.");
    assert_eq!(r1.phase.as_deref(), Some("tool_use"));
    // Two split lines, counted once, with the final output count.
    assert_eq!(r1.tokens, Some(TokenUsage::new(4, 61, 12000, 900, 0)));
    assert_eq!(
        s.usage_by_model["claude-opus-4-6"],
        TokenUsage::new(38, 597, 80000, 16650, 0)
    );
    assert_eq!(
        s.usage_by_model["claude-sonnet-4-5-20250929"],
        TokenUsage::new(124, 542, 7000, 1000, 0)
    );
    assert_eq!(s.usage, TokenUsage::new(162, 1139, 87000, 17650, 0));
    assert_eq!(s.usage.total, 105_951);
    // Task result's toolUseResult.totalTokens (99999) is not added.
    assert!(s.usage.total < 99_999 + 105_951);
}

#[test]
fn v2_1_tool_pairing_paths_and_status() {
    let s = parse(Provider::Claude, SHOP);
    assert_eq!(s.tool_count, 7);
    let t: Vec<_> = s
        .tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.call_id.as_deref(),
                t.status,
                t.prompt_index,
            )
        })
        .collect();
    assert_eq!(
        t,
        [
            ("Read", Some("toolu_01"), ToolStatus::Ok, Some(0)),
            ("Edit", Some("toolu_02"), ToolStatus::Ok, Some(0)),
            ("Write", Some("toolu_03"), ToolStatus::Ok, Some(0)),
            ("Bash", Some("toolu_04"), ToolStatus::Failed, Some(0)),
            ("WebFetch", Some("toolu_05"), ToolStatus::Ok, Some(1)),
            ("Task", Some("toolu_06"), ToolStatus::Ok, Some(1)),
            ("Grep", Some("toolu_S1"), ToolStatus::Ok, Some(1)),
        ]
    );
    assert_eq!(
        paths(&s.tools[0]),
        [("/home/dev/shop/utils.py", PathAccess::Read)]
    );
    assert_eq!(
        paths(&s.tools[1]),
        [("/home/dev/shop/utils.py", PathAccess::Write)]
    );
    // Write reported type "create" in its result.
    assert_eq!(
        paths(&s.tools[2]),
        [("/home/dev/shop/helpers/new.py", PathAccess::Create)]
    );
    // A shell command's paths are unknown: none are invented.
    assert!(s.tools[3].paths.is_empty());
    assert_eq!(s.tools[3].command.as_deref(), Some("pytest -q"));
    // Only the failed Bash result states a code (`Exit code 1` first line,
    // is_error); nothing else in the transcript says one.
    assert_eq!(
        s.tools.iter().map(|t| t.exit_code).collect::<Vec<_>>(),
        [None, None, None, Some(1), None, None, None]
    );
    assert_eq!(s.tools[3].cwd.as_deref(), Some("/home/dev/shop"));
    assert_eq!(s.tools[3].category, ToolCategory::Shell);
    assert_eq!(s.tools[3].start_ms, ts("2026-03-01T09:00:08.000Z"));
    assert_eq!(s.tools[3].end_ms, ts("2026-03-01T09:00:12.000Z"));
    assert_eq!(s.tools[4].domains, ["docs.python.org"]);
    assert_eq!(s.tools[6].subagent, Some(0));
    assert_eq!(paths(&s.tools[6]), [("/home/dev/shop", PathAccess::Read)]);
}

#[test]
fn v2_1_subagents_dir_layout_linked() {
    let s = parse(Provider::Claude, SHOP);
    assert_eq!(s.subagents.len(), 2);
    let a = &s.subagents[0];
    assert_eq!(a.agent_id.as_deref(), Some("a1b2c3d"));
    assert_eq!(a.kind.as_deref(), Some("code-reviewer"));
    assert_eq!(a.description.as_deref(), Some("Review utils"));
    assert_eq!(a.parent_call_id.as_deref(), Some("toolu_06"));
    assert_eq!(a.usage, TokenUsage::new(24, 42, 7000, 1000, 0));
    assert_eq!((a.responses, a.tools), (2, 1));
    let c = &s.subagents[1];
    assert_eq!(c.agent_id.as_deref(), Some("acompact-7f3e21"));
    assert_eq!(c.kind.as_deref(), Some("compact"));
    assert_eq!(c.usage, TokenUsage::new(100, 500, 0, 0, 0));
    // Subagent events carry the prompt index of the spawning call / time.
    assert!(
        s.responses
            .iter()
            .filter(|r| r.subagent.is_some())
            .all(|r| r.prompt_index == Some(1))
    );
}

#[test]
fn v2_1_errors_are_events() {
    let s = parse(Provider::Claude, SHOP);
    let e: Vec<_> = s
        .errors
        .iter()
        .map(|e| (e.kind.as_str(), e.message.as_str(), e.prompt_index))
        .collect();
    assert_eq!(
        e,
        [
            ("rate_limit", "API Error: Rate limit reached", Some(0)),
            ("api_error", "Overloaded", Some(0)),
            ("interrupted", "[Request interrupted by user]", Some(1)),
        ]
    );
    assert!(!s.models.iter().any(|m| m == "<synthetic>"));
}

#[test]
fn v1_inline_sidechains() {
    let s = parse(Provider::Claude, LEGACY);
    assert_eq!(s.session_id, "bbbbbbbb-0000-4000-8000-000000000002");
    assert_eq!(s.title.as_deref(), Some("Fix flaky test"));
    assert_eq!(s.cwd.as_deref(), Some("/home/dev/legacy"));
    assert_eq!(s.git_branch, None, "empty gitBranch means no repo");
    assert_eq!(
        s.prompts.len(),
        1,
        "sidechain user lines are not human prompts"
    );
    assert_eq!(s.subagents.len(), 1);
    assert_eq!(
        s.subagents[0].agent_id, None,
        "1.x sidechains carry no agentId; none invented"
    );
    assert_eq!(s.subagents[0].usage, TokenUsage::new(35, 35, 2500, 500, 0));
    assert_eq!(s.usage, TokenUsage::new(54, 385, 14500, 2500, 0));
    let t: Vec<_> = s
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.subagent, t.status))
        .collect();
    assert_eq!(
        t,
        [
            ("Task", None, ToolStatus::Ok),
            ("Grep", Some(0), ToolStatus::Ok),
            ("MultiEdit", None, ToolStatus::Ok)
        ]
    );
    assert_eq!(
        paths(&s.tools[2]),
        [("/home/dev/legacy/tests/test_api.py", PathAccess::Write)]
    );
    assert_eq!(s.errors.len(), 1);
    assert_eq!(s.errors[0].kind, ErrorKind::RateLimit);
    assert_eq!(
        s.errors[0].message,
        "Claude AI usage limit reached|1755700000"
    );
}

#[test]
fn v2_0_project_level_agent_file() {
    let s = parse(Provider::Claude, MID);
    assert_eq!(
        s.subagents.len(),
        1,
        "agent-0000dead.jsonl belongs to another session"
    );
    let a = &s.subagents[0];
    assert_eq!(a.agent_id.as_deref(), Some("9f8e7d6c"));
    assert_eq!(
        a.parent_call_id.as_deref(),
        Some("toolu_M1"),
        "linked via toolUseResult.agentId"
    );
    assert_eq!(s.usage, TokenUsage::new(20, 110, 2900, 100, 0));
    assert_eq!(s.tools[1].name, "Edit");
    assert_eq!(s.tools[1].subagent, Some(0));
    assert_eq!(s.tools[1].prompt_index, Some(0));
    assert_eq!(
        paths(&s.tools[1]),
        [("/home/dev/mid/app.py", PathAccess::Write)]
    );
}

#[test]
fn serde_round_trip() {
    let s = parse(Provider::Claude, SHOP);
    let j = serde_json::to_string(&s).expect("serialize");
    let back: agentsight_sessions::AgentSession = serde_json::from_str(&j).expect("deserialize");
    assert_eq!(back, s);
}

/// One batch over every session of a crowded 2.0.x project lists the
/// project once (per transcript, parsing them all was quadratic) and still
/// gives each session exactly its own `agent-*.jsonl`, as a lone parse does.
#[test]
fn a_batch_lists_each_project_once() {
    use agentsight_sessions::{Bounds, ParseBatch, parse_file, parse_file_in};
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-home-dev-crowd");
    std::fs::create_dir_all(&project).unwrap();
    let line = |sid: &str, agent: Option<&str>, out: u64| {
        let side = agent.map_or(String::new(), |a| format!(r#","agentId":"{a}""#));
        format!(
            r#"{{"type":"assistant","uuid":"u-{sid}-{out}","isSidechain":{},"cwd":"/crowd","sessionId":"{sid}"{side},"timestamp":"2025-11-05T14:00:02.000Z","requestId":"r-{sid}-{out}","message":{{"id":"m-{sid}-{out}","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"ok"}}],"usage":{{"input_tokens":1,"output_tokens":{out}}}}}}}"#,
            agent.is_some()
        ) + "\n"
    };
    let n = 30u64;
    let mut mains = Vec::new();
    for i in 0..n {
        let sid = format!("eeeeeeee-0000-4000-8000-{i:012}");
        let main = project.join(format!("{sid}.jsonl"));
        std::fs::write(&main, line(&sid, None, 1)).unwrap();
        // Its subagent: 100 + i output tokens, so a mix-up shows.
        let agent = format!("{i:08x}");
        std::fs::write(
            project.join(format!("agent-{agent}.jsonl")),
            line(&sid, Some(&agent), 100 + i),
        )
        .unwrap();
        mains.push((main, agent));
    }
    let mid = sessions_common::fixtures().join(MID);
    let mut batch = ParseBatch::default();
    for (i, (main, agent)) in mains.iter().enumerate() {
        let s = parse_file_in(Provider::Claude, main, &Bounds::default(), &mut batch).unwrap();
        assert_eq!(s.subagents.len(), 1, "{}", main.display());
        assert_eq!(s.subagents[0].agent_id.as_deref(), Some(agent.as_str()));
        assert_eq!(s.usage.output, 1 + 100 + i as u64);
        assert_eq!(s, parse_file(Provider::Claude, main).unwrap());
    }
    let s = parse_file_in(Provider::Claude, &mid, &Bounds::default(), &mut batch).unwrap();
    assert_eq!(s, parse_file(Provider::Claude, &mid).unwrap());
    assert_eq!(s.subagents.len(), 1);
    assert_eq!(batch.dir_listings(), 2, "-home-dev-crowd and -home-dev-mid");
}
