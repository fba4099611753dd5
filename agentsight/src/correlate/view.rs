//! Phase 1, the capture view: what correlate reads from a capture besides
//! the events — its processes, clock anchors, and the trees bound to a
//! session and its MCP servers (stored by `record`, or matched now in
//! memory).

use std::{collections::HashMap, path::PathBuf};

use super::{
    CorrelateError,
    report::{TreeInfo, TreeStatus},
};
use crate::{
    clock::Anchors,
    matching::{self, ProcTable},
    sessions::{AgentSession, mcp as sessions_mcp},
    store::{CaptureReader, StoreError, mcp::McpServerRow, read::ContainerRef},
};

/// An MCP server of a session (stored, or identified now), with the index
/// in [`CaptureView::procs`] of the process that ran it, when one did.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub row: McpServerRow,
    pub proc_ix: Option<usize>,
}

/// A bound tree as correlate uses it.
#[derive(Debug, Clone)]
pub struct BoundTree {
    /// The root's index in [`CaptureView::procs`].
    pub root: usize,
    pub evidence: matching::Evidence,
    pub evidence_count: i64,
    pub evidence_path: Option<String>,
    pub from_mono_ns: u64,
    pub to_mono_ns: Option<u64>,
}

/// Everything correlate reads from a capture besides the session.
pub struct CaptureView<'a> {
    /// Where correlate reads the events (and the stored trees).
    pub cap: CaptureReader<'a>,
    pub path: String,
    pub procs: ProcTable,
    pub anchors: Anchors,
    /// Process row id → its container, for the processes that ran in one
    /// (`record --container`); empty for a host-only capture.
    pub containers: HashMap<i64, ContainerRef>,
}

/// The capture's processes: the one place correlate loads them.
fn load_processes(cap: CaptureReader) -> Result<ProcTable, StoreError> {
    ProcTable::load(cap)
}

/// The containers of the capture's processes, read through the store
/// (captures made before the container columns have none).
fn load_containers(cap: CaptureReader) -> Result<HashMap<i64, ContainerRef>, StoreError> {
    Ok(cap
        .processes()?
        .into_iter()
        .filter_map(|p| Some((p.id, ContainerRef::of(&p.identity)?)))
        .collect())
}

impl<'a> CaptureView<'a> {
    /// `cap.reader()` of a [`crate::store::Capture`] or a
    /// [`crate::store::CaptureRw`].
    pub fn load(cap: CaptureReader<'a>) -> Result<Self, CorrelateError> {
        Ok(CaptureView {
            cap,
            path: cap.path().to_string(),
            procs: load_processes(cap)?,
            anchors: cap.anchors()?,
            containers: load_containers(cap)?,
        })
    }

    /// Trees bound to `session_row` and the trees bound to nothing, from the
    /// stored tables. A row whose evidence or status word this version does
    /// not know is left out (and logged).
    pub fn stored_trees(
        &self,
        session_row: i64,
    ) -> Result<(Vec<BoundTree>, Vec<TreeInfo>), CorrelateError> {
        let bound = self
            .cap
            .session_bindings(session_row)?
            .into_iter()
            .filter_map(|b| {
                let Some(evidence) = matching::Evidence::from_word(&b.evidence) else {
                    let evidence = b.evidence;
                    tracing::warn!(%evidence, "{}: unknown binding evidence, binding skipped", self.path);
                    return None;
                };
                Some(BoundTree {
                    root: *self.procs.by_id.get(&b.root_process_id)?,
                    evidence,
                    evidence_count: b.evidence_count,
                    evidence_path: b.evidence_path,
                    from_mono_ns: b.from_mono_ns.max(0) as u64,
                    to_mono_ns: b.to_mono_ns.map(|v| v.max(0) as u64),
                })
            })
            .collect();
        Ok((bound, self.unbound_trees()?))
    }

    /// The stored trees bound to no session (the same for every session of
    /// the capture). A tree whose status word this version does not know is
    /// left out (and logged).
    pub fn unbound_trees(&self) -> Result<Vec<TreeInfo>, CorrelateError> {
        Ok(self
            .cap
            .unbound_trees()?
            .into_iter()
            .filter_map(|t| {
                let i = *self.procs.by_id.get(&t.root_process_id)?;
                let Some(status) = TreeStatus::from_word(&t.status) else {
                    let status = t.status;
                    tracing::warn!(%status, "{}: unknown tree status, tree skipped", self.path);
                    return None;
                };
                Some(self.tree_info(i, status, t.note))
            })
            .collect())
    }

    /// Matches in memory (for captures that stored no bindings).
    pub fn match_now(
        &self,
        session: &AgentSession,
    ) -> Result<(Vec<BoundTree>, Vec<TreeInfo>), CorrelateError> {
        let ev = matching::transcript_writes(self.cap, &self.procs)?;
        let fallback: Vec<matching::FallbackSession> = match (&session.cwd, session.start_ms) {
            (Some(cwd), Some(start)) => vec![matching::FallbackSession {
                key: (session.provider, session.session_id.clone()),
                path: session.source_path.clone(),
                cwd: cwd.clone(),
                start_ms: start,
                end_ms: session.end_ms,
            }],
            _ => Vec::new(),
        };
        let trees = matching::match_trees(&self.procs, &self.anchors, &ev, &fallback);
        let mut bound = Vec::new();
        let mut unmatched = Vec::new();
        for t in trees {
            let mine = t
                .bindings
                .iter()
                .filter(|b| b.key.0 == session.provider && b.key.1 == session.session_id);
            for b in mine {
                bound.push(BoundTree {
                    root: t.root,
                    evidence: b.evidence,
                    evidence_count: b.evidence_count,
                    evidence_path: b.evidence_path.clone(),
                    from_mono_ns: b.from_mono_ns,
                    to_mono_ns: b.to_mono_ns,
                });
            }
            if t.status != TreeStatus::Bound {
                unmatched.push(self.tree_info(t.root, t.status, t.note.clone()));
            }
        }
        Ok((bound, unmatched))
    }

    /// The MCP servers stored for session row `session_row` (by `record`'s
    /// enrichment), each with its process's index; empty for a capture that
    /// stored none.
    pub fn mcp_servers(&self, session_row: i64) -> Result<Vec<McpServer>, CorrelateError> {
        Ok(self
            .cap
            .mcp_servers(session_row)?
            .into_iter()
            .map(|row| self.with_process(row))
            .collect())
    }

    /// The MCP servers of stored session `session_row`: as stored, or, for
    /// a capture made before servers were stored, identified now
    /// ([`Self::mcp_servers_now`]).
    pub fn session_mcp_servers(
        &self,
        session_row: i64,
        session: &AgentSession,
        bound: &[BoundTree],
    ) -> Result<Vec<McpServer>, CorrelateError> {
        if self.cap.stores_mcp_servers()? {
            self.mcp_servers(session_row)
        } else {
            self.mcp_servers_now(session, bound)
        }
    }

    /// The MCP servers of `session` identified now, as enrichment would
    /// store them (for a session the capture did not store, matched with
    /// [`Self::match_now`]): its configuration read today from the home its
    /// transcript lies in (it may have changed since the recording), its
    /// stdio servers' processes found among the children of its agent
    /// processes in `bound`. Empty when the transcript's path names no
    /// configuration home. Rows carry session row 0 (not stored).
    pub fn mcp_servers_now(
        &self,
        session: &AgentSession,
        bound: &[BoundTree],
    ) -> Result<Vec<McpServer>, CorrelateError> {
        let Some(home) = sessions_mcp::config_home(session.provider, &session.source_path) else {
            return Ok(Vec::new());
        };
        let key = (session.provider, session.session_id.clone());
        let roots: Vec<usize> = bound.iter().map(|b| b.root).collect();
        let in_bound: std::collections::HashSet<usize> =
            roots.iter().flat_map(|&r| self.procs.subtree(r)).collect();
        let writers: Vec<(usize, u64)> = matching::transcript_writes(self.cap, &self.procs)?
            .into_iter()
            .filter(|e| e.key == key && in_bound.contains(&e.proc))
            .map(|e| (e.proc, e.mono_ns))
            .collect();
        let places = sessions_mcp::McpPlaces {
            home,
            project: session.cwd.as_deref().map(PathBuf::from),
            argv: matching::mcp::config_argv(&self.procs, &roots, &writers),
            env: self
                .cap
                .meta(crate::store::meta::key::OPENCODE_CONFIG_CONTENT)?
                .map(|v| (sessions_mcp::CONFIG_CONTENT_VAR.to_string(), v))
                .into_iter()
                .collect(),
        };
        let configs = sessions_mcp::configured_servers(session.provider, &places);
        for p in &configs.problems {
            tracing::warn!("MCP configuration of session {}: {p}", session.session_id);
        }
        let agent = matching::mcp::agent_processes(roots, writers.iter().map(|w| w.0), &self.procs);
        let found = matching::mcp::identify_servers(&self.procs, &agent, &configs.servers);
        Ok(
            matching::mcp::server_rows(0, &configs.servers, &self.procs, &found)
                .into_iter()
                .map(|row| self.with_process(row))
                .collect(),
        )
    }

    fn with_process(&self, row: McpServerRow) -> McpServer {
        McpServer {
            proc_ix: row
                .process_id
                .and_then(|id| self.procs.by_id.get(&id).copied()),
            row,
        }
    }

    /// The tree rooted at process table index `i`, as correlate names it.
    pub fn tree_info(&self, i: usize, status: TreeStatus, note: Option<String>) -> TreeInfo {
        let p = &self.procs.procs[i];
        TreeInfo {
            root_pid: p.pid,
            root_process_id: p.id,
            root_argv: p.argv.clone(),
            status,
            note,
            container: self.containers.get(&p.id).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        sessions::Provider,
        store::{
            Capture, CaptureRw,
            synthetic::{EventRow, ProcessRow, SyntheticCapture},
        },
    };

    const ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";

    /// Claude Code (row 1) writes the transcript under `home` and starts
    /// `node /opt/fs/dist/index.js /w` (row 2, pid 101); the session is
    /// stored (row 1) with no bindings and no servers.
    fn capture(dir: &std::path::Path, transcript: &str, older: bool) -> std::path::PathBuf {
        let path = dir.join("cap.db");
        let mut cap = SyntheticCapture::create(&path, "cap.db");
        cap.anchor("start", 1_000, 1_800_000_000_000_000_000);
        for (id, parent, argv) in [
            (1, None, &["claude", "-p", "hi"][..]),
            (
                2,
                Some((1, 100)),
                &["node", "/opt/fs/dist/index.js", "/w"][..],
            ),
        ] {
            cap.process(&ProcessRow {
                id,
                pid: 99 + id,
                start_mono_ns: 1_000 + id,
                parent,
                comm: argv[0],
                argv,
                cwd: Some("/w"),
                exec_count: 1,
                ..Default::default()
            });
        }
        cap.event(&EventRow {
            mono_ns: 2_000,
            wall_ns: 1_800_000_000_000_001_000,
            kind: "openat",
            pid: 100,
            ppid: 1,
            process_id: Some(1),
            path: Some(transcript),
            flags: Some("write,create"),
            ..Default::default()
        });
        let session = AgentSession::new(Provider::Claude, ID.into(), transcript.into());
        assert_eq!(cap.session(&session), 1);
        if older {
            cap.without_mcp_servers();
        }
        path
    }

    fn shown(servers: &[McpServer], view: &CaptureView) -> Vec<(String, Option<u32>, i64)> {
        servers
            .iter()
            .map(|s| {
                (
                    s.row.name.clone(),
                    s.proc_ix.map(|i| view.procs.procs[i].pid),
                    s.row.session_row,
                )
            })
            .collect()
    }

    #[test]
    fn servers_are_identified_now_from_the_home_when_none_were_stored() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let projects = home.join(".claude/projects/-w");
        std::fs::create_dir_all(&projects).unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"mcpServers": {"fs": {"command": "node", "args": ["/opt/fs/dist/index.js", "/w"]},
                               "web": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}"#,
        )
        .unwrap();
        let transcript = projects.join(format!("{ID}.jsonl"));
        let found = vec![("fs".into(), Some(101), 0), ("web".into(), None, 0)];
        let mut session = AgentSession::new(Provider::Claude, ID.into(), transcript.clone());
        session.cwd = Some("/w".into());
        // A capture made before servers were stored: identified now.
        let older = dir.path().join("older");
        std::fs::create_dir(&older).unwrap();
        let db = capture(&older, &transcript.display().to_string(), true);
        let cap = Capture::open(&db).unwrap();
        let view = CaptureView::load(cap.reader()).unwrap();
        let (bound, _) = view.match_now(&session).unwrap();
        assert_eq!(
            shown(
                &view.session_mcp_servers(1, &session, &bound).unwrap(),
                &view
            ),
            found
        );
        // A capture that stores servers and stored none for the session:
        // none (its configuration is not read again), unless asked now.
        let db = capture(dir.path(), &transcript.display().to_string(), false);
        let cap = Capture::open(&db).unwrap();
        let view = CaptureView::load(cap.reader()).unwrap();
        let (bound, _) = view.match_now(&session).unwrap();
        assert_eq!(bound.len(), 1);
        assert_eq!(shown(&view.mcp_servers(1).unwrap(), &view), vec![]);
        assert_eq!(
            shown(
                &view.session_mcp_servers(1, &session, &bound).unwrap(),
                &view
            ),
            vec![]
        );
        assert_eq!(
            shown(&view.mcp_servers_now(&session, &bound).unwrap(), &view),
            found
        );
        // A transcript outside any configuration home: nothing.
        session.source_path = dir.path().join(format!("{ID}.jsonl"));
        assert_eq!(
            shown(&view.mcp_servers_now(&session, &bound).unwrap(), &view),
            vec![]
        );
    }

    #[test]
    fn stored_servers_are_read_with_their_process_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = capture(dir.path(), "/h/.claude/projects/-w/x.jsonl", false);
        let row = |process_id| McpServerRow {
            session_row: 1,
            name: "fs".into(),
            transport: "stdio".into(),
            command: vec!["node".into()],
            url: None,
            source: "s".into(),
            kind: None,
            process_id,
            evidence: None,
        };
        CaptureRw::open(&db)
            .unwrap()
            .put_mcp_servers(&[row(Some(2)), row(None)])
            .unwrap();
        let cap = Capture::open(&db).unwrap();
        let view = CaptureView::load(cap.reader()).unwrap();
        assert_eq!(
            shown(&view.mcp_servers(1).unwrap(), &view),
            vec![("fs".into(), Some(101), 1), ("fs".into(), None, 1)]
        );
    }
}
