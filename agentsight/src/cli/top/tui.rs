//! The full-screen UI (ratatui on crossterm). The terminal is restored on
//! every way out: `q`, Ctrl-C, SIGINT, SIGTERM, an error and a panic.

use std::io::Stdout;
use std::sync::Arc;

use anyhow::{Context, Result};
use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TRow, Table, TableState};
use tokio::sync::mpsc;

use super::kernel::{KernelActivity, OutsideCalls};
use super::{age_text, clip, kernel_cells, not_listed_line, state_word, tokens_text};
use agentsight::livecap::KernelWatch;
use agentsight::sessions::live::LiveState;
use agentsight::sessions::{Provider, ToolStatus};
use agentsight::top::{LiveTop, Snapshot, ToolLine};

/// Leaves the alternate screen and raw mode (idempotent).
fn restore() {
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// Restores the terminal when dropped (normal exit, `?`, unwinding).
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn setup() -> Result<(TerminalGuard, Terminal<CrosstermBackend<Stdout>>)> {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
    crossterm::terminal::enable_raw_mode().context("raw mode")?;
    let guard = TerminalGuard;
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        crossterm::cursor::Hide
    )
    .context("alternate screen")?;
    let term = Terminal::new(CrosstermBackend::new(std::io::stdout())).context("terminal")?;
    Ok((guard, term))
}

struct View {
    snap: Snapshot,
    selected: usize,
    detail: Option<Detail>,
    color: bool,
    kernel: Option<Arc<KernelWatch>>,
}

struct Detail {
    path: std::path::PathBuf,
    /// With the path, names the row (an opencode database holds many).
    session_id: String,
    title: String,
    /// The transcript's last tool calls (shown whether or not the kernel
    /// watches the session).
    tools: Vec<ToolLine>,
    /// As root: what the kernel attributed to each call, where the session
    /// is bound; `None` without kernel programs.
    kernel: Option<KernelActivity>,
}

enum Input {
    Key(crossterm::event::KeyEvent),
    Resize,
}

/// Reads terminal input on its own thread (crossterm's read blocks).
fn spawn_input() -> mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            let msg = match ev {
                Event::Key(k) if k.kind != KeyEventKind::Release => Input::Key(k),
                Event::Resize(..) => Input::Resize,
                _ => continue,
            };
            if tx.send(msg).is_err() {
                break;
            }
        }
    });
    rx
}

const TOOLS_SHOWN: usize = 20;

pub async fn run(
    mut top: LiveTop,
    mut signals: mpsc::UnboundedReceiver<nix::sys::signal::Signal>,
    kernel: Option<Arc<KernelWatch>>,
) -> Result<i32> {
    let (_guard, mut term) = setup()?;
    let mut input = spawn_input();
    let mut view = View {
        snap: top.snapshot(),
        selected: 0,
        detail: None,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        kernel,
    };
    loop {
        term.draw(|f| draw(f, &view)).context("drawing")?;
        tokio::select! {
            // Every turn redraws (ages move each tick); the detail pane is
            // re-read only when something besides the clock changed.
            _ = top.step() => {
                let s = top.snapshot();
                let changed = !s.same_content(&view.snap);
                view.snap = s;
                if changed && let Some(d) = &view.detail {
                    let key = (d.path.clone(), d.session_id.clone());
                    refresh_detail(&top, &mut view, key);
                }
            }
            Some(inp) = input.recv() => {
                if let Input::Key(k) = inp
                    && !on_key(k, &mut top, &mut view)
                {
                    return Ok(0);
                }
            }
            _ = signals.recv() => return Ok(0),
        }
        view.selected = view.selected.min(view.snap.rows.len().saturating_sub(1));
    }
}

fn refresh_detail(top: &LiveTop, view: &mut View, key: (std::path::PathBuf, String)) {
    let (path, session_id) = key;
    let row = view
        .snap
        .rows
        .iter()
        .find(|r| r.path == path && r.session_id == session_id);
    let title = row
        .map(|r| {
            format!(
                "{} {} — {}",
                r.provider,
                r.session_id,
                r.title.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_else(|| path.display().to_string());
    let kernel = match (&view.kernel, row) {
        (Some(w), Some(r)) => Some(super::kernel::activity(w, &r.session_id, TOOLS_SHOWN)),
        _ => None,
    };
    let tools = top.tool_calls(&path, &session_id, TOOLS_SHOWN);
    view.detail = Some(Detail {
        path,
        session_id,
        title,
        tools,
        kernel,
    });
}

/// Handles one key; false means quit.
fn on_key(k: crossterm::event::KeyEvent, top: &mut LiveTop, view: &mut View) -> bool {
    let n = view.snap.rows.len();
    match k.code {
        KeyCode::Char('q') => return false,
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => return false,
        KeyCode::Down | KeyCode::Char('j') => view.selected = (view.selected + 1).min(n.max(1) - 1),
        KeyCode::Up | KeyCode::Char('k') => view.selected = view.selected.saturating_sub(1),
        KeyCode::Enter => {
            if view.detail.is_some() {
                view.detail = None;
            } else if let Some(r) = view.snap.rows.get(view.selected) {
                let key = (r.path.clone(), r.session_id.clone());
                refresh_detail(top, view, key);
            }
        }
        KeyCode::Esc => view.detail = None,
        KeyCode::Char('p') => {
            let mut f = top.filter();
            f.provider = next_provider(f.provider);
            top.set_filter(f);
            view.snap = top.snapshot();
        }
        KeyCode::Char('a') => {
            let mut f = top.filter();
            f.all = !f.all;
            top.set_filter(f);
            view.snap = top.snapshot();
        }
        _ => {}
    }
    true
}

fn next_provider(p: Option<Provider>) -> Option<Provider> {
    match p {
        None => Some(Provider::Claude),
        Some(p) => {
            let i = Provider::ALL.iter().position(|x| *x == p).unwrap_or(0);
            Provider::ALL.get(i + 1).copied()
        }
    }
}

fn state_style(s: LiveState, color: bool) -> Style {
    if !color {
        return Style::default();
    }
    match s {
        LiveState::Working => Style::default().fg(Color::Green),
        LiveState::YourTurn => Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD),
        LiveState::Stalled => Style::default().fg(Color::Yellow),
        LiveState::RateLimited | LiveState::AuthRequired => {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        }
        LiveState::Idle | LiveState::Unknown => Style::default().fg(Color::DarkGray),
    }
}

fn header_line(v: &View) -> String {
    let s = &v.snap;
    format!(
        "agentsight top — {} listed, {} idle, {} hidden{}{}",
        s.rows.len(),
        s.not_listed.idle,
        s.not_listed.hidden,
        match s.degraded {
            Some(d) => format!(" — degraded: {d}"),
            None => String::new(),
        },
        if let Some(e) = &s.kernel_error {
            format!(" — no kernel columns: {}", clip(e, 120))
        } else if s.kernel {
            String::new()
        } else {
            " — no kernel columns (root loads them)".into()
        }
    )
}

/// The table's height while the detail pane is open: its header and rows,
/// at least 3 lines, at most half the screen; the pane gets the rest (a
/// fixed 16 lines cut a bound call's kernel lines off below the first call).
fn table_height_with_detail(rows: usize, screen: u16) -> u16 {
    let want = u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(1);
    want.clamp(3, (screen / 2).max(3))
}

fn draw(f: &mut ratatui::Frame, v: &View) {
    let why = not_listed_line(&v.snap);
    let (body_c, detail_c) = match v.detail {
        Some(_) => (
            Constraint::Length(table_height_with_detail(v.snap.rows.len(), f.area().height)),
            Constraint::Fill(1),
        ),
        None => (Constraint::Min(3), Constraint::Length(0)),
    };
    let [head, body, detail, why_area, foot] = Layout::vertical([
        Constraint::Length(1),
        body_c,
        detail_c,
        Constraint::Length(u16::from(why.is_some())),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(header_line(v)), head);
    draw_table(f, v, body);
    if let Some(d) = &v.detail {
        draw_detail(f, d, detail);
    }
    if let Some(why) = why {
        f.render_widget(Paragraph::new(why), why_area);
    }
    f.render_widget(
        Paragraph::new("↑/↓ j/k select  Enter detail  p provider  a all  q quit"),
        foot,
    );
}

/// The table's columns (TITLE and CWD share what the fixed ones leave).
const WIDTHS: [Constraint; 12] = [
    Constraint::Length(7),
    Constraint::Length(13),
    Constraint::Fill(3),
    Constraint::Fill(2),
    Constraint::Length(16),
    Constraint::Length(5),
    Constraint::Length(13),
    Constraint::Length(5),
    Constraint::Length(6),
    Constraint::Length(5),
    Constraint::Length(4),
    Constraint::Length(4),
];

/// The width each column gets in `area`, laid out as the table does
/// (`Table`'s flex and column spacing; no highlight symbol): text is cut to
/// its column, not to a fixed length.
fn column_widths(area: Rect) -> Vec<usize> {
    Layout::horizontal(WIDTHS)
        .flex(Flex::Start)
        .spacing(1)
        .split(Rect::new(0, 0, area.width, 1))
        .iter()
        .map(|r| usize::from(r.width))
        .collect()
}

fn draw_table(f: &mut ratatui::Frame, v: &View, area: Rect) {
    let w = column_widths(area);
    let (title_w, cwd_w) = (w[2].max(1), w[3].max(1));
    let rows: Vec<TRow> = v
        .snap
        .rows
        .iter()
        .map(|r| {
            let k = kernel_cells(r);
            TRow::new(vec![
                Cell::from(r.provider.as_str()),
                Cell::from(state_word(r)).style(state_style(r.state, v.color)),
                Cell::from(clip(r.title.as_deref().unwrap_or("–"), title_w)),
                Cell::from(clip(r.cwd.as_deref().unwrap_or("–"), cwd_w)),
                Cell::from(clip(r.model.as_deref().unwrap_or("–"), 20)),
                Cell::from(age_text(r.age_s)),
                Cell::from(tokens_text(r)),
                Cell::from(k[0].clone()),
                Cell::from(k[1].clone()),
                Cell::from(k[2].clone()),
                Cell::from(k[3].clone()),
                Cell::from(k[4].clone()),
            ])
        })
        .collect();
    let header =
        TRow::new(super::COLUMNS.to_vec()).style(Style::default().add_modifier(Modifier::BOLD));
    let table = Table::new(rows, WIDTHS)
        .header(header)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(Some(v.selected));
    f.render_stateful_widget(table, area, &mut state);
}

/// A call's duration as recorded (result time minus call time).
fn duration_text(t: &ToolLine) -> String {
    let Some(ms) = t.start_ms.zip(t.end_ms).map(|(s, e)| (e - s).max(0)) else {
        return "–".into();
    };
    match ms {
        ms if ms < 1000 => format!("{ms}ms"),
        ms if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        ms => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// How many unexplained activities the pane lists (the rest are counted).
const UNEXPLAINED_SHOWN: usize = 3;

/// What a bound session did outside every call, as correlate splits it: the
/// agent runtime's own activity (counted by program, not flagged), then the
/// unexplained (flagged `!`, the first few listed).
fn outside_lines(o: &OutsideCalls, width: usize) -> Vec<String> {
    let programs: Vec<String> = o
        .runtime_programs
        .iter()
        .map(|(p, n)| format!("{p} ×{n}"))
        .collect();
    let mut out = vec![clip(
        &format!(
            "outside every call: agent runtime {}{} · unexplained {}",
            o.runtime_total,
            match programs.is_empty() {
                true => String::new(),
                false => format!(" ({})", programs.join(", ")),
            },
            o.unexplained.len()
        ),
        width,
    )];
    for l in o.unexplained.iter().take(UNEXPLAINED_SHOWN) {
        out.push(clip(&format!("  ! {l}"), width));
    }
    if o.unexplained.len() > UNEXPLAINED_SHOWN {
        out.push(format!(
            "  ! … {} more (agentsight correlate lists them all)",
            o.unexplained.len() - UNEXPLAINED_SHOWN
        ));
    }
    out
}

/// The pane's lines: the transcript's calls, newest first (time, name,
/// status, duration, command or path), each followed by what the kernel
/// attributed to it where the session is bound. Agent text goes through
/// `clip` (control characters never reach the terminal).
fn detail_lines(d: &Detail, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(KernelActivity::Error(e)) = &d.kernel {
        out.push(clip(&format!("kernel: {e}"), width));
    }
    if d.tools.is_empty() {
        out.push("no tool calls in the transcript".into());
        return out;
    }
    let bound = match &d.kernel {
        Some(KernelActivity::Bound { calls, outside }) => {
            out.extend(outside_lines(outside, width));
            calls.as_slice()
        }
        _ => &[],
    };
    for t in d.tools.iter().rev() {
        let head = format!(
            "{}  {:<18} {:<6} {:>7}  ",
            t.start_ms
                .map(agentsight::sessions::format_ts)
                .unwrap_or_else(|| "–".into()),
            clip(&t.name, 18),
            match t.status {
                ToolStatus::Ok => "ok",
                ToolStatus::Failed => "failed",
                ToolStatus::Unknown => "…",
            },
            duration_text(t),
        );
        let room = width.saturating_sub(head.chars().count()).max(1);
        // An MCP call says its server first: its activity below is the
        // server's (correlate's `mcp_server`).
        let summary = match &t.mcp {
            Some(m) => format!("mcp {m} · {}", t.summary.as_deref().unwrap_or("")),
            None => t.summary.clone().unwrap_or_default(),
        };
        out.push(head + &clip(&summary, room));
        let kernel = bound.iter().find(|c| match (&c.call_id, &t.call_id) {
            (Some(a), Some(b)) => a == b,
            _ => c.tool_index == t.index,
        });
        for l in kernel.map(|c| c.lines.as_slice()).unwrap_or_default() {
            out.push(clip(&format!("    {l}"), width));
        }
    }
    out
}

fn draw_detail(f: &mut ratatui::Frame, d: &Detail, area: Rect) {
    let lines: Vec<Line> = detail_lines(d, usize::from(area.width))
        .into_iter()
        .map(Line::from)
        .collect();
    let note = match &d.kernel {
        Some(KernelActivity::NotBound) => " (not bound to a process tree: transcript only)",
        _ => "",
    };
    // The title gets the pane's width less its label (and a little border).
    let label = format!("last tool calls{note}: ");
    let room = usize::from(area.width)
        .saturating_sub(label.chars().count() + 2)
        .max(8);
    let block = Block::default()
        .borders(Borders::TOP)
        .title(format!("{label}{}", clip(&d.title, room)));
    f.render_widget(Paragraph::new(lines).block(block), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the pane open the table keeps its rows up to half the screen.
    #[test]
    fn the_detail_pane_gets_what_the_table_does_not_need() {
        assert_eq!(table_height_with_detail(1, 50), 3);
        assert_eq!(table_height_with_detail(9, 50), 10);
        assert_eq!(table_height_with_detail(40, 50), 25);
        assert_eq!(table_height_with_detail(40, 4), 3);
    }

    /// An MCP call's line names its server and tool; the kernel's lines
    /// under it are the activity correlate attributed to it (the server's).
    #[test]
    fn an_mcp_calls_line_names_its_server() {
        let line = |index: usize, name: &str, mcp: Option<&str>, summary: &str| ToolLine {
            index,
            name: name.into(),
            call_id: Some(format!("c{index}")),
            status: ToolStatus::Ok,
            summary: Some(summary.into()),
            mcp: mcp.map(str::to_owned),
            start_ms: None,
            end_ms: None,
        };
        let d = Detail {
            path: "/t.jsonl".into(),
            session_id: "t".into(),
            title: String::new(),
            tools: vec![
                line(0, "Bash", None, "ls"),
                line(1, "mcp__fs__write_file", Some("fs/write_file"), "/w/a.txt"),
            ],
            kernel: Some(KernelActivity::Bound {
                calls: vec![super::super::kernel::CallActivity {
                    call_id: Some("c1".into()),
                    tool_index: 1,
                    lines: vec!["pid 150 node write /w/a.txt".into()],
                }],
                outside: OutsideCalls::default(),
            }),
        };
        assert_eq!(
            detail_lines(&d, 200),
            vec![
                "outside every call: agent runtime 0 · unexplained 0",
                "–  mcp__fs__write_fi… ok           –  mcp fs/write_file · /w/a.txt",
                "    pid 150 node write /w/a.txt",
                "–  Bash               ok           –  ls",
            ]
        );
    }

    #[test]
    fn outside_every_call_keeps_the_runtime_apart_from_the_unexplained() {
        let o = OutsideCalls {
            runtime_total: 33,
            runtime_programs: vec![("lsb_release".into(), 21), ("git".into(), 12)],
            unexplained: (1..=5)
                .map(|i| format!("pid {i} sh write /w/f{i}\x1b]52;c;x\x07"))
                .collect(),
        };
        assert_eq!(
            outside_lines(&o, 200),
            vec![
                "outside every call: agent runtime 33 (lsb_release ×21, git ×12) · unexplained 5",
                "  ! pid 1 sh write /w/f1\\x1b]52;c;x\\x07",
                "  ! pid 2 sh write /w/f2\\x1b]52;c;x\\x07",
                "  ! pid 3 sh write /w/f3\\x1b]52;c;x\\x07",
                "  ! … 2 more (agentsight correlate lists them all)",
            ]
        );
        assert_eq!(
            outside_lines(&OutsideCalls::default(), 200),
            vec!["outside every call: agent runtime 0 · unexplained 0"]
        );
    }
}
