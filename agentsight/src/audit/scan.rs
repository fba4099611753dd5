//! The pass over the capture's events, in time order: each file, exec and
//! network event checked against the policy, exec argv and `tcp_state`
//! changes noted for the findings' process chains and connect outcomes.

use super::{
    AuditError,
    eval::{Ctx, Ev, Rules, argv_of, ev_columns, ev_from_row, note, q},
    fold::{Collector, TcpRef},
    policy::{Destination, ExePattern, PathPattern, Policy, RuleMeta, is_loopback, parse_addr},
};

const EVENT_KINDS: &str = "'open','openat','openat2','creat','unlink','unlinkat','rmdir','mkdir','mkdirat',\
'truncate','ftruncate','rename','renameat','renameat2','link','linkat','symlink','symlinkat',\
'exec','exec_failed','connect','sendto','sendmsg','sendmmsg','dns_write','tcp_state'";

/// A compiled path list, remembering which entry matched for the evidence.
pub(super) struct PathSet {
    set: globset::GlobSet,
    texts: Vec<String>,
    /// Each compiled glob, placed (`~`, `${workspace}` expanded).
    pub globs: Vec<String>,
}

/// Where `${workspace}`, `~` and `${tmpdir}` point, for expanding globs.
pub(super) struct Places<'a> {
    pub workspace: Option<&'a str>,
    pub home: Option<&'a str>,
    pub tmpdirs: &'a [String],
}

fn escaped(dir: &str) -> String {
    globset::escape(dir.trim_end_matches('/'))
}

impl PathSet {
    /// Compiles `pats` (with `roots`: only those ending in `/**`, without
    /// it, so `D/**` also yields `D`); returns the `~` patterns skipped for
    /// want of a home.
    pub(super) fn new(
        pats: &[PathPattern],
        at: &Places,
        roots: bool,
    ) -> Result<(Self, Vec<String>), AuditError> {
        let mut b = globset::GlobSetBuilder::new();
        let mut texts = Vec::new();
        let mut globs = Vec::new();
        let mut skipped = Vec::new();
        for p in pats {
            let text = if roots {
                match p.text.strip_suffix("/**") {
                    Some(t) if !t.is_empty() && t != "**" => t,
                    _ => continue,
                }
            } else {
                p.text.as_str()
            };
            let expanded: Vec<String> = if let Some(rest) = text.strip_prefix("${workspace}") {
                match at.workspace {
                    Some(w) => vec![format!("{}{rest}", escaped(w))],
                    None => {
                        return Err(AuditError::NoWorkspace {
                            pattern: p.text.clone(),
                        });
                    }
                }
            } else if let Some(rest) = text.strip_prefix("${tmpdir}") {
                // No TMPDIR recorded: the pattern has nothing to allow.
                at.tmpdirs
                    .iter()
                    .map(|t| format!("{}{rest}", escaped(t)))
                    .collect()
            } else if let Some(rest) = text.strip_prefix('~') {
                match at.home {
                    Some(h) => vec![format!("{}{rest}", escaped(h))],
                    // Without a home, `~` patterns cannot be placed: said in a
                    // note, never guessed.
                    None => {
                        if !roots {
                            skipped.push(p.text.clone());
                        }
                        continue;
                    }
                }
            } else {
                vec![text.to_string()]
            };
            for e in expanded {
                let m = globset::GlobBuilder::new(&e)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| AuditError::Pattern {
                        pattern: p.text.clone(),
                        reason: e.kind().to_string(),
                    })?;
                b.add(m);
                texts.push(p.text.clone());
                globs.push(e);
            }
        }
        let set = b.build().map_err(|e| AuditError::Pattern {
            pattern: String::new(),
            reason: e.to_string(),
        })?;
        Ok((Self { set, texts, globs }, skipped))
    }

    pub(super) fn first_match(&self, path: &str) -> Option<&str> {
        self.set
            .matches(path)
            .first()
            .map(|&i| self.texts[i].as_str())
    }
}

/// The compiled path rules.
pub(super) struct PathSets {
    write_allow: PathSet,
    /// The allowed roots themselves (`D` of `D/**`): creating D, or an
    /// unnamed file in D, is a write inside the root.
    write_roots: PathSet,
    deny_read: PathSet,
    deny_write: PathSet,
    /// (dev, ino) → path of the denied files `record --audit` found when
    /// recording started (meta `denied_inodes`): an open of the same file
    /// under any other name is a denied-path finding.
    pub denied_inodes: std::collections::HashMap<(i64, i64), super::inodes::DeniedFile>,
    /// Likewise the denied executables found on PATH (meta
    /// `denied_exe_inodes`): running one under another name is a finding.
    pub denied_exe_inodes: std::collections::HashMap<(i64, i64), super::inodes::DeniedFile>,
}

impl PathSets {
    pub fn new(
        policy: &Policy,
        workspace: Option<&str>,
        home: Option<&str>,
        tmpdirs: &[String],
        rules: &Rules,
        out: &mut Collector,
    ) -> Result<Self, AuditError> {
        let at = Places {
            workspace,
            home,
            tmpdirs,
        };
        let (w, d) = (&policy.writes, &policy.denied_paths);
        let (write_allow, s1) = PathSet::new(&w.allow, &at, false)?;
        let (write_roots, _) = PathSet::new(&w.allow, &at, true)?;
        let (deny_read, s2) = PathSet::new(&d.read, &at, false)?;
        let (deny_write, s3) = PathSet::new(&d.write, &at, false)?;
        let skipped: Vec<String> = s1.into_iter().chain(s2).chain(s3).collect();
        if !skipped.is_empty() {
            note(
                out,
                rules,
                format!(
                    "the run-as user's home is unknown (no run_as in the capture, or no such user here; set `home` in the policy): not checked: {}",
                    skipped.join(", ")
                ),
            );
        }
        Ok(Self {
            write_allow,
            write_roots,
            deny_read,
            deny_write,
            denied_inodes: Default::default(),
            denied_exe_inodes: Default::default(),
        })
    }

    /// Whether a write of `path` by `ev` is inside an allowed root: matched
    /// by an `allow` glob, or — for an operation that creates inside the
    /// path (mkdir of it, an `O_TMPFILE` open naming it) — the path is the
    /// root `D` of an allowed `D/**`.
    fn write_allowed(&self, ev: &Ev, path: &str) -> bool {
        if self.write_allow.first_match(path).is_some() {
            return true;
        }
        let creates_inside = match ev.kind.as_str() {
            "mkdir" | "mkdirat" => true,
            "open" | "openat" | "openat2" => ev
                .flags
                .as_deref()
                .is_some_and(|f| f.split(',').any(|x| x == "tmpfile")),
            _ => false,
        };
        creates_inside && self.write_roots.first_match(path).is_some()
    }
}

/// Reads every relevant event once, in time order, and checks it.
pub(super) fn events(
    ctx: &mut Ctx,
    policy: &Policy,
    rules: &Rules,
    sets: &PathSets,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let cap = ctx.cap;
    let sql = format!(
        "SELECT {} FROM events WHERE kind IN ({EVENT_KINDS}) ORDER BY mono_ns, id",
        ev_columns(cap)?
    );
    let mut st = cap.conn.prepare(&sql).map_err(|e| q(cap, e))?;
    let rows = st.query_map([], ev_from_row).map_err(|e| q(cap, e))?;
    for ev in rows {
        let ev = ev.map_err(|e| q(cap, e))?;
        match ev.kind.as_str() {
            "tcp_state" => note_tcp(ctx, ev),
            "exec" | "exec_failed" => {
                if ev.kind == "exec"
                    && let (Some(id), Some(a)) = (ev.process_id, &ev.argv)
                {
                    let list = ctx.history.execs.entry(id).or_default();
                    list.push((ev.mono_ns, a.clone()));
                }
                exec_event(ctx, policy, sets, &ev, out)?;
            }
            "connect" | "sendto" | "sendmsg" | "sendmmsg" | "dns_write" => {
                net_event(ctx, policy, rules, &ev, out)?;
            }
            _ => file_event(ctx, policy, sets, &ev, out)?,
        }
    }
    Ok(())
}

fn note_tcp(ctx: &mut Ctx, ev: Ev) {
    if let (Some(id), Some(addr), Some(port), Some(state)) =
        (ev.process_id, ev.addr, ev.port, ev.tcp_state)
    {
        let list = ctx.history.tcp.entry((id, addr, port)).or_default();
        list.push((ev.mono_ns, state));
    }
}

fn exec_event(
    ctx: &Ctx,
    policy: &Policy,
    sets: &PathSets,
    ev: &Ev,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let x = &policy.executables;
    // A shell trying each $PATH entry gets ENOENT for all but one: those
    // tries are not runs.
    if ev.kind == "exec_failed" && ev.errno.as_deref() == Some("ENOENT") || !x.meta.enabled {
        return Ok(());
    }
    let argv = argv_of(ev.argv.as_deref());
    let by_inode = || {
        let (dev, ino) = (ev.dev?, ev.ino?);
        let d = sets.denied_exe_inodes.get(&(dev, ino))?;
        let shown = ev.exe.as_deref().unwrap_or("?");
        Some((
            format!(
                "exec of denied executable {} through {shown} (the same file: device {dev}, inode {ino})",
                d.path
            ),
            Some(format!("{} (by inode)", d.path)),
        ))
    };
    if let Some((message, matched)) = exe_verdict(x, ev, &argv).or_else(by_inode) {
        let mut p = ctx.base(ev, &x.meta, message, "exec");
        p.finding.path = ev.exe.clone().or(ev.filename.clone());
        p.finding.argv = Some(argv);
        p.finding.evidence.matched = matched;
        ctx.prepare(&mut p)?;
        out.add(p, Some(ev));
    }
    Ok(())
}

fn net_event(
    ctx: &Ctx,
    policy: &Policy,
    rules: &Rules,
    ev: &Ev,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let n = &policy.network;
    if !n.meta.enabled {
        return Ok(());
    }
    for (meta, message, matched, is_dns_name) in net_verdicts(n, &rules.denied, ev) {
        let access = if is_dns_name {
            "dns"
        } else if ev.kind == "connect" {
            "connect"
        } else {
            "send"
        };
        let mut p = ctx.base(ev, &meta, message, access);
        // A non-blocking connect's outcome is a later tcp_state event: say
        // whether the connection was made (once the pass has seen it).
        if !is_dns_name
            && ev.errno.as_deref() == Some("EINPROGRESS")
            && let (Some(process_id), Some(addr), Some(port)) = (ev.process_id, &ev.addr, ev.port)
        {
            p.tcp = Some(TcpRef {
                process_id,
                addr: addr.clone(),
                port,
                mono_ns: ev.mono_ns,
            });
        }
        if is_dns_name {
            p.finding.query = ev.query.clone();
        } else {
            p.finding.addr = ev.addr.clone();
            p.finding.port = ev.port.and_then(|p| u16::try_from(p).ok());
        }
        p.finding.evidence.matched = matched;
        ctx.prepare(&mut p)?;
        out.add(p, Some(ev));
    }
    Ok(())
}

/// File syscalls: (access, path) pairs; a rename deletes its old name and
/// writes its new one. An open is judged by the path the process asked for
/// and, when it names another file (a symlink, a bind mount,
/// `/proc/self/fd/N`), by the file the kernel opened too: a path trick
/// never hides a read of a denied file nor a write outside the roots.
fn accesses(ev: &Ev) -> Vec<(&'static str, &str)> {
    let mut acc: Vec<(&str, &str)> = Vec::new();
    let p = ev.path.as_deref();
    match ev.kind.as_str() {
        "open" | "openat" | "openat2" | "creat" => {
            let fl = ev.flags.as_deref().unwrap_or("write");
            let writes = fl
                .split(',')
                .any(|f| matches!(f, "write" | "create" | "truncate" | "append"));
            let access = if writes { "write" } else { "read" };
            if let Some(p) = p {
                acc.push((access, p));
            }
            if let Some(real) = ev.real_path.as_deref()
                && Some(real) != p
                && real.starts_with('/')
            {
                acc.push((access, real));
            }
        }
        "unlink" | "unlinkat" | "rmdir" => acc.extend(p.map(|p| ("delete", p))),
        "rename" | "renameat" | "renameat2" => {
            acc.extend(ev.old_path.as_deref().map(|p| ("delete", p)));
            acc.extend(p.map(|p| ("write", p)));
        }
        _ => acc.extend(p.map(|p| ("write", p))),
    }
    acc
}

fn file_event(
    ctx: &Ctx,
    policy: &Policy,
    sets: &PathSets,
    ev: &Ev,
    out: &mut Collector,
) -> Result<(), AuditError> {
    let (w, d) = (&policy.writes, &policy.denied_paths);
    let failed = ev.result.is_some_and(|r| r < 0);
    let mut denied_found = false;
    let accessed = accesses(ev);
    for &(access, path) in &accessed {
        // A cut path cannot be judged as a whole; `…` marks it.
        if !path.starts_with('/') {
            continue;
        }
        // Nothing was there to read or change.
        if failed && ev.errno.as_deref() == Some("ENOENT") {
            continue;
        }
        let is_write = access != "read";
        let verb = if failed { "attempted " } else { "" };
        if d.meta.enabled && (!failed || d.include_failed) {
            let hit = if is_write {
                sets.deny_write.first_match(path)
            } else {
                sets.deny_read.first_match(path)
            };
            if let Some(m) = hit {
                let message = format!("{verb}{access} of denied path {path}");
                let mut p = ctx.base(ev, &d.meta, message, access);
                p.finding.path = Some(path.to_string());
                p.finding.evidence.matched = Some(m.to_string());
                ctx.prepare(&mut p)?;
                out.add(p, Some(ev));
                denied_found = true;
                continue;
            }
        }
        if is_write
            && w.meta.enabled
            && (!failed || w.include_failed)
            && !sets.write_allowed(ev, path)
        {
            let message = format!("{verb}{access} outside the allowed roots: {path}");
            let mut p = ctx.base(ev, &w.meta, message, access);
            p.finding.path = Some(path.to_string());
            ctx.prepare(&mut p)?;
            out.add(p, Some(ev));
        }
    }
    // The same file as a denied one under another name (a hard link): known
    // by the (device, inode) `record --audit` noted when recording started.
    if !denied_found
        && !failed
        && d.meta.enabled
        && let (Some(dev), Some(ino)) = (ev.dev, ev.ino)
        && let Some(df) = sets.denied_inodes.get(&(dev, ino))
        && let Some(&(access, path)) = accessed.first()
        && (if access == "read" { df.read } else { df.write })
    {
        let message = format!(
            "{access} of denied path {} through {path} (the same file: device {dev}, inode {ino})",
            df.path
        );
        let mut p = ctx.base(ev, &d.meta, message, access);
        p.finding.path = Some(df.path.clone());
        p.finding.evidence.matched = Some(format!("{} (by inode)", df.path));
        ctx.prepare(&mut p)?;
        out.add(p, Some(ev));
    }
    Ok(())
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn exe_matches(p: &ExePattern, ev: &Ev, argv: &[String]) -> bool {
    if p.by_path {
        [ev.exe.as_deref(), ev.filename.as_deref()]
            .into_iter()
            .flatten()
            .any(|s| p.matcher.is_match(s))
    } else {
        // A symlinked tool (`nc` → `nc.openbsd`) is known by the name it was
        // run as as well as by the binary the kernel resolved.
        [
            ev.exe.as_deref(),
            ev.filename.as_deref(),
            argv.first().map(String::as_str),
        ]
        .into_iter()
        .flatten()
        .any(|s| p.matcher.is_match(basename(s)))
    }
}

fn exe_verdict(
    x: &super::policy::ExecutablesRule,
    ev: &Ev,
    argv: &[String],
) -> Option<(String, Option<String>)> {
    let shown = ev
        .exe
        .clone()
        .or(ev.filename.clone())
        .unwrap_or_else(|| "?".into());
    let attempted = if ev.kind == "exec_failed" {
        "attempted "
    } else {
        ""
    };
    if let Some(p) = x.deny.iter().find(|p| exe_matches(p, ev, argv)) {
        return Some((
            format!("{attempted}exec of denied executable {shown}"),
            Some(p.text.clone()),
        ));
    }
    if !x.allow.is_empty() && !x.allow.iter().any(|p| exe_matches(p, ev, argv)) {
        return Some((
            format!("{attempted}exec of {shown}, not in the allowed executables"),
            None,
        ));
    }
    None
}

/// (rule, message, matched entry, is a DNS name finding)
fn net_verdicts(
    n: &super::policy::NetworkRule,
    denied: &RuleMeta,
    ev: &Ev,
) -> Vec<(RuleMeta, String, Option<String>, bool)> {
    let mut out = Vec::new();
    // DNS names asked: checked against the name entries.
    if let Some(qs) = &ev.query {
        let mut names: Vec<Destination> = n
            .allow
            .iter()
            .filter(|d| matches!(d, Destination::Name { .. }))
            .cloned()
            .collect();
        names.extend(n.agent_services.iter().cloned());
        for name in qs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(d) = n.deny.iter().find(|d| d.matches_name(name)) {
                out.push((
                    denied.clone(),
                    format!("DNS query for denied name {name}"),
                    Some(d.text().to_string()),
                    true,
                ));
            } else if !names.iter().any(|d| d.matches_name(name)) {
                out.push((
                    n.meta.clone(),
                    format!("DNS query for undeclared name {name}"),
                    None,
                    true,
                ));
            }
        }
    }
    if !matches!(ev.family.as_deref(), Some("ipv4" | "ipv6")) {
        return out;
    }
    let Some(ip) = ev.addr.as_deref().and_then(parse_addr) else {
        return out;
    };
    let port = ev.port.and_then(|p| u16::try_from(p).ok());
    let dest = format!(
        "{}:{}",
        ev.addr.as_deref().unwrap_or("?"),
        port.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
    );
    let failed = match (&ev.errno, ev.result) {
        (Some(e), Some(r)) if r < 0 && e != "EINPROGRESS" => format!(" (failed: {e})"),
        _ => String::new(),
    };
    if let Some(d) = n.deny.iter().find(|d| d.matches_addr(ip, port)) {
        out.push((
            denied.clone(),
            format!("{} to denied destination {dest}{failed}", ev.kind),
            Some(d.text().to_string()),
            false,
        ));
        return out;
    }
    // Port 53 is the resolver: the names asked are what the policy checks.
    if n.allow_dns && port == Some(53) {
        return out;
    }
    if n.allow_loopback && is_loopback(ip) {
        return out;
    }
    if !n.allow.iter().any(|d| d.matches_addr(ip, port)) {
        let lo = if is_loopback(ip) { "loopback " } else { "" };
        out.push((
            n.meta.clone(),
            format!("{} to undeclared {lo}destination {dest}{failed}", ev.kind),
            None,
            false,
        ));
    }
    out
}
