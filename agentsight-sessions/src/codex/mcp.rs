//! Codex's MCP configuration: `[mcp_servers.NAME]` tables of
//! `CODEX_HOME/config.toml`, of a trusted project's `.codex/config.toml`,
//! and `-c mcp_servers.NAME.KEY=VALUE` overrides on its command line.

use std::path::{Path, PathBuf};

use crate::mcp::{McpConfigs, McpPlaces, McpServerConfig, McpSpec, McpTransport, NamePattern};
use crate::mcp::{ancestor_named, read_config};

pub(crate) const SPEC: McpSpec = McpSpec {
    names: Some(NamePattern::McpDoubleUnderscore),
    home,
    servers,
};

/// `<CODEX_HOME>/sessions/…` or `<CODEX_HOME>/archived_sessions/…`.
fn home(transcript: &Path) -> Option<PathBuf> {
    ancestor_named(transcript, "sessions")
        .or_else(|| ancestor_named(transcript, "archived_sessions"))?
        .parent()
        .map(Path::to_path_buf)
}

/// A TOML file as a table: `Ok(None)` when there is no such file.
fn read_toml(path: &Path) -> Result<Option<toml::Table>, String> {
    let Some(text) = read_config(path)? else {
        return Ok(None);
    };
    text.parse::<toml::Table>()
        .map(Some)
        .map_err(|e| format!("{}: not valid TOML ({})", path.display(), e.message()))
}

fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    let global_path = places.home.join("config.toml");
    let global = read_toml(&global_path).unwrap_or_else(|e| {
        out.problem(e);
        None
    });
    // Declarations from lowest to highest precedence; `enabled = false`
    // is applied last, so a later layer can switch a server off.
    let mut layers: Vec<(String, toml::Table)> = Vec::new();
    if let Some(g) = &global
        && let Some(t) = g.get("mcp_servers").and_then(toml::Value::as_table)
    {
        layers.push((global_path.display().to_string(), t.clone()));
    }
    if let Some(project) = &places.project
        && global.as_ref().is_some_and(|g| trusted(g, project))
    {
        let path = project.join(".codex").join("config.toml");
        match read_toml(&path) {
            Ok(Some(t)) => {
                if let Some(t) = t.get("mcp_servers").and_then(toml::Value::as_table) {
                    layers.push((path.display().to_string(), t.clone()));
                }
            }
            Ok(None) => {}
            Err(e) => out.problem(e),
        }
    }
    let overrides = argv_overrides(&places.argv, out);
    let mut merged: Vec<(String, String, toml::Table)> = Vec::new();
    for (source, table) in layers {
        for (name, entry) in table {
            let Some(entry) = entry.as_table() else {
                out.problem(format!("{source}: server {name:?} skipped (not a table)"));
                continue;
            };
            match merged.iter_mut().find(|(n, _, _)| *n == name) {
                Some(slot) => *slot = (name, source.clone(), entry.clone()),
                None => merged.push((name, source.clone(), entry.clone())),
            }
        }
    }
    for (name, key, value) in overrides {
        let source = format!("-c mcp_servers.{name}");
        match merged.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, s, t)) => {
                *s = source;
                t.insert(key, value);
            }
            None => {
                let mut t = toml::Table::new();
                t.insert(key, value);
                merged.push((name, source, t));
            }
        }
    }
    for (name, source, entry) in merged {
        if entry.get("enabled").and_then(toml::Value::as_bool) == Some(false) {
            continue;
        }
        match toml_server(&name, &entry, &source) {
            Ok(s) => out.add(s),
            Err(why) => out.problem(format!("{source}: server {name:?} skipped ({why})")),
        }
    }
}

/// The project is trusted by the global configuration
/// (`[projects."<path>"] trust_level = "trusted"`), so Codex reads its
/// `.codex/config.toml`.
fn trusted(global: &toml::Table, project: &Path) -> bool {
    global
        .get("projects")
        .and_then(|p| p.get(project.to_string_lossy().as_ref()))
        .and_then(|p| p.get("trust_level"))
        .and_then(toml::Value::as_str)
        == Some("trusted")
}

/// `-c`/`--config mcp_servers.NAME.KEY=VALUE` (or `-cK=V`): the VALUE as
/// Codex reads it, a TOML value, else the literal string.
fn argv_overrides(argv: &[String], out: &mut McpConfigs) -> Vec<(String, String, toml::Value)> {
    let mut found = Vec::new();
    let mut words = argv.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        let setting = match word.as_str() {
            "-c" | "--config" => match words.next() {
                Some(v) => v.as_str(),
                None => break,
            },
            w => match w.strip_prefix("--config=").or_else(|| w.strip_prefix("-c")) {
                Some(v) if !v.is_empty() => v,
                _ => continue,
            },
        };
        let Some((path, value)) = setting.split_once('=') else {
            continue;
        };
        let Some(rest) = path.trim().strip_prefix("mcp_servers.") else {
            continue;
        };
        let Some((name, key)) = rest.split_once('.') else {
            out.problem(format!(
                "-c {setting}: only mcp_servers.NAME.KEY=VALUE is read"
            ));
            continue;
        };
        let name = name.trim_matches('"').to_string();
        let value = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        found.push((name, key.to_string(), value));
    }
    found
}

/// One `[mcp_servers.NAME]` table: `command`, `args`, `cwd` (stdio) or
/// `url` (streamable HTTP).
fn toml_server(name: &str, entry: &toml::Table, source: &str) -> Result<McpServerConfig, String> {
    let text = |k: &str| {
        entry
            .get(k)
            .and_then(toml::Value::as_str)
            .map(str::to_string)
    };
    let mut server = McpServerConfig {
        name: name.to_string(),
        transport: McpTransport::Stdio,
        command: Vec::new(),
        cwd: text("cwd"),
        url: None,
        source: source.to_string(),
    };
    if let Some(command) = text("command") {
        if command.is_empty() {
            return Err("empty command".into());
        }
        server.command.push(command);
        match entry.get("args") {
            None => {}
            Some(toml::Value::Array(a)) => {
                for arg in a {
                    let word = arg
                        .as_str()
                        .ok_or("args holds a value that is not a string")?;
                    server.command.push(word.to_string());
                }
            }
            Some(_) => return Err("args is not a list".into()),
        }
        return Ok(server);
    }
    if let Some(url) = text("url") {
        server.transport = McpTransport::Http;
        server.url = Some(url);
        return Ok(server);
    }
    Err("neither command nor url".into())
}
