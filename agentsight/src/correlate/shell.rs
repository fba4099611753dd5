//! Shell-command understanding for argv matching: what a transcript says was
//! run (`bash -lc 'npm test'`, `ls -la`, a Claude Code `eval '…'` wrapper) and
//! whether an exec argv the kernel saw is that command.
//!
//! Agents record a command as text, but the kernel sees argv arrays: the same
//! command can appear as `["bash","-c","npm test"]`, `["/bin/bash","-c","-l",
//! "… eval 'npm test' …"]` (Claude Code's snapshot wrapper), or, for a simple
//! command, `["ls","-la"]`. Codex records `bash -lc CMD` but runs `bash -c CMD`
//! under a re-exec of itself, so wrappers are unwrapped on both sides.
//!
//! Why [`split`] is hand-written: `shell-words` (1.x) splits on blanks only,
//! so the operators argv matching cuts scripts at stay glued to words —
//! `split("echo ok>x")` gives `["echo", "ok>x"]`, `"cd /w&&npm test"` gives
//! `["cd", "/w&&npm", "test"]`, `"a|b"` one word — and a newline is a blank
//! to it, not a command separator. `brush-parser` parses whole bash
//! programs into an AST (expansions, compound commands); matching needs
//! only words and operators, so it was not adopted.

/// Splits a command line into words the way a POSIX shell would for simple
/// commands: quotes and backslashes are honoured, unquoted operators
/// (`&&`, `||`, `;`, `|`, `&`, newlines, redirections) become their own tokens.
/// Returns `None` for an unterminated quote.
pub fn split(s: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        x => cur.push(x),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            x @ ('"' | '\\' | '$' | '`') => cur.push(x),
                            '\n' => {}
                            x => {
                                cur.push('\\');
                                cur.push(x);
                            }
                        },
                        x => cur.push(x),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(x) => cur.push(x),
                }
            }
            c if c == ' ' || c == '\t' => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '&' | '|' | ';' | '\n' | '<' | '>' | '(' | ')' => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                let mut op = c.to_string();
                if let Some(&n) = chars.peek()
                    && ((c == '&' && n == '&')
                        || (c == '|' && n == '|')
                        || (c == '>' && (n == '>' || n == '|'))
                        || (c == ';' && n == ';'))
                {
                    op.push(n);
                    chars.next();
                }
                out.push(op);
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Some(out)
}

fn is_operator(tok: &str) -> bool {
    matches!(
        tok,
        "&&" | "||" | ";" | ";;" | "|" | "&" | "\n" | "<" | ">" | ">>" | ">|" | "(" | ")"
    )
}

const SHELLS: [&str; 5] = ["bash", "sh", "zsh", "dash", "ksh"];

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// If `argv[i..]` is `SHELL [opts…] -c [opts…] SCRIPT …`, returns SCRIPT's
/// index. Options like `-l`, `-e`, `-o pipefail`, combined `-lc` and bash's
/// long ones (`--norc --noprofile`, as Copilot CLI runs every command;
/// `--rcfile FILE`) are understood.
fn shell_script_at(argv: &[String], i: usize) -> Option<usize> {
    if !SHELLS.contains(&basename(argv.get(i)?)) {
        return None;
    }
    let mut saw_c = false;
    let mut j = i + 1;
    while let Some(a) = argv.get(j) {
        if a == "-o" || a == "+o" || a == "--rcfile" || a == "--init-file" {
            j += 2;
            continue;
        }
        if a.len() > 2
            && a.starts_with("--")
            && a[2..].chars().all(|c| c.is_ascii_alphabetic() || c == '-')
        {
            j += 1;
            continue;
        }
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty() && *f != "-") {
            if flags.chars().all(|c| c.is_ascii_alphabetic()) {
                saw_c |= flags.contains('c');
                j += 1;
                continue;
            }
            return None;
        }
        break;
    }
    (saw_c && j < argv.len()).then_some(j)
}

/// The script an argv runs through a shell (`bash -c SCRIPT`), looked for at
/// any position so that launchers (`env`, `timeout`, a re-exec of the agent
/// itself) in front of the shell do not hide it.
pub fn shell_script(argv: &[String]) -> Option<&str> {
    (0..argv.len())
        .find_map(|i| shell_script_at(argv, i))
        .map(|j| argv[j].as_str())
}

/// What a transcript command means: the innermost script after removing
/// `bash -c`/`bash -lc`/`sh -c` wrappers written into the command itself.
pub fn claimed_script(command: &str) -> String {
    let mut cur = command.trim().to_string();
    // Bounded: each round strips one wrapper.
    for _ in 0..4 {
        let Some(toks) = split(&cur) else { break };
        match shell_script_at(&toks, 0) {
            // Only a wrapper with nothing after the script is a pure wrapper.
            Some(j) if j + 1 == toks.len() => cur = toks[j].trim().to_string(),
            _ => break,
        }
    }
    cur
}

/// How an exec argv matches a claimed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgvMatch {
    /// A shell ran exactly the claimed script.
    ShellScript,
    /// A shell ran a script that contains the claimed command (e.g. Claude
    /// Code's `source snapshot && eval 'CMD'` wrapper).
    ShellWrapper,
    /// The argv is the claimed simple command word for word.
    Words,
}

/// Quotes `s` for a POSIX shell the way agents embed a command in `eval '…'`.
fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Whether `argv` runs the claimed `script` (already unwrapped with
/// [`claimed_script`]).
pub fn argv_matches(argv: &[String], script: &str) -> Option<ArgvMatch> {
    let script = script.trim();
    if script.is_empty() || argv.is_empty() {
        return None;
    }
    if let Some(t) = shell_script(argv) {
        let t = t.trim();
        if t == script || claimed_script(t) == script {
            return Some(ArgvMatch::ShellScript);
        }
        // Containment only for commands long enough not to match by chance.
        if script.len() >= 6 && (t.contains(&single_quoted(script)) || t.contains(script)) {
            return Some(ArgvMatch::ShellWrapper);
        }
        // `eval WORD` whose word, unquoted, is the script: whatever quoting
        // the agent used (Claude Code 2.1 writes a quote as `'"'"'`, not
        // `'\''`), and however short the command.
        if let Some(toks) = split(t)
            && toks
                .windows(2)
                .any(|w| w[0] == "eval" && w[1].trim() == script)
        {
            return Some(ArgvMatch::ShellWrapper);
        }
        return None;
    }
    let toks = split(script)?;
    if toks.is_empty() || toks.iter().any(|t| is_operator(t)) || toks.len() != argv.len() {
        return None;
    }
    let first_ok = if toks[0].contains('/') {
        toks[0] == argv[0]
    } else {
        basename(&argv[0]) == toks[0]
    };
    (first_ok && toks[1..] == argv[1..]).then_some(ArgvMatch::Words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split(r#"echo "a b" 'c d' e\ f"#).unwrap(),
            v(&["echo", "a b", "c d", "e f"])
        );
        assert_eq!(
            split("cat a.txt | wc -l && echo ok>x").unwrap(),
            v(&[
                "cat", "a.txt", "|", "wc", "-l", "&&", "echo", "ok", ">", "x"
            ])
        );
        assert_eq!(split("echo 'open"), None);
        assert_eq!(
            split(r#"printf "\"q\" \$HOME""#).unwrap(),
            v(&["printf", "\"q\" $HOME"])
        );
    }

    #[test]
    fn unwraps_shell_wrappers() {
        assert_eq!(claimed_script("bash -lc 'npm test'"), "npm test");
        assert_eq!(claimed_script("bash -lc ls"), "ls");
        assert_eq!(claimed_script("/bin/sh -c \"echo hi > x\""), "echo hi > x");
        assert_eq!(claimed_script("bash -c 'a' extra"), "bash -c 'a' extra");
        assert_eq!(claimed_script("ls -la"), "ls -la");
    }

    #[test]
    fn matches_argv() {
        assert_eq!(
            argv_matches(&v(&["bash", "-c", "npm test"]), "npm test"),
            Some(ArgvMatch::ShellScript)
        );
        assert_eq!(
            argv_matches(&v(&["/usr/bin/bash", "-lc", "npm test"]), "npm test"),
            Some(ArgvMatch::ShellScript)
        );
        // Codex re-execs itself, then bash -c.
        assert_eq!(
            argv_matches(
                &v(&["/proc/self/exe", "--sandbox", "--", "bash", "-c", "ls"]),
                "ls"
            ),
            Some(ArgvMatch::ShellScript)
        );
        // Claude Code's wrapper.
        let w = "source /h/.claude/shell-snapshots/s.sh && eval 'echo '\\''hi'\\'' > a' \\< /dev/null && pwd -P >| /tmp/c";
        assert_eq!(
            argv_matches(&v(&["/bin/bash", "-c", "-l", w]), "echo 'hi' > a"),
            Some(ArgvMatch::ShellWrapper)
        );
        // Claude Code 2.1.328 quotes a quote as '"'"'.
        let w = r#"source /h/.claude/shell-snapshots/s.sh 2>/dev/null || true && \builtin shopt -u extglob 2>/dev/null || true && eval 'ls '"'"'.'"'"'' < /dev/null && pwd -P >| /tmp/c"#;
        assert_eq!(
            argv_matches(&v(&["/bin/bash", "-c", "-l", w]), "ls '.'"),
            Some(ArgvMatch::ShellWrapper)
        );
        assert_eq!(
            argv_matches(&v(&["/bin/bash", "-c", "-l", "eval 'ls'"]), "ls"),
            Some(ArgvMatch::ShellWrapper)
        );
        assert_eq!(
            argv_matches(&v(&["/bin/bash", "-c", "-l", "eval 'ls -a'"]), "ls"),
            None
        );
        assert_eq!(
            argv_matches(&v(&["ls", "-la"]), "ls -la"),
            Some(ArgvMatch::Words)
        );
        assert_eq!(
            argv_matches(&v(&["/usr/bin/ls", "-la"]), "ls -la"),
            Some(ArgvMatch::Words)
        );
        assert_eq!(argv_matches(&v(&["ls", "-l"]), "ls -la"), None);
        assert_eq!(argv_matches(&v(&["cat", "a"]), "cat a | wc"), None);
        assert_eq!(argv_matches(&v(&["bash", "-c", "ls"]), "pwd"), None);
        // Copilot CLI 1.0.102 runs each shell call this way.
        assert_eq!(
            argv_matches(
                &v(&[
                    "/bin/bash",
                    "--norc",
                    "--noprofile",
                    "-c",
                    "cat a && wc -l a"
                ]),
                "cat a && wc -l a"
            ),
            Some(ArgvMatch::ShellScript)
        );
        assert_eq!(
            shell_script(&v(&["bash", "--rcfile", "/h/rc", "-c", "ls"])),
            Some("ls")
        );
    }
}
