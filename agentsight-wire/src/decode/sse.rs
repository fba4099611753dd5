//! Server-sent events (WHATWG HTML, "event stream interpretation") and
//! Gemini's JSON array stream. Hand-written: both are parsed from a whole
//! decoded body, which the crates (built for live async streams) do not take.

use serde_json::Value;

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, if any.
    pub name: Option<String>,
    /// The `data:` lines joined with LF.
    pub data: String,
}

/// Parses a whole event stream. A last event with no blank line after it is
/// kept (the standard drops it; a cut stream should still say what it had), noted.
pub fn parse(body: &[u8]) -> (Vec<Event>, Vec<String>) {
    let mut notes = Vec::new();
    let text = String::from_utf8_lossy(body);
    if matches!(text, std::borrow::Cow::Owned(_)) {
        notes.push("event stream not UTF-8: invalid bytes replaced".to_string());
    }
    let mut rest = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut events = Vec::new();
    let mut name: Option<String> = None;
    let mut data = String::new();
    let mut has_data = false;
    while !rest.is_empty() {
        let (line, next) = match rest.find(['\r', '\n']) {
            Some(i) => {
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                (&rest[..i], &rest[i + skip..])
            }
            None => (rest, ""),
        };
        rest = next;
        if line.is_empty() {
            if has_data {
                events.push(Event {
                    name: name.take(),
                    data: std::mem::take(&mut data),
                });
            }
            name = None;
            has_data = false;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "data" => {
                if has_data {
                    data.push('\n');
                }
                data.push_str(value);
                has_data = true;
            }
            "event" => name = Some(value.to_string()),
            // `id` and `retry` steer reconnection only; other fields are ignored by the standard.
            _ => {}
        }
    }
    if has_data {
        events.push(Event { name, data });
        notes.push(format!(
            "SSE event {}: no blank line after it (stream cut?)",
            events.len() - 1
        ));
    }
    (events, notes)
}

/// Whether a body looks like an event stream (when the content type did not say).
pub fn looks_like(body: &[u8]) -> bool {
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map_or(&body[..0], |i| &body[i..]);
    start.starts_with(b"data:") || start.starts_with(b"event:") || start.starts_with(b":")
}

/// Parses a JSON array read as a stream (`[{…},\r\n{…}]`): the elements
/// that are whole, with a note where the array is cut or malformed.
pub fn json_array(body: &[u8]) -> (Vec<Value>, Vec<String>) {
    let mut notes = Vec::new();
    let mut items = Vec::new();
    let skip_ws = |at: &mut usize| {
        while body.get(*at).is_some_and(|b| b.is_ascii_whitespace()) {
            *at += 1;
        }
    };
    let mut at = 0;
    skip_ws(&mut at);
    if body.get(at) != Some(&b'[') {
        notes.push("JSON stream does not start with '['".to_string());
        return (items, notes);
    }
    at += 1;
    loop {
        skip_ws(&mut at);
        match body.get(at) {
            None => {
                notes.push(format!("JSON stream cut after {} elements", items.len()));
                break;
            }
            Some(b']') => break,
            Some(b',') => {
                at += 1;
                continue;
            }
            Some(_) => {}
        }
        let mut stream = serde_json::Deserializer::from_slice(&body[at..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                at += stream.byte_offset();
                items.push(v);
            }
            Some(Err(e)) if e.is_eof() => {
                notes.push(format!("JSON stream element {} cut", items.len()));
                break;
            }
            Some(Err(e)) => {
                notes.push(format!("JSON stream element {}: {e}", items.len()));
                break;
            }
            None => {
                notes.push(format!("JSON stream cut after {} elements", items.len()));
                break;
            }
        }
    }
    (items, notes)
}
