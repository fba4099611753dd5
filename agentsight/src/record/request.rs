//! What `record` is asked to do around the recording itself — audit the
//! capture (`--audit`), write its report (`--report`) — and the rules that
//! decide, before anything runs, whether it may: every input is read and
//! every output opened with the invoking user's rights, never root's, so a
//! policy or an output path they could not read or write fails here,
//! without a word of its content.

use std::path::PathBuf;

use crate::store::meta::key;
use crate::{
    audit::{self, Policy},
    outfile::{self, UserFile},
    privileges::{self, AsUser, FileCreds},
    report,
};

use super::{Notice, RecordError, RecordOptions, RecordOutcome};

/// A recording and what follows it.
pub struct RecordRequest {
    pub options: RecordOptions,
    /// `--audit POLICY`: the finished capture is audited with it, and the
    /// denied files' inodes are noted as recording starts.
    pub audit: Option<PathBuf>,
    pub audit_format: audit::render::Format,
    /// `--audit-output`: the findings go there instead of the caller's stderr.
    pub audit_output: Option<PathBuf>,
    /// `--report FILE`: the HTML report of the finished capture.
    pub report: Option<PathBuf>,
    /// Secret-looking values in the report are replaced (not with `--no-redact`).
    pub redact: bool,
    /// `--docker-container` names: the caller builds their session sources
    /// once [`RecordRequest::check_and_open`] has allowed them.
    pub docker_containers: Vec<String>,
    /// `--enforce` (`Some(false)`) or `--enforce=best-effort`
    /// (`Some(true)`): the policy (`--audit`'s, else the default one) is
    /// enforced for the recorded tree (`crate::enforce`).
    pub enforce: Option<bool>,
}

/// A request checked and its files opened: ready to record.
pub struct Prepared {
    pub options: RecordOptions,
    after: After,
}

/// What follows the recording: the report and the audit, with the files
/// opened for them and whose they are.
struct After {
    creds: Option<FileCreds>,
    policy: Option<Policy>,
    audit_format: audit::render::Format,
    audit_out: Option<UserFile>,
    report_out: Option<UserFile>,
    redact: bool,
}

impl RecordRequest {
    /// Checks what is asked and opens the outputs, as the invoking user.
    pub fn check_and_open(mut self) -> Result<Prepared, RecordError> {
        super::target::check_something_to_record(&self.options)?;
        super::target::check_docker_containers(&self.docker_containers, self.options.all_users)?;
        let creds = FileCreds::invoking_user();
        let as_user = AsUser::maybe(creds.as_ref())?;
        let policy = self.audit.as_deref().map(Policy::load).transpose()?;
        if let Some(p) = &policy {
            let start = denied_inodes_meta(p, self.options.user.as_deref())?;
            self.options.start_meta.extend(start);
        }
        if let Some(best_effort) = self.enforce {
            let default;
            let p = match &policy {
                Some(p) => p,
                None => {
                    default = Policy::parse("", "(default policy)")?;
                    &default
                }
            };
            let user = self.options.user.as_deref();
            let tmpdir = command_tmpdir(&self.options.env);
            self.options.enforce = Some(enforce_plan(p, user, tmpdir.as_deref(), best_effort)?);
        }
        let audit_out = self
            .audit_output
            .as_deref()
            .map(UserFile::open)
            .transpose()?;
        let report_out = self.report.as_deref().map(UserFile::open).transpose()?;
        // Each output its own file, and none the capture.
        let outputs: Vec<(&str, &UserFile)> =
            [("--audit-output", &audit_out), ("--report", &report_out)]
                .into_iter()
                .filter_map(|(flag, f)| Some((flag, f.as_ref()?)))
                .collect();
        outfile::refuse_shared(&outputs, &[("-o", &self.options.output)])?;
        drop(as_user);
        Ok(Prepared {
            options: self.options,
            after: After {
                creds,
                policy,
                audit_format: self.audit_format,
                audit_out,
                report_out,
                redact: self.redact,
            },
        })
    }
}

/// Where `~` and `${workspace}` point for `policy`: its own values, else
/// the recorded user's home and the current directory.
fn places(policy: &Policy, user: Option<&str>) -> (Option<String>, Option<String>) {
    let home = policy
        .home
        .clone()
        .or_else(|| privileges::target_user(user).ok().map(|u| u.home));
    let workspace = policy.workspace.clone().or_else(|| {
        std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string())
    });
    (home, workspace)
}

/// `--enforce`: what to mark, resolved as `audit` resolves the denied files
/// and executables (`audit::inodes`), and the rules left to the audit.
fn enforce_plan(
    policy: &Policy,
    user: Option<&str>,
    tmpdir: Option<&str>,
    best_effort: bool,
) -> Result<super::EnforceOptions, RecordError> {
    use crate::enforce::{DenialKind, Plan, Target};
    let (home, workspace) = places(policy, user);
    let (home, workspace) = (home.as_deref(), workspace.as_deref());
    let err = |e: audit::AuditError| RecordError::Other(format!("--enforce: {e}"));
    let mut plan = Plan::default();
    let d = &policy.denied_paths;
    if d.meta.enabled {
        let files = audit::inodes::denied_files(policy, home, workspace).map_err(err)?;
        plan.files
            .extend(files.into_iter().filter(|f| f.read).map(|f| Target {
                kind: DenialKind::Read,
                path: f.path,
                dev: f.dev,
                ino: f.ino,
                rule: d.meta.id.clone(),
            }));
        let dirs = audit::inodes::denied_dirs(policy, home, workspace).map_err(err)?;
        plan.dirs
            .extend(dirs.into_iter().map(|dir| (dir, d.meta.id.clone())));
    }
    let x = &policy.executables;
    if x.meta.enabled {
        plan.files.extend(
            audit::inodes::denied_executables(policy)
                .into_iter()
                .map(|f| Target {
                    kind: DenialKind::Exec,
                    path: f.path,
                    dev: f.dev,
                    ino: f.ino,
                    rule: x.meta.id.clone(),
                }),
        );
    }
    let not_built = "(not built yet)";
    let mut audited = Vec::new();
    if policy.writes.meta.enabled {
        let roots = audit::inodes::write_roots(policy, home, workspace, tmpdir).map_err(err)?;
        if d.meta.enabled && !d.write.is_empty() {
            audited.push(format!(
                "{} writes inside the allowed roots (Landlock only refuses outside them)",
                d.meta.id
            ));
        }
        let w = &policy.writes.meta.id;
        audited.extend(
            roots
                .widened
                .iter()
                .map(|g| format!("{w}: {g} (Landlock allows beneath directories)")),
        );
        audited.extend(
            roots
                .not_granted
                .iter()
                .map(|g| format!("{w}: {g}: not granted, such writes are refused")),
        );
        plan.writes = Some(crate::enforce::landlock::WritePlan {
            roots,
            rule: w.clone(),
            denied_rule: d.meta.id.clone(),
        });
    } else if d.meta.enabled && !d.write.is_empty() {
        audited.push(format!("{} writes {not_built}", d.meta.id));
    }
    if x.meta.enabled && !x.allow.is_empty() {
        audited.push(format!("{} allow list {not_built}", x.meta.id));
    }
    plan.network = policy
        .network
        .enforced()
        .map_err(|e| RecordError::Other(format!("--enforce: {e}")))?;
    if plan.network.is_some() {
        // The kernel programs see addresses; the names asked are judged
        // afterwards.
        audited.push(format!(
            "{} DNS names asked (only addresses are enforced)",
            policy.network.meta.id
        ));
    }
    Ok(super::EnforceOptions {
        best_effort,
        plan,
        audited_not_enforced: audited,
    })
}

/// The command's TMPDIR as `--env` sets it (`NAME=VALUE`, or copied from
/// the recorder's own environment), when usable.
fn command_tmpdir(env: &[crate::envreset::EnvArg]) -> Option<String> {
    use crate::envreset::EnvArg;
    let value = env.iter().rev().find_map(|e| match e {
        EnvArg::Set(k, v) if k == "TMPDIR" => Some(v.clone()),
        EnvArg::Copy(k) if k == "TMPDIR" => std::env::var_os("TMPDIR"),
        _ => None,
    })?;
    crate::envreset::usable_tmpdir(value.to_str()?)
}

/// `--audit`: the (device, inode) of the denied files that exist as
/// recording starts, as meta `denied_inodes` (an open of the same file under
/// another name, a hard link, is then a finding), and of the denied
/// executables, as `denied_exe_inodes`.
fn denied_inodes_meta(
    policy: &Policy,
    user: Option<&str>,
) -> Result<Vec<(String, String)>, RecordError> {
    let (home, workspace) = places(policy, user);
    let files = audit::inodes::denied_files(policy, home.as_deref(), workspace.as_deref())
        .map_err(|e| RecordError::Other(format!("noting the denied files' inodes: {e}")))?;
    let json = |v: Result<String, serde_json::Error>| {
        v.map_err(|e| RecordError::Other(format!("noting the denied files' inodes: {e}")))
    };
    Ok(vec![
        (
            key::DENIED_INODES.to_owned(),
            json(serde_json::to_string(&files))?,
        ),
        (
            key::DENIED_EXE_INODES.to_owned(),
            json(serde_json::to_string(&audit::inodes::denied_executables(
                policy,
            )))?,
        ),
    ])
}

impl Prepared {
    /// Records; a recording that could not start leaves no output file.
    pub fn record(self, notify: &mut dyn FnMut(Notice)) -> Result<Recorded, RecordError> {
        // On an error the outputs are dropped: their temporary files are
        // removed (as the user, see `UserFile`), the targets left as they were.
        let outcome = super::run(&self.options, notify)?;
        Ok(Recorded {
            outcome,
            capture: self.options.output,
            after: self.after,
        })
    }
}

/// A finished recording, its report and audit still to come.
pub struct Recorded {
    pub outcome: RecordOutcome,
    capture: PathBuf,
    after: After,
}

/// What the report and the audit have to say, in order, for the caller to
/// show (stderr: stdout belongs to the recorded command).
#[derive(Debug, PartialEq, Eq)]
pub enum Said {
    /// One line (the caller adds the newline).
    Line(String),
    /// The findings as rendered, whole.
    Findings(String),
}

/// The report and the audit of a finished recording.
pub struct Followed {
    pub said: Vec<Said>,
    /// The command's status, or 1 when it was 0 and the audit failed.
    pub status: i32,
}

impl Recorded {
    /// Writes the report, then audits, both read as the invoking user;
    /// `status` is the recording's (see [`RecordOutcome::exit_status`]).
    pub fn report_and_audit(mut self, status: i32) -> Result<Followed, RecordError> {
        let mut said = Vec::new();
        let report_out = self.after.report_out.take();
        if report_out.is_none() && self.after.policy.is_none() {
            return Ok(Followed { said, status });
        }
        // One open and one audit serve both the report and the findings.
        let as_user = AsUser::maybe(self.after.creds.as_ref())?;
        let cap = crate::store::Capture::open(&self.capture)?;
        said.extend(
            cap.note
                .as_ref()
                .map(|n| Said::Line(format!("agentsight: note: {n}"))),
        );
        let findings = self
            .after
            .policy
            .as_ref()
            .map(|p| audit::audit(&cap, p))
            .transpose()?;
        if let Some(f) = report_out {
            let written = report::file::write_page(&cap, findings.as_ref(), self.after.redact, f)?;
            said.push(Said::Line(format!("agentsight: {}", written.line())));
        }
        drop(as_user);
        let Some(findings) = findings else {
            return Ok(Followed { said, status });
        };
        let text = audit::render::rendered(&findings, self.after.audit_format)
            .map_err(|e| RecordError::Other(e.to_string()))?;
        let to_file = self.after.audit_out.is_some();
        match self.after.audit_out.take() {
            Some(f) => f.replace_with(text.as_bytes())?,
            None => said.push(Said::Findings(text)),
        }
        if to_file || self.after.audit_format != audit::render::Format::Text {
            said.push(Said::Line(audit::render::summary_line(&findings)));
        }
        let status = if status == 0 && !findings.passed() {
            1
        } else {
            status
        };
        Ok(Followed { said, status })
    }
}
