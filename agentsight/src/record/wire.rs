//! `record --wire`: the loopback relay between the recorded command's agents
//! and their model APIs (`docs/wire.md`).
//!
//! Each agent is pointed at the relay through its own base-URL setting; the
//! setting's previous value (or the vendor's default) is the route's
//! upstream. Knobs this cannot reach (a settings file that sets the URL
//! itself, a wrapper that clears the environment) are not silently missed:
//! the kernel layer's connections to an upstream that did not go through the
//! relay are an audit finding (`relay-bypass`).

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::sync::mpsc::SyncSender;

use agentsight_wire::relay::{Relay, RelayConfig, RelayStats};
use agentsight_wire::routes::{Route, Upstream};

use crate::envreset::EnvArg;
use crate::privileges::TargetUser;
use crate::store::StoreMsg;

use super::RecordError;

/// Environment knobs and the upstream each means when it is not set
/// (`None`: not set means the agent does not use a URL we can relay — Copilot
/// CLI's GitHub-hosted models are only reachable without its BYOK knob).
const ENV_KNOBS: [(&str, Option<&str>); 4] = [
    ("ANTHROPIC_BASE_URL", Some("https://api.anthropic.com")),
    ("OPENAI_BASE_URL", Some("https://api.openai.com/v1")),
    (
        "GOOGLE_GEMINI_BASE_URL",
        Some("https://generativelanguage.googleapis.com"),
    ),
    ("COPILOT_PROVIDER_BASE_URL", None),
];

/// Where one route's relay URL goes in the command.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Knob {
    /// An environment variable.
    Env(&'static str),
    /// `provider.<id>.options.baseURL` inside `OPENCODE_CONFIG_CONTENT`.
    Opencode(String),
    /// Codex's `model_providers.<id>.base_url` of `config.toml`, overridden
    /// with `-c` after the program name.
    Codex(String),
}

/// The routes of a recorded command and how its command line and
/// environment change.
#[derive(Debug, Clone, Default)]
pub(super) struct WirePlan {
    routes: Vec<(Knob, Route)>,
    /// `OPENCODE_CONFIG_CONTENT` parsed, when it is JSON.
    opencode: Option<serde_json::Value>,
}

impl WirePlan {
    /// Reads the knobs from the command's final environment (`env`, as
    /// `envreset::build` makes it) and, for Codex, its configuration.
    pub(super) fn new(
        command: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Result<WirePlan, RecordError> {
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        let mut plan = WirePlan::default();
        let add = |knob: Knob, url: &str, plan: &mut WirePlan| -> Result<(), RecordError> {
            let upstream = Upstream::parse(url)
                .map_err(|e| RecordError::Other(format!("--wire: {}: {e}", knob.name())))?;
            let index = plan.routes.len();
            plan.routes.push((
                knob.clone(),
                Route {
                    name: knob.name(),
                    upstream,
                    index,
                },
            ));
            Ok(())
        };
        for (name, default) in ENV_KNOBS {
            if let Some(url) = get(name)
                .filter(|v| !v.is_empty())
                .or(default.map(String::from))
            {
                add(Knob::Env(name), &url, &mut plan)?;
            }
        }
        if let Some(content) = get("OPENCODE_CONFIG_CONTENT")
            && let Ok(json) = serde_json::from_str::<serde_json::Value>(&content)
        {
            for (id, url) in opencode_base_urls(&json) {
                add(Knob::Opencode(id), &url, &mut plan)?;
            }
            plan.opencode = Some(json);
        }
        if is_codex(command)
            && let Some((id, url)) = codex_provider(get("CODEX_HOME"), get("HOME"))
        {
            add(Knob::Codex(id), &url, &mut plan)?;
        }
        Ok(plan)
    }

    pub(super) fn routes(&self) -> Vec<Route> {
        self.routes.iter().map(|(_, r)| r.clone()).collect()
    }

    /// The `--env` settings and the arguments to insert after the program
    /// name that point every knob at the relay.
    pub(super) fn apply(&self, relay: SocketAddr) -> (Vec<EnvArg>, Vec<OsString>) {
        let mut env = Vec::new();
        let mut args = Vec::new();
        let mut opencode = self.opencode.clone();
        for (knob, route) in &self.routes {
            let url = route.relay_url(relay);
            match knob {
                Knob::Env(name) => env.push(EnvArg::Set(name.into(), url.into())),
                Knob::Opencode(id) => {
                    if let Some(o) = opencode
                        .as_mut()
                        .and_then(|j| j.pointer_mut(&format!("/provider/{id}/options")))
                        .and_then(|o| o.as_object_mut())
                    {
                        o.insert("baseURL".into(), url.into());
                    }
                }
                Knob::Codex(id) => {
                    args.push(OsString::from("-c"));
                    args.push(format!("model_providers.{id}.base_url=\"{url}\"").into());
                }
            }
        }
        if let Some(json) = opencode.filter(|_| {
            self.routes
                .iter()
                .any(|(k, _)| matches!(k, Knob::Opencode(_)))
        }) {
            env.push(EnvArg::Set(
                "OPENCODE_CONFIG_CONTENT".into(),
                json.to_string().into(),
            ));
        }
        (env, args)
    }

    /// One line per route for the capture's meta and the user.
    pub(super) fn describe(&self) -> Vec<String> {
        self.routes
            .iter()
            .map(|(_, r)| format!("{} → {}", r.name, r.upstream.url()))
            .collect()
    }
}

impl Knob {
    fn name(&self) -> String {
        match self {
            Knob::Env(n) => (*n).to_string(),
            Knob::Opencode(id) => format!("OPENCODE_CONFIG_CONTENT:provider.{id}.options.baseURL"),
            Knob::Codex(id) => format!("codex:model_providers.{id}.base_url"),
        }
    }
}

/// `provider.<id>.options.baseURL` of an opencode configuration.
fn opencode_base_urls(json: &serde_json::Value) -> Vec<(String, String)> {
    let Some(providers) = json.get("provider").and_then(|p| p.as_object()) else {
        return Vec::new();
    };
    providers
        .iter()
        .filter_map(|(id, p)| {
            let url = p.pointer("/options/baseURL")?.as_str()?;
            Some((id.clone(), url.to_string()))
        })
        .collect()
}

/// Whether the command runs Codex directly (its npm launcher or binary).
fn is_codex(command: &[OsString]) -> bool {
    command.first().is_some_and(|p| {
        std::path::Path::new(p)
            .file_name()
            .is_some_and(|n| n == OsStr::new("codex"))
    })
}

/// Codex's selected provider when it is one of `config.toml`'s own
/// `model_providers` with a `base_url` (the built-in `openai` provider
/// follows `OPENAI_BASE_URL`). Read as the invoking user already (the
/// caller holds their credentials), through `safefs`.
fn codex_provider(codex_home: Option<String>, home: Option<String>) -> Option<(String, String)> {
    let dir = codex_home
        .map(std::path::PathBuf::from)
        .or_else(|| home.map(|h| std::path::Path::new(&h).join(".codex")))?;
    let bytes = crate::safefs::read_small(&dir.join("config.toml"), 1 << 20).ok()?;
    let cfg: toml::Table = std::str::from_utf8(&bytes).ok()?.parse().ok()?;
    let id = cfg.get("model_provider")?.as_str()?;
    let url = cfg
        .get("model_providers")?
        .get(id)?
        .get("base_url")?
        .as_str()?;
    Some((id.to_string(), url.to_string()))
}

/// `record::start_wire`'s result: the relay, the command, its `--env`.
pub(super) type Wired = (
    Option<WireRelay>,
    Vec<OsString>,
    Vec<crate::envreset::EnvArg>,
);

/// The running relay of a recording.
pub(super) struct WireRelay {
    relay: Relay,
}

impl WireRelay {
    /// Starts the relay; each finished exchange goes to the capture's writer.
    pub(super) fn start(
        plan: &WirePlan,
        tx: SyncSender<StoreMsg>,
    ) -> Result<WireRelay, RecordError> {
        let config = RelayConfig {
            routes: plan.routes(),
            body_limit: 8 << 20,
            tls: None,
        };
        let sink = move |raw| {
            let _ = tx.send(StoreMsg::Wire(Box::new(raw)));
        };
        let relay = Relay::start(config, Box::new(sink))
            .map_err(|e| RecordError::Other(format!("--wire: the relay did not start: {e}")))?;
        Ok(WireRelay { relay })
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.relay.addr()
    }

    /// Stops it once the recorded command ended (in-flight exchanges get 2 s
    /// and are stored either way).
    pub(super) fn stop(self) -> RelayStats {
        self.relay.stop(std::time::Duration::from_secs(2))
    }
}

/// The final environment of the command (what `envreset::build` gives it).
pub(super) fn command_env(user: &TargetUser, extra: &[EnvArg]) -> Vec<(OsString, OsString)> {
    let id = crate::envreset::Identity {
        name: &user.name,
        home: &user.home,
        shell: &user.shell,
    };
    crate::envreset::build(&id, std::env::vars_os(), extra)
}
