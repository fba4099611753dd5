//! Root tests of file and network capture: a workload with known ground truth,
//! checked value by value, cross-checked against `strace -f`, and a flood whose
//! counts prove captured + lost = generated.

use std::{net::TcpListener, path::Path, process::Command};

use agentsight_tests::{files_net::*, *};
use rusqlite::Connection;

/// Runs the workload again under `strace -f` as the unprivileged user and
/// returns the (syscall, result) pairs on the scratch paths, with the raw
/// trace text.
fn strace_scratch_calls(s: &Setup) -> (Vec<(String, i64)>, String) {
    std::fs::remove_file(s.dir.join("sub/link")).unwrap();
    let trace = s.dir.join("strace.txt");
    let (uid, gid) = test_user();
    let st = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=openat,chdir,renameat2,rename,unlinkat,unlink,mkdirat,mkdir,symlinkat,symlink,rmdir,connect", "-o"])
        .arg(&trace)
        .arg("setpriv")
        .args([format!("--reuid={uid}"), format!("--regid={gid}"), "--init-groups".into()])
        .args(&s.args)
        .current_dir(&s.dir)
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&trace).unwrap();
    let from_strace = text.lines().filter_map(strace_scratch_call).collect();
    (from_strace, text)
}

/// One strace line as (syscall, result), if it names a scratch path; a
/// failure is given as -errno.
fn strace_scratch_call(line: &str) -> Option<(String, i64)> {
    let (_, call) = line.split_once(' ')?;
    let call = call.trim_start();
    let name = call.split('(').next()?;
    if !(call.contains(&format!("\"{}", "sub"))
        || call.contains("\"rel.txt\"")
        || call.contains("\"viadirfd.txt\"")
        || call.contains("\"missing.txt\"")
        || call.contains("\"renamed.txt\"")
        || call.contains("\"newdir\"")
        || call.contains("\"../locked.txt\"")
        || call.contains("\".\""))
    {
        return None;
    }
    let result: i64 = call
        .rsplit(" = ")
        .next()
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .unwrap_or(-999);
    let result = if result == -1 {
        // strace prints -1 ERRNO; compare with -errno.
        if call.contains("ENOENT") {
            -2
        } else if call.contains("EACCES") {
            -13
        } else {
            -1
        }
    } else {
        result
    };
    Some((name.to_string(), result))
}

#[test]
fn files_and_network_match_ground_truth_and_strace() {
    require_root();
    let s = setup("files");
    let d = s.dir.display().to_string();
    let sub = format!("{d}/sub");
    let db = s.dir.join("f.db");
    let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
    let out = record(&db, &[], &args);
    assert_exit_0(&out);
    let conn = open(&db);

    let got = rows(&conn, &sub);
    let expected = expected_sub_rows(&sub);
    // Python's own start-up opens nothing under the scratch dir.
    assert_eq!(got, expected);
    assert_locked_open_denied(&conn, &d);
    assert_writes_aggregated(&conn, &sub);
    assert_network_matches(&conn, &s, &s.args[6]);
    drop(conn);

    // Cross-check with strace on the same workload: the same syscalls on the
    // scratch paths, with the same results.
    let (from_strace, text) = strace_scratch_calls(&s);
    let mut ours: Vec<(String, i64)> = expected
        .iter()
        .map(|r| (r.kind.clone(), r.result))
        .collect();
    ours.insert(5, ("openat".into(), -13));
    assert_eq!(from_strace, ours, "strace saw:\n{text}");
    let _ = std::fs::remove_dir_all(&s.dir);
}

#[test]
fn flood_counts_captured_plus_lost_equal_generated() {
    require_root();
    let dir = scratch("flood");
    const N: u64 = 300_000;
    let bin_path = static_open_flood(&dir, N, "/nonexistent-agentsight-flood");
    let db = dir.join("flood.db");
    let bin_s = bin_path.display().to_string();
    // A 1 MiB ring so the flood overruns it: loss must be counted, never silent.
    let out = record(&db, &["--ring-mib", "1"], &[&bin_s]);
    assert_exit_0(&out);
    let conn = open(&db);
    let captured: i64 = conn
        .query_row("SELECT COALESCE(SUM(COALESCE(repeat, 1)), 0) FROM events WHERE kind = 'openat' AND path_as_given = '/nonexistent-agentsight-flood'", [], |r| r.get(0))
        .unwrap();
    let other_sys: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM events WHERE kind NOT IN ('exec', 'exit', 'fork', 'openat')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let lost: i64 = conn
        .query_row("SELECT lost FROM loss WHERE kind = 'syscall'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let missing: i64 = conn
        .query_row("SELECT COALESCE(SUM(missing), 0) FROM gaps", [], |r| {
            r.get(0)
        })
        .unwrap();
    let total_lost: i64 = conn
        .query_row("SELECT SUM(lost) FROM loss", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        other_sys, 0,
        "the static flood program makes no other hooked syscalls"
    );
    assert_eq!(
        captured + lost,
        N as i64,
        "captured {captured} + lost {lost}"
    );
    assert_eq!(
        missing, total_lost,
        "every lost record shows as a sequence gap"
    );
    eprintln!("flood: {N} generated, {captured} captured, {lost} lost (1 MiB ring)");
    let _ = std::fs::remove_dir_all(&dir);
}

/// I/O on fds the process never closes is flushed when it exits: by the
/// kernel for the fds it listed (up to 32 per process), and by user space's
/// sweep for the rest. Each file's bytes and write count are exact, and each
/// aggregate comes before the exit that closed it.
#[test]
fn io_left_open_at_exit_is_flushed_exactly() {
    require_root();
    let dir = scratch("io-exit");
    let db = dir.join("io.db");
    let d = dir.display().to_string();
    // few: 3 files (listed); many: 40 files (8 beyond the kernel's list).
    // File i gets i+1 writes of 3 bytes; os._exit skips every close.
    let script = format!(
        "import os, sys\nn = int(sys.argv[1])\nfds = [os.open('{d}/%s-%02d' % (sys.argv[2], i), os.O_WRONLY | os.O_CREAT, 0o644) for i in range(n)]\nfor i, fd in enumerate(fds):\n    for _ in range(i + 1):\n        os.write(fd, b'abc')\nos._exit(0)\n"
    );
    let cmd = "python3 -c \"$S\" 3 few && python3 -c \"$S\" 40 many";
    let out = {
        let (uid, gid) = test_user();
        Command::new(bin())
            .args(["record", "--quiet", "--env", "S", "-o"])
            .arg(&db)
            .args(["--", "sh", "-c", cmd])
            // Passed on explicitly: the command gets no other variable of ours.
            .env("S", &script)
            .env("SUDO_UID", uid.to_string())
            .env("SUDO_GID", gid.to_string())
            .env("SUDO_USER", "agentsight-test")
            .output()
            .unwrap()
    };
    assert_exit_0(&out);
    let conn = open(&db);
    for (prefix, n) in [("few", 3i64), ("many", 40)] {
        let got: Vec<(String, i64, i64)> = conn
            .prepare("SELECT path, bytes, count FROM events WHERE kind = 'io' AND path LIKE ?1 || '%' ORDER BY path")
            .unwrap()
            .query_map([format!("{d}/{prefix}-")], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<(String, i64, i64)> = (0..n)
            .map(|i| (format!("{d}/{prefix}-{i:02}"), 3 * (i + 1), i + 1))
            .collect();
        assert_eq!(got, want, "{prefix}");
        // Every aggregate precedes its process's exit.
        let late: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM events io JOIN events ex ON ex.kind = 'exit' AND ex.process_id = io.process_id
                 WHERE io.kind = 'io' AND io.path LIKE ?1 || '%' AND io.id > ex.id",
                [format!("{d}/{prefix}-")],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(late, 0, "{prefix}: an aggregate after its exit");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// TCP connects on loopback (their ESTABLISHED transition runs in softirq,
/// interrupting whatever runs on that CPU) interleaved with file creation on
/// every CPU: without kernel loss there is no sequence gap, and every connect
/// and every file is there.
#[test]
fn softirq_interleaving_leaves_no_gap() {
    require_root();
    let dir = scratch("seqstress");
    const CONNECTS: usize = 1500;
    const FILES: usize = 4000;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and drop, so the backlog never fills and no connect waits.
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
        }
    });
    let script = dir.join("seq_stress.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/seq_stress.py"),
        &script,
    )
    .unwrap();
    let db = dir.join("stress.db");
    let (connects, files) = (CONNECTS.to_string(), FILES.to_string());
    let dir_s = dir.display().to_string();
    let script_s = script.display().to_string();
    let port_s = port.to_string();
    let out = record(
        &db,
        &[],
        &[
            "/usr/bin/python3",
            &script_s,
            &dir_s,
            &port_s,
            &connects,
            &files,
        ],
    );
    assert_exit_0(&out);
    let cpus = std::thread::available_parallelism().unwrap().get();
    let conn = open(&db);
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT COALESCE(SUM(lost), 0) FROM loss"),
        0,
        "kernel loss"
    );
    assert_eq!(count("SELECT COUNT(*) FROM gaps"), 0, "sequence gaps");
    let established = count(&format!(
        "SELECT COUNT(*) FROM events WHERE kind = 'tcp_state' AND tcp_state = 'established' AND port = {port}"
    ));
    assert_eq!(
        established as usize,
        CONNECTS * cpus,
        "established connects"
    );
    let created = count(&format!(
        "SELECT COALESCE(SUM(COALESCE(repeat, 1)), 0) FROM events WHERE kind = 'openat' AND result >= 0 AND path LIKE '{dir_s}/w%/f%'"
    ));
    assert_eq!(created as usize, FILES * cpus, "files created");
    eprintln!(
        "seq stress: {cpus} CPUs, {} connects and {} files, 0 lost, 0 gaps",
        CONNECTS * cpus,
        FILES * cpus
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The exec names the file the kernel ran (python3 is a symlink) and its
/// inode; the symlink trick's lexical path names the link.
fn assert_exec_and_lexical_paths(conn: &Connection, dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    // The exec: the file the kernel ran (python3 is a symlink) and its inode.
    let python = std::fs::canonicalize("/usr/bin/python3").unwrap();
    let exec_row: (String, String, i64) = conn
        .query_row(
            "SELECT filename, real_path, ino FROM events WHERE kind = 'exec' AND process_id IN
               (SELECT id FROM processes WHERE argv LIKE '%kernel_paths.py%')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        exec_row,
        (
            "/usr/bin/python3".to_string(),
            python.display().to_string(),
            std::fs::metadata(&python).unwrap().ino() as i64
        )
    );
    // The lexical path of the symlink trick names the link, the kernel
    // path the target: both are stored.
    let lexical: String = conn
        .query_row(
            "SELECT path FROM events WHERE kind = 'openat' AND path_as_given = 'innocent.txt'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(lexical, dir.join("innocent.txt").display().to_string());
}

/// `/proc/<digits>/…` with the pid replaced by `PID`; other paths unchanged.
fn pid_free(p: &str) -> String {
    match p.strip_prefix("/proc/") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("/proc/PID/{}", rest.split_once('/').map_or("", |x| x.1))
        }
        _ => p.to_string(),
    }
}

/// Runs the workload under `strace -f -y` as the unprivileged user and
/// returns every successful open after the python exec as (path as given,
/// file behind the fd), with the raw trace text.
fn strace_opens(dir: &Path, script_s: &str, dir_s: &str) -> (Vec<(String, String)>, String) {
    let (uid, gid) = test_user();
    let trace = dir.join("strace.txt");
    let st = Command::new("strace")
        .args(["-f", "-qq", "-y", "-e", "trace=openat,execve", "-o"])
        .arg(&trace)
        .arg("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--init-groups".into(),
        ])
        .args(["/usr/bin/python3", script_s, dir_s])
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&trace).unwrap();
    let from_strace: Vec<(String, String)> = text
        .lines()
        .skip_while(|l| !l.contains("execve(\"/usr/bin/python3\""))
        .filter(|l| l.contains("openat("))
        .filter_map(|l| {
            let given = l.split('"').nth(1)?;
            let (_, ret) = l.rsplit_once(" = ")?;
            let kernel = ret.split_once('<')?.1.strip_suffix('>')?;
            Some((given.to_string(), pid_free(kernel)))
        })
        .collect();
    (from_strace, text)
}

/// Every successful open of the workload as captured: (path as given, real path).
fn recorded_opens(conn: &Connection) -> Vec<(String, String)> {
    conn.prepare(
        "SELECT path_as_given, real_path FROM events
             WHERE kind = 'openat' AND result >= 0 AND process_id IN
               (SELECT id FROM processes WHERE argv LIKE '%kernel_paths.py%')
             ORDER BY mono_ns",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))
    .unwrap()
    .map(|r| {
        let (g, k): (String, String) = r.unwrap();
        (g, pid_free(&k))
    })
    .collect()
}

/// Every successful open also carries the path of the file the kernel
/// opened (`real_path`, with its device and inode), whatever path trick
/// the process used: a symlink, a symlinked directory followed by `..`, a
/// hard link, `/proc/self/fd/N`, a bind mount, a file renamed while open.
/// Cross-checked against `strace -f -y`.
#[test]
fn kernel_paths_name_the_file_the_kernel_opened() {
    require_root();
    let dir = scratch("kpaths");
    let _unmount = make_path_tricks(&dir);
    let script = dir.join("kernel_paths.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/kernel_paths.py"),
        &script,
    )
    .unwrap();
    let (script_s, dir_s) = (script.display().to_string(), dir.display().to_string());
    let db = dir.join("k.db");
    let out = record(&db, &[], &["/usr/bin/python3", &script_s, &dir_s]);
    assert_exit_0(&out);
    let conn = open(&db);
    assert_tricks_name_kernel_files(&conn, &dir, &dir_s);
    assert_exec_and_lexical_paths(&conn, &dir);
    // Every successful open of the workload (python's own start-up
    // included: libc through /lib, locale.alias through /usr/share/locale),
    // with the file strace -y names behind the returned fd.
    let (from_strace, text) = strace_opens(&dir, &script_s, &dir_s);
    let ours = recorded_opens(&conn);
    assert!(ours.len() >= 20, "{ours:#?}");
    assert_eq!(from_strace, ours, "strace saw:\n{text}");
    let differ = ours
        .iter()
        .filter(|(g, k)| g.starts_with('/') && g != k)
        .count();
    eprintln!(
        "kernel paths: {} successful opens, all as strace -y names them; {differ} absolute paths as given name another file",
        ours.len()
    );
    drop(_unmount);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Names that are not UTF-8 stay distinct and exact: two files whose names
/// differ only in a non-UTF-8 byte, and an argv with one, round-trip
/// through `export` (`\xNN` shown, the exact bytes in `*_hex`).
#[test]
fn non_utf8_names_round_trip_exactly_through_export() {
    require_root();
    let dir = scratch("rawnames");
    let script = "import os, subprocess, sys\nos.chdir(sys.argv[1])\nfor n in (b'f\\xff', b'f\\xfe'):\n    os.close(os.open(n, os.O_WRONLY | os.O_CREAT, 0o600))\nsubprocess.run([b'/bin/true', b'arg\\xfe'], check=True)\n";
    let db = dir.join("raw.db");
    let dir_s = dir.display().to_string();
    let out = record(&db, &[], &["/usr/bin/python3", "-c", script, &dir_s]);
    assert_exit_0(&out);
    let export = Command::new(bin())
        .args(["export", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_exit_0(&export);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut created: Vec<(String, String)> = Vec::new();
    let mut true_argv: Option<(serde_json::Value, serde_json::Value)> = None;
    for line in String::from_utf8_lossy(&export.stdout).lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        if e["kind"] == "openat"
            && e["path_as_given"]
                .as_str()
                .is_some_and(|p| p.starts_with("f\\x"))
        {
            created.push((
                e["path"].as_str().unwrap().to_string(),
                e["path_hex"].as_str().unwrap().to_string(),
            ));
        }
        if e["kind"] == "exec" && e["filename"] == "/bin/true" {
            true_argv = Some((e["argv"].clone(), e["argv_hex"].clone()));
        }
    }
    let path = |name: &[u8]| {
        let mut b = dir_s.as_bytes().to_vec();
        b.push(b'/');
        b.extend_from_slice(name);
        b
    };
    assert_eq!(
        created,
        vec![
            (format!("{dir_s}/f\\xff"), hex(&path(b"f\xff"))),
            (format!("{dir_s}/f\\xfe"), hex(&path(b"f\xfe"))),
        ]
    );
    assert_eq!(
        true_argv,
        Some((
            serde_json::json!(["/bin/true", "arg\\xfe"]),
            serde_json::json!([hex(b"/bin/true"), hex(b"arg\xfe")])
        ))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
