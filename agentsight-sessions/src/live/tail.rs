//! Reading the tail of a transcript and handing its lines to the provider's
//! reader.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::{LiveError, TailFacts, Thresholds, TurnStatus};
use crate::Provider;
use crate::provider::spec;
use crate::util::open_regular;

/// A newest line longer than the tail is read whole up to this size (a
/// Claude tool result can be many MB); past it, it is counted as skipped.
pub const HUGE_LINE_CAP: u64 = 16 * 1024 * 1024;
/// Codex's first line (`session_meta`) embeds the base instructions: it is
/// read in chunks of this size until its newline…
pub const FIRST_LINE_CHUNK: usize = 64 * 1024;
/// …up to this cap.
pub const FIRST_LINE_CAP: usize = 2 * 1024 * 1024;
/// A tail without any turn record is widened backwards up to this size
/// (a few of Claude Code's request records; bounded so a file of nothing
/// but bookkeeping costs at most this per read).
pub const WIDEN_CAP: u64 = 4 * 1024 * 1024;
/// Gemini CLI's legacy `.json` record is parsed whole (streamed, content
/// skipped) up to this size.
pub const GEMINI_JSON_CAP: u64 = 256 * 1024 * 1024;

fn io_err(path: &Path, source: std::io::Error) -> LiveError {
    LiveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads the last `t.tail_bytes` (at most `t.tail_lines` lines) of the
/// transcript at `path` and says what they hold. A tail that starts
/// mid-line drops that partial line; a partial last line is ignored; a last
/// line longer than the tail is read whole up to [`HUGE_LINE_CAP`]. Codex's
/// first line (`session_meta`) and Gemini's metadata line are read
/// separately; Gemini's legacy `.json` record is streamed whole. The file is
/// opened as every transcript is (regular file, no symbolic link, the home
/// owner's).
pub fn read_tail(provider: Provider, path: &Path, t: &Thresholds) -> Result<TailFacts, LiveError> {
    let tail = &spec(provider).tail;
    let mut file = open_regular(path)?;
    let extension = path.extension().and_then(|e| e.to_str());
    let document = tail
        .document
        .as_ref()
        .filter(|d| extension == Some(d.extension));
    let mut facts = if let Some(d) = document {
        (d.read_file)(&mut file, GEMINI_JSON_CAP).map_err(|e| io_err(path, e))?
    } else {
        let (mut facts, begin) =
            read_window(provider, &mut file, t).map_err(|e| io_err(path, e))?;
        if !begin && let Some(apply) = tail.first_line {
            match first_line(&mut file).map_err(|e| io_err(path, e))? {
                Some(line) => match std::str::from_utf8(&line) {
                    Ok(text) => apply(text, &mut facts),
                    Err(_) => facts.skipped_lines += 1,
                },
                None => facts.skipped_lines += 1,
            }
        }
        facts
    };
    (tail.from_path)(path, &mut facts);
    Ok(facts)
}

/// Facts from the tail window. When the window holds no turn record at all
/// (Claude Code 2.1.3xx writes request records of 100 KB and more, so 128
/// KiB can be a handful of bookkeeping lines) it is widened backwards, four
/// times each step and without the line limit, up to [`WIDEN_CAP`].
/// Cursor is left alone: its legacy transcripts never have a turn record.
fn read_window(
    provider: Provider,
    file: &mut File,
    t: &Thresholds,
) -> std::io::Result<(TailFacts, bool)> {
    let mut window = *t;
    loop {
        let (bytes, begin, oversized) = tail_window(file, &window)?;
        let mut facts = facts_from(provider, &bytes, begin, false);
        facts.skipped_lines += u32::from(oversized);
        // An oversized newest line already read back to the cap: widening
        // cannot help.
        let widen = facts.turn == TurnStatus::Unknown
            && !begin
            && !oversized
            && spec(provider).tail.widens
            && window.tail_bytes < WIDEN_CAP;
        if !widen {
            return Ok((facts, begin));
        }
        window.tail_bytes = window.tail_bytes.saturating_mul(4).min(WIDEN_CAP);
        window.tail_lines = usize::MAX;
    }
}

/// The window to read: `(bytes, starts_at_file_begin, oversized)`. Starts
/// after the first newline when it does not start at offset 0; keeps the
/// last `tail_lines` complete lines; grows backwards (to [`HUGE_LINE_CAP`])
/// while it holds no complete line at all (`oversized` when even that did
/// not reach the start of the newest line).
fn tail_window(file: &mut File, t: &Thresholds) -> std::io::Result<(Vec<u8>, bool, bool)> {
    let len = file.metadata()?.len();
    let mut want = t.tail_bytes.max(1);
    loop {
        let start = len.saturating_sub(want);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        file.by_ref().take(len - start).read_to_end(&mut buf)?;
        let mut begin = start == 0;
        if !begin {
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => drop(buf.drain(..=i)),
                None => buf.clear(),
            }
        }
        let has_line = buf.contains(&b'\n');
        if has_line || begin || want >= HUGE_LINE_CAP {
            if keep_last_lines(&mut buf, t.tail_lines) {
                begin = false;
            }
            return Ok((buf, begin, !has_line && !begin));
        }
        want = (want.saturating_mul(4)).min(HUGE_LINE_CAP);
    }
}

/// Keeps the last `n` newline-terminated lines (and a partial line after
/// them); true when lines were dropped.
fn keep_last_lines(buf: &mut Vec<u8>, n: usize) -> bool {
    let complete_end = match buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => return false,
    };
    let mut seen = 0usize;
    for i in (0..complete_end).rev() {
        if buf[i] == b'\n' {
            seen += 1;
            if seen > n {
                buf.drain(..=i);
                return true;
            }
        }
    }
    false
}

/// The file's first line, read in [`FIRST_LINE_CHUNK`]s until its newline;
/// `None` when it is longer than [`FIRST_LINE_CAP`] or unterminated.
fn first_line(file: &mut File) -> std::io::Result<Option<Vec<u8>>> {
    file.seek(SeekFrom::Start(0))?;
    let mut out = Vec::new();
    let mut chunk = vec![0u8; FIRST_LINE_CHUNK];
    while out.len() < FIRST_LINE_CAP {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = chunk[..n].iter().position(|&b| b == b'\n') {
            out.extend_from_slice(&chunk[..i]);
            return Ok(Some(out));
        }
        out.extend_from_slice(&chunk[..n]);
    }
    Ok(None)
}

/// The complete lines of a tail: the first is dropped when the tail does
/// not start at the file's beginning (it is partial), the last when it has
/// no newline (still being written). Blank lines are left out; lines that
/// are not UTF-8 are counted in `skipped`.
pub(super) fn complete_lines<'a>(
    bytes: &'a [u8],
    first_is_partial: bool,
    skipped: &mut u32,
) -> Vec<&'a str> {
    let mut body = bytes;
    if first_is_partial {
        body = match body.iter().position(|&b| b == b'\n') {
            Some(i) => &body[i + 1..],
            None => &[],
        };
    }
    let end = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for raw in body[..end].split(|&b| b == b'\n') {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match std::str::from_utf8(raw) {
            Ok(s) => out.push(s),
            Err(_) => *skipped += 1,
        }
    }
    out
}

/// The pure part of [`read_tail`]: facts from `bytes`, the end of one
/// transcript. `starts_at_file_begin` says whether `bytes` begin at the
/// file's first byte (then the first line is whole and the first prompt is
/// the session's); otherwise the first line is dropped as partial. A
/// Gemini legacy `.json` record given whole (`starts_at_file_begin`) is
/// recognised and read as one document.
pub fn read_tail_bytes(provider: Provider, bytes: &[u8], starts_at_file_begin: bool) -> TailFacts {
    facts_from(provider, bytes, starts_at_file_begin, !starts_at_file_begin)
}

fn facts_from(
    provider: Provider,
    bytes: &[u8],
    starts_at_file_begin: bool,
    first_is_partial: bool,
) -> TailFacts {
    let tail = &spec(provider).tail;
    let mut facts = TailFacts::empty(provider);
    if starts_at_file_begin
        && let Some(d) = &tail.document
        && let Some(f) = (d.read_bytes)(bytes)
    {
        return f;
    }
    let lines = complete_lines(bytes, first_is_partial, &mut facts.skipped_lines);
    (tail.read)(&lines, starts_at_file_begin, &mut facts);
    facts
}
