//! `cargo xtask demo`: the product's main job on a built-in example. A small
//! scripted agent (bash, below) writes a Claude Code–format transcript
//! (`user` prompt, `assistant` `tool_use`, `user` `tool_result` records)
//! under a temporary HOME while it really runs its tool calls; agentsight
//! records it, binds the transcript to the process tree, and the demo
//! prints `correlate` for the session and writes the HTML report.
//!
//! The agent is scripted to show every kind of finding: a failed check, a
//! command that failed while the transcript says it succeeded (mismatch),
//! a write it claims and never did (claimed, not observed), a look-around
//! no call claims (unexplained), and a background job that writes after
//! its call returned (late). The demo checks that correlate found exactly
//! these, so `cargo xtask demo` fails if the main job breaks.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The scripted agent: `bash agent.sh WORK`; HOME is the temporary home.
const AGENT: &str = r#"set -u
# Bash builtins only for the agent's own bookkeeping (ids, clock, text), so
# the processes it starts are its tool calls and one look-around.
export TZ=UTC0
work=$1
cd "$work" || exit 1
read -r sid < /proc/sys/kernel/random/uuid
dir="$HOME/.claude/projects/${work//[\/.]/-}"
mkdir -p "$dir"
t="$dir/$sid.jsonl"
n=0
now() {
  local r=$EPOCHREALTIME
  printf -v ts '%(%Y-%m-%dT%H:%M:%S)T.%sZ' "${r%.*}" "${r#*.}"
  ts=${ts:0:23}Z
}
line() {
  local u
  read -r u < /proc/sys/kernel/random/uuid
  now
  printf '{"type":"%s","uuid":"%s","parentUuid":null,"isSidechain":false,"userType":"external","cwd":"%s","sessionId":"%s","version":"2.1.0","timestamp":"%s",%s}\n' \
    "$1" "$u" "$work" "$sid" "$ts" "$2" >> "$t"
}
usage='"usage":{"input_tokens":12,"output_tokens":6}'
prompt() { line user "\"message\":{\"role\":\"user\",\"content\":\"$1\"}"; }
say() {
  line assistant "\"message\":{\"id\":\"msg_say$n\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"agentsight-demo\",\"content\":[{\"type\":\"text\",\"text\":\"$1\"}],\"stop_reason\":\"end_turn\",$usage}"
}
use_tool() {
  n=$((n + 1))
  line assistant "\"message\":{\"id\":\"msg_$n\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"agentsight-demo\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_demo$n\",\"name\":\"$1\",\"input\":$2}],\"stop_reason\":\"tool_use\",$usage}"
}
result() {
  line user "\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_demo$n\",\"is_error\":$1,\"content\":\"$2\"}]}${3:+,\"toolUseResult\":$3}"
}
# A Bash call: the command really runs (`sh -c`, as agents do); its output
# goes to the agent's state directory, then (JSON-safe) into the result.
# With `claim-ok` the transcript says it succeeded whatever happened.
bash_call() {
  use_tool Bash "{\"command\":\"$1\",\"description\":\"demo step $n\"}"
  sh -c "$1" > "$HOME/.claude/demo-output" 2>&1
  local rc=$? out=
  read -r -d '' -N 300 out < "$HOME/.claude/demo-output"
  out=${out//[[:cntrl:]]/ }
  out=${out//[\"\\]/}
  if [ "$rc" -ne 0 ] && [ "${2:-}" != claim-ok ]; then
    result true "Exit code $rc $out"
  else
    result false "$out"
  fi
}
write_call() {
  use_tool Write "{\"file_path\":\"$work/$1\",\"content\":\"$2\"}"
  [ "${3:-}" = claim-only ] || echo "$2" > "$work/$1"
  result false "File created successfully at: $work/$1" "{\"type\":\"create\",\"filePath\":\"$work/$1\"}"
}

# A look-around no call claims, well before the first call (a pause of the
# builtin kind: a read that times out on a pipe nobody writes).
uname -a > /dev/null
exec 9<> <(:)
read -r -t 0.3 -u 9 _ || :
prompt "Add a main.rs, check it, run the project check, and leave a note."
say "Writing main.rs first."
write_call main.rs "fn main() {}"
bash_call "grep -c main main.rs"
bash_call "ls -la"
bash_call "sh -c 'echo check: 2 problems; exit 3'"
bash_call "test -f missing.txt" claim-ok
write_call NOTES.md "notes" claim-only
bash_call "(sleep 2; echo done > late.txt) > /dev/null 2>&1 &"
bash_call "sleep 3"
say "Done: main.rs is written; the project check fails with exit code 3."
"#;

/// What correlate must find in the demo's session: tool calls, then the
/// counts of claimed-not-observed, mismatches and late.
const EXPECTED: (usize, usize, usize, usize) = (8, 1, 1, 1);

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn run(root: &Path) -> Result<()> {
    let bin = root.join("target/release/agentsight");
    let user = std::env::var("SUDO_USER").unwrap_or_else(|_| "nobody".into());
    let scratch = std::env::temp_dir().join(format!("agentsight-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    // A new directory, never an existing one (or a link someone planted in
    // /tmp under a guessable name): creation fails instead of following it.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&scratch)
        .with_context(|| format!("creating {}", scratch.display()))?;
    let (home, work) = (scratch.join("home"), scratch.join("work"));
    for d in [&scratch, &home, &work] {
        crate::run(Command::new("install").args(["-d", "-o", &user]).arg(d))?;
    }
    let script = scratch.join("agent.sh");
    std::fs::write(&script, AGENT)?;
    let db = root.join("agentsight-demo.db");
    let html = root.join("agentsight-demo.html");
    let _ = std::fs::remove_file(&db);
    let mut rec = Command::new(&bin);
    rec.arg("record");
    if std::env::var_os("SUDO_USER").is_none() {
        rec.args(["--user", &user]);
    }
    rec.arg(format!("--env=HOME={}", home.display()))
        .arg("-o")
        .arg(&db)
        .arg("--report")
        .arg(&html)
        .arg("--")
        .arg("/bin/bash")
        .arg(&script)
        .arg(&work);
    crate::run(&mut rec)?;
    let found = check(&bin, &db, &home);
    let _ = std::fs::remove_dir_all(&scratch);
    let id = found?;
    eprintln!("xtask: what the agent said it did, beside what its processes did:");
    crate::run(Command::new(&bin).args(["correlate", &id, "--db"]).arg(&db))?;
    eprintln!(
        "xtask: demo capture {}\nxtask: HTML report  {} (open it in a browser)\nxtask: try: {} show --db {}",
        db.display(),
        html.display(),
        bin.display(),
        db.display()
    );
    Ok(())
}

/// The session's id, once correlate found exactly what the agent was
/// scripted to do.
fn check(bin: &Path, db: &Path, home: &Path) -> Result<String> {
    let sessions: serde_json::Value = serde_json::from_str(&output(
        Command::new(bin)
            .args(["sessions", "--json", "--home"])
            .arg(home),
    )?)?;
    let id = sessions[0]["session_id"]
        .as_str()
        .context("the demo agent's session was not found")?
        .to_owned();
    let c: serde_json::Value = serde_json::from_str(&output(
        Command::new(bin)
            .args(["correlate", &id, "--json", "--db"])
            .arg(db),
    )?)?;
    let len = |v: &serde_json::Value| v.as_array().map_or(0, Vec::len);
    let tools: usize = c["prompts"]
        .as_array()
        .map_or(0, |ps| ps.iter().map(|p| len(&p["tools"])).sum());
    let f = &c["flags"];
    let got = (
        tools,
        len(&f["claimed_not_observed"]),
        len(&f["mismatches"]),
        len(&f["late"]),
    );
    let look_around = f["observed_not_claimed"]
        .as_array()
        .is_some_and(|v| v.iter().any(|a| a["argv"][0] == "uname"));
    if got != EXPECTED || !look_around {
        bail!(
            "the demo's session correlated to (calls, claimed-not-observed, mismatches, late) = {got:?}, expected {EXPECTED:?} and `uname -a` unexplained (found: {look_around})"
        );
    }
    Ok(id)
}
