//! The file and network workload of known ground truth
//! (`workloads/files_net.py`), the kernel-paths tricks
//! (`workloads/kernel_paths.py`) and their checks, shared by the host capture
//! test (`tests/capture_files_net.rs`) and the `--container` one
//! (`tests/container_truth.rs`): the same rows, with the paths as the
//! recorded process saw them.

use std::{
    net::{TcpListener, UdpSocket},
    os::unix::{fs::PermissionsExt, net::UnixListener},
    path::{Path, PathBuf},
    process::Command,
};

use rusqlite::Connection;

use crate::{scratch, test_user};

#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Row {
    pub kind: String,
    pub path: Option<String>,
    pub given: Option<String>,
    pub flags: Option<String>,
    pub result: i64,
    pub errno: Option<String>,
}

pub fn rows(conn: &Connection, under: &str) -> Vec<Row> {
    let mut st = conn
        .prepare(
            "SELECT kind, COALESCE(old_path, path), COALESCE(old_path_as_given, path_as_given), flags, result, errno
             FROM events WHERE (path LIKE ?1 || '%' OR old_path LIKE ?1 || '%') AND kind NOT IN ('io', 'close')
             ORDER BY mono_ns",
        )
        .unwrap();
    st.query_map([under], |r| {
        Ok(Row {
            kind: r.get(0)?,
            path: r.get(1)?,
            given: r.get(2)?,
            flags: r.get(3)?,
            result: r.get(4)?,
            errno: r.get(5)?,
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

pub fn row(
    kind: &str,
    path: &str,
    given: &str,
    flags: Option<&str>,
    result: i64,
    errno: Option<&str>,
) -> Row {
    Row {
        kind: kind.into(),
        path: Some(path.into()),
        given: Some(given.into()),
        flags: flags.map(Into::into),
        result,
        errno: errno.map(Into::into),
    }
}

/// (kind, family, addr, port, result, errno, query or tcp_state)
pub type NetRow = (
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    i64,
    Option<String>,
    Option<String>,
);

/// The workload's scratch directory, its listeners (held open while the
/// test runs) and its command line.
pub struct Setup {
    pub dir: PathBuf,
    /// `python3 files_net.py DIR TCP_PORT CLOSED_PORT TCP6_PORT UNIX_PATH`
    /// with the host's paths.
    pub args: Vec<String>,
    _tcp: TcpListener,
    _tcp6: TcpListener,
    _unix: UnixListener,
    _dns: UdpSocket,
    pub closed: u16,
}

impl Setup {
    /// [`Setup::args`] with the scratch directory written as `seen_as`:
    /// the command line for a process that has it mounted there.
    pub fn args_seen_at(&self, seen_as: &str) -> Vec<String> {
        let d = self.dir.display().to_string();
        self.args
            .iter()
            .map(|a| match a.strip_prefix(&d) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    format!("{seen_as}{rest}")
                }
                _ => a.clone(),
            })
            .collect()
    }
}

/// Makes the scratch directory (`sub` owned by the test user, a root-only
/// `locked.txt`), the listeners (TCP on 127.0.0.1 and ::1, a closed port, a
/// Unix socket, the fake resolver on 127.0.0.1:53) and copies the workload.
pub fn setup(name: &str) -> Setup {
    let dir = scratch(name);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let (uid, _) = test_user();
    nix::unistd::chown(dir.join("sub").as_path(), Some(uid.into()), None).unwrap();
    let locked = dir.join("locked.txt");
    std::fs::write(&locked, "secret").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o600)).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp6 = TcpListener::bind("[::1]:0").unwrap();
    // A port with nothing listening: bind, note, drop.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unix_path = dir.join("agent.sock");
    let unix = UnixListener::bind(&unix_path).unwrap();
    std::fs::set_permissions(&unix_path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let dns = UdpSocket::bind("127.0.0.1:53").expect("bind the fake resolver on 127.0.0.1:53");
    let script = dir.join("files_net.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/files_net.py"),
        &script,
    )
    .unwrap();
    let args = vec![
        "/usr/bin/python3".to_string(),
        script.display().to_string(),
        dir.display().to_string(),
        tcp.local_addr().unwrap().port().to_string(),
        closed.to_string(),
        tcp6.local_addr().unwrap().port().to_string(),
        unix_path.display().to_string(),
    ];
    Setup {
        dir,
        args,
        _tcp: tcp,
        _tcp6: tcp6,
        _unix: unix,
        _dns: dns,
        closed,
    }
}

/// The file events the workload makes under `sub`, in order, as captured.
pub fn expected_sub_rows(sub: &str) -> Vec<Row> {
    let rel = format!("{sub}/rel.txt");
    let via = format!("{sub}/viadirfd.txt");
    vec![
        row("chdir", sub, "sub", None, 0, None),
        row(
            "openat",
            &rel,
            "rel.txt",
            Some("write,create,truncate,cloexec"),
            3,
            None,
        ),
        row("openat", sub, ".", Some("read,directory,cloexec"), 3, None),
        row(
            "openat",
            &via,
            "viadirfd.txt",
            Some("write,create,cloexec"),
            4,
            None,
        ),
        row(
            "openat",
            &format!("{sub}/missing.txt"),
            "missing.txt",
            Some("read,cloexec"),
            -2,
            Some("ENOENT"),
        ),
        row("rename", &rel, "rel.txt", None, 0, None),
        row(
            "unlink",
            &format!("{sub}/renamed.txt"),
            "renamed.txt",
            None,
            0,
            None,
        ),
        row("mkdir", &format!("{sub}/newdir"), "newdir", None, 0, None),
        row(
            "symlink",
            &format!("{sub}/link"),
            "viadirfd.txt",
            None,
            0,
            None,
        ),
        row("rmdir", &format!("{sub}/newdir"), "newdir", None, 0, None),
    ]
}

/// The failed open outside `sub`: EACCES as the unprivileged user, resolved through `..`.
pub fn assert_locked_open_denied(conn: &Connection, d: &str) {
    let locked = rows(conn, &format!("{d}/locked.txt"));
    assert_eq!(
        locked,
        vec![row(
            "openat",
            &format!("{d}/locked.txt"),
            "../locked.txt",
            Some("read,cloexec"),
            -13,
            Some("EACCES")
        )]
    );
}

/// Writes aggregated per (process, file): one row, exact bytes and count.
pub fn assert_writes_aggregated(conn: &Connection, sub: &str) {
    let rel = format!("{sub}/rel.txt");
    let via = format!("{sub}/viadirfd.txt");
    let io: Vec<(String, i64, i64)> = conn
        .prepare("SELECT path, bytes, count FROM events WHERE kind = 'io' AND path LIKE ?1 || '%' ORDER BY path")
        .unwrap()
        .query_map([sub], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(io, vec![(rel, 1000, 10), (via, 5, 1)]);
}

/// Network: exact destinations and outcomes; `unix_path` is the socket's
/// path as the workload named it (`args[6]`).
pub fn assert_network_matches(conn: &Connection, s: &Setup, unix_path: &str) {
    let net: Vec<NetRow> = conn
        .prepare(
            "SELECT kind, family, addr, port, COALESCE(result, 0), errno, COALESCE(query, tcp_state) FROM events
             WHERE kind IN ('connect', 'sendto', 'tcp_state') ORDER BY mono_ns",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let tcp_port = s.args[3].parse::<i64>().unwrap();
    let tcp6_port = s.args[5].parse::<i64>().unwrap();
    let v4 = |kind: &str, port: i64, result: i64, errno: Option<&str>, extra: Option<&str>| {
        (
            kind.to_string(),
            Some("ipv4".to_string()),
            Some("127.0.0.1".to_string()),
            Some(port),
            result,
            errno.map(Into::into),
            extra.map(Into::into),
        )
    };
    let expected_net = vec![
        v4("tcp_state", tcp_port, 0, None, Some("established")),
        v4("connect", tcp_port, 0, None, None),
        v4("tcp_state", s.closed as i64, 0, None, Some("closed")),
        v4("connect", s.closed as i64, -111, Some("ECONNREFUSED"), None),
        (
            "tcp_state".into(),
            Some("ipv6".into()),
            Some("::1".into()),
            Some(tcp6_port),
            0,
            None,
            Some("established".into()),
        ),
        (
            "connect".into(),
            Some("ipv6".into()),
            Some("::1".into()),
            Some(tcp6_port),
            0,
            None,
            None,
        ),
        (
            "connect".into(),
            Some("unix".into()),
            Some(unix_path.to_owned()),
            None,
            0,
            None,
            None,
        ),
        v4("sendto", 53, 36, None, Some("agent.example.test")),
        v4("connect", 53, 0, None, None),
        v4("sendto", 53, 40, None, Some("connected.example.test")),
    ];
    assert_eq!(net, expected_net);
}

/// Unmounts the bind mount when dropped.
pub struct Unmount(String);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The path tricks of the kernel-paths workload in `dir`: a symlink, a
/// symlinked directory, a hard link, and `real` bind-mounted on `bound`
/// (unmounted when the returned guard drops).
pub fn make_path_tricks(dir: &Path) -> Unmount {
    let d = |p: &str| dir.join(p).display().to_string();
    std::fs::write(dir.join("secret.txt"), "s").unwrap();
    std::fs::create_dir_all(dir.join("real/sub")).unwrap();
    std::fs::write(dir.join("real/marker.txt"), "m").unwrap();
    std::fs::create_dir(dir.join("bound")).unwrap();
    std::os::unix::fs::symlink("secret.txt", dir.join("innocent.txt")).unwrap();
    std::os::unix::fs::symlink("real/sub", dir.join("linkdir")).unwrap();
    std::fs::hard_link(dir.join("secret.txt"), dir.join("hard.txt")).unwrap();
    let (uid, gid) = test_user();
    for p in ["secret.txt", "hard.txt", "real/marker.txt"] {
        nix::unistd::chown(dir.join(p).as_path(), Some(uid.into()), Some(gid.into())).unwrap();
    }
    let mount = Command::new("mount")
        .args(["--bind", &d("real"), &d("bound")])
        .status()
        .unwrap();
    assert!(mount.success(), "bind mount");
    Unmount(d("bound"))
}

/// Each path trick's open (by the process running `kernel_paths.py`, which
/// saw `dir` as `seen_as`) names the file the kernel opened, with its inode.
pub fn assert_tricks_name_kernel_files(conn: &Connection, dir: &Path, seen_as: &str) {
    use std::os::unix::fs::MetadataExt;
    let d = |p: &str| format!("{seen_as}/{p}");
    let ino = |p: &str| std::fs::metadata(dir.join(p)).unwrap().ino() as i64;
    let rows: Vec<(String, String, String, i64)> = conn
        .prepare(
            "SELECT path_as_given, real_path, real_path_status, ino FROM events
             WHERE kind = 'openat' AND result >= 0 AND process_id IN
               (SELECT id FROM processes WHERE argv LIKE '%kernel_paths.py%')
               AND (path_as_given NOT LIKE '/%' OR path_as_given LIKE '/proc/self/fd/%')
             ORDER BY mono_ns",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let secret = ino("secret.txt");
    let marker = ino("real/marker.txt");
    let row = |given: &str, real: &str, ino: i64| {
        (given.to_string(), d(real), "complete".to_string(), ino)
    };
    assert_eq!(
        rows,
        vec![
            row("innocent.txt", "secret.txt", secret),
            row("linkdir/../marker.txt", "real/marker.txt", marker),
            // The same inode as secret.txt, under its own name.
            row("hard.txt", "hard.txt", secret),
            row("secret.txt", "secret.txt", secret),
            (
                "/proc/self/fd/3".to_string(),
                d("secret.txt"),
                "complete".into(),
                secret
            ),
            // The mount is seen where it is mounted; the inode is real/'s.
            row("bound/marker.txt", "bound/marker.txt", marker),
            row("before.txt", "before.txt", ino("after.txt")),
            row("after.txt", "after.txt", ino("after.txt")),
        ]
    );
}
