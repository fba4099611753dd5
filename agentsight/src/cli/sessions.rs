//! `agentsight sessions` and `agentsight session show ID`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

// Every string from a transcript or a container's bridge is shown through
// `v` (control, bidi and format characters escaped): a title or a path
// cannot start a line of ours or act on the terminal. JSON stays exact.
use agentsight::correlate::{self, wire::WireReport};
use agentsight::rawtext::visible as v;

use agentsight::sessions::{
    self, AgentSession, DiscoveryOptions, Provider, SessionIndex, SessionSummary, TokenUsage,
    ToolStatus, format_ts,
};

/// List recent agent sessions found in the agents' own transcripts.
#[derive(clap::Args, Debug, Clone)]
pub struct SessionsArgs {
    /// Only this provider: claude, codex, gemini, cursor, copilot, opencode or qwen.
    #[arg(long)]
    pub provider: Option<Provider>,
    /// Rows to show (1..=25).
    #[arg(long, default_value_t = 25)]
    pub limit: usize,
    /// Only sessions updated within this age, e.g. 90s, 30m, 12h, 7d.
    #[arg(long, value_parser = super::parse_duration)]
    pub max_age: Option<Duration>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Read this home instead of the invoking user's (env vars then ignored).
    #[arg(long, conflicts_with = "docker_container", value_parser = super::absolute_path())]
    pub home: Option<PathBuf>,
    /// List the sessions inside this running container instead, read there by
    /// `agentsight bridge` (repeatable; see docs/bridge.md).
    #[arg(long = "docker-container", value_name = "NAME")]
    pub docker_container: Vec<String>,
}

/// Show one session: prompts, tool calls with status and paths, responses,
/// usage per model.
#[derive(clap::Args, Debug, Clone)]
pub struct SessionShowArgs {
    /// Session id (or a unique prefix of at least 8 characters).
    pub id: String,
    /// Print the full session model as JSON.
    #[arg(long)]
    pub json: bool,
    /// Read this home instead of the invoking user's.
    #[arg(long, conflicts_with = "docker_container", value_parser = super::absolute_path())]
    pub home: Option<PathBuf>,
    /// Find the session (exact id) inside these running containers instead
    /// (repeatable; fails unless exactly one holds it and all answer).
    #[arg(long = "docker-container", value_name = "NAME")]
    pub docker_container: Vec<String>,
    /// Also show the model traffic this capture (recorded with `record
    /// --wire`) holds for the session: one line per model exchange (sizes
    /// sent and received, ids, usage; never content), joined to the
    /// transcript's turns, and what one side has and the other lacks.
    #[arg(long, value_name = "CAPTURE")]
    pub wire: Option<PathBuf>,
}

fn finish_output(r: std::io::Result<()>) -> anyhow::Result<()> {
    match r {
        // `agentsight sessions | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// Exit status: 0; with containers, [`super::containers::PARTIAL_LIST`]
/// when some failed (each named on stderr) and the rest were listed.
pub fn run_sessions(args: &SessionsArgs) -> anyhow::Result<i32> {
    if args.limit == 0 {
        bail!("--limit must be at least 1");
    }
    if !args.docker_container.is_empty() {
        return run_container_sessions(args);
    }
    let opts = DiscoveryOptions {
        home: args.home.clone(),
        providers: args.provider.into_iter().collect(),
        limit: args.limit,
        max_age: args.max_age,
    };
    let listing = SessionIndex::new(opts)
        .list()
        .context("discovering agent sessions")?;
    for n in &listing.notes {
        agentsight::sayln!("note: {}", v(n));
    }
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    let r = if args.json {
        serde_json::to_writer_pretty(&mut w, &listing.sessions)
            .map_err(std::io::Error::other)
            .and_then(|_| writeln!(w))
    } else {
        let rows: Vec<Row> = listing.sessions.iter().map(|s| (None, s)).collect();
        write_table(&mut w, &rows)
    };
    finish_output(r.and_then(|_| w.flush())).map(|_| 0)
}

/// `sessions --docker-container …`: the containers' sessions merged, newest
/// first; `--provider` and `--max-age` apply inside each container, before
/// its limit.
fn run_container_sessions(args: &SessionsArgs) -> anyhow::Result<i32> {
    let params = agentsight::bridge::protocol::ListParams {
        limit: args.limit,
        provider: args.provider,
        // Whole seconds, rounded up: never narrower than asked.
        max_age_secs: args
            .max_age
            .map(|a| a.as_secs() + u64::from(a.subsec_nanos() > 0)),
    };
    let listed = super::containers::list(&args.docker_container, params)?;
    for f in &listed.failed {
        agentsight::sayln!("agentsight: {}", v(&f.to_string()));
    }
    if listed.failed.len() == args.docker_container.len() {
        bail!("no container answered");
    }
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    let r = if args.json {
        serde_json::to_writer_pretty(&mut w, &listed.sessions)
            .map_err(std::io::Error::other)
            .and_then(|_| writeln!(w))
    } else {
        let rows: Vec<Row> = listed
            .sessions
            .iter()
            .map(|c| (Some(c.container.as_str()), &c.session))
            .collect();
        write_table(&mut w, &rows)
    };
    finish_output(r.and_then(|_| w.flush()))?;
    Ok(if listed.failed.is_empty() {
        0
    } else {
        super::containers::PARTIAL_LIST
    })
}

fn tokens_cell(u: Option<&TokenUsage>) -> String {
    match u {
        Some(u) if u.total > 0 => human(u.total),
        Some(_) => "0".into(),
        None => "-".into(),
    }
}

fn human(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=9_999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn opt_count(n: Option<usize>) -> String {
    n.map_or_else(|| "-".to_string(), |n| n.to_string())
}

fn short_time(ms: i64) -> String {
    // "2026-03-01T09:00:02.100Z" → "2026-03-01 09:00"
    let t = format_ts(ms);
    format!("{} {}", &t[..10], &t[11..16])
}

/// A table row: the container it came from (with `--docker-container`) and
/// the session.
type Row<'a> = (Option<&'a str>, &'a SessionSummary);

fn write_table(w: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    if rows.is_empty() {
        return writeln!(w, "no agent sessions found");
    }
    // The container column only when the rows come from containers.
    let containers = rows.iter().any(|(c, _)| c.is_some());
    if containers {
        write!(w, "{:<20} ", "CONTAINER")?;
    }
    writeln!(
        w,
        "{:<8} {:<36} {:<16} {:<32} {:<24} {:>7} {:>6} {:>8}",
        "PROVIDER", "ID", "UPDATED (UTC)", "CWD", "MODEL", "PROMPTS", "TOOLS", "TOKENS"
    )?;
    for (container, r) in rows {
        let cwd = r.cwd.as_deref().unwrap_or("-");
        if containers {
            write!(w, "{:<20} ", clip(container.unwrap_or("-"), 20))?;
        }
        writeln!(
            w,
            "{:<8} {:<36} {:<16} {:<32} {:<24} {:>7} {:>6} {:>8}",
            r.provider.as_str(),
            v(&r.session_id),
            short_time(r.updated_ms),
            clip_left(cwd, 32),
            clip(r.model.as_deref().unwrap_or("-"), 24),
            opt_count(r.prompts),
            opt_count(r.tools),
            tokens_cell(r.usage.as_ref()),
        )?;
        if let Some(e) = &r.error {
            writeln!(w, "         ! {}", v(e))?;
        }
    }
    Ok(())
}

/// `s` shown escaped ([`v`]), cut to `n` characters.
fn clip(s: &str, n: usize) -> String {
    let s = v(s);
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut o: String = s.chars().take(n.saturating_sub(1)).collect();
        o.push('…');
        o
    }
}

/// Keeps the end of a path, which is the informative part (shown escaped).
fn clip_left(s: &str, n: usize) -> String {
    let s = v(s);
    let c = s.chars().count();
    if c <= n {
        s.to_string()
    } else {
        let tail: String = s.chars().skip(c - (n - 1)).collect();
        format!("…{tail}")
    }
}

pub fn run_session_show(args: &SessionShowArgs) -> anyhow::Result<()> {
    if !args.docker_container.is_empty() {
        let (container, s) = super::containers::get(&args.docker_container, args.id.trim())?;
        let wire = args.wire.as_deref().map(|db| wire_of(db, &s)).transpose()?;
        return print_session(&s, Some(&container), args.json, wire.as_ref());
    }
    let opts = DiscoveryOptions {
        home: args.home.clone(),
        ..DiscoveryOptions::default()
    };
    let mut index = SessionIndex::new(opts);
    let Some(r) = index
        .resolve(&args.id)
        .with_context(|| format!("looking up session {}", args.id))?
    else {
        bail!("no session with id {:?} under the provider roots", args.id);
    };
    let s = sessions::parse_session(&r).with_context(|| format!("parsing {}", r.path.display()))?;
    let wire = args.wire.as_deref().map(|db| wire_of(db, &s)).transpose()?;
    print_session(&s, None, args.json, wire.as_ref())
}

/// The session's model traffic in a capture: correlate's wire report of
/// the session as stored there, against the transcript just read.
fn wire_of(db: &std::path::Path, s: &AgentSession) -> anyhow::Result<WireReport> {
    let cap = agentsight::store::Capture::open_quick(db)?;
    let stored = cap.stored_sessions(&s.session_id)?;
    let Some(st) = stored
        .into_iter()
        .find(|x| x.session.session_id == s.session_id)
    else {
        bail!(
            "session {} is not stored in {} (was it recorded there?)",
            s.session_id,
            db.display()
        );
    };
    let view = correlate::CaptureView::load(cap.reader())?;
    let (bound, unmatched) = view.stored_trees(st.row)?;
    let servers = view.session_mcp_servers(st.row, s, &bound)?;
    let report = correlate::correlate_with(
        &view,
        s,
        correlate::SessionSource::Home,
        &bound,
        unmatched,
        &servers,
    )?;
    report.wire.with_context(|| {
        format!(
            "{} was recorded without --wire: it holds no model traffic",
            db.display()
        )
    })
}

/// A session as `--json` prints it: the model, with the container named
/// when it was read in one, and the wire report with `--wire`.
#[derive(serde::Serialize)]
struct Shown<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
    #[serde(flatten)]
    session: &'a AgentSession,
    #[serde(skip_serializing_if = "Option::is_none")]
    wire: Option<&'a WireReport>,
}

fn print_session(
    s: &AgentSession,
    container: Option<&str>,
    json: bool,
    wire: Option<&WireReport>,
) -> anyhow::Result<()> {
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    let res = if json {
        let shown = Shown {
            container,
            session: s,
            wire,
        };
        serde_json::to_writer_pretty(&mut w, &shown)
            .map_err(std::io::Error::other)
            .and_then(|_| writeln!(w))
    } else {
        write_session(&mut w, s, container).and_then(|_| match wire {
            // Recorded strings are shown escaped by the renderer.
            Some(wr) => write!(w, "\n{}", correlate::render::wire_text(wr, false)),
            None => Ok(()),
        })
    };
    finish_output(res.and_then(|_| w.flush()))
}

fn opt_ts(t: Option<i64>) -> String {
    t.map_or_else(|| "-".to_string(), format_ts)
}

fn write_usage(w: &mut impl Write, label: &str, u: &TokenUsage) -> std::io::Result<()> {
    writeln!(
        w,
        "  {label:<28} input {:>9}  output {:>8}  cache_read {:>10}  cache_write {:>9}  reasoning {:>8}  total {:>10}",
        u.input, u.output, u.cache_read, u.cache_creation, u.reasoning, u.total
    )
}

/// `session show` as text: the header, then one section per part of the
/// session model.
fn write_session(
    w: &mut impl Write,
    s: &AgentSession,
    container: Option<&str>,
) -> std::io::Result<()> {
    write_header(w, s, container)?;
    write_usage_section(w, s)?;
    write_prompts(w, s)?;
    write_tools(w, s)?;
    write_responses(w, s)?;
    write_errors_subagents_plan(w, s)?;
    write_bounds_and_notes(w, s)
}

fn write_header(
    w: &mut impl Write,
    s: &AgentSession,
    container: Option<&str>,
) -> std::io::Result<()> {
    writeln!(w, "{} session {}", s.provider, v(&s.session_id))?;
    if let Some(c) = container {
        writeln!(w, "  container     {}", v(c))?;
    }
    if let Some(c) = &s.conversation_id
        && *c != s.session_id
    {
        writeln!(w, "  conversation  {}", v(c))?;
    }
    if let Some(p) = &s.parent_session_id {
        writeln!(w, "  parent        {}", v(p))?;
    }
    writeln!(w, "  source        {}", v(&s.source_path.to_string_lossy()))?;
    writeln!(w, "  cwd           {}", v(s.cwd.as_deref().unwrap_or("-")))?;
    writeln!(
        w,
        "  models        {}",
        if s.models.is_empty() {
            "-".to_string()
        } else {
            v(&s.models.join(", ")).into_owned()
        }
    )?;
    writeln!(
        w,
        "  start / end   {} / {}",
        opt_ts(s.start_ms),
        opt_ts(s.end_ms)
    )?;
    if let Some(t) = &s.title {
        writeln!(w, "  title         {}", v(t))?;
    }
    writeln!(
        w,
        "  counts        {} prompts, {} responses, {} tool calls, {} errors, {} subagents",
        s.prompt_count,
        s.response_count,
        s.tool_count,
        s.errors.len(),
        s.subagents.len()
    )
}

fn write_usage_section(w: &mut impl Write, s: &AgentSession) -> std::io::Result<()> {
    writeln!(w, "\nUsage per model")?;
    for (m, u) in &s.usage_by_model {
        write_usage(w, &v(m), u)?;
    }
    write_usage(w, "TOTAL", &s.usage)
}

fn write_prompts(w: &mut impl Write, s: &AgentSession) -> std::io::Result<()> {
    writeln!(w, "\nPrompts")?;
    for p in &s.prompts {
        writeln!(
            w,
            "  [{}] {}  {}",
            p.index,
            opt_ts(p.ts_ms),
            clip(&p.text.replace('\n', " "), 120)
        )?;
    }
    Ok(())
}

fn write_tools(w: &mut impl Write, s: &AgentSession) -> std::io::Result<()> {
    writeln!(w, "\nTool calls")?;
    for t in &s.tools {
        let status = match t.status {
            ToolStatus::Ok => "ok",
            ToolStatus::Failed => "FAILED",
            ToolStatus::Unknown => "?",
        };
        // The exit code only where the transcript states one.
        let status = match t.exit_code {
            Some(c) => format!("{status} exit {c}"),
            None => status.to_string(),
        };
        let who = t
            .subagent
            .and_then(|i| s.subagents.get(i))
            .map(|a| {
                format!(
                    " (subagent {})",
                    v(a.agent_id.as_deref().unwrap_or("sidechain"))
                )
            })
            .unwrap_or_default();
        // An MCP call says its server and tool next to the name, and shows
        // its arguments where it has no command text.
        let (name, command) = match &t.mcp {
            Some(m) => (
                format!("{} (mcp {})", v(&t.name), v(&m.label())),
                t.command
                    .clone()
                    .or_else(|| m.arguments.as_ref().map(|a| a.to_string())),
            ),
            None => (v(&t.name).to_string(), t.command.clone()),
        };
        writeln!(
            w,
            "  [{}] {:<14} {:<13} {}{}",
            t.prompt_index
                .map_or_else(|| "-".to_string(), |i| i.to_string()),
            name,
            status,
            clip(&command.as_deref().unwrap_or("").replace('\n', " "), 90),
            who
        )?;
        for p in &t.paths {
            writeln!(w, "        {:<11} {}", p.access.as_str(), v(&p.path))?;
        }
        for d in &t.domains {
            writeln!(w, "        domain      {}", v(d))?;
        }
    }
    Ok(())
}

fn write_responses(w: &mut impl Write, s: &AgentSession) -> std::io::Result<()> {
    writeln!(w, "\nResponses")?;
    for r in &s.responses {
        let tok = r
            .tokens
            .map_or_else(|| "-".to_string(), |t| format!("{} tok", t.total));
        writeln!(
            w,
            "  [{}] {} {:<28} {:>10}  {}",
            r.prompt_index
                .map_or_else(|| "-".to_string(), |i| i.to_string()),
            opt_ts(r.ts_ms),
            clip(r.model.as_deref().unwrap_or("-"), 28),
            tok,
            clip(&r.text.replace('\n', " "), 80)
        )?;
    }
    Ok(())
}

fn write_errors_subagents_plan(w: &mut impl Write, s: &AgentSession) -> std::io::Result<()> {
    if !s.errors.is_empty() {
        writeln!(w, "\nErrors")?;
        for e in &s.errors {
            writeln!(
                w,
                "  {} {:<12} {}",
                opt_ts(e.ts_ms),
                e.kind,
                clip(&e.message, 100)
            )?;
        }
    }
    if !s.subagents.is_empty() {
        writeln!(w, "\nSubagents")?;
        for a in &s.subagents {
            writeln!(
                w,
                "  {:<20} {:<10} call {:<24} {} responses, {} tools, {} tokens",
                v(a.agent_id.as_deref().unwrap_or("(inline sidechain)")),
                v(a.kind.as_deref().unwrap_or("-")),
                v(a.parent_call_id.as_deref().unwrap_or("-")),
                a.responses,
                a.tools,
                a.usage.total
            )?;
        }
    }
    if !s.plan.is_empty() {
        writeln!(w, "\nPlan")?;
        for p in &s.plan {
            writeln!(
                w,
                "  [{}] {}",
                v(p.status.as_deref().unwrap_or("-")),
                v(&p.step)
            )?;
        }
    }
    Ok(())
}

/// What the reader bounded or could not read, said last.
fn write_bounds_and_notes(w: &mut impl Write, s: &AgentSession) -> std::io::Result<()> {
    if !s.cut.is_empty() {
        let c = &s.cut;
        writeln!(
            w,
            "\nDetail bounded (newest kept): dropped {} prompts, {} responses, {} tool calls, {} errors; cut {} B prompt text, {} B response text, {} B command text. Full source: {}",
            c.prompts_dropped,
            c.responses_dropped,
            c.tools_dropped,
            c.errors_dropped,
            c.prompt_text_bytes_cut,
            c.response_text_bytes_cut,
            c.command_text_bytes_cut,
            v(&s.source_path.to_string_lossy())
        )?;
    }
    let st = &s.stats;
    if st.bad_lines
        + st.invalid_utf8_lines
        + st.oversized_lines
        + st.unknown_records
        + st.bad_token_values
        + st.bad_contents
        > 0
        || st.partial_last_line
        || !st.notes.is_empty()
    {
        writeln!(
            w,
            "\nReader notes: {} bad lines, {} repaired UTF-8 lines, {} oversized lines, {} unknown records, {} bad token values, {} bad message contents{}",
            st.bad_lines,
            st.invalid_utf8_lines,
            st.oversized_lines,
            st.unknown_records,
            st.bad_token_values,
            st.bad_contents,
            if st.partial_last_line {
                ", partial last line (live session)"
            } else {
                ""
            }
        )?;
        for n in &st.notes {
            writeln!(w, "  {}", v(n))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentsight::sessions::{ToolCategory, ToolEvent};

    fn shell(status: ToolStatus, exit_code: Option<i32>, command: &str) -> ToolEvent {
        ToolEvent {
            prompt_index: Some(0),
            subagent: None,
            name: "Bash".into(),
            category: ToolCategory::Shell,
            call_id: None,
            command: Some(command.into()),
            command_truncated: false,
            cwd: None,
            status,
            exit_code,
            start_ms: None,
            end_ms: None,
            paths: Vec::new(),
            domains: Vec::new(),
            mcp: None,
        }
    }

    /// An MCP call's line names its server and tool (`?` for a server the
    /// record does not name) and shows its arguments when it has no command;
    /// `--json` carries `mcp` as `docs/sessions.md` documents it.
    #[test]
    fn mcp_calls_show_server_and_tool() {
        use agentsight::sessions::mcp::McpCall;
        let mut s = AgentSession::new(Provider::Claude, "s".into(), PathBuf::from("/t.jsonl"));
        let mut write = shell(ToolStatus::Ok, None, "");
        write.name = "mcp__fs__write_file".into();
        write.category = ToolCategory::Mcp;
        write.command = None;
        write.mcp = Some(McpCall {
            server: Some("fs".into()),
            tool: Some("write_file".into()),
            arguments: Some(serde_json::json!({"path": "/w/a.txt", "content": "hi\n"})),
        });
        let mut read = shell(ToolStatus::Failed, None, "");
        read.name = "mcp_fs_read_text_file".into();
        read.command = None;
        read.mcp = Some(McpCall {
            server: None,
            tool: None,
            arguments: None,
        });
        s.tools = vec![write, read];
        let mut out = Vec::new();
        write_session(&mut out, &s, None).unwrap();
        let text = String::from_utf8(out).unwrap();
        let tools: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Tool calls")
            .skip(1)
            .take(2)
            .collect();
        assert_eq!(
            tools,
            [
                r#"  [0] mcp__fs__write_file (mcp fs/write_file) ok            {"content":"hi\n","path":"/w/a.txt"}"#,
                "  [0] mcp_fs_read_text_file (mcp ?) FAILED        ",
            ]
        );
        let json = serde_json::to_value(&s.tools).unwrap();
        assert_eq!(
            json[0]["mcp"],
            serde_json::json!({"server": "fs", "tool": "write_file",
                "arguments": {"path": "/w/a.txt", "content": "hi\n"}})
        );
        assert_eq!(json[1]["mcp"], serde_json::json!({}));
        // A built-in call has no `mcp` key at all.
        let bash = serde_json::to_value(shell(ToolStatus::Ok, None, "ls")).unwrap();
        assert_eq!(bash.get("mcp"), None);
    }

    /// Tool lines show the exit code where the transcript states one.
    #[test]
    fn tool_lines_show_exit_codes() {
        let mut s = AgentSession::new(Provider::Claude, "s".into(), PathBuf::from("/t.jsonl"));
        s.tools = vec![
            shell(ToolStatus::Failed, Some(3), "make check"),
            shell(ToolStatus::Ok, Some(0), "ls"),
            shell(ToolStatus::Ok, None, "echo hi"),
        ];
        let mut out = Vec::new();
        write_session(&mut out, &s, None).unwrap();
        let text = String::from_utf8(out).unwrap();
        let tools: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Tool calls")
            .skip(1)
            .take(3)
            .collect();
        assert_eq!(
            tools,
            [
                "  [0] Bash           FAILED exit 3 make check",
                "  [0] Bash           ok exit 0     ls",
                "  [0] Bash           ok            echo hi",
            ]
        );
    }
}
