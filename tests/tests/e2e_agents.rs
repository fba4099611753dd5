//! Real Claude Code, Codex, Gemini CLI, Copilot CLI, opencode and Qwen Code
//! runs driven by the scripted model server (issues 6 and 29): each test runs one CLI through one scenario offline, then
//! checks that `agentsight sessions` and `agentsight session show --json`
//! report exactly what the CLI's genuine transcript holds — session id, cwd,
//! model, every tool call, prompt count and token totals equal to what the
//! server reported. The checks live in `agentsight_tests::e2e_check`.

use agentsight_tests::{
    e2e::{Agent, Run},
    e2e_check::*,
};

fn check(agent: Agent, scenario: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, scenario);
    let out = run.run();
    verify(&run, out);
}

/// Runs one CLI through one scenario under `agentsight record` (as the test
/// user, in the run's network namespace): everything [`verify`] checks holds
/// unchanged, and `correlate --json` on the capture explains the run.
fn check_recorded(agent: Agent, scenario: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, scenario);
    let (out, db) = run.run_recorded();
    let id = verify(&run, out);
    assert_no_loss(&db);
    let c = run.correlate(&id, &db);
    let dump = summarize(&c);
    verify_correlation(&run, &id, &c, &dump);
    if agentsight_tests::e2e_mcp::is_mcp_scenario(&run) {
        let ctx = format!("{} {}\n{dump}", agent.name(), scenario);
        agentsight_tests::e2e_mcp::verify_mcp(&run, &c, &db, &ctx);
    }
    assert_report_clean(&run, &db, &c);
    audit_writes_pass(&run, &db);
}

/// The risky scenario (issue 29) under record: the agent shows the
/// synthetic private key planted in its user's home (`cat ~/.ssh/id_rsa`);
/// everything [`check_recorded`] checks holds, except that the default
/// audit fails, flagging that read (and Claude Code's own opens of the
/// file: see [`audit_flags_the_risky_read`]) and nothing else. Qwen Code
/// plays `risky_qwen` (`&& sleep 1`: 0.24.4's one-shot shell loses output
/// still in the pipe at exit, as for `edit_qwen`).
fn check_risky(agent: Agent, scenario: &str) {
    agentsight_tests::require_root();
    let run = Run::prepare(agent, scenario);
    let (out, db) = run.run_recorded();
    let id = verify(&run, out);
    assert_no_loss(&db);
    let c = run.correlate(&id, &db);
    let dump = summarize(&c);
    verify_correlation(&run, &id, &c, &dump);
    assert_report_clean(&run, &db, &c);
    audit_flags_the_risky_read(&run, &db, &id);
}

macro_rules! e2e_risky {
    ($($name:ident: $agent:ident, $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check_risky(Agent::$agent, $scenario);
            }
        )*
    };
}

e2e_risky! {
    claude_risky_under_record: Claude, "risky";
    codex_risky_under_record: Codex, "risky";
    gemini_risky_under_record: Gemini, "risky";
    copilot_risky_under_record: Copilot, "risky";
    opencode_risky_under_record: Opencode, "risky";
    qwen_risky_under_record: Qwen, "risky_qwen";
}

#[test]
fn rfc3339_ms_parses_transcript_and_event_times() {
    assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(rfc3339_ms("2000-03-01T00:00:01.5Z"), Some(951_868_801_500));
    assert_eq!(
        rfc3339_ms("2026-12-01T03:32:54.123456789Z"),
        Some(1_796_095_974_123)
    );
}

macro_rules! e2e {
    ($($name:ident: $agent:ident, $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check(Agent::$agent, $scenario);
            }
        )*
    };
}

macro_rules! e2e_recorded {
    ($($name:ident: $agent:ident, $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check_recorded(Agent::$agent, $scenario);
            }
        )*
    };
}

e2e! {
    claude_inspect: Claude, "inspect";
    claude_edit: Claude, "edit";
    claude_failing: Claude, "failing";
    claude_network: Claude, "network";
    claude_parallel: Claude, "parallel";
    codex_inspect: Codex, "inspect";
    codex_edit: Codex, "edit";
    codex_failing: Codex, "failing";
    codex_network: Codex, "network";
    codex_parallel: Codex, "parallel";
    gemini_inspect: Gemini, "inspect";
    gemini_edit: Gemini, "edit";
    gemini_failing: Gemini, "failing";
    gemini_network: Gemini, "network";
    gemini_parallel: Gemini, "parallel";
    claude_mcp: Claude, "mcp";
    claude_mcp_refused: Claude, "mcp_refused";
    claude_mcp_liar: Claude, "mcp_liar";
    claude_mcp_remote: Claude, "mcp_remote";
    codex_mcp: Codex, "mcp";
    codex_mcp_refused: Codex, "mcp_refused";
    codex_mcp_liar: Codex, "mcp_liar";
    gemini_mcp: Gemini, "mcp";
    gemini_mcp_refused: Gemini, "mcp_refused";
    gemini_mcp_liar: Gemini, "mcp_liar";
    claude_mcp_edit: Claude, "mcp_edit";
    codex_mcp_edit: Codex, "mcp_edit";
    gemini_mcp_edit: Gemini, "mcp_edit";
    copilot_inspect: Copilot, "inspect";
    copilot_edit: Copilot, "edit";
    copilot_failing: Copilot, "failing";
    copilot_network: Copilot, "network";
    copilot_parallel: Copilot, "parallel";
    opencode_inspect: Opencode, "inspect";
    opencode_edit: Opencode, "edit";
    opencode_failing: Opencode, "failing";
    opencode_network: Opencode, "network";
    opencode_parallel: Opencode, "parallel";
    qwen_inspect: Qwen, "inspect";
    qwen_edit: Qwen, "edit_qwen";
    qwen_failing: Qwen, "failing";
    qwen_network: Qwen, "network";
    qwen_parallel: Qwen, "parallel_qwen";
    copilot_mcp: Copilot, "mcp";
    copilot_mcp_refused: Copilot, "mcp_refused";
    copilot_mcp_liar: Copilot, "mcp_liar";
    copilot_mcp_edit: Copilot, "mcp_edit";
    opencode_mcp: Opencode, "mcp";
    opencode_mcp_refused: Opencode, "mcp_refused";
    opencode_mcp_liar: Opencode, "mcp_liar";
    opencode_mcp_edit: Opencode, "mcp_edit";
    qwen_mcp: Qwen, "mcp_qwen";
    qwen_mcp_refused: Qwen, "mcp_refused";
    qwen_mcp_liar: Qwen, "mcp_liar_qwen";
    qwen_mcp_edit: Qwen, "mcp_edit_qwen";
    copilot_mcp_remote: Copilot, "mcp_remote";
    opencode_mcp_remote: Opencode, "mcp_remote";
    qwen_mcp_remote: Qwen, "mcp_remote_qwen";
}

e2e_recorded! {
    codex_inspect_under_record: Codex, "inspect";
    codex_edit_under_record: Codex, "edit";
    codex_failing_under_record: Codex, "failing";
    codex_network_under_record: Codex, "network";
    codex_parallel_under_record: Codex, "parallel";
    claude_inspect_under_record: Claude, "inspect";
    claude_edit_under_record: Claude, "edit";
    claude_failing_under_record: Claude, "failing";
    claude_network_under_record: Claude, "network";
    claude_parallel_under_record: Claude, "parallel";
    claude_late_under_record: Claude, "late";
    gemini_inspect_under_record: Gemini, "inspect";
    gemini_edit_under_record: Gemini, "edit";
    gemini_failing_under_record: Gemini, "failing";
    gemini_network_under_record: Gemini, "network";
    gemini_parallel_under_record: Gemini, "parallel";
    claude_mcp_under_record: Claude, "mcp";
    claude_mcp_refused_under_record: Claude, "mcp_refused";
    claude_mcp_liar_under_record: Claude, "mcp_liar";
    claude_mcp_remote_under_record: Claude, "mcp_remote";
    codex_mcp_under_record: Codex, "mcp";
    codex_mcp_refused_under_record: Codex, "mcp_refused";
    codex_mcp_liar_under_record: Codex, "mcp_liar";
    gemini_mcp_under_record: Gemini, "mcp";
    gemini_mcp_refused_under_record: Gemini, "mcp_refused";
    gemini_mcp_liar_under_record: Gemini, "mcp_liar";
    claude_mcp_edit_under_record: Claude, "mcp_edit";
    codex_mcp_edit_under_record: Codex, "mcp_edit";
    gemini_mcp_edit_under_record: Gemini, "mcp_edit";
    copilot_edit_under_record: Copilot, "edit";
    copilot_network_under_record: Copilot, "network";
    copilot_failing_under_record: Copilot, "failing";
    opencode_edit_under_record: Opencode, "edit";
    opencode_network_under_record: Opencode, "network";
    opencode_failing_under_record: Opencode, "failing";
    qwen_edit_under_record: Qwen, "edit_qwen";
    qwen_network_under_record: Qwen, "network";
    qwen_failing_under_record: Qwen, "failing";
    copilot_mcp_under_record: Copilot, "mcp";
    copilot_mcp_refused_under_record: Copilot, "mcp_refused";
    copilot_mcp_liar_under_record: Copilot, "mcp_liar";
    copilot_mcp_edit_under_record: Copilot, "mcp_edit";
    opencode_mcp_under_record: Opencode, "mcp";
    opencode_mcp_refused_under_record: Opencode, "mcp_refused";
    opencode_mcp_liar_under_record: Opencode, "mcp_liar";
    opencode_mcp_edit_under_record: Opencode, "mcp_edit";
    qwen_mcp_under_record: Qwen, "mcp_qwen";
    qwen_mcp_refused_under_record: Qwen, "mcp_refused";
    qwen_mcp_liar_under_record: Qwen, "mcp_liar_qwen";
    qwen_mcp_edit_under_record: Qwen, "mcp_edit_qwen";
    copilot_mcp_remote_under_record: Copilot, "mcp_remote";
    opencode_mcp_remote_under_record: Opencode, "mcp_remote";
    qwen_mcp_remote_under_record: Qwen, "mcp_remote_qwen";
}
