//! The recorded command's environment, built like sudo's `env_reset`: the
//! recorder (root) does not hand its own environment to the user's command.
//! Only terminal and locale variables are kept, the identity variables are
//! set for the user, `PATH` is a fixed safe default, and the user adds what
//! they need explicitly with `--env NAME` / `--env NAME=VALUE`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Kept from the recorder's environment when present (plus every `LC_*`).
pub const KEPT: &[&str] = &[
    "TERM",
    "COLORTERM",
    "COLORS",
    "LS_COLORS",
    "NO_COLOR",
    "COLUMNS",
    "LINES",
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "TZ",
    "LANG",
    "LANGUAGE",
];

/// `PATH` of the command unless `--env PATH…` says otherwise: the
/// unprivileged part of sudo's `secure_path` (root's own PATH may start with
/// directories of root's).
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// One `--env` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvArg {
    /// `--env NAME`: copy NAME from the recorder's environment (nothing if unset).
    Copy(OsString),
    /// `--env NAME=VALUE`.
    Set(OsString, OsString),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad --env {0:?}: use NAME or NAME=VALUE (NAME not empty, no NUL)")]
pub struct BadEnvArg(pub String);

impl EnvArg {
    pub fn parse(s: &OsStr) -> Result<Self, BadEnvArg> {
        let b = s.as_bytes();
        let bad = || BadEnvArg(s.to_string_lossy().into_owned());
        if b.contains(&0) {
            return Err(bad());
        }
        match b.iter().position(|&c| c == b'=') {
            Some(0) => Err(bad()),
            Some(i) => Ok(EnvArg::Set(
                OsStr::from_bytes(&b[..i]).to_owned(),
                OsStr::from_bytes(&b[i + 1..]).to_owned(),
            )),
            None if b.is_empty() => Err(bad()),
            None => Ok(EnvArg::Copy(s.to_owned())),
        }
    }
}

/// Who the command runs as, for the variables that are always set.
pub struct Identity<'a> {
    pub name: &'a str,
    pub home: &'a str,
    pub shell: &'a str,
}

fn kept(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b.starts_with(b"LC_") || KEPT.iter().any(|k| k.as_bytes() == b)
}

/// The command's whole environment, sorted by name. `recorder` is the
/// recorder's own environment (`std::env::vars_os()`).
pub fn build(
    id: &Identity<'_>,
    recorder: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[EnvArg],
) -> Vec<(OsString, OsString)> {
    let recorder: Vec<(OsString, OsString)> = recorder.into_iter().collect();
    let mut env: std::collections::BTreeMap<OsString, OsString> =
        recorder.iter().filter(|(k, _)| kept(k)).cloned().collect();
    for (k, v) in [
        ("HOME", id.home),
        ("USER", id.name),
        ("LOGNAME", id.name),
        ("SHELL", id.shell),
        ("PATH", DEFAULT_PATH),
    ] {
        env.insert(k.into(), v.into());
    }
    for e in extra {
        match e {
            EnvArg::Set(k, v) => {
                env.insert(k.clone(), v.clone());
            }
            EnvArg::Copy(k) => {
                if let Some((_, v)) = recorder.iter().find(|(n, _)| n == k) {
                    env.insert(k.clone(), v.clone());
                }
            }
        }
    }
    env.into_iter().collect()
}

/// A TMPDIR worth allowing: absolute, without `.`/`..` components, not `/`;
/// returned normalised (no repeated or trailing `/`).
pub fn usable_tmpdir(t: &str) -> Option<String> {
    if !t.starts_with('/') {
        return None;
    }
    let parts: Vec<&str> = t.split('/').filter(|c| !c.is_empty()).collect();
    if parts.is_empty() || parts.iter().any(|c| *c == "." || *c == "..") {
        return None;
    }
    Some(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn only_the_documented_set_reaches_the_command() {
        let id = Identity {
            name: "alice",
            home: "/home/alice",
            shell: "/bin/bash",
        };
        let root = os(&[
            ("PATH", "/root/bin:/usr/sbin:/usr/bin"),
            ("HOME", "/root"),
            ("AWS_SECRET_ACCESS_KEY", "s3cret"),
            ("LD_PRELOAD", "/root/evil.so"),
            ("TERM", "xterm-256color"),
            ("LC_ALL", "C.UTF-8"),
            ("LANG", "en_US.UTF-8"),
            ("SUDO_UID", "1000"),
            ("FOO", "bar"),
            ("LCX", "no"),
        ]);
        let extra = vec![
            EnvArg::parse(OsStr::new("FOO")).unwrap(),
            EnvArg::parse(OsStr::new("X=1=2")).unwrap(),
            EnvArg::parse(OsStr::new("MISSING")).unwrap(),
        ];
        let env = build(&id, root, &extra);
        assert_eq!(
            env,
            os(&[
                ("FOO", "bar"),
                ("HOME", "/home/alice"),
                ("LANG", "en_US.UTF-8"),
                ("LC_ALL", "C.UTF-8"),
                ("LOGNAME", "alice"),
                ("PATH", DEFAULT_PATH),
                ("SHELL", "/bin/bash"),
                ("TERM", "xterm-256color"),
                ("USER", "alice"),
                ("X", "1=2"),
            ])
        );
    }

    #[test]
    fn env_arguments_parse() {
        assert_eq!(
            EnvArg::parse(OsStr::new("PATH=/opt/bin")),
            Ok(EnvArg::Set("PATH".into(), "/opt/bin".into()))
        );
        assert_eq!(
            EnvArg::parse(OsStr::new("E=")),
            Ok(EnvArg::Set("E".into(), "".into()))
        );
        assert!(EnvArg::parse(OsStr::new("=x")).is_err());
        assert!(EnvArg::parse(OsStr::new("")).is_err());
    }
}
