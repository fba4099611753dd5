//! `cargo xtask bench capture`: the cost of recording, measured side by side
//! in one run. Each workload runs untraced, under `agentsight record`, under
//! `strace -f` tracing the same syscalls, and under an equivalent bpftrace
//! script (when bpftrace is installed); the table prints wall time relative
//! to untraced, events captured and lost, recorder CPU seconds and peak RSS.
//! A last row floods the ring buffer for 10 s and reports the sustained rate
//! and loss. Needs root.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

/// Syscalls `record` hooks (besides the scheduler tracepoints), for strace/bpftrace.
const SYSCALLS: &str = "execve,execveat,open,openat,openat2,creat,unlink,unlinkat,rmdir,rename,renameat,renameat2,mkdir,mkdirat,truncate,ftruncate,chdir,fchdir,symlink,symlinkat,link,linkat,close,dup,dup2,dup3,fcntl,socket,connect,bind,listen,accept,accept4,sendto,sendmsg,sendmmsg,write,pwrite64,writev,pwritev,pwritev2,read,pread64,readv,preadv,preadv2,sendfile,splice,copy_file_range";

const MIX_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
/* Syscall-heavy mix: a tree of small files created, written, stat'ed,
   renamed, read and removed, plus short-lived execs. */
int main(int argc, char **argv) {
    const char *root = argv[1];
    int rounds = atoi(argv[2]);
    char p[512], q[512], buf[256];
    for (int r = 0; r < rounds; r++) {
        for (int d = 0; d < 20; d++) {
            snprintf(p, sizeof p, "%s/d%d", root, d);
            mkdir(p, 0755);
            for (int f = 0; f < 20; f++) {
                struct stat st;
                snprintf(p, sizeof p, "%s/d%d/f%d", root, d, f);
                int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fd >= 0) { write(fd, "0123456789abcdef", 16); close(fd); }
                stat(p, &st);
                snprintf(q, sizeof q, "%s.r", p);
                rename(p, q);
                fd = open(q, O_RDONLY);
                if (fd >= 0) { read(fd, buf, sizeof buf); close(fd); }
                unlink(q);
            }
            snprintf(p, sizeof p, "%s/d%d", root, d);
            rmdir(p);
        }
        for (int e = 0; e < 10; e++) {
            pid_t pid = fork();
            if (pid == 0) { execl("/bin/true", "true", (char *)0); _exit(127); }
            waitpid(pid, 0, 0);
        }
    }
    return 0;
}
"#;

const FLOOD_C: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* Failed opens at a fixed rate for a fixed time: argv[1] per second, argv[2] seconds. */
int main(int argc, char **argv) {
    long rate = atol(argv[1]), secs = atol(argv[2]);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long done = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double t = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
        if (t >= secs) break;
        long due = (long)(t * rate);
        while (done < due) { openat(AT_FDCWD, "/nonexistent-agentsight-bench", O_RDONLY); done++; }
    }
    return 0;
}
"#;

const SYSCALL_LOOP_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* The fixed cost a syscall tracepoint puts on every syscall of every
   process: argv[1] getppid calls; prints ns per call. */
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) syscall(SYS_getppid);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
"#;

/// Recorded and untraced runs alternate this many times per workload.
const PAIRS: usize = 15;
/// strace runs per workload (its cost is many times the noise).
const STRACE_REPS: usize = 3;

/// Resource use of one child, from wait4.
struct Usage {
    wall: Duration,
    cpu: Duration,
}

/// Which side of pair `i` runs first alternates (untraced first in even
/// pairs), so drift within a pair, and any cost one run leaves to the next,
/// falls on both sides alike.
fn recorded_first(i: usize) -> bool {
    i % 2 == 1
}

fn run_measured(cmd: &mut Command) -> Result<Usage> {
    let start = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut status = 0;
    // Safety: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    if r < 0 {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    if status != 0 {
        bail!("{cmd:?} failed (wait status {status})");
    }
    Ok(Usage {
        wall: start.elapsed(),
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
    })
}

/// One `agentsight record` of `cmd` as `nobody` into `db` (replaced), its
/// stderr (the summary) kept in `err`: the run's usage (recorder and
/// workload together) and the recorder's own CPU and peak RSS.
fn record_run(
    agentsight: &Path,
    extra: &[&str],
    db: &Path,
    err: &Path,
    cmd: &[String],
) -> Result<(Usage, RecorderUsage)> {
    let _ = std::fs::remove_file(db);
    let u = run_measured(
        Command::new(agentsight)
            .args(["record", "--user", "nobody", "-o"])
            // Root benchmarking for itself (under sudo, --user may name only the caller).
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID")
            .env_remove("SUDO_USER")
            .arg(db)
            .args(extra)
            .arg("--")
            .args(cmd)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(err)?),
    )?;
    Ok((u, recorder_usage(err)))
}

/// uid and gid of `nobody`, whom recorded runs execute as: untraced runs
/// do too, so both sides differ only by the recording.
pub(crate) fn nobody() -> Result<(u32, u32)> {
    let name = std::ffi::CString::new("nobody")?;
    // Safety: getpwnam returns NULL or a pointer to a static passwd record,
    // read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        bail!("no user `nobody` on this machine");
    }
    // Safety: non-NULL, see above.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn untraced(cmd: &[String], who: (u32, u32)) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .uid(who.0)
        .gid(who.1)
        .stdout(Stdio::null());
    c
}

/// ns per getppid call, as the loop program prints it.
fn syscall_ns(prog: &Path, who: (u32, u32)) -> Result<f64> {
    use std::os::unix::process::CommandExt;
    let out = Command::new(prog)
        .arg("3000000")
        .uid(who.0)
        .gid(who.1)
        .output()?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .context("syscall loop output")
}

/// ns per getppid call while an empty bpftrace program sits on the
/// `raw_syscalls:sys_exit` tracepoint: the floor any syscall-tracepoint
/// tracer pays on every syscall of every process.
fn syscall_ns_empty_tracer(prog: &Path, who: (u32, u32)) -> Result<f64> {
    use std::io::BufRead;
    let mut bt = Command::new("bpftrace")
        .args(["-e", "tracepoint:raw_syscalls:sys_exit { }"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    // "Attaching 1 probe..." comes just before the attach; give it a moment.
    let mut line = String::new();
    if let Some(out) = bt.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    std::thread::sleep(Duration::from_secs(2));
    let alive = bt.try_wait()?.is_none();
    let ns = syscall_ns(prog, who);
    let _ = bt.kill();
    let _ = bt.wait();
    if !alive {
        bail!("bpftrace exited before the measurement");
    }
    ns
}

/// Syscalls a command makes (its whole tree), from `strace -c -f`.
fn count_syscalls(cmd: &[String], work: &Path) -> Option<u64> {
    let out = work.join("strace-count.txt");
    Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&out)
        .args(cmd)
        .stdout(Stdio::null())
        .status()
        .ok()?;
    let text = std::fs::read_to_string(&out).ok()?;
    // The summary's last line: "100.00 SECONDS USECS/CALL CALLS [ERRORS] total".
    let last = text
        .lines()
        .rev()
        .find(|l| l.trim_end().ends_with("total"))?;
    let words: Vec<&str> = last.split_whitespace().collect();
    words.get(3)?.parse().ok()
}

pub(crate) fn compile(dir: &Path, name: &str, src: &str, static_link: bool) -> Result<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src)?;
    let out = dir.join(name);
    let mut cmd = Command::new("gcc");
    cmd.arg("-O2");
    if static_link {
        cmd.arg("-static");
    }
    let st = cmd.arg("-o").arg(&out).arg(&c).status()?;
    if !st.success() {
        bail!("gcc failed for {name}");
    }
    Ok(out)
}

/// A small C project built with make -j2, then its test binary run.
fn write_build_project(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut objs = Vec::new();
    for i in 0..40 {
        std::fs::write(
            dir.join(format!("m{i}.c")),
            format!(
                "#include <string.h>\nint f{i}(const char *s) {{ int h = {i}; for (; *s; s++) h = h * 31 + *s; return h + (int)strlen(\"x{i}\"); }}\n"
            ),
        )?;
        objs.push(format!("m{i}.o"));
    }
    let calls: String = (0..40)
        .map(|i| format!("  s += f{i}(\"abc\");\n"))
        .collect();
    let decls: String = (0..40)
        .map(|i| format!("int f{i}(const char *);\n"))
        .collect();
    std::fs::write(
        dir.join("main.c"),
        format!(
            "#include <stdio.h>\n{decls}int main(void) {{ long s = 0;\n{calls}  printf(\"%ld\\n\", s); return 0; }}\n"
        ),
    )?;
    std::fs::write(
        dir.join("Makefile"),
        format!(
            "all: app\n\tfor i in 1 2 3 4 5; do ./app > /dev/null || exit 1; done\napp: main.o {objs}\n\tcc -o app main.o {objs}\n%.o: %.c\n\tcc -O1 -c $< -o $@\nclean:\n\trm -f *.o app\n",
            objs = objs.join(" ")
        ),
    )?;
    Ok(())
}

struct Row {
    workload: &'static str,
    mode: &'static str,
    ratio: f64,
    wall: Duration,
    events: Option<i64>,
    lost: Option<i64>,
    tracer_cpu: Option<Duration>,
    /// The workload's own CPU seconds (user + system, incl. what the kernel
    /// programs cost it) relative to untraced: far less noisy than wall time.
    cpu_ratio: Option<f64>,
    tracer_rss_mib: Option<f64>,
}

/// The recorder's own CPU seconds and peak RSS (MiB).
pub(crate) type RecorderUsage = (Option<Duration>, Option<f64>);

/// The recorder's own usage, from its summary line.
pub(crate) fn recorder_usage(stderr_file: &Path) -> RecorderUsage {
    let text = std::fs::read_to_string(stderr_file).unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.contains("recorder used")) else {
        return (None, None);
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let cpu = words
        .iter()
        .position(|w| *w == "used")
        .and_then(|i| words.get(i + 1))
        .and_then(|v| v.parse::<f64>().ok());
    let rss = words
        .iter()
        .position(|w| *w == "peak")
        .and_then(|i| words.get(i + 1))
        .and_then(|v| v.parse::<f64>().ok());
    (cpu.map(Duration::from_secs_f64), rss)
}

/// Events and loss in a capture, and how long the recorded command ran from
/// its exec to its exit as the kernel timed it (the recorder's own start-up
/// and teardown are not part of the workload's cost).
fn capture_counts(db: &Path, agentsight: &Path) -> (Option<i64>, Option<i64>, Option<Duration>) {
    let out = Command::new(agentsight)
        .args(["export", "--db"])
        .arg(db)
        .output();
    let mut events = None;
    let mut span = None;
    if let Ok(o) = out {
        // Line by line: a whole export parsed at once would take hundreds of
        // MiB for the syscall mix.
        let mut n = 0;
        let mut root: Option<(serde_json::Value, u64)> = None;
        let mut end = None;
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            n += 1;
            let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            match (&root, e["kind"].as_str()) {
                (None, Some("exec")) => {
                    root = Some((e["pid"].clone(), e["mono_ns"].as_u64().unwrap_or(0)));
                }
                (Some((pid, _)), Some("exit")) if e["pid"] == *pid => {
                    end = e["mono_ns"].as_u64();
                }
                _ => {}
            }
        }
        events = Some(n);
        if let (Some((_, start)), Some(end)) = (root, end) {
            span = Some(Duration::from_nanos(end.saturating_sub(start)));
        }
    }
    let show = Command::new(agentsight)
        .args(["show", "--db"])
        .arg(db)
        .output()
        .ok();
    let lost = show.and_then(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find(|l| l.starts_with("LOSS"))
            .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
    });
    (events, lost, span)
}

/// The compiled workloads, scratch trees and tools of one benchmark run.
struct Bench<'a> {
    agentsight: &'a Path,
    work: PathBuf,
    flood: PathBuf,
    syscall_loop: PathBuf,
    who: (u32, u32),
    bpftrace: bool,
    /// (a): the syscall mix over the scratch tree.
    mix_cmd: Vec<String>,
    /// (b): a clean C build with its tests.
    build_cmd: Vec<String>,
}

/// What the benchmark measured: the table's rows and the notes under it.
#[derive(Default)]
struct Measured {
    rows: Vec<Row>,
    spreads: Vec<(String, Vec<f64>)>,
    program_costs: Vec<String>,
}

/// (c)'s syscall-cost parts: getppid ns without and during a recording,
/// under an empty tracer, and the untraced wall time of (a).
struct SyscallTax {
    without: Vec<f64>,
    with: Vec<f64>,
    floor_ns: Option<f64>,
    untraced_wall: Duration,
}

/// One workload's alternating untraced and recorded runs.
#[derive(Default)]
struct Pairs {
    base: Vec<Usage>,
    rec: Vec<Usage>,
    /// Under plain `record`.
    plain: Recorded,
    /// The same under `record --enforce` (each run beside the same
    /// untraced partner).
    enforced: Recorded,
}

/// One recorded series of [`Pairs`].
#[derive(Default)]
struct Recorded {
    spans: Vec<Duration>,
    usage: Vec<RecorderUsage>,
    counts: (Option<i64>, Option<i64>, Option<Duration>),
    wall_ratios: Vec<f64>,
    cpu_ratios: Vec<f64>,
}

impl Recorded {
    /// Adds one recorded run (`u`, `own`, its capture `db`) against its
    /// untraced partner `base`.
    fn add(&mut self, u: &Usage, own: RecorderUsage, db: &Path, agentsight: &Path, base: &Usage) {
        self.counts = capture_counts(db, agentsight);
        if let Some(span) = self.counts.2 {
            self.spans.push(span);
            self.wall_ratios.push(ratio(span, base.wall));
        }
        // The recorded run's total minus the recorder's own CPU = the workload's.
        if let Some(own_cpu) = own.0 {
            self.cpu_ratios
                .push(ratio(u.cpu.saturating_sub(own_cpu), base.cpu));
        }
        self.usage.push(own);
    }

    fn row(&self, workload: &'static str, mode: &'static str, best: Duration) -> Row {
        let mut spans = self.spans.clone();
        spans.sort();
        Row {
            workload,
            mode,
            ratio: median(self.wall_ratios.clone()).unwrap_or(f64::NAN),
            wall: spans.first().copied().unwrap_or(best),
            events: self.counts.0,
            lost: self.counts.1,
            tracer_cpu: self.usage.last().and_then(|u| u.0),
            cpu_ratio: median(self.cpu_ratios.clone()),
            tracer_rss_mib: self.usage.iter().filter_map(|u| u.1).reduce(f64::max),
        }
    }
}

pub fn run(agentsight: &Path) -> Result<()> {
    if !nix_is_root() {
        bail!("bench capture loads kernel programs: run it as root");
    }
    let b = prepare(agentsight)?;
    let mut m = Measured::default();
    for (name, cmd) in [
        ("(a) syscall mix", &b.mix_cmd),
        ("(b) C build + tests", &b.build_cmd),
    ] {
        measure_workload(&b, name, cmd, &mut m)?;
    }
    let tax = measure_untracked_during_recording(&b, &mut m)?;
    m.rows.push(measure_flood(&b)?);

    print_table(&m.rows);
    print_notes(b.bpftrace, m.spreads, &m.program_costs);
    print_syscall_cost(tax, &b.mix_cmd, &b.work);
    println!(
        "cpu/rss: the recorder process (agentsight) or the tracer's extra CPU (strace), peak RSS."
    );
    let _ = std::fs::remove_dir_all(&b.work);
    // Distinct events at rate: what a real install or checkout looks like.
    crate::bench_flood::run(agentsight)
}

/// Compiles the workloads, writes the build project and the scratch tree
/// (writable by `nobody`), and installs bpftrace if it is missing.
fn prepare(agentsight: &Path) -> Result<Bench<'_>> {
    let work =
        std::env::temp_dir().join(format!("agentsight-bench-capture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let mix = compile(&work, "mix", MIX_C, false)?;
    let flood = compile(&work, "flood", FLOOD_C, true)?;
    let syscall_loop = compile(&work, "syscall_loop", SYSCALL_LOOP_C, false)?;
    let who = nobody()?;
    let project = work.join("project");
    write_build_project(&project)?;
    let tree = work.join("tree");
    std::fs::create_dir_all(&tree)?;
    // Recorded runs execute as `nobody`: let it write the scratch trees.
    for d in [&tree, &project] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777))?;
    }
    for entry in std::fs::read_dir(&project)? {
        std::fs::set_permissions(
            entry?.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        )?;
    }
    let bpftrace = ensure_bpftrace();
    let mix_cmd = vec![
        mix.display().to_string(),
        tree.display().to_string(),
        "50".into(),
    ];
    let build_cmd = vec![
        "sh".to_string(),
        "-c".into(),
        format!("cd {} && make -s clean && make -s -j2", project.display()),
    ];
    Ok(Bench {
        agentsight,
        work,
        flood,
        syscall_loop,
        who,
        bpftrace,
        mix_cmd,
        build_cmd,
    })
}

/// Whether bpftrace is available, after trying to install it.
fn ensure_bpftrace() -> bool {
    // bpftrace is only for this comparison: install it here, not in setup.
    let have_bpftrace = || {
        Command::new("sh")
            .args(["-c", "command -v bpftrace"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !have_bpftrace() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "bpftrace"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
    }
    have_bpftrace()
}

/// The fastest of the runs.
fn best(mut v: Vec<Usage>) -> Usage {
    v.sort_by_key(|u| u.wall);
    v.swap_remove(0)
}

/// (a) or (b): untraced, under `agentsight record`, under `strace -f` and
/// under bpftrace, plus one run with kernel program statistics.
fn measure_workload(b: &Bench, name: &'static str, cmd: &[String], m: &mut Measured) -> Result<()> {
    let pairs = alternate_untraced_and_recorded(b, cmd)?;
    let base = best(pairs.base);
    m.rows.push(Row {
        workload: name,
        mode: "untraced",
        ratio: 1.0,
        wall: base.wall,
        events: None,
        lost: None,
        tracer_cpu: None,
        cpu_ratio: None,
        tracer_rss_mib: None,
    });
    if let Some(cost) = kernel_program_cost(b, name, cmd)? {
        m.program_costs.push(cost);
    }
    let rec = best(pairs.rec);
    m.spreads
        .push((name.to_owned(), pairs.plain.wall_ratios.clone()));
    m.rows
        .push(pairs.plain.row(name, "agentsight record", rec.wall));
    m.rows.push(
        pairs
            .enforced
            .row(name, "agentsight record --enforce", rec.wall),
    );
    m.spreads.push((
        format!("{name} --enforce"),
        pairs.enforced.wall_ratios.clone(),
    ));
    m.rows.push(strace_row(b, name, cmd, &base)?);
    if b.bpftrace {
        match bpftrace_row(name, cmd, &b.work, base.wall) {
            Ok(r) => m.rows.push(r),
            Err(e) => println!("bpftrace row for {name} failed: {e:#}"),
        }
    }
    Ok(())
}

/// Untraced and recorded runs alternate, so drift in the machine's state
/// (page cache, other load) hits both sides alike.
fn alternate_untraced_and_recorded(b: &Bench, cmd: &[String]) -> Result<Pairs> {
    let mut p = Pairs::default();
    // Each recorded run against its untraced partner: slow drift of the
    // machine cancels out; the median of these pairs is the reported
    // ratio.
    for i in 0..PAIRS {
        let db = b.work.join(format!("rec-{i}.db"));
        let recorded = || record_run(b.agentsight, &[], &db, &b.work.join("record.err"), cmd);
        // The enforced run (the default policy: denied files and
        // executables marked, the network programs attached; no audit at
        // the end), beside the same untraced partner: before the pair or
        // after it, in turn.
        let edb = b.work.join(format!("enf-{i}.db"));
        let enforced = || {
            record_run(
                b.agentsight,
                &["--enforce"],
                &edb,
                &b.work.join("enforce.err"),
                cmd,
            )
        };
        let early = if recorded_first(i) {
            Some(enforced()?)
        } else {
            None
        };
        let (u, own) = if recorded_first(i) {
            let r = recorded()?;
            p.base.push(run_measured(&mut untraced(cmd, b.who))?);
            r
        } else {
            p.base.push(run_measured(&mut untraced(cmd, b.who))?);
            recorded()?
        };
        let base = &p.base[p.base.len() - 1];
        p.plain.add(&u, own, &db, b.agentsight, base);
        p.rec.push(u);
        let (eu, eown) = match early {
            Some(r) => r,
            None => enforced()?,
        };
        p.enforced.add(&eu, eown, &edb, b.agentsight, base);
    }
    Ok(p)
}

/// One more recorded run with kernel program statistics on (they cost
/// a little, so never in the timed pairs): what the programs took.
fn kernel_program_cost(b: &Bench, name: &str, cmd: &[String]) -> Result<Option<String>> {
    let err = b.work.join("stats.err");
    let (u, own) = record_run(
        b.agentsight,
        &["--program-stats"],
        &b.work.join("stats.db"),
        &err,
        cmd,
    )?;
    let own = own.0.unwrap_or_default();
    let text = std::fs::read_to_string(&err).unwrap_or_default();
    let workload_cpu = u.cpu.saturating_sub(own);
    let Some(line) = text.lines().find(|l| l.contains("kernel programs ran")) else {
        return Ok(None);
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let ms = words
        .iter()
        .position(|w| *w == "ms")
        .and_then(|i| words.get(i - 1))
        .and_then(|v| v.parse::<f64>().ok());
    Ok(ms.map(|ms| {
        format!(
            "{name}: {} — {:.1} % of the workload's {:.2} s CPU",
            line.trim_start_matches("agentsight: "),
            ms / 10.0 / workload_cpu.as_secs_f64().max(1e-9),
            workload_cpu.as_secs_f64()
        )
    }))
}

/// The workload under `strace -f` tracing the same syscalls: best of
/// `STRACE_REPS`, against the untraced best.
fn strace_row(b: &Bench, name: &'static str, cmd: &[String], base: &Usage) -> Result<Row> {
    let trace = b.work.join("strace.out");
    let mut st = Vec::new();
    for _ in 0..STRACE_REPS {
        st.push(run_measured(
            Command::new("strace")
                .args(["-f", "-qq", "-e", &format!("trace={SYSCALLS}"), "-o"])
                .arg(&trace)
                .args(cmd)
                .stdout(Stdio::null()),
        )?);
    }
    let st = best(st);
    let lines = std::fs::read_to_string(&trace)
        .map(|t| t.lines().count() as i64)
        .ok();
    Ok(Row {
        workload: name,
        mode: "strace -f",
        ratio: ratio(st.wall, base.wall),
        wall: st.wall,
        events: lines,
        lost: None,
        tracer_cpu: Some(st.cpu.saturating_sub(base.cpu)),
        cpu_ratio: None,
        // wait4's peak RSS of a tracer covers its traced children too.
        tracer_rss_mib: None,
    })
}

/// (c) an untracked process doing (a) while an agent tree is recorded;
/// each recorded run alternates with one where no recording exists.
fn measure_untracked_during_recording(b: &Bench, m: &mut Measured) -> Result<SyscallTax> {
    let mut with_bg = Vec::new();
    let mut without = Vec::new();
    let mut c_wall_ratios = Vec::new();
    let mut c_cpu_ratios = Vec::new();
    let mut bg_events = None;
    let mut tax_without = Vec::new();
    let mut tax_with = Vec::new();
    for i in 0..PAIRS {
        let mut run_without = || -> Result<()> {
            without.push(run_measured(&mut untraced(&b.mix_cmd, b.who))?);
            tax_without.push(syscall_ns(&b.syscall_loop, b.who)?);
            Ok(())
        };
        if !recorded_first(i) {
            run_without()?;
        }
        let db = b.work.join(format!("bg-{i}.db"));
        let mut bg = start_background_recording(b.agentsight, &db)?;
        with_bg.push(run_measured(&mut untraced(&b.mix_cmd, b.who))?);
        tax_with.push(syscall_ns(&b.syscall_loop, b.who)?);
        let _ = Command::new("pkill")
            .args(["-f", "/bin/sleep 600"])
            .status();
        let _ = bg.wait();
        bg_events = capture_counts(&db, b.agentsight).0;
        if recorded_first(i) {
            run_without()?;
        }
        let (w, wo) = (&with_bg[with_bg.len() - 1], &without[without.len() - 1]);
        c_wall_ratios.push(ratio(w.wall, wo.wall));
        c_cpu_ratios.push(ratio(w.cpu, wo.cpu));
    }
    m.spreads.push((
        "(c) untracked (a) during a recording".to_owned(),
        c_wall_ratios.clone(),
    ));
    let floor_ns = empty_tracer_floor(b, &mut tax_without)?;
    with_bg.sort_by_key(|u| u.wall);
    without.sort_by_key(|u| u.wall);
    let mid = &with_bg[0];
    let untraced_mid = &without[0];
    m.rows.push(Row {
        workload: "(c) untracked (a) during a recording",
        mode: "untraced, no recording",
        ratio: 1.0,
        wall: untraced_mid.wall,
        events: None,
        lost: None,
        tracer_cpu: None,
        cpu_ratio: None,
        tracer_rss_mib: None,
    });
    m.rows.push(Row {
        workload: "(c) untracked (a) during a recording",
        mode: "agentsight record",
        ratio: median(c_wall_ratios).unwrap_or(f64::NAN),
        wall: mid.wall,
        events: bg_events,
        lost: None,
        tracer_cpu: None,
        cpu_ratio: median(c_cpu_ratios),
        tracer_rss_mib: None,
    });
    Ok(SyscallTax {
        without: tax_without,
        with: tax_with,
        floor_ns,
        untraced_wall: untraced_mid.wall,
    })
}

/// Starts recording an idle agent tree (`sleep 600` as `nobody`) into
/// `db` and returns once every program is attached (or after 60 s).
fn start_background_recording(agentsight: &Path, db: &Path) -> Result<std::process::Child> {
    let _ = std::fs::remove_file(db);
    let bg = Command::new(agentsight)
        .args(["record", "--quiet", "--user", "nobody", "-o"])
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .arg(db)
        .args(["--", "/bin/sleep", "600"])
        .spawn()?;
    // Measure only once every program is attached (the capture says so).
    let ready = Instant::now();
    while ready.elapsed() < Duration::from_secs(60) {
        let shown = Command::new(agentsight)
            .args(["show", "--db"])
            .arg(db)
            .output();
        if shown.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(" attached, ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(bg)
}

/// The same loop under an empty tracer, alternating with untraced runs
/// that join the baseline `tax_without`: the median ns per syscall.
fn empty_tracer_floor(b: &Bench, tax_without: &mut Vec<f64>) -> Result<Option<f64>> {
    let mut floor = Vec::new();
    if b.bpftrace {
        for _ in 0..5 {
            tax_without.push(syscall_ns(&b.syscall_loop, b.who)?);
            match syscall_ns_empty_tracer(&b.syscall_loop, b.who) {
                Ok(ns) => floor.push(ns),
                Err(e) => {
                    println!("empty-tracer syscall measurement failed: {e:#}");
                    break;
                }
            }
        }
    }
    Ok(median(floor))
}

/// Flood: 250,000 failed opens per second for 10 s, default ring.
fn measure_flood(b: &Bench) -> Result<Row> {
    let db = b.work.join("flood.db");
    let flood_cmd = [b.flood.display().to_string(), "250000".into(), "10".into()];
    let (u, flood_usage) = record_run(
        b.agentsight,
        &[],
        &db,
        &b.work.join("flood.err"),
        &flood_cmd,
    )?;
    let (events, lost, span) = capture_counts(&db, b.agentsight);
    Ok(Row {
        workload: "flood 250k/s × 10 s",
        mode: "agentsight record",
        ratio: f64::NAN,
        wall: span.unwrap_or(u.wall),
        events,
        lost,
        tracer_cpu: flood_usage.0,
        cpu_ratio: None,
        tracer_rss_mib: flood_usage.1,
    })
}

fn print_table(rows: &[Row]) {
    println!(
        "\n{:<40} {:<22} {:>7} {:>9} {:>7} {:>10} {:>9} {:>10} {:>10}",
        "workload", "mode", "×untr.", "wall s", "cpu×", "events", "lost", "cpu s", "rss MiB"
    );
    for r in rows {
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "—".into());
        println!(
            "{:<40} {:<22} {:>7} {:>9.3} {:>7} {:>10} {:>9} {:>10} {:>10}",
            r.workload,
            r.mode,
            if r.ratio.is_nan() {
                "—".into()
            } else {
                format!("{:.3}", r.ratio)
            },
            r.wall.as_secs_f64(),
            r.cpu_ratio
                .map(|c| format!("{c:.3}"))
                .unwrap_or_else(|| "—".into()),
            opt(r.events),
            opt(r.lost),
            r.tracer_cpu
                .map(|c| format!("{:.2}", c.as_secs_f64()))
                .unwrap_or_else(|| "—".into()),
            r.tracer_rss_mib
                .map(|m| format!("{m:.1}"))
                .unwrap_or_else(|| "—".into()),
        );
    }
}

/// What the columns mean, the per-pair ratios, and the kernel programs' cost.
fn print_notes(bpftrace: bool, spreads: Vec<(String, Vec<f64>)>, program_costs: &[String]) {
    if !bpftrace {
        println!("(bpftrace is not installed: `apt-get install bpftrace` to add its rows)");
    }
    println!(
        "events: agentsight = rows in the capture (I/O aggregated per fd); strace = lines traced."
    );
    println!(
        "×untr. / cpu×: median over {PAIRS} pairs of (recorded run ÷ its untraced partner, which runs before or after it in turn, both as `nobody`), wall time / the workload's own CPU (user+sys); wall s: best of {PAIRS}."
    );
    for (name, mut ratios) in spreads {
        ratios.sort_by(f64::total_cmp);
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        println!("pairs, {name}: {}", shown.join(" "));
    }
    for c in program_costs {
        println!("kernel programs (one extra run, statistics on), {c}");
    }
}

/// (c) from its parts: what a syscall tracepoint costs every syscall of
/// an untracked process, times the syscalls (a) makes, over its run time.
fn print_syscall_cost(tax: SyscallTax, mix_cmd: &[String], work: &Path) {
    let (t0, t1) = (median(tax.without), median(tax.with));
    let floor_ns = tax.floor_ns;
    if let (Some(t0), Some(t1)) = (t0, t1) {
        let tax_ns = t1 - t0;
        print!(
            "untracked syscall cost: getppid {t0:.1} ns untraced, {t1:.1} ns during a recording (+{tax_ns:.1} ns, median of {PAIRS})"
        );
        if let Some(floor) = floor_ns {
            print!(
                ", {floor:.1} ns under an empty bpftrace program on raw_syscalls:sys_exit (+{:.1} ns)",
                floor - t0
            );
        }
        match count_syscalls(mix_cmd, work) {
            Some(n) => {
                let secs = tax.untraced_wall.as_secs_f64();
                let expect = |ns: f64| 1.0 + n as f64 * ns * 1e-9 / secs;
                print!(
                    "; (a) makes {n} syscalls in {secs:.3} s: expected (c) ratio {:.4}",
                    expect(tax_ns)
                );
                if let Some(floor) = floor_ns {
                    print!(", with an empty tracer {:.4}", expect(floor - t0));
                }
                println!();
            }
            None => println!(),
        }
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn nix_is_root() -> bool {
    // Safety: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// bpftrace counting the same syscalls of the workload's process tree.
fn bpftrace_row(name: &'static str, cmd: &[String], work: &Path, base: Duration) -> Result<Row> {
    let script = work.join("trace.bt");
    let probes: Vec<String> = SYSCALLS
        .split(',')
        .map(|s| format!("tracepoint:syscalls:sys_exit_{s}"))
        .collect();
    std::fs::write(
        &script,
        format!(
            "tracepoint:sched:sched_process_fork /@t[pid] || pid == cpid/ {{ @t[args->child_pid] = 1; }}\n{} /@t[pid] || pid == cpid/ {{ @n = count(); }}\n",
            probes.join(",\n")
        ),
    )?;
    // bpftrace starts the workload itself (-c, split on spaces, no shell) and
    // knows its pid as `cpid`: hand it a wrapper script that execs the command.
    let wrapper = work.join("bpftrace-workload.sh");
    let quoted: Vec<String> = cmd
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    std::fs::write(&wrapper, format!("exec {}\n", quoted.join(" ")))?;
    let u = run_measured(
        Command::new("bpftrace")
            .arg("-q")
            .arg(&script)
            .arg("-c")
            .arg(format!("/bin/sh {}", wrapper.display()))
            .stdout(Stdio::null()),
    )?;
    Ok(Row {
        workload: name,
        mode: "bpftrace",
        ratio: ratio(u.wall, base),
        wall: u.wall,
        events: None,
        lost: None,
        tracer_cpu: Some(u.cpu),
        cpu_ratio: None,
        tracer_rss_mib: None,
    })
}
