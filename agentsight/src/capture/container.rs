//! Docker containers to record (`record --container`): the name checked,
//! `docker inspect` read, the container's cgroup v2 id resolved (what the
//! kernel programs match a process's `bpf_get_current_cgroup_id` against),
//! and the namespace identity of a process read from /proc.

use agentsight_common::ContainerNs;
use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::docker::{ContainerName, Docker, DockerError};

/// How long one `docker inspect` may take.
pub const DOCKER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ContainerError {
    #[error(
        "--container {0:?}: not a container name or id (1–128 bytes: an ASCII letter or digit, then letters, digits, '_', '.', '-')"
    )]
    InvalidName(String),
    #[error("--container {name}: cannot run docker: {reason}")]
    Docker { name: String, reason: String },
    #[error("--container {name}: docker inspect did not answer within 10 s")]
    Timeout { name: String },
    #[error("--container {name}: no such container ({reason})")]
    NoSuchContainer { name: String, reason: String },
    #[error("--container {name}: the container is not running")]
    NotRunning { name: String },
    #[error("--container {name}: unexpected docker inspect output: {reason}")]
    BadInspect { name: String, reason: String },
    #[error("--container {name}: cannot resolve the container's cgroup: {reason}")]
    Cgroup { name: String, reason: String },
}

/// A recorded container, as `docker inspect` and /proc describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerInfo {
    /// The full id (`Id`).
    pub id: String,
    /// The name without Docker's leading `/` (`Name`).
    pub name: String,
    /// `Config.Image`, as the container was created from.
    pub image: String,
    /// `State.Pid`: the container's init, as the host sees it.
    pub init_pid: u32,
    /// The container's cgroup v2 directory and its inode (the cgroup id).
    pub cgroup_dir: PathBuf,
    pub cgroup_id: u64,
    /// The init's pid namespace (`stat` of /proc/PID/ns/pid), which the
    /// kernel asks a process's pid in at its exec.
    pub pid_ns: ContainerNs,
}

/// A name is data, never an option: checked before any docker call (the
/// rule of `crate::docker::ContainerName`).
pub fn validate_name(name: &str) -> Result<(), ContainerError> {
    ContainerName::parse(name)
        .map(|_| ())
        .map_err(|_| ContainerError::InvalidName(name.to_owned()))
}

/// Resolves a running container: `docker inspect` (bounded by
/// [`DOCKER_TIMEOUT`]) and its cgroup v2 id.
pub fn resolve(name: &str) -> Result<ContainerInfo, ContainerError> {
    validate_name(name)?;
    let out = inspect(name)?;
    let mut info = parse_inspect(name, &out)?;
    let (dir, id) = cgroup_of(info.init_pid).map_err(|reason| ContainerError::Cgroup {
        name: name.to_owned(),
        reason,
    })?;
    info.cgroup_dir = dir;
    info.cgroup_id = id;
    let ns_path = format!("/proc/{}/ns/pid", info.init_pid);
    let ns = std::fs::metadata(&ns_path).map_err(|e| ContainerError::Cgroup {
        name: name.to_owned(),
        reason: format!("{ns_path}: {e}"),
    })?;
    info.pid_ns = ContainerNs {
        pidns_dev: ns.dev(),
        pidns_ino: ns.ino(),
    };
    Ok(info)
}

/// Runs `docker inspect --type container NAME` (bounded, see
/// `crate::docker`); its stdout on success.
fn inspect(name: &str) -> Result<Vec<u8>, ContainerError> {
    let mut docker = Docker::new("docker");
    docker.timeout = DOCKER_TIMEOUT;
    let ran = docker
        .run(&["inspect", "--type", "container", "--", name])
        .map_err(|e| match e {
            DockerError::Timeout { .. } => ContainerError::Timeout {
                name: name.to_owned(),
            },
            other => ContainerError::Docker {
                name: name.to_owned(),
                reason: other.to_string(),
            },
        })?;
    if ran.code != Some(0) {
        let reason = ran
            .stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("docker inspect failed")
            .trim()
            .to_owned();
        return Err(ContainerError::NoSuchContainer {
            name: name.to_owned(),
            reason,
        });
    }
    Ok(ran.stdout.into_bytes())
}

/// Reads `Id`, `Name`, `Config.Image`, `State.Running` and `State.Pid` from
/// `docker inspect`'s JSON array (the cgroup is filled in later).
pub fn parse_inspect(name: &str, out: &[u8]) -> Result<ContainerInfo, ContainerError> {
    let bad = |reason: &str| ContainerError::BadInspect {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    let v: serde_json::Value = serde_json::from_slice(out).map_err(|e| bad(&e.to_string()))?;
    let c = v.get(0).ok_or_else(|| bad("an empty array"))?;
    let text = |ptr: &str| c.pointer(ptr).and_then(|x| x.as_str()).map(str::to_owned);
    let id = text("/Id").ok_or_else(|| bad("no Id"))?;
    let full_name = text("/Name").ok_or_else(|| bad("no Name"))?;
    let image = text("/Config/Image").ok_or_else(|| bad("no Config.Image"))?;
    let running = c.pointer("/State/Running").and_then(|x| x.as_bool());
    let pid = c
        .pointer("/State/Pid")
        .and_then(|x| x.as_u64())
        .unwrap_or(0);
    if running != Some(true) || pid == 0 {
        return Err(ContainerError::NotRunning {
            name: name.to_owned(),
        });
    }
    let init_pid = u32::try_from(pid).map_err(|_| bad("State.Pid out of range"))?;
    Ok(ContainerInfo {
        id,
        name: full_name.trim_start_matches('/').to_owned(),
        image,
        init_pid,
        cgroup_dir: PathBuf::new(),
        cgroup_id: 0,
        pid_ns: ContainerNs::default(),
    })
}

/// The cgroup v2 directory of `pid` (its `0::` line under the cgroup2
/// mount) and that directory's inode, which is the id
/// `bpf_get_current_cgroup_id` returns for the process.
pub fn cgroup_of(pid: u32) -> Result<(PathBuf, u64), String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("/proc/{pid}/cgroup: {e}"))?;
    let rel = unified_path(&text).ok_or_else(|| format!("/proc/{pid}/cgroup has no 0:: line"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let mount = cgroup2_mount(&mountinfo).ok_or("no cgroup2 file system is mounted")?;
    let dir = mount.join(rel.trim_start_matches('/'));
    let meta = std::fs::metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((dir, meta.ino()))
}

/// The path of the `0::` (cgroup v2) line of a /proc/PID/cgroup text.
pub fn unified_path(cgroup: &str) -> Option<&str> {
    cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Where cgroup2 is mounted, from a mountinfo text (the mount point is the
/// 5th field; the file system type follows the ` - ` separator).
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (before, after) = l.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        before
            .split_whitespace()
            .nth(4)
            .map(|m| PathBuf::from(unescape_octal(m)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The pids in a cgroup directory (`cgroup.procs`); None when the cgroup
/// is gone.
pub fn cgroup_pids(dir: &Path) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
    Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// A process's namespaces and its pid inside its own pid namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NsIdentity {
    /// Inode of /proc/PID/ns/pid.
    pub pid_ns: u64,
    /// Inode of /proc/PID/ns/mnt.
    pub mnt_ns: u64,
    /// The last field of `NSpid:` in /proc/PID/status.
    pub ns_pid: u32,
}

/// Clock ticks per second of /proc's start times (USER_HZ).
fn ticks_per_second() -> u64 {
    // Safety: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// The start time of `pid` in ns since boot (`stat` field 22).
fn start_ns(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the comm; start time is field 22.
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some(ticks * (1_000_000_000 / ticks_per_second()))
}

/// How far CLOCK_BOOTTIME (/proc start times) runs ahead of
/// CLOCK_MONOTONIC (the kernel records' times): the time spent suspended.
fn boot_ahead_of_mono_ns() -> u64 {
    let ns = |id| {
        nix::time::clock_gettime(id)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0)
    };
    let mono = ns(nix::time::ClockId::CLOCK_MONOTONIC);
    ns(nix::time::ClockId::CLOCK_BOOTTIME).saturating_sub(mono)
}

/// The namespace identity of `pid`, if the process behind it now is the
/// one seen at `seen_mono_ns` (CLOCK_MONOTONIC, as the kernel records and
/// seeds carry it): one that started later is a reused pid, not ours. A
/// process already gone gives None.
pub fn ns_identity(pid: u32, seen_mono_ns: u64) -> Option<NsIdentity> {
    let tick = 1_000_000_000 / ticks_per_second();
    // /proc start times count suspended time; the records' clock does not.
    let started_boot = start_ns(pid)?;
    let started = started_boot.saturating_sub(boot_ahead_of_mono_ns());
    if started > seen_mono_ns.saturating_add(tick) {
        return None;
    }
    let pid_ns = std::fs::metadata(format!("/proc/{pid}/ns/pid")).ok()?.ino();
    let mnt_ns = std::fs::metadata(format!("/proc/{pid}/ns/mnt")).ok()?.ino();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ns_pid = ns_pid_of(&status)?;
    // Read again: the process may have exited (and the pid been reused)
    // while its files were read.
    if start_ns(pid)? != started_boot {
        return None;
    }
    Some(NsIdentity {
        pid_ns,
        mnt_ns,
        ns_pid,
    })
}

/// The last field of the `NSpid:` line: the pid in the innermost namespace.
pub fn ns_pid_of(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_any_docker_call() {
        for ok in ["dev", "a", "7f3c", "my_box.v2-x", &"a".repeat(128)] {
            assert_eq!(validate_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "--privileged",
            "-x",
            "_a",
            ".a",
            "a/b",
            "a b",
            "a\0b",
            "é",
            &"a".repeat(129),
        ] {
            assert_eq!(
                validate_name(bad),
                Err(ContainerError::InvalidName(bad.to_owned())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn inspect_output_gives_id_name_image_and_init() {
        let out = br#"[{"Id":"abc123","Name":"/dev","Config":{"Image":"debian:bookworm"},"State":{"Running":true,"Pid":4242}}]"#;
        let info = parse_inspect("dev", out).unwrap();
        assert_eq!(
            (
                info.id.as_str(),
                info.name.as_str(),
                info.image.as_str(),
                info.init_pid
            ),
            ("abc123", "dev", "debian:bookworm", 4242)
        );
        let stopped = br#"[{"Id":"abc","Name":"/dev","Config":{"Image":"x"},"State":{"Running":false,"Pid":0}}]"#;
        assert_eq!(
            parse_inspect("dev", stopped),
            Err(ContainerError::NotRunning { name: "dev".into() })
        );
        assert!(matches!(
            parse_inspect("dev", b"[]"),
            Err(ContainerError::BadInspect { .. })
        ));
    }

    #[test]
    fn cgroup_v2_path_and_mount_are_found() {
        let cg = "12:pids:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n";
        assert_eq!(unified_path(cg), Some("/docker/abc"));
        assert_eq!(unified_path("1:cpu:/x\n"), None);
        let mi = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
                  31 25 0:27 / /sys/fs/cgroup/cpu rw shared:10 - cgroup cgroup rw,cpu\n";
        assert_eq!(
            cgroup2_mount(mi),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let spaced = "30 25 0:26 / /mnt/a\\040b rw - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_mount(spaced), Some(PathBuf::from("/mnt/a b")));
    }

    #[test]
    fn ns_pid_is_the_innermost() {
        assert_eq!(ns_pid_of("Name:\tsh\nNSpid:\t4242\t1\n"), Some(1));
        assert_eq!(ns_pid_of("NSpid:\t77\n"), Some(77));
        assert_eq!(ns_pid_of("Name:\tsh\n"), None);
    }

    #[test]
    fn this_process_has_a_namespace_identity() {
        let me = std::process::id();
        let id = ns_identity(me, u64::MAX / 2).expect("our own /proc entry");
        let pid_ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
        assert_eq!(id.pid_ns, pid_ns);
        // Started after the moment asked about: a reused pid, not ours.
        assert_eq!(ns_identity(me, 0), None);
    }
}
