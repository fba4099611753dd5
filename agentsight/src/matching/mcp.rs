//! MCP servers among a session's processes: which process of its bound
//! trees ran each stdio server its agent's configuration declares.
//!
//! Pure, like the rest of matching: the process table, the session's agent
//! processes and its configured servers in, the server processes out;
//! nothing is stored here (enrichment stores, `docs/correlate.md`, MCP).
//!
//! A stdio server is started by the agent runtime: its process is the
//! topmost process under an agent process whose argv runs the configured
//! command (see [`runs_command`]). Between the agent process and the server
//! there may be the runtime's own launcher: a fork of the agent process that
//! has not exec'd (same argv as its parent). Anything else above a process
//! (a shell a tool call started) means the agent did not start it as a
//! server. A process that matches no configuration is never a server.

use std::collections::HashSet;

use super::ProcTable;
use crate::{
    sessions::mcp::{self, McpServerConfig, McpTransport},
    store::mcp::McpServerRow,
};

crate::vocabulary::vocabulary! {
    /// How a server's process was recognised.
    ServerEvidence {
        /// Child of an agent process, its argv runs the configured command.
        Argv => "argv",
    }
}

/// The agent itself: each bound tree's root and every process that wrote
/// the session's transcript, with its ancestors up to a root (a launcher
/// such as Codex's node shim or Gemini CLI's relaunch parent sits above the
/// writer). Roots first, so a writer's climb stops at its tree's root.
pub fn agent_processes(
    roots: impl IntoIterator<Item = usize>,
    writers: impl IntoIterator<Item = usize>,
    procs: &ProcTable,
) -> HashSet<usize> {
    let mut agent: HashSet<usize> = roots.into_iter().collect();
    for w in writers {
        let mut p = Some(w);
        while let Some(i) = p {
            if !agent.insert(i) {
                break;
            }
            p = procs.procs[i].parent;
        }
    }
    agent
}

/// The argv a session's MCP configuration is read with (Claude Code's
/// `--mcp-config`, Codex's `-c mcp_servers.…`): that of the process that
/// wrote its transcript first (`writers`: process and time), else of its
/// first bound tree's root; empty when neither is known.
pub fn config_argv(procs: &ProcTable, roots: &[usize], writers: &[(usize, u64)]) -> Vec<String> {
    writers
        .iter()
        .min_by_key(|(p, at)| (*at, *p))
        .map(|&(p, _)| p)
        .or(roots.first().copied())
        .map(|p| procs.procs[p].argv.clone())
        .unwrap_or_default()
}

/// One process that ran a configured stdio server. A server restarted
/// during the run has one of these per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerProcess {
    /// Index of the server in the configurations given.
    pub config: usize,
    /// The server's topmost process (index in the [`ProcTable`]); its
    /// subtree is the server's.
    pub proc: usize,
    pub evidence: ServerEvidence,
}

/// The processes of the configured stdio servers among the children of the
/// `agent` processes, in process-table order. A process that several
/// configurations match goes to the one with the most arguments; a tie
/// (two names for one command line) is left unassigned, since nothing tells
/// which name the agent started it under.
pub fn identify_servers(
    procs: &ProcTable,
    agent: &HashSet<usize>,
    configs: &[McpServerConfig],
) -> Vec<ServerProcess> {
    let stdio: Vec<usize> = (0..configs.len())
        .filter(|&c| configs[c].transport == McpTransport::Stdio && !configs[c].command.is_empty())
        .collect();
    if stdio.is_empty() {
        return Vec::new();
    }
    let mut agents: Vec<usize> = agent.iter().copied().collect();
    agents.sort_unstable();
    let mut out = Vec::new();
    // Children of agent processes, then through launcher forks.
    let mut stack: Vec<usize> = agents
        .iter()
        .flat_map(|&a| procs.children[a].iter().copied())
        .filter(|c| !agent.contains(c))
        .collect();
    let mut seen: HashSet<usize> = HashSet::new();
    while let Some(p) = stack.pop() {
        if !seen.insert(p) {
            continue;
        }
        let argv = &procs.procs[p].argv;
        match best_config(argv, configs, &stdio) {
            Best::One(config) => out.push(ServerProcess {
                config,
                proc: p,
                evidence: ServerEvidence::Argv,
            }),
            // A server, but of which name is unknown: its subtree is
            // nobody's other server either.
            Best::Tied => {}
            Best::None if is_launcher_fork(procs, p) => {
                stack.extend(procs.children[p].iter().copied());
            }
            Best::None => {}
        }
    }
    out.sort_by_key(|s| (s.proc, s.config));
    out
}

/// The rows of one session's servers (`session_row`): each configured
/// server once, a stdio server once per process that ran it (a restart
/// gives two) or once without a process when none was found; a remote
/// server with its URL and no process.
pub fn server_rows(
    session_row: i64,
    configs: &[McpServerConfig],
    procs: &ProcTable,
    found: &[ServerProcess],
) -> Vec<McpServerRow> {
    let mut out = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        let row = |process: Option<&ServerProcess>| McpServerRow {
            session_row,
            name: c.name.clone(),
            transport: c.transport.as_str().to_string(),
            command: c.command.clone(),
            url: c.url.clone(),
            source: c.source.clone(),
            kind: mcp::server_kind(c).map(str::to_string),
            process_id: process.map(|s| procs.procs[s.proc].id),
            evidence: process.map(|s| s.evidence.as_str().to_string()),
        };
        let mine: Vec<&ServerProcess> = found.iter().filter(|s| s.config == i).collect();
        if mine.is_empty() {
            out.push(row(None));
        } else {
            out.extend(mine.into_iter().map(|s| row(Some(s))));
        }
    }
    out
}

enum Best {
    None,
    One(usize),
    Tied,
}

/// The configuration `argv` runs with the most arguments.
fn best_config(argv: &[String], configs: &[McpServerConfig], stdio: &[usize]) -> Best {
    let mut best: Option<(usize, usize)> = None;
    let mut tied = false;
    for &c in stdio {
        let command = &configs[c].command;
        if !runs_command(argv, command) {
            continue;
        }
        let args = command.len() - 1;
        match best {
            Some((_, n)) if n > args => {}
            Some((_, n)) if n == args => tied = true,
            _ => {
                best = Some((c, args));
                tied = false;
            }
        }
    }
    match best {
        None => Best::None,
        Some(_) if tied => Best::Tied,
        Some((c, _)) => Best::One(c),
    }
}

/// A fork of its parent that has not exec'd (the capture copies the
/// parent's argv at fork): the runtime's own launcher, not a program of its
/// own.
fn is_launcher_fork(procs: &ProcTable, p: usize) -> bool {
    let proc = &procs.procs[p];
    !proc.argv.is_empty()
        && proc
            .parent
            .is_some_and(|parent| procs.procs[parent].argv == proc.argv)
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Does the exec'd `argv` run the configured `command` (program and
/// arguments)? The configured arguments are the end of the argv, in order,
/// and what comes before them runs the program, compared by basename:
/// `node` runs `/usr/bin/node`; a script is run by its interpreter once its
/// `#!` line is followed (`npx` becomes `node /usr/bin/npx`, `env node
/// /usr/bin/npx` on the way), so the program may also be the script after
/// an interpreter and its options.
pub fn runs_command(argv: &[String], command: &[String]) -> bool {
    let Some((program, args)) = command.split_first() else {
        return false;
    };
    let program = basename(program);
    if program.is_empty() || argv.len() <= args.len() || !argv.ends_with(args) {
        return false;
    }
    let head = &argv[..argv.len() - args.len()];
    if basename(&head[0]) == program {
        return true;
    }
    // `env [-opts] [NAME=V…] interpreter`: the interpreter is what env runs.
    let head = match head.split_first() {
        Some((env, rest)) if basename(env) == "env" => {
            let skip = rest
                .iter()
                .take_while(|w| w.starts_with('-') || w.contains('='))
                .count();
            &rest[skip..]
        }
        _ => head,
    };
    // interpreter [-options…] script
    match head {
        [_, options @ .., script] => {
            basename(script) == program && options.iter().all(|w| w.starts_with('-'))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::Proc;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// Processes as (parent index, argv), ids and pids from their index;
    /// the argv's words are split at spaces, and `+` stands for a space
    /// inside a word (`sh -c node+x.js`).
    fn table(rows: &[(Option<usize>, &str)]) -> ProcTable {
        let procs: Vec<Proc> = rows
            .iter()
            .enumerate()
            .map(|(i, (parent, argv))| Proc {
                id: i as i64 + 1,
                pid: 100 + i as u32,
                start_mono_ns: i as u64,
                parent: *parent,
                end_mono_ns: None,
                cwd: Some("/w".into()),
                argv: words(argv).iter().map(|w| w.replace('+', " ")).collect(),
                comm: None,
                uid: None,
                exit_code: None,
                signal: None,
            })
            .collect();
        let mut t = ProcTable {
            by_id: procs.iter().enumerate().map(|(i, p)| (p.id, i)).collect(),
            children: vec![Vec::new(); procs.len()],
            procs,
        };
        for i in 0..t.procs.len() {
            if let Some(p) = t.procs[i].parent {
                t.children[p].push(i);
            }
        }
        t
    }

    fn stdio(name: &str, command: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.into(),
            transport: McpTransport::Stdio,
            command: words(command),
            cwd: None,
            url: None,
            source: "/h/.claude.json".into(),
        }
    }

    /// (config name, pid) of each server process found.
    fn found(t: &ProcTable, agent: &[usize], configs: &[McpServerConfig]) -> Vec<(String, u32)> {
        let agent: HashSet<usize> = agent.iter().copied().collect();
        identify_servers(t, &agent, configs)
            .into_iter()
            .map(|s| {
                assert_eq!(s.evidence, ServerEvidence::Argv);
                (configs[s.config].name.clone(), t.procs[s.proc].pid)
            })
            .collect()
    }

    #[test]
    fn agent_processes_are_roots_and_writers_with_their_ancestors() {
        // sh → node shim → codex (writes) → bash; the tree's root is the shim.
        let t = table(&[
            (None, "sh -c codex"),
            (Some(0), "node /usr/lib/codex.js"),
            (Some(1), "/opt/codex"),
            (Some(2), "bash -lc ls"),
        ]);
        let mut got: Vec<usize> = agent_processes([1], [2], &t).into_iter().collect();
        got.sort_unstable();
        assert_eq!(got, vec![1, 2]);
    }

    #[test]
    fn a_direct_child_running_the_configured_command_is_the_server() {
        let t = table(&[
            (None, "claude -p hi"),
            (Some(0), "/usr/bin/node /opt/fs/dist/index.js /w"),
            (Some(0), "bash -c ls"),
        ]);
        let configs = [stdio("fs", "node /opt/fs/dist/index.js /w")];
        assert_eq!(found(&t, &[0], &configs), vec![("fs".to_string(), 101)]);
    }

    #[test]
    fn npx_chain_is_matched_at_npx() {
        // npx is a node script: its argv is node's once `#!` is followed;
        // its `sh -c` and the real server below it are its subtree.
        let t = table(&[
            (None, "claude -p hi"),
            (
                Some(0),
                "node /usr/bin/npx -y @modelcontextprotocol/server-filesystem /w",
            ),
            (Some(1), "sh -c mcp-server-filesystem+/w"),
            (
                Some(2),
                "node /root/.npm/_npx/1/node_modules/.bin/mcp-server-filesystem /w",
            ),
        ]);
        let configs = [
            stdio("fs", "npx -y @modelcontextprotocol/server-filesystem /w"),
            // Would match the innermost process: never looked at.
            stdio("inner", "mcp-server-filesystem /w"),
        ];
        assert_eq!(found(&t, &[0], &configs), vec![("fs".to_string(), 101)]);
    }

    #[test]
    fn arguments_must_end_the_argv_in_order() {
        let t = table(&[
            (None, "claude"),
            (Some(0), "node /opt/fs/dist/index.js /b /a"),
            (Some(0), "node /opt/fs/dist/index.js /a /b --extra"),
            (Some(0), "python3 /opt/fs/dist/index.js /a /b"),
        ]);
        let configs = [stdio("fs", "node /opt/fs/dist/index.js /a /b")];
        assert_eq!(found(&t, &[0], &configs), vec![]);
    }

    #[test]
    fn a_matching_process_that_the_agent_did_not_start_is_not_a_server() {
        // The same command run by a tool call's shell, and one outside the
        // agent altogether.
        let t = table(&[
            (None, "claude"),
            (Some(0), "bash -c node+/opt/fs/dist/index.js+/w"),
            (Some(1), "node /opt/fs/dist/index.js /w"),
            (None, "node /opt/fs/dist/index.js /w"),
        ]);
        let configs = [stdio("fs", "node /opt/fs/dist/index.js /w")];
        assert_eq!(found(&t, &[0], &configs), vec![]);
    }

    #[test]
    fn a_launcher_fork_of_the_agent_is_passed_through() {
        let t = table(&[
            (None, "claude"),
            (Some(0), "claude"),
            (Some(1), "node /opt/fs/dist/index.js /w"),
        ]);
        let configs = [stdio("fs", "node /opt/fs/dist/index.js /w")];
        assert_eq!(found(&t, &[0], &configs), vec![("fs".to_string(), 102)]);
    }

    #[test]
    fn no_configuration_no_server() {
        let t = table(&[(None, "claude"), (Some(0), "node /opt/fs/dist/index.js /w")]);
        assert_eq!(found(&t, &[0], &[]), vec![]);
        let remote = McpServerConfig {
            transport: McpTransport::Http,
            command: Vec::new(),
            url: Some("http://127.0.0.1:9/mcp".into()),
            ..stdio("web", "")
        };
        assert_eq!(found(&t, &[0], &[remote]), vec![]);
    }

    #[test]
    fn a_restarted_server_has_both_processes() {
        let t = table(&[
            (None, "gemini"),
            (Some(0), "node /opt/fs/dist/index.js /w"),
            (Some(0), "node /opt/fs/dist/index.js /w"),
        ]);
        let configs = [stdio("fs", "node /opt/fs/dist/index.js /w")];
        assert_eq!(
            found(&t, &[0], &configs),
            vec![("fs".to_string(), 101), ("fs".to_string(), 102)]
        );
    }

    #[test]
    fn the_more_specific_configuration_wins_and_a_tie_names_nobody() {
        let t = table(&[(None, "claude"), (Some(0), "node /opt/fs/dist/index.js /w")]);
        let general = stdio("general", "node /w");
        let specific = stdio("specific", "node /opt/fs/dist/index.js /w");
        assert_eq!(
            found(&t, &[0], &[general, specific.clone()]),
            vec![("specific".to_string(), 101)]
        );
        let twin = stdio("twin", "node /opt/fs/dist/index.js /w");
        assert_eq!(found(&t, &[0], &[specific, twin]), vec![]);
    }

    #[test]
    fn the_program_is_compared_by_basename() {
        for (argv, command, runs) in [
            ("/usr/bin/node x.js", "node x.js", true),
            ("node x.js", "/usr/local/bin/node x.js", true),
            ("/usr/bin/env node /usr/bin/npx -y p", "npx -y p", true),
            ("python3 -m srv", "python3 -m srv", true),
            ("python3 -m srv", "python -m srv", false),
            ("node", "node", true),
            ("nodejs x.js", "node x.js", false),
            ("node --no-warnings /usr/bin/npx -y p", "npx -y p", true),
            ("/usr/bin/env -S A=1 node /usr/bin/npx p", "npx p", true),
            ("sh -c node+x.js", "node x.js", false),
            ("x.js", "node x.js", false),
        ] {
            let argv: Vec<String> = words(argv).iter().map(|w| w.replace('+', " ")).collect();
            assert_eq!(
                runs_command(&argv, &words(command)),
                runs,
                "{argv:?} / {command}"
            );
        }
    }
}
