//! `export --otlp-endpoint`: OTLP/HTTP pushes of the batches, only to the
//! endpoint the user names (or the `OTEL_EXPORTER_OTLP_*` environment
//! names), with bounded retries and timeouts. Plain HTTP only: the build
//! carries no TLS stack (send to a local or sidecar collector, which can
//! forward over TLS; see docs/otlp.md).

use std::time::Duration;

use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse},
    trace::v1::TracesData,
};
use prost::Message;

/// Attempts per batch (the first and three retries).
pub const MAX_ATTEMPTS: u32 = 4;
/// The first retry's wait without a `Retry-After`; doubled for each next.
pub const BACKOFF_START: Duration = Duration::from_millis(500);
/// The longest `Retry-After` honoured (a longer one is cut to this).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// `OTEL_EXPORTER_OTLP_TIMEOUT`'s default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// `OTEL_EXPORTER_OTLP_ENDPOINT`'s default for OTLP/HTTP.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The body encoding (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// `http/protobuf` (the default).
    Protobuf,
    /// `http/json`.
    Json,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushConfig {
    /// The full URL the batches are POSTed to (`…/v1/traces`).
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// Per attempt.
    pub timeout: Duration,
    pub wire: Wire,
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{0}")]
    Config(String),
}

/// What became of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// Accepted; `rejected` spans the receiver said it dropped (a partial
    /// success).
    Delivered {
        attempts: u32,
        rejected: u64,
    },
    Failed {
        attempts: u32,
        reason: String,
    },
}

/// A signal-specific variable (`OTEL_EXPORTER_OTLP_TRACES_X`), else the
/// general one (`OTEL_EXPORTER_OTLP_X`); blank counts as unset.
fn setting(env: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    [
        format!("OTEL_EXPORTER_OTLP_TRACES_{name}"),
        format!("OTEL_EXPORTER_OTLP_{name}"),
    ]
    .iter()
    .filter_map(|k| env(k))
    .map(|v| v.trim().to_owned())
    .find(|v| !v.is_empty())
}

/// `BASE/v1/traces` (a URL that already ends so is kept).
fn traces_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// `url` as it may be shown (errors, the summary): credentials in its
/// authority (`user:pass@`) replaced by `***@`. They are sent as given.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}***{}{path}", &authority[at..]),
        None => url.to_owned(),
    }
}

/// `key=value,…` with percent-encoded values (the W3C baggage form the
/// OpenTelemetry environment uses).
fn parse_headers(s: &str) -> Result<Vec<(String, String)>, PushError> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                PushError::Config(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: {pair:?} is not key=value"
                ))
            })?;
            let k = k.trim();
            if k.is_empty() {
                return Err(PushError::Config(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: {pair:?} has no key"
                )));
            }
            let v = percent_encoding::percent_decode_str(v.trim())
                .decode_utf8()
                .map_err(|e| PushError::Config(format!("OTEL_EXPORTER_OTLP_HEADERS: {k}: {e}")))?;
            Ok((k.to_owned(), v.into_owned()))
        })
        .collect()
}

impl PushConfig {
    /// The push settings: `flag` is `--otlp-endpoint`'s URL (a base the
    /// `/v1/traces` path is added to; `None` or empty: the environment's
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` as a base, else localhost:4318); the
    /// headers, timeout (ms), protocol and compression from the same
    /// environment, read through `env`.
    pub fn resolve(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, PushError> {
        let url = match flag.map(str::trim).filter(|f| !f.is_empty()) {
            Some(f) => traces_url(f),
            None => {
                match env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|v| !v.trim().is_empty()) {
                    Some(u) => u.trim().to_owned(),
                    None => traces_url(
                        &env("OTEL_EXPORTER_OTLP_ENDPOINT")
                            .filter(|v| !v.trim().is_empty())
                            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned()),
                    ),
                }
            }
        };
        let shown = shown_url(&url);
        if url.starts_with("https://") {
            return Err(PushError::Config(format!(
                "{shown}: https is not supported (this build has no TLS); push to a local collector over http"
            )));
        }
        if !url.starts_with("http://") {
            return Err(PushError::Config(format!("{shown}: not an http:// URL")));
        }
        let headers = match setting(&env, "HEADERS") {
            Some(h) => parse_headers(&h)?,
            None => Vec::new(),
        };
        let timeout = match setting(&env, "TIMEOUT") {
            Some(t) => match t.parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    return Err(PushError::Config(format!(
                        "OTEL_EXPORTER_OTLP_TIMEOUT={t:?}: give milliseconds, more than 0"
                    )));
                }
            },
            None => DEFAULT_TIMEOUT,
        };
        let wire = match setting(&env, "PROTOCOL").as_deref() {
            None | Some("http/protobuf") => Wire::Protobuf,
            Some("http/json") => Wire::Json,
            Some(p) => {
                return Err(PushError::Config(format!(
                    "OTEL_EXPORTER_OTLP_PROTOCOL={p}: only http/protobuf and http/json are supported"
                )));
            }
        };
        match setting(&env, "COMPRESSION").as_deref() {
            None | Some("none") => {}
            Some(c) => {
                return Err(PushError::Config(format!(
                    "OTEL_EXPORTER_OTLP_COMPRESSION={c}: not supported; unset it or set none"
                )));
            }
        }
        Ok(PushConfig {
            url,
            headers,
            timeout,
            wire,
        })
    }
}

/// Sends batches to one endpoint. After a batch fails every attempt the
/// endpoint counts as down and later batches fail at once, so a dead
/// endpoint costs one batch's retries, not every batch's.
pub struct Pusher {
    agent: ureq::Agent,
    cfg: PushConfig,
    down: Option<String>,
}

/// One attempt's result.
enum Attempt {
    Done(u64),
    Retry {
        reason: String,
        after: Option<Duration>,
    },
    Fatal(String),
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: backoff).
fn retry_after(v: Option<&str>) -> Option<Duration> {
    let secs: u64 = v?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

impl Pusher {
    pub fn new(cfg: PushConfig) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(cfg.timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        Pusher {
            agent,
            cfg,
            down: None,
        }
    }

    pub fn config(&self) -> &PushConfig {
        &self.cfg
    }

    /// POSTs one batch, retrying 429/502/503/504 (honouring `Retry-After`)
    /// and failed connections, at most [`MAX_ATTEMPTS`] times.
    pub fn send(&mut self, data: TracesData) -> PushOutcome {
        if let Some(reason) = &self.down {
            return PushOutcome::Failed {
                attempts: 0,
                reason: reason.clone(),
            };
        }
        let request = ExportTraceServiceRequest {
            resource_spans: data.resource_spans,
        };
        let (body, content_type) = match self.cfg.wire {
            Wire::Protobuf => (request.encode_to_vec(), "application/x-protobuf"),
            Wire::Json => (
                serde_json::to_vec(&request).unwrap_or_default(),
                "application/json",
            ),
        };
        let mut backoff = BACKOFF_START;
        let mut reason = String::new();
        let mut made = 0;
        for attempt in 1..=MAX_ATTEMPTS {
            made = attempt;
            match self.attempt(&body, content_type) {
                Attempt::Done(rejected) => {
                    return PushOutcome::Delivered {
                        attempts: attempt,
                        rejected,
                    };
                }
                Attempt::Fatal(r) => {
                    reason = r;
                    break;
                }
                Attempt::Retry { reason: r, after } => {
                    reason = r;
                    if attempt < MAX_ATTEMPTS {
                        std::thread::sleep(after.unwrap_or(backoff));
                        backoff = backoff.saturating_mul(2);
                    }
                }
            }
        }
        // An error text may quote the URL: never with its credentials.
        let shown = shown_url(&self.cfg.url);
        let reason = format!("{shown}: {}", reason.replace(&self.cfg.url, &shown));
        self.down = Some(reason.clone());
        PushOutcome::Failed {
            attempts: made,
            reason,
        }
    }

    fn attempt(&self, body: &[u8], content_type: &str) -> Attempt {
        let mut req = self
            .agent
            .post(&self.cfg.url)
            .header("Content-Type", content_type);
        for (k, v) in &self.cfg.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Retry {
                    reason: e.to_string(),
                    after: None,
                };
            }
        };
        let status = resp.status().as_u16();
        let after = retry_after(
            resp.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
        );
        let bytes = resp.body_mut().read_to_vec().unwrap_or_default();
        match status {
            200..=299 => Attempt::Done(rejected_spans(&bytes, self.cfg.wire)),
            429 | 503 => Attempt::Retry {
                reason: format!("HTTP {status}"),
                after,
            },
            502 | 504 => Attempt::Retry {
                reason: format!("HTTP {status}"),
                after: None,
            },
            _ => {
                let said = String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                    .trim()
                    .to_owned();
                Attempt::Fatal(match said.is_empty() {
                    true => format!("HTTP {status}"),
                    false => format!("HTTP {status}: {said}"),
                })
            }
        }
    }
}

/// The spans a receiver's partial success says it rejected (0 when the
/// body says nothing).
fn rejected_spans(body: &[u8], wire: Wire) -> u64 {
    let resp = match wire {
        Wire::Protobuf => ExportTraceServiceResponse::decode(body).ok(),
        Wire::Json => serde_json::from_slice::<ExportTraceServiceResponse>(body).ok(),
    };
    resp.and_then(|r| r.partial_success)
        .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn endpoint_comes_from_the_flag_then_the_environment() {
        let none = env_of(&[]);
        let c = PushConfig::resolve(None, &none).unwrap();
        assert_eq!(c.url, "http://localhost:4318/v1/traces");
        assert_eq!((c.timeout, c.wire), (DEFAULT_TIMEOUT, Wire::Protobuf));
        let c = PushConfig::resolve(Some("http://127.0.0.1:9/"), &none).unwrap();
        assert_eq!(c.url, "http://127.0.0.1:9/v1/traces");
        let c = PushConfig::resolve(Some("http://h:1/v1/traces"), &none).unwrap();
        assert_eq!(c.url, "http://h:1/v1/traces");
        let env = env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1, b = x%20y ,"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", ""),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ]);
        let c = PushConfig::resolve(Some(""), &env).unwrap();
        assert_eq!(c.url, "http://collector:4318/v1/traces");
        assert_eq!(
            c.headers,
            vec![("a".into(), "1".into()), ("b".into(), "x y".into())]
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.wire, Wire::Json);
        // The per-signal endpoint is used as is; the flag still wins.
        let env = env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/custom"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "100"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "abc"),
        ]);
        let c = PushConfig::resolve(None, &env).unwrap();
        assert_eq!(c.url, "http://b:2/custom");
        assert_eq!(c.timeout, Duration::from_millis(100));
        assert_eq!(
            PushConfig::resolve(Some("http://c:3"), &env).unwrap().url,
            "http://c:3/v1/traces"
        );
    }

    #[test]
    fn bad_settings_are_one_line_errors() {
        let err = |flag: Option<&str>, vars: &[(&str, &str)]| {
            PushConfig::resolve(flag, env_of(vars))
                .unwrap_err()
                .to_string()
        };
        assert!(err(Some("https://x"), &[]).contains("https is not supported"));
        assert!(err(Some("ftp://x"), &[]).contains("not an http:// URL"));
        assert!(err(None, &[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]).contains("not key=value"));
        assert!(err(None, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "0")]).contains("milliseconds"));
        assert!(
            err(None, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).contains("only http/protobuf")
        );
        assert!(err(None, &[("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")]).contains("not supported"));
        assert!(!err(Some("https://x"), &[]).contains('\n'));
    }

    #[test]
    fn retry_after_is_seconds_and_bounded() {
        assert_eq!(retry_after(Some("1")), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(Some("3600")), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after(None), None);
    }

    #[test]
    fn credentials_in_the_url_are_never_shown() {
        assert_eq!(
            shown_url("http://user:pa%40ss@collector:4318/v1/traces"),
            "http://***@collector:4318/v1/traces"
        );
        assert_eq!(shown_url("http://u@h/x@y"), "http://***@h/x@y");
        assert_eq!(
            shown_url("http://h:4318/v1/traces"),
            "http://h:4318/v1/traces"
        );
        let e = PushConfig::resolve(Some("https://me:secret@h"), |_| None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "https://***@h/v1/traces: https is not supported (this build has no TLS); push to a local collector over http"
        );
    }

    #[test]
    fn a_fatal_answer_is_one_attempt() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut served = 0;
            listener.set_nonblocking(false).unwrap();
            for (status, _) in [(307, 0), (400, 1)] {
                let (mut c, _) = listener.accept().unwrap();
                let mut buf = [0u8; 65536];
                let _ = c.read(&mut buf);
                let _ = write!(
                    c,
                    "HTTP/1.1 {status} X\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                served += 1;
            }
            served
        });
        for status in [307, 400] {
            let cfg =
                PushConfig::resolve(Some(&format!("http://me:secret@127.0.0.1:{port}")), |_| {
                    None
                })
                .unwrap();
            let mut p = Pusher::new(cfg);
            match p.send(TracesData::default()) {
                PushOutcome::Failed { attempts, reason } => {
                    assert_eq!(attempts, 1, "{status}");
                    assert_eq!(
                        reason,
                        format!("http://***@127.0.0.1:{port}/v1/traces: HTTP {status}")
                    );
                }
                o => panic!("{status}: {o:?}"),
            }
        }
        assert_eq!(server.join().unwrap(), 2);
    }
}
