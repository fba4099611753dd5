//! Typed errors of the native sessions layer.

use std::path::PathBuf;

/// Errors returned by discovery and parsing.
///
/// Per-line problems inside a transcript are not errors: they are counted in
/// [`super::ParseStats`] so that one bad line never hides a whole session.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error(
        "session id prefix {prefix:?} is ambiguous: it matches {count} sessions ({ids}{}); give more of the id",
        if *count > 5 { ", …" } else { "" }
    )]
    AmbiguousId {
        prefix: String,
        count: usize,
        ids: String,
    },
    #[error("{path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("{path}: not a {provider} transcript ({reason})")]
    Format {
        path: PathBuf,
        provider: &'static str,
        reason: String,
    },
    #[error("sqlite {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("no home directory could be determined (set HOME or pass --home)")]
    NoHome,
    #[error(
        "unknown provider {0:?} (expected claude, codex, gemini, cursor, copilot, opencode or qwen)"
    )]
    UnknownProvider(String),
}

impl SessionError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
