//! `denied-path` and `write-outside-allowed`: each file syscall's
//! accesses (by the path asked for and the file the kernel opened, and by
//! inode for denied files under another name).

use super::paths::PathSets;
use crate::audit::{
    AuditError,
    context::{Ctx, Ev, ReadKind},
    fold::Collector,
    policy::{DeniedPathsRule, Policy, WritesRule},
    report::Access,
};
use crate::store::events::Access as FileAccess;

/// File syscalls: (access, path) pairs, by the kind's access class
/// (`store::events`: an open without flags is a write); a rename deletes
/// its old name and writes its new one; a new directory or link writes its
/// path. An open is judged by the path the process asked for
/// and, when it names another file (a symlink, a bind mount,
/// `/proc/self/fd/N`), by the file the kernel opened too: a path trick
/// never hides a read of a denied file nor a write outside the roots.
fn accesses(ev: &Ev) -> Vec<(Access, &str)> {
    let mut acc: Vec<(Access, &str)> = Vec::new();
    let p = ev.path.as_deref();
    let class = ev.kind.access(ev.flags.as_deref());
    if ev.kind.is_open() {
        if class.is_none() {
            // An `O_PATH` open: the name resolved, nothing accessed.
            return acc;
        }
        let access = if class == Some(FileAccess::Read) {
            Access::Read
        } else {
            Access::Write
        };
        if let Some(p) = p {
            acc.push((access.clone(), p));
        }
        if let Some(real) = ev.real_path.as_deref()
            && Some(real) != p
            && real.starts_with('/')
        {
            acc.push((access, real));
        }
        return acc;
    }
    match class {
        Some(FileAccess::Delete) => acc.extend(p.map(|p| (Access::Delete, p))),
        Some(FileAccess::Rename) => {
            acc.extend(ev.old_path.as_deref().map(|p| (Access::Delete, p)));
            acc.extend(p.map(|p| (Access::Write, p)));
        }
        _ => acc.extend(p.map(|p| (Access::Write, p))),
    }
    acc
}

/// Judges a file event by the path rules of where its process ran: a
/// host process by the top-level rules, a container process by
/// `[container]`'s (its paths are as the container sees them: the host's
/// globs never judge them, nor the container's a host path). A container
/// process with no `[container]` table is counted, not judged, and said in
/// a note (`scan`).
pub(in crate::audit) fn file_event(
    ctx: &Ctx,
    policy: &Policy,
    sets: &PathSets,
    ev: &Ev,
    out: &mut Collector,
) -> Result<bool, AuditError> {
    let in_container = ctx.container_of(ev.process_id).is_some();
    let (w, d, paths) = match (in_container, &policy.container, &sets.container) {
        (false, _, _) => (&policy.writes, &policy.denied_paths, sets),
        (true, Some(c), Some(cs)) => (&c.writes, &c.denied_paths, cs.as_ref()),
        (true, _, _) => return Ok(false),
    };
    judge(ctx, w, d, paths, sets, ev, out)?;
    Ok(true)
}

/// One file event under one scope's rules (`paths`); the denied files by
/// inode are the host's in both scopes (`host`): an inode is the file
/// itself, whatever the name a mount namespace gives it.
fn judge(
    ctx: &Ctx,
    w: &WritesRule,
    d: &DeniedPathsRule,
    sets: &PathSets,
    host: &PathSets,
    ev: &Ev,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let failed = ev.result.is_some_and(|r| r < 0);
    let mut denied_found = false;
    let accessed = accesses(ev);
    for (access, path) in &accessed {
        let path: &str = path;
        // A cut path cannot be judged as a whole; `…` marks it.
        if !path.starts_with('/') {
            continue;
        }
        // Nothing was there to read or change.
        if failed && ev.errno.as_deref() == Some("ENOENT") {
            continue;
        }
        let is_write = *access != Access::Read;
        let verb = if failed { "attempted " } else { "" };
        if !is_write && !failed && sets.never_send.first_match(path).is_some() {
            ctx.history
                .note_sensitive_read(path, ev, ReadKind::NeverSend);
        }
        if d.meta.enabled && (!failed || d.include_failed) {
            let hit = if is_write {
                sets.deny_write.first_match(path)
            } else {
                sets.deny_read.first_match(path)
            };
            if let Some(m) = hit {
                let message = format!("{verb}{access} of denied path {path}");
                let mut p = ctx.base(ev, &d.meta, message, access.clone());
                p.finding.path = Some(path.to_string());
                p.finding.evidence.matched = Some(m.to_string());
                if !is_write && !failed {
                    ctx.history.note_sensitive_read(path, ev, ReadKind::Denied);
                }
                ctx.complete_if_per_finding(&mut p)?;
                out.add(p, Some(ev));
                denied_found = true;
                continue;
            }
        }
        if is_write
            && w.meta.enabled
            && (!failed || w.include_failed)
            && !sets.write_allowed(ev, path)
        {
            let message = format!("{verb}{access} outside the allowed roots: {path}");
            let mut p = ctx.base(ev, &w.meta, message, access.clone());
            p.finding.path = Some(path.to_string());
            ctx.complete_if_per_finding(&mut p)?;
            out.add(p, Some(ev));
        }
    }
    // The same file as a denied one under another name (a hard link): known
    // by the (device, inode) `record --audit` noted when recording started.
    if !denied_found
        && !failed
        && d.meta.enabled
        && let (Some(dev), Some(ino)) = (ev.dev, ev.ino)
        && let Some(df) = host.denied_inodes.get(&(dev, ino))
        && let Some((access, path)) = accessed.first()
        && (if *access == Access::Read {
            df.read
        } else {
            df.write
        })
    {
        let message = format!(
            "{access} of denied path {} through {path} (the same file: device {dev}, inode {ino})",
            df.path
        );
        let mut p = ctx.base(ev, &d.meta, message, access.clone());
        p.finding.path = Some(df.path.clone());
        p.finding.evidence.matched = Some(format!("{} (by inode)", df.path));
        if *access == Access::Read {
            ctx.history
                .note_sensitive_read(&df.path, ev, ReadKind::Denied);
        }
        ctx.complete_if_per_finding(&mut p)?;
        out.add(p, Some(ev));
    }
    Ok(())
}
