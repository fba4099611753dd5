//! `denied-executable`: execs of denied executables (by name, path or
//! inode) or of ones not in the allow list.

use super::paths::PathSets;
use crate::audit::{
    AuditError,
    context::{Ctx, Ev, argv_of},
    fold::Collector,
    policy::{ExePattern, ExecutablesRule, Policy},
    report::Access,
};
use crate::store::events::EventKind;

pub(in crate::audit) fn exec_event(
    ctx: &Ctx,
    policy: &Policy,
    sets: &PathSets,
    ev: &Ev,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let x = &policy.executables;
    // A shell trying each $PATH entry gets ENOENT for all but one: those
    // tries are not runs.
    if ev.kind == EventKind::ExecFailed && ev.errno.as_deref() == Some("ENOENT") || !x.meta.enabled
    {
        return Ok(());
    }
    let argv = argv_of(ev.argv.as_deref());
    let by_inode = || {
        let (dev, ino) = (ev.dev?, ev.ino?);
        let d = sets.denied_exe_inodes.get(&(dev, ino))?;
        let shown = ev.exe.as_deref().unwrap_or("?");
        Some((
            format!(
                "exec of denied executable {} through {shown} (the same file: device {dev}, inode {ino})",
                d.path
            ),
            Some(format!("{} (by inode)", d.path)),
        ))
    };
    if let Some((message, matched)) = exe_verdict(x, ev, &argv).or_else(by_inode) {
        let mut p = ctx.base(ev, &x.meta, message, Access::Exec);
        p.finding.path = ev.exe.clone().or(ev.filename.clone());
        p.finding.argv = Some(argv);
        p.finding.evidence.matched = matched;
        ctx.complete_if_per_finding(&mut p)?;
        out.add(p, Some(ev));
    }
    Ok(())
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn exe_matches(p: &ExePattern, ev: &Ev, argv: &[String]) -> bool {
    if p.by_path {
        [ev.exe.as_deref(), ev.filename.as_deref()]
            .into_iter()
            .flatten()
            .any(|s| p.matcher.is_match(s))
    } else {
        // A symlinked tool (`nc` → `nc.openbsd`) is known by the name it was
        // run as as well as by the binary the kernel resolved.
        [
            ev.exe.as_deref(),
            ev.filename.as_deref(),
            argv.first().map(String::as_str),
        ]
        .into_iter()
        .flatten()
        .any(|s| p.matcher.is_match(basename(s)))
    }
}

fn exe_verdict(x: &ExecutablesRule, ev: &Ev, argv: &[String]) -> Option<(String, Option<String>)> {
    let shown = ev
        .exe
        .clone()
        .or(ev.filename.clone())
        .unwrap_or_else(|| "?".into());
    let attempted = if ev.kind == EventKind::ExecFailed {
        "attempted "
    } else {
        ""
    };
    if let Some(p) = x.deny.iter().find(|p| exe_matches(p, ev, argv)) {
        return Some((
            format!("{attempted}exec of denied executable {shown}"),
            Some(p.text.clone()),
        ));
    }
    if !x.allow.is_empty() && !x.allow.iter().any(|p| exe_matches(p, ev, argv)) {
        return Some((
            format!("{attempted}exec of {shown}, not in the allowed executables"),
            None,
        ));
    }
    None
}
