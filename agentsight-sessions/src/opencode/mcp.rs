//! opencode's MCP configuration: the `mcp` object of the global config
//! (`$XDG_CONFIG_HOME/opencode/opencode.json[c]`, `config.json`), the
//! project's `opencode.json[c]`, and `OPENCODE_CONFIG_CONTENT` (as the
//! recording saw it in the agent's environment, `McpPlaces::env`, else the
//! reader's own environment).
//! Entries: `{type: "local", command: [argv…], enabled}` or `{type:
//! "remote", url}`; `enabled: false` drops a server.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::mcp::{JsonDialect, McpConfigs, McpPlaces, McpSpec, McpTransport, NamePattern};
use crate::mcp::{json_servers, read_config};

pub(crate) const SPEC: McpSpec = McpSpec {
    names: Some(NamePattern::Underscore),
    home,
    servers,
};

/// The variable holding a whole configuration document.
pub(crate) const CONTENT_VAR: &str = "OPENCODE_CONFIG_CONTENT";

/// The keys of an `mcp` entry kept by [`servers_only`].
const KEPT: &[&str] = &["type", "command", "url", "enabled", "cwd"];

/// An `OPENCODE_CONFIG_CONTENT` reduced to what finding its MCP servers
/// needs: `{"mcp": {NAME: {type, command, url, enabled, cwd}}}` (no
/// provider keys, no server `environment` or `headers`, which may hold
/// secrets). `None` when it is not JSON or has no `mcp` object.
pub(crate) fn servers_only(content: &str) -> Option<String> {
    let doc: Value = serde_json::from_str(&strip_comments(content)).ok()?;
    let mcp = doc.get("mcp")?.as_object()?;
    let kept: serde_json::Map<String, Value> = mcp
        .iter()
        .map(|(name, e)| {
            let e = match e.as_object() {
                Some(o) => Value::Object(
                    o.iter()
                        .filter(|(k, _)| KEPT.contains(&k.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                None => e.clone(),
            };
            (name.clone(), e)
        })
        .collect();
    Some(serde_json::json!({ "mcp": kept }).to_string())
}

const DIALECT: JsonDialect = JsonDialect {
    url_without_type: McpTransport::Http,
};

/// `<HOME>/.local/share/opencode/opencode.db`: `HOME` (whose
/// `.config/opencode/` is read).
fn home(db: &Path) -> Option<PathBuf> {
    let dir = db.parent()?;
    if dir.file_name()? != "opencode" {
        return None;
    }
    let share = dir.parent()?;
    let local = share.parent()?;
    (share.file_name()? == "share" && local.file_name()? == ".local")
        .then(|| local.parent().map(Path::to_path_buf))
        .flatten()
}

/// JSON with comments (`.jsonc`, and opencode accepts them in `.json`).
fn read_doc(path: &Path) -> Result<Option<Value>, String> {
    let Some(text) = read_config(path)? else {
        return Ok(None);
    };
    let clean: String = strip_comments(&text);
    serde_json::from_str(&clean)
        .map(Some)
        .map_err(|e| format!("{}: not valid JSON ({e})", path.display()))
}

/// Blanks `//` and `/* */` comments outside strings.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars().peekable();
    let mut in_str = false;
    while let Some(c) = it.next() {
        if in_str {
            out.push(c);
            if c == '\\' {
                out.extend(it.next());
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match (c, it.peek()) {
            ('"', _) => {
                in_str = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for n in it.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                it.next();
                let mut prev = ' ';
                for n in it.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Global, then project, then `OPENCODE_CONFIG_CONTENT`: later sources
/// replace a server of the same name (opencode merges configs in that
/// order).
fn servers(places: &McpPlaces, out: &mut McpConfigs) {
    let cfg = places.home.join(".config").join("opencode");
    let mut files = vec![
        cfg.join("config.json"),
        cfg.join("opencode.json"),
        cfg.join("opencode.jsonc"),
    ];
    if let Some(p) = &places.project {
        files.push(p.join("opencode.json"));
        files.push(p.join("opencode.jsonc"));
    }
    for path in files {
        match read_doc(&path) {
            Ok(Some(doc)) => add(&doc, &path.display().to_string(), out),
            Ok(None) => {}
            Err(e) => out.problem(e),
        }
    }
    if let Some(text) = places.env_var(CONTENT_VAR) {
        match serde_json::from_str::<Value>(&strip_comments(&text)) {
            Ok(doc) => add(&doc, CONTENT_VAR, out),
            Err(e) => out.problem(format!("OPENCODE_CONFIG_CONTENT: not valid JSON ({e})")),
        }
    }
}

fn add(doc: &Value, source: &str, out: &mut McpConfigs) {
    let Some(mcp) = doc.get("mcp") else { return };
    let enabled: Value = match mcp.as_object() {
        Some(m) => Value::Object(
            m.iter()
                .filter(|(_, e)| e.get("enabled").and_then(Value::as_bool) != Some(false))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect(),
        ),
        None => mcp.clone(),
    };
    json_servers(Some(&enabled), source, DIALECT, out, McpConfigs::set);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_of_the_default_database() {
        assert_eq!(
            home(Path::new("/home/u/.local/share/opencode/opencode.db")),
            Some(PathBuf::from("/home/u"))
        );
        assert_eq!(home(Path::new("/tmp/x/opencode.db")), None);
    }

    /// The recorded environment's configuration is read (the reader's own
    /// environment does not hold it), reduced to the servers without
    /// secrets.
    #[test]
    fn recorded_config_content_declares_the_servers() {
        let content = serde_json::json!({
            "provider": {"local": {"options": {"apiKey": "sk-secret"}}},
            "mcp": {
                "fs": {"type": "local", "command": ["node", "/s/index.js", "/w"],
                       "enabled": true, "environment": {"TOKEN": "sk-secret"}},
                "off": {"type": "local", "command": ["x"], "enabled": false},
                "notes": {"type": "remote", "url": "http://127.0.0.1:8790/mcp",
                          "headers": {"Authorization": "Bearer sk-secret"}}
            }
        })
        .to_string();
        let reduced = servers_only(&content).unwrap();
        assert!(!reduced.contains("sk-secret"), "{reduced}");
        assert_eq!(servers_only("{\"provider\": {}}"), None);
        assert_eq!(servers_only("not json"), None);
        let dir = tempfile::tempdir().unwrap();
        let places = McpPlaces {
            home: dir.path().to_path_buf(),
            project: None,
            argv: Vec::new(),
            env: vec![(CONTENT_VAR.into(), reduced)],
        };
        let mut out = McpConfigs::default();
        servers(&places, &mut out);
        let got: Vec<(String, String, Vec<String>, Option<String>)> = out
            .servers
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.transport.as_str().to_string(),
                    s.command.clone(),
                    s.url.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "fs".to_string(),
                    "stdio".to_string(),
                    vec!["node".into(), "/s/index.js".into(), "/w".into()],
                    None
                ),
                (
                    "notes".to_string(),
                    "http".to_string(),
                    Vec::new(),
                    Some("http://127.0.0.1:8790/mcp".into())
                ),
            ]
        );
        assert_eq!(out.problems, Vec::<String>::new());
    }

    #[test]
    fn comments_are_blanked_outside_strings() {
        let t = "{\"a\": \"//x\", // c\n \"b\": 1 /* d */}";
        let v: Value = serde_json::from_str(&strip_comments(t)).unwrap_or_default();
        assert_eq!(v["a"], "//x");
        assert_eq!(v["b"], 1);
    }
}
