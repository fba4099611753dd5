//! Correlation over a small synthetic capture with the real store schema:
//! exact attribution of atomic (temp file + rename) writes and the
//! transcript-vs-kernel exit code comparison.

use std::path::PathBuf;

use super::*;
use crate::sessions::{PathAccess, Provider, ToolCategory, ToolEvent, ToolPath, ToolStatus};
use crate::store::{
    read::ContainerRef,
    synthetic::{EventRow, ProcessRow, SyntheticCapture},
};

mod mcp;

const MONO0: i64 = 1_000_000_000_000;
const WALL0: i64 = 1_800_000_000_000_000_000;

/// Capture time of `ms` after the start (mono and wall move together).
fn at(ms: i64) -> i64 {
    MONO0 + ms * 1_000_000
}

fn wall_ms(ms: i64) -> i64 {
    WALL0 / 1_000_000 + ms
}

struct Capture {
    cap: SyntheticCapture,
}

impl Capture {
    fn new(path: &std::path::Path) -> Capture {
        let cap = SyntheticCapture::create(path, "c.db");
        cap.anchor("start", MONO0, WALL0);
        Capture { cap }
    }

    /// The view correlate loads of it.
    fn view(&self) -> CaptureView<'_> {
        CaptureView::load(self.cap.reader()).unwrap()
    }

    #[allow(clippy::too_many_arguments)]
    fn process(
        &self,
        id: i64,
        pid: i64,
        start_ms: i64,
        parent: Option<(i64, i64)>,
        comm: &str,
        argv: &[&str],
        exit_code: Option<i64>,
    ) {
        self.cap.process(&ProcessRow {
            id,
            pid,
            start_mono_ns: at(start_ms),
            parent,
            comm,
            argv,
            cwd: Some("/w"),
            exec_count: 1,
            exit_code,
            ..Default::default()
        });
    }

    /// One event of process `(id, pid)`: `path` with `flags` for opens,
    /// `old_path` → `path` for renames, `argv` for execs.
    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        ms: i64,
        kind: &str,
        (id, pid): (i64, i64),
        path: Option<&str>,
        old_path: Option<&str>,
        flags: Option<&str>,
        argv: Option<&[&str]>,
    ) {
        self.event_as(ms, kind, (id, pid), None, path, old_path, flags, argv);
    }

    /// [`Capture::event`] with the thread's `comm` (default: the process
    /// row's).
    #[allow(clippy::too_many_arguments)]
    fn event_as(
        &mut self,
        ms: i64,
        kind: &str,
        (id, pid): (i64, i64),
        comm: Option<&str>,
        path: Option<&str>,
        old_path: Option<&str>,
        flags: Option<&str>,
        argv: Option<&[&str]>,
    ) {
        self.put(EventRow {
            kind,
            comm,
            path,
            old_path,
            flags,
            argv,
            ..self.row(ms, (id, pid))
        });
    }

    /// An event row of process `(id, pid)` at `ms` that succeeded.
    fn row<'a>(&self, ms: i64, (id, pid): (i64, i64)) -> EventRow<'a> {
        EventRow {
            mono_ns: at(ms),
            wall_ns: WALL0 + ms * 1_000_000,
            pid,
            ppid: 1,
            process_id: Some(id),
            ..Default::default()
        }
    }

    fn put(&mut self, e: EventRow) {
        self.cap.event(&e);
    }

    fn open_write(&mut self, ms: i64, p: (i64, i64), path: &str) {
        self.event(
            ms,
            "openat",
            p,
            Some(path),
            None,
            Some("write,create,trunc"),
            None,
        );
    }

    fn rename(&mut self, ms: i64, p: (i64, i64), from: &str, to: &str) {
        self.event(ms, "renameat2", p, Some(to), Some(from), None, None);
    }

    fn exec(&mut self, ms: i64, p: (i64, i64), argv: &[&str]) {
        self.event(ms, "exec", p, None, None, None, Some(argv));
    }
}

#[allow(clippy::too_many_arguments)]
fn tool(
    name: &str,
    category: ToolCategory,
    command: Option<&str>,
    paths: Vec<ToolPath>,
    status: ToolStatus,
    exit_code: Option<i32>,
    start: i64,
    end: i64,
) -> ToolEvent {
    ToolEvent {
        prompt_index: Some(0),
        subagent: None,
        name: name.into(),
        category,
        call_id: Some(format!("toolu_{name}")),
        command: command.map(str::to_string),
        command_truncated: false,
        cwd: None,
        status,
        exit_code,
        start_ms: Some(wall_ms(start)),
        end_ms: Some(wall_ms(end)),
        paths,
        domains: Vec::new(),
        mcp: None,
    }
}

/// Process row 1's tree, bound from the capture's start on.
fn bound_from_start(view: &CaptureView) -> [BoundTree; 1] {
    [BoundTree {
        root: view.procs.by_id[&1],
        evidence: crate::matching::Evidence::TranscriptWrite,
        evidence_count: 1,
        evidence_path: None,
        from_mono_ns: MONO0 as u64,
        to_mono_ns: None,
    }]
}

/// (by, program, count, processes) of the runtime's groups, and (op,
/// what, by) of all their activity.
#[allow(clippy::type_complexity)]
fn runtime_summary(
    r: &Report,
) -> (
    Vec<(&'static str, String, usize, usize)>,
    Vec<(&'static str, String, &'static str)>,
) {
    let groups = r
        .runtime_activity
        .iter()
        .map(|g| (g.by.as_str(), g.program.clone(), g.count, g.processes))
        .collect();
    let acts: Vec<Activity> = r
        .runtime_activity
        .iter()
        .flat_map(|g| g.activity.clone())
        .collect();
    (groups, summary(&acts))
}

/// (op, what, reason or `by`) of activities.
fn summary(acts: &[Activity]) -> Vec<(&'static str, String, &'static str)> {
    acts.iter()
        .map(|a| {
            let why = a.reason.map(Reason::as_str).or(a.by.map(By::as_str));
            (a.op.as_str(), describe(a), why.unwrap_or(""))
        })
        .collect()
}

/// The temp path of the Write call's test (`/w/hello.txt.tmp.1000.X`).
fn hello_tmp(x: &str) -> String {
    format!("/w/hello.txt.tmp.1000.{x}")
}

/// The capture of [`temp_file_writes_renamed_onto_a_claimed_path_are_the_calls`]:
/// Claude Code (pid 1000), the git it starts outside calls and the call's
/// `make check`, with temp-file writes and renames in and out of the Write
/// call's window.
fn temp_rename_capture(db: &std::path::Path) -> Capture {
    let tmp = hello_tmp;
    let mut cap = Capture::new(db);
    let agent = (1, 1000);
    let git = (2, 1001);
    let make = (3, 1002);
    cap.process(1, 1000, 0, None, "claude", &["claude", "-p", "go"], None);
    cap.process(
        2,
        1001,
        1200,
        Some(agent),
        "git",
        &["git", "status"],
        Some(0),
    );
    cap.process(
        3,
        1002,
        5100,
        Some(agent),
        "bash",
        &["bash", "-c", "make check"],
        Some(2),
    );

    cap.exec(1200, git, &["git", "status"]);
    cap.open_write(1500, agent, &tmp("early"));
    // The Write call's window is [2000, 4100].
    cap.open_write(3010, agent, &tmp("a1"));
    cap.rename(3020, agent, &tmp("a1"), "/w/hello.txt");
    cap.open_write(3030, agent, &tmp("a1"));
    cap.open_write(3040, agent, "/w/notes.txt.tmp.1000.c3");
    cap.rename(3050, agent, "/w/notes.txt.tmp.1000.c3", "/w/notes.txt");
    cap.rename(3060, agent, &tmp("early"), "/w/hello.txt");
    cap.open_write(3070, git, &tmp("g7"));
    cap.rename(3080, agent, &tmp("g7"), "/w/hello.txt");
    cap.exec(5110, make, &["bash", "-c", "make check"]);

    cap
}

/// A Write of `/w/hello.txt` in [3000, 3100] and a failed `make check`
/// whose transcript exit code (3) is not the kernel's (2).
fn write_then_check_session() -> AgentSession {
    let mut session = AgentSession::new(
        Provider::Claude,
        "s1".into(),
        PathBuf::from("/h/.claude/projects/-w/s1.jsonl"),
    );
    session.cwd = Some("/w".into());
    session.start_ms = Some(wall_ms(0));
    session.end_ms = Some(wall_ms(7000));
    session.push_prompt(Some(wall_ms(100)), "write hello, then check".into());
    session.tools = vec![
        tool(
            "Write",
            ToolCategory::Edit,
            None,
            vec![ToolPath::new("/w/hello.txt", PathAccess::Create)],
            ToolStatus::Ok,
            None,
            3000,
            3100,
        ),
        // The transcript says exit 3; the kernel saw the command exit 2.
        tool(
            "Bash",
            ToolCategory::Shell,
            Some("make check"),
            Vec::new(),
            ToolStatus::Failed,
            Some(3),
            5000,
            6000,
        ),
    ];
    session.tool_count = 2;

    session
}

/// Claude Code's Write writes `NAME.tmp.PID.HEX` and renames it onto NAME
/// from its own process: the temp file's write belongs to the call
/// (`via_rename`), the rename is a `path_match`. Not tied: a write to the
/// temp path after the rename, one before the call's window, one by another
/// process, and a temp file renamed onto a path no call names.
#[test]
fn temp_file_writes_renamed_onto_a_claimed_path_are_the_calls() {
    let dir = tempfile::tempdir().unwrap();
    let cap = temp_rename_capture(&dir.path().join("c.db"));
    let session = write_then_check_session();
    let view = cap.view();
    let bound = bound_from_start(&view);
    let r = correlate(&view, &session, SessionSource::Capture, &bound, Vec::new()).unwrap();
    temp_rename_attribution(&r);
    temp_rename_flags(&r);
    temp_rename_text(&r);
    temp_rename_json(&r);
}

/// The temp file's write is the Write call's (`via_rename`), each rename
/// onto its path a `path_match`; the Bash call's exec by argv.
fn temp_rename_attribution(r: &Report) {
    let tmp = hello_tmp;
    let tools = &r.prompts[0].tools;
    let s = |x: &str| x.to_string();
    assert_eq!(
        summary(&tools[0].activity),
        vec![
            ("write", tmp("a1"), "via_rename"),
            (
                "rename",
                format!("{} → /w/hello.txt", tmp("a1")),
                "path_match"
            ),
            (
                "rename",
                format!("{} → /w/hello.txt", tmp("early")),
                "path_match"
            ),
            (
                "rename",
                format!("{} → /w/hello.txt", tmp("g7")),
                "path_match"
            ),
        ]
    );
    assert_eq!(tools[0].exit_code, None);
    assert_eq!(
        summary(&tools[1].activity),
        vec![("exec", s("bash -c 'make check'"), "argv_match")]
    );
    assert_eq!(tools[1].exit_code, Some(3));
    assert_eq!(tools[1].exit_codes, vec![Some(2)]);
}

/// Nothing unexplained: the runtime's own activity is grouped apart; the
/// exit-code mismatch is the one flag.
fn temp_rename_flags(r: &Report) {
    let tmp = hello_tmp;
    let s = |x: &str| x.to_string();
    // Nothing unexplained: Claude Code itself and the git it started
    // outside every call are the runtime's activity, grouped by program.
    assert_eq!(summary(&r.flags.observed_not_claimed), vec![]);
    assert_eq!(
        runtime_summary(r),
        (
            vec![("child", s("git"), 2, 1), ("runtime", s("claude"), 4, 1)],
            vec![
                ("exec", s("git status"), "child"),
                ("write", tmp("g7"), "child"),
                ("write", tmp("early"), "runtime"),
                ("write", tmp("a1"), "runtime"),
                ("write", s("/w/notes.txt.tmp.1000.c3"), "runtime"),
                (
                    "rename",
                    s("/w/notes.txt.tmp.1000.c3 → /w/notes.txt"),
                    "runtime"
                ),
            ]
        )
    );
    assert_eq!(r.flags.claimed_not_observed, vec![]);
    assert_eq!(
        r.flags.mismatches,
        vec![Mismatch {
            tool_index: 1,
            call_id: Some("toolu_Bash".into()),
            name: "Bash".into(),
            kind: MismatchKind::ExitCode,
            detail: "exited with status 2, transcript says exit code 3".into(),
        }]
    );
    assert!(r.flags.late.is_empty());
}

fn temp_rename_text(r: &Report) {
    let tmp = hello_tmp;
    // The text timeline names the reason and the transcript's exit code.
    let text = render::text(r, false);
    assert!(
        text.contains(&format!("write   pid 1000    {}  [via_rename]", tmp("a1"))),
        "{text}"
    );
    assert!(text.contains("  failed exit 3\n"), "{text}");
    assert!(
        text.contains("  observed but not claimed: none\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "agent runtime outside every call (not flagged): 6\n  \
             child git ×2 (1 process): exec git status; write {}\n  \
             runtime claude ×4 (1 process): write {}; write {}; write /w/notes.txt.tmp.1000.c3\n",
            tmp("g7"),
            tmp("early"),
            tmp("a1")
        )),
        "{text}"
    );
}

fn temp_rename_json(r: &Report) {
    let j = serde_json::to_value(r).unwrap();
    assert_eq!(j["flags"]["observed_not_claimed"], serde_json::json!([]));
    let g = &j["runtime_activity"][0];
    assert_eq!(
        (&g["program"], &g["by"], &g["count"], &g["processes"]),
        (
            &serde_json::json!("git"),
            &serde_json::json!("child"),
            &serde_json::json!(2),
            &serde_json::json!(1)
        )
    );
    assert_eq!(g["activity"][0]["by"], "child");
    assert_eq!(
        g["activity"][0]["argv"],
        serde_json::json!(["git", "status"])
    );
}

/// Codex-like start-up probes 150 ms before the first call stay with the
/// runtime (the window's tolerance is the measured skew + 1 ms, not
/// ±1000 ms); a helper started inside the call's window is the call's; the
/// directory an edit tool makes for the file it creates is the call's.
#[test]
fn only_activity_inside_the_measured_window_is_attributed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut cap = Capture::new(&db);
    let agent = (1, 1000);
    let probe = (2, 1001);
    let getopt = (3, 1002);
    let shell = (4, 1003);
    let hook = (5, 1004);
    cap.process(1, 1000, 0, None, "codex", &["codex", "exec", "go"], None);
    cap.process(
        2,
        1001,
        850,
        Some(agent),
        "lsb_release",
        &["sh", "/usr/bin/lsb_release", "-a"],
        Some(0),
    );
    cap.process(
        3,
        1002,
        860,
        Some(probe),
        "getopt",
        &["getopt", "-o", "a"],
        Some(0),
    );
    cap.process(
        4,
        1003,
        1010,
        Some(agent),
        "sh",
        &["sh", "-c", "make check"],
        Some(0),
    );
    cap.process(
        5,
        1004,
        1020,
        Some(agent),
        "hook",
        &["hook", "--post"],
        Some(0),
    );
    cap.exec(850, probe, &["sh", "/usr/bin/lsb_release", "-a"]);
    cap.exec(860, getopt, &["getopt", "-o", "a"]);
    cap.exec(1010, shell, &["sh", "-c", "make check"]);
    cap.exec(1020, hook, &["hook", "--post"]);
    cap.event(2010, "mkdirat", agent, Some("/w/data"), None, None, None);
    cap.open_write(2020, agent, "/w/data/numbers.txt");
    cap.event(2030, "mkdirat", agent, Some("/w/other"), None, None, None);

    let mut session = AgentSession::new(
        Provider::Codex,
        "s2".into(),
        PathBuf::from("/h/.codex/sessions/rollout-s2.jsonl"),
    );
    session.cwd = Some("/w".into());
    session.start_ms = Some(wall_ms(0));
    session.end_ms = Some(wall_ms(3000));
    session.push_prompt(Some(wall_ms(100)), "check, then write data".into());
    session.tools = vec![
        tool(
            "exec_command",
            ToolCategory::Shell,
            Some("make check"),
            Vec::new(),
            ToolStatus::Ok,
            Some(0),
            1000,
            1500,
        ),
        tool(
            "apply_patch",
            ToolCategory::Edit,
            None,
            vec![ToolPath::new("/w/data/numbers.txt", PathAccess::Create)],
            ToolStatus::Ok,
            None,
            2000,
            2100,
        ),
    ];
    session.tool_count = 2;
    let view = cap.view();
    let bound = bound_from_start(&view);
    let r = correlate(&view, &session, SessionSource::Capture, &bound, Vec::new()).unwrap();
    let s = |x: &str| x.to_string();
    let tools = &r.prompts[0].tools;
    assert_eq!(
        summary(&tools[0].activity),
        vec![
            ("exec", s("sh -c 'make check'"), "argv_match"),
            ("exec", s("hook --post"), "time_window"),
        ]
    );
    assert_eq!(
        summary(&tools[1].activity),
        vec![
            ("mkdir", s("/w/data"), "path_match"),
            ("write", s("/w/data/numbers.txt"), "path_match"),
        ]
    );
    assert_eq!(summary(&r.flags.observed_not_claimed), vec![]);
    assert_eq!(
        runtime_summary(&r),
        (
            vec![
                ("child", s("lsb_release"), 2, 2),
                ("runtime", s("codex"), 1, 1)
            ],
            vec![
                ("exec", s("sh /usr/bin/lsb_release -a"), "child"),
                ("exec", s("getopt -o a"), "child"),
                ("mkdir", s("/w/other"), "runtime"),
            ]
        )
    );
    assert_eq!(
        (
            r.clock.skew_ms,
            r.clock.tolerance_ms,
            r.clock.tolerance_basis.as_str()
        ),
        (0, 1, "measured skew + 1 ms")
    );
    assert_eq!(
        (window_tolerance(&[]).0, window_tolerance(&[]).1.as_str()),
        (100, "default (no argv match to measure the skew)")
    );
    assert_eq!(window_tolerance(&[-300, 40]).0, 301);
    assert_eq!(window_tolerance(&[-5000]).0, 1000);
}

/// A tree in container `dev` (its root and child carry the container): its
/// binding, its activity (attributed and not) say so in JSON and text; a
/// host tree bound to nothing, and the host's JSON, say nothing of it.
#[test]
fn container_trees_and_activity_name_their_container() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut cap = Capture::new(&db);
    let agent = (1, 1000);
    let ls = (2, 1001);
    // Not a CLI agentsight knows: its own activity stays unexplained.
    cap.process(1, 1000, 0, None, "agent", &["agent", "-p", "go"], None);
    cap.process(2, 1001, 1200, Some(agent), "ls", &["ls"], Some(0));
    cap.process(3, 3000, 0, None, "sh", &["sh", "host.sh"], None);
    cap.cap
        .put_in_container(&[1, 2], "fedcba9876543210fedcba9876543210", "dev", "img");
    cap.cap.tree(&crate::store::sessions::TreeRow {
        id: 0,
        root_process_id: 3,
        root_pid: 3000,
        root_start_mono_ns: at(0),
        status: "unmatched".into(),
        note: None,
    });
    cap.exec(1200, ls, &["ls"]);
    cap.open_write(3010, agent, "/w/notes.txt");

    let mut session = AgentSession::new(
        Provider::Claude,
        "s1".into(),
        PathBuf::from("/h/.claude/projects/-w/s1.jsonl"),
    );
    session.cwd = Some("/w".into());
    session.start_ms = Some(wall_ms(0));
    session.end_ms = Some(wall_ms(7000));
    session.push_prompt(Some(wall_ms(100)), "list".into());
    session.tools = vec![tool(
        "Bash",
        ToolCategory::Shell,
        Some("ls"),
        Vec::new(),
        ToolStatus::Ok,
        Some(0),
        1000,
        1500,
    )];
    session.tool_count = 1;

    let view = cap.view();
    let bound = bound_from_start(&view);
    let (_, unmatched) = view.stored_trees(1).unwrap();
    let r = correlate(&view, &session, SessionSource::Capture, &bound, unmatched).unwrap();
    let dev = ContainerRef {
        name: Some("dev".into()),
        id: "fedcba987654".into(),
    };
    let acts = &r.prompts[0].tools[0].activity;
    assert_eq!(summary(acts), vec![("exec", "ls".into(), "argv_match")]);
    assert_eq!(acts[0].container.as_ref(), Some(&dev));
    let unclaimed = &r.flags.observed_not_claimed;
    assert_eq!(
        summary(unclaimed),
        vec![("write", "/w/notes.txt".into(), "runtime")]
    );
    assert_eq!(unclaimed[0].container.as_ref(), Some(&dev));
    assert_eq!(r.bindings[0].container.as_ref(), Some(&dev));
    assert_eq!(r.unmatched_trees.len(), 1);
    assert_eq!(r.unmatched_trees[0].container, None);

    let j = serde_json::to_value(&r).unwrap();
    let want = serde_json::json!({"name": "dev", "id": "fedcba987654"});
    assert_eq!(j["bindings"][0]["container"], want);
    assert_eq!(
        j["prompts"][0]["tools"][0]["activity"][0]["container"],
        want
    );
    assert_eq!(j["flags"]["observed_not_claimed"][0]["container"], want);
    assert!(j["unmatched_trees"][0].get("container").is_none());

    let text = render::text(&r, false);
    let lines: Vec<&str> = text.lines().collect();
    for needle in [
        "  tree pid 1000 (agent -p go) bound by transcript_write ×1 [container dev]",
        "  pid 3000 (sh host.sh) unmatched",
        "      08:00:01.200  exec    pid 1001    ls  → exit 0  [argv_match]  [container dev]",
        "    ? 08:00:03.010  write   pid 1000    /w/notes.txt  [container dev]  (runtime)",
    ] {
        assert!(lines.contains(&needle), "{needle:?} not in\n{text}");
    }
    assert_eq!(text.matches("[container").count(), 3, "{text}");
}

#[test]
fn the_report_lists_the_messages_that_continued_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let cap = Capture::new(&db);
    cap.process(1, 1000, 0, None, "claude", &["claude", "-p", "go"], None);
    let mut mine = crate::store::messages::example("m-1", wall_ms(500), "s1");
    mine.container = Some("dev".into());
    let other = crate::store::messages::example("m-2", wall_ms(600), "s2");
    let mut failed = crate::store::messages::example("m-3", wall_ms(700), "s1");
    failed.outcome = Some("timeout".into());
    failed.detail = Some("no acknowledgement in 20 s".into());
    failed.provider_pid = None;
    crate::store::CaptureRw::open(&db)
        .unwrap()
        .put_session_messages(&[mine.clone(), other, failed.clone()])
        .unwrap();
    let mut session = AgentSession::new(
        Provider::Claude,
        "s1".into(),
        PathBuf::from("/h/.claude/projects/-w/s1.jsonl"),
    );
    session.cwd = Some("/w".into());
    let view = cap.view();
    let bound = bound_from_start(&view);
    let r = correlate(&view, &session, SessionSource::Capture, &bound, Vec::new()).unwrap();
    assert_eq!(r.external_messages, vec![mine, failed]);
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["external_messages"][0]["id"], "m-1");
    assert_eq!(j["external_messages"][0]["provider_pid"], 301);
    assert_eq!(j["external_messages"][1]["outcome"], "timeout");
    let text = render::text(&r, false);
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("continued externally"))
        .collect();
    assert_eq!(
        lines,
        vec![
            "continued externally (agentsight session message)",
            "  2027-01-15T08:00:00.500000000Z  claude-stream-json in container dev  by alice (uid 1000) as uid 1000  17 bytes  completed  provider pid 301",
            "  2027-01-15T08:00:00.700000000Z  claude-stream-json  by alice (uid 1000) as uid 1000  17 bytes  timeout (no acknowledgement in 20 s)",
        ]
    );
}

/// What the runtime (the process running the provider's CLI, here under a
/// wrapper shell) does outside every call, itself or through a helper it
/// starts (git; the launcher stage of a call's own process before it runs
/// the call's command), is grouped, not flagged; what the wrapper above it
/// does, itself or through a process it starts, is unexplained.
#[test]
fn only_the_runtime_s_own_activity_outside_calls_is_set_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut cap = Capture::new(&db);
    let transcript = "/h/.codex/sessions/rollout-s3.jsonl";
    let (wrapper, codex, curl, git, launch) =
        ((1, 1000), (2, 1001), (3, 1002), (4, 1003), (5, 1004));
    cap.process(
        1,
        1000,
        0,
        None,
        "sh",
        &["sh", "-c", "codex exec go; curl x"],
        None,
    );
    cap.process(
        2,
        1001,
        10,
        Some(wrapper),
        "codex",
        &["codex", "exec", "go"],
        None,
    );
    cap.process(3, 1002, 400, Some(wrapper), "curl", &["curl", "x"], Some(0));
    cap.process(
        4,
        1003,
        600,
        Some(codex),
        "git",
        &["git", "rev-parse"],
        Some(0),
    );
    cap.process(
        5,
        1004,
        990,
        Some(codex),
        "sh",
        &["sh", "-c", "make check"],
        Some(0),
    );
    cap.exec(10, codex, &["codex", "exec", "go"]);
    cap.open_write(20, codex, transcript);
    cap.exec(400, curl, &["curl", "x"]);
    cap.open_write(410, curl, "/w/x");
    cap.open_write(420, wrapper, "/w/y");
    cap.exec(600, git, &["git", "rev-parse"]);
    cap.event_as(
        995,
        "exec",
        launch,
        Some("exe"),
        None,
        None,
        None,
        Some(&["/proc/self/exe", "--codex-run-as-process-setup"]),
    );
    cap.exec(1010, launch, &["sh", "-c", "make check"]);
    cap.put(EventRow {
        kind: "connect",
        family: Some("inet"),
        addr: Some("127.0.0.1"),
        port: Some(8080),
        ..cap.row(1700, codex)
    });

    let mut session = AgentSession::new(Provider::Codex, "s3".into(), PathBuf::from(transcript));
    session.cwd = Some("/w".into());
    session.start_ms = Some(wall_ms(0));
    session.end_ms = Some(wall_ms(3000));
    session.push_prompt(Some(wall_ms(100)), "check".into());
    session.tools = vec![tool(
        "exec_command",
        ToolCategory::Shell,
        Some("make check"),
        Vec::new(),
        ToolStatus::Ok,
        Some(0),
        1000,
        1500,
    )];
    session.tool_count = 1;
    let view = cap.view();
    let bound = bound_from_start(&view);
    let r = correlate(&view, &session, SessionSource::Capture, &bound, Vec::new()).unwrap();
    let s = |x: &str| x.to_string();
    assert_eq!(
        summary(&r.prompts[0].tools[0].activity),
        vec![("exec", s("sh -c 'make check'"), "argv_match")]
    );
    assert_eq!(
        summary(&r.flags.observed_not_claimed),
        vec![
            ("exec", s("curl x"), "child"),
            ("write", s("/w/x"), "child"),
            ("write", s("/w/y"), "runtime"),
        ]
    );
    assert_eq!(
        runtime_summary(&r),
        (
            vec![
                ("child", s("git"), 1, 1),
                ("child", s("exe"), 1, 1),
                ("runtime", s("codex"), 1, 1),
            ],
            vec![
                ("exec", s("git rev-parse"), "child"),
                (
                    "exec",
                    s("/proc/self/exe --codex-run-as-process-setup"),
                    "child"
                ),
                ("connect", s("127.0.0.1:8080"), "runtime"),
            ]
        )
    );
    assert_eq!(r.agent_bookkeeping.len(), 1);
}
