//! `cargo xtask bench flood` (also the last part of `bench capture`): a flood
//! of *distinct* events, as a real `npm install` or `git checkout` makes
//! them. Four processes as `nobody` create, close and unlink distinct files
//! on a tmpfs, rate-limited in steps and then flat out, 10 s each. For each
//! step: what the workload generated (its own count: 3 syscalls per file),
//! rows stored per second, loss (kernel + sequence gaps + not stored), bytes
//! per stored row, the recorder's CPU and peak RSS, and the workload's speed
//! against an untraced run of the same step.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};

use crate::bench_capture::{compile, nobody, recorder_usage};

const DISTINCT_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
/* argv: DIR WORKERS RATE_PER_WORKER (0: flat out) SECONDS. Each worker
   creates, closes and unlinks distinct files DIR/wK/fI; prints the total
   number of files (3 hooked syscalls each). */
int main(int argc, char **argv) {
    const char *root = argv[1];
    int workers = atoi(argv[2]);
    long rate = atol(argv[3]), secs = atol(argv[4]);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    for (int k = 0; k < workers; k++) {
        if (fork() == 0) {
            char p[256];
            snprintf(p, sizeof p, "%s/w%d", root, k);
            mkdir(p, 0700);
            struct timespec start, now;
            clock_gettime(CLOCK_MONOTONIC, &start);
            long done = 0;
            for (;;) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                double t = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
                if (t >= secs) break;
                long due = rate > 0 ? (long)(t * rate) : done + 64;
                if (rate > 0 && done >= due) {
                    /* Ahead of the rate: sleep (a spinning worker would take
                       the CPU the recorder needs, which no real build does
                       while it waits). */
                    struct timespec nap = {0, 200000};
                    nanosleep(&nap, 0);
                    continue;
                }
                while (done < due) {
                    snprintf(p, sizeof p, "%s/w%d/f%ld", root, k, done);
                    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
                    if (fd >= 0) close(fd);
                    unlink(p);
                    done++;
                }
            }
            write(fds[1], &done, sizeof done);
            _exit(0);
        }
    }
    long total = 0, n;
    for (int k = 0; k < workers; k++) {
        if (read(fds[0], &n, sizeof n) == sizeof n) total += n;
        wait(0);
    }
    printf("%ld\n", total);
    return 0;
}
"#;

const WORKERS: usize = 4;
const SECONDS: u64 = 10;
/// Target events per second, all workers together (0: flat out).
const STEPS: &[u64] = &[50_000, 100_000, 200_000, 300_000, 0];

struct Step {
    target: u64,
    generated: u64,
    untraced_generated: u64,
    stored: u64,
    lost: u64,
    bytes: u64,
    cpu: Option<Duration>,
    rss_mib: Option<f64>,
}

pub fn run(agentsight: &Path) -> Result<()> {
    let work = std::env::temp_dir().join(format!("agentsight-bench-flood-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let prog = compile(&work, "distinct", DISTINCT_C, false)?;
    let fs = work.join("tmpfs");
    std::fs::create_dir_all(&fs)?;
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512m", "tmpfs"])
        .arg(&fs)
        .status()
        .context("mount a tmpfs")?;
    if !mounted.success() {
        bail!("cannot mount a tmpfs on {}", fs.display());
    }
    let result = steps(agentsight, &work, &fs, &prog);
    let _ = Command::new("umount").arg(&fs).status();
    let rows = result?;
    print_table(&rows);
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

fn steps(agentsight: &Path, work: &Path, fs: &Path, prog: &Path) -> Result<Vec<Step>> {
    let who = nobody()?;
    std::os::unix::fs::chown(fs, Some(who.0), Some(who.1))?;
    let mut rows = Vec::new();
    for &target in STEPS {
        let per_worker = (target / 3).div_ceil(WORKERS as u64);
        let args = [
            fs.display().to_string(),
            WORKERS.to_string(),
            per_worker.to_string(),
            SECONDS.to_string(),
        ];
        let untraced_generated = untraced_files(prog, &args, who, fs)? * 3;
        let db = work.join(format!("flood-{target}.db"));
        let err = work.join(format!("flood-{target}.err"));
        let _ = std::fs::remove_file(&db);
        let out = Command::new(agentsight)
            .args(["record", "--user", "nobody", "-o"])
            // Under sudo, --user may only name the caller: record as root.
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID")
            .env_remove("SUDO_USER")
            .arg(&db)
            .arg("--")
            .arg(prog)
            .args(&args)
            .stderr(std::fs::File::create(&err)?)
            .output()
            .context("run agentsight record")?;
        let generated = files_of(&out.stdout)? * 3;
        clear(fs)?;
        let (stored, lost) = stored_and_lost(agentsight, &db)?;
        // The recorder's CPU and peak RSS, from its summary on stderr.
        let usage = recorder_usage(&err);
        rows.push(Step {
            target,
            generated,
            untraced_generated,
            stored,
            lost,
            bytes: std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0),
            cpu: usage.0,
            rss_mib: usage.1,
        });
        eprintln!(
            "xtask: flood step {target}/s: generated {generated}, stored {stored}, lost {lost}"
        );
    }
    Ok(rows)
}

fn untraced_files(prog: &Path, args: &[String], who: (u32, u32), fs: &Path) -> Result<u64> {
    use std::os::unix::process::CommandExt;
    let out = Command::new(prog)
        .args(args)
        .uid(who.0)
        .gid(who.1)
        .stderr(Stdio::null())
        .output()?;
    clear(fs)?;
    files_of(&out.stdout)
}

fn files_of(stdout: &[u8]) -> Result<u64> {
    String::from_utf8_lossy(stdout)
        .trim()
        .parse()
        .context("the flood program printed no count")
}

/// Removes the workers' (now empty) directories between steps.
fn clear(fs: &Path) -> Result<()> {
    for e in std::fs::read_dir(fs)? {
        let p = e?.path();
        let _ = std::fs::remove_dir_all(&p);
    }
    Ok(())
}

/// Rows stored (`show`'s events line) and every kind of loss (its LOSS
/// line: lost in the kernel, not stored).
fn stored_and_lost(agentsight: &Path, db: &Path) -> Result<(u64, u64)> {
    let out = Command::new(agentsight)
        .args(["show", "--db"])
        .arg(db)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let num_after = |line: &str, word: &str| -> u64 {
        let w: Vec<&str> = line.split_whitespace().collect();
        w.iter()
            .position(|x| *x == word)
            .and_then(|i| w.get(i.checked_sub(1)?))
            .and_then(|n| n.trim_start_matches(';').parse().ok())
            .unwrap_or(0)
    };
    let events = text
        .lines()
        .find(|l| l.starts_with("events"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let loss = text.lines().find(|l| l.starts_with("LOSS")).unwrap_or("");
    // A record lost in the kernel is also a sequence gap: counted once.
    let lost = num_after(loss, "events") + num_after(loss, "not");
    Ok((events, lost))
}

fn print_table(rows: &[Step]) {
    println!(
        "\ndistinct-event flood: {WORKERS} processes as nobody creating, closing and unlinking distinct files on tmpfs, {SECONDS} s per step"
    );
    println!(
        "{:>10} {:>12} {:>12} {:>12} {:>10} {:>9} {:>8} {:>9} {:>8} {:>8}",
        "target/s",
        "generated/s",
        "stored/s",
        "lost",
        "lost %",
        "B/row",
        "speed×",
        "cpu s",
        "rss MiB",
        "MiB"
    );
    for r in rows {
        let secs = SECONDS as f64;
        let lost_pct = if r.generated > 0 {
            100.0 * r.lost as f64 / r.generated as f64
        } else {
            0.0
        };
        println!(
            "{:>10} {:>12.0} {:>12.0} {:>12} {:>9.2}% {:>9.0} {:>8.2} {:>9} {:>8} {:>8.1}",
            if r.target == 0 {
                "flat out".to_string()
            } else {
                r.target.to_string()
            },
            r.generated as f64 / secs,
            r.stored as f64 / secs,
            r.lost,
            lost_pct,
            r.bytes as f64 / r.stored.max(1) as f64,
            r.generated as f64 / r.untraced_generated.max(1) as f64,
            r.cpu
                .map(|c| format!("{:.2}", c.as_secs_f64()))
                .unwrap_or_else(|| "—".into()),
            r.rss_mib
                .map(|m| format!("{m:.1}"))
                .unwrap_or_else(|| "—".into()),
            r.bytes as f64 / (1 << 20) as f64,
        );
    }
    println!(
        "generated: the workload's own count (3 hooked syscalls per file); stored: rows in the capture (a close's I/O row included); lost: in the kernel (each also a sequence gap) + not stored; speed×: files made recorded ÷ untraced in the same step."
    );
}
