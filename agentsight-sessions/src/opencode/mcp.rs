//! opencode's MCP configuration: the `mcp` object of the global config
//! (`$XDG_CONFIG_HOME/opencode/opencode.json[c]`, `config.json`), the
//! project's `opencode.json[c]`, and `OPENCODE_CONFIG_CONTENT` (read only
//! from the reader's own environment: another process's is not known).
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
    if let Ok(text) = std::env::var("OPENCODE_CONFIG_CONTENT") {
        match serde_json::from_str::<Value>(&strip_comments(&text)) {
            Ok(doc) => add(&doc, "OPENCODE_CONFIG_CONTENT", out),
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

    #[test]
    fn comments_are_blanked_outside_strings() {
        let t = "{\"a\": \"//x\", // c\n \"b\": 1 /* d */}";
        let v: Value = serde_json::from_str(&strip_comments(t)).unwrap_or_default();
        assert_eq!(v["a"], "//x");
        assert_eq!(v["b"], 1);
    }
}
