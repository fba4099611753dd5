//! The `sessions` / `session show` commands of the built binary, run against
//! a fixture home.
// The fixture helpers live with the session parsers' own tests.
#[path = "../../agentsight-sessions/tests/sessions_common/mod.rs"]
mod sessions_common;

use std::process::{Command, Output};

const ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";

fn agentsight(args: &[&str], home: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentsight"))
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .expect("run agentsight")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

#[test]
fn list_and_show_run_on_fixture_home() {
    let home = sessions_common::home();
    let table = stdout(&agentsight(&["sessions"], home.path()));
    assert!(table.contains(ID), "{table}");
    let list: serde_json::Value =
        serde_json::from_str(&stdout(&agentsight(&["sessions", "--json"], home.path())))
            .expect("sessions --json is JSON");
    assert!(
        list.as_array()
            .expect("an array")
            .iter()
            .any(|s| s["session_id"] == ID),
        "{list}"
    );
    let show = stdout(&agentsight(&["session", "show", ID], home.path()));
    assert!(
        show.starts_with(&format!("claude session {ID}\n")),
        "{show}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&agentsight(
        &["session", "show", ID, "--json"],
        home.path(),
    )))
    .expect("session show --json is JSON");
    assert_eq!(json["session_id"], ID);

    let missing = agentsight(&["session", "show", "nope-nope-nope"], home.path());
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("no session with id"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn zero_limit_is_rejected() {
    let o = agentsight(
        &["sessions", "--limit", "0"],
        std::path::Path::new("/nonexistent"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}
