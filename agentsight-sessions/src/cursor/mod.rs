//! Cursor agent transcripts (`~/.cursor/projects/<slug>/agent-transcripts/`)
//! and read-only enrichment from Cursor's `state.vscdb`.
//!
//! Transcripts have no timestamps, model, usage or tool results: tool events
//! therefore have status `unknown` and no times, and the session has no
//! start/end unless `state.vscdb` records them. Subagents
//! (`agent-transcripts/<id>/subagents/*.jsonl`) are folded into the parent.

/// The tail reader of the live layer (`crate::live::read_tail`).
pub(crate) mod live;

/// Where transcripts live and how they are named.
pub(crate) mod layout;

/// Where its MCP servers are configured.
pub(crate) mod mcp;

/// The serde shapes of a transcript line (shared with `live`).
pub(crate) mod wire;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::Value;

use super::claude::describe_tool;
use super::de::{Content, ObjOr};
use super::error::{Result, SessionError};
use super::util;
use super::{
    AgentSession, ErrorEvent, ErrorKind, LlmResponse, ParseStats, Provider, SubagentInfo,
    TokenUsage, ToolEvent, ToolStatus,
};
use crate::mcp::McpCall;
use crate::provider::{ProviderSpec, TailSpec};
use wire::Block;

/// Cursor's row of the provider table.
pub(crate) const SPEC: ProviderSpec = ProviderSpec {
    provider: Provider::Cursor,
    name: "cursor",
    aliases: &[],
    cli_name: "cursor-agent",
    roots: layout::roots,
    scan_root: layout::scan_root,
    after_scan: None,
    path_rank: 0,
    id_for_path: layout::id_for_path,
    candidate_id: crate::provider::stem_id,
    index_id: crate::provider::stem_index,
    is_transcript: layout::is_transcript,
    watch: layout::watch,
    header_id: false,
    verify_id: crate::provider::name_is_id,
    parse: |path, _, _| parse(path),
    enrich: Some(enrich_from_state),
    mcp: mcp::SPEC,
    tail: TailSpec {
        read: live::read,
        first_line: None,
        from_path: live::from_path,
        widens: false,
        document: None,
    },
};

type Line = wire::Line<Block>;

/// `agent-transcripts/` dir and the session's own subdir for a transcript in
/// either the flat (`<id>.jsonl`) or nested (`<id>/<id>.jsonl`) layout.
pub(crate) fn subagent_dir(path: &Path) -> Option<PathBuf> {
    let stem = path.file_stem()?;
    let parent = path.parent()?;
    if parent.file_name() == Some(stem) {
        Some(parent.join("subagents"))
    } else {
        Some(parent.join(stem).join("subagents"))
    }
}

pub(crate) fn subagent_files(path: &Path) -> Vec<PathBuf> {
    let Some(dir) = subagent_dir(path) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("jsonl"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub(crate) fn parse(path: &Path) -> Result<AgentSession> {
    let id = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| SessionError::Format {
            path: path.to_path_buf(),
            provider: "cursor",
            reason: "file name is not UTF-8".into(),
        })?
        .to_string();
    let mut s = AgentSession::new(Provider::Cursor, id, path.to_path_buf());
    read_file(&mut s, path, None)?;
    for f in subagent_files(path) {
        s.subagents.push(SubagentInfo {
            agent_id: f.file_stem().and_then(|x| x.to_str()).map(str::to_string),
            kind: None,
            description: None,
            parent_call_id: None,
            source_path: f.clone(),
            models: Vec::new(),
            usage: TokenUsage::default(),
            responses: 0,
            tools: 0,
        });
        let si = s.subagents.len() - 1;
        if let Err(e) = read_file(&mut s, &f, Some(si)) {
            tracing::debug!(error = %e, "skipping unreadable cursor subagent transcript");
            s.stats.unreadable_files += 1;
        }
    }
    Ok(s)
}

fn read_file(s: &mut AgentSession, path: &Path, sub: Option<usize>) -> Result<()> {
    let f = util::open_regular(path)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut stats = std::mem::take(&mut s.stats);
    stats.files += 1;
    stats.bytes += len;
    let r = util::for_each_line(f, &mut stats, |line, last, st| {
        if let Some(l) = util::parse_line::<Line>(line, last, st) {
            on_line(s, l, sub, st);
        }
    });
    s.stats = stats;
    r.map_err(|e| SessionError::io(path, e))
}

/// The text inside `<user_query>…</user_query>`, or the whole text.
fn user_query(text: &str) -> &str {
    if let Some(i) = text.find("<user_query>") {
        let rest = &text[i + "<user_query>".len()..];
        let end = rest.find("</user_query>").unwrap_or(rest.len());
        return rest[..end].trim();
    }
    text.trim()
}

fn on_line(s: &mut AgentSession, mut l: Line, sub: Option<usize>, st: &mut ParseStats) {
    if l.kind.as_deref() == Some("turn_ended") {
        if l.status.as_deref() == Some("error") {
            s.errors.push(ErrorEvent {
                prompt_index: if sub.is_none() {
                    s.current_prompt()
                } else {
                    None
                },
                subagent: sub,
                ts_ms: None,
                kind: ErrorKind::Error,
                message: l.error.take().unwrap_or_default(),
            });
        }
        return;
    }
    let role = l.role.take().unwrap_or_default();
    let Some(ObjOr::Obj(msg)) = l.message.take() else {
        if role.is_empty() {
            st.unknown_records += 1;
        }
        return;
    };
    // Subagent transcripts carry no link to the parent turn: their events
    // get no prompt index rather than a guessed one.
    let prompt_index = if sub.is_none() {
        s.current_prompt()
    } else {
        None
    };
    match role.as_str() {
        "user" => {
            let text = match msg.content {
                Content::Text(t) => t,
                Content::Blocks(bs) => bs
                    .into_iter()
                    .filter_map(|mut b| b.text.take())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            let q = user_query(&text);
            if sub.is_none() && !q.is_empty() {
                s.push_prompt(None, q.to_string());
            }
        }
        "assistant" => {
            let mut text = String::new();
            let mut tools = Vec::new();
            match msg.content {
                Content::Text(t) => text = t,
                Content::Blocks(bs) => {
                    for mut b in bs {
                        match b.kind.as_deref() {
                            Some("text") => {
                                if let Some(t) = b.text.take() {
                                    if !text.is_empty() {
                                        text.push('\n');
                                    }
                                    text.push_str(&t);
                                }
                            }
                            Some("tool_use") => {
                                let name = b.name.take().unwrap_or_default();
                                let input = b.input.take().unwrap_or(Value::Null);
                                let d = describe_tool(&name, &input);
                                if s.cwd.is_none() && sub.is_none() {
                                    s.cwd = d.cwd.clone();
                                }
                                let mcp = (name == "CallMcpTool")
                                    .then(|| McpCall::from_cursor_input(&input));
                                tools.push(ToolEvent {
                                    prompt_index,
                                    subagent: sub,
                                    category: util::tool_category(&name),
                                    name,
                                    call_id: b.id.take(),
                                    command: d.command,
                                    command_truncated: false,
                                    cwd: d.cwd,
                                    status: ToolStatus::Unknown,
                                    exit_code: None,
                                    start_ms: None,
                                    end_ms: None,
                                    paths: d.paths,
                                    domains: d.domains,
                                    mcp,
                                });
                            }
                            _ => {}
                        }
                    }
                }
            }
            if !text.is_empty() || !tools.is_empty() {
                s.responses.push(LlmResponse {
                    prompt_index,
                    subagent: sub,
                    ts_ms: None,
                    model: None,
                    native_id: None,
                    request_id: None,
                    phase: None,
                    text,
                    text_truncated: false,
                    tokens: None,
                });
            }
            s.tools.extend(tools);
        }
        _ => st.unknown_records += 1,
    }
}

/// Standard locations of Cursor's global `state.vscdb` under a home.
pub fn state_db_candidates(home: &Path) -> Vec<PathBuf> {
    [
        ".config/Cursor/User/globalStorage/state.vscdb",
        "Library/Application Support/Cursor/User/globalStorage/state.vscdb",
        "AppData/Roaming/Cursor/User/globalStorage/state.vscdb",
    ]
    .iter()
    .map(|p| home.join(p))
    .filter(|p| p.is_file())
    .collect()
}

/// Opens an SQLite database strictly read-only; a held lock makes reads
/// wait briefly instead of failing at once.
pub(crate) fn open_ro(path: &Path) -> Result<Connection> {
    // A provider database is opened by SQLite only if it is a regular file
    // (a FIFO named `state_9.sqlite` would hang the open), never via a link.
    crate::safefs::open_regular(path, true).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => SessionError::NotAFile {
            path: path.to_path_buf(),
        },
        _ => SessionError::io(path, e),
    })?;
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| SessionError::Sqlite {
        path: path.to_path_buf(),
        source: e,
    })?;
    c.busy_timeout(Duration::from_millis(250))
        .map_err(|e| SessionError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        })?;
    Ok(c)
}

/// Facts `state.vscdb` holds about one composer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComposerFacts {
    pub found: bool,
    pub created_ms: Option<i64>,
    pub updated_ms: Option<i64>,
    pub model: Option<String>,
    pub workspace: Option<String>,
    pub title: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

fn value_json(v: rusqlite::types::ValueRef<'_>) -> Option<Value> {
    match v {
        rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
            serde_json::from_slice(b).ok()
        }
        _ => None,
    }
}

fn uri_path(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.strip_prefix("file://").unwrap_or(s).to_string()),
        Value::Object(_) => v
            .get("fsPath")
            .or_else(|| v.get("path"))
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .or_else(|| v.get("uri").and_then(uri_path)),
        _ => None,
    }
}

/// Reads created/updated, model, workspace and summed bubble tokens of a
/// composer. Missing rows leave fields empty.
pub fn composer_facts(c: &Connection, composer_id: &str) -> rusqlite::Result<ComposerFacts> {
    let mut f = ComposerFacts::default();
    // Composer headers (ItemTable `composer.composerHeaders`).
    let headers: Option<Value> = c
        .query_row(
            "SELECT value FROM ItemTable WHERE key = 'composer.composerHeaders'",
            [],
            |r| Ok(value_json(r.get_ref(0)?)),
        )
        .optional()
        .or_else(ignore_missing_table)?
        .flatten();
    if let Some(all) = headers
        .as_ref()
        .and_then(|h| h.get("allComposers"))
        .and_then(|a| a.as_array())
        && let Some(h) = all
            .iter()
            .find(|h| h.get("composerId").and_then(|x| x.as_str()) == Some(composer_id))
    {
        f.found = true;
        f.created_ms = h.get("createdAt").and_then(|x| x.as_i64());
        f.updated_ms = h.get("lastUpdatedAt").and_then(|x| x.as_i64());
        f.title = h.get("name").and_then(|x| x.as_str()).map(str::to_string);
        f.workspace = h
            .get("workspaceIdentifier")
            .and_then(|w| w.get("uri").or(Some(w)))
            .and_then(uri_path);
    }
    // Composer data (cursorDiskKV `composerData:<id>`).
    let data: Option<Value> = c
        .query_row(
            "SELECT value FROM cursorDiskKV WHERE key = ?1",
            [format!("composerData:{composer_id}")],
            |r| Ok(value_json(r.get_ref(0)?)),
        )
        .optional()
        .or_else(ignore_missing_table)?
        .flatten();
    if let Some(d) = &data {
        f.found = true;
        f.created_ms = f
            .created_ms
            .or_else(|| d.get("createdAt").and_then(|x| x.as_i64()));
        f.updated_ms = f
            .updated_ms
            .or_else(|| d.get("lastUpdatedAt").and_then(|x| x.as_i64()));
        f.model = d
            .get("modelConfig")
            .and_then(|m| m.get("modelName"))
            .and_then(|x| x.as_str())
            .map(str::to_string);
        f.title = f
            .title
            .take()
            .or_else(|| d.get("name").and_then(|x| x.as_str()).map(str::to_string));
        if f.workspace.is_none() {
            f.workspace = ["workspaceFolder", "workspacePath", "workspaceUri", "cwd"]
                .iter()
                .find_map(|k| d.get(*k).and_then(uri_path));
        }
    }
    // Bubbles: a key range scan uses the table's unique index on `key`.
    let lo = format!("bubbleId:{composer_id}:");
    let hi = format!("bubbleId:{composer_id};");
    let stmt = c.prepare("SELECT value FROM cursorDiskKV WHERE key >= ?1 AND key < ?2");
    let mut stmt = match stmt {
        Ok(s) => s,
        Err(e) => {
            ignore_missing_table::<()>(e)?;
            return Ok(f);
        }
    };
    let mut rows = stmt.query([lo, hi])?;
    while let Some(r) = rows.next()? {
        let Some(v) = value_json(r.get_ref(0)?) else {
            continue;
        };
        f.found = true;
        if let Some(tc) = v.get("tokenCount") {
            f.input_tokens += tc.get("inputTokens").and_then(|x| x.as_u64()).unwrap_or(0);
            f.output_tokens += tc.get("outputTokens").and_then(|x| x.as_u64()).unwrap_or(0);
        }
        if f.model.is_none() {
            f.model = v
                .get("modelInfo")
                .and_then(|m| m.get("modelName"))
                .and_then(|x| x.as_str())
                .filter(|m| !m.is_empty())
                .map(str::to_string);
        }
    }
    Ok(f)
}

fn ignore_missing_table<T: Default>(e: rusqlite::Error) -> rusqlite::Result<T> {
    match &e {
        rusqlite::Error::SqliteFailure(_, Some(msg)) if msg.contains("no such table") => {
            Ok(T::default())
        }
        _ => Err(e),
    }
}

/// Enriches a parsed Cursor session from `state.vscdb` under `home` (or the
/// current user's home). Any failure leaves the transcript-derived session as
/// it is and adds a note to `stats.notes`.
pub fn enrich_from_state(s: &mut AgentSession, home: Option<&Path>) {
    let home = match home {
        Some(h) => h.to_path_buf(),
        None => match super::util::default_home() {
            Ok(h) => h,
            Err(_) => return,
        },
    };
    for db in state_db_candidates(&home) {
        match enrich_from_db(s, &db) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => {
                tracing::debug!(error = %e, "cursor state.vscdb not usable");
                s.stats
                    .notes
                    .push(format!("cursor state.vscdb not used: {e}"));
            }
        }
    }
}

/// Enriches from one database; `Ok(true)` when it knew the composer.
pub fn enrich_from_db(s: &mut AgentSession, db: &Path) -> Result<bool> {
    let c = open_ro(db)?;
    let map = |e| SessionError::Sqlite {
        path: db.to_path_buf(),
        source: e,
    };
    let f = composer_facts(&c, &s.session_id).map_err(map)?;
    let mut sub_facts = Vec::new();
    for sub in &s.subagents {
        let facts = match &sub.agent_id {
            Some(a) => composer_facts(&c, a).map_err(map)?,
            None => ComposerFacts::default(),
        };
        sub_facts.push(facts);
    }
    if !f.found && sub_facts.iter().all(|x| !x.found) {
        return Ok(false);
    }
    if f.found {
        s.conversation_id = Some(s.session_id.clone());
    }
    if s.start_ms.is_none() {
        s.start_ms = f.created_ms;
    }
    if s.end_ms.is_none() {
        s.end_ms = f.updated_ms;
    }
    if s.cwd.is_none() {
        s.cwd = f.workspace.clone();
    }
    if s.title.is_none() {
        s.title = f.title.clone().filter(|t| !t.is_empty());
    }
    if let Some(m) = &f.model {
        s.see_model(m);
    }
    let add = |s: &mut AgentSession, facts: &ComposerFacts, sub: Option<usize>| {
        if facts.input_tokens == 0 && facts.output_tokens == 0 {
            return;
        }
        let u = TokenUsage::new(facts.input_tokens, facts.output_tokens, 0, 0, 0);
        s.usage.add(&u);
        let key = facts
            .model
            .clone()
            .or_else(|| f.model.clone())
            .unwrap_or_else(|| "unknown".to_string());
        s.usage_by_model.entry(key).or_default().add(&u);
        if let Some(si) = sub
            && let Some(sa) = s.subagents.get_mut(si)
        {
            sa.usage.add(&u);
        }
    };
    add(s, &f, None);
    for (i, facts) in sub_facts.iter().enumerate() {
        if let Some(m) = &facts.model {
            s.see_model(m);
            if let Some(sa) = s.subagents.get_mut(i)
                && !sa.models.contains(m)
            {
                sa.models.push(m.clone());
            }
        }
        add(s, facts, Some(i));
    }
    Ok(true)
}
