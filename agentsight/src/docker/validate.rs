//! Inputs that end up on a `docker` command line, checked before any docker
//! call: a container name is data, never an option, and a container path is
//! absolute and normalized.

/// Longest container name or ID.
pub const MAX_NAME: usize = 128;
/// Longest container path.
pub const MAX_PATH: usize = 4096;

/// Why a name or path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInput {
    #[error("container name {0:?} is empty or longer than 128 bytes")]
    NameLength(String),
    #[error(
        "container name {0:?} must start with an ASCII letter or digit and hold only letters, digits, '_', '.' and '-'"
    )]
    NameChars(String),
    #[error("container path {0:?} is not absolute")]
    PathNotAbsolute(String),
    #[error("container path of {0} bytes is longer than 4096 bytes")]
    PathLength(usize),
    #[error("container path {0:?} holds a NUL byte")]
    PathNul(String),
    #[error("container path {0:?} holds a '.' or '..' component")]
    PathDots(String),
}

/// A container name or ID that passed [`ContainerName::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerName(String);

impl ContainerName {
    /// 1–128 bytes; the first an ASCII letter or digit, the others letters,
    /// digits, `_`, `.` or `-`.
    pub fn parse(s: &str) -> Result<Self, InvalidInput> {
        let b = s.as_bytes();
        if b.is_empty() || b.len() > MAX_NAME {
            return Err(InvalidInput::NameLength(s.to_string()));
        }
        let first_ok = b[0].is_ascii_alphanumeric();
        let rest_ok = b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
        if !(first_ok && rest_ok) {
            return Err(InvalidInput::NameChars(s.to_string()));
        }
        Ok(ContainerName(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ContainerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A path inside the container (workspace, home): absolute, at most 4096
/// bytes, no NUL, no `.` or `..` component.
pub fn validate_container_path(p: &str) -> Result<(), InvalidInput> {
    if p.len() > MAX_PATH {
        return Err(InvalidInput::PathLength(p.len()));
    }
    if p.contains('\0') {
        return Err(InvalidInput::PathNul(p.to_string()));
    }
    if !p.starts_with('/') {
        return Err(InvalidInput::PathNotAbsolute(p.to_string()));
    }
    if p.split('/').any(|c| c == "." || c == "..") {
        return Err(InvalidInput::PathDots(p.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_refused() {
        let long = "a".repeat(129);
        let cases = [
            (
                "--privileged",
                InvalidInput::NameChars("--privileged".into()),
            ),
            ("a/b", InvalidInput::NameChars("a/b".into())),
            ("a b", InvalidInput::NameChars("a b".into())),
            ("", InvalidInput::NameLength(String::new())),
            (long.as_str(), InvalidInput::NameLength(long.clone())),
            ("_x", InvalidInput::NameChars("_x".into())),
            (".x", InvalidInput::NameChars(".x".into())),
            ("a\nb", InvalidInput::NameChars("a\nb".into())),
            ("é", InvalidInput::NameChars("é".into())),
        ];
        for (name, want) in cases {
            assert_eq!(ContainerName::parse(name), Err(want), "{name:?}");
        }
    }

    #[test]
    fn ordinary_names_and_ids_are_kept() {
        let max = "b".repeat(128);
        for name in [
            "dev",
            "ebpfos-dev",
            "frontend_dev.1",
            "0a1b2c3d4e5f",
            "A-b_c.d",
            max.as_str(),
        ] {
            assert_eq!(
                ContainerName::parse(name).map(|n| n.as_str().to_string()),
                Ok(name.to_string())
            );
        }
    }

    #[test]
    fn paths_must_be_absolute_and_normalized() {
        for ok in ["/", "/home/vscode", "/workspaces/my.repo", "/a/.b/c..d/"] {
            assert_eq!(validate_container_path(ok), Ok(()), "{ok}");
        }
        let long = format!("/{}", "p".repeat(4096));
        let cases = [
            ("home/dev", InvalidInput::PathNotAbsolute("home/dev".into())),
            ("", InvalidInput::PathNotAbsolute(String::new())),
            (
                "/workspaces/../host",
                InvalidInput::PathDots("/workspaces/../host".into()),
            ),
            ("/a/./b", InvalidInput::PathDots("/a/./b".into())),
            ("/a/..", InvalidInput::PathDots("/a/..".into())),
            ("/a\0b", InvalidInput::PathNul("/a\0b".into())),
            (long.as_str(), InvalidInput::PathLength(4097)),
        ];
        for (p, want) in cases {
            assert_eq!(validate_container_path(p), Err(want), "{p:?}");
        }
        let max = format!("/{}", "p".repeat(4095));
        assert_eq!(validate_container_path(&max), Ok(()));
    }
}
