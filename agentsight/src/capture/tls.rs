//! TLS plaintext by symbol, the user-space half: which ELF files mapped by
//! the tracked processes export the captured functions (`.dynsym`, which
//! survives stripping), attaching the probes once per file (the kernel
//! programs keep to tracked processes), and what each recorded process
//! could not have decrypted.
//!
//! Library files are attached once per (device, inode): a uprobe lives on
//! the file, so every later process mapping it is covered from its first
//! call. The common system libraries are attached at start ([`system_candidates`]),
//! because a short command (`curl`) can finish its TLS before a scan of its
//! maps would find them; the per-process scan finds the rest (a node of
//! its own, a bundled libssl) and says what was found for each process.

use std::{
    collections::{BTreeSet, HashMap},
    fs::File,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use agentsight_common::tls_fn;
use object::{Object, ObjectSection, ObjectSymbol, ReadCache, read::elf::ElfFile64};

use super::loader::Probes;

/// What the capture could decrypt of one recorded process (stored as a
/// `tls_processes` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProcessNote {
    pub pid: u32,
    /// `/proc/PID/exe` when it was read.
    pub exe: Option<String>,
    /// Mapped files of the process that export the captured functions (the
    /// probes are on them); empty: nothing of this process is decrypted.
    pub libraries: Vec<String>,
    /// "TLS decrypted through …" or "TLS not decrypted: no supported library in EXE".
    pub note: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a readable 64-bit ELF file ({reason})")]
    Elf { path: String, reason: String },
}

/// The captured functions `path` exports in `.dynsym`, each with its file
/// offset (where the uprobe goes). Empty: the file exports none.
pub fn exports(path: &Path) -> Result<Vec<(u32, u64)>, TlsError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| TlsError::Io {
        path: shown.clone(),
        source,
    })?;
    // Read on demand: node is ~100 MB, its dynamic symbols a small part.
    let cache = ReadCache::new(file);
    let elf_err = |e: object::Error| TlsError::Elf {
        path: shown.clone(),
        reason: e.to_string(),
    };
    let elf = ElfFile64::<object::Endianness, _>::parse(&cache).map_err(elf_err)?;
    let mut out: Vec<(u32, u64)> = Vec::new();
    for sym in elf.dynamic_symbols() {
        if !sym.is_definition() {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        let Some(&(func, _)) = tls_fn::SYMBOLS.iter().find(|(_, s)| *s == name) else {
            continue;
        };
        if out.iter().any(|(f, _)| *f == func) {
            continue;
        }
        let Some(offset) = file_offset(&elf, &sym) else {
            continue;
        };
        out.push((func, offset));
    }
    out.sort_unstable();
    Ok(out)
}

/// A symbol's address as an offset in its file: through its section.
fn file_offset<'d, R: object::ReadRef<'d>>(
    elf: &ElfFile64<'d, object::Endianness, R>,
    sym: &object::read::elf::ElfSymbol64<'d, '_, object::Endianness, R>,
) -> Option<u64> {
    let section = elf.section_by_index(sym.section_index()?).ok()?;
    let (start, _) = section.file_range()?;
    sym.address()
        .checked_sub(section.address())?
        .checked_add(start)
}

/// Shared libraries attached at start when present: the system's OpenSSL 3
/// and GnuTLS (curl, python, git's https helper load these).
const SYSTEM_LIBRARIES: [&str; 2] = ["libssl.so.3", "libgnutls.so.30"];
const LIBRARY_DIRS: [&str; 5] = [
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
];

/// The system TLS libraries and every `node` on `path_var` (a node build
/// exports OpenSSL's functions itself).
pub fn system_candidates(path_var: Option<&str>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in SYSTEM_LIBRARIES {
        if let Some(p) = LIBRARY_DIRS
            .iter()
            .map(|d| Path::new(d).join(lib))
            .find(|p| p.exists())
        {
            out.push(p);
        }
    }
    for dir in path_var
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
    {
        let node = Path::new(dir).join("node");
        if let Ok(real) = node.canonicalize()
            && !out.contains(&real)
        {
            out.push(real);
        }
    }
    out
}

/// A file that exports the functions: its index among the probed files
/// when the probes are on it.
struct FileState {
    index: Option<u32>,
}

/// What one recorded process maps, as far as the scans saw.
struct ProcTls {
    exe: Option<String>,
    libraries: BTreeSet<String>,
    /// The probed files (indices) the scans saw mapped: a call the kernel
    /// saw into another one was made by an image no scan saw.
    mapped: BTreeSet<u32>,
    /// A scan saw the process past its dynamic loader's work (libraries
    /// mapped, or no loader at all): an empty `libraries` then means none.
    loaded: bool,
    born: Instant,
    last_scan: Instant,
}

impl ProcTls {
    fn new(now: Instant) -> Self {
        Self {
            exe: None,
            libraries: BTreeSet::new(),
            mapped: BTreeSet::new(),
            loaded: false,
            born: now,
            last_scan: now,
        }
    }
}

/// Scans are frequent while a process is young (it is still loading its
/// libraries), then rare.
const YOUNG: Duration = Duration::from_secs(1);
const YOUNG_RESCAN: Duration = Duration::from_millis(20);
const OLD_RESCAN: Duration = Duration::from_secs(2);

/// The attach state of one recording.
#[derive(Default)]
pub struct TlsTracker {
    /// (dev, ino) → the file, when it exports something; None: it exports
    /// nothing (or cannot be read), looked at once.
    files: HashMap<(u64, u64), Option<FileState>>,
    /// The probed files by index (the attach cookie's high half), as shown.
    probed: Vec<String>,
    procs: HashMap<u32, ProcTls>,
    /// Attach failures, said once per file.
    pub errors: Vec<String>,
}

impl TlsTracker {
    /// Looks at `path` once (by its inode) and attaches the probes when it
    /// exports the functions. Returns whether the file carries probes.
    pub fn consider(&mut self, probes: &mut Probes, path: &Path, shown: &str) -> bool {
        self.probe(probes, path, shown).is_some()
    }

    /// [`Self::consider`], giving the file's index among the probed files.
    fn probe(&mut self, probes: &mut Probes, path: &Path, shown: &str) -> Option<u32> {
        let meta = std::fs::metadata(path).ok()?;
        let key = (meta.dev(), meta.ino());
        if let Some(known) = self.files.get(&key) {
            return known.as_ref().and_then(|f| f.index);
        }
        let state = match exports(path) {
            Ok(funcs) if funcs.is_empty() => None,
            Ok(funcs) => {
                let next = u32::try_from(self.probed.len()).unwrap_or(u32::MAX);
                let index = match probes.attach_tls(path, &funcs, next) {
                    Ok(()) => {
                        tracing::info!("TLS probes on {shown} ({} functions)", funcs.len());
                        self.probed.push(shown.to_owned());
                        Some(next)
                    }
                    Err(e) => {
                        tracing::warn!("TLS probes on {shown}: {e}");
                        self.errors.push(format!("{shown}: {e}"));
                        None
                    }
                };
                Some(FileState { index })
            }
            Err(e) => {
                tracing::debug!("not a TLS library: {e}");
                None
            }
        };
        let index = state.as_ref().and_then(|f| f.index);
        self.files.insert(key, state);
        index
    }

    /// One pass over the tracked processes: new ones and young ones are
    /// scanned; those no longer tracked (exited) get their note.
    pub fn tick(&mut self, probes: &mut Probes, tracked: &[u32]) -> Vec<TlsProcessNote> {
        let now = Instant::now();
        let mut out = Vec::new();
        for &pid in tracked {
            let due = match self.procs.get(&pid) {
                None => true,
                Some(p) => {
                    let every = if now.duration_since(p.born) < YOUNG {
                        YOUNG_RESCAN
                    } else {
                        OLD_RESCAN
                    };
                    now.duration_since(p.last_scan) >= every
                }
            };
            if due && let Some(ended) = self.scan(probes, pid, now) {
                out.push(ended);
            }
        }
        let gone: Vec<u32> = self
            .procs
            .keys()
            .copied()
            .filter(|p| !tracked.contains(p))
            .collect();
        for pid in gone {
            if let Some(p) = self.procs.remove(&pid) {
                out.push(self.ended(probes, pid, p));
            }
        }
        out
    }

    /// The notes of every process still known (at the end of the run), and
    /// of those that called a probed library but ended before any scan.
    pub fn finish(mut self, probes: &mut Probes) -> Vec<TlsProcessNote> {
        let procs = std::mem::take(&mut self.procs);
        let mut out: Vec<TlsProcessNote> = procs
            .into_iter()
            .map(|(pid, p)| self.ended(probes, pid, p))
            .collect();
        match probes.drain_tls_seen() {
            Ok(unscanned) => out.extend(unscanned.into_iter().map(|(pid, files)| {
                let mut p = ProcTls::new(Instant::now());
                p.libraries = self.named(&files);
                note(pid, p)
            })),
            Err(e) => tracing::warn!("TLS calls of unscanned processes not read: {e}"),
        }
        out.sort_by_key(|n| n.pid);
        out
    }

    /// A process's note: the libraries its scans found and those the kernel
    /// saw it call (a short process can finish its TLS between two scans).
    /// A process that called a library no scan saw it map exec'd after its
    /// last scan (a `sh -c` child scanned before it became `curl`): its
    /// executable is then left unnamed here, and the store names it by
    /// the executable its last exec recorded.
    fn ended(&self, probes: &mut Probes, pid: u32, mut p: ProcTls) -> TlsProcessNote {
        let seen = self.take_seen(probes, pid);
        if seen.iter().any(|i| !p.mapped.contains(i)) {
            p.exe = None;
        }
        p.libraries.extend(self.named(&seen));
        note(pid, p)
    }

    /// The probed files the kernel saw the process call, forgotten there.
    fn take_seen(&self, probes: &mut Probes, pid: u32) -> Vec<u32> {
        let files = u32::try_from(self.probed.len()).unwrap_or(u32::MAX);
        probes.take_tls_seen(pid, files).unwrap_or_else(|e| {
            tracing::warn!(pid, "TLS calls of the process not read: {e}");
            Vec::new()
        })
    }

    fn named(&self, files: &[u32]) -> BTreeSet<String> {
        files
            .iter()
            .filter_map(|&i| self.probed.get(i as usize).cloned())
            .collect()
    }

    /// Reads the process's executable and mapped files; an exec since the
    /// last scan (another executable) ends the old image's note first.
    fn scan(&mut self, probes: &mut Probes, pid: u32, now: Instant) -> Option<TlsProcessNote> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(|p| p.display().to_string());
        let mut ended = None;
        let mut new_image_calls = BTreeSet::new();
        if let Some(p) = self.procs.get(&pid)
            && p.exe.is_some()
            && exe.is_some()
            && p.exe != exe
            && let Some(mut old) = self.procs.remove(&pid)
        {
            // The kernel's note is per process: of the calls made so far,
            // those into files the old image mapped are credited to it, the
            // others to the new image.
            let (old_calls, new_calls): (Vec<u32>, Vec<u32>) = self
                .take_seen(probes, pid)
                .into_iter()
                .partition(|i| old.mapped.contains(i));
            old.libraries.extend(self.named(&old_calls));
            new_image_calls = self.named(&new_calls);
            ended = Some(note(pid, old));
        }
        let files = mapped_files(pid);
        let loaded = past_loader(&files, exe.as_deref());
        let mut found = Vec::new();
        for f in files.iter().chain(exe.iter()) {
            // The process's own view of the path (its mount namespace).
            let inside = PathBuf::from(format!("/proc/{pid}/root{f}"));
            if let Some(index) = self.probe(probes, &inside, f) {
                found.push((index, f.clone()));
            }
        }
        let p = self.procs.entry(pid).or_insert_with(|| ProcTls::new(now));
        p.loaded |= loaded;
        if p.exe.is_none() {
            p.exe = exe;
        }
        for (index, f) in found {
            p.mapped.insert(index);
            p.libraries.insert(f);
        }
        p.libraries.extend(new_image_calls);
        p.last_scan = now;
        ended
    }
}

/// Whether a process's executable mappings show its dynamic loader done: a
/// dynamic executable maps the loader (`ld-linux…`) at exec and its
/// libraries after; a static one never maps a loader. A process seen only
/// with its executable and the loader may yet have loaded anything.
fn past_loader(files: &[String], exe: Option<&str>) -> bool {
    let is_loader = |f: &str| {
        Path::new(f)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("ld-linux") || n.starts_with("ld-musl"))
    };
    !files.iter().any(|f| is_loader(f))
        || files
            .iter()
            .any(|f| !is_loader(f) && Some(f.as_str()) != exe)
}

/// The distinct files a process maps executable (its code: the executable
/// and its libraries), from `/proc/PID/maps`.
fn mapped_files(pid: u32) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    parse_maps(&text)
}

/// `/proc/PID/maps` lines → the distinct paths of executable mappings
/// (`r-xp … /usr/lib/x86_64-linux-gnu/libssl.so.3`); deleted files and
/// pseudo-files (`[vdso]`) are left out.
pub fn parse_maps(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let mut fields = line.splitn(6, ' ');
        let perms = fields.nth(1).unwrap_or_default();
        let path = fields.nth(3).unwrap_or_default().trim_start();
        if !perms.contains('x') || !path.starts_with('/') || path.ends_with(" (deleted)") {
            continue;
        }
        if !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    out
}

/// How a note names a process that ended before any scan read its
/// executable; the store puts the executable its exec recorded in place.
pub fn unread_exe(pid: u32) -> String {
    format!("pid {pid} (executable not read)")
}

fn note(pid: u32, p: ProcTls) -> TlsProcessNote {
    let libraries: Vec<String> = p.libraries.into_iter().collect();
    let exe_shown = p.exe.clone().unwrap_or_else(|| unread_exe(pid));
    let note = if libraries.is_empty() && !p.loaded {
        format!("TLS not decrypted: {exe_shown} ended before its libraries were listed")
    } else if libraries.is_empty() {
        format!("TLS not decrypted: no supported library in {exe_shown}")
    } else {
        format!("TLS decrypted through {}", libraries.join(", "))
    };
    TlsProcessNote {
        pid,
        exe: p.exe,
        libraries,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_give_each_executable_file_once() {
        let text = "\
55d0a000-55d0b000 r--p 00000000 fe:01 123 /usr/bin/curl
55d0b000-55d0c000 r-xp 00001000 fe:01 123 /usr/bin/curl
7f00-7f01 r-xp 00000000 fe:01 456                        /usr/lib/x86_64-linux-gnu/libssl.so.3
7f01-7f02 r-xp 00000000 fe:01 456                        /usr/lib/x86_64-linux-gnu/libssl.so.3
7f02-7f03 r-xp 00000000 00:00 0                          [vdso]
7f03-7f04 r-xp 00000000 fe:01 789                        /tmp/x (deleted)
7f04-7f05 rw-p 00000000 00:00 0 
7f05-7f06 r-xp 00000000 fe:01 790                        /opt/with space/lib.so
";
        assert_eq!(
            parse_maps(text),
            vec![
                "/usr/bin/curl".to_owned(),
                "/usr/lib/x86_64-linux-gnu/libssl.so.3".to_owned(),
                "/opt/with space/lib.so".to_owned(),
            ]
        );
    }

    /// The machine's OpenSSL 3 exports all four functions; libc none
    /// (skipped where the library is not installed).
    #[test]
    fn libssl_exports_the_four_openssl_functions() {
        let Some(ssl) = LIBRARY_DIRS
            .iter()
            .map(|d| Path::new(d).join("libssl.so.3"))
            .find(|p| p.exists())
        else {
            eprintln!("skipped: no libssl.so.3");
            return;
        };
        let funcs: Vec<u32> = exports(&ssl).unwrap().iter().map(|(f, _)| *f).collect();
        assert_eq!(
            funcs,
            vec![
                tls_fn::SSL_WRITE,
                tls_fn::SSL_READ,
                tls_fn::SSL_WRITE_EX,
                tls_fn::SSL_READ_EX
            ]
        );
        let libc = LIBRARY_DIRS
            .iter()
            .map(|d| Path::new(d).join("libc.so.6"))
            .find(|p| p.exists())
            .unwrap();
        assert_eq!(exports(&libc).unwrap(), vec![]);
    }

    #[test]
    fn a_process_without_a_library_gets_the_not_decrypted_note() {
        let now = Instant::now();
        let n = note(
            42,
            ProcTls {
                exe: Some("/usr/local/bin/bun".into()),
                libraries: BTreeSet::new(),
                mapped: BTreeSet::new(),
                loaded: true,
                born: now,
                last_scan: now,
            },
        );
        assert_eq!(
            n.note,
            "TLS not decrypted: no supported library in /usr/local/bin/bun"
        );
        assert!(n.libraries.is_empty());
    }

    /// A dynamic executable seen with only itself and its loader mapped has
    /// not loaded its libraries yet: no verdict on them; a static one (no
    /// loader) and one with libraries mapped are past that point.
    #[test]
    fn a_process_caught_before_its_libraries_gets_no_false_verdict() {
        let exe = "/usr/bin/curl";
        let early = vec![
            exe.to_owned(),
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2".to_owned(),
        ];
        assert!(!past_loader(&early, Some(exe)));
        let mut later = early.clone();
        later.push("/usr/lib/x86_64-linux-gnu/libc.so.6".to_owned());
        assert!(past_loader(&later, Some(exe)));
        assert!(past_loader(
            &["/tmp/sleeper".to_owned()],
            Some("/tmp/sleeper")
        ));
        let now = Instant::now();
        let n = note(
            7,
            ProcTls {
                exe: Some(exe.into()),
                libraries: BTreeSet::new(),
                mapped: BTreeSet::new(),
                loaded: false,
                born: now,
                last_scan: now,
            },
        );
        assert_eq!(
            n.note,
            "TLS not decrypted: /usr/bin/curl ended before its libraries were listed"
        );
    }
}
