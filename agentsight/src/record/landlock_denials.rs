//! The writes Landlock refused (`enforce::landlock`), read from the
//! finished capture: Landlock reports a refusal only to the audit
//! subsystem (off on most machines, and system-wide), never to the program
//! that set it up, so a write-class call of the tree that failed as
//! Landlock fails it, on a path outside every granted root, and that the
//! file permissions would have allowed, was Landlock's.

use std::path::Path;

use crate::enforce::{
    Denial, DenialKind,
    landlock::{self, User, WritePlan},
};
use crate::store::events::{Access as FileAccess, EventKind};
use crate::store::read::EventRecord;

/// The calls Landlock judges as writes (an open only with a writing flag).
pub(super) const WRITE_KINDS: &[EventKind] = &[
    EventKind::Open,
    EventKind::Openat,
    EventKind::Openat2,
    EventKind::Creat,
    EventKind::Truncate,
    EventKind::Unlink,
    EventKind::Unlinkat,
    EventKind::Rmdir,
    EventKind::Rename,
    EventKind::Renameat,
    EventKind::Renameat2,
    EventKind::Mkdir,
    EventKind::Mkdirat,
    EventKind::Link,
    EventKind::Linkat,
    EventKind::Symlink,
    EventKind::Symlinkat,
];

/// A write Landlock refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// One the policy denies: a denial row and a finding.
    Denied(Denial),
    /// One the policy allows but the kernel could not grant (a glob such
    /// as `~/.claude.json.*`, see `WriteRoots::not_granted`): counted and
    /// named apart, never a finding.
    Allowed(String),
}

/// What a stored event stands for, if Landlock refused it: a write-class
/// call failed with `EACCES` on a path outside every granted root that the
/// file permissions allow the user to write.
pub(super) fn refused(ev: &EventRecord, plan: &WritePlan, user: &User) -> Option<Refusal> {
    let kind = EventKind::from_word(&ev.kind);
    let class = kind.access(ev.flags.as_deref())?;
    if kind.is_open() && class == FileAccess::Read {
        return None;
    }
    // A symlink's first name is its target text, not a file written.
    let moves = class == FileAccess::Rename || matches!(kind, EventKind::Link | EventKind::Linkat);
    match ev.errno.as_deref() {
        Some("EACCES") => {}
        // A link or rename that would give a file outside the roots a name
        // inside one (and so the rights there): Landlock answers EXDEV,
        // which within one filesystem nothing else does.
        Some("EXDEV")
            if moves
                && ev
                    .old_path
                    .as_deref()
                    .zip(ev.path.as_deref())
                    .is_some_and(|(a, b)| landlock::same_filesystem(a, b)) => {}
        _ => return None,
    }
    let mut paths: Vec<&str> = Vec::new();
    if moves {
        paths.extend(ev.old_path.as_deref());
    }
    paths.extend(ev.path.as_deref());
    // Landlock judges the file the name leads to: a symlink inside a root
    // that points outside is followed (as it still points now).
    let path = paths
        .into_iter()
        .filter(|p| p.starts_with('/'))
        .map(|p| match kind.is_open() || kind == EventKind::Truncate {
            true => landlock::resolved(Path::new(p)).unwrap_or_else(|| p.to_owned()),
            false => p.to_owned(),
        })
        .find(|p| !landlock::granted(&plan.roots, p))?;
    let on_file = kind.is_open() || kind == EventKind::Truncate;
    if !landlock::permitted(on_file, Path::new(&path), user) {
        return None;
    }
    let matches = |globs: &[String]| {
        globs.iter().any(|g| {
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .is_ok_and(|m| m.compile_matcher().is_match(&path))
        })
    };
    let denied = matches(&plan.roots.denied);
    if !denied && matches(&plan.roots.allowed) {
        return Some(Refusal::Allowed(path));
    }
    Some(Refusal::Denied(Denial {
        kind: DenialKind::Write,
        path,
        dev: 0,
        ino: 0,
        pid: ev.pid as u32,
        mono_ns: ev.mono_ns.max(0) as u64,
        rule: if denied {
            plan.denied_rule.clone()
        } else {
            plan.rule.clone()
        },
        mechanism: landlock::MECHANISM,
        dest: None,
        repeat: 1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforce::landlock::WriteRoots;

    fn plan(ws: &str, denied: &str, allowed: &str) -> WritePlan {
        WritePlan {
            roots: WriteRoots {
                dirs: vec![ws.to_owned()],
                files: vec!["/dev/null".to_owned()],
                denied: vec![denied.to_owned()],
                allowed: vec![format!("{ws}/**"), allowed.to_owned()],
                ..WriteRoots::default()
            },
            rule: "write-outside-allowed".into(),
            denied_rule: "denied-path".into(),
        }
    }

    fn failed(kind: &str, path: &str, flags: &str, errno: &str) -> EventRecord {
        EventRecord {
            kind: kind.into(),
            pid: 42,
            mono_ns: 7,
            path: Some(path.into()),
            flags: Some(flags.into()),
            result: Some(-13),
            errno: Some(errno.into()),
            ..EventRecord::default()
        }
    }

    #[test]
    fn a_refused_write_outside_the_roots_is_a_denial_of_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let ws = format!("{d}/ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(format!("{d}/home/.ssh")).unwrap();
        std::os::unix::fs::symlink("../home/via.txt", format!("{ws}/sym")).unwrap();
        // Root judges the permissions here: they allow everything.
        let root = User {
            uid: 0,
            gids: vec![],
        };
        let p = plan(
            &ws,
            &format!("{d}/home/.ssh/**"),
            &format!("{d}/home/allowed.*"),
        );
        let at = |kind: &str, path: &str, flags: &str, errno: &str| match refused(
            &failed(kind, path, flags, errno),
            &p,
            &root,
        )? {
            Refusal::Denied(d) => Some((d.path, d.rule)),
            Refusal::Allowed(path) => Some((path, "allowed".into())),
        };
        let out = format!("{d}/home/out.txt");
        assert_eq!(
            at("openat", &out, "write,create", "EACCES"),
            Some((out.clone(), "write-outside-allowed".into()))
        );
        // A read, another errno, a path inside: none.
        assert_eq!(at("openat", &out, "read", "EACCES"), None);
        assert_eq!(at("openat", &out, "write,create", "EPERM"), None);
        assert_eq!(
            at("openat", &format!("{ws}/in.txt"), "write", "EACCES"),
            None
        );
        assert_eq!(at("openat", "/dev/null", "write", "EACCES"), None);
        // Making or removing the root itself changes its parent.
        assert_eq!(
            at("mkdir", &ws, "", "EACCES"),
            Some((ws.clone(), "write-outside-allowed".into()))
        );
        // Through a symlink inside: the file it leads to.
        assert_eq!(
            at("openat", &format!("{ws}/sym"), "write,create", "EACCES"),
            Some((format!("{d}/home/via.txt"), "write-outside-allowed".into()))
        );
        // A denied path outside: its own rule.
        let key = format!("{d}/home/.ssh/authorized_keys");
        assert_eq!(
            at("openat", &key, "write,create", "EACCES"),
            Some((key.clone(), "denied-path".into()))
        );
        // A hard link giving an outside file a name inside: EXDEV.
        let outside_file = format!("{d}/home/bashrc");
        let link = EventRecord {
            old_path: Some(outside_file.clone()),
            ..failed("linkat", &format!("{ws}/hl"), "", "EXDEV")
        };
        assert_eq!(
            refused(&link, &p, &root),
            Some(Refusal::Denied(Denial {
                kind: DenialKind::Write,
                path: outside_file,
                dev: 0,
                ino: 0,
                pid: 42,
                mono_ns: 7,
                rule: "write-outside-allowed".into(),
                mechanism: landlock::MECHANISM,
                dest: None,
                repeat: 1,
            }))
        );
        // One the policy allows that Landlock could not grant.
        let allowed = format!("{d}/home/allowed.tmp");
        assert_eq!(
            at("openat", &allowed, "write,create", "EACCES"),
            Some((allowed.clone(), "allowed".into()))
        );
        // A user the permissions refuse already: not Landlock's refusal.
        let other = User {
            uid: 4242,
            gids: vec![4242],
        };
        std::fs::set_permissions(
            format!("{d}/home"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(
            refused(
                &failed("openat", &out, "write,create", "EACCES"),
                &p,
                &other
            ),
            None
        );
    }
}
