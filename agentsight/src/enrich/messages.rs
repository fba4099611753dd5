//! The `agentsight session message` submissions made while a capture was
//! recording: read from the run-as user's local log (`message_log`) when the
//! recording finishes and stored in `external_messages`. A missing log is
//! nothing to store; a log that cannot be read, or lines of it that are not
//! whole, become a note in the capture's meta (`session_messages_note`),
//! never a failed recording.

use std::path::{Path, PathBuf};

use crate::{
    message_log::{self, LogError, Submission},
    store::{CaptureRw, StoreError, read::SessionMessage},
};

/// The meta key of what could not be read of the log (the store's).
pub use crate::store::SESSION_MESSAGES_NOTE_META as NOTE_META;

/// What storing the submissions did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagesStored {
    pub stored: usize,
    /// Also stored as meta [`NOTE_META`].
    pub note: Option<String>,
}

/// Stores the submissions whose submission time lies inside `window_ms`
/// (wall ms, both ends included) in the capture at `capture`, from the log
/// in `home` (the run-as user's) and every messaging log a recorded process
/// wrote (a `session message` for a session in another home, or run as
/// another user). A submission in two logs is stored once.
pub fn store_session_messages(
    capture: &Path,
    home: Option<&Path>,
    window_ms: (i64, i64),
) -> Result<MessagesStored, StoreError> {
    let cap = CaptureRw::open(capture)?;
    let mut logs: Vec<PathBuf> = home.map(message_log::default_path).into_iter().collect();
    let suffix = format!("/{}", message_log::IN_HOME);
    let written = cap.reader().paths_written_ending(&suffix)?;
    for p in written.into_iter().map(PathBuf::from) {
        if !logs.contains(&p) {
            logs.push(p);
        }
    }
    let mut msgs: Vec<SessionMessage> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for log in &logs {
        let (subs, note) = read_log(log);
        notes.extend(note);
        for s in subs {
            if (window_ms.0..=window_ms.1).contains(&s.time_ms)
                && !msgs.iter().any(|m| m.id == s.id)
            {
                msgs.push(row(s));
            }
        }
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    if let Some(n) = &note {
        cap.put_meta(NOTE_META, n)?;
    }
    let stored = if msgs.is_empty() {
        0
    } else {
        cap.put_session_messages(&msgs)?
    };
    Ok(MessagesStored { stored, note })
}

/// A log's submissions, and what could not be read of it (a missing log is
/// none and says nothing).
fn read_log(log: &Path) -> (Vec<Submission>, Option<String>) {
    match message_log::read(log) {
        Ok((subs, 0)) => (subs, None),
        Ok((subs, skipped)) => (
            subs,
            Some(format!(
                "{}: {skipped} line(s) skipped (not a whole line of the message log); submissions in them are not stored",
                log.display()
            )),
        ),
        Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            (Vec::new(), None)
        }
        Err(e) => (
            Vec::new(),
            Some(format!("message log not read, no submission stored: {e}")),
        ),
    }
}

fn row(s: Submission) -> SessionMessage {
    let m = s.submitted;
    let finish = s.finish;
    SessionMessage {
        id: s.id,
        time_ms: s.time_ms,
        session_id: m.session_id,
        provider: m.provider,
        transport: m.transport,
        container: m.container,
        invoking_uid: m.invoking_uid.into(),
        invoking_user: m.invoking_user,
        run_as_uid: m.run_as_uid.into(),
        pid: m.pid.into(),
        provider_pid: finish
            .as_ref()
            .and_then(|f| f.finished.provider_pid)
            .map(i64::from),
        message_bytes: i64::try_from(m.message_bytes).unwrap_or(i64::MAX),
        outcome: finish
            .as_ref()
            .map(|f| f.finished.outcome.as_str().to_owned()),
        detail: finish.as_ref().and_then(|f| f.finished.detail.clone()),
        finished_ms: finish.as_ref().map(|f| f.time_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message_log::{Entry, Event, Finished, Outcome, Submitted, append};
    use crate::store::synthetic::{EventRow, SyntheticCapture, clear_session_messages};

    fn submitted(session: &str) -> Event {
        Event::Submitted(Submitted {
            session_id: session.into(),
            provider: "gemini".into(),
            transport: "gemini-resume".into(),
            container: None,
            invoking_uid: 1001,
            invoking_user: "bob".into(),
            run_as_uid: 1001,
            pid: 77,
            message_bytes: 5,
            text: Some("never stored".into()),
        })
    }

    fn entry(id: &str, time_ms: i64, event: Event) -> Entry {
        Entry {
            id: id.into(),
            time_ms,
            event,
        }
    }

    #[test]
    fn submissions_inside_the_window_are_stored_with_their_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        drop(CaptureRw::create(&db).unwrap());
        let log = message_log::default_path(dir.path());
        let done = Event::Finished(Finished {
            outcome: Outcome::Completed,
            provider_pid: Some(78),
            detail: None,
        });
        for e in [
            entry("before", 999, submitted("s-0")),
            entry("first", 1_000, submitted("s-1")),
            entry("first", 1_500, done.clone()),
            entry("open", 2_000, submitted("s-2")),
            entry("after", 2_001, submitted("s-3")),
        ] {
            append(&log, &e).unwrap();
        }
        let got = store_session_messages(&db, Some(dir.path()), (1_000, 2_000)).unwrap();
        assert_eq!(
            got,
            MessagesStored {
                stored: 2,
                note: None
            }
        );
        let cap = crate::store::Capture::open(&db).unwrap();
        let rows = cap.session_messages().unwrap();
        let first = SessionMessage {
            id: "first".into(),
            time_ms: 1_000,
            session_id: "s-1".into(),
            provider: "gemini".into(),
            transport: "gemini-resume".into(),
            container: None,
            invoking_uid: 1001,
            invoking_user: "bob".into(),
            run_as_uid: 1001,
            pid: 77,
            provider_pid: Some(78),
            message_bytes: 5,
            outcome: Some("completed".into()),
            detail: None,
            finished_ms: Some(1_500),
        };
        // No finished line: outcome, provider and end are not known.
        let open = SessionMessage {
            id: "open".into(),
            time_ms: 2_000,
            session_id: "s-2".into(),
            provider_pid: None,
            outcome: None,
            finished_ms: None,
            ..first.clone()
        };
        assert_eq!(rows, vec![first, open]);
        assert_eq!(cap.meta(NOTE_META).unwrap(), None);
    }

    #[test]
    fn a_missing_log_is_nothing_and_a_bad_one_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        drop(CaptureRw::create(&db).unwrap());
        let missing = dir.path().join("nobody");
        assert_eq!(
            store_session_messages(&db, Some(&missing), (0, i64::MAX)).unwrap(),
            MessagesStored {
                stored: 0,
                note: None
            }
        );
        // A directory where the log should be: not read, said so.
        let odd = dir.path().join("odd");
        let not_file = message_log::default_path(&odd);
        std::fs::create_dir_all(&not_file).unwrap();
        let got = store_session_messages(&db, Some(&odd), (0, i64::MAX)).unwrap();
        let note = format!(
            "message log not read, no submission stored: {}: not a regular file",
            not_file.display()
        );
        assert_eq!(got.note.as_deref(), Some(note.as_str()));
        // A log with a partial last line: what is whole is stored.
        let home = dir.path().join("h");
        let log = message_log::default_path(&home);
        append(&log, &entry("x", 10, submitted("s"))).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut f, b"{\"event\":\"subm").unwrap();
        let got = store_session_messages(&db, Some(&home), (0, i64::MAX)).unwrap();
        let note = format!(
            "{}: 1 line(s) skipped (not a whole line of the message log); submissions in them are not stored",
            log.display()
        );
        assert_eq!(
            got,
            MessagesStored {
                stored: 1,
                note: Some(note.clone())
            }
        );
        let cap = crate::store::Capture::open(&db).unwrap();
        assert_eq!(cap.meta(NOTE_META).unwrap(), Some(note));
    }

    #[test]
    fn the_logs_recorded_processes_wrote_are_read_too() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let elsewhere = message_log::default_path(&dir.path().join("run-home"));
        let mine = dir.path().join("mine");
        // Logs only read, or whose open failed, are not the capture's.
        let only_read = message_log::default_path(&dir.path().join("r"));
        let failed = message_log::default_path(&dir.path().join("f"));
        // The same submission in both logs (stored once), one more in each.
        for (log, id, t) in [
            (&only_read, "read", 5),
            (&failed, "failed", 5),
            (&elsewhere, "shared", 5),
            (&elsewhere, "there", 6),
            (&message_log::default_path(&mine), "shared", 5),
            (&message_log::default_path(&mine), "here", 7),
        ] {
            append(log, &entry(id, t, submitted("s"))).unwrap();
        }
        let mut c = SyntheticCapture::create(&db, "c.db");
        let (elsewhere, only_read, failed) = (
            elsewhere.display().to_string(),
            only_read.display().to_string(),
            failed.display().to_string(),
        );
        for (t, path, flags, result) in [
            (1, &elsewhere, "write,create,append", 3),
            (2, &only_read, "read", 3),
            (3, &failed, "write", -13),
        ] {
            c.event(&EventRow {
                mono_ns: t,
                wall_ns: t,
                kind: "openat",
                pid: 9,
                ppid: 1,
                comm: Some("agentsight"),
                path: Some(path),
                flags: Some(flags),
                result,
                ..Default::default()
            });
        }
        drop(c);
        let got = store_session_messages(&db, Some(&mine), (0, 100)).unwrap();
        assert_eq!(got.stored, 3);
        let cap = crate::store::Capture::open(&db).unwrap();
        let ids: Vec<String> = cap
            .session_messages()
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, ["shared", "there", "here"]);
        // Without a home: the written log alone.
        let db2 = dir.path().join("c2.db");
        std::fs::copy(&db, &db2).unwrap();
        clear_session_messages(&db2);
        assert_eq!(
            store_session_messages(&db2, None, (0, 100)).unwrap().stored,
            2
        );
    }
}
