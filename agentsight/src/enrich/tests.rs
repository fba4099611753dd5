//! Binding over a small synthetic capture with the real store schema:
//! evidence from a container's processes is resolved only through that
//! container's session source, never from the host file at the same path.

use std::{path::Path, sync::Mutex};

use super::*;
use crate::{
    sessions::Provider,
    store::{
        Capture,
        mcp::McpServerRow,
        meta,
        synthetic::{EventRow, ProcessRow, SyntheticCapture, transcript_paths},
    },
};

const MONO0: i64 = 1_000_000_000_000;
const WALL0: i64 = 1_800_000_000_000_000_000;
const ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const CONTAINER: &str = "0123abcd";

fn at(ms: i64) -> i64 {
    MONO0 + ms * 1_000_000
}

/// A capture with one process (row 1, pid 100), in container
/// [`CONTAINER`] (`dev`) or on the host, that wrote `transcript`.
fn capture(dir: &Path, in_container: bool, transcript: &str) -> PathBuf {
    let path = dir.join("cap.db");
    let mut cap = SyntheticCapture::create(&path, "cap.db");
    cap.anchor("start", MONO0, WALL0);
    cap.process(&ProcessRow {
        id: 1,
        pid: 100,
        start_mono_ns: at(0),
        comm: "sh",
        argv: &["sh"],
        cwd: Some("/w"),
        exec_count: 1,
        exit_code: Some(0),
        container: in_container.then_some((CONTAINER, "dev")),
        ..Default::default()
    });
    cap.event(&EventRow {
        mono_ns: at(5),
        wall_ns: WALL0 + 5_000_000,
        kind: "openat",
        pid: 100,
        ppid: 1,
        process_id: Some(1),
        comm: Some("sh"),
        path: Some(transcript),
        flags: Some("write,create,trunc"),
        ..Default::default()
    });
    drop(cap);
    path
}

/// A host file at the transcript's path: the fixture session (3 prompts).
fn host_transcript(dir: &Path) -> String {
    let proj = dir.join("home/.claude/projects/-w");
    std::fs::create_dir_all(&proj).unwrap();
    let to = proj.join(format!("{ID}.jsonl"));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../fixtures/sessions/home/.claude/projects/-home-dev-shop/{ID}.jsonl"
    ));
    std::fs::copy(fixture, &to).unwrap();
    to.display().to_string()
}

/// The container's side: one session, as its bridge would return it; every
/// lookup is logged as (container id, session id).
struct InContainer {
    asked: Mutex<Vec<(String, String)>>,
}

impl ContainerSessions for InContainer {
    fn serves(&self, container_id: &str) -> bool {
        container_id == CONTAINER
    }

    fn get(&self, container_id: &str, session_id: &str) -> Result<AgentSession, String> {
        self.asked
            .lock()
            .unwrap()
            .push((container_id.into(), session_id.into()));
        let mut s = AgentSession::new(
            Provider::Claude,
            session_id.into(),
            "/home/dev/.claude/projects/-w/x.jsonl".into(),
        );
        s.cwd = Some("/in-container".into());
        s.prompt_count = 7;
        Ok(s)
    }
}

fn no_after(_: &CaptureRw) -> Result<(), StoreError> {
    Ok(())
}

/// (session_id, provider, cwd, source_path) of every stored session.
fn stored_sessions(db: &Path) -> Vec<(String, String, Option<String>, String)> {
    Capture::open(db)
        .unwrap()
        .stored_sessions("")
        .unwrap()
        .into_iter()
        .map(|s| {
            let s = s.session;
            (
                s.session_id,
                s.provider.as_str().to_string(),
                s.cwd,
                s.source_path.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// Meta `container_sessions`.
fn container_sessions_meta(db: &Path) -> Option<String> {
    Capture::open(db)
        .unwrap()
        .meta(CONTAINER_SESSIONS_META)
        .unwrap()
}

/// "status: note" of the first stored tree.
fn first_tree(db: &Path) -> String {
    let t = Capture::open(db).unwrap().trees().unwrap().remove(0);
    format!("{}: {}", t.status, t.note.unwrap())
}

/// "evidence path root_pid status" of the first binding and its tree.
fn first_binding(db: &Path) -> String {
    let cap = Capture::open(db).unwrap();
    let b = cap.bindings().unwrap().remove(0);
    let t = cap
        .trees()
        .unwrap()
        .into_iter()
        .find(|t| t.id == b.tree_id)
        .unwrap();
    format!(
        "{} {} {} {}",
        b.evidence,
        b.evidence_path.unwrap(),
        t.root_pid,
        t.status
    )
}

fn bindings(db: &Path) -> usize {
    Capture::open(db).unwrap().bindings().unwrap().len()
}

#[test]
fn a_container_transcript_is_read_through_its_container_not_the_host_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = host_transcript(dir.path());
    let db = capture(dir.path(), true, &path);
    let src = Arc::new(InContainer {
        asked: Mutex::new(Vec::new()),
    });
    let opts = BindOptions {
        containers: Some(ContainerSource(src.clone())),
        ..Default::default()
    };
    let summary = bind_and_store(&db, &opts, &no_after).unwrap();
    assert_eq!(
        *src.asked.lock().unwrap(),
        vec![(CONTAINER.to_string(), ID.to_string())]
    );
    assert_eq!((summary.trees, summary.bound), (1, 1));
    assert_eq!(
        stored_sessions(&db),
        vec![(
            ID.to_string(),
            "claude".to_string(),
            Some("/in-container".to_string()),
            "/home/dev/.claude/projects/-w/x.jsonl".to_string()
        )]
    );
    // No raw copy: the host file at that path is not the container's.
    assert_eq!(transcript_paths(&db).len(), 0);
    assert_eq!(
        summary.notes,
        vec![format!(
            "session {ID} from container dev: raw transcript not copied (only structured results cross the bridge)"
        )]
    );
    assert_eq!(
        container_sessions_meta(&db).unwrap(),
        format!(
            r#"[{{"container_id":"{CONTAINER}","container_name":"dev","provider":"claude","session_id":"{ID}"}}]"#
        )
    );
    assert_eq!(
        first_binding(&db),
        format!("transcript_write {path} 100 bound")
    );
}

#[test]
fn a_container_without_a_source_stays_unbound_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let path = host_transcript(dir.path());
    let db = capture(dir.path(), true, &path);
    let summary = bind_and_store(&db, &BindOptions::default(), &no_after).unwrap();
    let why = format!(
        "session {ID} was written in container dev: not bound; pass --docker-container dev to read it there"
    );
    assert_eq!(summary.notes, vec![why.clone()]);
    assert_eq!((summary.trees, summary.bound), (1, 0));
    assert_eq!(stored_sessions(&db), vec![]);
    assert_eq!(bindings(&db), 0);
    assert_eq!(transcript_paths(&db).len(), 0);
    assert_eq!(first_tree(&db), format!("unmatched: {why}"));
    assert_eq!(container_sessions_meta(&db), None);
}

#[test]
fn a_host_transcript_is_still_read_and_copied_from_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let path = host_transcript(dir.path());
    let db = capture(dir.path(), false, &path);
    let src = Arc::new(InContainer {
        asked: Mutex::new(Vec::new()),
    });
    let opts = BindOptions {
        containers: Some(ContainerSource(src.clone())),
        ..Default::default()
    };
    let summary = bind_and_store(&db, &opts, &no_after).unwrap();
    assert!(src.asked.lock().unwrap().is_empty());
    assert_eq!((summary.trees, summary.bound), (1, 1));
    let stored = stored_sessions(&db);
    assert_eq!(stored.len(), 1);
    assert_eq!(
        (stored[0].0.as_str(), stored[0].3.as_str()),
        (ID, path.as_str())
    );
    assert_eq!(transcript_paths(&db)[0], path);
}

/// A host capture of Claude Code (row 1, pid 100) that wrote `transcript`
/// and started the `fs` server (row 2, pid 101); its Bash tool ran the same
/// command line through a shell (rows 3 and 4): not a server.
fn capture_with_mcp_server(dir: &Path, transcript: &str) -> PathBuf {
    let path = dir.join("cap.db");
    let mut cap = SyntheticCapture::create(&path, "cap.db");
    cap.anchor("start", MONO0, WALL0);
    let server: &[&str] = &["node", "/opt/server-filesystem/dist/index.js", "/w"];
    for (id, parent, argv) in [
        (1, None, &["claude", "-p", "hi"][..]),
        (2, Some(1), server),
        (
            3,
            Some(1),
            &["bash", "-c", "node /opt/server-filesystem/dist/index.js /w"],
        ),
        (4, Some(3), server),
    ] {
        cap.process(&ProcessRow {
            id,
            pid: 99 + id,
            start_mono_ns: at(id),
            parent: parent.map(|p: i64| (p, 99 + p)),
            comm: argv[0],
            argv,
            cwd: Some("/w"),
            exec_count: 1,
            ..Default::default()
        });
    }
    cap.event(&EventRow {
        mono_ns: at(5),
        wall_ns: WALL0 + 5_000_000,
        kind: "openat",
        pid: 100,
        ppid: 1,
        process_id: Some(1),
        comm: Some("claude"),
        path: Some(transcript),
        flags: Some("write,create,trunc"),
        ..Default::default()
    });
    drop(cap);
    path
}

#[test]
fn a_sessions_mcp_servers_are_stored_with_the_process_that_ran_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = host_transcript(dir.path());
    let home = dir.path().join("home");
    std::fs::write(
        home.join(".claude.json"),
        r#"{"mcpServers": {
            "fs": {"type": "stdio", "command": "node",
                   "args": ["/opt/server-filesystem/dist/index.js", "/w"]},
            "web": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
            "zbad": {"type": "stdio"}
        }}"#,
    )
    .unwrap();
    let db = capture_with_mcp_server(dir.path(), &path);
    let summary = bind_and_store(&db, &BindOptions::default(), &no_after).unwrap();
    assert_eq!(
        summary.mcp,
        Some(McpStored {
            servers: 2,
            problems: 1
        })
    );
    let cap = Capture::open(&db).unwrap();
    let source = format!("{} mcpServers", home.join(".claude.json").display());
    assert_eq!(
        cap.reader().mcp_servers(1).unwrap(),
        vec![
            McpServerRow {
                session_row: 1,
                name: "fs".into(),
                transport: "stdio".into(),
                command: vec![
                    "node".into(),
                    "/opt/server-filesystem/dist/index.js".into(),
                    "/w".into()
                ],
                url: None,
                source: source.clone(),
                kind: Some("filesystem".into()),
                process_id: Some(2),
                evidence: Some("argv".into()),
            },
            McpServerRow {
                session_row: 1,
                name: "web".into(),
                transport: "http".into(),
                command: Vec::new(),
                url: Some("http://127.0.0.1:9/mcp".into()),
                source,
                kind: None,
                process_id: None,
                evidence: None,
            },
        ]
    );
    assert_eq!(cap.run_meta().unwrap().mcp_config_problems, Some(1));
}

#[test]
fn a_session_without_mcp_configuration_stores_no_servers_and_no_meta() {
    let dir = tempfile::tempdir().unwrap();
    let path = host_transcript(dir.path());
    let db = capture_with_mcp_server(dir.path(), &path);
    let summary = bind_and_store(&db, &BindOptions::default(), &no_after).unwrap();
    assert_eq!(summary.mcp, Some(McpStored::default()));
    let cap = Capture::open(&db).unwrap();
    assert_eq!(cap.reader().mcp_servers(1).unwrap(), vec![]);
    assert_eq!(cap.meta(meta::key::MCP_CONFIG_PROBLEMS).unwrap(), None);
}
