//! Copilot CLI's MCP configuration: `mcpServers` of `<COPILOT_HOME>/mcp-config.json`
//! (`~/.copilot/mcp-config.json`), then `--additional-mcp-config JSON|@FILE`
//! of the command line over it. The built-in remote GitHub server is not
//! declared in any file (`--disable-builtin-mcps` turns it off) and is not
//! listed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::mcp::{JsonDialect, McpConfigs, McpPlaces, McpSpec, McpTransport, NamePattern};
use crate::mcp::{json_servers, read_json};

pub(crate) const SPEC: McpSpec = McpSpec {
    names: Some(NamePattern::Dash),
    home,
    servers,
};

const DIALECT: JsonDialect = JsonDialect {
    url_without_type: McpTransport::Http,
};

/// `<root>/session-state/…` → `<root>` (`~/.copilot` or `COPILOT_HOME`).
fn home(transcript: &Path) -> Option<PathBuf> {
    let mut p = transcript.parent();
    while let Some(d) = p {
        if d.file_name().is_some_and(|n| n == "session-state") {
            return d.parent().map(Path::to_path_buf);
        }
        p = d.parent();
    }
    None
}

/// The values of `--additional-mcp-config V` / `--additional-mcp-config=V`.
fn additional_args(argv: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut words = argv.iter().skip(1);
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if w == "--additional-mcp-config" {
            if let Some(v) = words.next() {
                out.push(v.as_str());
            }
        } else if let Some(v) = w.strip_prefix("--additional-mcp-config=") {
            out.push(v);
        }
    }
    out
}

fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    let path = places.home.join("mcp-config.json");
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
    for v in additional_args(&places.argv) {
        let (doc, source) = match v.strip_prefix('@') {
            Some(file) => match read_json(Path::new(file)) {
                Ok(Some(d)) => (d, file.to_string()),
                Ok(None) => continue,
                Err(e) => {
                    out.problem(e);
                    continue;
                }
            },
            None => match serde_json::from_str::<Value>(v) {
                Ok(d) => (d, "--additional-mcp-config".to_string()),
                Err(e) => {
                    out.problem(format!("--additional-mcp-config: not valid JSON ({e})"));
                    continue;
                }
            },
        };
        json_servers(
            doc.get("mcpServers"),
            &source,
            DIALECT,
            out,
            McpConfigs::set,
        );
    }
}
