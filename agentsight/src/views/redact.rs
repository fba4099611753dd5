//! Secrets kept out of shared artifacts: the HTML report and the Perfetto
//! trace show recorded text (argv, command lines, URLs, transcript text)
//! with the values that look secret replaced by [`REDACTED`]. The capture
//! and `export --format jsonl` keep the exact bytes; `--no-redact` turns
//! this off. The rules (`docs/redaction.md` states them for users):
//!
//! - values of environment assignments (`NAME=value`), options
//!   (`--name value`, `--name=value`, `-name value`) and JSON members
//!   (`"name": "value"`) whose name is secret-looking ([`secret_name`]);
//! - header values: `Authorization:` (its scheme word kept),
//!   `Proxy-Authorization:`, `X-Api-Key:`, `Api-Key:`, `X-Auth-Token:`,
//!   `Cookie:`, `Set-Cookie:`;
//! - well-known key formats anywhere: `sk-…` (with a digit), `ghp_…`/`gho_…`/
//!   `ghu_…`/`ghs_…`/`ghr_…`, `github_pat_…`, `glpat-…`, `AKIA…`/`ASIA…`,
//!   `xox?-…`, `AIza…`, JWTs (`eyJ….….…`);
//! - URL userinfo (`https://user:‹redacted›@host`; a user alone is redacted
//!   whole, since tokens are passed as user names) and query parameters
//!   whose name is secret-looking or a signature (`?token=`, `access_token=`,
//!   `api_key=`, `sig=`, `X-Amz-Signature=`, …).
//!
//! Heuristic by nature: a secret of no known format in a position no rule
//! names (a bare positional argument) is shown. Redaction errs towards
//! hiding: `--token-limit 5` loses its 5.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};

/// What a redacted value is shown as.
pub const REDACTED: &str = "‹redacted›";

/// Name parts that make a name secret-looking when a part is exactly one
/// of them (`API_KEY`, `--key`, `GH_TOKEN`, `X-Auth-Token`).
const SECRET_PARTS: &[&str] = &[
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PASS",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
];

/// Endings that make a part secret-looking on their own (`PGPASSWORD`,
/// `GITHUBTOKEN`, `CLIENTSECRET`); `KEY` is not one (`MONKEY`, `HOTKEY`).
const SECRET_ENDINGS: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY"];

/// A last part that names where a secret is, not the secret
/// (`API_KEY_FILE`, `--token-path`).
const PLACE_PARTS: &[&str] = &["FILE", "PATH", "DIR", "FD"];

/// Whether `name` (an environment variable, option, JSON member or query
/// parameter name) names a secret: split into parts at `_`, `-` and `.`,
/// case-insensitive, a part is one of [`SECRET_PARTS`] or ends with one of
/// [`SECRET_ENDINGS`], and the last part is not a place ([`PLACE_PARTS`]).
/// `KEYBOARD`, `MAX_TOKENS`, `PATH`, `PWD` and `--model` are not secret.
pub fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let parts: Vec<&str> = upper
        .split(['_', '-', '.'])
        .filter(|p| !p.is_empty())
        .collect();
    if parts.last().is_some_and(|p| PLACE_PARTS.contains(p)) {
        return false;
    }
    parts
        .iter()
        .any(|p| SECRET_PARTS.contains(p) || SECRET_ENDINGS.iter().any(|e| p.ends_with(e)))
}

/// Query parameter names that are secret though no [`secret_name`]
/// (signed URLs).
fn secret_param(name: &str) -> bool {
    if secret_name(name) {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    matches!(
        upper.as_str(),
        "SIG" | "SIGNATURE" | "X-AMZ-SIGNATURE" | "X-AMZ-CREDENTIAL" | "X-GOOG-SIGNATURE"
    )
}

/// A name as the patterns match it.
const NAME: &str = r"[A-Za-z_][A-Za-z0-9_]*";
/// An option's or parameter's name (dashes allowed).
const DASHED: &str = r"[A-Za-z][A-Za-z0-9_.-]*";

struct Rules {
    /// Any rule may apply: the rest run only then.
    any: RegexSet,
    header: Regex,
    formats: Regex,
    assign: Regex,
    option: Regex,
    json: Regex,
    userinfo: Regex,
    query: Regex,
}

fn rules() -> &'static Rules {
    static RULES: LazyLock<Rules> = LazyLock::new(|| {
        let header = r#"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|(?:set-)?cookie)(\s*:\s*)((?:(?:bearer|basic|token|digest|negotiate)\s+)?)([^'"\r\n]+)"#.to_owned();
        let formats = [
            r"\bsk-[A-Za-z0-9_-]{20,}",
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
            r"\bxox[a-z]-[A-Za-z0-9-]{10,}",
            r"\bAIza[0-9A-Za-z_-]{35}",
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        ]
        .join("|");
        // `'NAME=value with spaces'` (an argv element quoted whole),
        // `"NAME=…"`, or `NAME=value` / `NAME='…'` / `NAME="…"`.
        let assign = format!(
            r#"(?:'(?P<n1>{NAME})=(?P<v1>[^']*)|"(?P<n2>{NAME})=(?P<v2>[^"]*)|(?P<p3>^|[\s(`])(?P<n3>{NAME})=(?P<v3>'[^']*'|"[^"]*"|[^\s'"]*))"#
        );
        // `--name=value` (quoted whole or not) and `--name value`.
        let option = format!(
            r#"(?:'(?P<n1>--?{DASHED})=(?P<v1>[^']*)|"(?P<n2>--?{DASHED})=(?P<v2>[^"]*)|(?P<p3>^|\s)(?P<n3>--?{DASHED})(?P<s3>=|\s+)(?P<v3>'[^']*'|"[^"]*"|[^\s'"]+))"#
        );
        let json = format!(r#""(?P<n>{DASHED})"(?P<s>\s*:\s*)"(?P<v>(?:[^"\\]|\\.)*)""#);
        let userinfo = r#"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@'"]+)@"#.to_owned();
        let query = format!(r#"(?P<p>[?&;])(?P<n>{DASHED})=(?P<v>[^&#\s'"]*)"#);
        let all = [
            &header, &formats, &assign, &option, &json, &userinfo, &query,
        ];
        let re = |s: &str| Regex::new(s).expect("the redaction patterns compile");
        Rules {
            any: RegexSet::new(all).expect("the redaction patterns compile"),
            header: re(&header),
            formats: re(&formats),
            assign: re(&assign),
            option: re(&option),
            json: re(&json),
            userinfo: re(&userinfo),
            query: re(&query),
        }
    });
    &RULES
}

/// Applies `re` to `s` in place, each match replaced by `f`.
fn apply(s: &mut Cow<'_, str>, re: &Regex, f: impl Fn(&Captures) -> String) {
    if let Cow::Owned(new) = re.replace_all(s, |c: &Captures| f(c)) {
        *s = Cow::Owned(new);
    }
}

/// The group of the first alternative that matched, of `n1`/`n2`/`n3`.
fn alt<'c>(c: &'c Captures, base: &str) -> Option<(usize, &'c str)> {
    (1..=3).find_map(|k| c.name(&format!("{base}{k}")).map(|m| (k, m.as_str())))
}

/// Rebuilds an assignment/option match with its value redacted when its
/// name is secret-looking (`strip` takes the dashes off an option name).
fn named_value(c: &Captures, strip: bool) -> String {
    let whole = c[0].to_owned();
    let (Some((k, name)), Some((_, value))) = (alt(c, "n"), alt(c, "v")) else {
        return whole;
    };
    let bare = if strip {
        name.trim_start_matches('-')
    } else {
        name
    };
    if value.is_empty() || value == REDACTED || !secret_name(bare) {
        return whole;
    }
    match k {
        1 => format!("'{name}={REDACTED}"),
        2 => format!("\"{name}={REDACTED}"),
        _ => {
            let pre = c.name("p3").map_or("", |m| m.as_str());
            let sep = c.name("s3").map_or("=", |m| m.as_str());
            // `--token --verbose`: the next word is an option, not a value.
            if sep != "=" && value.starts_with('-') {
                return whole;
            }
            format!("{pre}{name}{sep}{REDACTED}")
        }
    }
}

/// `s` with every secret-looking value replaced by [`REDACTED`] (borrowed
/// when nothing is).
pub fn text(s: &str) -> Cow<'_, str> {
    let r = rules();
    let mut out = Cow::Borrowed(s);
    if !r.any.is_match(s) {
        return out;
    }
    apply(&mut out, &r.header, |c| {
        format!("{}{}{}{REDACTED}", &c[1], &c[2], &c[3])
    });
    apply(&mut out, &r.formats, |c| {
        let m = &c[0];
        // `sk-` keys hold digits; a word like `sk-learn-tutorial-notes` does not.
        if m.starts_with("sk-") && !m.bytes().any(|b| b.is_ascii_digit()) {
            m.to_owned()
        } else {
            REDACTED.to_owned()
        }
    });
    apply(&mut out, &r.assign, |c| named_value(c, false));
    apply(&mut out, &r.option, |c| named_value(c, true));
    apply(&mut out, &r.json, |c| {
        if secret_name(&c["n"]) && !c["v"].is_empty() {
            format!("\"{}\"{}\"{REDACTED}\"", &c["n"], &c["s"])
        } else {
            c[0].to_owned()
        }
    });
    apply(&mut out, &r.userinfo, |c| match c[2].split_once(':') {
        Some((user, _)) => format!("{}{user}:{REDACTED}@", &c[1]),
        None => format!("{}{REDACTED}@", &c[1]),
    });
    apply(&mut out, &r.query, |c| {
        if secret_param(&c["n"]) && !c["v"].is_empty() {
            format!("{}{}={REDACTED}", &c["p"], &c["n"])
        } else {
            c[0].to_owned()
        }
    });
    out
}

/// An argv with secrets redacted: each element as [`text`], an element
/// `NAME=value` or `--name=value` with a secret-looking name wholly, and
/// the element after a secret-looking option (`--api-key`, `-token`) that
/// has no `=` unless it looks like an option itself.
pub fn argv(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if std::mem::take(&mut hide_next) && !a.starts_with('-') {
            out.push(REDACTED.to_owned());
            continue;
        }
        let (name, value) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (a.as_str(), None),
        };
        let bare = name.trim_start_matches('-');
        let is_option = name.starts_with('-') && !bare.is_empty();
        let is_name = is_option
            || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        match value {
            Some(v) if is_name && !v.is_empty() && secret_name(bare) => {
                out.push(format!("{name}={REDACTED}"));
            }
            None if is_option && secret_name(bare) => {
                hide_next = true;
                out.push(a.clone());
            }
            _ => out.push(text(a).into_owned()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        text(s).into_owned()
    }

    #[test]
    fn secret_names_are_word_parts() {
        for n in [
            "API_KEY",
            "OPENAI_API_KEY",
            "HOLDOUT_OPENAI_KEY",
            "KEY",
            "GH_TOKEN",
            "GITHUBTOKEN",
            "PGPASSWORD",
            "client_secret",
            "api-key",
            "X-Auth-Token",
            "access_token",
            "AWS_SECRET_ACCESS_KEY",
            "Authorization",
        ] {
            assert!(secret_name(n), "{n}");
        }
        for n in [
            "KEYBOARD",
            "MONKEY",
            "PATH",
            "PWD",
            "OLDPWD",
            "MAX_TOKENS",
            "TOKENIZERS_PARALLELISM",
            "model",
            "API_KEY_FILE",
            "token-path",
            "HOME",
        ] {
            assert!(!secret_name(n), "{n}");
        }
    }

    #[test]
    fn text_redacts_each_kind_and_keeps_the_rest() {
        let cases = [
            (
                "env HOLDOUT_OPENAI_KEY=sk-abc123 PATH=/usr/bin codex exec",
                "env HOLDOUT_OPENAI_KEY=‹redacted› PATH=/usr/bin codex exec",
            ),
            (
                "tool --api-key s3cr3t --model gpt-5",
                "tool --api-key ‹redacted› --model gpt-5",
            ),
            ("tool --api-key=s3cr3t -v", "tool --api-key=‹redacted› -v"),
            ("tool -token abc", "tool -token ‹redacted›"),
            ("tool --token --verbose", "tool --token --verbose"),
            (
                "curl -H 'Authorization: Bearer abc.def' https://x/",
                "curl -H 'Authorization: Bearer ‹redacted›' https://x/",
            ),
            (
                "curl -H \"X-Api-Key: k1\" -H 'Cookie: a=1; b=2'",
                "curl -H \"X-Api-Key: ‹redacted›\" -H 'Cookie: ‹redacted›'",
            ),
            (
                "git clone https://user:hunter2@example.com/r.git",
                "git clone https://user:‹redacted›@example.com/r.git",
            ),
            (
                "git clone https://ghtoken@example.com/r.git",
                "git clone https://‹redacted›@example.com/r.git",
            ),
            (
                "curl 'https://h/p?a=1&access_token=zz9&b=2' https://h/q?token=t1#f https://h/r?api_key=k&sig=s",
                "curl 'https://h/p?a=1&access_token=‹redacted›&b=2' https://h/q?token=‹redacted›#f https://h/r?api_key=‹redacted›&sig=‹redacted›",
            ),
            (
                "echo ghp_0123456789abcdefghijABCDEFGHIJ012345 github_pat_11AAAAAAA0123456789_abcdef",
                "echo ‹redacted› ‹redacted›",
            ),
            (
                "aws AKIAIOSFODNN7EXAMPLE xoxb-1234567890-abcdef",
                "aws ‹redacted› ‹redacted›",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl end",
                "jwt ‹redacted› end",
            ),
            (
                "key sk-proj-AbCdEf0123456789xyzXYZ in text",
                "key ‹redacted› in text",
            ),
            (
                "'FOO_SECRET=a b c' KEYBOARD=us",
                "'FOO_SECRET=‹redacted›' KEYBOARD=us",
            ),
            (
                r#"curl -d '{"api_key": "v1", "model": "m"}'"#,
                r#"curl -d '{"api_key": "‹redacted›", "model": "m"}'"#,
            ),
            (
                "pip install scikit-learn sk-learn-tutorial-notebook",
                "pip install scikit-learn sk-learn-tutorial-notebook",
            ),
            (
                "ls -la /usr/bin --color=auto",
                "ls -la /usr/bin --color=auto",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(r(input), want, "{input}");
            // Idempotent: redacting twice changes nothing more.
            assert_eq!(r(want), want, "{want}");
        }
        assert!(matches!(text("plain /usr/bin/ls -la"), Cow::Borrowed(_)));
    }

    #[test]
    fn argv_redacts_the_value_after_a_secret_option() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            argv(&v(&[
                "env",
                "HOLDOUT_OPENAI_KEY=sk value",
                "tool",
                "--api-key",
                "a b",
                "--token",
                "--model",
                "gpt-5",
                "-H",
                "Authorization: Bearer x y",
                "--password=p q",
                "KEYBOARD=us",
            ])),
            v(&[
                "env",
                "HOLDOUT_OPENAI_KEY=‹redacted›",
                "tool",
                "--api-key",
                "‹redacted›",
                "--token",
                "--model",
                "gpt-5",
                "-H",
                "Authorization: Bearer ‹redacted›",
                "--password=‹redacted›",
                "KEYBOARD=us",
            ])
        );
    }
}

/// Secrets of each kind the redaction knows, planted in argv, environment
/// assignments, URLs and headers by the report and Perfetto tests.
#[cfg(test)]
pub(crate) mod planted {
    /// Each planted secret value: none may appear in a redacted artifact.
    /// One list (`fixtures/redaction/planted-secrets.txt`) for these unit
    /// tests and the end-to-end test (`tests/tests/redaction.rs`).
    pub fn secrets() -> Vec<&'static str> {
        include_str!("../../../fixtures/redaction/planted-secrets.txt")
            .lines()
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// Recorded text that must stay as it is.
    pub const KEPT: [&str; 4] = ["PATH=/usr/bin", "--model", "gpt-5", "KEYBOARD=us"];

    /// An agent's command line: secrets passed through `env` and options.
    pub fn agent_argv() -> Vec<String> {
        [
            "env",
            "HOLDOUT_OPENAI_KEY=plantedvalue1",
            "PATH=/usr/bin",
            "KEYBOARD=us",
            "GH_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "agent",
            "--api-key",
            "plantedvalue2",
            "--password=plantedvalue3",
            "--model",
            "gpt-5",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// A tool's command line: a header, URLs with credentials and tokens,
    /// and key formats as bare words.
    pub fn tool_argv() -> Vec<String> {
        [
            "curl",
            "-H",
            "Authorization: Bearer plantedvalue8",
            "https://alice:plantedvalue4@git.example.com/r.git",
            "https://h.example/cb?access_token=plantedvalue5&x=1",
            "https://h.example/cb?token=plantedvalue6",
            "https://h.example/cb?api_key=plantedvalue7",
            "sk-proj-Q7x9Lm2Np4Rt6Vw8Yz0Ab1Cd",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "AKIAZ7Q3EXAMPLE4K2LM",
            "xoxb-2719-8xq3-plantedslack",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlcGxhbnRlZA",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    #[test]
    fn every_planted_secret_is_redacted_as_argv_and_as_text() {
        let line = |a: &[String]| crate::sessions::util::join_argv(a);
        for argv in [agent_argv(), tool_argv()] {
            let joined = super::argv(&argv).join(" ");
            let text = super::text(&line(&argv)).into_owned();
            for s in secrets() {
                assert!(!joined.contains(s), "{s} in {joined}");
                assert!(!text.contains(s), "{s} in {text}");
            }
        }
        let text = super::text(&line(&agent_argv())).into_owned();
        for k in KEPT {
            assert!(text.contains(k), "{k} lost: {text}");
        }
    }
}
