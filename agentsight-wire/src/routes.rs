//! Where the relay sends each route's traffic, and the URL the agent is given instead.
//!
//! A route is one upstream base URL (`https://api.anthropic.com`,
//! `http://127.0.0.1:8080/v1`) reached through the relay under its own path
//! prefix `/w<N>`: the agent's base URL becomes
//! `http://127.0.0.1:<relay port>/w<N><upstream base path>`, so the relay
//! strips `/w<N>` and forwards the rest of the target unchanged.

use std::net::IpAddr;

use thiserror::Error;

/// Why an upstream URL cannot be relayed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RouteError {
    #[error("upstream {0:?}: not an http:// or https:// URL")]
    Scheme(String),
    #[error("upstream {0:?}: no host")]
    NoHost(String),
    #[error("upstream {0:?}: bad port")]
    Port(String),
    #[error(
        "upstream {0:?}: plain http is only relayed to a loopback address (use https, whose certificate the relay verifies)"
    )]
    PlainHttpOffLoopback(String),
    #[error("upstream {0:?}: user info, query or fragment in a base URL is not supported")]
    Extra(String),
}

/// A parsed upstream base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// `true` for https.
    pub tls: bool,
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// The base path without a trailing slash (`""`, `/v1`).
    pub base_path: String,
}

impl Upstream {
    /// Parses `http[s]://host[:port][/path]`. Plain http only to loopback
    /// (an IP literal in 127/8 or ::1, or `localhost`): everything else must be
    /// TLS, verified.
    pub fn parse(url: &str) -> Result<Upstream, RouteError> {
        let err = |f: fn(String) -> RouteError| f(url.to_string());
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(err(RouteError::Scheme));
        };
        if rest.contains(['?', '#']) {
            return Err(err(RouteError::Extra));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(err(RouteError::Extra));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| err(RouteError::Port))?;
        if host.is_empty() {
            return Err(err(RouteError::NoHost));
        }
        let port = port.unwrap_or(if tls { 443 } else { 80 });
        let up = Upstream {
            tls,
            host: host.to_string(),
            port,
            base_path: path.trim_end_matches('/').to_string(),
        };
        if !tls && !up.is_loopback() {
            return Err(err(RouteError::PlainHttpOffLoopback));
        }
        Ok(up)
    }

    /// Whether the host is a loopback address (or `localhost`).
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The `Host` header value for this upstream (port only when not the scheme's default).
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The base URL back as text (`https://api.anthropic.com`, `http://127.0.0.1:8080/v1`).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.base_path)
    }
}

/// `host[:port]`, `[v6][:port]` → (host, port).
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(p) => Some((host, Some(p.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h, Some(p.parse().ok()?))),
        None => Some((authority, None)),
    }
}

/// One route of the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The knob that pointed the agent here (stored with each exchange).
    pub name: String,
    /// Where its traffic goes.
    pub upstream: Upstream,
    /// Its number: requests under `/w<index>` belong to it.
    pub index: usize,
}

impl Route {
    /// The path prefix of the route at the relay.
    pub fn prefix(&self) -> String {
        format!("/w{}", self.index)
    }

    /// The base URL the agent is given: the relay, the route's prefix, the
    /// upstream's base path.
    pub fn relay_url(&self, relay: std::net::SocketAddr) -> String {
        format!("http://{relay}{}{}", self.prefix(), self.upstream.base_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_renders_upstreams() {
        let u = Upstream::parse("https://api.anthropic.com").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.base_path.as_str()),
            (true, "api.anthropic.com", 443, "")
        );
        assert_eq!(u.authority(), "api.anthropic.com");
        let u = Upstream::parse("http://127.0.0.1:8080/v1/").unwrap();
        assert_eq!((u.tls, u.port, u.base_path.as_str()), (false, 8080, "/v1"));
        assert_eq!(u.url(), "http://127.0.0.1:8080/v1");
        let u = Upstream::parse("http://[::1]:9/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.authority().as_str()),
            ("::1", "[::1]:9")
        );
        assert_eq!(
            Upstream::parse("http://example.com/v1"),
            Err(RouteError::PlainHttpOffLoopback(
                "http://example.com/v1".into()
            ))
        );
        assert!(matches!(
            Upstream::parse("ftp://x"),
            Err(RouteError::Scheme(_))
        ));
        assert!(matches!(
            Upstream::parse("https://h:99999"),
            Err(RouteError::Port(_))
        ));
        assert!(matches!(
            Upstream::parse("https://u:p@h"),
            Err(RouteError::Extra(_))
        ));
        let r = Route {
            name: "ANTHROPIC_BASE_URL".into(),
            upstream: Upstream::parse("https://h/v1").unwrap(),
            index: 2,
        };
        assert_eq!(
            r.relay_url("127.0.0.1:4000".parse().unwrap()),
            "http://127.0.0.1:4000/w2/v1"
        );
    }
}
