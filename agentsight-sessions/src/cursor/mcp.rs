//! Cursor's MCP configuration: `mcpServers` of `~/.cursor/mcp.json` and the
//! project's `.cursor/mcp.json`.

use std::path::{Path, PathBuf};

use crate::mcp::{JsonDialect, McpConfigs, McpPlaces, McpSpec, McpTransport};
use crate::mcp::{ancestor_named, json_servers, read_json};

/// Cursor's transcripts name every MCP call `CallMcpTool` (the server and
/// tool are its arguments): no name pattern.
pub(crate) const SPEC: McpSpec = McpSpec {
    names: None,
    home,
    servers,
};

const DIALECT: JsonDialect = JsonDialect {
    url_without_type: McpTransport::Http,
};

/// `<HOME>/.cursor/projects/…`: `HOME`.
fn home(transcript: &Path) -> Option<PathBuf> {
    ancestor_named(transcript, ".cursor")?
        .parent()
        .map(Path::to_path_buf)
}

fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    let mut files = vec![places.home.join(".cursor").join("mcp.json")];
    if let Some(p) = &places.project {
        files.push(p.join(".cursor").join("mcp.json"));
    }
    for path in files {
        match read_json(&path) {
            Ok(Some(doc)) => {
                let source = path.display().to_string();
                json_servers(
                    doc.get("mcpServers"),
                    &source,
                    DIALECT,
                    out,
                    McpConfigs::set,
                );
            }
            Ok(None) => {}
            Err(e) => out.problem(e),
        }
    }
}
