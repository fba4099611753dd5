//! Claude Code's MCP configuration: `--mcp-config` (and
//! `--strict-mcp-config`) on its command line, `.claude.json` (local and
//! user scopes) and the project's `.mcp.json`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::mcp::{JsonDialect, McpConfigs, McpPlaces, McpSpec, NamePattern, json_servers};
use crate::mcp::{McpTransport, ancestor_named, read_json};

pub(crate) const SPEC: McpSpec = McpSpec {
    names: Some(NamePattern::McpDoubleUnderscore),
    home,
    servers,
};

const DIALECT: JsonDialect = JsonDialect {
    url_without_type: McpTransport::Http,
};

/// `<dir>/projects/<project>/…`: `$HOME` when `<dir>` is `.claude`, else
/// `<dir>` (`CLAUDE_CONFIG_DIR`, whose `.claude.json` is inside it).
fn home(transcript: &Path) -> Option<PathBuf> {
    let config_dir = ancestor_named(transcript, "projects")?.parent()?;
    if config_dir.file_name().is_some_and(|n| n == ".claude") {
        config_dir.parent().map(Path::to_path_buf)
    } else {
        Some(config_dir.to_path_buf())
    }
}

/// The values of `--mcp-config` (space-separated values up to the next
/// option, or `--mcp-config=V`), and whether `--strict-mcp-config` is given.
fn mcp_config_args(argv: &[String]) -> (Vec<&str>, bool) {
    let mut values = Vec::new();
    let mut strict = false;
    let mut in_list = false;
    for word in argv.iter().skip(1) {
        if word == "--" {
            break;
        }
        if word == "--strict-mcp-config" {
            strict = true;
            in_list = false;
        } else if word == "--mcp-config" {
            in_list = true;
        } else if let Some(v) = word.strip_prefix("--mcp-config=") {
            values.push(v);
            in_list = false;
        } else if word.starts_with('-') {
            in_list = false;
        } else if in_list {
            values.push(word.as_str());
        }
    }
    (values, strict)
}

fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    let (flags, strict) = mcp_config_args(&places.argv);
    for value in flags {
        let (doc, source) = if value.trim_start().starts_with('{') {
            match serde_json::from_str::<Value>(value) {
                Ok(v) => (v, "--mcp-config <inline JSON>".to_string()),
                Err(e) => {
                    out.problem(format!("--mcp-config <inline JSON>: not valid JSON ({e})"));
                    continue;
                }
            }
        } else {
            let path = match &places.project {
                Some(p) => p.join(value),
                None => PathBuf::from(value),
            };
            match read_json(&path) {
                Ok(Some(v)) => (v, format!("--mcp-config {}", path.display())),
                Ok(None) => {
                    out.problem(format!("--mcp-config {}: no such file", path.display()));
                    continue;
                }
                Err(e) => {
                    out.problem(format!("--mcp-config {e}"));
                    continue;
                }
            }
        };
        json_servers(
            doc.get("mcpServers"),
            &source,
            DIALECT,
            out,
            McpConfigs::add,
        );
    }
    if strict {
        return;
    }
    let global_path = places.home.join(".claude.json");
    let global = read_json(&global_path).unwrap_or_else(|e| {
        out.problem(e);
        None
    });
    let project = places.project.as_deref();
    if let (Some(g), Some(p)) = (&global, project) {
        let key = p.to_string_lossy();
        let local = g
            .get("projects")
            .and_then(|ps| ps.get(key.as_ref()))
            .and_then(|e| e.get("mcpServers"));
        let source = format!("{} projects.{key}", global_path.display());
        json_servers(local, &source, DIALECT, out, McpConfigs::add);
    }
    if let Some(p) = project {
        let path = p.join(".mcp.json");
        match read_json(&path) {
            Ok(Some(doc)) => {
                let source = path.display().to_string();
                json_servers(
                    doc.get("mcpServers"),
                    &source,
                    DIALECT,
                    out,
                    McpConfigs::add,
                );
            }
            Ok(None) => {}
            Err(e) => out.problem(e),
        }
    }
    if let Some(g) = &global {
        let source = format!("{} mcpServers", global_path.display());
        json_servers(g.get("mcpServers"), &source, DIALECT, out, McpConfigs::add);
    }
}
