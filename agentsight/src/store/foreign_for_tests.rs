//! Test support: writes into a foreign SQLite database the way its agent
//! would (opencode's `opencode.db`, which `top` reads), so that every SQL
//! statement of this crate stays under `store/`.

use std::path::Path;

/// Appends a user message to `session` of an opencode database, as
/// opencode records a new prompt (into its WAL), and moves the session's
/// update time to `now_ms`.
pub(crate) fn opencode_add_prompt(db: &Path, session: &str, now_ms: i64) -> rusqlite::Result<()> {
    let c = rusqlite::Connection::open(db)?;
    c.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) \
         VALUES ('msg_next', ?1, ?2, ?2, ?3)",
        rusqlite::params![
            session,
            now_ms,
            format!(r#"{{"role":"user","time":{{"created":{now_ms}}}}}"#)
        ],
    )?;
    c.execute(
        "UPDATE session SET time_updated = ?1 WHERE id = ?2",
        rusqlite::params![now_ms, session],
    )?;
    Ok(())
}
