//! The compiled path lists of `write-outside-allowed` and `denied-path`:
//! globs placed at the workspace, the home and the TMPDIRs.

use serde::{Deserialize, Serialize};

use super::{Rules, note};
use crate::audit::{
    AuditError,
    context::Ev,
    fold::Collector,
    policy::{DeniedPathsRule, PathPattern, Policy, WritesRule},
};
use crate::store::events::EventKind;

/// A compiled path list, remembering which entry matched for the evidence.
pub(in crate::audit) struct PathSet {
    set: globset::GlobSet,
    texts: Vec<String>,
    /// Each compiled glob, placed (`~`, `${workspace}` expanded).
    pub globs: Vec<String>,
}

/// Where `${workspace}`, `~` and `${tmpdir}` point, for expanding globs.
pub(in crate::audit) struct Places<'a> {
    pub workspace: Option<&'a str>,
    pub home: Option<&'a str>,
    pub tmpdirs: &'a [String],
}

fn escaped(dir: &str) -> String {
    globset::escape(dir.trim_end_matches('/'))
}

impl PathSet {
    /// Compiles `pats` (with `roots`: only those ending in `/**`, without
    /// it, so `D/**` also yields `D`); returns the `~` patterns skipped for
    /// want of a home.
    pub(in crate::audit) fn new(
        pats: &[PathPattern],
        at: &Places,
        roots: bool,
    ) -> Result<(Self, Vec<String>), AuditError> {
        let mut b = globset::GlobSetBuilder::new();
        let mut texts = Vec::new();
        let mut globs = Vec::new();
        let mut skipped = Vec::new();
        for p in pats {
            let text = if roots {
                match p.text.strip_suffix("/**") {
                    Some(t) if !t.is_empty() && t != "**" => t,
                    _ => continue,
                }
            } else {
                p.text.as_str()
            };
            let expanded: Vec<String> = if let Some(rest) = text.strip_prefix("${workspace}") {
                match at.workspace {
                    Some(w) => vec![format!("{}{rest}", escaped(w))],
                    None => {
                        return Err(AuditError::NoWorkspace {
                            pattern: p.text.clone(),
                        });
                    }
                }
            } else if let Some(rest) = text.strip_prefix("${tmpdir}") {
                // No TMPDIR recorded: the pattern has nothing to allow.
                at.tmpdirs
                    .iter()
                    .map(|t| format!("{}{rest}", escaped(t)))
                    .collect()
            } else if let Some(rest) = text.strip_prefix('~') {
                match at.home {
                    Some(h) => vec![format!("{}{rest}", escaped(h))],
                    // Without a home, `~` patterns cannot be placed: said in a
                    // note, never guessed.
                    None => {
                        if !roots {
                            skipped.push(p.text.clone());
                        }
                        continue;
                    }
                }
            } else {
                vec![text.to_string()]
            };
            for e in expanded {
                let m = globset::GlobBuilder::new(&e)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| AuditError::Pattern {
                        pattern: p.text.clone(),
                        reason: e.kind().to_string(),
                    })?;
                b.add(m);
                texts.push(p.text.clone());
                globs.push(e);
            }
        }
        let set = b.build().map_err(|e| AuditError::Pattern {
            pattern: String::new(),
            reason: e.to_string(),
        })?;
        Ok((Self { set, texts, globs }, skipped))
    }

    pub(in crate::audit) fn first_match(&self, path: &str) -> Option<&str> {
        self.set
            .matches(path)
            .first()
            .map(|&i| self.texts[i].as_str())
    }
}

/// One denied file found when recording started (`audit::inodes`), known
/// by its identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeniedFile {
    pub path: String,
    /// The kernel's encoding (`sb->s_dev`, as the capture's `dev` column).
    pub dev: i64,
    pub ino: i64,
    /// Matched by a `read` / `write` pattern.
    pub read: bool,
    pub write: bool,
}

/// The compiled path rules.
pub(in crate::audit) struct PathSets {
    pub write_allow: PathSet,
    /// The allowed roots themselves (`D` of `D/**`): creating D, or an
    /// unnamed file in D, is a write inside the root.
    pub write_roots: PathSet,
    pub deny_read: PathSet,
    pub deny_write: PathSet,
    /// `[wire] never_send`: reads noted for the wire rules, no finding.
    pub never_send: PathSet,
    /// (dev, ino) → path of the denied files `record --audit` found when
    /// recording started (meta `denied_inodes`): an open of the same file
    /// under any other name is a denied-path finding.
    pub denied_inodes: std::collections::HashMap<(i64, i64), DeniedFile>,
    /// Likewise the denied executables found on PATH (meta
    /// `denied_exe_inodes`): running one under another name is a finding.
    pub denied_exe_inodes: std::collections::HashMap<(i64, i64), DeniedFile>,
    /// `[container]`'s compiled lists, for container processes' events.
    pub container: Option<Box<PathSets>>,
}

impl PathSets {
    pub fn new(
        policy: &Policy,
        workspace: Option<&str>,
        home: Option<&str>,
        tmpdirs: &[String],
        rules: &Rules,
        out: &mut Collector,
    ) -> Result<Self, AuditError> {
        let at = Places {
            workspace,
            home,
            tmpdirs,
        };
        let (w, d) = (&policy.writes, &policy.denied_paths);
        let (write_allow, s1) = PathSet::new(&w.allow, &at, false)?;
        let (write_roots, _) = PathSet::new(&w.allow, &at, true)?;
        let (deny_read, s2) = PathSet::new(&d.read, &at, false)?;
        let (deny_write, s3) = PathSet::new(&d.write, &at, false)?;
        let (never_send, s4) = PathSet::new(&policy.wire.never_send, &at, false)?;
        let skipped: Vec<String> = s1.into_iter().chain(s2).chain(s3).chain(s4).collect();
        if !skipped.is_empty() {
            note(
                out,
                rules,
                format!(
                    "the run-as user's home is unknown (no run_as in the capture, or no such user here; set `home` in the policy): not checked: {}",
                    skipped.join(", ")
                ),
            );
        }
        let container = policy
            .container
            .as_ref()
            .map(|c| Self::scoped(&c.writes, &c.denied_paths))
            .transpose()?
            .map(Box::new);
        Ok(Self {
            write_allow,
            write_roots,
            deny_read,
            deny_write,
            never_send,
            denied_inodes: Default::default(),
            denied_exe_inodes: Default::default(),
            container,
        })
    }

    /// `[container]`'s lists: its globs are anchored at the container's
    /// root (checked by the policy), so no host place is expanded in them.
    fn scoped(w: &WritesRule, d: &DeniedPathsRule) -> Result<Self, AuditError> {
        let at = Places {
            workspace: None,
            home: None,
            tmpdirs: &[],
        };
        Ok(Self {
            write_allow: PathSet::new(&w.allow, &at, false)?.0,
            write_roots: PathSet::new(&w.allow, &at, true)?.0,
            deny_read: PathSet::new(&d.read, &at, false)?.0,
            deny_write: PathSet::new(&d.write, &at, false)?.0,
            // The wire rules read host paths: a container's reads are
            // checked through its own denied lists only.
            never_send: PathSet::new(&[], &at, false)?.0,
            denied_inodes: Default::default(),
            denied_exe_inodes: Default::default(),
            container: None,
        })
    }

    /// Whether a write of `path` by `ev` is inside an allowed root: matched
    /// by an `allow` glob, or — for an operation that creates inside the
    /// path (mkdir of it, an `O_TMPFILE` open naming it) — the path is the
    /// root `D` of an allowed `D/**`.
    pub fn write_allowed(&self, ev: &Ev, path: &str) -> bool {
        if self.write_allow.first_match(path).is_some() {
            return true;
        }
        let creates_inside = match ev.kind {
            EventKind::Mkdir | EventKind::Mkdirat => true,
            EventKind::Open | EventKind::Openat | EventKind::Openat2 => ev
                .flags
                .as_deref()
                .is_some_and(|f| f.split(',').any(|x| x == "tmpfile")),
            _ => false,
        };
        creates_inside && self.write_roots.first_match(path).is_some()
    }
}
