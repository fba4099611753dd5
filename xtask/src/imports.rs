//! `cargo xtask imports`: the import graph of the `agentsight` crate's
//! top-level modules, checked against the layers ARCHITECTURE.md names.
//!
//! A module may import only modules of a lower layer (or itself); that rules
//! out circles and upward imports at once. The graph is read from the source
//! (`crate::X` paths, `use crate::{X, …}` groups, and `agentsight::X` in the
//! binary's CLI), comments stripped; the compiler enforces the crate
//! boundaries (`agentsight-sessions` cannot name `agentsight` at all).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The layers, lowest first: data flows sources → model → store → views.
/// Every top-level module of `agentsight/src` must be listed. `sessions` and
/// `safefs` are the `agentsight-sessions` crate, re-exported; `procinfo`
/// sits above `capture` because it builds the capture's process seeds.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &[
            "clock",
            "rawtext",
            "privileges",
            "envreset",
            "vocabulary",
            "docker",
            "message_log",
            "sessions",
            "safefs",
        ],
    ),
    // Files written for the user, with the user's credentials.
    ("output files", &["outfile"]),
    ("capture", &["capture"]),
    // `record --enforce`: fanotify marks and the decider (knows no capture).
    ("enforcement", &["enforce"]),
    ("live processes", &["procinfo"]),
    ("container sessions", &["bridge"]),
    ("store", &["store"]),
    ("model", &["matching"]),
    ("analysis", &["correlate", "audit"]),
    // The read-only outputs (show, export, OTLP, Perfetto) draw correlations.
    ("outputs", &["views"]),
    // The pictures of a whole run, drawn from correlate, audit and views.
    ("reports", &["report"]),
    ("enrichment", &["enrich"]),
    ("commands", &["record"]),
    ("live capture", &["livecap"]),
    ("live view", &["top"]),
    // The one command that acts: it continues a session (views::pid's
    // ladder tells whether the session is live elsewhere).
    ("messaging", &["message"]),
    ("cli", &["cli"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

/// The top-level module a source file belongs to (`capture/reader.rs` →
/// `capture`); `lib.rs`/`main.rs` are the crate root.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" => None,
        f => Some(f.trim_end_matches(".rs").to_string()),
    }
}

/// Removes `//` comments (doc comments included) and string literals'
/// contents, so prose that mentions a path is not read as an import.
fn code_only(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let mut in_str = false;
        let mut prev = '\0';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if !in_str && c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            }
            if !in_str || c == '"' {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The first identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level items a brace group names: `{a::b, c, d::{e, f}}` → a, c, d.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => start = true,
            c if start && depth == 1 && (c.is_ascii_alphabetic() || c == '_') => {
                heads.push(ident(&group[i..]).to_string());
                start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The modules `code` names through `prefix` (`crate::` or `agentsight::`).
fn imports(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices(prefix) {
        // `agentsight_sessions::` or `foo::crate::` are not ours.
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        if rest.starts_with('{') {
            found.extend(group_heads(rest));
        } else {
            let id = ident(rest);
            if !id.is_empty() {
                found.insert(id.to_string());
            }
        }
    }
    found
}

/// Edges module → modules it imports (crate root excluded, self-edges dropped).
pub fn graph(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src)?;
            let Some(module) = module_of(rel) else {
                continue;
            };
            let code = code_only(&std::fs::read_to_string(&p)?);
            let mut names = imports(&code, "crate::");
            if module == "cli" {
                names.extend(imports(&code, "agentsight::"));
            }
            let entry = g.entry(module.clone()).or_default();
            entry.extend(
                names
                    .into_iter()
                    .filter(|n| *n != module && n != "say" && n != "sayln"),
            );
        }
    }
    Ok(g)
}

/// Whether `code` names the `rusqlite` crate (as a path or in a `use`).
fn names_rusqlite(code: &str) -> bool {
    code.match_indices("rusqlite").any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + "rusqlite".len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Every `.rs` file under `dir`, with its path relative to `dir`, sorted.
fn rust_files(dir: &Path) -> Result<Vec<(std::path::PathBuf, String)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let code = code_only(&std::fs::read_to_string(&p)?);
                out.push((p.strip_prefix(dir)?.to_path_buf(), code));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The source files outside `store/` that use SQLite: the store owns the
/// capture's schema, its writing and its reading, so every SQL statement
/// lives under `store/` (tests included).
pub fn sqlite_outside_store(src: &Path) -> Result<Vec<String>> {
    Ok(rust_files(src)?
        .into_iter()
        .filter(|(rel, code)| module_of(rel).as_deref() != Some("store") && names_rusqlite(code))
        .map(|(rel, _)| rel.display().to_string())
        .collect())
}

/// The submodule a file of top-level module `top` belongs to
/// (`correlate/view.rs` → `view`, `views/otlp/run.rs` → `otlp`); `mod.rs`
/// (the module itself) has none.
fn submodule_of(rel: &Path) -> Option<String> {
    let mut parts = rel.components().skip(1);
    let first = parts.next()?.as_os_str().to_str()?;
    (first != "mod.rs").then(|| first.trim_end_matches(".rs").to_string())
}

/// Within each top-level module, the edges between its submodules (a file
/// naming a sibling through `super::` or `crate::TOP::`); the module's own
/// `mod.rs` declares them all and is left out.
pub fn submodule_graphs(
    src: &Path,
) -> Result<BTreeMap<String, BTreeMap<String, BTreeSet<String>>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (rel, code) in rust_files(src)? {
        let (Some(top), Some(sub)) = (module_of(&rel), submodule_of(&rel)) else {
            continue;
        };
        let mut names = imports(&code, &format!("crate::{top}::"));
        // `super::` from a file directly in the module's folder is the module.
        if rel.components().count() == 2 {
            names.extend(imports(&code, "super::"));
        }
        let siblings = out.entry(top).or_default();
        siblings
            .entry(sub.clone())
            .or_default()
            .extend(names.into_iter().filter(|n| *n != sub));
    }
    // Keep only edges to submodules that exist (not items of `mod.rs`).
    for g in out.values_mut() {
        let known: BTreeSet<String> = g.keys().cloned().collect();
        for tos in g.values_mut() {
            tos.retain(|t| known.contains(t));
        }
    }
    Ok(out)
}

/// The circles of a graph, each as "a → b → a" (one per strongly connected
/// set of two or more nodes, by depth-first search).
pub fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for start in g.keys() {
        if seen.contains(start.as_str()) {
            continue;
        }
        // A path from `start` back to itself, if any.
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        let mut visited: BTreeSet<&str> = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in g.get(node).into_iter().flatten() {
                if next == start {
                    let mut shown = path.clone();
                    shown.push(start);
                    seen.extend(path.iter().copied());
                    found.push(shown.join(" → "));
                    stack.clear();
                    break;
                }
                if visited.insert(next) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    found
}

/// Imports that break the layering, as "from → to (why)".
pub fn violations(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (from, tos) in g {
        let Some(lf) = layer_of(from) else {
            bad.push(format!("{from}: not in any layer (add it to LAYERS)"));
            continue;
        };
        for to in tos {
            match layer_of(to) {
                None => bad.push(format!("{from} → {to}: {to} is not in any layer")),
                Some(lt) if lt >= lf => bad.push(format!(
                    "{from} ({}) → {to} ({}): imports must point to a lower layer",
                    LAYERS[lf].0, LAYERS[lt].0
                )),
                _ => {}
            }
        }
    }
    bad
}

/// The graph as ARCHITECTURE.md shows it: one line per module that imports
/// others, then the ones that import nothing.
pub fn documented_form(g: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut out = String::new();
    let mut leaves = Vec::new();
    for (from, tos) in g {
        if tos.is_empty() {
            leaves.push(from.as_str());
            continue;
        }
        let tos: Vec<&str> = tos.iter().map(String::as_str).collect();
        out.push_str(&format!("{from:>11} → {}\n", tos.join(", ")));
    }
    out.push_str(&format!(
        "({} import nothing of the crate)\n",
        leaves.join(", ")
    ));
    out
}

/// The import graph block of ARCHITECTURE.md (the fenced block after the
/// "Import graph" line).
fn documented_graph(architecture: &str) -> Option<&str> {
    let after = &architecture[architecture.find("\nImport graph")?..];
    let start = after.find("```\n")? + 4;
    let len = after[start..].find("```")?;
    Some(&after[start..start + len])
}

pub fn check(root: &Path) -> Result<()> {
    let g = graph(&root.join("agentsight/src"))?;
    let shown = documented_form(&g);
    print!("{shown}");
    let mut bad = violations(&g);
    // The map must not go stale: the graph in ARCHITECTURE.md is this one.
    let arch = std::fs::read_to_string(root.join("ARCHITECTURE.md"))?;
    match documented_graph(&arch) {
        Some(doc) if doc == shown => {}
        Some(_) => bad.push(
            "ARCHITECTURE.md's import graph differs from the code's: replace its block with the lines above".into(),
        ),
        None => bad.push("ARCHITECTURE.md has no \"Import graph\" block".into()),
    }
    for file in sqlite_outside_store(&root.join("agentsight/src"))? {
        bad.push(format!(
            "{file} uses rusqlite: every SQL statement lives under store/ (add a read or write function there)"
        ));
    }
    for (top, subs) in submodule_graphs(&root.join("agentsight/src"))? {
        for c in circles(&subs) {
            bad.push(format!("{top}: a circle between its submodules: {c}"));
        }
    }
    if !bad.is_empty() {
        for b in &bad {
            eprintln!("imports: {b}");
        }
        bail!(
            "{} import(s) break the layers, use SQLite outside store/ or close a circle (see xtask/src/imports.rs)",
            bad.len()
        );
    }
    println!(
        "imports: {} modules in {} layers, every import points down (no circle)",
        g.len(),
        LAYERS.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_groups_and_skips_comments_and_strings() {
        let code = code_only(
            "use crate::{\n    capture::{a, b},\n    clock::Anchor,\n};\n// crate::views::x\nlet s = \"crate::audit\";\nlet x = crate::store::Capture::open(p);\nlet y = agentsight_sessions::crate_x;\n",
        );
        let got: Vec<String> = imports(&code, "crate::").into_iter().collect();
        assert_eq!(got, ["capture", "clock", "store"]);
    }

    #[test]
    fn an_upward_import_and_an_unknown_module_are_violations() {
        let mut g = BTreeMap::new();
        g.insert("capture".to_string(), BTreeSet::from(["store".to_string()]));
        g.insert("views".to_string(), BTreeSet::from(["store".to_string()]));
        g.insert("newthing".to_string(), BTreeSet::new());
        let v = violations(&g);
        assert_eq!(
            v,
            [
                "capture (capture) → store (store): imports must point to a lower layer",
                "newthing: not in any layer (add it to LAYERS)",
            ]
        );
    }

    #[test]
    fn the_documented_graph_is_the_fenced_block_after_its_heading() {
        let mut g = BTreeMap::new();
        g.insert("audit".to_string(), BTreeSet::from(["store".to_string()]));
        g.insert("store".to_string(), BTreeSet::new());
        let shown = documented_form(&g);
        assert_eq!(
            shown,
            "      audit → store\n(store import nothing of the crate)\n"
        );
        let doc = format!("# Map\n\nImport graph (x):\n\n```\n{shown}```\n\nmore\n");
        assert_eq!(documented_graph(&doc), Some(shown.as_str()));
        assert_eq!(documented_graph("no graph here"), None);
    }

    #[test]
    fn rusqlite_is_found_as_a_name_only() {
        assert!(names_rusqlite(&code_only("use rusqlite::Connection;\n")));
        assert!(names_rusqlite(&code_only("fn f(e: rusqlite::Error) {}\n")));
        assert!(!names_rusqlite(&code_only(
            "// rusqlite in prose\nlet s = \"rusqlite\";\n"
        )));
        assert!(!names_rusqlite(&code_only("let my_rusqlite_x = 1;\n")));
    }

    #[test]
    fn a_circle_between_submodules_is_found_once() {
        let mut g = BTreeMap::new();
        let set = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        g.insert("a".to_string(), set(&["b"]));
        g.insert("b".to_string(), set(&["c"]));
        g.insert("c".to_string(), set(&["a"]));
        g.insert("d".to_string(), set(&["a"]));
        assert_eq!(circles(&g), ["a → b → c → a"]);
        g.insert("c".to_string(), set(&[]));
        assert!(circles(&g).is_empty());
    }
}
