//! The `sessions` / `session show` CLI functions, run against a fixture home.
// The fixture helpers live with the session parsers' own tests.
#[path = "../../agentsight-sessions/tests/sessions_common/mod.rs"]
mod sessions_common;

use agentsight::cli::sessions::{SessionShowArgs, SessionsArgs, run_session_show, run_sessions};

#[test]
fn list_and_show_run_on_fixture_home() {
    let home = sessions_common::home();
    let args = SessionsArgs {
        provider: None,
        limit: 25,
        max_age: None,
        json: false,
        home: Some(home.path().to_path_buf()),
    };
    run_sessions(&args).expect("table");
    run_sessions(&SessionsArgs {
        json: true,
        ..args.clone()
    })
    .expect("json");
    let show = SessionShowArgs {
        id: "aaaaaaaa-0000-4000-8000-000000000001".into(),
        json: false,
        home: Some(home.path().to_path_buf()),
    };
    run_session_show(&show).expect("show");
    run_session_show(&SessionShowArgs {
        json: true,
        ..show.clone()
    })
    .expect("show json");
    let missing = SessionShowArgs {
        id: "nope-nope-nope".into(),
        ..show
    };
    let err = run_session_show(&missing).expect_err("unknown id");
    assert!(err.to_string().contains("no session with id"), "{err}");
}

#[test]
fn zero_limit_is_rejected() {
    let args = SessionsArgs {
        provider: None,
        limit: 0,
        max_age: None,
        json: false,
        home: Some("/nonexistent".into()),
    };
    assert!(run_sessions(&args).is_err());
}
