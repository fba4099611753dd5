//! The audit policy: a TOML file parsed into checked rules.
//!
//! Everything a policy can say is listed in `docs/audit.md`. Parsing is
//! strict on purpose: a CI gate that silently ignored a misspelt rule or a
//! glob it could not compile would pass runs it was meant to fail, so every
//! such mistake is an error naming the file, the line and the reason.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    ops::Range,
    path::Path,
};

use serde::Deserialize;
use toml::Spanned;

/// A finding's level, as SARIF and the exit status use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// How a correlate-derived rule reacts: `warn` → warning, `fail` → error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Warn,
    Fail,
    Ignore,
}

impl Mode {
    pub fn severity(self) -> Option<Severity> {
        match self {
            Mode::Warn => Some(Severity::Warning),
            Mode::Fail => Some(Severity::Error),
            Mode::Ignore => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}:{line}: {reason}")]
    Invalid {
        path: String,
        line: usize,
        reason: String,
    },
}

/// A path glob as written (`~`, `${workspace}` and `${tmpdir}` still unexpanded), with the
/// line it came from for later errors.
#[derive(Debug, Clone)]
pub struct PathPattern {
    pub text: String,
    pub line: usize,
}

/// Which rule fired: stable ids for CI, overridable per rule.
#[derive(Debug, Clone)]
pub struct RuleMeta {
    pub id: String,
    pub severity: Severity,
    pub enabled: bool,
}

#[derive(Debug, Clone)]
pub struct WritesRule {
    pub meta: RuleMeta,
    pub allow: Vec<PathPattern>,
    pub include_failed: bool,
}

#[derive(Debug, Clone)]
pub struct DeniedPathsRule {
    pub meta: RuleMeta,
    pub read: Vec<PathPattern>,
    pub write: Vec<PathPattern>,
    pub include_failed: bool,
}

#[derive(Debug, Clone)]
pub struct ExecutablesRule {
    pub meta: RuleMeta,
    pub deny: Vec<ExePattern>,
    pub allow: Vec<ExePattern>,
}

/// An executable pattern: with a `/` it is a glob over the resolved path,
/// without one a glob over the basename.
#[derive(Debug, Clone)]
pub struct ExePattern {
    pub text: String,
    pub matcher: globset::GlobMatcher,
    pub by_path: bool,
}

#[derive(Debug, Clone)]
pub struct NetworkRule {
    pub meta: RuleMeta,
    pub denied_id: String,
    pub allow: Vec<Destination>,
    pub deny: Vec<Destination>,
    pub allow_loopback: bool,
    pub allow_dns: bool,
    /// With `allow_agent_services` (default true): the DNS names of the
    /// agents' own services ([`AGENT_SERVICE_NAMES`]), allowed as names
    /// asked — an agent asking for its vendor's API or telemetry host is not
    /// a finding on a clean run. Empty when turned off.
    pub agent_services: Vec<Destination>,
}

impl NetworkRule {
    /// The rules `record --enforce` has the kernel apply: every `allow` and
    /// `deny` entry with an address or a port (name entries judge the DNS
    /// names asked, which the kernel programs do not see), and the
    /// `allow_dns`/`allow_loopback` switches. None when the rule is off.
    /// More entries than the kernel holds is an error.
    pub fn enforced(&self) -> Result<Option<crate::enforce::network::NetPlan>, String> {
        use agentsight_common::net_policy::{NET_RULES_MAX, NetPolicy, net_flag};
        if !self.meta.enabled {
            return Ok(None);
        }
        let mut policy = NetPolicy::default();
        let mut entries = Vec::new();
        let listed = self
            .deny
            .iter()
            .map(|d| (d, true))
            .chain(self.allow.iter().map(|d| (d, false)));
        for (d, deny) in listed {
            let Destination::Addr { text, net, port } = d else {
                continue;
            };
            if entries.len() == NET_RULES_MAX {
                return Err(format!(
                    "more than {NET_RULES_MAX} address or port destinations in [network] allow and deny"
                ));
            }
            policy.rules[entries.len()] = crate::enforce::network::entry(*net, *port, deny);
            entries.push(text.clone());
        }
        policy.count = entries.len() as u32;
        if self.allow_dns {
            policy.flags |= net_flag::ALLOW_DNS;
        }
        if self.allow_loopback {
            policy.flags |= net_flag::ALLOW_LOOPBACK;
        }
        Ok(Some(crate::enforce::network::NetPlan {
            policy,
            entries,
            denied_rule: self.denied_id.clone(),
            undeclared_rule: self.meta.id.clone(),
        }))
    }
}

/// The agents' own service names (Claude Code, Codex, Gemini CLI, Cursor),
/// allowed as DNS names asked unless `allow_agent_services = false`.
pub const AGENT_SERVICE_NAMES: &[&str] = &[
    "anthropic.com",
    "*.anthropic.com",
    "claude.ai",
    "*.claude.ai",
    "openai.com",
    "*.openai.com",
    "chatgpt.com",
    "*.chatgpt.com",
    "*.googleapis.com",
    "cursor.sh",
    "*.cursor.sh",
    "cursor.com",
    "*.cursor.com",
];

/// One network destination entry: an address range and/or a port, or a DNS
/// name glob (which can only match DNS queries: the capture holds the names
/// asked, not the answers, so a name never vouches for an address).
#[derive(Debug, Clone)]
pub enum Destination {
    Addr {
        text: String,
        net: Option<(IpAddr, u8)>,
        port: Option<u16>,
    },
    Name {
        text: String,
        matcher: globset::GlobMatcher,
    },
}

#[derive(Debug, Clone)]
pub struct Policy {
    pub source: String,
    pub workspace: Option<String>,
    pub home: Option<String>,
    pub require_no_loss: bool,
    pub loss: RuleMeta,
    pub unexplained_activity: Mode,
    pub claims_mismatch: Mode,
    pub writes: WritesRule,
    pub denied_paths: DeniedPathsRule,
    pub executables: ExecutablesRule,
    pub network: NetworkRule,
    /// The path rules for processes in a container (`[container]`); None
    /// when the policy has no such table: container processes' paths are
    /// then judged by no path rule (the top-level path rules are the
    /// host's: a container's `/etc/passwd` is not the host's).
    pub container: Option<ContainerRules>,
    /// `[external_messages]`: each `agentsight session message` submission
    /// the capture stored (rule `session-continued-externally`, `warning`).
    pub external_messages: RuleMeta,
    /// `[mcp]`: the MCP servers the sessions may use; None when the policy
    /// has no such table (no MCP findings).
    pub mcp: Option<McpRule>,
    /// `[wire]`: what the model traffic of a `record --wire` capture must
    /// not show (always judged when the capture has a wire layer).
    pub wire: WireRule,
}

/// `[wire]`: `content-sent-to-model` (a denied file that was read, whose
/// content appears in a request body), `relay-bypass` (a tracked process
/// reaching a relayed upstream directly), `model-endpoint` (an exchange to
/// an upstream not in `allowed_endpoints`; only when the list is given).
#[derive(Debug, Clone)]
pub struct WireRule {
    pub meta: RuleMeta,
    pub bypass_id: String,
    pub endpoint_id: String,
    /// Upstream base URLs, compared as `agentsight_wire::routes::Upstream::url`
    /// writes them; `None`: every endpoint allowed.
    pub allowed_endpoints: Option<Vec<String>>,
    /// The shortest line of a file that counts as its content when found in
    /// a request body (shorter lines are too common to mean anything).
    pub min_line_bytes: usize,
    /// Files whose content must never reach the model even where reading
    /// them is allowed (`.env`, a project's secrets): read ones are checked
    /// against the request bodies like denied files.
    pub never_send: Vec<PathPattern>,
}

/// `[mcp]`: a stored stdio server must be allowed by name or command
/// (rule `mcp-server-not-allowed`); a remote server's URL must be declared
/// (rule `mcp-remote-undeclared`).
#[derive(Debug, Clone)]
pub struct McpRule {
    pub meta: RuleMeta,
    /// The id of the remote-server rule.
    pub remote_id: String,
    /// Configured server names.
    pub allowed_servers: Vec<String>,
    /// Globs over the command line joined by spaces (`*` crosses `/` and
    /// spaces).
    pub allowed_commands: Vec<CommandPattern>,
    /// Remote endpoints, compared as written.
    pub allowed_urls: Vec<String>,
}

/// A glob over a server's whole command line.
#[derive(Debug, Clone)]
pub struct CommandPattern {
    pub text: String,
    pub matcher: globset::GlobMatcher,
}

/// `[container]`: the path rules every container process is judged by,
/// instead of the host's. Globs are the paths as the container sees them,
/// so they must be absolute (`/…` or `**/…`): `~`, `${workspace}` and
/// `${tmpdir}` name host places.
#[derive(Debug, Clone)]
pub struct ContainerRules {
    pub writes: WritesRule,
    pub denied_paths: DeniedPathsRule,
}

// --- the TOML shape ------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    workspace: Option<Spanned<String>>,
    home: Option<Spanned<String>>,
    require_no_loss: Option<bool>,
    unexplained_activity: Option<Mode>,
    claims_mismatch: Option<Mode>,
    loss: Option<RawMeta>,
    writes: Option<RawWrites>,
    denied_paths: Option<RawDenied>,
    executables: Option<RawExec>,
    network: Option<RawNet>,
    container: Option<RawContainer>,
    external_messages: Option<RawMeta>,
    mcp: Option<RawMcp>,
    wire: Option<RawWire>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawWire {
    id: Option<String>,
    bypass_id: Option<String>,
    endpoint_id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
    allowed_endpoints: Option<Vec<String>>,
    min_line_bytes: Option<usize>,
    never_send: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    id: Option<String>,
    remote_id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
    allowed_servers: Option<Vec<String>>,
    allowed_commands: Option<Vec<Spanned<String>>>,
    allowed_urls: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawContainer {
    writes: Option<RawWrites>,
    denied_paths: Option<RawDenied>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMeta {
    id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawWrites {
    id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
    allow: Option<Vec<Spanned<String>>>,
    include_failed: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDenied {
    id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
    read: Option<Vec<Spanned<String>>>,
    write: Option<Vec<Spanned<String>>>,
    include_failed: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExec {
    id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
    deny: Option<Vec<Spanned<String>>>,
    allow: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNet {
    id: Option<String>,
    denied_id: Option<String>,
    severity: Option<Severity>,
    enabled: Option<bool>,
    allow: Option<Vec<Spanned<String>>>,
    deny: Option<Vec<Spanned<String>>>,
    allow_loopback: Option<bool>,
    allow_dns: Option<bool>,
    allow_agent_services: Option<bool>,
}

/// Defaults, documented in docs/audit.md. Reads of `/etc` are not denied by
/// default: every dynamically linked program reads `/etc/ld.so.cache`, and
/// runtimes read `/etc/passwd`, locale and TLS files.
const DEFAULT_WRITE_ALLOW: &[&str] = &[
    "${workspace}/**",
    "/tmp/**",
    "/var/tmp/**",
    "${tmpdir}/**",
    "/dev/null",
    "/dev/tty",
    "/dev/pts/*",
    "/dev/shm/**",
    "/proc/self/**",
    "/proc/thread-self/**",
    "~/.claude/**",
    "~/.claude.json",
    "~/.claude.json.*",
    "~/.codex/**",
    "~/.gemini/**",
    "~/.cursor/**",
    "~/.cache/**",
    "~/.copilot/**",
    "~/.qwen/**",
    "~/.local/share/opencode/**",
    "~/.local/state/opencode/**",
    "~/.config/opencode/**",
    // Copilot CLI sets the OOM score of each shell it starts (only a
    // process the user may already signal can be changed so).
    "/proc/*/oom_score_adj",
];
const DEFAULT_DENY_READ: &[&str] = &["~/.ssh/**", "~/.aws/**", "**/.env"];
const DEFAULT_DENY_WRITE: &[&str] = &["~/.ssh/**", "~/.aws/**", "/etc/**", "**/.env"];
/// The defaults of `[container]`: the host's without the host places
/// (`~`, `${workspace}`, `${tmpdir}`), which mean nothing inside.
const CONTAINER_WRITE_ALLOW: &[&str] = &[
    "/tmp/**",
    "/var/tmp/**",
    "/dev/null",
    "/dev/tty",
    "/dev/pts/*",
    "/dev/shm/**",
    "/proc/self/**",
    "/proc/thread-self/**",
];
const CONTAINER_DENY_READ: &[&str] = &["**/.env"];
const CONTAINER_DENY_WRITE: &[&str] = &["/etc/**", "**/.env"];
const DEFAULT_DENY_EXE: &[&str] = &["curl", "wget", "nc", "ncat", "netcat", "sudo"];

/// The largest policy file read (a policy is a few dozen lines; the bound
/// keeps a mistaken path such as a log or an image from being parsed).
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;

fn line_of(src: &str, span: Option<Range<usize>>) -> usize {
    let at = span.map(|s| s.start).unwrap_or(0).min(src.len());
    src[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

impl Policy {
    /// Reads and checks a policy file: a regular file, not through a
    /// symbolic link (a FIFO or a device fails at once, never blocks), at
    /// most [`MAX_POLICY_BYTES`], UTF-8. It is read with the calling
    /// thread's file credentials: under `sudo record` the caller enters the
    /// invoking user's first (`privileges::AsUser`), so a file they could not
    /// read is refused, and nothing of it shows in an error.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let shown = path.display().to_string();
        let read_err = |reason: String| PolicyError::Read {
            path: shown.clone(),
            reason,
        };
        let bytes = crate::safefs::read_small(path, MAX_POLICY_BYTES + 1)
            .map_err(|e| read_err(e.to_string()))?;
        if bytes.len() as u64 > MAX_POLICY_BYTES {
            return Err(read_err(format!(
                "larger than {} KiB, the most a policy may be",
                MAX_POLICY_BYTES / 1024
            )));
        }
        let src = String::from_utf8(bytes).map_err(|e| {
            read_err(format!(
                "not valid UTF-8 (at byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Self::parse(&src, &shown)
    }

    /// The built-in policy: every default, as an empty file gives.
    pub fn defaults() -> Self {
        // The empty document is valid by construction; the defaults are
        // compile-time constants checked by the unit tests.
        Self::parse("", "(defaults)").unwrap_or_else(|e| panic!("built-in policy: {e}"))
    }

    pub fn parse(src: &str, name: &str) -> Result<Self, PolicyError> {
        let invalid = |line: usize, reason: String| PolicyError::Invalid {
            path: name.to_string(),
            line,
            reason,
        };
        let raw: RawPolicy = toml::from_str(src).map_err(|e| {
            invalid(
                line_of(src, e.span()),
                e.message().trim_end().replace('\n', " "),
            )
        })?;
        let meta = rule_meta;
        let paths = |given, dflt: &[&str]| path_list(src, name, given, dflt);
        let exes = |given: Option<Vec<Spanned<String>>>,
                    dflt: &[&str]|
         -> Result<Vec<ExePattern>, PolicyError> {
            with_lines(src, given, dflt)
                .into_iter()
                .map(|(text, line)| {
                    let matcher = compile_glob(&text).map_err(|r| invalid(line, r))?;
                    Ok(ExePattern {
                        by_path: text.contains('/'),
                        text,
                        matcher,
                    })
                })
                .collect()
        };
        let dests = |given: Option<Vec<Spanned<String>>>| -> Result<Vec<Destination>, PolicyError> {
            given
                .unwrap_or_default()
                .into_iter()
                .map(|s| {
                    let line = line_of(src, Some(s.span()));
                    parse_destination(s.get_ref()).map_err(|r| invalid(line, r))
                })
                .collect()
        };
        let spanned_abs = |v: Option<Spanned<String>>, what: &str| match v {
            None => Ok(None),
            Some(s) if s.get_ref().starts_with('/') => Ok(Some(s.into_inner())),
            Some(s) => Err(invalid(
                line_of(src, Some(s.span())),
                format!("{what} must be an absolute path"),
            )),
        };

        let container = raw
            .container
            .map(|c| container_rules(src, name, c))
            .transpose()?;
        let w = raw.writes.unwrap_or_default();
        let d = raw.denied_paths.unwrap_or_default();
        let x = raw.executables.unwrap_or_default();
        let n = raw.network.unwrap_or_default();
        let l = raw.loss.unwrap_or_default();
        let m = raw.external_messages.unwrap_or_default();
        let mcp = raw.mcp.map(|r| mcp_rule(src, name, r)).transpose()?;
        let wr = raw.wire.unwrap_or_default();
        Ok(Policy {
            source: name.to_string(),
            workspace: spanned_abs(raw.workspace, "workspace")?,
            home: spanned_abs(raw.home, "home")?,
            require_no_loss: raw.require_no_loss.unwrap_or(true),
            loss: meta(l.id, l.severity, l.enabled, "capture-loss"),
            unexplained_activity: raw.unexplained_activity.unwrap_or(Mode::Warn),
            claims_mismatch: raw.claims_mismatch.unwrap_or(Mode::Warn),
            writes: WritesRule {
                meta: meta(w.id, w.severity, w.enabled, "write-outside-allowed"),
                allow: paths(w.allow, DEFAULT_WRITE_ALLOW)?,
                include_failed: w.include_failed.unwrap_or(false),
            },
            denied_paths: DeniedPathsRule {
                meta: meta(d.id, d.severity, d.enabled, "denied-path"),
                read: paths(d.read, DEFAULT_DENY_READ)?,
                write: paths(d.write, DEFAULT_DENY_WRITE)?,
                include_failed: d.include_failed.unwrap_or(true),
            },
            executables: ExecutablesRule {
                meta: meta(x.id, x.severity, x.enabled, "denied-executable"),
                deny: exes(x.deny, DEFAULT_DENY_EXE)?,
                allow: exes(x.allow, &[])?,
            },
            network: NetworkRule {
                meta: meta(n.id, n.severity, n.enabled, "network-undeclared"),
                denied_id: n.denied_id.unwrap_or_else(|| "network-denied".to_string()),
                allow: dests(n.allow)?,
                deny: dests(n.deny)?,
                allow_loopback: n.allow_loopback.unwrap_or(false),
                allow_dns: n.allow_dns.unwrap_or(true),
                agent_services: if n.allow_agent_services.unwrap_or(true) {
                    AGENT_SERVICE_NAMES
                        .iter()
                        .map(|s| parse_destination(s))
                        .collect::<Result<_, _>>()
                        .map_err(|r| invalid(0, r))?
                } else {
                    Vec::new()
                },
            },
            container,
            external_messages: RuleMeta {
                severity: m.severity.unwrap_or(Severity::Warning),
                ..meta(m.id, None, m.enabled, "session-continued-externally")
            },
            mcp,
            wire: WireRule {
                meta: rule_meta(wr.id, wr.severity, wr.enabled, "content-sent-to-model"),
                bypass_id: wr.bypass_id.unwrap_or_else(|| "relay-bypass".to_string()),
                endpoint_id: wr
                    .endpoint_id
                    .unwrap_or_else(|| "model-endpoint".to_string()),
                allowed_endpoints: wr.allowed_endpoints,
                min_line_bytes: wr.min_line_bytes.unwrap_or(20),
                never_send: paths(wr.never_send, &[])?,
            },
        })
    }
}

/// `[mcp]`: its lists, each command glob compiled (a bad one is an error
/// at its line).
fn mcp_rule(src: &str, name: &str, r: RawMcp) -> Result<McpRule, PolicyError> {
    let allowed_commands = with_lines(src, r.allowed_commands, &[])
        .into_iter()
        .map(|(text, line)| {
            let matcher = globset::GlobBuilder::new(&text)
                .backslash_escape(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| PolicyError::Invalid {
                    path: name.to_string(),
                    line,
                    reason: format!("bad glob {text:?}: {}", e.kind()),
                })?;
            Ok(CommandPattern { text, matcher })
        })
        .collect::<Result<_, PolicyError>>()?;
    Ok(McpRule {
        meta: rule_meta(r.id, r.severity, r.enabled, "mcp-server-not-allowed"),
        remote_id: r
            .remote_id
            .unwrap_or_else(|| "mcp-remote-undeclared".to_string()),
        allowed_servers: r.allowed_servers.unwrap_or_default(),
        allowed_commands,
        allowed_urls: r.allowed_urls.unwrap_or_default(),
    })
}

fn rule_meta(id: Option<String>, sev: Option<Severity>, en: Option<bool>, dflt: &str) -> RuleMeta {
    RuleMeta {
        id: id.unwrap_or_else(|| dflt.to_string()),
        severity: sev.unwrap_or(Severity::Error),
        enabled: en.unwrap_or(true),
    }
}

/// The given strings with the policy line each came from, or the defaults
/// (line 0).
fn with_lines(
    src: &str,
    given: Option<Vec<Spanned<String>>>,
    dflt: &[&str],
) -> Vec<(String, usize)> {
    match given {
        Some(v) => v
            .into_iter()
            .map(|s| {
                let line = line_of(src, Some(s.span()));
                (s.into_inner(), line)
            })
            .collect(),
        None => dflt.iter().map(|s| (s.to_string(), 0)).collect(),
    }
}

/// A list of path globs as given (each checked, with its line), else the
/// defaults (line 0).
fn path_list(
    src: &str,
    name: &str,
    given: Option<Vec<Spanned<String>>>,
    dflt: &[&str],
) -> Result<Vec<PathPattern>, PolicyError> {
    with_lines(src, given, dflt)
        .into_iter()
        .map(|(text, line)| {
            check_path_glob(&text).map_err(|reason| PolicyError::Invalid {
                path: name.to_string(),
                line,
                reason,
            })?;
            Ok(PathPattern { text, line })
        })
        .collect()
}

/// `[container]`'s rules: the same shapes as the host's, their own
/// defaults, globs anchored at the container's root.
fn container_rules(src: &str, name: &str, c: RawContainer) -> Result<ContainerRules, PolicyError> {
    let scoped = |given, dflt: &[&str]| -> Result<Vec<PathPattern>, PolicyError> {
        let list = path_list(src, name, given, dflt)?;
        match list.iter().find(|p| !container_glob_ok(&p.text)) {
            Some(p) => Err(PolicyError::Invalid {
                path: name.to_string(),
                line: p.line,
                reason: format!(
                    "container path glob {:?} must start with / or **/ (paths as the container sees them; ~, ${{workspace}} and ${{tmpdir}} are host places)",
                    p.text
                ),
            }),
            None => Ok(list),
        }
    };
    let (w, d) = (
        c.writes.unwrap_or_default(),
        c.denied_paths.unwrap_or_default(),
    );
    Ok(ContainerRules {
        writes: WritesRule {
            meta: rule_meta(w.id, w.severity, w.enabled, "write-outside-allowed"),
            allow: scoped(w.allow, CONTAINER_WRITE_ALLOW)?,
            include_failed: w.include_failed.unwrap_or(false),
        },
        denied_paths: DeniedPathsRule {
            meta: rule_meta(d.id, d.severity, d.enabled, "denied-path"),
            read: scoped(d.read, CONTAINER_DENY_READ)?,
            write: scoped(d.write, CONTAINER_DENY_WRITE)?,
            include_failed: d.include_failed.unwrap_or(true),
        },
    })
}

/// A `[container]` glob names a path as the container sees it: anchored at
/// its root, never at a host place.
fn container_glob_ok(text: &str) -> bool {
    text.starts_with('/') || text.starts_with("**/")
}

/// Globs match resolved absolute paths, so a pattern must be anchored:
/// a relative `src/**` would silently never match anything.
fn check_path_glob(text: &str) -> Result<(), String> {
    let anchored = text.starts_with('/')
        || text == "~"
        || text.starts_with("~/")
        || text.starts_with("**/")
        || text.starts_with("${workspace}")
        || text.starts_with("${tmpdir}");
    if !anchored {
        return Err(format!(
            "path glob {text:?} must start with /, ~/, **/, ${{workspace}} or ${{tmpdir}} (globs match resolved absolute paths)"
        ));
    }
    // Substitute stand-ins so the syntax check sees the final shape.
    let probe = text
        .replacen("${workspace}", "/w", 1)
        .replacen("${tmpdir}", "/t", 1)
        .replacen('~', "/h", 1);
    if probe.contains("${") {
        return Err(format!(
            "path glob {text:?}: only ${{workspace}} and ${{tmpdir}} may be substituted"
        ));
    }
    compile_glob(&probe).map(|_| ())
}

/// `*` and `?` stay inside one path component; `**` crosses them.
pub fn compile_glob(text: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("bad glob {text:?}: {}", e.kind()))
}

pub(in crate::audit) fn parse_destination(text: &str) -> Result<Destination, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty network destination".into());
    }
    let bad = |why: &str| Err(format!("bad network destination {text:?}: {why}"));
    let parse_port = |p: &str| -> Result<u16, String> {
        p.parse::<u16>()
            .map_err(|_| format!("bad network destination {text:?}: port {p:?} is not 0-65535"))
    };
    // `:443` / `*:443`: any address on that port (`::1`, `::/0` are IPv6).
    if let Some(p) = t
        .strip_prefix("*:")
        .or_else(|| t.strip_prefix(':').filter(|p| !p.contains(':')))
    {
        return Ok(Destination::Addr {
            text: text.into(),
            net: None,
            port: Some(parse_port(p)?),
        });
    }
    // `[v6 or v6/len]:port`
    if let Some(rest) = t.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return bad("missing ]");
        };
        let port = match after.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if after.is_empty() => None,
            None => return bad("expected :PORT after ]"),
        };
        let net = parse_cidr(inner).ok_or_else(|| {
            format!("bad network destination {text:?}: not an IPv6 address or CIDR")
        })?;
        return Ok(Destination::Addr {
            text: text.into(),
            net: Some(net),
            port,
        });
    }
    if let Some(net) = parse_cidr(t) {
        return Ok(Destination::Addr {
            text: text.into(),
            net: Some(net),
            port: None,
        });
    }
    // IPv4 or IPv4 CIDR with a port: exactly one colon.
    if let Some((a, p)) = t.rsplit_once(':') {
        if let Some(net @ (IpAddr::V4(_), _)) = parse_cidr(a) {
            return Ok(Destination::Addr {
                text: text.into(),
                net: Some(net),
                port: Some(parse_port(p)?),
            });
        }
        return bad(
            "DNS names take no port (the capture records names asked, not the addresses they resolved to)",
        );
    }
    let name_ok = t
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '*' | '_'));
    if !name_ok {
        return bad("not a CIDR, an address, :PORT or a DNS name glob");
    }
    let lower = t.to_ascii_lowercase();
    Ok(Destination::Name {
        text: text.into(),
        matcher: globset::GlobBuilder::new(&lower)
            .literal_separator(false)
            .build()
            .map_err(|e| format!("bad network destination {text:?}: {}", e.kind()))?
            .compile_matcher(),
    })
}

/// `1.2.3.4`, `10.0.0.0/8`, `::1`, `fd00::/8` → (network, prefix length).
fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u8>().ok()?)),
        None => (s, None),
    };
    let ip: IpAddr = a.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((ip, len))
}

/// The address as the capture wrote it; IPv4-mapped IPv6 counts as IPv4.
pub fn parse_addr(s: &str) -> Option<IpAddr> {
    let ip: IpAddr = s.parse().ok()?;
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    })
}

pub fn in_net(ip: IpAddr, net: (IpAddr, u8)) -> bool {
    match (ip, net.0) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if net.1 == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(net.1))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if net.1 == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(net.1))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback() || a == Ipv4Addr::UNSPECIFIED,
        IpAddr::V6(a) => a.is_loopback() || a == Ipv6Addr::UNSPECIFIED,
    }
}

impl Destination {
    pub fn text(&self) -> &str {
        match self {
            Destination::Addr { text, .. } | Destination::Name { text, .. } => text,
        }
    }

    pub fn matches_addr(&self, ip: IpAddr, port: Option<u16>) -> bool {
        match self {
            Destination::Addr { net, port: p, .. } => {
                net.is_none_or(|n| in_net(ip, n)) && p.is_none_or(|p| Some(p) == port)
            }
            Destination::Name { .. } => false,
        }
    }

    pub fn matches_name(&self, name: &str) -> bool {
        match self {
            Destination::Name { matcher, .. } => {
                matcher.is_match(name.trim_end_matches('.').to_ascii_lowercase())
            }
            Destination::Addr { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> String {
        Policy::parse(src, "p.toml").unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_valid() {
        let p = Policy::defaults();
        assert!(p.require_no_loss);
        assert_eq!(p.writes.meta.id, "write-outside-allowed");
        assert_eq!(p.denied_paths.read.len(), 3);
        assert_eq!(p.executables.deny.len(), 6);
    }

    #[test]
    fn errors_name_file_line_and_reason() {
        assert_eq!(
            err("require_no_loss = true\n\n[bogus_rule]\nx = 1\n"),
            "p.toml:3: unknown field `bogus_rule`, expected one of `workspace`, `home`, `require_no_loss`, `unexplained_activity`, `claims_mismatch`, `loss`, `writes`, `denied_paths`, `executables`, `network`, `container`, `external_messages`, `mcp`, `wire`"
        );
        assert_eq!(
            err("[writes]\nallow = [\n  \"/ok/**\",\n  \"/bad/[z\",\n]\n"),
            "p.toml:4: bad glob \"/bad/[z\": unclosed character class; missing ']'"
        );
        assert_eq!(
            err("[denied_paths]\nread = [\"src/**\"]\n"),
            "p.toml:2: path glob \"src/**\" must start with /, ~/, **/, ${workspace} or ${tmpdir} (globs match resolved absolute paths)"
        );
        assert_eq!(
            err("unexplained_activity = \"maybe\"\n"),
            "p.toml:1: unknown variant `maybe`, expected one of `warn`, `fail`, `ignore`"
        );
        assert_eq!(err("a = [\n"), "p.toml:1: unclosed array, expected `]`");
        assert_eq!(
            err("[network]\nallow = [\"example.com:443\"]\n"),
            "p.toml:2: bad network destination \"example.com:443\": DNS names take no port (the capture records names asked, not the addresses they resolved to)"
        );
    }

    #[test]
    fn destinations_match() {
        let d = parse_destination("10.0.0.0/8").unwrap();
        assert!(d.matches_addr("10.1.2.3".parse().unwrap(), Some(1)));
        assert!(!d.matches_addr("11.1.2.3".parse().unwrap(), Some(1)));
        let d = parse_destination("127.0.0.1:8080").unwrap();
        assert!(d.matches_addr("127.0.0.1".parse().unwrap(), Some(8080)));
        assert!(!d.matches_addr("127.0.0.1".parse().unwrap(), Some(8081)));
        let d = parse_destination(":443").unwrap();
        assert!(d.matches_addr("1.1.1.1".parse().unwrap(), Some(443)));
        let d = parse_destination("[::1]:22").unwrap();
        assert!(d.matches_addr("::1".parse().unwrap(), Some(22)));
        let d = parse_destination("*.github.com").unwrap();
        assert!(d.matches_name("api.github.com."));
        assert!(!d.matches_name("github.com.evil.org"));
        assert_eq!(
            parse_addr("::ffff:127.0.0.1"),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }
}
