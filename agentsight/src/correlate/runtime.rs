//! Phase 4b, the agent runtime's own activity: of the activity no call
//! claims, what the recognised agent CLI did itself or through a helper it
//! started outside every call (grouped, never flagged), apart from what is
//! genuinely unexplained (flagged). The rules are in `docs/correlate.md`.

use std::collections::{HashMap, HashSet};

use super::report::{Activity, By, Op, RuntimeGroup};
use crate::{matching::ProcTable, sessions::Provider};

/// The name a provider's CLI is recognised by in its command line.
fn cli_name(p: Provider) -> &'static str {
    p.cli_name()
}

/// Does `argv` run the CLI called `name`? Its program (the first word) or
/// the script an interpreter runs (the first word after it that is not an
/// option) has a path component that is the name or starts with `NAME-`
/// (`codex`, `node /usr/lib/node_modules/@openai/codex/bin/codex.js`,
/// `node --max-old-space-size=N …/@google/gemini-cli/dist/index.js`,
/// `…/@anthropic-ai/claude-code/cli.js`, `~/.local/share/claude/versions/2.1.0`).
/// An argument naming it (`python3 agent.py claude`) is not the CLI.
pub(super) fn runs_cli(argv: &[String], name: &str) -> bool {
    let script = argv.iter().skip(1).find(|w| !w.starts_with('-'));
    argv.first().into_iter().chain(script).any(|w| {
        w.split('/').any(|c| {
            c == name
                || c.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('-'))
        })
    })
}

/// Which processes are the agent runtime and what each helper is called.
pub(super) struct RuntimeSide {
    /// The agent processes (tree roots, transcript writers and their
    /// ancestors) at or below one that runs the provider's CLI: wrappers
    /// above the CLI (a shell, `sudo`, a launcher script) are not the
    /// runtime.
    runtime: HashSet<usize>,
    /// Each process's program at its first exec (`comm`).
    first_comm: HashMap<usize, String>,
}

impl RuntimeSide {
    pub fn of(
        agent: &HashSet<usize>,
        procs: &ProcTable,
        provider: Provider,
        acts: &[Activity],
    ) -> Self {
        let name = cli_name(provider);
        let runtime = agent
            .iter()
            .copied()
            .filter(|&p| {
                let mut cur = Some(p);
                while let Some(i) = cur.filter(|i| agent.contains(i)) {
                    if runs_cli(&procs.procs[i].argv, name) {
                        return true;
                    }
                    cur = procs.procs[i].parent;
                }
                false
            })
            .collect();
        let mut first_comm = HashMap::new();
        for a in acts
            .iter()
            .filter(|a| a.op == Op::Exec && !a.comm.is_empty())
        {
            first_comm
                .entry(a.proc_ix)
                .or_insert_with(|| a.comm.clone());
        }
        RuntimeSide {
            runtime,
            first_comm,
        }
    }

    /// For an activity no call claims, of process `p`: `Some((by,
    /// program))` when it is the runtime's own (its process, or a helper it
    /// started: the first agent process above `p` is the runtime), `None`
    /// when it is unexplained.
    pub fn classify(
        &self,
        p: usize,
        agent: &HashSet<usize>,
        procs: &ProcTable,
    ) -> Option<(By, String)> {
        if agent.contains(&p) {
            return self
                .runtime
                .contains(&p)
                .then(|| (By::Runtime, self.program(p, procs)));
        }
        // Climb to the helper the agent started (the topmost process that
        // is not the agent's) and the agent process that started it.
        let (mut helper, mut cur) = (p, procs.procs[p].parent);
        while let Some(q) = cur {
            if agent.contains(&q) {
                return self
                    .runtime
                    .contains(&q)
                    .then(|| (By::Child, self.program(helper, procs)));
            }
            helper = q;
            cur = procs.procs[q].parent;
        }
        None
    }

    fn program(&self, p: usize, procs: &ProcTable) -> String {
        let proc = &procs.procs[p];
        self.first_comm
            .get(&p)
            .cloned()
            .or_else(|| proc.comm.clone())
            .or_else(|| {
                proc.argv
                    .first()
                    .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
            })
            .unwrap_or_else(|| "?".into())
    }
}

/// The runtime's activity grouped by (who, program), groups in the order
/// of their first activity, each group's activity in time order.
pub(super) fn groups(items: Vec<(By, String, Activity)>) -> Vec<RuntimeGroup> {
    let mut out: Vec<RuntimeGroup> = Vec::new();
    let mut index: HashMap<(By, String), usize> = HashMap::new();
    let mut seen: Vec<HashSet<i64>> = Vec::new();
    for (by, program, a) in items {
        let i = *index.entry((by, program.clone())).or_insert_with(|| {
            out.push(RuntimeGroup {
                program,
                by,
                processes: 0,
                count: 0,
                activity: Vec::new(),
            });
            seen.push(HashSet::new());
            out.len() - 1
        });
        if seen[i].insert(a.process_id) {
            out[i].processes += 1;
        }
        out[i].count += 1;
        out[i].activity.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn an_agent_cli_is_recognised_by_its_command() {
        for (words, name) in [
            (&["codex", "exec", "hi"][..], "codex"),
            (
                &["node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"][..],
                "codex",
            ),
            (
                &["/home/u/.local/share/claude/versions/2.1.0"][..],
                "claude",
            ),
            (
                &[
                    "node",
                    "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
                ][..],
                "claude",
            ),
            (
                &[
                    "node",
                    "--max-old-space-size=4096",
                    "/usr/lib/node_modules/@google/gemini-cli/dist/index.js",
                ][..],
                "gemini",
            ),
            (&["cursor-agent", "-p"][..], "cursor-agent"),
        ] {
            assert!(runs_cli(&argv(words), name), "{words:?}");
        }
        for (words, name) in [
            // The demo's scripted agent, a fake named like the CLI, a
            // transcript path in the arguments, a fifth word.
            (
                &["/bin/bash", "/tmp/demo/agent.sh", "/tmp/demo/work"][..],
                "claude",
            ),
            (&["python3", "/t/fake_claude.py"][..], "claude"),
            (&["sh", "/h/.claude/projects/x.jsonl"][..], "claude"),
            (&["sh", "-c", "x", "y", "codex"][..], "codex"),
            (
                &["python3", "/t/scripted_agent.py", "claude", "s1"][..],
                "claude",
            ),
            (&["codexer"][..], "codex"),
        ] {
            assert!(!runs_cli(&argv(words), name), "{words:?}");
        }
    }
}
