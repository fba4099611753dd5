//! `agentsight correlate SESSION [--db FILE] [--json]`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use agentsight::{
    correlate::{self, CaptureView, render},
    sessions::{self, AgentSession, DiscoveryOptions},
    store::Capture,
    views::select,
};

/// Line up a session's tool calls with what its processes really did.
#[derive(clap::Args, Debug, Clone)]
pub struct CorrelateArgs {
    /// Session id, or a unique prefix of one.
    pub session: String,
    /// The capture to read (read-only). Without it: the newest `*.db`
    /// capture in the current directory that holds the session.
    #[arg(long, conflicts_with = "docker_container")]
    pub db: Option<PathBuf>,
    /// Print JSON (fields documented in docs/correlate.md).
    #[arg(long)]
    pub json: bool,
    /// Read live transcripts from this home instead of the invoking user's.
    #[arg(long, conflicts_with = "docker_container", value_parser = super::absolute_path())]
    pub home: Option<PathBuf>,
    /// Read the session (exact id) inside these running containers, through
    /// their bridges (repeatable; not with --db: a saved capture and a live
    /// container are never mixed as the session's source).
    #[arg(long = "docker-container", value_name = "NAME")]
    pub docker_container: Vec<String>,
}

/// The live session `id` and where it was read: the home, or (with
/// `--docker-container`) the one container that holds it (fail-closed).
fn live(a: &CorrelateArgs, id: &str) -> Result<Option<(AgentSession, correlate::SessionSource)>> {
    if a.docker_container.is_empty() {
        return Ok(live_session(a.home.as_deref(), id).map(|s| (s, correlate::SessionSource::Home)));
    }
    let (_, s) = super::containers::get(&a.docker_container, id)?;
    Ok(Some((s, correlate::SessionSource::Container)))
}

fn live_session(home: Option<&Path>, id: &str) -> Option<AgentSession> {
    let opts = DiscoveryOptions {
        home: home.map(Path::to_path_buf),
        ..Default::default()
    };
    let r = sessions::find_by_id(&opts, id).ok()??;
    sessions::parse_session(&r).ok()
}

/// Whether the capture stored session `id` from inside a container (meta
/// `container_sessions`, written by `record --docker-container`).
fn from_container(cap: &Capture, id: &str) -> bool {
    cap.run_meta()
        .ok()
        .and_then(|m| m.container_sessions_json)
        .and_then(|v| serde_json::from_str::<Vec<serde_json::Value>>(&v).ok())
        .is_some_and(|list| list.iter().any(|s| s["session_id"] == id))
}

pub fn run(a: &CorrelateArgs) -> Result<i32> {
    let id = a.session.trim();
    if id.is_empty() {
        bail!("give a session id (or a unique prefix)");
    }
    // Which capture: the one given, or the newest here that holds the session.
    let (cap, stored) = match &a.db {
        Some(db) => {
            let cap = Capture::open_quick(db)?;
            let stored = cap.stored_sessions(id)?;
            (cap, stored)
        }
        None => select::newest_holding(Path::new("."), id).with_context(|| {
            format!("no capture in the current directory holds session {id}; pass --db FILE")
        })?,
    };
    super::say_note(&cap);
    if stored.len() > 1 {
        let ids: Vec<&str> = stored
            .iter()
            .map(|s| s.session.session_id.as_str())
            .collect();
        bail!("{id} is ambiguous in {}: {}", cap.path, ids.join(", "));
    }
    let view = CaptureView::load(cap.reader())?;
    let report = match stored.into_iter().next() {
        Some(s) => {
            let (bound, unmatched) = view.stored_trees(s.row)?;
            // With --db everything comes from the capture; otherwise the live
            // transcript (it may have grown since) when it is still there.
            // A session read inside a container is never looked up again in
            // a host home (the same path there may be someone else's).
            let (session, source) = match &a.db {
                None if a.docker_container.is_empty()
                    && from_container(&cap, &s.session.session_id) =>
                {
                    (s.session, correlate::SessionSource::Capture)
                }
                None => live(a, &s.session.session_id)?
                    .unwrap_or((s.session, correlate::SessionSource::Capture)),
                Some(_) => (s.session, correlate::SessionSource::Capture),
            };
            // A capture older than stored servers: identified now.
            let servers = view.session_mcp_servers(s.row, &session, &bound)?;
            correlate::correlate_with(&view, &session, source, &bound, unmatched, &servers)?
        }
        None => {
            // A capture that stored no sessions (older, or recorded with
            // --agent before binding): match now against the live transcript.
            let (session, source) = live(a, id)?.with_context(|| {
                format!(
                    "session {id} is neither stored in {} nor found in the home",
                    cap.path
                )
            })?;
            let (bound, unmatched) = view.match_now(&session)?;
            let servers = view.mcp_servers_now(&session, &bound)?;
            correlate::correlate_with(&view, &session, source, &bound, unmatched, &servers)?
        }
    };
    // Bytes that were not UTF-8 are shown `\xNN` (see rawtext).
    let out = if a.json {
        let mut s = serde_json::to_string_pretty(&report)?;
        s.push('\n');
        agentsight::rawtext::escaped_json(&s)
    } else {
        let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let text = render::text(&report, colour);
        // `render` shows every recorded string escaped (`rawtext::visible`);
        // without colour, the whole is checked once more (our ESCs are
        // colour's only).
        if colour {
            text
        } else {
            agentsight::rawtext::visible_lines(&text).into_owned()
        }
    };
    super::write_stdout(out.as_bytes())?;
    Ok(0)
}
