//! `agentsight session message` against the e2e tier's real CLIs: a
//! session made by a normal run, continued in the run's network namespace
//! under a continuation scenario (`prior_results`), and reading the
//! command's `--json` outcome and `session show`.

use std::path::PathBuf;

use serde_json::Value;

use crate::e2e::{Agent, Outcome, Run, as_test_user, clis_bin, scenario};
use crate::{TEST_USER, bin, test_user};

/// Who runs `agentsight session message`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Caller {
    /// Root with `SUDO_*` naming the test user.
    Sudo,
    /// The test user itself (its `HOME` the run's home).
    TestUser,
}

/// The run's one transcript and the id `sessions` lists for it.
pub fn only_session(run: &Run) -> (String, PathBuf) {
    let files = run.transcripts();
    assert_eq!(files.len(), 1, "{files:?}");
    let list = run.sessions();
    // `sessions --json`: a list (an object with `sessions` when it names
    // failed sources).
    let sessions = list["sessions"].as_array().or(list.as_array()).cloned();
    let sessions = sessions.unwrap_or_else(|| panic!("no session list: {list}"));
    assert_eq!(sessions.len(), 1, "{list}");
    let id = sessions[0]["session_id"].as_str().expect("id").to_string();
    (id, files[0].clone())
}

/// A normal e2e run of `scenario`, configured afterwards for a message
/// (the cleared environment); its one session's id and transcript.
pub fn session_of_a_run(agent: Agent, scenario: &str) -> (Run, String, PathBuf) {
    let run = Run::prepare(agent, scenario);
    let out = run.run();
    assert!(out.status.success(), "{out:?}");
    let (id, file) = only_session(&run);
    run.configure_for_message();
    (run, id, file)
}

/// `env -i PATH LANG TERM HOME [SUDO_*] ENV… agentsight session message ID
/// --text TEXT --allow-messaging --home HOME --json ARGS…`: the pinned CLIs
/// first on PATH; as root sudo'd by the test user (`HOME=/root`), or as the
/// test user (its `HOME` the run's).
pub fn message_argv(
    run: &Run,
    id: &str,
    text: &str,
    env: &[String],
    args: &[&str],
    caller: Caller,
) -> Vec<String> {
    let (uid, gid) = test_user();
    let mut argv: Vec<String> = vec![
        "/usr/bin/env".into(),
        "-i".into(),
        format!("PATH={}:/usr/local/bin:/usr/bin:/bin", clis_bin().display()),
        "LANG=C.UTF-8".into(),
        "TERM=dumb".into(),
    ];
    match caller {
        Caller::Sudo => argv.extend([
            "HOME=/root".into(),
            format!("SUDO_UID={uid}"),
            format!("SUDO_GID={gid}"),
            format!("SUDO_USER={TEST_USER}"),
        ]),
        Caller::TestUser => argv.push(format!("HOME={}", run.home.display())),
    }
    argv.extend(env.iter().cloned());
    argv.push(bin().display().to_string());
    let home = run.home.display().to_string();
    argv.extend(
        [
            "session",
            "message",
            id,
            "--text",
            text,
            "--allow-messaging",
            "--home",
            &home,
            "--json",
        ]
        .map(String::from),
    );
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

/// [`message_argv`] launched in the run's namespace, the model server
/// playing `continuation`.
pub fn continue_session(
    run: &mut Run,
    id: &str,
    continuation: &str,
    text: &str,
    env: &[String],
    args: &[&str],
    caller: Caller,
) -> Outcome {
    run.scenario = scenario(continuation);
    run.server_log = run.server_dir.join(format!("{continuation}.jsonl"));
    let argv = message_argv(run, id, text, env, args, caller);
    match caller {
        Caller::Sudo => run.launch(|_| argv),
        Caller::TestUser => run.launch(|_| as_test_user(argv)),
    }
}

/// The command's `--json` outcome.
pub fn json_of(out: &Outcome) -> Value {
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("--json output ({e}): {out:?}"))
}

/// The texts of a `session show --json` list (`prompts`, `responses`).
pub fn texts(show: &Value, key: &str) -> Vec<String> {
    show[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {show}"))
        .iter()
        .map(|p| p["text"].as_str().unwrap_or_default().to_string())
        .collect()
}
