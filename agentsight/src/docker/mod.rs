//! The docker client as agentsight drives it: names and paths checked
//! before any call (`validate`), each `docker` run bounded (10 s) with its
//! output read on threads, `docker inspect` parsed, and the identity a
//! process started with `docker exec` should have in the container
//! (`identity`, from the inspect document and two bounded lookups).
//! Used by `record --container` (capture) and the container bridge.

pub mod identity;
pub mod validate;

use std::ffi::OsString;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use identity::{ContainerLookups, Identity, IdentityError, bridge_argv, identity_from_inspect};
pub use validate::{ContainerName, InvalidInput, validate_container_path};

/// Each `docker inspect` / auxiliary `docker exec`.
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(10);
/// Most output read from a helper (an inspect document is a few KiB).
const MAX_OUTPUT: u64 = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DockerError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("running {program}: {message}")]
    Run { program: String, message: String },
    #[error("`{command}` did not finish within {secs} s")]
    Timeout { command: String, secs: f64 },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("`docker inspect {0}` did not give JSON: {1}")]
    BadInspect(String, String),
    #[error("container {name}: {source}")]
    Identity { name: String, source: IdentityError },
}

/// What a finished helper gave.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// The docker client to run (`docker`, or another path) and its bound.
#[derive(Debug, Clone)]
pub struct Docker {
    pub program: OsString,
    pub timeout: Duration,
}

impl Docker {
    pub fn new(program: impl Into<OsString>) -> Self {
        Docker {
            program: program.into(),
            timeout: HELPER_TIMEOUT,
        }
    }

    /// Runs `docker ARGS` to completion within the bound (killed after it).
    pub fn run(&self, args: &[&str]) -> Result<Ran, DockerError> {
        let command = format!("docker {}", args.join(" "));
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| DockerError::Run {
                program: self.program.to_string_lossy().into_owned(),
                message: e.to_string(),
            })?;
        // Readers on threads, so a large output never blocks the child; they
        // report through channels, so a descendant that keeps a pipe open after
        // docker exits cannot hold us past the deadline either.
        let out = drain(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err = drain(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let end = Instant::now() + self.timeout;
        let timeout = || DockerError::Timeout {
            command: command.clone(),
            secs: self.timeout.as_secs_f64(),
        };
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(timeout());
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(DockerError::Run {
                        program: command,
                        message: e.to_string(),
                    });
                }
            }
        };
        let left = || end.saturating_duration_since(Instant::now());
        let stdout = out.recv_timeout(left()).map_err(|_| timeout())?;
        let stderr = err.recv_timeout(left()).map_err(|_| timeout())?;
        Ok(Ran {
            code: status.code(),
            stdout,
            stderr,
        })
    }

    /// `docker inspect NAME`, parsed.
    pub fn inspect(&self, name: &ContainerName) -> Result<Value, DockerError> {
        // A container only: an image of the same name must not lend its Config.
        let ran = self.run(&["inspect", "--type", "container", "--", name.as_str()])?;
        if ran.code != Some(0) {
            return Err(DockerError::Failed {
                command: format!("docker inspect --type container -- {name}"),
                status: status_text(ran.code),
                stderr: one_line(&ran.stderr),
            });
        }
        serde_json::from_str(&ran.stdout)
            .map_err(|e| DockerError::BadInspect(name.to_string(), e.to_string()))
    }

    /// The identity the bridge runs with in `name` (§9).
    pub fn identity(&self, name: &ContainerName) -> Result<Identity, DockerError> {
        let inspect = self.inspect(name)?;
        let mut lookups = ExecLookups { docker: self, name };
        identity_from_inspect(&inspect, &mut lookups).map_err(|source| DockerError::Identity {
            name: name.to_string(),
            source,
        })
    }
}

/// Docker's stderr as one line (errors are one line): its lines joined
/// with "; ".
fn one_line(stderr: &str) -> String {
    stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

fn status_text(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"))
}

/// The auxiliary lookups as bounded `docker exec NAME …` runs.
struct ExecLookups<'a> {
    docker: &'a Docker,
    name: &'a ContainerName,
}

impl ExecLookups<'_> {
    /// Exit 0: the output; exit `absent`: no answer; else an error.
    fn exec(&self, args: &[&str], absent: &[i32]) -> Result<Option<String>, String> {
        let mut all = vec!["exec", self.name.as_str()];
        all.extend_from_slice(args);
        let ran = self.docker.run(&all).map_err(|e| e.to_string())?;
        match ran.code {
            Some(0) => Ok(Some(ran.stdout)),
            Some(c) if absent.contains(&c) => Ok(None),
            c => Err(format!(
                "`docker {}` failed ({}): {}",
                all.join(" "),
                status_text(c),
                one_line(&ran.stderr)
            )),
        }
    }
}

impl ContainerLookups for ExecLookups<'_> {
    fn home_owner(&mut self, home: &str) -> Result<Option<String>, String> {
        // stat exits 1 when the home does not exist: the owner is unknown.
        self.exec(&["stat", "-c", "%u", home], &[1])
    }

    fn passwd_entry(&mut self, user: &str) -> Result<Option<String>, String> {
        // The user comes from the image: it must not read as getent's option.
        if user.starts_with('-') {
            return Err(format!("user name {user:?} starts with '-'"));
        }
        // getent exits 2 when the key is not in the database.
        self.exec(&["getent", "passwd", user], &[2])
    }
}

/// Reads a pipe to its end (at most `MAX_OUTPUT`) on its own thread and sends
/// the text once; the receiver decides how long it will wait.
fn drain(pipe: Option<Box<dyn Read + Send>>) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = pipe {
            let _ = p.take(MAX_OUTPUT).read_to_end(&mut buf);
        }
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in `docker` written as a script: the bound is about the child
    /// process and its pipes, whatever the program is.
    fn fake_docker(dir: &std::path::Path, body: &str) -> Docker {
        let path = dir.join("docker");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Docker {
            program: path.into_os_string(),
            timeout: Duration::from_millis(800),
        }
    }

    #[test]
    fn output_and_status_of_a_finished_helper() {
        let dir = tempfile::tempdir().unwrap();
        let docker = fake_docker(dir.path(), "echo out; echo err >&2; exit 3");
        let ran = docker.run(&["inspect"]).unwrap();
        assert_eq!(ran.code, Some(3));
        assert_eq!(ran.stdout, "out\n");
        assert_eq!(ran.stderr, "err\n");
    }

    #[test]
    fn a_descendant_holding_the_pipe_open_cannot_outlast_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        // docker exits at once; its background child keeps stdout open for 30 s.
        let docker = fake_docker(dir.path(), "sleep 30 & echo started; exit 0");
        let t = Instant::now();
        let got = docker.run(&["exec", "x"]);
        assert!(
            matches!(got, Err(DockerError::Timeout { ref command, .. }) if command == "docker exec x"),
            "{:?}",
            got.as_ref().map(|r| r.code)
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}
