//! The full-screen `agentsight top` in a real terminal (tmux): the rows on
//! screen, the detail pane, and the terminal restored (cooked mode, main
//! screen) after `q`, SIGINT and SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use agentsight_tests::bin;
use agentsight_tests::e2e::{Agent, RUN_TIMEOUT, Run, as_test_user};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/top");

/// A private tmux server (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        Tmux {
            socket: format!("agentsight-top-{name}-{}", std::process::id()),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `top` in a 200×50 pane; when it ends the shell prints its exit
    /// status and the terminal modes, then waits.
    fn start_top(&self, home: &Path) {
        self.start_top_as(home, 200, "", "--no-kernel");
    }

    /// Starts `top` in a `width`×50 pane, run through `prefix` (e.g. a
    /// `setpriv` to the unprivileged user), with `flags`.
    fn start_top_as(&self, home: &Path, width: u16, prefix: &str, flags: &str) {
        let script = format!(
            "{prefix} '{}' top {flags} --home '{}'; echo TOP-EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 600",
            bin().display(),
            home.display()
        );
        self.run(&[
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            "50",
            "-s",
            "t",
            "sh",
            "-c",
            &script,
        ]);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    fn wait_screen(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait_screen_within(Duration::from_secs(10), what, ok)
    }

    fn wait_screen_within(&self, limit: Duration, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + limit;
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(Instant::now() < end, "no {what} on screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The pid of `top`: the only child of the pane's shell.
    fn top_pid(&self) -> i32 {
        let sh: u32 = self
            .run(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .trim()
            .parse()
            .unwrap();
        let kids = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
        kids.split_whitespace().next().unwrap().parse().unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

fn fill_time(text: &str, now: i64) -> String {
    // The same placeholders as tests/top.rs, enough for the screen test.
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('@') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let j = tail.find('@').unwrap();
        let key = &tail[..j];
        let n = |p: &str| key.strip_prefix(p).and_then(|n| n.parse::<i64>().ok());
        if let Some(s) = n("T-") {
            out.push_str(
                &jiff::Timestamp::from_second(now - s)
                    .unwrap()
                    .strftime("%Y-%m-%dT%H:%M:%S.000Z")
                    .to_string(),
            );
        } else if let Some(s) = n("MS-") {
            out.push_str(&((now - s) * 1000).to_string());
        } else if let Some(s) = n("U+") {
            out.push_str(&(now + s).to_string());
        } else {
            panic!("placeholder {key}");
        }
        rest = &tail[j + 1..];
    }
    out.push_str(rest);
    out
}

fn copy_tree(from: &Path, to: &Path, now: i64) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst, now);
        } else {
            let text = std::fs::read_to_string(e.path()).unwrap();
            std::fs::write(&dst, fill_time(&text, now)).unwrap();
        }
    }
}

fn home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentsight-toptui-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    copy_tree(&Path::new(FIXTURE).join("home"), &dir, now);
    dir
}

fn rows_shown(s: &str) -> bool {
    s.contains("Checkout test fix")
        && s.contains("rate-limited")
        && s.contains("your turn")
        && s.contains("Add a dark mode toggle")
}

/// The shell's line after top: exit status 0 and cooked mode back.
fn assert_restored(t: &Tmux) {
    // The modes line follows the status line ("icanon" or "-icanon").
    let s = t.wait_screen("the shell after top", |s| {
        s.contains("TOP-EXIT=") && s.contains("icanon")
    });
    assert!(s.contains("TOP-EXIT=0"), "{s}");
    assert!(
        s.contains("icanon echo") && !s.contains("-icanon") && !s.contains("-echo"),
        "terminal left in raw mode:\n{s}"
    );
    // The main screen is back: the table is gone with the alternate screen.
    assert!(!s.contains("AGENT"), "{s}");
}

#[test]
fn shows_rows_and_detail_and_quits_on_q() {
    let h = home("q");
    let t = Tmux::new("q");
    t.start_top(&h);
    let s = t.wait_screen("rows", rows_shown);
    // Unprivileged: kernel columns are dashes.
    assert!(s.contains("no kernel columns"), "{s}");
    let line = s.lines().find(|l| l.contains("Checkout test fix")).unwrap();
    assert!(line.contains("your turn") && line.contains("–"), "{line}");
    // Select the Claude row with the tool call and open it: the fourth row
    // (the Cursor transcript's clock is its mtime, just now, so it sorts
    // first among the "your turn" rows).
    t.run(&["send-keys", "-t", "t", "j", "j", "j", "Enter"]);
    let s = t.wait_screen("the detail pane", |s| s.contains("last tool calls:"));
    assert!(s.contains("Bash"), "{s}");
    assert!(s.contains("npm test -- checkout"), "{s}");
    t.run(&["send-keys", "-t", "t", "q"]);
    assert_restored(&t);
}

#[test]
fn terminal_is_restored_after_sigint() {
    let h = home("int");
    let t = Tmux::new("int");
    t.start_top(&h);
    t.wait_screen("rows", rows_shown);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(t.top_pid()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_restored(&t);
}

#[test]
fn terminal_is_restored_after_sigterm() {
    let h = home("term");
    let t = Tmux::new("term");
    t.start_top(&h);
    t.wait_screen("rows", rows_shown);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(t.top_pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_restored(&t);
}

#[test]
fn ctrl_c_quits_too() {
    let h = home("ctrlc");
    let t = Tmux::new("ctrlc");
    t.start_top(&h);
    t.wait_screen("rows", rows_shown);
    t.run(&["send-keys", "-t", "t", "C-c"]);
    assert_restored(&t);
}

/// The line the detail pane shows for the fixture's one Claude call: its
/// name, status, duration (result 5 s after the call) and command.
const CHECKOUT_CALL: &str = "  Bash               ok        5.0s  npm test -- checkout";

/// Opens the detail pane of the "Checkout test fix" row (the fourth).
fn open_checkout_detail(t: &Tmux) -> String {
    t.wait_screen("rows", rows_shown);
    t.run(&["send-keys", "-t", "t", "j", "j", "j", "Enter"]);
    t.wait_screen("the detail pane", |s| s.contains("Checkout test fix─"))
}

/// Unprivileged, no session is bound to a process tree: the pane lists the
/// transcript's calls (it used to be empty without the kernel).
#[test]
fn unprivileged_detail_lists_the_transcripts_calls() {
    let h = home("unpriv");
    let (uid, gid) = agentsight_tests::test_user();
    let t = Tmux::new("unpriv");
    let prefix = format!("setpriv --reuid={uid} --regid={gid} --clear-groups");
    t.start_top_as(&h, 200, &prefix, "");
    let s = open_checkout_detail(&t);
    assert!(s.contains("no kernel columns (root loads them)"), "{s}");
    assert!(
        s.contains("last tool calls: claude 11111111-0000-4000-8000-000000000001"),
        "{s}"
    );
    let line = s.lines().find(|l| l.contains("npm test")).unwrap();
    assert!(line.ends_with(CHECKOUT_CALL), "{line:?}");
    // The Gemini call has no result yet: status open, no duration.
    t.run(&["send-keys", "-t", "t", "Enter", "j", "j", "Enter"]);
    let s = t.wait_screen("the Gemini detail", |s| s.contains("slow?─"));
    let line = s.lines().find(|l| l.contains("npm run build")).unwrap();
    assert!(
        line.ends_with("  run_shell_command  …            –  npm run build -- --profile"),
        "{line:?}"
    );
    t.run(&["send-keys", "-t", "t", "q"]);
    assert_restored(&t);
}

/// As root with the kernel programs loaded, a session recorded before `top`
/// started is bound to no tree: the pane says so and lists the transcript's
/// calls (it showed only "kernel: session … is not bound").
#[test]
fn root_detail_of_an_unbound_session_lists_the_transcripts_calls() {
    agentsight_tests::require_root();
    let h = home("unbound");
    let t = Tmux::new("unbound");
    t.start_top_as(&h, 200, "", "");
    let s = open_checkout_detail(&t);
    assert!(
        s.contains(
            "last tool calls (not bound to a process tree: transcript only): claude 11111111"
        ),
        "{s}"
    );
    assert!(!s.contains("kernel:"), "{s}");
    let line = s.lines().find(|l| l.contains("npm test")).unwrap();
    assert!(line.ends_with(CHECKOUT_CALL), "{line:?}");
    t.run(&["send-keys", "-t", "t", "q"]);
    assert_restored(&t);
}

/// A title 96 characters long, cut to what the TITLE column gets (3/5 of
/// what the fixed columns and the 11 gaps leave: 200 − 89 = 111 → 67 at 200
/// columns, 120 − 89 = 31 → 19 at 120) — not a fixed 40.
#[test]
fn the_title_uses_the_columns_width() {
    const TITLE: &str = "Rewrite the checkout flow so that every payment provider is retried with backoff and then logged";
    let h = home("width");
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let id = "77777777-0000-4000-8000-000000000007";
    let line = serde_json::json!({
        "type": "user", "uuid": "w-1", "sessionId": id, "cwd": "/home/dev/shop",
        "timestamp": jiff::Timestamp::from_second(now - 2).unwrap().to_string(),
        "message": {"role": "user", "content": TITLE},
    });
    std::fs::write(
        h.join(format!(".claude/projects/-home-dev-shop/{id}.jsonl")),
        format!("{line}\n"),
    )
    .unwrap();
    for (width, shown) in [(200u16, 67usize), (120, 19)] {
        let t = Tmux::new(&format!("width{width}"));
        t.start_top_as(&h, width, "", "--no-kernel");
        let cut: String = TITLE.chars().take(shown - 1).collect();
        let s = t.wait_screen("the long title", |s| s.contains(&cut));
        let want = format!("{cut}… ");
        assert!(s.contains(&want), "{width} columns: no {want:?} in\n{s}");
        t.run(&["send-keys", "-t", "t", "q"]);
        assert_restored(&t);
    }
}

/// The "busy" scenario's build call (tests/e2e/scenarios/busy.json): it
/// writes out/part1.txt … part3.txt; the next call sleeps 12 s.
const BUILD: &str =
    "mkdir -p out && for i in 1 2 3; do echo part $i > out/part$i.txt; done; ls out";

/// Opens the detail pane of the row titled `title` (session `id`): finds
/// its line under the table's header, moves the selection there from the
/// top and presses Enter; retried (rows may reorder between the capture and
/// the keys) until the pane's title names the session.
fn open_detail_of(t: &Tmux, title: &str, id: &str) {
    let end = Instant::now() + Duration::from_secs(30);
    let pane = format!("last tool calls: claude {id} — ");
    loop {
        let s = t.wait_screen("the run's row", |s| s.contains(title));
        let lines: Vec<&str> = s.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("AGENT")).unwrap();
        let row = lines.iter().position(|l| l.contains(title)).unwrap();
        assert!(row > header, "{s}");
        let mut keys = vec!["send-keys", "-t", "t"];
        keys.extend(std::iter::repeat_n("k", lines.len()));
        keys.extend(std::iter::repeat_n("j", row - header - 1));
        keys.push("Enter");
        t.run(&keys);
        let s = t.wait_screen("a detail pane", |s| s.contains("last tool calls"));
        if s.lines().any(|l| l.starts_with(&pane)) {
            return;
        }
        assert!(Instant::now() < end, "no pane {pane:?}:\n{s}");
        t.run(&["send-keys", "-t", "t", "Escape"]);
    }
}

/// The kernel's lines under the build call, once all three files are
/// among them.
fn build_kernel_lines<'a>(s: &'a str, written: &[String]) -> Option<Vec<&'a str>> {
    let lines: Vec<&str> = s.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.ends_with(&format!("  {BUILD}")))?;
    let under: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("    pid "))
        .copied()
        .collect();
    written
        .iter()
        .all(|w| under.iter().any(|l| l.ends_with(w.as_str())))
        .then_some(under)
}

/// As root with the kernel programs loaded, a real Claude Code run started
/// after `top` is bound to its process tree: the detail pane says what the
/// runtime did outside every call (counted, not flagged: Claude's
/// `.claude.json` lock/rename and git, docs/correlate.md) apart from the
/// unexplained (none), and under the build call the kernel's lines name the
/// three files its shell wrote.
#[test]
fn root_detail_of_a_bound_real_claude_run_shows_kernel_lines_and_outside_calls() {
    agentsight_tests::require_root();
    let run = Run::prepare(Agent::Claude, "busy");
    let t = Tmux::new("bound");
    // As root, not under sudo: the test user's agent is watched.
    let prefix = "env -u SUDO_UID -u SUDO_GID -u SUDO_USER";
    t.start_top_as(&run.home, 200, prefix, "");
    // The table is drawn once the kernel programs run.
    let s = t.wait_screen_within(Duration::from_secs(60), "top's header", |s| {
        s.contains("agentsight top — ")
    });
    assert!(!s.contains("no kernel columns"), "{s}");
    let running = run.start(as_test_user);
    // The sleep call is running once the transcript holds it.
    let start = Instant::now();
    let id = loop {
        let f = run.transcripts().into_iter().next();
        if let Some(f) = f
            && std::fs::read_to_string(&f).is_ok_and(|t| t.contains("sleep 12; echo slow"))
        {
            break f.file_stem().unwrap().to_string_lossy().into_owned();
        }
        assert!(
            start.elapsed() < RUN_TIMEOUT,
            "the sleep call never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    open_detail_of(&t, &run.scenario.prompt, &id);
    let work = run.work.display().to_string();
    let written: Vec<String> = (1..=3)
        .map(|i| format!(" bash write {work}/out/part{i}.txt"))
        .collect();
    let s = t.wait_screen_within(Duration::from_secs(30), "the build call's files", |s| {
        s.lines().any(|l| l.starts_with("outside every call: "))
            && build_kernel_lines(s, &written).is_some()
    });
    eprintln!("{s}");
    // Bound: the pane's title has no "not bound" note.
    let title = s
        .lines()
        .find(|l| l.starts_with("last tool calls"))
        .unwrap();
    assert!(
        title.starts_with(&format!("last tool calls: claude {id} — Build the project")),
        "{title}"
    );
    assert!(!s.contains("not bound to a process tree"), "{s}");
    // The runtime's own activity is counted; nothing is unexplained.
    let outside = s
        .lines()
        .find(|l| l.starts_with("outside every call: "))
        .unwrap();
    let n: usize = outside
        .strip_prefix("outside every call: agent runtime ")
        .and_then(|r| r.split_once(" ("))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{outside:?}"));
    assert!(n > 0, "{outside}");
    assert!(outside.ends_with(") · unexplained 0"), "{outside}");
    assert!(!s.lines().any(|l| l.starts_with("  ! ")), "{s}");
    // The build call: name, status, command; under it, the shell's writes
    // of the three files, each once, from one pid.
    let call = s
        .lines()
        .find(|l| l.ends_with(&format!("  {BUILD}")))
        .unwrap();
    assert!(call.contains("  Bash               ok "), "{call:?}");
    let under = build_kernel_lines(&s, &written).unwrap();
    let pids: Vec<&str> = written
        .iter()
        .map(|w| {
            let hits: Vec<&&str> = under.iter().filter(|l| l.ends_with(w.as_str())).collect();
            assert_eq!(hits.len(), 1, "{w}: {under:#?}");
            let pid = hits[0].strip_prefix("    pid ").unwrap();
            let (pid, rest) = pid.split_once(' ').unwrap();
            assert!(
                pid.parse::<u32>().is_ok() && format!(" {rest}") == *w,
                "{}",
                hits[0]
            );
            pid
        })
        .collect();
    assert!(pids.iter().all(|p| *p == pids[0]), "{under:#?}");
    let out = running.wait(RUN_TIMEOUT);
    assert!(out.status.success(), "claude run failed: {}", out.stderr);
    t.run(&["send-keys", "-t", "t", "q"]);
    assert_restored(&t);
}
