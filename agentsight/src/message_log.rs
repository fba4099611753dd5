//! The local log of `agentsight session message`: one JSON line per event,
//! two events per submission sharing an `id` — `submitted` before the
//! provider is started, `finished` when the submission ended (see
//! `docs/capture-schema.md`, "external_messages", for the fields).
//!
//! Lives at `<owner home>/.local/state/agentsight/messages.jsonl`. Appends
//! open the file `O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC`, mode 0600 (its
//! directories 0700), refuse anything but a regular file, and write each
//! line with one `write(2)`, so lines of concurrent submissions never
//! interleave. Creating it as the right user (`privileges::AsUser`) is the
//! caller's job. Reading tolerates what a log accumulates — a partial last
//! line, bytes that are not UTF-8, lines that are not ours — and counts
//! every line it skips; fields it does not know are ignored.
//!
//! A foundations module: it imports nothing of the crate.

use std::{
    collections::HashMap,
    fs::{DirBuilder, File, OpenOptions},
    io::{Read, Write},
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// Where the log lies below a home directory.
pub const IN_HOME: &str = ".local/state/agentsight/messages.jsonl";

/// The log below a home directory.
pub fn default_path(home: &Path) -> PathBuf {
    home.join(IN_HOME)
}

/// A log larger than this is not read (a capture stores what lies inside
/// its window; a runaway log must not exhaust the recorder's memory).
pub const MAX_LOG_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {op}: {source}")]
    Io {
        path: String,
        op: &'static str,
        source: std::io::Error,
    },
    #[error("{path}: not a regular file")]
    NotRegular { path: String },
    #[error("{path}: {size} bytes, over the {MAX_LOG_BYTES}-byte bound for reading")]
    TooLarge { path: String, size: u64 },
    #[error("{path}: short write ({written} of {len} bytes)")]
    ShortWrite {
        path: String,
        written: usize,
        len: usize,
    },
}

/// How a submission ended (`finished.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The provider finished the turn.
    Completed,
    /// The provider acknowledged the message; its turn was not waited for.
    Acknowledged,
    Failed,
    Timeout,
    /// Refused before the provider got the message (busy, live elsewhere, …).
    Refused,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Acknowledged => "acknowledged",
            Outcome::Failed => "failed",
            Outcome::Timeout => "timeout",
            Outcome::Refused => "refused",
        }
    }
}

/// The fields of a `submitted` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    pub session_id: String,
    pub provider: String,
    pub transport: String,
    /// The container the session lives in (`--docker-container`); None on
    /// the host (written as `null`).
    pub container: Option<String>,
    pub invoking_uid: u32,
    pub invoking_user: String,
    /// The uid the provider runs as.
    pub run_as_uid: u32,
    /// The agentsight process that submitted.
    pub pid: u32,
    pub message_bytes: u64,
    /// The message itself, only with `--log-text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The fields of a `finished` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub outcome: Outcome,
    /// The provider process (None when none was started).
    pub provider_pid: Option<u32>,
    pub detail: Option<String>,
}

/// What a line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Submitted(Submitted),
    Finished(Finished),
}

impl Event {
    pub fn word(&self) -> &'static str {
        match self {
            Event::Submitted(_) => "submitted",
            Event::Finished(_) => "finished",
        }
    }
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    /// Wall time, ms since the epoch; `time` is its RFC 3339 UTC form.
    pub time_ms: i64,
    pub event: Event,
}

/// The line as written: the common fields first, then the event's.
#[derive(Serialize)]
struct Line<'a, T: Serialize> {
    event: &'static str,
    id: &'a str,
    time: String,
    time_ms: i64,
    #[serde(flatten)]
    fields: &'a T,
}

/// The common fields, read back.
#[derive(Deserialize)]
struct Head {
    event: String,
    id: String,
    time_ms: i64,
}

impl Entry {
    /// An entry stamped with the current wall time.
    pub fn now(id: &str, event: Event) -> Self {
        Self {
            id: id.to_owned(),
            time_ms: jiff::Timestamp::now().as_millisecond(),
            event,
        }
    }

    /// A fresh submission id: the wall time in ns and this process's pid,
    /// in hex (unique per process and moment; never reused by a second
    /// submission of the same process, which takes its own moment).
    pub fn new_id() -> String {
        let ns = jiff::Timestamp::now().as_nanosecond();
        format!("{ns:x}-{:x}", std::process::id())
    }

    /// The entry as one JSON line, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let time = rfc3339_ms(self.time_ms);
        let (event, id, time_ms) = (self.event.word(), self.id.as_str(), self.time_ms);
        let json = match &self.event {
            Event::Submitted(fields) => serde_json::to_vec(&Line {
                event,
                id,
                time,
                time_ms,
                fields,
            }),
            Event::Finished(fields) => serde_json::to_vec(&Line {
                event,
                id,
                time,
                time_ms,
                fields,
            }),
        };
        // Plain structs of strings and integers always serialize.
        let mut v = json.unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Parses one line; None for anything that is not one of ours.
    pub fn parse(line: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(line).ok()?;
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let head = Head::deserialize(&value).ok()?;
        let event = match head.event.as_str() {
            "submitted" => Event::Submitted(Submitted::deserialize(&value).ok()?),
            "finished" => Event::Finished(Finished::deserialize(&value).ok()?),
            _ => return None,
        };
        Some(Self {
            id: head.id,
            time_ms: head.time_ms,
            event,
        })
    }
}

/// RFC 3339 UTC with milliseconds (`2026-12-01T11:42:01.123Z`).
pub fn rfc3339_ms(time_ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(time_ms) {
        Ok(t) => format!("{t:.3}"),
        Err(_) => format!("(invalid time {time_ms} ms)"),
    }
}

/// Appends one entry with a single `write(2)`, creating the file (0600) and
/// its missing directories (0700).
pub fn append(path: &Path, entry: &Entry) -> Result<(), LogError> {
    let shown = || path.display().to_string();
    let io = |op: &'static str| {
        move |source| LogError::Io {
            path: shown(),
            op,
            source,
        }
    };
    if let Some(dir) = path.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io("creating its directory"))?;
    }
    // O_NONBLOCK: a FIFO planted there fails the open or the type check at
    // once instead of blocking; it has no effect on a regular file.
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(io("opening"))?;
    regular(&file, path)?;
    let line = entry.to_line();
    // One write: O_APPEND makes it atomic against other appenders.
    let written = file.write(&line).map_err(io("writing"))?;
    if written != line.len() {
        return Err(LogError::ShortWrite {
            path: shown(),
            written,
            len: line.len(),
        });
    }
    Ok(())
}

fn regular(file: &File, path: &Path) -> Result<u64, LogError> {
    let meta = file.metadata().map_err(|source| LogError::Io {
        path: path.display().to_string(),
        op: "stat",
        source,
    })?;
    if !meta.file_type().is_file() {
        return Err(LogError::NotRegular {
            path: path.display().to_string(),
        });
    }
    Ok(meta.len())
}

/// The `finished` half of a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub time_ms: i64,
    pub finished: Finished,
}

/// A `submitted` line with its `finished` line, if the log has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    pub id: String,
    pub time_ms: i64,
    pub submitted: Submitted,
    pub finish: Option<Finish>,
}

/// Reads the log: its submissions in the order they were submitted, and
/// how many lines were skipped (a partial last line, bytes that are not
/// UTF-8, lines that are not ours, a second `submitted` or `finished` for
/// one id, a `finished` without its `submitted`). A missing file is an
/// `Io` error of kind `NotFound` (the caller decides that it means "none").
pub fn read(path: &Path) -> Result<(Vec<Submission>, usize), LogError> {
    let io = |op: &'static str| {
        move |source| LogError::Io {
            path: path.display().to_string(),
            op,
            source,
        }
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(io("opening"))?;
    let size = regular(&file, path)?;
    if size > MAX_LOG_BYTES {
        return Err(LogError::TooLarge {
            path: path.display().to_string(),
            size,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    (&file)
        .take(MAX_LOG_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io("reading"))?;
    Ok(pair(&bytes))
}

/// Pairs the lines of a log's bytes (see [`read`]).
pub fn pair(bytes: &[u8]) -> (Vec<Submission>, usize) {
    let mut out: Vec<Submission> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut skipped = 0;
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // What follows the last newline is a partial line (a writer cut short),
    // or nothing.
    if lines.pop().is_some_and(|rest| !rest.is_empty()) {
        skipped += 1;
    }
    for line in lines {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some(entry) = Entry::parse(line) else {
            skipped += 1;
            continue;
        };
        match entry.event {
            Event::Submitted(submitted) if !by_id.contains_key(&entry.id) => {
                by_id.insert(entry.id.clone(), out.len());
                out.push(Submission {
                    id: entry.id,
                    time_ms: entry.time_ms,
                    submitted,
                    finish: None,
                });
            }
            Event::Finished(finished) => match by_id.get(&entry.id).map(|&i| &mut out[i].finish) {
                Some(slot @ None) => {
                    *slot = Some(Finish {
                        time_ms: entry.time_ms,
                        finished,
                    })
                }
                _ => skipped += 1,
            },
            Event::Submitted(_) => skipped += 1,
        }
    }
    (out, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn submitted(session: &str) -> Submitted {
        Submitted {
            session_id: session.into(),
            provider: "claude".into(),
            transport: "claude-stream-json".into(),
            container: None,
            invoking_uid: 1000,
            invoking_user: "alice".into(),
            run_as_uid: 1000,
            pid: 4242,
            message_bytes: 17,
            text: None,
        }
    }

    fn finished(outcome: Outcome) -> Finished {
        Finished {
            outcome,
            provider_pid: Some(4250),
            detail: None,
        }
    }

    #[test]
    fn lines_have_the_documented_fields_in_order() {
        let e = Entry {
            id: "a1".into(),
            time_ms: 1_796_086_921_123,
            event: Event::Submitted(submitted("s-1")),
        };
        assert_eq!(
            String::from_utf8(e.to_line()).unwrap(),
            "{\"event\":\"submitted\",\"id\":\"a1\",\"time\":\"2026-12-01T01:02:01.123Z\",\"time_ms\":1796086921123,\"session_id\":\"s-1\",\"provider\":\"claude\",\"transport\":\"claude-stream-json\",\"container\":null,\"invoking_uid\":1000,\"invoking_user\":\"alice\",\"run_as_uid\":1000,\"pid\":4242,\"message_bytes\":17}\n"
        );
        let mut with_text = submitted("s-1");
        with_text.text = Some("hi \"there\"".into());
        with_text.container = Some("box".into());
        let line = Entry {
            id: "a1".into(),
            time_ms: 0,
            event: Event::Submitted(with_text),
        }
        .to_line();
        let s = String::from_utf8(line).unwrap();
        assert!(s.contains(",\"container\":\"box\","), "{s}");
        assert!(s.ends_with(",\"message_bytes\":17,\"text\":\"hi \\\"there\\\"\"}\n"));
        let f = Entry {
            id: "a1".into(),
            time_ms: 1_796_086_925_000,
            event: Event::Finished(Finished {
                outcome: Outcome::Timeout,
                provider_pid: None,
                detail: Some("no answer in 20 s".into()),
            }),
        };
        assert_eq!(
            String::from_utf8(f.to_line()).unwrap(),
            "{\"event\":\"finished\",\"id\":\"a1\",\"time\":\"2026-12-01T01:02:05.000Z\",\"time_ms\":1796086925000,\"outcome\":\"timeout\",\"provider_pid\":null,\"detail\":\"no answer in 20 s\"}\n"
        );
    }

    #[test]
    fn append_creates_private_files_and_reads_back_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let path = default_path(home);
        assert_eq!(path, home.join(".local/state/agentsight/messages.jsonl"));
        let entries = [
            Entry {
                id: "a".into(),
                time_ms: 10,
                event: Event::Submitted(submitted("s-1")),
            },
            Entry {
                id: "b".into(),
                time_ms: 11,
                event: Event::Submitted(submitted("s-2")),
            },
            Entry {
                id: "a".into(),
                time_ms: 20,
                event: Event::Finished(finished(Outcome::Completed)),
            },
        ];
        for e in &entries {
            append(&path, e).unwrap();
        }
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&home.join(".local/state")), 0o700);
        let (subs, skipped) = read(&path).unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(
            subs,
            vec![
                Submission {
                    id: "a".into(),
                    time_ms: 10,
                    submitted: submitted("s-1"),
                    finish: Some(Finish {
                        time_ms: 20,
                        finished: finished(Outcome::Completed)
                    }),
                },
                Submission {
                    id: "b".into(),
                    time_ms: 11,
                    submitted: submitted("s-2"),
                    finish: None,
                },
            ]
        );
    }

    #[test]
    fn append_refuses_links_and_non_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let link = dir.path().join("messages.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = Entry::now("x", Event::Submitted(submitted("s")));
        let err = append(&link, &e).unwrap_err();
        assert!(
            matches!(&err, LogError::Io { op: "opening", source, .. } if source.raw_os_error() == Some(libc::ELOOP)),
            "{err}"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"");
        let fifo = dir.path().join("fifo.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No reader: the non-blocking open fails (ENXIO) rather than hang.
        let err = append(&fifo, &e).unwrap_err();
        assert!(
            matches!(&err, LogError::Io { source, .. } if source.raw_os_error() == Some(libc::ENXIO)),
            "{err}"
        );
        let err = read(&fifo).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: not a regular file", fifo.display())
        );
        let err = read(&link).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}: opening: ", link.display()))
        );
    }

    #[test]
    fn read_counts_what_it_skips_and_ignores_unknown_fields() {
        let good = |id: &str, t: i64| {
            Entry {
                id: id.into(),
                time_ms: t,
                event: Event::Submitted(submitted("s-9")),
            }
            .to_line()
        };
        let mut log = Vec::new();
        log.extend(good("one", 1));
        // Unknown fields (a later version's) are ignored, not skipped.
        log.extend(
            b"{\"event\":\"finished\",\"id\":\"one\",\"time\":\"x\",\"time_ms\":5,\"outcome\":\"failed\",\"provider_pid\":7,\"detail\":\"boom\",\"extra\":[1,2]}\n",
        );
        log.extend(b"\n   \n"); // blank lines: nothing
        log.extend(b"not json\n"); // 1
        log.extend(b"{\"event\":\"submitted\",\"id\":\"\xff\xfe\"}\n"); // 2: not UTF-8
        log.extend(b"{\"event\":\"rotated\",\"id\":\"r\",\"time_ms\":3}\n"); // 3: unknown event
        log.extend(b"{\"event\":\"finished\",\"id\":\"ghost\",\"time_ms\":4,\"outcome\":\"completed\",\"provider_pid\":null,\"detail\":null}\n"); // 4: no submitted
        log.extend(good("one", 6)); // 5: the same id again
        log.extend(b"{\"event\":\"finished\",\"id\":\"one\",\"time_ms\":9,\"outcome\":\"completed\",\"provider_pid\":null,\"detail\":null}\n"); // 6: second finish
        log.extend(b"{\"event\":\"finished\",\"id\":\"two\",\"time_ms\":9,\"outcome\":\"exploded\",\"provider_pid\":null,\"detail\":null}\n"); // 7: unknown outcome
        log.extend(b"{\"event\":\"submitted\",\"id\":\"two\",\"time_ms\":9,\"session_id\":\"s\""); // 8: partial last line
        let (subs, skipped) = pair(&log);
        assert_eq!(skipped, 8);
        assert_eq!(
            subs,
            vec![Submission {
                id: "one".into(),
                time_ms: 1,
                submitted: submitted("s-9"),
                finish: Some(Finish {
                    time_ms: 5,
                    finished: Finished {
                        outcome: Outcome::Failed,
                        provider_pid: Some(7),
                        detail: Some("boom".into())
                    }
                }),
            }]
        );
        assert_eq!(pair(b""), (vec![], 0));
    }

    #[test]
    fn a_missing_log_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        match read(&dir.path().join("none.jsonl")) {
            Err(LogError::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ids_and_times() {
        let a = Entry::new_id();
        assert!(a.ends_with(&format!("-{:x}", std::process::id())), "{a}");
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_796_086_921_007), "2026-12-01T01:02:01.007Z");
    }
}
