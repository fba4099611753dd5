//! Is the session already running outside agentsight? Two writers to one
//! transcript interleave and corrupt it, so a message is refused when a live
//! process tree of the same agent is bound to the session by the matching
//! ladder (an open transcript, then the one-to-one cwd fallback, as
//! `agentsight pid` answers), or the agent's own live marker says so:
//! Claude Code's registry, Copilot CLI's `inuse.PID.lock` in the session's
//! directory, an opencode lock held by a live opencode process.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::procinfo::{self, AgentName};
use crate::sessions::{
    Provider,
    live::{ProcessTruth, registry},
};
use crate::views::pid::{PidQuery, lookup_in};

/// What shows the session live elsewhere, in words; `None`: nothing does.
pub fn running_elsewhere(
    provider: Provider,
    session_id: &str,
    home: &Path,
    exclude_pid: u32,
) -> Option<String> {
    if provider == Provider::Claude
        && let Some(e) = registry::load(&home.join(".claude/sessions"))
            .by_session
            .get(session_id)
        && e.process_truth(Path::new("/proc")) != ProcessTruth::Exited
    {
        return Some(format!(
            "Claude Code pid {} has it open (its registry file {}/.claude/sessions/{}.json)",
            e.pid,
            home.display(),
            e.pid
        ));
    }
    if let Some(why) = own_marker(provider, session_id, home) {
        return Some(why);
    }
    let agent = match provider {
        Provider::Claude => AgentName::Claude,
        Provider::Codex => AgentName::Codex,
        Provider::Gemini => AgentName::Gemini,
        Provider::Cursor => AgentName::Cursor,
        Provider::Copilot => AgentName::Copilot,
        Provider::Opencode => AgentName::Opencode,
        Provider::Qwen => AgentName::Qwen,
    };
    let procs = procinfo::snapshot();
    for p in &procs {
        if p.pid == exclude_pid || !agent.matches(p) {
            continue;
        }
        let query = PidQuery {
            pid: p.pid,
            dbs: Vec::new(),
            home: Some(home.to_path_buf()),
            sticky: false,
        };
        let Ok(ans) = lookup_in(&procs, &query) else {
            continue;
        };
        if ans.session_id.as_deref() == Some(session_id) {
            let how = ans.evidence.map_or("", |e| e.as_str());
            return Some(format!("{} pid {} ({how}: {})", agent, p.pid, ans.detail));
        }
    }
    None
}

/// Copilot CLI's and opencode's own markers of a running process.
fn own_marker(provider: Provider, session_id: &str, home: &Path) -> Option<String> {
    match provider {
        Provider::Copilot => {
            let dir = home.join(".copilot/session-state").join(session_id);
            copilot_inuse(&dir, Path::new("/proc"))
        }
        Provider::Opencode => opencode_lock(
            &home.join(".local/state/opencode/locks"),
            Path::new("/proc"),
        ),
        _ => None,
    }
}

/// A live `inuse.PID.lock` in a Copilot CLI session directory (1.0.102
/// writes it, with the `.hold` beside it, while a process has the session
/// open, and removes both on exit).
fn copilot_inuse(dir: &Path, proc_root: &Path) -> Option<String> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("inuse.")?.strip_suffix(".lock"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let written = e.metadata().and_then(|m| m.modified()).ok()?;
        if alive_since(pid, written, proc_root) {
            return Some(format!(
                "Copilot CLI pid {pid} has it open (its {})",
                e.path().display()
            ));
        }
    }
    None
}

/// An opencode lock (`locks/HASH.lock/meta.json`, `{token, pid, hostname,
/// createdAt}`) whose process is alive. opencode 1.18.33 leaves its locks
/// behind on exit, so only a live pid counts; the lock names no session
/// (its hash is of an internal key), so any live opencode holding one of the
/// home's locks is a writer to its database.
fn opencode_lock(locks: &Path, proc_root: &Path) -> Option<String> {
    for e in std::fs::read_dir(locks).ok()?.flatten() {
        let meta = e.path().join("meta.json");
        let Ok(text) = std::fs::read_to_string(&meta) else {
            continue;
        };
        let Some(pid) = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["pid"].as_u64())
            .and_then(|p| u32::try_from(p).ok())
        else {
            continue;
        };
        let Ok(written) = std::fs::metadata(&meta).and_then(|m| m.modified()) else {
            continue;
        };
        if alive_since(pid, written, proc_root) {
            return Some(format!(
                "opencode pid {pid} is running on this home's database (its lock {})",
                meta.display()
            ));
        }
    }
    None
}

/// `pid` is running and started before its marker was written (with a
/// second's slack): a later start is another process that reused the pid.
fn alive_since(pid: u32, written: SystemTime, proc_root: &Path) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) else {
        return false;
    };
    let Some(started) = started_at(&stat) else {
        // Alive, start unknown: taken as live (refusing is the safe side).
        return true;
    };
    started <= written + Duration::from_secs(1)
}

/// The wall-clock start of the process whose `/proc/PID/stat` is `stat`.
fn started_at(stat: &str) -> Option<SystemTime> {
    // Field 22 (starttime, clock ticks since boot), counted after the
    // command name's closing parenthesis (the name may hold spaces).
    let rest = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    // Safety: sysconf and clock_gettime with a valid out pointer.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) } != 0 {
        return None;
    }
    let since_boot = Duration::from_nanos(ticks.checked_mul(1_000_000_000)? / hz.max(1));
    let up = Duration::new(
        u64::try_from(now.tv_sec).ok()?,
        u32::try_from(now.tv_nsec).ok()?,
    );
    SystemTime::now().checked_sub(up.checked_sub(since_boot)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marker for our own pid, written now: live. The same for a pid no
    /// process has, or written before we started: not.
    #[test]
    fn copilot_inuse_lock_counts_only_while_its_process_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::process::id();
        assert_eq!(copilot_inuse(dir.path(), Path::new("/proc")), None);
        let lock = dir.path().join(format!("inuse.{me}.lock"));
        std::fs::write(&lock, me.to_string()).expect("write");
        assert_eq!(
            copilot_inuse(dir.path(), Path::new("/proc")),
            Some(format!(
                "Copilot CLI pid {me} has it open (its {})",
                lock.display()
            ))
        );
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .and_then(|f| f.set_modified(old))
            .expect("set mtime");
        assert_eq!(copilot_inuse(dir.path(), Path::new("/proc")), None);
        std::fs::remove_file(&lock).expect("rm");
        std::fs::write(dir.path().join("inuse.4294967295.lock"), "x").expect("write");
        assert_eq!(copilot_inuse(dir.path(), Path::new("/proc")), None);
    }

    #[test]
    fn an_opencode_lock_counts_only_with_a_live_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::process::id();
        let lock = dir
            .path()
            .join("36b33066cebdbeae722fb885d77bff037e6932dd.lock");
        std::fs::create_dir_all(&lock).expect("mkdir");
        let meta = lock.join("meta.json");
        let body = |pid: u64| {
            format!(
                "{{\"token\":\"9e00eb6a-ca5a-4de7-83d0-e692a352b891\",\"pid\":{pid},\"hostname\":\"vm\",\"createdAt\":\"2026-12-02T13:11:33.558Z\"}}"
            )
        };
        std::fs::write(&meta, body(4_294_967_295)).expect("write");
        assert_eq!(opencode_lock(dir.path(), Path::new("/proc")), None);
        std::fs::write(&meta, body(u64::from(me))).expect("write");
        assert_eq!(
            opencode_lock(dir.path(), Path::new("/proc")),
            Some(format!(
                "opencode pid {me} is running on this home's database (its lock {})",
                meta.display()
            ))
        );
        std::fs::write(&meta, "{").expect("write");
        assert_eq!(opencode_lock(dir.path(), Path::new("/proc")), None);
    }
}
