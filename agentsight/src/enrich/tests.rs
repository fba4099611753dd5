//! Binding over a small synthetic capture with the real store schema:
//! evidence from a container's processes is resolved only through that
//! container's session source, never from the host file at the same path.

use std::{path::Path, sync::Mutex};

use rusqlite::{Connection, params};

use super::*;
use crate::sessions::Provider;

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
    let conn = crate::store::create(&path).unwrap();
    conn.execute(
        "INSERT INTO clock_anchors (label, mono_ns, wall_ns) VALUES ('start', ?1, ?2)",
        params![MONO0, WALL0],
    )
    .unwrap();
    let (cid, cname) = if in_container {
        (Some(CONTAINER), Some("dev"))
    } else {
        (None, None)
    };
    conn.execute(
        "INSERT INTO processes (id, pid, start_mono_ns, origin, comm, argv, cwd, exec_count,
             exit_code, container_id, container_name)
         VALUES (1, 100, ?1, 'root', 'sh', '[\"sh\"]', '/w', 1, 0, ?2, ?3)",
        params![at(0), cid, cname],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO events (mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm,
             process_id, path, flags, result)
         VALUES (?1, ?2, 'openat', 0, 1, 100, 100, 1, 1000, 1000, 'sh', 1, ?3,
             'write,create,trunc', 0)",
        params![at(5), WALL0 + 5_000_000, transcript],
    )
    .unwrap();
    drop(conn);
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

fn no_after(_: &Connection, _: &str) -> Result<(), String> {
    Ok(())
}

/// (session_id, provider, cwd, source_path) of every stored session.
fn stored_sessions(db: &Path) -> Vec<(String, String, Option<String>, String)> {
    let c = Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT session_id, provider, cwd, source_path FROM sessions ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn one(db: &Path, sql: &str) -> Option<String> {
    let c = Connection::open(db).unwrap();
    c.query_row(sql, [], |r| r.get(0)).ok()
}

fn count(db: &Path, table: &str) -> i64 {
    let c = Connection::open(db).unwrap();
    c.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
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
    assert_eq!(count(&db, "transcript_files"), 0);
    assert_eq!(
        summary.notes,
        vec![format!(
            "session {ID} from container dev: raw transcript not copied (only structured results cross the bridge)"
        )]
    );
    assert_eq!(
        one(
            &db,
            "SELECT value FROM meta WHERE key = 'container_sessions'"
        )
        .unwrap(),
        format!(
            r#"[{{"container_id":"{CONTAINER}","container_name":"dev","provider":"claude","session_id":"{ID}"}}]"#
        )
    );
    assert_eq!(
        one(
            &db,
            "SELECT b.evidence || ' ' || b.evidence_path || ' ' || t.root_pid || ' ' || t.status
             FROM bindings b JOIN trees t ON t.id = b.tree_id"
        )
        .unwrap(),
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
    assert_eq!(count(&db, "bindings"), 0);
    assert_eq!(count(&db, "transcript_files"), 0);
    assert_eq!(
        one(&db, "SELECT status || ': ' || note FROM trees").unwrap(),
        format!("unmatched: {why}")
    );
    assert_eq!(
        one(
            &db,
            "SELECT value FROM meta WHERE key = 'container_sessions'"
        ),
        None
    );
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
    assert_eq!(one(&db, "SELECT path FROM transcript_files").unwrap(), path);
}
