//! What `session message` never lets happen, with stand-in providers
//! (`AGENTSIGHT_*_BIN` scripts whose ground truth the test writes): the
//! message file read with the caller's rights and never through a link; the
//! agent without our terminal (its own session) and stopped, tools and all,
//! when we are; the tools it leaves behind gone with its turn; a provider
//! that stops reading its input caught by the 20 s bound; docker driven
//! with the caller's rights under sudo; a turn bound that cannot overflow.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentsight_tests::{TEST_USER, bin, require_root, scratch, test_user};

const CLAUDE_ID: &str = "5e55a000-0000-4000-8000-00000000c1a0";
const CODEX_ID: &str = "019b0000-0000-7000-8000-00000000c0de";

/// A scratch home of the test user with one Claude Code session and one
/// Codex session whose cwd is `work`; and a directory for the stand-ins'
/// reports.
struct Home {
    root: PathBuf,
    home: PathBuf,
    out: PathBuf,
}

fn home(name: &str) -> Home {
    let root = scratch(name);
    let (home, work, out) = (root.join("home"), root.join("work"), root.join("out"));
    let claude = home.join(".claude/projects/-work");
    let codex = home.join(".codex/sessions/2026/12/01");
    for d in [&claude, &codex, &work, &out] {
        std::fs::create_dir_all(d).unwrap();
    }
    let w = work.display();
    std::fs::write(
        claude.join(format!("{CLAUDE_ID}.jsonl")),
        format!(
            "{{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"sessionId\":\"{CLAUDE_ID}\",\"cwd\":\"{w}\",\"version\":\"2.1.328\",\"timestamp\":\"2026-12-01T10:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"hello\"}}}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        codex.join(format!("rollout-2026-12-01T10-00-00-{CODEX_ID}.jsonl")),
        format!(
            "{{\"timestamp\":\"2026-12-01T10:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{CODEX_ID}\",\"timestamp\":\"2026-12-01T10:00:00.000Z\",\"cwd\":\"{w}\",\"originator\":\"codex_exec\",\"cli_version\":\"0.169.0\"}}}}\n"
        ),
    )
    .unwrap();
    let (uid, gid) = test_user();
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success());
    Home { root, home, out }
}

/// An executable stand-in script in the scratch root.
fn stand_in(h: &Home, name: &str, body: &str) -> PathBuf {
    let p = h.root.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `session message` as the test user (`sudo`: as root with the test
/// user's SUDO_* instead).
fn message(h: &Home, sudo: bool, env: &[(&str, &Path)], args: &[&str]) -> Command {
    let (uid, gid) = test_user();
    let mut c = if sudo {
        let mut c = Command::new(bin());
        c.env("SUDO_UID", uid.to_string())
            .env("SUDO_GID", gid.to_string())
            .env("SUDO_USER", TEST_USER);
        c
    } else {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--init-groups")
            .arg("--")
            .arg(bin());
        c.env_remove("SUDO_UID")
            .env_remove("SUDO_GID")
            .env_remove("SUDO_USER");
        c
    };
    c.args(["session", "message"])
        .args(args)
        .args(["--allow-messaging", "--home"])
        .arg(&h.home)
        .env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn wait_for(p: &Path, what: &str) -> String {
    let t = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(p)
            && s.ends_with('\n')
        {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{what} never came");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_message_file_is_read_as_the_caller_and_never_through_a_link() {
    require_root();
    let h = home("msg-textfile");
    let agent = stand_in(&h, "claude", "exit 99");
    let env = [("AGENTSIGHT_CLAUDE_BIN", agent.as_path())];
    // Through sudo, root's files stay root's.
    let out: Output = message(&h, true, &env, &[CLAUDE_ID, "--text-file", "/etc/shadow"])
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(2),
            "agentsight: error: --text-file /etc/shadow: Permission denied (os error 13)\n"
                .to_string()
        )
    );
    // A link is refused even to a file the caller may read.
    let msg = h.out.join("msg.txt");
    std::fs::write(&msg, "hello").unwrap();
    let link = h.out.join("link.txt");
    std::os::unix::fs::symlink(&msg, &link).unwrap();
    let out = message(
        &h,
        true,
        &env,
        &[CLAUDE_ID, "--text-file", link.to_str().unwrap()],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "agentsight: error: --text-file {}: ",
            link.display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A too-long turn bound is refused before anything runs.
    let out = message(
        &h,
        false,
        &env,
        &[
            CLAUDE_ID,
            "--text",
            "hi",
            "--turn-timeout",
            "18446744073709551615",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with(
            "agentsight: invalid value '18446744073709551615' for '--turn-timeout <SECS>'"
        ),
        "{}",
        text(&out.stderr)
    );
}

/// The stand-in Claude Code of the terminal test: reports its pid and
/// `/proc/self/stat`, starts a tool (`sleep`) that it leaves behind,
/// acknowledges, then works for 5 minutes unless `finish` says otherwise.
fn working_claude(h: &Home, finish: bool) -> PathBuf {
    let o = h.out.display();
    let tail = if finish {
        "echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\"}'\nexit 0"
    } else {
        "exec sleep 300"
    };
    stand_in(
        h,
        "claude",
        &format!(
            "sleep 301 </dev/null >/dev/null 2>&1 &\necho $! > {o}/tool.pid\ncat /proc/$$/stat > {o}/stat\necho $$ > {o}/provider.pid\necho '{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"working\"}}]}}}}'\n{tail}"
        ),
    )
}

#[test]
fn the_agent_has_no_terminal_of_ours_and_stops_with_us() {
    require_root();
    let h = home("msg-tty");
    let agent = working_claude(&h, false);
    // agentsight on a terminal of its own (`script` gives it a pty).
    let (uid, gid) = test_user();
    let cmd = format!(
        "{} session message {CLAUDE_ID} --allow-messaging --text hi --home {}",
        bin().display(),
        h.home.display()
    );
    let mut run = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args(["--init-groups", "--", "script", "-qec", &cmd, "/dev/null"])
        .env("AGENTSIGHT_CLAUDE_BIN", &agent)
        .env("PATH", "/usr/bin:/bin")
        .env_remove("SUDO_UID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let provider: i32 = wait_for(&h.out.join("provider.pid"), "the provider")
        .trim()
        .parse()
        .unwrap();
    let stat = wait_for(&h.out.join("stat"), "the provider's stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // state ppid pgrp session tty_nr: its own session and group, no terminal.
    let (ppid, pgrp, session, tty): (i32, i32, i32, i32) = (
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
        fields[3].parse().unwrap(),
        fields[4].parse().unwrap(),
    );
    assert_eq!((pgrp, session, tty), (provider, provider, 0), "{stat}");
    let tool: i32 = wait_for(&h.out.join("tool.pid"), "the tool")
        .trim()
        .parse()
        .unwrap();
    assert!(alive(tool) && alive(provider));
    // SIGTERM to agentsight (the provider's parent): it stops the agent,
    // tools and all, says so, and exits 128 + 15.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ppid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = run.wait_timeout_or_kill(Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout)
            .contains("agentsight: error: interrupted by SIGTERM; the agent was stopped"),
        "{}",
        text(&out.stdout)
    );
    let t = Instant::now();
    while (alive(tool) || alive(provider)) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(provider), "the provider outlived agentsight");
    assert!(!alive(tool), "the provider's tool outlived agentsight");
    run.kill_quietly();
}

/// A signal that comes before the agent is started: none is started, and
/// the command says so. The session's lock is held up 3 s (strace delays
/// the `flock` call) so the signal surely comes first.
#[test]
fn a_signal_before_the_agent_starts_sends_nothing() {
    require_root();
    let h = home("msg-early-signal");
    let o = h.out.display();
    let agent = stand_in(&h, "claude", &format!("echo ran > {o}/ran\nexit 0"));
    let (uid, gid) = test_user();
    let mut run = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args([
            "--init-groups",
            "--",
            "strace",
            "-f",
            "-qq",
            "-o",
            "/dev/null",
        ])
        .args([
            "-e",
            "trace=flock",
            "-e",
            "inject=flock:delay_enter=3000000",
        ])
        .arg(bin())
        .args([
            "session",
            "message",
            CLAUDE_ID,
            "--allow-messaging",
            "--text",
            "hi",
        ])
        .arg("--home")
        .arg(&h.home)
        .env("AGENTSIGHT_CLAUDE_BIN", &agent)
        .env("PATH", "/usr/bin:/bin")
        .env_remove("SUDO_UID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // agentsight is strace's child.
    let t = Instant::now();
    let me = loop {
        let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", run.id()))
            .unwrap_or_default();
        if let Some(pid) = kids.split_whitespace().next() {
            break pid.parse::<i32>().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "agentsight did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(me),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = run.wait_timeout_or_kill(Duration::from_secs(30));
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(143),
            "agentsight: error: interrupted by SIGTERM; no agent was running; nothing more is sent\n"
                .to_string()
        )
    );
    assert!(
        !h.out.join("ran").exists(),
        "an agent was started after the signal"
    );
}

#[test]
fn tools_left_behind_end_with_the_turn() {
    require_root();
    let h = home("msg-leftover");
    let agent = working_claude(&h, true);
    let env = [("AGENTSIGHT_CLAUDE_BIN", agent.as_path())];
    let out = message(&h, false, &env, &[CLAUDE_ID, "--text", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "acknowledged: claude session {CLAUDE_ID} (claude-stream-json)\n  working\nturn completed\n"
        )
    );
    let tool: i32 = wait_for(&h.out.join("tool.pid"), "the tool")
        .trim()
        .parse()
        .unwrap();
    // SIGKILL takes effect asynchronously: a short bound.
    let t = Instant::now();
    while alive(tool) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(tool),
        "the tool the provider left running outlived its turn"
    );
}

/// The argv of every process now.
fn argvs() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(b) = std::fs::read(e.path().join("cmdline")) {
            out.push(
                b.split(|&c| c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect(),
            );
        }
    }
    out
}

#[test]
fn a_tool_that_leaves_the_agents_group_still_ends_with_the_turn() {
    require_root();
    for (n, sudo) in [(1, false), (2, true)] {
        let h = home(&format!("msg-setsid-{n}"));
        let o = h.out.display();
        // Unique to this run: sleep adds it to its 777 s.
        let marker = format!("0.{}{n}", std::process::id());
        // A tool in a session of its own that starts another and execs a
        // third; the agent finishes its turn once they run.
        let agent = stand_in(
            &h,
            "claude",
            &format!(
                "( setsid sh -c 'sleep 777 {marker} & echo $! > {o}/inner.pid; echo $$ > {o}/escaped.pid; exec sleep 777 {marker}' & )\nwhile [ ! -s {o}/escaped.pid ]; do sleep 0.05; done\necho '{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"working\"}}]}}}}'\necho '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\"}}'\nexit 0"
            ),
        );
        let env = [("AGENTSIGHT_CLAUDE_BIN", agent.as_path())];
        let out = message(&h, sudo, &env, &[CLAUDE_ID, "--text", "hi"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        // Right as the command returns: not one of them is left.
        let want = ["sleep", "777", marker.as_str()].map(String::from).to_vec();
        let left = argvs().into_iter().filter(|a| *a == want).count();
        assert_eq!(left, 0, "sudo {sudo}: a tool outlived its turn");
        for f in ["inner.pid", "escaped.pid"] {
            let pid: i32 = wait_for(&h.out.join(f), f).trim().parse().unwrap();
            assert!(!alive(pid), "sudo {sudo}: {f} {pid} outlived its turn");
        }
    }
}

/// `session message` blocks SIGINT, SIGTERM and SIGHUP for its signal
/// thread: the agent and the tools it starts have none blocked or ignored,
/// so `kill`, `timeout` and Ctrl-C reach them. (The stand-in reads its own
/// status with builtins: while it waits for a child, sh blocks every
/// signal.)
#[test]
fn the_agent_and_its_tools_have_no_signal_blocked_or_ignored() {
    require_root();
    for (n, sudo) in [(1, false), (2, true)] {
        let h = home(&format!("msg-sigmask-{n}"));
        let o = h.out.display();
        let agent = stand_in(
            &h,
            "claude",
            &format!(
                "while read -r l; do case $l in Sig[BI]*) echo \"$l\";; esac; done < /proc/$$/status > {o}/agent.sig\ngrep -E '^Sig(Blk|Ign):' /proc/self/status > {o}/tool.sig\necho '{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"working\"}}]}}}}'\necho '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\"}}'\nexit 0"
            ),
        );
        let env = [("AGENTSIGHT_CLAUDE_BIN", agent.as_path())];
        let out = message(&h, sudo, &env, &[CLAUDE_ID, "--text", "hi"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        for f in ["agent.sig", "tool.sig"] {
            assert_eq!(
                std::fs::read_to_string(h.out.join(f)).unwrap(),
                "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n",
                "sudo {sudo}: {f}"
            );
        }
    }
}

/// A Codex that asks for approval without end: every request refused, the
/// first 100 listed, the rest counted.
#[test]
fn a_flood_of_codex_requests_is_counted_past_the_first_hundred() {
    require_root();
    let h = home("msg-codex-flood");
    let agent = stand_in(
        &h,
        "codex",
        &format!(
            r#"read l
echo '{{"jsonrpc":"2.0","id":0,"result":{{}}}}'
read l
read l
echo '{{"jsonrpc":"2.0","id":1,"result":{{"thread":{{"status":{{"type":"idle"}}}}}}}}'
read l
echo '{{"jsonrpc":"2.0","id":2,"result":{{"turn":{{"id":"U1"}}}}}}'
exec 3<&0
cat <&3 >/dev/null &
i=0
while [ $i -lt 5000 ]; do
  echo '{{"jsonrpc":"2.0","id":"r'$i'","method":"item/commandExecution/requestApproval","params":{{"threadId":"{CODEX_ID}","turnId":"U1","command":"rm -rf /","cwd":"/w"}}}}'
  i=$((i+1))
done
echo '{{"method":"turn/completed","params":{{"threadId":"{CODEX_ID}","turn":{{"id":"U1","status":"completed","items":[{{"type":"agentMessage","id":"m1","text":"Done."}}]}}}}}}'
wait"#
        ),
    );
    let env = [("AGENTSIGHT_CODEX_BIN", agent.as_path())];
    let out = message(&h, false, &env, &[CODEX_ID, "--text", "hi", "--json"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let refused = "agentsight: refused the agent's request item/commandExecution/requestApproval: command: rm -rf /; in /w";
    let mut want = vec![refused; 100];
    want.push("agentsight: refusing the agent's further requests without listing them (the first 100 are)");
    assert_eq!(err.lines().collect::<Vec<_>>(), want);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let one = serde_json::json!({
        "method": "item/commandExecution/requestApproval",
        "detail": "command: rm -rf /; in /w",
    });
    assert_eq!(j["rejected_requests"], serde_json::json!(vec![one; 100]));
    assert_eq!(j["rejected_requests_total"], 5000);
    assert_eq!(j["rejected_requests_limit"], 100);
    assert_eq!(j["response"], "Done.");
}

#[test]
fn a_codex_that_stops_reading_is_caught_by_the_acknowledgement_bound() {
    require_root();
    let h = home("msg-codex-stall");
    // Answers initialize and thread/resume, then reads no more: the
    // 64 KiB message cannot be written.
    let agent = stand_in(
        &h,
        "codex",
        "read l\necho '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}'\nread l\nread l\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"thread\":{\"status\":{\"type\":\"idle\"}}}}'\nexec sleep 300",
    );
    let env = [("AGENTSIGHT_CODEX_BIN", agent.as_path())];
    let big = "x".repeat(65_536);
    let t = Instant::now();
    let out = message(&h, true, &env, &[CODEX_ID, "--text", &big])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert_eq!(out.status.code(), Some(8), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "agentsight: error: the Codex app-server: the provider stopped reading its input within 20 s\n"
    );
    assert!(
        took >= Duration::from_secs(20) && took < Duration::from_secs(40),
        "{took:?}"
    );
}

#[test]
fn docker_runs_with_the_callers_rights_under_sudo() {
    require_root();
    agentsight_tests::docker::ensure_daemon();
    let (uid, gid) = test_user();
    // The test user is not in the docker group: the daemon refuses them
    // (as root it would only say there is no such container).
    let out = Command::new(bin())
        .args([
            "session",
            "message",
            CLAUDE_ID,
            "--allow-messaging",
            "--text",
            "hi",
        ])
        .args(["--docker-container", "no-such-container-x"])
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_USER", TEST_USER)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Waiting on a child with a bound.
trait WaitBounded {
    fn wait_timeout_or_kill(&mut self, d: Duration) -> Output;
    fn kill_quietly(&mut self);
}

impl WaitBounded for std::process::Child {
    fn wait_timeout_or_kill(&mut self, d: Duration) -> Output {
        let t = Instant::now();
        while self.try_wait().ok().flatten().is_none() {
            if t.elapsed() > d {
                let _ = self.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = self.wait().unwrap();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        use std::io::Read;
        if let Some(mut o) = self.stdout.take() {
            let _ = o.read_to_end(&mut stdout);
        }
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_end(&mut stderr);
        }
        Output {
            status,
            stdout,
            stderr,
        }
    }

    fn kill_quietly(&mut self) {
        let _ = self.kill();
        let _ = self.wait();
    }
}

/// The agent's streamed words cannot forge a line of ours or act on the
/// terminal: each of its lines is indented by two spaces, and ESC, BEL and
/// U+202E are shown escaped (a tool's name too).
#[test]
fn the_agents_words_cannot_forge_our_lines() {
    require_root();
    let h = home("msg-hostile");
    let said = r"working\nturn completed\u001b]52;c;eA==\u0007\u202eevil";
    let agent = stand_in(
        &h,
        "claude",
        &format!(
            "printf '%s\\n' '{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{said}\"}},{{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"Re\\u001b[2Jad\",\"input\":{{}}}}]}}}}'\nprintf '%s\\n' '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\"}}'\nexit 0"
        ),
    );
    let env = [("AGENTSIGHT_CLAUDE_BIN", agent.as_path())];
    let out = message(&h, false, &env, &[CLAUDE_ID, "--text", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "acknowledged: claude session {CLAUDE_ID} (claude-stream-json)\n  working\n  turn completed\\x1b]52;c;eA==\\x07\\u{{202e}}evil\n▸ Re\\x1b[2Jad\nturn completed\n"
        )
    );
}
