//! Shared helpers: line streaming, timestamps, hashing, tool classification.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::error::{Result, SessionError};
use super::{ParseStats, PathAccess, ToolCategory, ToolPath};

/// A single transcript line longer than this is skipped (and counted): it
/// protects memory against a corrupt file with no newlines at all while still
/// admitting the multi-MB tool-output lines real agents write.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Bounded header read used by discovery (issue: 64 KiB).
pub const HEADER_BYTES: usize = 64 * 1024;

/// A Codex first line embeds the full instructions and can be tens of KiB;
/// discovery keeps reading to the first newline up to this cap.
pub const CODEX_FIRST_LINE_CAP: usize = 1024 * 1024;

/// Whose transcripts are read: set once by a command to the owner of the
/// home it reads (`u64::MAX`: not set, no owner check).
static TRANSCRIPT_OWNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// From now on a transcript is opened only if it belongs to `uid` (the owner
/// of the home being read): a file someone else put there, or a hard link to
/// one, is skipped like an unreadable file.
pub fn set_transcript_owner(uid: Option<u32>) {
    TRANSCRIPT_OWNER.store(
        uid.map_or(u64::MAX, u64::from),
        std::sync::atomic::Ordering::Relaxed,
    );
}

pub fn transcript_owner() -> Option<u32> {
    u32::try_from(TRANSCRIPT_OWNER.load(std::sync::atomic::Ordering::Relaxed)).ok()
}

/// Opens a transcript for streaming: a regular file only (a directory, FIFO
/// or device gets a typed error, and the open never blocks), never through a
/// symbolic link as the last component, and owned by the home's owner when
/// one is set ([`set_transcript_owner`]).
pub fn open_regular(path: &Path) -> Result<File> {
    let not_file = || SessionError::NotAFile {
        path: path.to_path_buf(),
    };
    let f = crate::safefs::open_regular(path, true).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => not_file(),
        _ => SessionError::io(path, e),
    })?;
    if let Some(owner) = transcript_owner() {
        use std::os::unix::fs::MetadataExt;
        let uid = f.metadata().map_err(|e| SessionError::io(path, e))?.uid();
        if uid != owner {
            return Err(SessionError::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("owned by uid {uid}, not by the home's owner (uid {owner})"),
                ),
            ));
        }
    }
    Ok(f)
}

/// Streams a JSONL file line by line, calling `f` with each complete or final
/// line. Oversized lines are skipped and counted; a final line without a
/// newline is flagged so parsers can treat a parse failure there as a live
/// session's partial write rather than corruption.
pub fn for_each_line<R: Read>(
    reader: R,
    stats: &mut ParseStats,
    mut f: impl FnMut(&[u8], bool, &mut ParseStats),
) -> std::io::Result<()> {
    let mut r = BufReader::with_capacity(256 * 1024, reader);
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let mut oversized = false;
        // Read one line, but stop storing bytes past the cap.
        let mut got_newline = false;
        loop {
            let avail = match r.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                break;
            }
            let (take, done) = match memchr(b'\n', avail) {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            if !oversized {
                if buf.len() + take > MAX_LINE_BYTES {
                    oversized = true;
                    buf.clear();
                } else {
                    buf.extend_from_slice(&avail[..take]);
                }
            }
            r.consume(take);
            if done {
                got_newline = true;
                break;
            }
        }
        if oversized {
            stats.lines += 1;
            stats.oversized_lines += 1;
            if !got_newline {
                break;
            }
            continue;
        }
        if buf.is_empty() {
            break;
        }
        stats.lines += 1;
        let mut line = &buf[..];
        while let Some((last, rest)) = line.split_last() {
            if *last == b'\n' || *last == b'\r' {
                line = rest;
            } else {
                break;
            }
        }
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            stats.blank_lines += 1;
        } else {
            f(line, !got_newline, stats);
        }
        if !got_newline {
            break;
        }
    }
    Ok(())
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// Parses one JSON line into `T`. Invalid UTF-8 is repaired lossily (and
/// counted) rather than losing the whole record; other failures are counted
/// as a partial last line or a bad line.
pub fn parse_line<T: serde::de::DeserializeOwned>(
    line: &[u8],
    is_last_unterminated: bool,
    stats: &mut ParseStats,
) -> Option<T> {
    match serde_json::from_slice::<T>(line) {
        Ok(v) => Some(v),
        Err(e) => {
            if std::str::from_utf8(line).is_err() {
                let fixed = String::from_utf8_lossy(line);
                if let Ok(v) = serde_json::from_str::<T>(&fixed) {
                    stats.invalid_utf8_lines += 1;
                    return Some(v);
                }
            }
            if is_last_unterminated && e.is_eof() {
                stats.partial_last_line = true;
            } else {
                stats.bad_lines += 1;
                if stats.first_error.is_none() {
                    stats.first_error = Some(format!("line {}: {e}", stats.lines));
                }
            }
            None
        }
    }
}

/// Reads up to `cap` bytes from the start of a file.
pub fn read_head(path: &Path, cap: usize) -> Result<Vec<u8>> {
    let f = open_regular(path)?;
    let mut buf = Vec::with_capacity(cap.min(HEADER_BYTES));
    f.take(cap as u64)
        .read_to_end(&mut buf)
        .map_err(|e| SessionError::io(path, e))?;
    Ok(buf)
}

/// Reads the first line (without its newline), up to `cap` bytes; `None` when
/// the cap is reached first.
pub fn read_first_line(path: &Path, cap: usize) -> Result<Option<Vec<u8>>> {
    let f = open_regular(path)?;
    let mut r = BufReader::with_capacity(HEADER_BYTES, f.take(cap as u64 + 1));
    let mut buf = Vec::new();
    r.read_until(b'\n', &mut buf)
        .map_err(|e| SessionError::io(path, e))?;
    if buf.last() == Some(&b'\n') {
        buf.pop();
        Ok(Some(buf))
    } else if buf.len() > cap {
        Ok(None)
    } else {
        // No newline yet (live or one-line file): the bytes are the line.
        Ok(Some(buf))
    }
}

/// Reads at most the final `cap` bytes, starting at the first full line.
pub fn read_tail(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let mut f = open_regular(path)?;
    let len = f.metadata().map_err(|e| SessionError::io(path, e))?.len();
    let start = len.saturating_sub(cap);
    f.seek(SeekFrom::Start(start))
        .map_err(|e| SessionError::io(path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .map_err(|e| SessionError::io(path, e))?;
    if start > 0 {
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                buf.drain(..=i);
            }
            None => buf.clear(),
        }
    }
    Ok(buf)
}

// ---------------------------------------------------------------------------
// Time: all timestamps are i64 milliseconds since the Unix epoch, UTC.

/// Parses an RFC 3339 / ISO-8601 timestamp (`2026-03-01T09:00:02.100Z`,
/// offsets allowed) into UTC epoch milliseconds.
///
/// The shape is read here and the calendar is jiff's. jiff's own RFC 3339
/// parser is not used because it is stricter than what transcripts have
/// always been read with: it rejects a missing zone (providers mean UTC), text
/// after the zone, and a day past the month's end, and it clamps a leap second
/// to `:59`; here those roll over as they always did (the tests pin them).
pub fn parse_ts(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v: i64 = 0;
        for &c in b.get(r)? {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Some(v)
    };
    if b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b' ' || b[10] == b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms: i64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let mut digits = 0;
        while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            if digits < 3 {
                ms = ms * 10 + i64::from(c - b'0');
            }
            digits += 1;
            i += 1;
        }
        if digits == 0 {
            return None;
        }
        for _ in digits..3 {
            ms *= 10;
        }
    }
    let offset_min: i64 = match b.get(i) {
        None => 0, // no zone: providers write UTC
        Some(b'Z') | Some(b'z') => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let oh = num(i + 1..i + 3)?;
            let om = if b.get(i + 3) == Some(&b':') {
                num(i + 4..i + 6)?
            } else {
                num(i + 3..i + 5).unwrap_or(0)
            };
            let v = oh * 60 + om;
            if sign == b'+' { v } else { -v }
        }
        Some(_) => return None,
    };
    // The first of the month from jiff, then the day as an offset from it: a
    // day past the month's end rolls into the next month.
    let year = i16::try_from(y).ok()?;
    let month = i8::try_from(mo).ok()?;
    let first_of_month = jiff::civil::Date::new(year, month, 1)
        .ok()?
        .to_datetime(jiff::civil::Time::midnight());
    let month_start = first_of_month.duration_since(UNIX_EPOCH_UTC).as_secs();
    let secs = month_start + (d - 1) * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + ms)
}

/// The Unix epoch as a UTC civil time: transcripts' times are all UTC, so no
/// time zone (or zone database) is involved.
const UNIX_EPOCH_UTC: jiff::civil::DateTime =
    jiff::civil::DateTime::constant(1970, 1, 1, 0, 0, 0, 0);

/// Formats epoch milliseconds as RFC 3339 UTC with milliseconds
/// (`2026-03-01T09:00:02.100Z`). A time past jiff's range (years beyond
/// ±9999, which no transcript or file time holds) is shown as that range's
/// end rather than failing.
pub fn format_ts(ms: i64) -> String {
    let at = UNIX_EPOCH_UTC
        .checked_add(jiff::SignedDuration::from_millis(ms))
        .unwrap_or(if ms < 0 {
            jiff::civil::DateTime::MIN
        } else {
            jiff::civil::DateTime::MAX
        });
    format!("{at:.3}Z")
}

/// Converts a file modification time to epoch milliseconds.
pub fn system_time_ms(t: std::time::SystemTime) -> i64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

// ---------------------------------------------------------------------------
// Hashing: FNV-1a 64, chosen because it is trivially stable across runs,
// platforms and compiler versions (std's hashers promise none of that).

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

// ---------------------------------------------------------------------------
// Text helpers.

/// Truncates to at most `max` bytes on a char boundary.
pub fn truncate_str(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut cut = max;
    while cut > 0 && !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
}

/// A short one-line preview (for list rows and titles).
pub fn preview(s: &str, max_chars: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max_chars {
        one
    } else {
        let mut out: String = one.chars().take(max_chars.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Host of a URL (`https://a.b/c` → `a.b`), lower-cased, port stripped.
pub fn url_domain(url: &str) -> Option<String> {
    let rest = url.trim().split_once("://").map(|(_, r)| r)?;
    let host_port = rest.split(['/', '?', '#']).next()?;
    let host = host_port.rsplit('@').next()?;
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| h.trim_start_matches('['))?
    } else {
        host.split(':').next()?
    };
    if host.is_empty() {
        None
    } else {
        Some(host.to_ascii_lowercase())
    }
}

/// All distinct URL domains mentioned in free text (Gemini's web_fetch prompt).
pub fn domains_in_text(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in
        text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '<' || c == '>')
    {
        if let Some(i) = word.find("http://").or_else(|| word.find("https://"))
            && let Some(d) = url_domain(&word[i..])
            && !out.contains(&d)
        {
            out.push(d);
        }
    }
    out
}

/// Category of a tool by name, shared by all providers.
pub fn tool_category(name: &str) -> ToolCategory {
    let n = name.to_ascii_lowercase();
    if n.starts_with("mcp__") || n == "callmcptool" {
        return ToolCategory::Mcp;
    }
    match n.as_str() {
        "bash" | "shell" | "shell_command" | "exec_command" | "write_stdin" | "local_shell"
        | "run_shell_command" | "bashoutput" | "killshell" | "killbash" | "run_terminal_cmd"
        | "unified_exec" => ToolCategory::Shell,
        "read" | "readfile" | "read_file" | "read_many_files" | "view_image" | "notebookread"
        | "ls" | "list_dir" | "list_directory" | "listdir" => ToolCategory::Read,
        "grep" | "glob" | "grep_search" | "grep_files" | "codebase_search" | "file_search"
        | "search_file" | "semanticsearch" | "tool_search" => ToolCategory::Search,
        "edit" | "multiedit" | "write" | "notebookedit" | "apply_patch" | "write_file"
        | "replace" | "strreplace" | "search_replace" | "edit_file" | "delete" | "delete_file"
        | "editnotebook" => ToolCategory::Edit,
        "webfetch" | "websearch" | "web_fetch" | "google_web_search" | "web_search"
        | "web_search_call" => ToolCategory::Web,
        "todowrite" | "update_plan" | "write_todos" | "taskcreate" | "taskupdate" | "tasklist"
        | "taskget" | "exitplanmode" | "enter_plan_mode" | "exit_plan_mode" | "todo_write" => {
            ToolCategory::Plan
        }
        "task"
        | "agent"
        | "spawn_agent"
        | "spawn_agents_on_csv"
        | "send_input"
        | "send_message"
        | "wait_agent"
        | "close_agent"
        | "list_agents" => ToolCategory::Subagent,
        _ => ToolCategory::Other,
    }
}

/// Category of a Gemini CLI tool: its MCP tools are named
/// `mcp_SERVER_TOOL` and none of its built-ins starts with `mcp_`, so that
/// prefix is MCP here only (another provider's `mcp_…` tool keeps
/// [`tool_category`]'s answer).
pub fn gemini_tool_category(name: &str) -> ToolCategory {
    if name.starts_with("mcp_") {
        ToolCategory::Mcp
    } else {
        tool_category(name)
    }
}

/// Paths touched by an `apply_patch` envelope (Codex).
pub fn apply_patch_paths(patch: &str) -> Vec<ToolPath> {
    let mut out: Vec<ToolPath> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end();
        if let Some(p) = line.strip_prefix("*** Add File: ") {
            out.push(ToolPath::new(p.trim(), PathAccess::Create));
        } else if let Some(p) = line.strip_prefix("*** Update File: ") {
            out.push(ToolPath::new(p.trim(), PathAccess::Write));
        } else if let Some(p) = line.strip_prefix("*** Delete File: ") {
            out.push(ToolPath::new(p.trim(), PathAccess::Delete));
        } else if let Some(p) = line.strip_prefix("*** Move to: ") {
            // The preceding Update names the source: it becomes rename_from.
            if let Some(last) = out.last_mut()
                && last.access == PathAccess::Write
            {
                last.access = PathAccess::RenameFrom;
                let from = last.path.clone();
                let mut to = ToolPath::new(p.trim(), PathAccess::Rename);
                to.previous_path = Some(from);
                out.push(to);
            }
        }
    }
    out
}

/// Shell-style joining of an argv for display (`["bash","-lc","ls -a"]`).
pub fn join_argv(argv: &[String]) -> String {
    let mut s = String::new();
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let plain = !a.is_empty()
            && a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&c));
        if plain {
            s.push_str(a);
        } else {
            s.push('\'');
            s.push_str(&a.replace('\'', "'\\''"));
            s.push('\'');
        }
    }
    s
}

/// Returns a string field of a JSON object if present and a string.
pub fn jstr<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|x| x.as_str())
}

/// An exit code from a JSON value: an integer that fits `i32`, else `None`.
pub fn exit_code_of(v: &serde_json::Value) -> Option<i32> {
    v.as_i64().and_then(|c| i32::try_from(c).ok())
}

/// The exit code stated by one line of a tool's output that starts with
/// `label` (`Exit code:`, `Exit Code:`, `Exit code`, `Process exited with
/// code`): the rest of the line must be exactly one integer that fits `i32`.
pub fn labelled_exit_code(line: &str, label: &str) -> Option<i32> {
    line.trim().strip_prefix(label)?.trim().parse().ok()
}

/// An environment variable holding an absolute path (a relative one is
/// ignored, as the providers' own variables are only honoured absolute).
pub(crate) fn env_abs(name: &str) -> Option<PathBuf> {
    let v = std::env::var_os(name)?;
    let p = PathBuf::from(v);
    p.is_absolute().then_some(p)
}

/// The invoking user's home: `SUDO_USER`'s when running as root under sudo,
/// else `$HOME`, else the passwd entry of the real uid.
pub fn default_home() -> Result<PathBuf> {
    // Under sudo after dropping to the caller (see `privileges`): the
    // caller's own passwd home, not the HOME sudo left in the environment.
    if let Some(uid) = std::env::var("SUDO_UID")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        && uid != 0
        && nix::unistd::getuid().as_raw() == uid
        && let Ok(Some(user)) = nix::unistd::User::from_uid(uid.into())
    {
        return Ok(user.dir);
    }
    if nix::unistd::geteuid().is_root()
        && let Ok(u) = std::env::var("SUDO_USER")
        && !u.is_empty()
        && u != "root"
        && let Ok(Some(user)) = nix::unistd::User::from_name(&u)
    {
        return Ok(user.dir);
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    match nix::unistd::User::from_uid(nix::unistd::getuid()) {
        Ok(Some(u)) => Ok(u.dir),
        _ => Err(SessionError::NoHome),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labelled_exit_codes() {
        assert_eq!(labelled_exit_code("Exit code: 3", "Exit code:"), Some(3));
        assert_eq!(
            labelled_exit_code(" Exit Code: -1 ", "Exit Code:"),
            Some(-1)
        );
        assert_eq!(labelled_exit_code("Exit code 3", "Exit code"), Some(3));
        assert_eq!(
            labelled_exit_code("Process exited with code 127", "Process exited with code"),
            Some(127)
        );
        // Not exactly one integer after the label: not an exit code.
        assert_eq!(labelled_exit_code("Exit code 3 of 4", "Exit code"), None);
        assert_eq!(labelled_exit_code("Exit code: 3", "Exit code"), None);
        assert_eq!(
            labelled_exit_code("Exit code: 99999999999", "Exit code:"),
            None
        );
        assert_eq!(
            labelled_exit_code("Output: Exit code: 3", "Exit code:"),
            None
        );
        assert_eq!(exit_code_of(&serde_json::json!(127)), Some(127));
        assert_eq!(exit_code_of(&serde_json::json!("1")), None);
        assert_eq!(exit_code_of(&serde_json::json!(1u64 << 40)), None);
    }

    #[test]
    fn ts_roundtrip() {
        let ms = parse_ts("2026-03-01T09:00:02.100Z");
        assert_eq!(ms, Some(1_772_355_602_100));
        assert_eq!(format_ts(1_772_355_602_100), "2026-03-01T09:00:02.100Z");
        assert_eq!(
            parse_ts("2026-03-01T10:00:02.1+01:00"),
            Some(1_772_355_602_100)
        );
        assert_eq!(parse_ts("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ts("garbage"), None);
        assert_eq!(parse_ts("2026-13-01T00:00:00Z"), None);
    }

    #[test]
    fn civil_dates_round_trip() {
        // Moved from `clock` with the hand-written calendar it tested: the same
        // days (year 0, around the epoch, 2000, 2026, 9999-12-31) round-trip.
        for days in [-719_468, -1, 0, 11_016, 20_787, 2_932_896] {
            let ms = days * 86_400_000;
            assert_eq!(parse_ts(&format_ts(ms)), Some(ms));
        }
        assert_eq!(format_ts(-719_468 * 86_400_000), "0000-03-01T00:00:00.000Z");
        assert_eq!(
            format_ts(2_932_896 * 86_400_000),
            "9999-12-31T00:00:00.000Z"
        );
    }

    #[test]
    fn ts_edges() {
        // Epoch, pre-1970, leap day, the last millisecond of year 9999, year 0.
        assert_eq!(format_ts(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ts(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(parse_ts("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(
            parse_ts("2024-02-29T12:34:56.789Z"),
            Some(1_709_210_096_789)
        );
        assert_eq!(format_ts(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
        assert_eq!(
            parse_ts("9999-12-31T23:59:59.999Z"),
            Some(253_402_300_799_999)
        );
        assert_eq!(format_ts(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(parse_ts("0000-01-01T00:00:00Z"), Some(-62_167_219_200_000));
        assert_eq!(format_ts(-62_167_219_200_000), "0000-01-01T00:00:00.000Z");
        // Fractions past milliseconds are truncated, not rounded.
        assert_eq!(parse_ts("1970-01-01T00:00:00.123999999Z"), Some(123));
        assert_eq!(parse_ts("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(parse_ts("1970-01-01T00:00:00.Z"), None);
        // The tolerant shapes providers write: no zone (UTC), a space or `t`,
        // offsets with or without a colon or minutes, surrounding blanks.
        assert_eq!(parse_ts("1970-01-01 00:00:01"), Some(1000));
        assert_eq!(parse_ts("1970-01-01t00:00:01z"), Some(1000));
        assert_eq!(parse_ts(" 1970-01-01T01:00:00+0100 "), Some(0));
        assert_eq!(parse_ts("1970-01-01T01:00:00+01"), Some(0));
        assert_eq!(parse_ts("1969-12-31T23:30:00-00:30"), Some(0));
        // Text after the zone is ignored; a day past the month's end and a
        // leap second roll over rather than failing.
        assert_eq!(parse_ts("1970-01-01T00:00:01Z[UTC]"), Some(1000));
        assert_eq!(
            parse_ts("2026-02-31T00:00:00Z"),
            parse_ts("2026-03-03T00:00:00Z")
        );
        assert_eq!(parse_ts("1970-01-01T00:00:60Z"), Some(60_000));
        // Malformed: None, never a panic.
        assert_eq!(parse_ts("1970-01-01T00:00:00X"), None);
        assert_eq!(parse_ts("1970-01-01T24:00:00Z"), None);
        assert_eq!(parse_ts("1970-00-01T00:00:00Z"), None);
        assert_eq!(parse_ts("1970-01-32T00:00:00Z"), None);
        assert_eq!(parse_ts("1970-01-01T00:00:00+1"), None);
        assert_eq!(parse_ts("+970-01-01T00:00:00Z"), None);
        assert_eq!(parse_ts("1970-01-01T00:00"), None);
        assert_eq!(parse_ts("１９７０-01-01T00:00:00Z"), None);
    }

    #[test]
    fn gemini_mcp_names_are_mcp_only_for_gemini() {
        assert_eq!(gemini_tool_category("mcp_fs_write_file"), ToolCategory::Mcp);
        assert_eq!(gemini_tool_category("write_file"), ToolCategory::Edit);
        assert_eq!(
            gemini_tool_category("run_shell_command"),
            ToolCategory::Shell
        );
        assert_eq!(tool_category("mcp_fs_write_file"), ToolCategory::Other);
        assert_eq!(tool_category("mcp__fs__write_file"), ToolCategory::Mcp);
    }

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn patch_paths() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.rs\n*** Move to: c.rs\n@@\n*** Delete File: d\n*** End Patch";
        let v = apply_patch_paths(p);
        let got: Vec<_> = v.iter().map(|t| (t.path.as_str(), t.access)).collect();
        assert_eq!(
            got,
            vec![
                ("a.txt", PathAccess::Create),
                ("b.rs", PathAccess::RenameFrom),
                ("c.rs", PathAccess::Rename),
                ("d", PathAccess::Delete)
            ]
        );
        assert_eq!(v[2].previous_path.as_deref(), Some("b.rs"));
    }

    #[test]
    fn domains() {
        assert_eq!(
            url_domain("https://Docs.rs:443/x?y"),
            Some("docs.rs".into())
        );
        assert_eq!(
            domains_in_text("read https://a.io/x and http://b.dev then https://a.io/y"),
            vec!["a.io".to_string(), "b.dev".to_string()]
        );
    }
}
