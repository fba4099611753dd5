//! Live states of one opencode session from its newest rows. The database
//! is no line tail (`live::read_tail` reads nothing for it): a caller that
//! knows the session id asks [`facts`], which judges the newest few
//! messages and their parts (`store::newest_rows`: one read transaction).
//!
//! Working: the newest assistant message has no `time.completed`, or one
//! of its tool parts is `pending`/`running`, or a user message is newer
//! than every assistant message. Your turn: the newest assistant message
//! completed with `finish` `stop` (its id is the turn key). A refusal
//! (`error.data.statusCode` 429 / 401) is a signal. Not said: whether the
//! opencode process is alive (its lock `$XDG_STATE_HOME/opencode/locks/
//! <sha1>.lock/` stays after exit; the pid in `meta.json` must be checked
//! by the caller), and permission prompts (opencode keeps them in memory).

use std::path::Path;

use jiff::Timestamp;
use serde_json::Value;

use crate::Provider;
use crate::error::Result;
use crate::live::{Signal, TailFacts, TurnStatus};
use crate::util::jstr;

/// How many of the newest messages are read.
const NEWEST: usize = 8;

/// What the newest rows of session `id` in `db` say.
pub fn facts(db: &Path, id: &str) -> Result<TailFacts> {
    let rows = super::store::newest_rows(db, id, NEWEST)?;
    let mut f = TailFacts::empty(Provider::Opencode);
    f.session_id = Some(id.to_string());
    f.cwd = rows.directory;
    // Newest first.
    let mut msgs: Vec<(String, Value)> = Vec::new();
    for row in rows.messages {
        match row.and_then(|(mid, data)| Some((mid, serde_json::from_str(&data).ok()?))) {
            Some(m) => msgs.push(m),
            None => f.skipped_lines += 1,
        }
    }
    let Some((newest_id, newest)) = msgs.first() else {
        return Ok(f);
    };
    f.last_activity = msgs.iter().filter_map(|(_, m)| last_time(m)).max();
    f.model = msgs
        .iter()
        .find_map(|(_, m)| jstr(m, "modelID").map(str::to_string));
    if jstr(newest, "role") != Some("assistant") {
        f.turn = TurnStatus::Open;
        return Ok(f);
    }
    let open_tool = rows.open_tools_of_newest > 0;
    f.signal = signal(newest);
    let completed = newest
        .get("time")
        .and_then(|t| t.get("completed"))
        .is_some_and(|c| !c.is_null());
    f.turn = if !completed || open_tool {
        TurnStatus::Open
    } else if jstr(newest, "finish") == Some("stop") || newest.get("error").is_some() {
        TurnStatus::Done {
            key: newest_id.clone(),
        }
    } else {
        // Completed with `tool-calls`: the next step is about to start.
        TurnStatus::Open
    };
    Ok(f)
}

fn last_time(m: &Value) -> Option<Timestamp> {
    let t = m.get("time")?;
    let ms = t
        .get("completed")
        .and_then(Value::as_i64)
        .or_else(|| t.get("created").and_then(Value::as_i64))?;
    Timestamp::from_millisecond(ms).ok()
}

fn signal(m: &Value) -> Option<Signal> {
    let code = m.get("error")?.get("data")?.get("statusCode")?.as_i64()?;
    match code {
        429 => Some(Signal::RateLimited { resets_at: None }),
        401 | 403 => Some(Signal::AuthRequired),
        _ => None,
    }
}
