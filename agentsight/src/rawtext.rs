//! Kernel byte strings (paths, argv, comm) as text without losing a byte.
//!
//! Linux names are bytes; most are UTF-8, some are not. Replacing invalid
//! bytes with U+FFFD would make two distinct names one (`f\xff` and `f\xfe`
//! both `f�`). Instead each byte of an invalid sequence becomes one code point
//! of Supplementary Private Use Area-B, U+10FF00 + byte: every string
//! operation (joining a cwd, normalising `..`, glob matching) keeps working,
//! the capture stays valid UTF-8 for every reader, and the mapping is undone
//! exactly ([`raw_bytes`]). Outputs show such a byte as `\xNN` ([`escaped`]);
//! `export` also gives the exact bytes in hex. A name that really contains a
//! U+10FFxx character (unassigned, private) would read back as a raw byte:
//! the one ambiguity, accepted.
//!
//! Text outputs go further ([`visible`]): recorded and transcript text is
//! untrusted (a file name, an argv, an agent's answer), and printed raw it
//! could act on the reader's terminal (ESC sequences: clipboard writes,
//! titles, cursor moves), start a line that looks like ours (a newline
//! before `LOSS 0 events lost`) or read differently than it is (U+202E
//! turns `evil` into `live`). Every text output shows such characters
//! escaped; JSON outputs stay exact (their encoder escapes controls, and a
//! reader gets the string itself).

use std::{borrow::Cow, fmt::Write as _};

/// First code point of the raw-byte range.
const RAW_BASE: u32 = 0x10_FF00;

/// `bytes` as text: valid UTF-8 as is, each byte of an invalid sequence as
/// U+10FF00 + byte.
pub fn exact_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                // `valid` is valid UTF-8 by the error's own account.
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = e.error_len().unwrap_or(after.len()).min(after.len());
                for &b in &after[..bad] {
                    out.push(raw_char(b));
                }
                rest = &after[bad..];
            }
        }
    }
}

fn raw_char(b: u8) -> char {
    char::from_u32(RAW_BASE + u32::from(b)).unwrap_or(char::REPLACEMENT_CHARACTER)
}

fn raw_byte(c: char) -> Option<u8> {
    let v = c as u32;
    (RAW_BASE..=RAW_BASE + 0xff)
        .contains(&v)
        .then(|| (v - RAW_BASE) as u8)
}

/// Whether `s` holds bytes that were not UTF-8.
pub fn has_raw(s: &str) -> bool {
    s.chars().any(|c| raw_byte(c).is_some())
}

/// The exact bytes `s` was made from by [`exact_text`].
pub fn raw_bytes(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match raw_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    out
}

/// `s` for display: each raw byte as `\xNN`.
pub fn escaped(s: &str) -> String {
    if !has_raw(s) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match raw_byte(c) {
            Some(b) => out.push_str(&format!("\\x{b:02x}")),
            None => out.push(c),
        }
    }
    out
}

/// `s` for a text output, on one line: every character that would act on a
/// terminal, break the line or hide itself is shown escaped — a raw byte as
/// `\xNN`; `\n`, `\r`, `\t`; any other control character as `\xNN` (C0,
/// DEL) or `\u{NN}` (C1); bidi and other invisible format characters
/// (Unicode Cf) and the line and paragraph separators as `\u{NNNN}`.
/// Everything else, a backslash included, is as is: the form is for
/// reading, `export` and the JSON outputs are exact.
pub fn visible(s: &str) -> Cow<'_, str> {
    shown(s, false)
}

/// [`visible`], except that a plain newline stays one: for a whole rendered
/// output whose fields are already [`visible`] (a second guard), or for
/// multi-line text whose caller prefixes every line so that none can pass
/// for one of ours.
pub fn visible_lines(s: &str) -> Cow<'_, str> {
    shown(s, true)
}

fn shown(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let needs = |c: char| needs_escape(c) && !(keep_newlines && c == '\n');
    if !s.chars().any(needs) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs(c) {
            out.push(c);
            continue;
        }
        let _ = match (raw_byte(c), c) {
            (Some(b), _) => write!(out, "\\x{b:02x}"),
            (None, '\n') => write!(out, "\\n"),
            (None, '\r') => write!(out, "\\r"),
            (None, '\t') => write!(out, "\\t"),
            (None, c) if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
            (None, c) => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// A raw byte, a control character (Cc: C0, DEL, C1), a format character
/// (Cf: bidi embeddings, overrides and isolates, zero-width space and
/// joiners, the BOM, soft hyphen, tags) or a line or paragraph separator.
fn needs_escape(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    raw_byte(c).is_some()
        || matches!(
            get_general_category(c),
            G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator
        )
}

/// [`escaped`] inside serialized JSON: the backslash of `\xNN` is itself
/// escaped, so the string value reads `\xNN`.
pub fn escaped_json(json: &str) -> String {
    if !has_raw(json) {
        return json.to_owned();
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match raw_byte(c) {
            Some(b) => out.push_str(&format!("\\\\x{b:02x}")),
            None => out.push(c),
        }
    }
    out
}

/// Lowercase hex of `s`'s exact bytes.
pub fn hex(s: &str) -> String {
    raw_bytes(s).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_bytes_survive_and_stay_distinct() {
        let a = exact_text(b"/w/f\xff");
        let b = exact_text(b"/w/f\xfe");
        assert_ne!(a, b);
        assert_eq!(raw_bytes(&a), b"/w/f\xff");
        assert_eq!(escaped(&a), "/w/f\\xff");
        assert_eq!(hex(&b), "2f772f66fe");
        // A truncated multi-byte sequence at the end, and valid UTF-8 around.
        let c = exact_text(
            "é/\u{1F600}"
                .as_bytes()
                .iter()
                .chain(b"\xe2\x82")
                .copied()
                .collect::<Vec<u8>>()
                .as_slice(),
        );
        assert_eq!(escaped(&c), "é/\u{1F600}\\xe2\\x82");
        assert_eq!(raw_bytes(&c).len(), 2 + 1 + 4 + 2);
        // Valid text is untouched.
        assert_eq!(exact_text(b"plain \\x41"), "plain \\x41");
        assert!(!has_raw("plain"));
    }

    #[test]
    fn visible_shows_what_would_act_on_a_terminal() {
        // Plain text, non-ASCII letters and a backslash: untouched, borrowed.
        assert!(matches!(visible("/w/é 中 \\x41"), Cow::Borrowed(_)));
        // ESC, an OSC 52 clipboard write (ended by BEL), CR, LF, tab.
        assert_eq!(
            visible("a\x1b[2Jb\x1b]52;c;ZXZpbA==\x07c\rd\ne\tf"),
            "a\\x1b[2Jb\\x1b]52;c;ZXZpbA==\\x07c\\rd\\ne\\tf"
        );
        // A forged line cannot start: the newline is shown, not made.
        assert_eq!(
            visible("/tmp/x\nLOSS      0 events lost"),
            "/tmp/x\\nLOSS      0 events lost"
        );
        // DEL and C1 controls (CSI U+009B, NEL U+0085).
        assert_eq!(visible("\x7f\u{9b}2J\u{85}"), "\\x7f\\u{9b}2J\\u{85}");
        // Bidi override and isolate, zero-width space and joiner, BOM, soft
        // hyphen, a tag character, the line and paragraph separators.
        assert_eq!(
            visible("\u{202e}live\u{2066}\u{200b}\u{200d}\u{feff}\u{ad}\u{e0041}\u{2028}\u{2029}"),
            "\\u{202e}live\\u{2066}\\u{200b}\\u{200d}\\u{feff}\\u{ad}\\u{e0041}\\u{2028}\\u{2029}"
        );
        // Raw bytes (U+10FFxx) still read `\xNN`, a control byte among them.
        let raw = exact_text(b"f\xff\x1b\xfe");
        assert_eq!(visible(&raw), "f\\xff\\x1b\\xfe");
        // Emoji and their variation selector stay.
        assert_eq!(
            visible("ok \u{1F600}\u{2764}\u{fe0f}"),
            "ok \u{1F600}\u{2764}\u{fe0f}"
        );
    }

    #[test]
    fn visible_lines_keeps_only_the_newline() {
        assert_eq!(
            visible_lines("one\ntwo\r\x1b]0;t\x07\u{202e}"),
            "one\ntwo\\r\\x1b]0;t\\x07\\u{202e}"
        );
        assert!(matches!(visible_lines("a\nb"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_outputs_show_the_escaped_form() {
        let s = exact_text(b"/w/f\xff");
        let json = escaped_json(&serde_json::to_string(&serde_json::json!({ "path": s })).unwrap());
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["path"], "/w/f\\xff");
    }
}
