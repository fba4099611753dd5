//! Gemini CLI's MCP configuration: `mcpServers` of the user's and the
//! project's `.gemini/settings.json`, filtered by `mcp.allowed` and
//! `mcp.excluded`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::mcp::{JsonDialect, McpConfigs, McpPlaces, McpSpec, McpTransport, NamePattern};
use crate::mcp::{ancestor_named, json_servers, read_config};

pub(crate) const SPEC: McpSpec = McpSpec {
    names: Some(NamePattern::McpUnderscore),
    home,
    servers,
};

/// A `url` without a type is the older SSE transport (`httpUrl` is
/// streamable HTTP).
const DIALECT: JsonDialect = JsonDialect {
    url_without_type: McpTransport::Sse,
};

/// `<HOME>/.gemini/tmp/…`: `HOME`.
fn home(transcript: &Path) -> Option<PathBuf> {
    ancestor_named(transcript, ".gemini")?
        .parent()
        .map(Path::to_path_buf)
}

/// A settings file: JSON with `//` and `/* */` comments, as Gemini CLI
/// reads it.
fn read_settings(path: &Path) -> Result<Option<Value>, String> {
    let Some(text) = read_config(path)? else {
        return Ok(None);
    };
    serde_json::from_str(&without_comments(&text))
        .map(Some)
        .map_err(|e| format!("{}: not valid JSON ({e})", path.display()))
}

/// `text` with its JSON comments blanked (strings left whole), so error
/// positions stay where they were.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                    out.push(' ');
                }
            }
            ('/', Some('*')) => {
                chars.next();
                out.push_str("  ");
                let mut last = ' ';
                for n in chars.by_ref() {
                    out.push(if n == '\n' { '\n' } else { ' ' });
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn names(v: Option<&Value>) -> Option<Vec<String>> {
    Some(
        v?.as_array()?
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
    )
}

fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    settings_servers(".gemini", places, out);
}

/// `mcpServers` of `<home>/<dir>/settings.json` then
/// `<project>/<dir>/settings.json`, filtered by `mcp.allowed` /
/// `mcp.excluded` (Gemini CLI, and Qwen Code, its fork, with `.qwen`).
pub(crate) fn settings_servers(dir: &str, places: &McpPlaces, out: &mut McpConfigs) {
    let mut files = vec![places.home.join(dir).join("settings.json")];
    if let Some(p) = &places.project {
        files.push(p.join(dir).join("settings.json"));
    }
    let (mut allowed, mut excluded) = (None, Vec::new());
    for path in files {
        let doc = match read_settings(&path) {
            Ok(Some(d)) => d,
            Ok(None) => continue,
            Err(e) => {
                out.problem(e);
                continue;
            }
        };
        let source = path.display().to_string();
        json_servers(
            doc.get("mcpServers"),
            &source,
            DIALECT,
            out,
            McpConfigs::set,
        );
        let mcp = doc.get("mcp");
        if let Some(a) = names(mcp.and_then(|m| m.get("allowed"))) {
            allowed = Some(a);
        }
        excluded.extend(names(mcp.and_then(|m| m.get("excluded"))).unwrap_or_default());
    }
    out.servers.retain(|s| {
        !excluded.contains(&s.name) && allowed.as_ref().is_none_or(|a| a.contains(&s.name))
    });
}
