//! Phase 4, attribution: argv matches (which measure the clock skew and so
//! the calls' own windows), the agent's own processes, each process's owning
//! call, then each activity's call and reason — or agent bookkeeping, or
//! unclaimed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::{
    ARGV_SEARCH_MS,
    calls::{Call, claiming_call, window_call},
    mcp::{self, McpSide},
    report::{Activity, By, Op, Reason},
    runtime::RuntimeSide,
    shell,
    view::BoundTree,
};
use crate::{clock::Anchors, matching::ProcTable, sessions::AgentSession};

/// The argv matches: the first exec of each process that runs a call's
/// command inside the call's argv search window.
pub(super) struct ArgvMatches {
    /// Each process's first exec (mono).
    pub first_exec: HashMap<usize, u64>,
    /// Process → (call, exec time).
    pub matched: HashMap<usize, (usize, u64)>,
}

impl ArgvMatches {
    pub fn find(acts: &[Activity], calls: &[Call]) -> Self {
        let mut first_exec: HashMap<usize, u64> = HashMap::new();
        let mut matched: HashMap<usize, (usize, u64)> = HashMap::new();
        let mut used_call: Vec<bool> = vec![false; calls.len()];
        for a in acts.iter().filter(|a| a.op == Op::Exec) {
            first_exec.entry(a.proc_ix).or_insert(a.mono_ns);
            if matched.contains_key(&a.proc_ix) {
                continue;
            }
            let Some(argv) = &a.argv else { continue };
            // Prefer a call not yet matched, then the latest started.
            let best = calls
                .iter()
                .enumerate()
                .filter(|(_, c)| c.lo_mono <= a.mono_ns && a.mono_ns <= c.hi_mono)
                .filter(|(_, c)| {
                    c.script
                        .as_deref()
                        .is_some_and(|s| shell::argv_matches(argv, s).is_some())
                })
                .max_by_key(|(ci, c)| (!used_call[*ci], c.start_ms));
            if let Some((ci, _)) = best {
                used_call[ci] = true;
                matched.insert(a.proc_ix, (ci, a.mono_ns));
            }
        }
        ArgvMatches {
            first_exec,
            matched,
        }
    }

    /// Exec − call start (ms) of every match: the skew samples.
    pub fn delays(&self, calls: &[Call], anchors: &Anchors) -> Vec<i64> {
        self.matched
            .values()
            .map(|&(ci, at)| anchors.wall_ms(at) - calls[ci].start_ms)
            .collect()
    }
}

/// The agent itself (`matching::mcp::agent_processes`, which also finds a
/// session's MCP servers among their children): each tree's root and every
/// process that wrote the transcript, with its ancestors. These are never
/// owned by a call's window, or every tool process they start later would
/// become that call's descendant.
pub(super) fn agent_processes(
    bound: &[BoundTree],
    acts: &[Activity],
    procs: &ProcTable,
    session: &AgentSession,
) -> HashSet<usize> {
    let transcript_path = session.source_path.display().to_string();
    let writers = acts
        .iter()
        .filter(|a| a.op != Op::Exec && a.path.as_deref() == Some(transcript_path.as_str()))
        .map(|a| a.proc_ix);
    crate::matching::mcp::agent_processes(bound.iter().map(|b| b.root), writers, procs)
}

/// Process → (call, how, since when): in start order (parents before
/// children), a process is its parent's call's descendant, else the call
/// whose command it runs, else (not the agent's own) the call whose window
/// its first exec falls in. An MCP server's processes are the agent's
/// side: the server's own process is never owned, and a process of its
/// subtree is owned only by an MCP call of that server it started during
/// (`descendant` from its start).
pub(super) fn owners(
    members: impl Iterator<Item = usize>,
    procs: &ProcTable,
    argv: &ArgvMatches,
    agent: &HashSet<usize>,
    calls: &[Call],
    servers: &McpSide,
) -> HashMap<usize, (usize, Reason, u64)> {
    let mut order: Vec<usize> = members.collect();
    order.sort_by_key(|&i| (procs.procs[i].start_mono_ns, i));
    let mut owner: HashMap<usize, (usize, Reason, u64)> = HashMap::new();
    let mut helpers: HashSet<usize> = HashSet::new();
    for &p in &order {
        let start = procs.procs[p].start_mono_ns;
        // The agent's own helpers and their children are the runtime's.
        let parent = procs.procs[p].parent;
        if parent.is_some_and(|pp| helpers.contains(&pp))
            || (parent.is_some_and(|pp| agent.contains(&pp))
                && is_runtime_helper(&procs.procs[p].argv))
        {
            helpers.insert(p);
            continue;
        }
        let parent_owner = procs.procs[p]
            .parent
            .and_then(|pp| owner.get(&pp).copied())
            .filter(|(_, _, since)| start >= *since);
        if let Some(server) = servers.server_of_process(p) {
            if servers.is_server_root(p) {
                continue;
            }
            let started_by_call = parent_owner.map(|(c, _, _)| c).or_else(|| {
                let during = servers.calls_at(calls, server, start);
                mcp::latest_before(calls, &during, start)
            });
            if let Some(c) = started_by_call {
                owner.insert(p, (c, Reason::Descendant, start));
            }
            continue;
        }
        if let Some((c, _, _)) = parent_owner {
            owner.insert(p, (c, Reason::Descendant, start));
        } else if let Some(&(c, at)) = argv.matched.get(&p) {
            owner.insert(p, (c, Reason::ArgvMatch, at));
        } else if !agent.contains(&p)
            && let Some(&at) = argv.first_exec.get(&p)
            && let Some(ci) = window_call(calls, at)
        {
            owner.insert(p, (ci, Reason::TimeWindow, at));
        }
    }
    owner
}

/// A helper the agent starts for itself around calls, never for one: Qwen
/// Code 0.24 holds a sleep inhibitor (`systemd-inhibit --what=sleep
/// --who=Qwen Code --why=… --mode=block sleep infinity`) while it streams a
/// response or runs any tool, so one starts inside every call's window.
/// Copilot CLI 1.0.102 reads the login environment once, at its first
/// shell call (`/bin/bash -l -c "printf %s '__copilot_login_env_snapshot_…'
/// …env -0…"`), before it runs the call's own `bash --norc --noprofile -c`.
fn is_runtime_helper(argv: &[String]) -> bool {
    let inhibitor = argv
        .first()
        .is_some_and(|a| a.rsplit('/').next() == Some("systemd-inhibit"))
        && argv.iter().any(|a| a == "--who=Qwen Code");
    let login_env = crate::correlate::shell::shell_script(argv)
        .is_some_and(|s| s.contains("__copilot_login_env_snapshot_"));
    inhibitor || login_env
}

/// The directory an agent keeps its own state in, from its transcript path
/// (`~/.claude`, `~/.codex`, `~/.gemini`, `~/.cursor`, `~/.copilot`,
/// `~/.qwen`, opencode's `$XDG_DATA_HOME/opencode`, which holds its
/// database, logs and git snapshots).
fn agent_state_dir(source: &Path) -> Option<PathBuf> {
    let mut cur = source.parent();
    while let Some(d) = cur {
        if d.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            matches!(
                n,
                ".claude"
                    | ".codex"
                    | ".gemini"
                    | ".cursor"
                    | "claude"
                    | ".copilot"
                    | ".qwen"
                    | "opencode"
            )
        }) {
            return Some(d.to_path_buf());
        }
        cur = d.parent();
    }
    None
}

/// Renames onto a path a call names, inside its window, by source path:
/// (process, rename time, call). A file event on that source path by the
/// same process before the rename is the call's too (`via_rename`).
type RenamedOnto = HashMap<String, Vec<(usize, u64, usize)>>;

fn renamed_onto(acts: &[Activity], calls: &[Call], servers: &McpSide) -> RenamedOnto {
    let mut out: RenamedOnto = HashMap::new();
    for a in acts.iter().filter(|a| a.op == Op::Rename) {
        let by_server = servers.server_of_process(a.proc_ix).is_some();
        if let (Some(from), Some(to)) = (a.old_path.as_deref(), a.path.as_deref())
            && let Some(ci) = claiming_call(calls, a.mono_ns, to, a.op, |c| {
                by_server || !servers.served(c.idx)
            })
        {
            out.entry(from.to_string())
                .or_default()
                .push((a.proc_ix, a.mono_ns, ci));
        }
    }
    out
}

/// Where every activity went.
pub(super) struct Attributed {
    /// Per call (index into the calls), in time order.
    pub per_call: Vec<Vec<Activity>>,
    pub unclaimed: Vec<Activity>,
    /// The agent runtime's own activity outside every call, with who and
    /// which program (`runtime::groups` groups it).
    pub runtime: Vec<(By, String, Activity)>,
    /// (path, op word) → (op, count) of the agent's writes to its own
    /// state; keyed by the word so the listing is in the order the words sort.
    pub books: BTreeMap<(String, &'static str), (Op, u64)>,
}

/// What attribution reads besides the activities.
pub(super) struct Attribution<'a> {
    pub calls: &'a [Call],
    pub owner: &'a HashMap<usize, (usize, Reason, u64)>,
    pub agent: &'a HashSet<usize>,
    pub procs: &'a ProcTable,
    pub session: &'a AgentSession,
    pub side: &'a RuntimeSide,
    pub servers: &'a McpSide<'a>,
}

impl Attribution<'_> {
    /// Attributes each activity: to its process's owning call, else to the
    /// call naming its path (directly or through a rename), else it is the
    /// agent's bookkeeping, the runtime's own activity, or unexplained
    /// (claimed reads no call names are dropped).
    pub fn run(&self, acts: Vec<Activity>) -> Attributed {
        let calls = self.calls;
        let renamed = renamed_onto(&acts, calls, self.servers);
        // A served MCP call's activity is its server's alone (below).
        let anyone_s = |c: &Call| !self.servers.served(c.idx);
        let state_dir = agent_state_dir(&self.session.source_path);
        let transcript = self.session.source_path.display().to_string();
        let mut out = Attributed {
            per_call: vec![Vec::new(); calls.len()],
            unclaimed: Vec::new(),
            runtime: Vec::new(),
            books: BTreeMap::new(),
        };
        for mut a in acts {
            let own = self
                .owner
                .get(&a.proc_ix)
                .copied()
                .filter(|(_, _, since)| a.mono_ns >= *since);
            if let Some((ci, how, _)) = own {
                a.reason = Some(how);
                if a.op == Op::Exec {
                    let p = &self.procs.procs[a.proc_ix];
                    a.exit_code = p.exit_code.or(p.signal.map(|s| 128 + s));
                }
                a.late = calls[ci]
                    .end_ms
                    .is_some_and(|e| a.wall_ms > e + ARGV_SEARCH_MS);
                out.per_call[ci].push(a);
                continue;
            }
            // An MCP server's activity is its calls' or the runtime's, never
            // a built-in call's.
            let server = self.servers.server_of_process(a.proc_ix).or_else(|| {
                self.agent
                    .contains(&a.proc_ix)
                    .then(|| self.servers.remote_server_of(&a))
                    .flatten()
            });
            if let Some(server) = server {
                self.server_activity(server, a, &renamed, &mut out);
                continue;
            }
            if let Some(p) = a.path.as_deref()
                && let Some(ci) = claiming_call(calls, a.mono_ns, p, a.op, anyone_s)
            {
                a.reason = Some(Reason::PathMatch);
                out.per_call[ci].push(a);
                continue;
            }
            if a.op != Op::Exec
                && let Some(p) = a.path.as_deref()
                && let Some(&(_, _, ci)) = renamed.get(p).and_then(|v| {
                    v.iter().find(|&&(proc_ix, at, ci)| {
                        proc_ix == a.proc_ix && a.mono_ns <= at && calls[ci].win_lo <= a.mono_ns
                    })
                })
            {
                a.reason = Some(Reason::ViaRename);
                out.per_call[ci].push(a);
                continue;
            }
            if a.op == Op::Read {
                continue;
            }
            if let Some(p) = a.path.as_deref()
                && (p == transcript
                    || state_dir
                        .as_deref()
                        .is_some_and(|d| Path::new(p).starts_with(d)))
            {
                out.books
                    .entry((p.to_string(), a.op.as_str()))
                    .or_insert((a.op, 0))
                    .1 += 1;
                continue;
            }
            // The agent's own start (the exec of the tree's root) is not news.
            if a.op == Op::Exec && self.agent.contains(&a.proc_ix) {
                continue;
            }
            if let Some((by, program)) = self.side.classify(a.proc_ix, self.agent, self.procs) {
                a.by = Some(by);
                out.runtime.push((by, program, a));
                continue;
            }
            a.by = Some(if self.agent.contains(&a.proc_ix) {
                By::Runtime
            } else {
                By::Child
            });
            out.unclaimed.push(a);
        }
        out
    }

    /// An activity of MCP server `server` (a process of its subtree no call
    /// started, or an agent's connect to its endpoint) is, by `mcp_server`,
    /// the call of that server whose window holds it — of several (parallel
    /// calls), the one naming its path (directly, or the temp file the same
    /// process then renames onto it, as `via_rename` ties it), else the
    /// latest started before it; outside every call of the server, the
    /// runtime group `mcp server NAME` (a read there is dropped, as
    /// elsewhere).
    fn server_activity(
        &self,
        server: usize,
        mut a: Activity,
        renamed: &RenamedOnto,
        out: &mut Attributed,
    ) {
        let calls = self.calls;
        let during = self.servers.calls_at(calls, server, a.mono_ns);
        let names = |ci: usize| {
            calls[ci].paths.iter().any(|(cp, _)| {
                a.path.as_deref() == Some(cp.as_str()) || a.old_path.as_deref() == Some(cp.as_str())
            })
        };
        let latest =
            |cands: &mut dyn Iterator<Item = usize>| cands.max_by_key(|&ci| calls[ci].start_ms);
        let via = || {
            let p = a.path.as_deref().filter(|_| a.op != Op::Exec)?;
            renamed.get(p)?.iter().find_map(|&(proc_ix, at, ci)| {
                (proc_ix == a.proc_ix && a.mono_ns <= at && during.contains(&ci)).then_some(ci)
            })
        };
        let chosen = latest(&mut during.iter().copied().filter(|&ci| names(ci)))
            .or_else(via)
            .or_else(|| mcp::latest_before(calls, &during, a.mono_ns));
        if let Some(ci) = chosen {
            a.reason = Some(Reason::McpServer);
            if a.op == Op::Exec {
                let p = &self.procs.procs[a.proc_ix];
                a.exit_code = p.exit_code.or(p.signal.map(|s| 128 + s));
            }
            a.late = calls[ci]
                .end_ms
                .is_some_and(|e| a.wall_ms > e + ARGV_SEARCH_MS);
            out.per_call[ci].push(a);
            return;
        }
        if a.op == Op::Read {
            return;
        }
        let by = if self.agent.contains(&a.proc_ix) {
            By::Runtime
        } else {
            By::Child
        };
        a.by = Some(by);
        let program = mcp::group_program(self.servers.name(server));
        out.runtime.push((by, program, a));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen_codes_sleep_inhibitor_is_a_runtime_helper() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_runtime_helper(&v(&[
            "systemd-inhibit",
            "--what=sleep",
            "--who=Qwen Code",
            "--why=Qwen Code is executing tool run_shell_command",
            "--mode=block",
            "sleep",
            "infinity"
        ])));
        assert!(!is_runtime_helper(&v(&[
            "systemd-inhibit",
            "--what=sleep",
            "make"
        ])));
        assert!(!is_runtime_helper(&v(&["sleep", "infinity"])));
        assert!(is_runtime_helper(&v(&[
            "/bin/bash",
            "-l",
            "-c",
            "printf %s '__copilot_login_env_snapshot_2dde_18ed74b5782e7b08__'; env -0"
        ])));
        assert!(!is_runtime_helper(&v(&[
            "/bin/bash",
            "--norc",
            "--noprofile",
            "-c",
            "cat hello.txt"
        ])));
    }

    #[test]
    fn the_agent_state_dir_is_found_above_the_transcript() {
        assert_eq!(
            agent_state_dir(Path::new("/h/.claude/projects/-w/s1.jsonl")),
            Some(PathBuf::from("/h/.claude"))
        );
        assert_eq!(
            agent_state_dir(Path::new("/h/.codex/sessions/2026/01/02/r.jsonl")),
            Some(PathBuf::from("/h/.codex"))
        );
        assert_eq!(
            agent_state_dir(Path::new(
                "/h/.copilot/session-state/0f6c1f9e-6a39-4c4e-9d4e-3b2f1c0a9e11/events.jsonl"
            )),
            Some(PathBuf::from("/h/.copilot"))
        );
        assert_eq!(
            agent_state_dir(Path::new("/h/.qwen/projects/-w/chats/s.jsonl")),
            Some(PathBuf::from("/h/.qwen"))
        );
        assert_eq!(
            agent_state_dir(Path::new("/h/.local/share/opencode/opencode.db")),
            Some(PathBuf::from("/h/.local/share/opencode"))
        );
        assert_eq!(agent_state_dir(Path::new("/tmp/s.jsonl")), None);
    }
}
