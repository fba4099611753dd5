//! Phase 5, flags: per call, what it claimed that no activity shows
//! (`claimed_not_observed`), outcomes that disagree with its processes
//! (`mismatches`), and its activity after its result (`late`).

use std::collections::HashSet;

use super::{
    calls::Call,
    mcp::is_mcp,
    report::{Activity, Claim, Claimed, Flags, Late, Mismatch, MismatchKind, Op, Reason, describe},
};
use crate::sessions::{PathAccess, ToolCategory, ToolEvent, ToolStatus};

/// Exit codes of the call's argv-matched processes, one per process, in
/// order.
pub(super) fn exit_codes(acts: &[Activity]) -> Vec<Option<i64>> {
    let mut seen_proc: HashSet<usize> = HashSet::new();
    argv_execs(acts)
        .filter(|a| seen_proc.insert(a.proc_ix))
        .map(|a| a.exit_code)
        .collect()
}

fn argv_execs(acts: &[Activity]) -> impl Iterator<Item = &Activity> {
    acts.iter()
        .filter(|a| a.op == Op::Exec && a.reason == Some(Reason::ArgvMatch))
}

/// One call's judge: its tool event, its activity, its processes' exit codes.
pub(super) struct CallJudge<'a> {
    pub call: &'a Call,
    pub tool: &'a ToolEvent,
    pub acts: &'a [Activity],
    pub exit_codes: &'a [Option<i64>],
}

impl CallJudge<'_> {
    /// Adds every flag of the call to `flags`.
    pub fn flag(&self, flags: &mut Flags) {
        self.claimed_not_observed(&mut flags.claimed_not_observed);
        self.read_wrote(&mut flags.mismatches);
        self.exit_mismatch(&mut flags.mismatches);
        self.late(&mut flags.late);
    }

    fn claimed(&self, what: Claim, detail: String) -> Claimed {
        Claimed {
            tool_index: self.call.idx,
            call_id: self.tool.call_id.clone(),
            name: self.tool.name.clone(),
            what,
            detail,
        }
    }

    fn mismatch(&self, kind: MismatchKind, detail: String) -> Mismatch {
        Mismatch {
            tool_index: self.call.idx,
            call_id: self.tool.call_id.clone(),
            name: self.tool.name.clone(),
            kind,
            detail,
        }
    }

    /// A command with no matching exec; a path access claimed with no
    /// such event on the path. An MCP call: a failed one claims nothing
    /// that can be missing (the server refused it), and the directory a
    /// `create_directory` claims is made by a mkdir.
    fn claimed_not_observed(&self, out: &mut Vec<Claimed>) {
        let c = self.call;
        if let Some(s) = &c.script
            && argv_execs(self.acts).next().is_none()
        {
            out.push(self.claimed(Claim::Exec, format!("no exec of `{s}` seen")));
        }
        let mcp = is_mcp(self.tool);
        if mcp && self.tool.status == ToolStatus::Failed {
            return;
        }
        for (p, access) in &c.paths {
            let wanted: &[Op] = match access {
                PathAccess::Create if mcp => &[Op::Write, Op::Rename, Op::Link, Op::Mkdir],
                PathAccess::Write | PathAccess::Create => &[Op::Write, Op::Rename, Op::Link],
                PathAccess::Delete | PathAccess::RenameFrom => &[Op::Delete, Op::Rename],
                PathAccess::Rename => &[Op::Rename, Op::Write, Op::Link],
                PathAccess::Read => continue,
            };
            let seen = self.acts.iter().any(|a| {
                wanted.contains(&a.op)
                    && (a.path.as_deref() == Some(p.as_str())
                        || a.old_path.as_deref() == Some(p.as_str()))
            });
            if !seen {
                out.push(self.claimed(
                    (*access).into(),
                    format!("no {} of {p} seen", access.as_str()),
                ));
            }
        }
    }

    /// A read-only call whose processes changed a path it names.
    fn read_wrote(&self, out: &mut Vec<Mismatch>) {
        let (c, t) = (self.call, self.tool);
        if t.category != ToolCategory::Read {
            return;
        }
        for a in self.acts.iter().filter(|a| {
            matches!(a.op, Op::Write | Op::Delete | Op::Rename)
                && c.paths.iter().any(|(p, _)| a.path.as_deref() == Some(p))
        }) {
            out.push(self.mismatch(
                MismatchKind::ReadWrote,
                format!(
                    "a {} call, but pid {} did {} {}",
                    t.name,
                    a.pid,
                    a.op,
                    a.path.as_deref().unwrap_or("")
                ),
            ));
        }
    }

    /// The transcript's status or exit code against the matched processes'.
    fn exit_mismatch(&self, out: &mut Vec<Mismatch>) {
        let (t, exit_codes) = (self.tool, self.exit_codes);
        if argv_execs(self.acts).next().is_none() {
            return;
        }
        let bad = exit_codes.iter().flatten().find(|c| **c != 0);
        match (t.status, bad) {
            (ToolStatus::Ok, Some(code)) => out.push(self.mismatch(
                MismatchKind::ExitStatus,
                format!("exited with status {code}, transcript says ok"),
            )),
            (ToolStatus::Failed, None) if exit_codes.iter().all(|c| *c == Some(0)) => {
                out.push(self.mismatch(
                    MismatchKind::FailedButExitZero,
                    "transcript says failed, every matched process exited 0".into(),
                ))
            }
            _ => {
                if let Some(want) = t.exit_code
                    && let Some(got) = exit_codes.iter().flatten().find(|c| **c != i64::from(want))
                {
                    out.push(self.mismatch(
                        MismatchKind::ExitCode,
                        format!("exited with status {got}, transcript says exit code {want}"),
                    ))
                }
            }
        }
    }

    fn late(&self, out: &mut Vec<Late>) {
        for a in self.acts.iter().filter(|a| a.late) {
            out.push(Late {
                tool_index: self.call.idx,
                call_id: self.tool.call_id.clone(),
                event_id: a.event_id,
                op: a.op,
                ts: a.ts.clone(),
                after_end_ms: a.wall_ms - self.call.end_ms.unwrap_or(a.wall_ms),
                detail: describe(a),
            });
        }
    }
}
