//! Keeping the model current: inotify watches on the provider directories
//! (never on files: transcripts and desktop files are rewritten and replaced),
//! a clock tick, and a polling fallback that the snapshot always announces.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use notify::{EventKind, Watcher};
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};

use super::model::{LiveModel, ToolLine};
use super::{KernelSession, KernelSource, RowFilter, Snapshot, TopError, TopOptions};
use crate::sessions::Provider;

/// What the watcher thread hands the loop.
#[derive(Debug)]
pub enum WatchMsg {
    /// Paths an event named; `dir_changed` when a directory appeared or went.
    Paths {
        paths: Vec<PathBuf>,
        dir_changed: bool,
    },
    /// The kernel queue overflowed (events were lost).
    Overflow,
    /// The watcher reported an error.
    Error(String),
}

/// The live `top` loop: the model, its watches, the tick and the kernel
/// source. Must be created inside a tokio runtime.
pub struct LiveTop {
    model: LiveModel,
    filter: RowFilter,
    watcher: Option<notify::INotifyWatcher>,
    watched: HashSet<PathBuf>,
    rx: mpsc::UnboundedReceiver<WatchMsg>,
    degraded: Option<String>,
    kernel: Option<Box<dyn KernelSource>>,
    kernel_now: Option<HashMap<String, KernelSession>>,
    kernel_error: Option<String>,
    tick: Interval,
    poll: Interval,
    last: Option<Snapshot>,
}

fn interval(d: std::time::Duration) -> Interval {
    let mut i = tokio::time::interval(d);
    i.set_missed_tick_behavior(MissedTickBehavior::Delay);
    i
}

impl LiveTop {
    /// Discovers the candidates, reads the recent tails and starts watching
    /// (or polling, when asked or when watching cannot start).
    pub fn start(
        opts: &TopOptions,
        kernel: Option<Box<dyn KernelSource>>,
    ) -> Result<Self, TopError> {
        let model = LiveModel::new(opts)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut top = LiveTop {
            model,
            filter: RowFilter::default(),
            watcher: None,
            watched: HashSet::new(),
            rx,
            degraded: None,
            kernel,
            kernel_now: None,
            kernel_error: None,
            tick: interval(opts.tick),
            poll: interval(opts.poll_interval),
            last: None,
        };
        if opts.polling {
            top.degraded = Some("polling was asked for".into());
        } else {
            match notify::INotifyWatcher::new(
                move |res: notify::Result<notify::Event>| {
                    if let Some(m) = to_msg(res) {
                        let _ = tx.send(m);
                    }
                },
                notify::Config::default(),
            ) {
                Ok(w) => {
                    top.watcher = Some(w);
                    top.sync_watches();
                    // Files created between the first scan and the watches.
                    top.model.rescan();
                }
                Err(e) => top.degrade(format!("inotify unavailable: {e}")),
            }
        }
        top.refresh_kernel();
        Ok(top)
    }

    pub fn filter(&self) -> RowFilter {
        self.filter
    }

    pub fn set_filter(&mut self, f: RowFilter) {
        self.filter = f;
    }

    pub fn model(&self) -> &LiveModel {
        &self.model
    }

    /// The last tool calls of one session (detail pane), by the row's path
    /// and session id (a shared store's path names many sessions).
    pub fn tool_calls(&self, path: &Path, session_id: &str, last: usize) -> Vec<ToolLine> {
        self.model.tool_calls(path, session_id, last)
    }

    /// New kernel columns; a failed recording clears them and says why.
    fn refresh_kernel(&mut self) {
        let Some(k) = self.kernel.as_mut() else {
            return;
        };
        match k.sessions() {
            Ok(m) => {
                self.kernel_now = Some(m);
                self.kernel_error = None;
            }
            Err(e) => {
                self.kernel_now = None;
                self.kernel_error = Some(e);
            }
        }
    }

    /// The snapshot now (also the baseline `next_change` compares against).
    pub fn snapshot(&mut self) -> Snapshot {
        let s = self.build();
        self.last = Some(s.clone());
        s
    }

    fn build(&mut self) -> Snapshot {
        let mut s = self
            .model
            .snapshot(Timestamp::now(), self.filter, self.kernel_now.as_ref());
        if let Some(reason) = &self.degraded {
            s.degraded = Some("polling");
            s.degraded_reason = Some(reason.clone());
        }
        s.kernel_error = self.kernel_error.clone();
        s.watched_dirs = if self.degraded.is_some() {
            0
        } else {
            self.watched.len() as u64
        };
        s
    }

    /// Waits until the snapshot's content differs from the last one returned
    /// (a file changed, a threshold passed, kernel columns moved).
    pub async fn next_change(&mut self) -> Snapshot {
        loop {
            self.step().await;
            let s = self.build();
            if self.last.as_ref().is_none_or(|l| !l.same_content(&s)) {
                self.last = Some(s.clone());
                return s;
            }
        }
    }

    /// One turn of the loop: a batch of watch events, a poll, or a tick.
    pub async fn step(&mut self) {
        let polling = self.degraded.is_some();
        tokio::select! {
            biased;
            msg = self.rx.recv(), if !polling => {
                let mut batch: Vec<WatchMsg> = msg.into_iter().collect();
                while let Ok(m) = self.rx.try_recv() {
                    batch.push(m);
                }
                self.handle(batch);
            }
            _ = self.poll.tick(), if polling => {
                self.model.reload_desktop();
                self.model.reload_registry();
                self.model.rescan();
            }
            _ = self.tick.tick() => {
                self.refresh_kernel();
            }
        }
    }

    fn handle(&mut self, batch: Vec<WatchMsg>) {
        let mut paths: HashSet<PathBuf> = HashSet::new();
        let mut resync = false;
        for m in batch {
            match m {
                WatchMsg::Paths {
                    paths: p,
                    dir_changed,
                } => {
                    resync |= dir_changed;
                    paths.extend(p);
                }
                WatchMsg::Overflow => {
                    self.degrade("the inotify event queue overflowed".into());
                    return;
                }
                WatchMsg::Error(e) => {
                    self.degrade(format!("the watcher failed: {e}"));
                    return;
                }
            }
        }
        let desktop = self.model.desktop_dir().to_path_buf();
        let registry = self.model.registry_dir().to_path_buf();
        let (mut desktop_changed, mut registry_changed) = (false, false);
        for p in &paths {
            if p.starts_with(&desktop) {
                desktop_changed = true;
            } else if p.starts_with(&registry) {
                registry_changed = true;
            } else if !self.model.touch(p) && p.is_dir() {
                resync = true;
            }
        }
        if desktop_changed {
            self.model.reload_desktop();
        }
        if registry_changed {
            self.model.reload_registry();
        }
        if resync {
            self.sync_watches();
            self.model.rescan();
        }
    }

    /// Watch every directory of the provider layouts that exists (and the
    /// nearest existing parent of one that does not yet).
    fn sync_watches(&mut self) {
        let dirs = watch_dirs(
            self.model.roots(),
            self.model.desktop_dir(),
            self.model.registry_dir(),
        );
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        let mut failed = None;
        for d in dirs {
            if self.watched.contains(&d) {
                continue;
            }
            match w.watch(&d, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.watched.insert(d);
                }
                Err(e) if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) => {
                    failed = Some(format!(
                        "the inotify watch limit was reached at {}",
                        d.display()
                    ));
                    break;
                }
                // A directory that vanished in between is found by the
                // next resync; anything else is logged.
                Err(e) => tracing::debug!(dir = %d.display(), error = %e, "watch failed"),
            }
        }
        if let Some(reason) = failed {
            self.degrade(reason);
        }
    }

    /// Gives up watching for good: polling from now on, and every snapshot
    /// says so.
    fn degrade(&mut self, reason: String) {
        tracing::info!(%reason, "top: falling back to polling");
        self.watcher = None;
        self.watched.clear();
        self.degraded = Some(reason);
        self.model.reload_desktop();
        self.model.rescan();
    }
}

fn to_msg(res: notify::Result<notify::Event>) -> Option<WatchMsg> {
    use notify::event::{AccessKind, AccessMode};
    Some(match res {
        Ok(ev) if ev.need_rescan() => WatchMsg::Overflow,
        // Opens and reads (top's own tail reads among them) change nothing;
        // a close after writing does.
        Ok(ev)
            if matches!(ev.kind, EventKind::Access(k)
                if k != AccessKind::Close(AccessMode::Write)) =>
        {
            return None;
        }
        Ok(ev) => {
            let dir_changed = matches!(
                ev.kind,
                EventKind::Create(notify::event::CreateKind::Folder)
                    | EventKind::Remove(notify::event::RemoveKind::Folder)
            );
            WatchMsg::Paths {
                paths: ev.paths,
                dir_changed,
            }
        }
        Err(e) => WatchMsg::Error(e.to_string()),
    })
}

fn subdirs(d: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(d) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// The directories to watch: each existing root with its layout's
/// subdirectories (as deep as transcripts live), and for a missing root its
/// nearest existing ancestor, so its creation is seen.
pub fn watch_dirs(roots: &[(Provider, PathBuf)], desktop: &Path, registry: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    // Depths of directories under each root that may hold transcripts or
    // lead to them.
    let mut layouts: Vec<(PathBuf, u32, Option<&str>)> = roots
        .iter()
        .map(|(p, r)| {
            let l = p.watch_layout(r);
            (r.clone(), l.depth, l.project_subdir)
        })
        .collect();
    layouts.push((desktop.join("claude-code-sessions"), 2, None));
    layouts.push((registry.to_path_buf(), 0, None));
    for (root, depth, second) in layouts {
        if !root.is_dir() {
            if let Some(a) = root.ancestors().skip(1).find(|a| a.is_dir()) {
                out.push(a.to_path_buf());
            }
            continue;
        }
        let mut level = vec![root];
        for d in 0..=depth {
            out.extend(level.iter().cloned());
            if d == depth {
                break;
            }
            let mut next = Vec::new();
            for dir in &level {
                for s in subdirs(dir) {
                    // Gemini/Cursor: below a project only its chats /
                    // agent-transcripts directory matters.
                    let keep = match (d, second) {
                        (1, Some(name)) => s.file_name().is_some_and(|n| n == name),
                        _ => true,
                    };
                    if keep {
                        next.push(s);
                    }
                }
            }
            level = next;
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directories watched for a home with every layout, and for roots
    /// that do not exist yet (their nearest existing parent).
    #[test]
    fn watch_dirs_follow_each_layout() {
        let t = tempfile::tempdir().unwrap();
        let h = t.path();
        for d in [
            ".claude/projects/-home-dev-shop/11111111-0000-4000-8000-000000000001/subagents",
            ".codex/sessions/2026/12/01",
            ".gemini/tmp/web/chats",
            ".gemini/tmp/web/other",
            ".cursor/projects/docs/agent-transcripts/7c0de000",
            ".cursor/projects/docs/rules",
            ".config/Claude/claude-code-sessions/org/ws",
        ] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        let roots = crate::sessions::discovery::provider_roots(h);
        let got = watch_dirs(
            &roots,
            &h.join(".config/Claude"),
            &h.join(".claude/sessions"),
        );
        let rel: Vec<String> = got
            .iter()
            .map(|p| p.strip_prefix(h).unwrap().display().to_string())
            .collect();
        let want = [
            // ~/.copilot, ~/.local/share/opencode and ~/.qwen are missing:
            // the home itself stands in (their creation is seen there).
            "",
            // ~/.config/claude/projects is missing: ~/.config stands in.
            ".claude",
            ".claude/projects",
            ".claude/projects/-home-dev-shop",
            ".codex",
            ".codex/sessions",
            ".codex/sessions/2026",
            ".codex/sessions/2026/12",
            ".codex/sessions/2026/12/01",
            ".config",
            ".config/Claude/claude-code-sessions",
            ".config/Claude/claude-code-sessions/org",
            ".config/Claude/claude-code-sessions/org/ws",
            ".cursor/projects",
            ".cursor/projects/docs",
            ".cursor/projects/docs/agent-transcripts",
            ".cursor/projects/docs/agent-transcripts/7c0de000",
            ".gemini/tmp",
            ".gemini/tmp/web",
            ".gemini/tmp/web/chats",
        ];
        assert_eq!(rel, want);
    }
}
