//! `--enforce` around the recording: the marks placed and the decider
//! started once the kernel's tracked map exists and before any process of
//! the tree runs; stopped, counted and summed up once the run ended.

use std::os::fd::AsFd;

use aya::maps::IterableMap;

use crate::{
    enforce::Enforcer,
    store::{StoreMsg, Writer, enforcement::EnforcementMeta, meta::key},
};

use super::{Notice, RecordError, RecordOptions, tracker::Tracker};

/// With `--enforce`: the marks placed and the decider running. Without
/// `best_effort`, a mark the kernel refuses fails the start.
pub(super) fn start(
    opts: &RecordOptions,
    tracker: &Tracker,
    writer: &Writer,
) -> Result<Option<Enforcer>, RecordError> {
    let Some(e) = &opts.enforce else {
        return Ok(None);
    };
    let tracked = tracker
        .probes
        .tracked
        .map()
        .fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|err| RecordError::Other(format!("--enforce: the tracked map: {err}")))?;
    let tx = writer.sender();
    // Never blocks: a full queue is counted by the decider as loss.
    let sink = Box::new(move |d| tx.try_send(StoreMsg::Denial(d)).is_ok());
    let enforcer = Enforcer::start(&e.plan, tracked, sink, e.best_effort)?;
    tracing::info!(
        "enforcing: {} files, {} directories marked",
        e.plan.files.len(),
        e.plan.dirs.len()
    );
    Ok(Some(enforcer))
}

/// Stops the decider; stores meta `enforcement` (and the denials not
/// stored as loss `enforcement_denial`) and says the summary.
pub(super) fn stop(
    opts: &RecordOptions,
    enforcer: Enforcer,
    writer: &Writer,
    notify: &mut dyn FnMut(Notice),
) {
    let Some(e) = &opts.enforce else {
        return;
    };
    let refused = enforcer.refused.clone();
    let totals = enforcer.stop();
    let mut audited: Vec<String> = e.audited_not_enforced.clone();
    audited.extend(refused.iter().map(|r| format!("{r}: mark refused")));
    let meta = EnforcementMeta {
        mode: if e.best_effort {
            "best-effort"
        } else {
            "enforce"
        }
        .to_owned(),
        blocked_reads: totals.reads,
        blocked_execs: totals.execs,
        lost: totals.lost,
        marked: (e.plan.files.len() + e.plan.dirs.len()) as u64,
        audited_not_enforced: audited.clone(),
    };
    let tx = writer.sender();
    let _ = tx.send(StoreMsg::Meta(
        key::ENFORCEMENT.to_owned(),
        serde_json::to_string(&meta).unwrap_or_default(),
    ));
    if totals.lost > 0 {
        let _ = tx.send(StoreMsg::Loss(vec![("enforcement_denial", totals.lost)]));
    }
    let mut line = totals.summary();
    if !audited.is_empty() {
        line += &format!("; audited, not enforced: {}", audited.join(", "));
    }
    notify(Notice::Enforced(line));
}
