//! `cargo xtask doctor`: every prerequisite of building, the demo and the
//! tests, as present / missing / wrong, with the command that fixes it.

use std::{path::Path, process::Command};

use crate::{
    DEBIAN_PACKAGES, e2e_setup, have, output,
    toolchain::{self, BPF_LINKER_VERSION, LLVM_MAJOR, Pins},
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Present,
    Missing,
    Wrong,
}

/// Who can fix a prerequisite.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `cargo xtask setup` installs it.
    Setup,
    /// Only the machine's owner can (kernel features, root): setup stops early.
    Machine,
    /// Not used by the tests yet; reported for the record.
    Optional,
}

pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub fix: String,
    pub need: Need,
}

impl Check {
    fn new(name: impl Into<String>, need: Need, fix: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status: Status::Present,
            detail: String::new(),
            fix: fix.into(),
            need,
        }
    }
    fn ok(mut self, detail: impl Into<String>) -> Check {
        self.detail = detail.into();
        self
    }
    fn missing(mut self, detail: impl Into<String>) -> Check {
        self.status = Status::Missing;
        self.detail = detail.into();
        self
    }
    fn wrong(mut self, detail: impl Into<String>) -> Check {
        self.status = Status::Wrong;
        self.detail = detail.into();
        self
    }
}

/// Every check, in the order a fresh machine needs them.
pub fn checks() -> Vec<Check> {
    let mut out = Vec::new();
    match Pins::read() {
        Ok(pins) => toolchain_checks(&pins, &mut out),
        Err(e) => out.push(
            Check::new(
                "toolchain pins",
                Need::Machine,
                "restore the rust-toolchain.toml files",
            )
            .wrong(format!("{e:#}")),
        ),
    }
    kernel_checks(&mut out);
    for (bin, pkg) in DEBIAN_PACKAGES {
        let c = Check::new(
            format!("debian: {pkg}"),
            Need::Setup,
            format!("apt-get install -y {pkg}"),
        );
        out.push(if have(bin) {
            c.ok(format!("{bin} found"))
        } else {
            c.missing(format!("{bin} not found"))
        });
    }
    let clis = Check::new(
        "agent CLIs (e2e tier)",
        Need::Setup,
        "cargo xtask setup (npm install of tests/e2e/clis.txt)",
    );
    out.push(match e2e_setup::installed() {
        Some(dir) => clis.ok(dir.display().to_string()),
        None => clis.missing("pinned claude/codex/gemini not installed"),
    });
    let mcp = Check::new(
        "MCP servers (e2e tier)",
        Need::Setup,
        "cargo xtask setup (npm install of tests/e2e/mcp-servers.txt)",
    );
    out.push(match e2e_setup::mcp_servers_installed() {
        Some(dir) => mcp.ok(dir.display().to_string()),
        None => mcp.missing("pinned @modelcontextprotocol/server-filesystem not installed"),
    });
    out.push(docker_check());
    let decoders = Check::new(
        "export decoders (python venv)",
        Need::Setup,
        "cargo xtask setup (pip install into the venv)",
    );
    out.push(if crate::python_setup::complete() {
        decoders.ok(crate::python_setup::VENV.to_string())
    } else {
        decoders.missing("opentelemetry-proto / perfetto not installed at their pins")
    });
    optional_checks(&mut out);
    out
}

/// The container tests need the Docker client and daemon binaries and
/// debootstrap (setup installs them); a daemon need not answer yet: the
/// tests start `dockerd --bridge=none --iptables=false --ip-masq=false`.
fn docker_check() -> Check {
    let docker = Check::new(
        "docker + debootstrap (container tests)",
        Need::Setup,
        "cargo xtask setup (apt-get install docker.io debootstrap)",
    );
    let missing: Vec<&str> = ["docker", "dockerd", "debootstrap"]
        .into_iter()
        .filter(|b| !have(b))
        .collect();
    if !missing.is_empty() {
        return docker.missing(format!("not found: {}", missing.join(", ")));
    }
    if output(Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"])).is_some() {
        docker.ok("a daemon answers")
    } else {
        docker.ok("installed; no daemon answers yet (the tests start dockerd)")
    }
}

fn toolchain_checks(pins: &Pins, out: &mut Vec<Check>) {
    let stable = Check::new(
        format!("rust {} (+rustfmt, clippy)", pins.stable),
        Need::Setup,
        format!(
            "rustup toolchain install {} --profile minimal --component rustfmt --component clippy",
            pins.stable
        ),
    );
    let comps = toolchain::installed_components(&pins.stable);
    out.push(if !toolchain::toolchain_installed(&pins.stable) {
        stable.missing("not installed")
    } else if !["rustfmt", "clippy"]
        .iter()
        .all(|c| comps.iter().any(|i| i == c))
    {
        stable.missing("rustfmt or clippy missing")
    } else {
        stable.ok("installed")
    });

    let nightly = Check::new(
        format!("rust {} (+rust-src), LLVM {LLVM_MAJOR}", pins.nightly),
        Need::Setup,
        format!(
            "rustup toolchain install {} --profile minimal --component rust-src",
            pins.nightly
        ),
    );
    out.push(if !toolchain::toolchain_installed(&pins.nightly) {
        nightly.missing("not installed")
    } else if !toolchain::installed_components(&pins.nightly)
        .iter()
        .any(|c| c == "rust-src")
    {
        nightly.missing("rust-src missing")
    } else {
        match toolchain::rustc_llvm_major(&pins.nightly) {
            Some(m) if m == LLVM_MAJOR => nightly.ok(format!("installed, LLVM {m}")),
            Some(m) => nightly.wrong(format!(
                "carries LLVM {m}, bpf-linker is built for LLVM {LLVM_MAJOR}: move the pin \
                 (docs/setup.md \"Toolchains\")"
            )),
            None => nightly.wrong("rustc cannot run"),
        }
    });

    let l = toolchain::linker();
    let linker = Check::new(
        format!("bpf-linker {BPF_LINKER_VERSION} (LLVM {LLVM_MAJOR})"),
        Need::Setup,
        "cargo xtask setup (builds it against the pinned nightly's libLLVM)",
    );
    out.push(match (&l.version, l.llvm_major) {
        (None, _) if l.llvm_missing => linker.wrong("its libLLVM is gone (ldd: not found)"),
        (None, _) => linker.missing("not installed"),
        (Some(v), _) if !v.contains(BPF_LINKER_VERSION) => linker.wrong(format!("found {v}")),
        _ if l.llvm_missing => linker.wrong("its libLLVM is gone (ldd: not found)"),
        (Some(v), Some(m)) if m == LLVM_MAJOR => linker.ok(format!("{v}, LLVM {m}")),
        (Some(v), Some(m)) => linker.wrong(format!("{v} is linked against LLVM {m}")),
        (Some(v), None) => linker.wrong(format!("{v}, no dynamic libLLVM (cannot check)")),
    });
}

fn kernel_checks(out: &mut Vec<Check>) {
    let release = output(Command::new("uname").arg("-r")).unwrap_or_default();
    let release = release.trim();
    let version: Vec<u32> = release
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .filter_map(|p| p.parse().ok())
        .collect();
    let ringbuf = Check::new(
        "kernel: BPF ring buffer (≥ 5.8)",
        Need::Machine,
        "a kernel ≥ 5.8",
    );
    out.push(match version.as_slice() {
        [maj, min] if (*maj, *min) >= (5, 8) => ringbuf.ok(release.to_owned()),
        _ => ringbuf.wrong(format!("kernel {release}")),
    });
    let btf = Check::new(
        "kernel: BTF (/sys/kernel/btf/vmlinux)",
        Need::Machine,
        "a kernel built with CONFIG_DEBUG_INFO_BTF=y",
    );
    out.push(if Path::new("/sys/kernel/btf/vmlinux").exists() {
        btf.ok("present")
    } else {
        btf.missing("absent: struct offsets and tp_btf programs need it")
    });
    let tracefs = Check::new(
        "kernel: tracefs and tracepoints",
        Need::Machine,
        "a kernel with CONFIG_TRACING (record mounts tracefs itself)",
    );
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let events = Path::new("/sys/kernel/tracing/events");
    out.push(if events.join("sock/inet_sock_set_state").exists() {
        tracefs.ok("mounted, sock:inet_sock_set_state present")
    } else if events.exists() {
        tracefs.missing("mounted, but sock:inet_sock_set_state is absent")
    } else if filesystems.contains("tracefs") {
        tracefs.ok("available (record mounts it at /sys/kernel/tracing)")
    } else {
        tracefs.missing("tracefs not in /proc/filesystems")
    });
    let root = Check::new(
        "root (demo and tests load kernel programs)",
        // Not a setup failure: a build needs no root; demo and test say so themselves.
        Need::Optional,
        "run as root (sudo)",
    );
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    out.push(if euid == 0 {
        root.ok("euid 0")
    } else {
        root.missing(format!("euid {euid}"))
    });
}

fn optional_checks(out: &mut Vec<Check>) {
    let chromium = Check::new(
        "chromium (report tests, not used yet)",
        Need::Optional,
        "apt-get install chromium",
    );
    out.push(if have("chromium") {
        chromium.ok("found")
    } else {
        chromium.missing("not found")
    });
}

/// Prints the report; returns whether everything required is present.
pub fn report(checks: &[Check]) -> bool {
    let mut ok = true;
    for c in checks {
        let status = match c.status {
            Status::Present => "present",
            Status::Missing => "MISSING",
            Status::Wrong => "WRONG",
        };
        let optional = if c.need == Need::Optional {
            " (optional)"
        } else {
            ""
        };
        eprintln!("  {status:<8} {}{optional}: {}", c.name, c.detail);
        if c.status != Status::Present {
            eprintln!("           fix: {}", c.fix);
            ok &= c.need == Need::Optional;
        }
    }
    ok
}

/// The checks only the machine's owner can fix that fail.
pub fn machine_failures(checks: &[Check]) -> usize {
    checks
        .iter()
        .filter(|c| c.need == Need::Machine && c.status != Status::Present)
        .count()
}
