//! `external_messages`: the submissions of `agentsight session message`
//! made while a capture was recording, copied from the run-as user's local
//! log (`message_log`) when the recording finishes. Native to neither
//! evidence layer: what agentsight itself was asked to send, and when.
//! Columns are documented in `docs/capture-schema.md`.

use rusqlite::params;

use super::{CaptureRw, StoreError, read::SessionMessage};

/// The meta key of what could not be read of the message log (a note the
/// views print with the submissions).
pub const NOTE_META: &str = super::meta::key::SESSION_MESSAGES_NOTE;

/// Created with every new capture; a capture made before it has none (read
/// as "no message stored"), and gets it when messages are stored.
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS external_messages (
    id TEXT NOT NULL UNIQUE,
    time_ms INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    transport TEXT NOT NULL,
    container TEXT,
    invoking_uid INTEGER NOT NULL,
    invoking_user TEXT NOT NULL,
    run_as_uid INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    provider_pid INTEGER,
    message_bytes INTEGER NOT NULL,
    outcome TEXT,
    detail TEXT,
    finished_ms INTEGER
);
"#;

impl CaptureRw {
    /// Stores submissions (one transaction; a submission already stored,
    /// by its id, is replaced: enrichment may run again). Returns how many.
    pub fn put_session_messages(&self, msgs: &[SessionMessage]) -> Result<usize, StoreError> {
        let qe = |e| self.query_err(e);
        self.conn.execute_batch(SCHEMA).map_err(qe)?;
        let t = self.conn.unchecked_transaction().map_err(qe)?;
        {
            let mut st = t
                .prepare(
                    "INSERT OR REPLACE INTO external_messages (id, time_ms, session_id, provider,
                     transport, container, invoking_uid, invoking_user, run_as_uid, pid,
                     provider_pid, message_bytes, outcome, detail, finished_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                )
                .map_err(qe)?;
            for m in msgs {
                st.execute(params![
                    m.id,
                    m.time_ms,
                    m.session_id,
                    m.provider,
                    m.transport,
                    m.container,
                    m.invoking_uid,
                    m.invoking_user,
                    m.run_as_uid,
                    m.pid,
                    m.provider_pid,
                    m.message_bytes,
                    m.outcome,
                    m.detail,
                    m.finished_ms
                ])
                .map_err(qe)?;
            }
        }
        t.commit().map_err(qe)?;
        Ok(msgs.len())
    }
}

/// A submission as the tests of the views and the audit store it.
#[cfg(test)]
pub(crate) fn example(id: &str, time_ms: i64, session_id: &str) -> SessionMessage {
    SessionMessage {
        id: id.into(),
        time_ms,
        session_id: session_id.into(),
        provider: "claude".into(),
        transport: "claude-stream-json".into(),
        container: None,
        invoking_uid: 1000,
        invoking_user: "alice".into(),
        run_as_uid: 1000,
        pid: 300,
        provider_pid: Some(301),
        message_bytes: 17,
        outcome: Some("completed".into()),
        detail: None,
        finished_ms: Some(time_ms.saturating_add(2_000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        clock::Anchors,
        store::read::{processes, session_messages},
    };

    #[test]
    fn messages_are_stored_once_per_id_and_read_back_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let rw = CaptureRw::create(&dir.path().join("c.db")).unwrap();
        assert_eq!(session_messages(rw.conn()).unwrap(), vec![]);
        let a = example("a", 2_000, "s-1");
        let mut b = example("b", 1_000, "s-2");
        b.container = Some("box".into());
        b.provider_pid = None;
        b.outcome = None;
        b.finished_ms = None;
        assert_eq!(rw.put_session_messages(&[a.clone(), b.clone()]).unwrap(), 2);
        // Stored again (enrichment re-run): replaced, not doubled.
        let mut a2 = a.clone();
        a2.detail = Some("again".into());
        assert_eq!(rw.put_session_messages(&[a2.clone()]).unwrap(), 1);
        assert_eq!(session_messages(rw.conn()).unwrap(), vec![b, a2]);
    }

    #[test]
    fn a_capture_without_the_table_has_no_messages_and_gets_it_when_storing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let rw = CaptureRw::create(&path).unwrap();
        rw.conn()
            .execute_batch("DROP TABLE external_messages")
            .unwrap();
        assert_eq!(session_messages(rw.conn()).unwrap(), vec![]);
        rw.put_session_messages(&[example("a", 5, "s")]).unwrap();
        assert_eq!(session_messages(rw.conn()).unwrap().len(), 1);
    }

    #[test]
    fn the_provider_process_is_the_one_with_its_pid_alive_during_the_submission() {
        let dir = tempfile::tempdir().unwrap();
        let rw = CaptureRw::create(&dir.path().join("c.db")).unwrap();
        // Wall = mono + 1 s. The submission: 10.000 s → 12.000 s (wall).
        // pid 301 was an earlier process (ended at 8 s), then the provider
        // (9.5005 s mono = 10.5005 s wall → 11 s wall); pid 302 never ran then.
        rw.conn()
            .execute_batch(
                "INSERT INTO clock_anchors (id, label, mono_ns, wall_ns) VALUES (1, 'start', 0, 1000000000);
                 INSERT INTO processes (id, pid, start_mono_ns, end_mono_ns, origin, exec_count)
                 VALUES (1, 301, 1000000000, 7000000000, 'root', 1),
                        (2, 301, 9500500000, 10000000000, 'fork', 1),
                        (3, 302, 20000000000, NULL, 'fork', 1);",
            )
            .unwrap();
        let procs = processes(rw.conn()).unwrap();
        let anchors = Anchors::load(rw.conn()).unwrap();
        let at = |pid: Option<i64>, finished: Option<i64>| {
            let mut m = example("a", 10_000, "s");
            m.provider_pid = pid;
            m.finished_ms = finished;
            m.provider_process(&procs, &anchors).map(|p| p.id)
        };
        assert_eq!(at(Some(301), Some(12_000)), Some(2));
        assert_eq!(at(Some(302), Some(12_000)), None);
        // Without an end, a later process with the pid counts too.
        assert_eq!(at(Some(302), None), Some(3));
        assert_eq!(at(None, Some(12_000)), None);
        // Times a corrupt capture may hold convert without overflow.
        assert_eq!(crate::store::read::ms_to_ns(-5), 0);
        assert_eq!(crate::store::read::ms_to_ns(i64::MAX), u64::MAX);
        let mut wild = example("w", i64::MAX, "s");
        wild.finished_ms = Some(i64::MAX);
        assert_eq!(wild.provider_process(&procs, &anchors).map(|p| p.id), None);
        // A provider started within the submission's millisecond (rounding).
        let mut m = example("a", 10_501, "s");
        m.provider_pid = Some(301);
        assert_eq!(m.provider_process(&procs, &anchors).map(|p| p.id), Some(2));
    }
}
