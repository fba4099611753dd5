//! Codex rollouts: new and legacy layouts, cumulative usage, subagent replay.
mod sessions_common;

use agentsight_sessions::{PathAccess, PlanStep, Provider, TokenUsage, ToolStatus};
use sessions_common::{parse, ts};

const PARENT: &str = ".codex/sessions/2026/03/02/rollout-2026-03-02T11-00-00-019c0000-0000-7000-8000-00000000abcd.jsonl";
const CHILD: &str = ".codex/sessions/2026/03/02/rollout-2026-03-02T11-00-18-019c0000-0000-7000-8000-00000000beef.jsonl";
const LEGACY: &str =
    ".codex/sessions/rollout-2025-08-01T11-00-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl";
/// Codex 0.169: commands end in a `CommandExecution` item (with
/// `exit_code`) and a unified-exec output header; apply_patch output has the
/// freeform `Exit code: N` header.
const V169: &str = ".codex/sessions/2026/04/02/rollout-2026-04-02T09-00-00-019c0000-0000-7000-8000-000000000169.jsonl";

#[test]
fn new_layout_identity_prompts_models() {
    let s = parse(Provider::Codex, PARENT);
    assert_eq!(s.session_id, "019c0000-0000-7000-8000-00000000abcd");
    assert_eq!(
        s.conversation_id.as_deref(),
        Some("019c0000-0000-7000-8000-00000000abcd")
    );
    assert_eq!(s.parent_session_id, None);
    assert_eq!(s.cwd.as_deref(), Some("/home/dev/api"));
    assert_eq!(s.agent_version.as_deref(), Some("0.110.0"));
    assert_eq!(s.git_branch.as_deref(), Some("main"));
    assert_eq!(s.models, ["gpt-5.2-codex", "gpt-5.2"]);
    assert_eq!(s.title.as_deref(), Some("Fix failing API test"));
    assert_eq!(s.start_ms, ts("2026-03-02T10:00:00.100Z"));
    assert_eq!(s.end_ms, ts("2026-03-02T10:02:07.000Z"));
    // Injected <environment_context> and the duplicate response_item are not prompts.
    let p: Vec<_> = s
        .prompts
        .iter()
        .map(|p| (p.index, p.text.as_str()))
        .collect();
    assert_eq!(p, [(0, "run the tests"), (1, "also update the changelog")]);
    assert_eq!(s.stats.unknown_records, 1);
    assert_eq!(
        s.plan,
        [
            PlanStep {
                step: "Fix failing test".into(),
                status: Some("completed".into())
            },
            PlanStep {
                step: "Run full suite".into(),
                status: Some("in_progress".into())
            },
        ]
    );
}

#[test]
fn cumulative_totals_become_deltas() {
    let s = parse(Provider::Codex, PARENT);
    assert_eq!(s.stats.repeated_usage_skipped, 1);
    let toks: Vec<_> = s.responses.iter().map(|r| r.tokens).collect();
    assert_eq!(
        toks,
        [
            Some(TokenUsage::new(3000, 300, 6000, 0, 120)),
            Some(TokenUsage::new(1500, 500, 9000, 0, 180)),
            Some(TokenUsage::new(1500, 200, 9000, 0, 50)),
            Some(TokenUsage::new(2000, 100, 9000, 0, 10)),
        ]
    );
    // The sum equals the final cumulative total (41000 in incl. 33000 cached, 1100 out).
    assert_eq!(s.usage, TokenUsage::new(8000, 1100, 33000, 0, 360));
    assert_eq!(s.usage.total, 42_100);
    assert_eq!(s.responses[1].phase.as_deref(), Some("commentary"));
    assert_eq!(s.responses[1].text, "One test fails; fixing.");
    assert_eq!(s.responses[3].phase.as_deref(), Some("final_answer"));
    assert!(
        s.responses
            .iter()
            .all(|r| r.model.as_deref() == Some("gpt-5.2-codex"))
    );
}

#[test]
fn tools_paired_by_call_id() {
    let s = parse(Provider::Codex, PARENT);
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
            (
                "shell_command",
                Some("call_T1"),
                ToolStatus::Failed,
                Some(0)
            ),
            ("apply_patch", Some("call_P1"), ToolStatus::Ok, Some(0)),
            ("update_plan", Some("call_U1"), ToolStatus::Ok, Some(0)),
            ("spawn_agent", Some("call_S1"), ToolStatus::Ok, Some(0)),
        ]
    );
    // `Exit code: 1` (freeform), `metadata.exit_code` 0 (structured); the
    // plan and spawn outputs state no code.
    assert_eq!(
        s.tools.iter().map(|t| t.exit_code).collect::<Vec<_>>(),
        [Some(1), Some(0), None, None]
    );
    let sh = &s.tools[0];
    assert_eq!(sh.command.as_deref(), Some("pytest -q"));
    assert_eq!(sh.cwd.as_deref(), Some("/home/dev/api"));
    assert_eq!(sh.start_ms, ts("2026-03-02T10:00:07.500Z"));
    assert_eq!(sh.end_ms, ts("2026-03-02T10:00:12.900Z"));
    let p: Vec<_> = s.tools[1]
        .paths
        .iter()
        .map(|p| (p.path.as_str(), p.access, p.previous_path.as_deref()))
        .collect();
    assert_eq!(
        p,
        [
            ("src/api.py", PathAccess::Write, None),
            ("tests/test_new.py", PathAccess::Create, None),
            ("old.py", PathAccess::RenameFrom, None),
            ("new.py", PathAccess::Rename, Some("old.py")),
            ("legacy.py", PathAccess::Delete, None),
        ]
    );
    let e: Vec<_> = s
        .errors
        .iter()
        .map(|e| (e.kind.as_str(), e.message.as_str(), e.prompt_index))
        .collect();
    assert_eq!(
        e,
        [
            (
                "usage_limit_exceeded",
                "Rate limit reached for gpt-5.2",
                Some(1)
            ),
            ("turn_aborted", "interrupted", Some(1)),
        ]
    );
}

#[test]
fn subagent_drops_replayed_parent_history() {
    let s = parse(Provider::Codex, CHILD);
    assert_eq!(s.session_id, "019c0000-0000-7000-8000-00000000beef");
    assert_eq!(
        s.parent_session_id.as_deref(),
        Some("019c0000-0000-7000-8000-00000000abcd")
    );
    // Foreign session_meta + 6 replayed lines.
    assert_eq!(s.stats.replayed_skipped, 7);
    let p: Vec<_> = s.prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(p, ["Review the patch"]);
    assert_eq!(s.tools.len(), 1);
    assert_eq!(s.tools[0].name, "exec_command");
    assert_eq!(s.tools[0].command.as_deref(), Some("git diff"));
    assert_eq!(s.tools[0].status, ToolStatus::Ok);
    assert_eq!(s.tools[0].exit_code, Some(0), "Process exited with code 0");
    // Deltas from the replayed baseline (30000/24000/1000/350), not from 0.
    assert_eq!(
        s.responses.iter().map(|r| r.tokens).collect::<Vec<_>>(),
        [
            Some(TokenUsage::new(1000, 150, 3000, 0, 50)),
            Some(TokenUsage::new(1000, 50, 4000, 0, 20)),
        ]
    );
    assert_eq!(s.usage, TokenUsage::new(2000, 200, 7000, 0, 70));
    // Parent + child = every response exactly once.
    let parent = parse(Provider::Codex, PARENT);
    assert_eq!(parent.usage.total + s.usage.total, 42_100 + 9_200);
}

#[test]
fn legacy_layout() {
    let s = parse(Provider::Codex, LEGACY);
    assert_eq!(s.session_id, "5973b6c0-94b8-487b-a530-2aeb6098ae0e");
    assert_eq!(s.start_ms, ts("2025-08-01T09:00:00.000Z"));
    assert_eq!(s.cwd, None, "legacy meta has no cwd field");
    assert_eq!(
        s.prompts
            .iter()
            .map(|p| p.text.as_str())
            .collect::<Vec<_>>(),
        ["list the files"]
    );
    assert_eq!(s.tools.len(), 1);
    assert_eq!(s.tools[0].command.as_deref(), Some("bash -lc 'ls -la'"));
    assert_eq!(s.tools[0].cwd.as_deref(), Some("/home/dev/old"));
    assert_eq!(s.tools[0].status, ToolStatus::Ok);
    assert_eq!(s.tools[0].exit_code, Some(0), "metadata.exit_code");
    assert_eq!(s.tools[0].end_ms, None, "legacy lines carry no timestamps");
    assert_eq!(s.responses.len(), 1);
    assert_eq!(s.responses[0].text, "The directory is empty.");
    assert_eq!(s.responses[0].tokens, None);
    assert!(s.usage.is_zero());
}

#[test]
fn v0_169_exit_codes_from_command_items_and_headers() {
    let s = parse(Provider::Codex, V169);
    assert_eq!(s.session_id, "019c0000-0000-7000-8000-000000000169");
    assert_eq!(s.agent_version.as_deref(), Some("0.169.0"));
    assert_eq!(s.prompt_count, 1);
    assert_eq!(s.stats.bad_lines, 0);
    let calls: Vec<_> = s
        .tools
        .iter()
        .map(|t| (t.call_id.as_deref(), t.name.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            (Some("call_K1"), "exec_command"),
            (Some("call_P2"), "apply_patch"),
            (Some("call_K2"), "exec_command"),
        ]
    );
    assert_eq!(s.tools[0].command.as_deref(), Some("make check"));
    // `make check` failed with 2 (the item's `exit_code` and the output's
    // `Process exited with code 2`), the patch says `Exit code: 0`.
    let outcomes: Vec<_> = s.tools.iter().map(|t| (t.status, t.exit_code)).collect();
    assert_eq!(
        outcomes,
        [
            (ToolStatus::Failed, Some(2)),
            (ToolStatus::Ok, Some(0)),
            (ToolStatus::Ok, Some(0)),
        ]
    );
    // The CommandExecution item ends the call (its output follows it).
    assert_eq!(s.tools[0].end_ms, ts("2026-04-02T09:00:02.230Z"));
    assert_eq!(s.tools[1].end_ms, ts("2026-04-02T09:00:03.025Z"));
    assert_eq!(s.tools[2].end_ms, ts("2026-04-02T09:00:05.100Z"));
    assert_eq!(s.usage, TokenUsage::new(2200, 182, 2400, 0, 33));
}
