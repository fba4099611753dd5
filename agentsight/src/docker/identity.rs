//! Who the bridge runs as inside the container, and where: derived from
//! `docker inspect` so that a dev container whose main process is root still
//! reads the agent user's home (docs/bridge.md, "Identity").

use serde_json::Value;

use super::validate::{ContainerName, InvalidInput, validate_container_path};

/// Labels that, when set and non-empty, win over everything else.
pub const LABEL_USER: &str = "com.agentsight.user";
pub const LABEL_WORKSPACE: &str = "com.agentsight.workspace";
pub const LABEL_HOME: &str = "com.agentsight.home";

/// The two auxiliary lookups inside the container (each a bounded
/// `docker exec`). `Ok(None)`: the container had no answer (no such user,
/// no such file); `Err`: the lookup itself failed.
pub trait ContainerLookups {
    /// The output of `docker exec NAME stat -c %u HOME`.
    fn home_owner(&mut self, home: &str) -> Result<Option<String>, String>;
    /// The output of `docker exec NAME getent passwd USER`.
    fn passwd_entry(&mut self, user: &str) -> Result<Option<String>, String>;
}

/// The bridge's `--user`, `--workdir` and `--env HOME=` (each only when known).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub home: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("docker inspect gave no container (expected a non-empty JSON array)")]
    NoContainer,
    #[error("docker inspect gave no Config for the container")]
    NoConfig,
    #[error("the owner of the home {home} is not a uid: {output:?}")]
    BadOwner { home: String, output: String },
    #[error("looking up {what} in the container: {message}")]
    Lookup { what: String, message: String },
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
}

/// `root` or `0`, with or without `:group`.
fn is_root(user: &str) -> bool {
    let name = user.split(':').next().unwrap_or(user);
    name == "root" || name == "0"
}

/// A string field; empty counts as absent.
fn non_empty(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Derives the identity from the `docker inspect NAME` output (a JSON array;
/// its first element is the container). Every path is validated.
pub fn identity_from_inspect(
    inspect: &Value,
    lookups: &mut dyn ContainerLookups,
) -> Result<Identity, IdentityError> {
    let container = inspect
        .as_array()
        .and_then(|a| a.first())
        .ok_or(IdentityError::NoContainer)?;
    let config = container
        .get("Config")
        .filter(|c| c.is_object())
        .ok_or(IdentityError::NoConfig)?;
    let labels = config.get("Labels");
    let label = |k: &str| non_empty(labels.and_then(|l| l.get(k)));

    let mut user = label(LABEL_USER).or_else(|| {
        // A root image user must not override the owner of the agent's home.
        non_empty(config.get("User")).filter(|u| !is_root(u))
    });
    let workdir = label(LABEL_WORKSPACE).or_else(|| non_empty(config.get("WorkingDir")));
    if let Some(w) = &workdir {
        validate_container_path(w)?;
    }

    let env_home = config
        .get("Env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|e| e.strip_prefix("HOME="))
        .next_back()
        .filter(|h| h.starts_with('/'))
        .map(str::to_string);
    let mut home = label(LABEL_HOME).or(env_home);
    if home.is_none()
        && let Some(u) = &user
    {
        let name = u.split(':').next().unwrap_or(u);
        home = lookups
            .passwd_entry(name)
            .map_err(|message| IdentityError::Lookup {
                what: format!("the passwd entry of {name}"),
                message,
            })?
            .and_then(|entry| passwd_home(&entry));
    }
    if let Some(h) = &home {
        validate_container_path(h)?;
    }
    if user.is_none()
        && let Some(h) = &home
    {
        let out = lookups
            .home_owner(h)
            .map_err(|message| IdentityError::Lookup {
                what: format!("the owner of {h}"),
                message,
            })?;
        if let Some(out) = out {
            let uid = out.trim();
            if uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_digit()) {
                return Err(IdentityError::BadOwner {
                    home: h.clone(),
                    output: out,
                });
            }
            user = Some(uid.to_string());
        }
    }
    Ok(Identity {
        user,
        workdir,
        home,
    })
}

/// Field 6 (the home) of the first `getent passwd` line, when non-empty.
fn passwd_home(entry: &str) -> Option<String> {
    let line = entry.lines().next()?;
    line.split(':')
        .nth(5)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// `docker exec -i [--user U] [--workdir W] [--env HOME=H] NAME agentsight bridge`,
/// with `docker` the client to run (its first element).
pub fn bridge_argv(docker: &str, name: &ContainerName, id: &Identity) -> Vec<String> {
    let mut argv = vec![docker.to_string(), "exec".into(), "-i".into()];
    if let Some(u) = &id.user {
        argv.extend(["--user".into(), u.clone()]);
    }
    if let Some(w) = &id.workdir {
        argv.extend(["--workdir".into(), w.clone()]);
    }
    if let Some(h) = &id.home {
        argv.extend(["--env".into(), format!("HOME={h}")]);
    }
    argv.extend([
        name.as_str().to_string(),
        "agentsight".into(),
        "bridge".into(),
    ]);
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Canned answers of the two lookups, and what was asked.
    #[derive(Default)]
    struct Canned {
        owner: Option<String>,
        passwd: Option<String>,
        asked: Vec<String>,
    }

    impl ContainerLookups for Canned {
        fn home_owner(&mut self, home: &str) -> Result<Option<String>, String> {
            self.asked.push(format!("stat -c %u {home}"));
            Ok(self.owner.clone())
        }
        fn passwd_entry(&mut self, user: &str) -> Result<Option<String>, String> {
            self.asked.push(format!("getent passwd {user}"));
            Ok(self.passwd.clone())
        }
    }

    fn argv(inspect: Value, lookups: &mut Canned) -> Vec<String> {
        let id = identity_from_inspect(&inspect, lookups).expect("identity");
        bridge_argv("docker", &ContainerName::parse("dev").expect("name"), &id)
    }

    #[test]
    fn labels_win() {
        let mut l = Canned::default();
        let got = argv(
            json!([{"Config": {
                "User": "node",
                "WorkingDir": "/app",
                "Env": ["HOME=/root", "PATH=/bin"],
                "Labels": {
                    "com.agentsight.user": "vscode",
                    "com.agentsight.workspace": "/workspaces/shop",
                    "com.agentsight.home": "/home/vscode"
                }
            }}]),
            &mut l,
        );
        assert_eq!(
            got,
            [
                "docker",
                "exec",
                "-i",
                "--user",
                "vscode",
                "--workdir",
                "/workspaces/shop",
                "--env",
                "HOME=/home/vscode",
                "dev",
                "agentsight",
                "bridge"
            ]
        );
        assert!(l.asked.is_empty(), "{:?}", l.asked);
    }

    #[test]
    fn a_non_root_config_user_is_used() {
        let mut l = Canned::default();
        let got = argv(
            json!([{"Config": {
                "User": "node:node",
                "WorkingDir": "/app",
                "Env": ["HOME=/home/node"],
                "Labels": {"com.agentsight.user": "", "other": "x"}
            }}]),
            &mut l,
        );
        assert_eq!(
            got,
            [
                "docker",
                "exec",
                "-i",
                "--user",
                "node:node",
                "--workdir",
                "/app",
                "--env",
                "HOME=/home/node",
                "dev",
                "agentsight",
                "bridge"
            ]
        );
        assert!(l.asked.is_empty(), "{:?}", l.asked);
    }

    #[test]
    fn root_user_gives_way_to_the_owner_of_home() {
        for root in ["root", "0", "root:root", "0:0"] {
            let mut l = Canned {
                owner: Some("1000\n".into()),
                ..Canned::default()
            };
            let got = argv(
                json!([{"Config": {
                    "User": root,
                    "WorkingDir": "",
                    "Env": ["PATH=/usr/bin", "HOME=/home/vscode"],
                    "Labels": null
                }}]),
                &mut l,
            );
            assert_eq!(
                got,
                [
                    "docker",
                    "exec",
                    "-i",
                    "--user",
                    "1000",
                    "--env",
                    "HOME=/home/vscode",
                    "dev",
                    "agentsight",
                    "bridge"
                ],
                "{root}"
            );
            assert_eq!(l.asked, ["stat -c %u /home/vscode"]);
        }
    }

    #[test]
    fn without_home_the_passwd_entry_gives_it() {
        let mut l = Canned {
            passwd: Some("dev:x:1001:1001:Dev,,,:/home/dev:/bin/bash\n".into()),
            ..Canned::default()
        };
        let got = argv(
            json!([{"Config": {
                "User": "dev:staff",
                "WorkingDir": "/work",
                "Env": ["PATH=/usr/bin", "HOME=relative"],
            }}]),
            &mut l,
        );
        assert_eq!(
            got,
            [
                "docker",
                "exec",
                "-i",
                "--user",
                "dev:staff",
                "--workdir",
                "/work",
                "--env",
                "HOME=/home/dev",
                "dev",
                "agentsight",
                "bridge"
            ]
        );
        assert_eq!(l.asked, ["getent passwd dev"]);
    }

    #[test]
    fn nothing_known_gives_a_bare_exec() {
        let mut l = Canned::default();
        let got = argv(json!([{"Config": {"User": "", "Env": null}}]), &mut l);
        assert_eq!(got, ["docker", "exec", "-i", "dev", "agentsight", "bridge"]);
        assert!(l.asked.is_empty());
    }

    #[test]
    fn bad_inputs_are_errors() {
        let mut l = Canned::default();
        assert_eq!(
            identity_from_inspect(&json!([]), &mut l),
            Err(IdentityError::NoContainer)
        );
        assert_eq!(
            identity_from_inspect(&json!([{"Id": "x"}]), &mut l),
            Err(IdentityError::NoConfig)
        );
        assert_eq!(
            identity_from_inspect(
                &json!([{"Config": {"Labels": {"com.agentsight.home": "/home/../etc"}}}]),
                &mut l
            ),
            Err(IdentityError::Invalid(InvalidInput::PathDots(
                "/home/../etc".into()
            )))
        );
        assert_eq!(
            identity_from_inspect(&json!([{"Config": {"WorkingDir": "work"}}]), &mut l),
            Err(IdentityError::Invalid(InvalidInput::PathNotAbsolute(
                "work".into()
            )))
        );
        let mut l = Canned {
            owner: Some("vscode\n".into()),
            ..Canned::default()
        };
        assert_eq!(
            identity_from_inspect(
                &json!([{"Config": {"User": "root", "Env": ["HOME=/home/v"]}}]),
                &mut l
            ),
            Err(IdentityError::BadOwner {
                home: "/home/v".into(),
                output: "vscode\n".into()
            })
        );
    }
}
