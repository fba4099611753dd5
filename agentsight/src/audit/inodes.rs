//! Denied files by identity. A path rule cannot see a hard link: the same
//! file under a name no pattern matches. `record --audit` therefore notes,
//! when recording starts, the (device, inode) of every existing file a
//! denied-path pattern matches (meta `denied_inodes`), and `audit` flags an
//! open of the same file under any name.

use std::{collections::HashMap, os::unix::fs::MetadataExt, path::Path};

/// One denied file found when recording started (declared beside the
/// path sets that judge by it).
pub use super::rules::paths::DeniedFile;
use super::{
    AuditError,
    policy::Policy,
    rules::paths::{PathSet, Places},
};
use crate::enforce::landlock::WriteRoots;
use crate::store::Capture;

/// Bounds of the walk under each pattern's literal prefix: a pattern such
/// as `~/**` must not turn the start of a recording into a scan of a home.
const MAX_DEPTH: usize = 8;
const MAX_ENTRIES: usize = 20_000;

/// The existing regular files the policy's denied-path patterns match,
/// with `~` and `${workspace}` placed at `home` and `workspace`. Never
/// follows a symlink (a link is judged by its target's own name).
pub fn denied_files(
    policy: &Policy,
    home: Option<&str>,
    workspace: Option<&str>,
) -> Result<Vec<DeniedFile>, AuditError> {
    let at = Places {
        workspace,
        home,
        tmpdirs: &[],
    };
    let d = &policy.denied_paths;
    let (read, _) = PathSet::new(&d.read, &at, false)?;
    let (write, _) = PathSet::new(&d.write, &at, false)?;
    let mut seen: HashMap<String, DeniedFile> = HashMap::new();
    let mut budget = MAX_ENTRIES;
    for glob in read.globs.iter().chain(&write.globs) {
        let mut files = Vec::new();
        walk(Path::new(&walk_root(glob)), 0, &mut budget, &mut files);
        for (path, dev, ino) in files {
            let (r, w) = (
                read.first_match(&path).is_some(),
                write.first_match(&path).is_some(),
            );
            if r || w {
                seen.entry(path.clone()).or_insert(DeniedFile {
                    path,
                    dev,
                    ino,
                    read: r,
                    write: w,
                });
            }
        }
    }
    let mut out: Vec<DeniedFile> = seen.into_values().collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The existing directories a denied-read pattern covers entirely (`D/**`
/// with a literal `D`): `record --enforce` marks them so a file created in
/// one later is denied too.
pub fn denied_dirs(
    policy: &Policy,
    home: Option<&str>,
    workspace: Option<&str>,
) -> Result<Vec<String>, AuditError> {
    let at = Places {
        workspace,
        home,
        tmpdirs: &[],
    };
    let (read, _) = PathSet::new(&policy.denied_paths.read, &at, false)?;
    let mut out: Vec<String> = read
        .globs
        .iter()
        .filter_map(|g| {
            let dir = g.strip_suffix("/**")?;
            (walk_root(g) == dir.replace('\\', "")).then(|| walk_root(g))
        })
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The [`WriteRoots`] of `policy`'s `[writes] allow`, with `~`,
/// `${workspace}` and `${tmpdir}` placed at `home`, `workspace` and
/// `tmpdir`. Any glob under `/proc` is granted as `/proc` (its per-process
/// names, `/proc/self`, resolve differently for each process).
pub fn write_roots(
    policy: &Policy,
    home: Option<&str>,
    workspace: Option<&str>,
    tmpdir: Option<&str>,
) -> Result<WriteRoots, AuditError> {
    let tmpdirs: Vec<String> = tmpdir.map(str::to_owned).into_iter().collect();
    let at = Places {
        workspace,
        home,
        tmpdirs: &tmpdirs,
    };
    let (allow, _) = PathSet::new(&policy.writes.allow, &at, false)?;
    let mut out = WriteRoots::default();
    let home = home.map(|h| h.trim_end_matches('/'));
    for glob in &allow.globs {
        let literal = walk_root(glob);
        let whole_tree = glob
            .strip_suffix("/**")
            .is_some_and(|d| d.replace('\\', "") == literal);
        let plain = !glob.contains(['*', '?', '[', '{']);
        if literal == "/proc" || literal.starts_with("/proc/") {
            out.dirs.push("/proc".to_owned());
            if glob != "/proc/**" {
                out.widened.push(format!("{glob} as /proc/**"));
            }
            continue;
        }
        let meta = std::fs::metadata(&literal);
        if plain {
            match meta {
                Ok(m) if !m.is_dir() => out.files.push(literal),
                Ok(_) => out.dirs.push(literal),
                Err(_) => out
                    .not_granted
                    .push(format!("{glob} (does not exist when recording starts)")),
            }
            continue;
        }
        if literal == "/" || Some(literal.as_str()) == home {
            out.not_granted
                .push(format!("{glob} (would allow all of {literal})"));
            continue;
        }
        match meta {
            Ok(m) if m.is_dir() => {
                if !whole_tree {
                    out.widened.push(format!("{glob} as {literal}/**"));
                }
                out.dirs.push(literal);
            }
            _ if whole_tree
                && home.is_some_and(|h| literal.starts_with(&format!("{h}/")))
                && home.is_some_and(|h| Path::new(h).is_dir()) =>
            {
                out.missing.push(literal)
            }
            _ => out
                .not_granted
                .push(format!("{glob} (does not exist when recording starts)")),
        }
    }
    let (denied, _) = PathSet::new(&policy.denied_paths.write, &at, false)?;
    out.denied = denied.globs;
    out.allowed = allow.globs;
    for v in [&mut out.dirs, &mut out.missing, &mut out.files] {
        v.sort();
        v.dedup();
    }
    Ok(out)
}

/// The longest directory of `glob` without glob characters (the glob
/// itself when it has none).
fn walk_root(glob: &str) -> String {
    let literal = glob.find(['*', '?', '[', '{']).map_or(glob, |i| &glob[..i]);
    if literal.len() == glob.len() {
        return glob.replace('\\', "");
    }
    let dir = literal.rfind('/').map_or("/", |i| &literal[..i.max(1)]);
    dir.replace('\\', "")
}

/// Regular files at or under `p` (bounded), with the kernel's device number
/// and the inode.
fn walk(p: &Path, depth: usize, budget: &mut usize, out: &mut Vec<(String, i64, i64)>) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return;
    };
    if meta.is_file() {
        if let Some(s) = p.to_str() {
            out.push((s.to_owned(), kernel_dev(meta.dev()), meta.ino() as i64));
        }
        return;
    }
    if !meta.is_dir() || depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(p) else {
        return;
    };
    for e in entries.flatten() {
        walk(&e.path(), depth + 1, budget, out);
        if *budget == 0 {
            return;
        }
    }
}

/// A user-space `dev_t` as the kernel stores it in `sb->s_dev`
/// (`MKDEV(major, minor)` = major << 20 | minor), the capture's encoding.
fn kernel_dev(dev: u64) -> i64 {
    let (major, minor) = (libc::major(dev) as i64, libc::minor(dev) as i64);
    (major << 20) | minor
}

/// Directories searched for denied executables named without a `/`.
const EXE_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// The existing executables the policy's `executables.deny` patterns name:
/// a pattern without `/` is looked up by file name in the usual binary
/// directories, one with `/` must be a literal path. Symlinks are followed
/// (the kernel runs the target: `nc` → `nc.openbsd`); `path` is the name
/// found. A copy of one of them under another name (a hard link) is then
/// known by its inode.
pub fn denied_executables(policy: &Policy) -> Vec<DeniedFile> {
    let mut seen: HashMap<(i64, i64), DeniedFile> = HashMap::new();
    let mut note = |p: &Path| {
        if let Ok(m) = std::fs::metadata(p)
            && m.is_file()
            && let Some(s) = p.to_str()
        {
            seen.entry((kernel_dev(m.dev()), m.ino() as i64))
                .or_insert(DeniedFile {
                    path: s.to_owned(),
                    dev: kernel_dev(m.dev()),
                    ino: m.ino() as i64,
                    read: false,
                    write: false,
                });
        }
    };
    for pat in &policy.executables.deny {
        if pat.by_path {
            if !pat.text.contains(['*', '?', '[', '{']) {
                note(Path::new(&pat.text));
            }
            continue;
        }
        for dir in EXE_DIRS {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten().take(MAX_ENTRIES) {
                if pat.matcher.is_match(e.file_name()) {
                    note(&e.path());
                }
            }
        }
    }
    let mut out: Vec<DeniedFile> = seen.into_values().collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The denied executables a capture noted (meta `denied_exe_inodes`).
pub fn executables_from_capture(
    cap: &Capture,
) -> Result<HashMap<(i64, i64), DeniedFile>, AuditError> {
    let raw = cap
        .run_meta()
        .map_err(AuditError::Store)?
        .denied_exe_inodes_json;
    let list: Vec<DeniedFile> = raw
        .and_then(|r| serde_json::from_str(&r).ok())
        .unwrap_or_default();
    Ok(list.into_iter().map(|f| ((f.dev, f.ino), f)).collect())
}

/// The denied files a capture noted (meta `denied_inodes`), by identity;
/// none when it noted none or the value does not parse (the capture is
/// input: a bad value never invents a finding).
pub fn from_capture(cap: &Capture) -> Result<HashMap<(i64, i64), DeniedFile>, AuditError> {
    let raw = cap
        .run_meta()
        .map_err(AuditError::Store)?
        .denied_inodes_json;
    let list: Vec<DeniedFile> = raw
        .and_then(|r| serde_json::from_str(&r).ok())
        .unwrap_or_default();
    Ok(list.into_iter().map(|f| ((f.dev, f.ino), f)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_dirs_are_the_existing_directories_covered_entirely() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join(".aws")).unwrap();
        let policy = Policy::parse(
            "[denied_paths]\nread = [\"~/.ssh/**\", \"~/.aws/cred*\", \"~/.gnupg/**\"]\n",
            "p.toml",
        )
        .unwrap();
        let h = home.display().to_string();
        assert_eq!(
            denied_dirs(&policy, Some(&h), None).unwrap(),
            vec![format!("{h}/.ssh")]
        );
    }

    #[test]
    fn write_roots_are_what_landlock_can_hold() {
        let dir = tempfile::tempdir().unwrap();
        let (home, ws, tmp) = (
            dir.path().join("home"),
            dir.path().join("ws"),
            dir.path().join("tmp"),
        );
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(home.join(".claude.json"), "{}").unwrap();
        let policy = Policy::parse(
            "[writes]\nallow = [\"${workspace}/**\", \"${tmpdir}/**\", \"/dev/null\", \
             \"/dev/pts/*\", \"/proc/self/**\", \"~/.claude/**\", \"~/.claude.json\", \
             \"~/.claude.json.*\", \"~/.codex/**\", \"~/.missing.json\", \"**/.cache/**\"]\n\
             [denied_paths]\nwrite = [\"~/.ssh/**\"]\n",
            "p.toml",
        )
        .unwrap();
        let (h, w, t) = (
            home.display().to_string(),
            ws.display().to_string(),
            tmp.display().to_string(),
        );
        let r = write_roots(&policy, Some(&h), Some(&w), Some(&t)).unwrap();
        let mut dirs = vec![
            "/dev/pts".to_string(),
            "/proc".to_string(),
            format!("{h}/.claude"),
            t.clone(),
            w.clone(),
        ];
        dirs.sort();
        assert_eq!(r.dirs, dirs);
        assert_eq!(r.missing, vec![format!("{h}/.codex")]);
        assert_eq!(
            r.files,
            vec!["/dev/null".to_string(), format!("{h}/.claude.json")]
        );
        assert_eq!(
            r.widened,
            vec![
                "/dev/pts/* as /dev/pts/**".to_string(),
                "/proc/self/** as /proc/**".to_string()
            ]
        );
        assert_eq!(
            r.not_granted,
            vec![
                format!("{h}/.claude.json.* (would allow all of {h})"),
                format!("{h}/.missing.json (does not exist when recording starts)"),
                "**/.cache/** (would allow all of /)".to_string(),
            ]
        );
        assert_eq!(r.denied, vec![format!("{h}/.ssh/**")]);
        assert_eq!(r.allowed.len(), 11);
    }

    #[test]
    fn walk_roots_are_the_literal_directories() {
        assert_eq!(walk_root("/home/u/.ssh/**"), "/home/u/.ssh");
        assert_eq!(walk_root("/etc/shadow"), "/etc/shadow");
        assert_eq!(walk_root("/home/u/.aws/cred*"), "/home/u/.aws");
        assert_eq!(walk_root("/**/id_rsa"), "/");
        assert_eq!(walk_root("/w/a[*]b/**"), "/w");
    }

    #[test]
    fn denied_files_are_found_with_their_identity() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh/sub")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "k").unwrap();
        std::fs::write(home.join(".ssh/sub/deep"), "d").unwrap();
        std::fs::write(home.join("notes"), "n").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", home.join(".ssh/link")).unwrap();
        let policy = Policy::parse(
            "[denied_paths]\nread = [\"~/.ssh/**\"]\nwrite = [\"~/.ssh/id_rsa\"]\n",
            "p.toml",
        )
        .unwrap();
        let h = home.display().to_string();
        let found = denied_files(&policy, Some(&h), None).unwrap();
        let meta = std::fs::metadata(home.join(".ssh/id_rsa")).unwrap();
        let names: Vec<(String, bool, bool)> = found
            .iter()
            .map(|f| (f.path.replace(&h, "~"), f.read, f.write))
            .collect();
        assert_eq!(
            names,
            vec![
                ("~/.ssh/id_rsa".to_string(), true, true),
                ("~/.ssh/sub/deep".to_string(), true, false),
            ]
        );
        assert_eq!(found[0].ino, meta.ino() as i64);
        assert_eq!(
            found[0].dev,
            ((libc::major(meta.dev()) as i64) << 20) | libc::minor(meta.dev()) as i64
        );
    }
}
