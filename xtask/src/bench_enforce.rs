//! `cargo xtask bench enforce`: what `record --enforce` adds to an open.
//!
//! One recording under `record --enforce` with a policy that denies
//! `~/.ssh/**` of a bench home (the key file and its directory marked). The
//! recorded command (python3, run as `nobody`) times N opens (open + close)
//! of an unmarked file beside the key — the baseline: the same process, the
//! kernel programs attached, no mark — then N opens of the key, each refused
//! (a permission event decided `FAN_DENY`). While it waits, a process outside
//! the tree times N opens of the key, each let through (`FAN_ALLOW`): the
//! cost the marks put on everybody else. Figures: p50, p99 and max per open
//! in µs for each, and the denials stored or counted as lost. The decision
//! itself is one `bpf(2)` map lookup; what an open pays is the round trip
//! through the decider thread.
//!
//! The network rules: N `connect`s of a UDP socket (no packet is sent: the
//! call is the cgroup `connect4` program and the kernel's own work) to an
//! allowed loopback port and to an undeclared one by the tree (the program
//! walks the rules; a refusal is also reported through its ring), and to the
//! undeclared one by a process outside the tree while the programs are
//! attached (one map lookup), beside the same outside series timed before
//! the recording (no program attached): the baseline.
//!
//! The write rules (Landlock): N opens for writing (`O_WRONLY|O_CREAT`) by
//! the tree of a file inside the one allowed root and of one outside it
//! (each refused with EACCES, each a denial found in the capture at the
//! end), beside the same open by a process outside any Landlock domain
//! timed before the recording: the baseline.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const OPENS: usize = 5_000;

/// `open PATH N OUT`: times N opens (open + close) of PATH; `write PATH N
/// OUT` the same for writing (created if missing); `udp PORT N OUT`: N
/// connects of one UDP socket to 127.0.0.1:PORT. Writes the
/// nanoseconds, one per line, to OUT; a refused call counts like one let
/// through.
const TIMER: &str = r#"
import os, socket, sys, time
what, target, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if what == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    call = lambda: s.connect(("127.0.0.1", int(target)))
elif what == "write":
    call = lambda: os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o666))
else:
    call = lambda: os.close(os.open(target, os.O_RDONLY))
ts = []
for _ in range(n):
    a = time.perf_counter_ns()
    try:
        call()
    except PermissionError:
        pass
    ts.append(time.perf_counter_ns() - a)
with open(out, "w") as f:
    f.write("\n".join(map(str, ts)))
"#;

/// The loopback UDP ports the network series connect to (no packet is
/// sent: a UDP connect only sets the destination).
const ALLOWED_PORT: u16 = 9;
const UNDECLARED_PORT: u16 = 10;

pub fn run(agentsight: &Path) -> Result<()> {
    let base =
        std::env::temp_dir().join(format!("agentsight-bench-enforce-{}", std::process::id()));
    let r = bench(agentsight, &base);
    let _ = std::fs::remove_dir_all(&base);
    r
}

fn bench(agentsight: &Path, base: &Path) -> Result<()> {
    let ssh = base.join("home/.ssh");
    std::fs::create_dir_all(&ssh)?;
    let key = ssh.join("id_rsa");
    let plain = base.join("home/plain.txt");
    std::fs::write(&key, "not a key\n")?;
    std::fs::write(&plain, "plain\n")?;
    let timer = base.join("timer.py");
    std::fs::write(&timer, TIMER)?;
    // `nobody` runs the command and writes its figures here.
    let out = base.join("out");
    std::fs::create_dir_all(&out)?;
    for d in [base, &base.join("home"), &ssh, &out] {
        chmod(d, 0o777)?;
    }
    for f in [&key, &plain, &timer] {
        chmod(f, 0o644)?;
    }
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "home = \"{}\"\n[writes]\nallow = [\"{}/**\", \"/dev/null\"]\n[denied_paths]\nread = [\"~/.ssh/**\"]\n[network]\nallow = [\"127.0.0.1:{ALLOWED_PORT}\"]\n",
            base.join("home").display(),
            out.display()
        ),
    )?;
    let udp = |port: u16, name: &str| {
        format!(
            "python3 {} udp {port} {OPENS} {}",
            timer.display(),
            out.join(name).display()
        )
    };
    let write = |path: &Path, name: &str| {
        format!(
            "python3 {} write {} {OPENS} {}",
            timer.display(),
            path.display(),
            out.join(name).display()
        )
    };
    let (inside, outside_root) = (out.join("written.txt"), base.join("home/written.txt"));
    // Outside any recording: no program attached, no Landlock domain.
    for (script, what) in [
        (udp(UNDECLARED_PORT, "udp_none"), "connect"),
        (write(&outside_root, "write_none"), "write"),
    ] {
        let st = Command::new("sh")
            .args(["-c", &script])
            .status()
            .with_context(|| format!("run the baseline {what} timer"))?;
        if !st.success() {
            bail!("the baseline {what} timer failed: {st}");
        }
    }
    std::fs::remove_file(&outside_root)?;
    let (ready, done) = (out.join("ready"), out.join("done"));
    let t = |path: &Path, name: &str| {
        format!(
            "python3 {} open {} {OPENS} {}",
            timer.display(),
            path.display(),
            out.join(name).display()
        )
    };
    let script = format!(
        "{} && {} && {} && {} && {} && {} && : > {} && while [ ! -e {} ]; do sleep 0.05; done",
        t(&plain, "baseline"),
        t(&key, "denied"),
        udp(ALLOWED_PORT, "udp_allowed"),
        udp(UNDECLARED_PORT, "udp_refused"),
        write(&inside, "write_allowed"),
        write(&outside_root, "write_refused"),
        ready.display(),
        done.display()
    );
    let db = base.join("enforce.db");
    let mut rec = Command::new(agentsight)
        .args(["record", "--quiet", "--user", "nobody", "-o"])
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .arg(&db)
        .args(["--enforce", "--audit"])
        .arg(&policy)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("start record --enforce")?;
    let started = Instant::now();
    while !ready.exists() {
        if let Some(st) = rec.try_wait()? {
            bail!("record --enforce ended ({st}) before its command was ready");
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = rec.kill();
            bail!("the recorded command was not ready after 300 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Outside the tree: every open of the marked key is allowed.
    let outside = Command::new("python3")
        .arg(&timer)
        .arg("open")
        .arg(&key)
        .arg(OPENS.to_string())
        .arg(out.join("allowed"))
        .status()
        .context("run the outside timer")?;
    let outside_net = Command::new("sh")
        .args(["-c", &udp(UNDECLARED_PORT, "udp_outside")])
        .status()
        .context("run the outside connect timer")?;
    std::fs::write(&done, "")?;
    let rec = rec.wait_with_output()?;
    if !outside.success() || !outside_net.success() {
        bail!("an outside timer failed: {outside}, {outside_net}");
    }
    let summary = String::from_utf8_lossy(&rec.stderr);
    println!(
        "enforce bench: {OPENS} opens each, one recording (record --enforce, kernel programs attached); load average {}",
        load_average()
    );
    let base_p = report(&out.join("baseline"), "unmarked file (baseline)", None)?;
    report(
        &out.join("denied"),
        "marked, refused (tracked tree)",
        Some(base_p),
    )?;
    report(
        &out.join("allowed"),
        "marked, allowed (outside the tree)",
        Some(base_p),
    )?;
    let none = report(
        &out.join("udp_none"),
        "UDP connect, no program (baseline)",
        None,
    )?;
    for (file, what) in [
        ("udp_allowed", "UDP connect, allowed (tracked tree)"),
        ("udp_refused", "UDP connect, refused (tracked tree)"),
        ("udp_outside", "UDP connect, outside the tree"),
    ] {
        report(&out.join(file), what, Some(none))?;
    }
    let none = report(
        &out.join("write_none"),
        "open for writing, no Landlock (baseline)",
        None,
    )?;
    for (file, what) in [
        ("write_allowed", "open for writing, allowed (tracked tree)"),
        ("write_refused", "open for writing, refused (tracked tree)"),
    ] {
        report(&out.join(file), what, Some(none))?;
    }
    if outside_root.exists() {
        bail!("{} was written by the tree", outside_root.display());
    }
    for line in summary.lines().filter(|l| l.contains("enforce:")) {
        println!("  {line}");
    }
    Ok(())
}

/// Prints p50/p99/max of one series (µs), and the added p50/p99 over the
/// baseline; returns its (p50, p99).
fn report(file: &Path, what: &str, base: Option<(f64, f64)>) -> Result<(f64, f64)> {
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let mut v: Vec<u64> = text.lines().filter_map(|l| l.parse().ok()).collect();
    if v.len() != OPENS {
        bail!("{}: {} timings, expected {OPENS}", file.display(), v.len());
    }
    v.sort_unstable();
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let (p50, p99, max) = (q(0.5), q(0.99), q(1.0));
    let added = base.map_or(String::new(), |(b50, b99)| {
        format!("   (+{:.1} µs p50, +{:.1} µs p99)", p50 - b50, p99 - b99)
    });
    println!("  {what:<40} p50 {p50:>7.1} µs   p99 {p99:>7.1} µs   max {max:>8.1} µs{added}");
    Ok((p50, p99))
}

fn chmod(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", p.display()))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
