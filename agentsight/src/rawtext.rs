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
    fn json_outputs_show_the_escaped_form() {
        let s = exact_text(b"/w/f\xff");
        let json = escaped_json(&serde_json::to_string(&serde_json::json!({ "path": s })).unwrap());
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["path"], "/w/f\\xff");
    }
}
