//! Qwen Code's MCP configuration: `mcpServers` of the user's
//! `~/.qwen/settings.json` and the project's `<cwd>/.qwen/settings.json`
//! (Gemini CLI's settings format, read by Gemini's reader). Tools are named
//! `mcp__SERVER__TOOL`.

use std::path::{Path, PathBuf};

use crate::mcp::{McpConfigs, McpPlaces, McpSpec, NamePattern, ancestor_named};

pub(crate) const SPEC: McpSpec = McpSpec {
    names: Some(NamePattern::McpDoubleUnderscore),
    home,
    servers,
};

/// `<HOME>/.qwen/projects/…`: `HOME`.
fn home(transcript: &Path) -> Option<PathBuf> {
    ancestor_named(transcript, ".qwen")?
        .parent()
        .map(Path::to_path_buf)
}

fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    crate::gemini::mcp::settings_servers(".qwen", places, out);
}
