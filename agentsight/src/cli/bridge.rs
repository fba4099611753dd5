//! `agentsight bridge` (hidden): the in-container side of the container
//! bridge, run by the host through `docker exec -i`. Speaks only the
//! protocol on stdout; logs go to stderr.

use anyhow::Context;

use agentsight::bridge::Server;

/// Serves the bridge protocol on stdin/stdout until end of input (exit 0).
pub fn run() -> anyhow::Result<i32> {
    // The home is the container user's `$HOME` (the host passes
    // `--env HOME=…` when it knows better); its owner's transcripts only.
    let home = match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        None => Err("HOME is not set".to_string()),
        Some(h) => agentsight::sessions::discovery::read_home_of_owner(Some(h.as_ref()))
            .map_err(|e| format!("HOME: {e}")),
    };
    if let Err(e) = &home {
        tracing::warn!("bridge: {e}");
    }
    let server = Server::new(home);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut output = stdout.lock();
    server
        .serve(&mut input, &mut output)
        .context("serving the bridge protocol")?;
    Ok(0)
}
