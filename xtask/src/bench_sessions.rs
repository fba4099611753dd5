//! `cargo xtask bench sessions`: builds a synthetic home of 10,000 agent
//! transcripts (≥ 2 GB, all seven providers, a realistic size mix plus one
//! 200 MB Claude transcript) under a temp dir and measures the release
//! `agentsight` binary: `sessions` list cold and warm, `session show` of the
//! 200 MB transcript, parse throughput; then compares token totals and speed
//! with ccusage (npm) on Claude and Codex data generated the same way.
//!
//! All content is synthetic and generated here. Set `AGENTSIGHT_BENCH_DIR` to
//! choose where the data goes and `AGENTSIGHT_BENCH_KEEP=1` to keep it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};

/// Session counts per provider (sum 10,000; opencode's live in one
/// database).
const COUNTS: [(Prov, usize); 7] = [
    (Prov::Claude, 3000),
    (Prov::Codex, 2000),
    (Prov::Gemini, 1200),
    (Prov::Cursor, 1000),
    (Prov::Copilot, 1200),
    (Prov::Qwen, 1000),
    (Prov::Opencode, 600),
];
const BIG_BYTES: u64 = 200 * 1024 * 1024;
const MIN_TOTAL_BYTES: u64 = 2 * 1000 * 1000 * 1000;
/// Sessions in the smaller home used for the ccusage totals comparison.
const CMP_PER_PROVIDER: usize = 250;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prov {
    Claude,
    Codex,
    Gemini,
    Cursor,
    Copilot,
    Qwen,
    Opencode,
}

/// Token totals in ccusage's terms: `input` excludes cache reads (Codex:
/// input − cached), `total` = input + output + cache_read + cache_creation.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct Totals {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_creation: u64,
}

impl Totals {
    fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_creation
    }
    fn add(&mut self, o: &Totals) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_creation += o.cache_creation;
    }
}

/// Deterministic xorshift64, so every run builds the same data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

fn uuid(r: &mut Rng) -> String {
    let a = r.next();
    let b = r.next();
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// Epoch seconds → `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn iso(secs: i64, ms: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Plain ASCII filler (no JSON escapes needed) of `n` bytes.
fn filler(n: usize) -> String {
    const WORDS: &str =
        "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ";
    let mut s = String::with_capacity(n);
    while s.len() < n {
        s.push_str(WORDS);
    }
    s.truncate(n);
    s
}

/// Size mix: 70 % small (10–100 KB), 25 % medium (100–600 KB), 5 % large
/// (1–3 MB).
fn pick_size(r: &mut Rng) -> u64 {
    match r.next() % 100 {
        0..=69 => r.range(10_000, 100_000),
        70..=94 => r.range(100_000, 600_000),
        _ => r.range(1_000_000, 3_000_000),
    }
}

/// A buffered file writer that counts the bytes of the lines it writes.
struct Lines {
    w: BufWriter<File>,
    bytes: u64,
}

impl Lines {
    fn create(path: &Path) -> Result<Self> {
        Ok(Lines {
            w: BufWriter::with_capacity(1 << 20, File::create(path)?),
            bytes: 0,
        })
    }
    fn put(&mut self, l: &str) -> Result<()> {
        self.w.write_all(l.as_bytes())?;
        self.w.write_all(b"\n")?;
        self.bytes += l.len() as u64 + 1;
        Ok(())
    }
    fn finish(mut self) -> Result<u64> {
        self.w.flush()?;
        Ok(self.bytes)
    }
}

pub(crate) struct Gen {
    pub(crate) path: PathBuf,
    id: String,
    prov: Prov,
    pub(crate) bytes: u64,
    totals: Totals,
}

fn claude_file(
    dir: &Path,
    r: &mut Rng,
    target: u64,
    start: i64,
    result_bytes: usize,
) -> Result<Gen> {
    let sid = uuid(r);
    let proj = dir.join(format!("-home-bench-p{}", r.next() % 40));
    std::fs::create_dir_all(&proj)?;
    let path = proj.join(format!("{sid}.jsonl"));
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    let mut t = Totals::default();
    let mut bytes = 0u64;
    let mut k = 0u64;
    let env = |kind: &str, uuid: &str, ts: &str| {
        format!(
            r#"{{"type":"{kind}","uuid":"{uuid}","parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/home/bench/p","sessionId":"{sid}","version":"2.1.40","gitBranch":"main","timestamp":"{ts}""#
        )
    };
    let pad = filler(result_bytes);
    while bytes < target {
        k += 1;
        let ts = |o: i64| iso(start + (k as i64) * 20 + o, 0);
        let (i, c, rd, o) = (
            r.range(1, 50),
            r.range(0, 3000),
            r.range(5000, 60000),
            r.range(20, 900),
        );
        t.add(&Totals {
            input: i,
            output: o,
            cache_read: rd,
            cache_creation: c,
        });
        let mid = format!("msg_{}_{k}", &sid[..8]);
        let rid = format!("req_{}_{k}", &sid[..8]);
        let usage = |out: u64| {
            format!(
                r#""usage":{{"input_tokens":{i},"cache_creation_input_tokens":{c},"cache_read_input_tokens":{rd},"output_tokens":{out},"service_tier":"standard"}}"#
            )
        };
        let mut lines = Vec::with_capacity(5);
        lines.push(format!(
            r#"{},"message":{{"role":"user","content":"Please change item {k} in the module"}}}}"#,
            env("user", &format!("u{k}"), &ts(0))
        ));
        lines.push(format!(
            r#"{},"requestId":"{rid}","message":{{"id":"{mid}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"Working on item {k}."}}],"stop_reason":null,"stop_sequence":null,{}}}}}"#,
            env("assistant", &format!("a{k}"), &ts(2)),
            usage(1)
        ));
        lines.push(format!(
            r#"{},"requestId":"{rid}","message":{{"id":"{mid}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"tool_use","id":"toolu_{k}","name":"Bash","input":{{"command":"cargo test -q item_{k}"}}}}],"stop_reason":"tool_use","stop_sequence":null,{}}}}}"#,
            env("assistant", &format!("b{k}"), &ts(3)),
            usage(o)
        ));
        lines.push(format!(
            r#"{},"message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{k}","content":"{pad}"}}]}},"toolUseResult":{{"stdout":"{pad}","stderr":"","interrupted":false}}}}"#,
            env("user", &format!("r{k}"), &ts(9))
        ));
        lines.push(format!(
            r#"{},"data":{{"type":"hook_progress","hookEvent":"PostToolUse"}},"toolUseID":"toolu_{k}"}}"#,
            env("progress", &format!("p{k}"), &ts(9))
        ));
        for l in lines {
            w.write_all(l.as_bytes())?;
            w.write_all(b"\n")?;
            bytes += l.len() as u64 + 1;
        }
    }
    w.flush()?;
    Ok(Gen {
        path,
        id: sid,
        prov: Prov::Claude,
        bytes,
        totals: t,
    })
}

fn codex_file(dir: &Path, r: &mut Rng, target: u64, start: i64) -> Result<Gen> {
    let id = format!("019c{:04x}-{}", r.next() & 0xffff, &uuid(r)[9..]);
    let day = iso(start, 0);
    let d = dir.join(&day[..4]).join(&day[5..7]).join(&day[8..10]);
    std::fs::create_dir_all(&d)?;
    let path = d.join(format!(
        "rollout-{}-{}-{}-{id}.jsonl",
        &day[..10],
        &day[11..13],
        &day[14..16]
    ));
    let mut w = Lines::create(&path)?;
    w.put(
        &format!(
            r#"{{"timestamp":"{}","type":"session_meta","payload":{{"id":"{id}","timestamp":"{}","cwd":"/home/bench/api","originator":"codex_cli_rs","cli_version":"0.110.0","source":"cli","model_provider":"openai","base_instructions":{{"text":"{}"}}}}}}"#,
            iso(start, 0),
            iso(start, 0),
            filler(12_000)
        ),
    )?;
    // Cumulative counters (Codex: input includes cached).
    let (mut ci, mut cc, mut co, mut cr) = (0u64, 0u64, 0u64, 0u64);
    let mut k = 0i64;
    let pad = filler(r.range(2_000, 12_000) as usize);
    while w.bytes < target {
        k += 1;
        let ts = |o: i64| iso(start + k * 30 + o, 0);
        let (cached, fresh, out) = (r.range(2000, 40000), r.range(100, 4000), r.range(20, 800));
        let reason = out / 3;
        ci += cached + fresh;
        cc += cached;
        co += out;
        cr += reason;
        let usage = |i: u64, c: u64, o: u64, rs: u64| {
            format!(
                r#"{{"input_tokens":{i},"cached_input_tokens":{c},"output_tokens":{o},"reasoning_output_tokens":{rs},"total_tokens":{}}}"#,
                i + o
            )
        };
        let tc = format!(
            r#"{{"timestamp":"{}","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{},"last_token_usage":{},"model_context_window":258400}},"rate_limits":null}}}}"#,
            ts(8),
            usage(ci, cc, co, cr),
            usage(cached + fresh, cached, out, reason)
        );
        w.put(&format!(r#"{{"timestamp":"{}","type":"event_msg","payload":{{"type":"user_message","message":"fix item {k}","images":[],"local_images":[],"text_elements":[]}}}}"#, ts(0)))?;
        w.put(&format!(r#"{{"timestamp":"{}","type":"turn_context","payload":{{"turn_id":"t-{k}","cwd":"/home/bench/api","approval_policy":"on-request","sandbox_policy":{{"type":"workspace-write","network_access":false}},"model":"gpt-5.2-codex","effort":"medium","summary":"auto"}}}}"#, ts(0)))?;
        w.put(&format!(r#"{{"timestamp":"{}","type":"response_item","payload":{{"type":"function_call","name":"shell_command","arguments":"{{\"command\":\"pytest -q tests/test_{k}.py\",\"workdir\":\"/home/bench/api\"}}","call_id":"call_{k}"}}}}"#, ts(2)))?;
        w.put(&format!(r#"{{"timestamp":"{}","type":"response_item","payload":{{"type":"function_call_output","call_id":"call_{k}","output":"Exit code: 0\nWall time: 1.0 seconds\nOutput:\n{pad}"}}}}"#, ts(6)))?;
        w.put(&format!(r#"{{"timestamp":"{}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"Item {k} fixed."}}],"phase":"final_answer"}}}}"#, ts(7)))?;
        w.put(&tc)?;
        // Codex re-emits unchanged totals (rate-limit refreshes).
        w.put(&tc)?;
    }
    let bytes = w.finish()?;
    let totals = Totals {
        input: ci - cc,
        output: co,
        cache_read: cc,
        cache_creation: 0,
    };
    Ok(Gen {
        path,
        id,
        prov: Prov::Codex,
        bytes,
        totals,
    })
}

fn gemini_file(dir: &Path, r: &mut Rng, target: u64, start: i64) -> Result<Gen> {
    let id = uuid(r);
    let proj = dir.join(format!("bench-{}", r.next() % 20));
    std::fs::create_dir_all(proj.join("chats"))?;
    let day = iso(start, 0);
    let path = proj.join("chats").join(format!(
        "session-{}-{}-{}-{}.jsonl",
        &day[..10],
        &day[11..13],
        &day[14..16],
        &id[..8]
    ));
    let mut w = Lines::create(&path)?;
    w.put(&format!(r#"{{"sessionId":"{id}","projectHash":"{}","startTime":"{day}","lastUpdated":"{day}","kind":"main"}}"#, "ab".repeat(32)))?;
    let pad = filler(r.range(1_000, 8_000) as usize);
    let mut k = 0i64;
    while w.bytes < target {
        k += 1;
        let ts = |o: i64| iso(start + k * 30 + o, 0);
        w.put(&format!(r#"{{"id":"u-{k}","timestamp":"{}","type":"user","content":[{{"text":"question {k}"}}]}}"#, ts(0)))?;
        let call = format!(
            r#"{{"id":"call-{k}","name":"read_file","args":{{"file_path":"/home/bench/src/f{k}.rs"}},"status":"success","timestamp":"{}","result":[{{"functionResponse":{{"id":"call-{k}","name":"read_file","response":{{"output":"{pad}"}}}}}}]}}"#,
            ts(3)
        );
        w.put(&format!(r#"{{"id":"g-{k}","timestamp":"{}","type":"gemini","content":"","model":"gemini-2.5-flash","toolCalls":[{call}]}}"#, ts(2)))?;
        w.put(&format!(r#"{{"id":"g-{k}","timestamp":"{}","type":"gemini","content":"answer {k}","model":"gemini-2.5-flash","toolCalls":[{call}],"tokens":{{"input":6000,"output":80,"cached":4000,"thoughts":20,"tool":0,"total":6100}}}}"#, ts(2)))?;
        w.put(&format!(r#"{{"$set":{{"lastUpdated":"{}"}}}}"#, ts(4)))?;
    }
    let bytes = w.finish()?;
    Ok(Gen {
        path,
        id,
        prov: Prov::Gemini,
        bytes,
        totals: Totals::default(),
    })
}

fn cursor_file(dir: &Path, r: &mut Rng, target: u64) -> Result<Gen> {
    let id = uuid(r);
    let at = dir
        .join(format!("home-bench-w{}", r.next() % 20))
        .join("agent-transcripts");
    std::fs::create_dir_all(&at)?;
    let path = at.join(format!("{id}.jsonl"));
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    let mut bytes = 0u64;
    let pad = filler(r.range(500, 4_000) as usize);
    let mut k = 0;
    while bytes < target {
        k += 1;
        for l in [
            format!(
                r#"{{"role":"user","message":{{"content":[{{"type":"text","text":"<user_query>\nchange {k}\n</user_query>"}}]}}}}"#
            ),
            format!(
                r#"{{"role":"assistant","message":{{"content":[{{"type":"text","text":"{pad}"}},{{"type":"tool_use","name":"Shell","input":{{"command":"npm test -- {k}","working_directory":"/home/bench/web"}}}}]}}}}"#
            ),
            r#"{"type":"turn_ended","status":"success"}"#.to_string(),
        ] {
            w.write_all(l.as_bytes())?;
            w.write_all(b"\n")?;
            bytes += l.len() as u64 + 1;
        }
    }
    w.flush()?;
    Ok(Gen {
        path,
        id,
        prov: Prov::Cursor,
        bytes,
        totals: Totals::default(),
    })
}

/// Copilot CLI 1.0.102: `session-state/<id>/events.jsonl`, one
/// `session.usage_record` per model call.
fn copilot_file(dir: &Path, r: &mut Rng, target: u64, start: i64) -> Result<Gen> {
    let id = uuid(r);
    let sdir = dir.join(&id);
    std::fs::create_dir_all(&sdir)?;
    let path = sdir.join("events.jsonl");
    let mut w = Lines::create(&path)?;
    let mut prev = uuid(r);
    let day = iso(start, 0);
    w.put(&format!(
        r#"{{"type":"session.start","id":"{prev}","timestamp":"{day}","parentId":null,"data":{{"sessionId":"{id}","version":1,"producer":"copilot-agent","copilotVersion":"1.0.102","startTime":"{day}","selectedModel":"claude-sonnet-4.5","context":{{"cwd":"/home/bench/p{}"}}}}}}"#,
        r.next() % 20
    ))?;
    let pad = filler(r.range(1_000, 8_000) as usize);
    let mut k = 0i64;
    while w.bytes < target {
        k += 1;
        let ts = iso(start + k * 30, 0);
        let mut put = |w: &mut Lines, r: &mut Rng, ty: &str, data: String| -> Result<()> {
            let me = uuid(r);
            w.put(&format!(
                r#"{{"type":"{ty}","id":"{me}","timestamp":"{ts}","parentId":"{prev}","data":{data}}}"#
            ))?;
            prev = me;
            Ok(())
        };
        put(
            &mut w,
            r,
            "user.message",
            format!(r#"{{"content":"question {k}","interactionId":"i{k}"}}"#),
        )?;
        put(
            &mut w,
            r,
            "assistant.turn_start",
            format!(r#"{{"turnId":"{k}"}}"#),
        )?;
        put(
            &mut w,
            r,
            "session.usage_record",
            format!(
                r#"{{"usage":{{"model":"claude-sonnet-4.5","inputTokens":6000,"outputTokens":80,"cacheReadTokens":4000,"cacheWriteTokens":0,"accounting":{{"sourceSessionId":"{id}","sequence":{k}}}}}}}"#
            ),
        )?;
        put(
            &mut w,
            r,
            "assistant.message",
            format!(
                r#"{{"messageId":"m{k}","model":"claude-sonnet-4.5","content":"answer {k}","toolRequests":[{{"toolCallId":"call_{k}","name":"view","arguments":{{"path":"/home/bench/src/f{k}.rs"}},"type":"function"}}],"turnId":"{k}"}}"#
            ),
        )?;
        put(
            &mut w,
            r,
            "tool.execution_start",
            format!(
                r#"{{"toolCallId":"call_{k}","toolName":"view","arguments":{{"path":"/home/bench/src/f{k}.rs"}},"turnId":"{k}"}}"#
            ),
        )?;
        put(
            &mut w,
            r,
            "tool.execution_complete",
            format!(r#"{{"toolCallId":"call_{k}","success":true,"result":{{"content":"{pad}"}}}}"#),
        )?;
        put(
            &mut w,
            r,
            "assistant.turn_end",
            format!(r#"{{"turnId":"{k}"}}"#),
        )?;
    }
    let bytes = w.finish()?;
    Ok(Gen {
        path,
        id,
        prov: Prov::Copilot,
        bytes,
        totals: Totals::default(),
    })
}

/// Qwen Code 0.24.4: `projects/<cwd, / → ->/chats/<id>.jsonl`.
fn qwen_file(dir: &Path, r: &mut Rng, target: u64, start: i64) -> Result<Gen> {
    let id = uuid(r);
    let cwd = format!("/home/bench/p{}", r.next() % 20);
    let chats = dir.join(cwd.replace('/', "-")).join("chats");
    std::fs::create_dir_all(&chats)?;
    let path = chats.join(format!("{id}.jsonl"));
    let mut w = Lines::create(&path)?;
    let pad = filler(r.range(1_000, 8_000) as usize);
    let mut prev = "null".to_string();
    let mut k = 0i64;
    while w.bytes < target {
        k += 1;
        let ts = iso(start + k * 30, 0);
        for (ty, rest) in [
            (
                "user",
                format!(r#""message":{{"role":"user","parts":[{{"text":"question {k}"}}]}}"#),
            ),
            (
                "assistant",
                format!(
                    r#""model":"qwen3-coder-plus","message":{{"role":"model","parts":[{{"text":"answer {k}"}},{{"functionCall":{{"id":"call_{k}","name":"read_file","args":{{"absolute_path":"/home/bench/src/f{k}.rs"}}}}}}]}},"usageMetadata":{{"promptTokenCount":6000,"candidatesTokenCount":80,"cachedContentTokenCount":4000,"thoughtsTokenCount":20,"totalTokenCount":6100}}"#
                ),
            ),
            (
                "tool_result",
                format!(
                    r#""message":{{"role":"user","parts":[{{"functionResponse":{{"id":"call_{k}","name":"read_file","response":{{"output":"{pad}"}}}}}}]}},"toolCallResult":{{"callId":"call_{k}","status":"success"}}"#
                ),
            ),
        ] {
            let me = uuid(r);
            w.put(&format!(
                r#"{{"uuid":"{me}","parentUuid":{prev},"sessionId":"{id}","timestamp":"{ts}","type":"{ty}","cwd":"{cwd}","version":"0.24.4",{rest}}}"#
            ))?;
            prev = format!("\"{me}\"");
        }
    }
    let bytes = w.finish()?;
    Ok(Gen {
        path,
        id,
        prov: Prov::Qwen,
        bytes,
        totals: Totals::default(),
    })
}

/// opencode 1.18.33's tables, as its own migrations create them (the
/// columns the reader uses; the rest of the schema does not matter here).
const OPENCODE_SCHEMA: &str = "
PRAGMA journal_mode=WAL;
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text,
  time_created integer NOT NULL, time_updated integer NOT NULL, sandboxes text NOT NULL);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, workspace_id text,
  parent_id text, slug text NOT NULL, directory text NOT NULL, path text, title text NOT NULL,
  version text NOT NULL, cost real DEFAULT 0 NOT NULL, tokens_input integer DEFAULT 0 NOT NULL,
  tokens_output integer DEFAULT 0 NOT NULL, tokens_reasoning integer DEFAULT 0 NOT NULL,
  tokens_cache_read integer DEFAULT 0 NOT NULL, tokens_cache_write integer DEFAULT 0 NOT NULL,
  agent text, model text, time_created integer NOT NULL, time_updated integer NOT NULL,
  time_compacting integer, time_archived integer);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_idx ON message (session_id);
CREATE INDEX part_message_idx ON part (message_id);
CREATE INDEX part_session_idx ON part (session_id);
INSERT INTO project VALUES ('global', '/', NULL, NULL, 0, 0, '[]');
";

/// opencode: `n` sessions in one database (`opencode.db`, WAL), each a
/// few turns of a read call (10–60 KB of rows); one [`Gen`] per session,
/// all with the database's path.
fn opencode_db(db: &Path, r: &mut Rng, n: usize, now: i64) -> Result<Vec<Gen>> {
    std::fs::create_dir_all(db.parent().context("database dir")?)?;
    let mut c = rusqlite::Connection::open(db)?;
    c.execute_batch(OPENCODE_SCHEMA)?;
    let tx = c.transaction()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("ses_bench{i:05}{:012x}", r.next() & 0xffff_ffff_ffff);
        let start_ms = (now - r.range(60, 90 * 86_400) as i64 - 3600) * 1000;
        let turns = r.range(1, 6) as i64;
        let pad = filler(r.range(1_000, 9_000) as usize);
        let mut bytes = 0u64;
        for k in 0..turns {
            let t = start_ms + k * 30_000;
            let user = format!("msg_{id}_{k}u");
            let asst = format!("msg_{id}_{k}a");
            let rows = [
                (&user, r#"{"role":"user","time":{"created":T},"agent":"build","model":{"providerID":"local","modelID":"m"}}"#.replace('T', &t.to_string())),
                (&asst, format!(r#"{{"parentID":"{user}","role":"assistant","mode":"build","agent":"build","path":{{"cwd":"/home/bench/p{}","root":"/"}},"cost":0,"tokens":{{"total":6100,"input":2000,"output":80,"reasoning":20,"cache":{{"write":0,"read":4000}}}},"modelID":"m","providerID":"local","time":{{"created":{t},"completed":{}}},"finish":"stop"}}"#, i % 20, t + 2000)),
            ];
            for (mid, data) in rows {
                bytes += data.len() as u64;
                tx.execute(
                    "INSERT INTO message VALUES (?1, ?2, ?3, ?3, ?4)",
                    rusqlite::params![mid, id, t, data],
                )?;
            }
            let parts = [
                (&user, format!(r#"{{"type":"text","text":"question {k}"}}"#)),
                (&asst, format!(r#"{{"type":"tool","tool":"read","callID":"call_{k}","state":{{"status":"completed","input":{{"filePath":"/home/bench/src/f{k}.rs"}},"output":"{pad}","title":"f{k}.rs","time":{{"start":{t},"end":{}}}}}}}"#, t + 500)),
                (&asst, r#"{"type":"step-finish","reason":"stop","tokens":{"total":6100,"input":2000,"output":80,"reasoning":20,"cache":{"write":0,"read":4000}},"cost":0}"#.to_string()),
            ];
            for (j, (mid, data)) in parts.into_iter().enumerate() {
                bytes += data.len() as u64;
                let pid = format!("prt_{id}_{k}_{j}");
                tx.execute(
                    "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                    rusqlite::params![pid, mid, id, t, data],
                )?;
            }
        }
        let end_ms = start_ms + turns * 30_000;
        tx.execute(
            "INSERT INTO session (id, project_id, slug, directory, path, title, version, tokens_input, \
             tokens_output, tokens_reasoning, tokens_cache_read, agent, model, time_created, time_updated) \
             VALUES (?1, 'global', 'bench', ?2, ?3, 'bench', '1.18.33', ?4, ?5, ?6, ?7, 'build', \
             '{\"id\":\"m\",\"providerID\":\"local\"}', ?8, ?9)",
            rusqlite::params![id, format!("/home/bench/p{}", i % 20), format!("home/bench/p{}", i % 20), 2000 * turns, 80 * turns, 20 * turns, 4000 * turns, start_ms, end_ms],
        )?;
        out.push(Gen {
            path: db.to_path_buf(),
            id,
            prov: Prov::Opencode,
            bytes,
            totals: Totals::default(),
        });
    }
    tx.commit()?;
    Ok(out)
}

fn set_age(path: &Path, secs: u64) -> Result<()> {
    let f = File::options().write(true).open(path)?;
    f.set_modified(SystemTime::now() - Duration::from_secs(secs))?;
    Ok(())
}

/// Builds a home; `per` overrides the per-provider counts (comparison home).
fn build_home(home: &Path, per: Option<usize>, provs: &[Prov], seed: u64) -> Result<Vec<Gen>> {
    let mut r = Rng(seed);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .context("clock")?
        .as_secs() as i64;
    let mut out = Vec::new();
    for (p, n) in COUNTS {
        if !provs.contains(&p) {
            continue;
        }
        let n = per.unwrap_or(n);
        if p == Prov::Opencode {
            let db = home.join(".local/share/opencode/opencode.db");
            out.extend(opencode_db(&db, &mut r, n, now)?);
            continue;
        }
        for _ in 0..n {
            let size = pick_size(&mut r);
            let age = r.range(60, 90 * 86_400);
            let start = now - age as i64 - 3600;
            let g = match p {
                Prov::Claude => {
                    let result_bytes = r.range(1_000, 9_000) as usize;
                    claude_file(
                        &home.join(".claude/projects"),
                        &mut r,
                        size,
                        start,
                        result_bytes,
                    )?
                }
                Prov::Codex => codex_file(&home.join(".codex/sessions"), &mut r, size, start)?,
                Prov::Gemini => gemini_file(&home.join(".gemini/tmp"), &mut r, size, start)?,
                Prov::Cursor => cursor_file(&home.join(".cursor/projects"), &mut r, size)?,
                Prov::Copilot => {
                    copilot_file(&home.join(".copilot/session-state"), &mut r, size, start)?
                }
                Prov::Qwen => qwen_file(&home.join(".qwen/projects"), &mut r, size, start)?,
                Prov::Opencode => unreachable!("built above"),
            };
            set_age(&g.path, age)?;
            out.push(g);
        }
    }
    Ok(out)
}

pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    let o = Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let s = String::from_utf8_lossy(&o.stdout);
    let line = s.lines().nth(1)?;
    line.split_whitespace()
        .nth(3)?
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

pub(crate) fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Runs a command with stdout captured; returns (elapsed, stdout).
fn timed(cmd: &mut Command) -> Result<(Duration, Vec<u8>)> {
    let t = Instant::now();
    let o = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    let el = t.elapsed();
    if !o.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok((el, o.stdout))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// agentsight usage of one session via `session show --json`, in ccusage terms.
fn agentsight_usage(bin: &Path, home: &Path, id: &str) -> Result<(Totals, Duration)> {
    let (el, out) = timed(
        Command::new(bin)
            .args(["session", "show", id, "--json", "--home"])
            .arg(home),
    )?;
    let v: serde_json::Value = serde_json::from_slice(&out).context("show --json output")?;
    let u = &v["usage"];
    let g = |k: &str| u[k].as_u64().unwrap_or(0);
    Ok((
        Totals {
            input: g("input"),
            output: g("output"),
            cache_read: g("cache_read"),
            cache_creation: g("cache_creation"),
        },
        el,
    ))
}

fn install_ccusage(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let bin = dir.join("node_modules/.bin/ccusage");
    // The newest release's native linux binary can lag behind its JS shim on
    // registry mirrors, so fall back to the last pinned pair that is known to
    // ship both.
    for spec in [
        &["ccusage"][..],
        &["ccusage@20.0.24", "@ccusage/ccusage-linux-x64@20.0.24"][..],
    ] {
        let st = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent"])
            .args(spec)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("running npm (is Node.js installed?)")?;
        if st.status.success()
            && Command::new(&bin)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        {
            return Ok(bin);
        }
    }
    bail!("npm install ccusage did not produce a working ccusage binary")
}

/// ccusage totals (`totals` object of `<cmd> daily --json --offline`).
fn ccusage_totals(bin: &Path, home: &Path, which: &str) -> Result<(Totals, Duration)> {
    let mut c = Command::new(bin);
    c.args([which, "daily", "--json", "--offline"])
        .env("HOME", home);
    match which {
        "claude" => c.env("CLAUDE_CONFIG_DIR", home.join(".claude")),
        _ => c.env("CODEX_HOME", home.join(".codex")),
    };
    let (el, out) = timed(&mut c)?;
    let v: serde_json::Value = serde_json::from_slice(&out).context("ccusage --json output")?;
    let t = &v["totals"];
    let g = |k: &str| t[k].as_u64().unwrap_or(0);
    Ok((
        Totals {
            input: g("inputTokens"),
            output: g("outputTokens"),
            cache_read: g("cacheReadTokens"),
            cache_creation: g("cacheCreationTokens"),
        },
        el,
    ))
}

/// Entry point. `agentsight` is the release binary to measure.
pub fn run(agentsight: &Path) -> Result<()> {
    let base = std::env::var_os("AGENTSIGHT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("agentsight-bench-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    let need = 3 * MIN_TOTAL_BYTES / 2 + BIG_BYTES;
    if let Some(free) = free_bytes(&base)
        && free < need
    {
        bail!(
            "{} has {:.1} GB free; the bench needs about {:.1} GB",
            base.display(),
            mb(free) / 1e3,
            mb(need) / 1e3
        );
    }
    let keep = std::env::var_os("AGENTSIGHT_BENCH_KEEP").is_some();
    let r = bench(agentsight, &base);
    if keep {
        println!("data kept in {}", base.display());
    } else {
        let _ = std::fs::remove_dir_all(&base);
    }
    r
}

/// The bench home: 10,000 transcripts of all seven providers plus one 200 MB
/// Claude transcript (a month old, so the list measures typical rows).
/// Also `cargo xtask bench top`'s home.
pub(crate) fn build_bench_home(home: &Path) -> Result<(Vec<Gen>, Gen)> {
    let all = [
        Prov::Claude,
        Prov::Codex,
        Prov::Gemini,
        Prov::Cursor,
        Prov::Copilot,
        Prov::Qwen,
        Prov::Opencode,
    ];
    let gens = build_home(home, None, &all, 0x5eed_1234_abcd_0001)?;
    let mut r = Rng(0xb16_b16);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_secs() as i64;
    let big = claude_file(
        &home.join(".claude/projects"),
        &mut r,
        BIG_BYTES,
        now - 30 * 86_400,
        16_000,
    )?;
    set_age(&big.path, 30 * 86_400)?;
    Ok((gens, big))
}

/// Bytes the bench home needs on disk (with room to spare).
pub(crate) const BENCH_HOME_BYTES: u64 = MIN_TOTAL_BYTES + MIN_TOTAL_BYTES / 4 + BIG_BYTES;

fn bench(bin: &Path, base: &Path) -> Result<()> {
    let home = base.join("home");
    let (mut gens, big) = build_and_describe_home(&home)?;
    let list = measure_list(bin, &home)?;
    let show = measure_show(bin, &home, &big, &mut gens)?;
    print_agentsight(bin, &list, &show, &big);
    let ccusage = compare_with_ccusage(bin, base)?;
    // Speed on the full data: ccusage over all Claude + Codex transcripts
    // versus agentsight's measured parse rate over the same bytes.
    if let Some(cc) = &ccusage {
        ccusage_on_the_full_home(cc, &home, &gens, &big, show.big_rate);
    }
    Ok(())
}

/// Builds the bench home and prints what it holds.
fn build_and_describe_home(home: &Path) -> Result<(Vec<Gen>, Gen)> {
    println!("building synthetic home in {} …", home.display());
    let t = Instant::now();
    let (gens, big) = build_bench_home(home)?;
    let total_bytes: u64 = gens.iter().map(|g| g.bytes).sum::<u64>() + big.bytes;
    let files = gens.len() + 1;
    println!(
        "  {files} transcripts, {:.2} GB, generated in {:.1} s",
        mb(total_bytes) / 1e3,
        t.elapsed().as_secs_f64()
    );
    for (p, _) in COUNTS {
        let (n, b) = gens
            .iter()
            .filter(|g| g.prov == p)
            .fold((0, 0u64), |a, g| (a.0 + 1, a.1 + g.bytes));
        println!("    {p:?}: {n} files, {:.0} MB", mb(b));
    }
    if total_bytes < MIN_TOTAL_BYTES {
        bail!("generated only {:.2} GB", mb(total_bytes) / 1e3);
    }
    Ok((gens, big))
}

/// `sessions --json` over the bench home: cold (page cache dropped when
/// permitted) and warm (median of 7).
struct ListTimes {
    cold: Duration,
    warm: Duration,
    dropped: bool,
    rows: usize,
}

fn measure_list(bin: &Path, home: &Path) -> Result<ListTimes> {
    let list = || {
        let mut c = Command::new(bin);
        c.args(["sessions", "--json", "--home"]).arg(home);
        c
    };
    let dropped = drop_caches();
    let (cold, out) = timed(&mut list())?;
    let rows: serde_json::Value = serde_json::from_slice(&out).context("sessions --json")?;
    let n_rows = rows.as_array().map_or(0, |a| a.len());
    let warm = median(
        (0..7)
            .map(|_| timed(&mut list()).map(|x| x.0))
            .collect::<Result<Vec<_>>>()?,
    );
    Ok(ListTimes {
        cold,
        warm,
        dropped,
        rows: n_rows,
    })
}

/// `session show` of the 200 MB transcript (median of 3), and over a
/// sample of ordinary sessions (which includes process start and id
/// lookup, so it understates pure parsing).
struct ShowTimes {
    big: Duration,
    big_rate: f64,
    sample: usize,
    sample_bytes: u64,
    sample_time: Duration,
}

fn measure_show(bin: &Path, home: &Path, big: &Gen, gens: &mut [Gen]) -> Result<ShowTimes> {
    let show = || {
        let mut c = Command::new(bin);
        c.args(["session", "show", &big.id, "--json", "--home"])
            .arg(home);
        c
    };
    let _ = timed(&mut show())?;
    let show_t = median(
        (0..3)
            .map(|_| timed(&mut show()).map(|x| x.0))
            .collect::<Result<Vec<_>>>()?,
    );
    let big_rate = mb(big.bytes) / show_t.as_secs_f64();

    // Throughput over a sample of ordinary sessions (includes process start
    // and id lookup, so it understates pure parsing).
    gens.sort_by_key(|g| std::cmp::Reverse(g.bytes));
    let sample: Vec<&Gen> = gens
        .iter()
        .filter(|g| g.bytes > 1_000_000)
        .take(40)
        .collect();
    let (mut sb, mut st) = (0u64, Duration::ZERO);
    for g in &sample {
        let (el, _) = timed(
            Command::new(bin)
                .args(["session", "show", &g.id, "--json", "--home"])
                .arg(home),
        )?;
        sb += g.bytes;
        st += el;
    }
    Ok(ShowTimes {
        big: show_t,
        big_rate,
        sample: sample.len(),
        sample_bytes: sb,
        sample_time: st,
    })
}

fn print_agentsight(bin: &Path, list: &ListTimes, show: &ShowTimes, big: &Gen) {
    println!("\nagentsight (release: {})", bin.display());
    println!(
        "  sessions list, cold{}: {}   (target ≤ 1500 ms; {} rows)",
        if list.dropped {
            ""
        } else {
            " (page cache NOT dropped: not root)"
        },
        ms(list.cold),
        list.rows
    );
    println!(
        "  sessions list, warm (median of 7): {}   (target ≤ 50 ms)",
        ms(list.warm)
    );
    println!(
        "  session show, {:.0} MB Claude transcript (median of 3): {}  → {:.0} MB/s   (target ≥ 300 MB/s)",
        mb(big.bytes),
        ms(show.big),
        show.big_rate
    );
    if show.sample > 0 {
        println!(
            "  session show over {} sessions of 1–3 MB: {:.0} MB in {} → {:.0} MB/s incl. process start + lookup",
            show.sample,
            mb(show.sample_bytes),
            ms(show.sample_time),
            mb(show.sample_bytes) / show.sample_time.as_secs_f64()
        );
    }
}

/// Token totals of agentsight, ccusage and the generator's truth on a
/// Claude + Codex home built the same way; returns ccusage when it could be
/// installed.
fn compare_with_ccusage(bin: &Path, base: &Path) -> Result<Option<PathBuf>> {
    println!(
        "\nccusage comparison ({CMP_PER_PROVIDER} Claude + {CMP_PER_PROVIDER} Codex sessions)"
    );
    let cmp_home = base.join("cmp-home");
    let cmp = build_home(
        &cmp_home,
        Some(CMP_PER_PROVIDER),
        &[Prov::Claude, Prov::Codex],
        0xc0ff_ee00_1234,
    )?;
    let ccusage = match install_ccusage(&base.join("ccusage")) {
        Ok(b) => Some(b),
        Err(e) => {
            println!("  ccusage unavailable, comparison skipped: {e:#}");
            None
        }
    };
    for (prov, which) in [(Prov::Claude, "claude"), (Prov::Codex, "codex")] {
        let mine: Vec<&Gen> = cmp.iter().filter(|g| g.prov == prov).collect();
        let mut truth = Totals::default();
        let mut ours = Totals::default();
        let mut ours_t = Duration::ZERO;
        let bytes: u64 = mine.iter().map(|g| g.bytes).sum();
        for g in &mine {
            truth.add(&g.totals);
            let (u, el) = agentsight_usage(bin, &cmp_home, &g.id)?;
            ours.add(&u);
            ours_t += el;
        }
        println!("  {which}: {} files, {:.0} MB", mine.len(), mb(bytes));
        println!(
            "    generator truth: input {} output {} cache_read {} cache_write {} total {}",
            truth.input,
            truth.output,
            truth.cache_read,
            truth.cache_creation,
            truth.total()
        );
        println!(
            "    agentsight     : input {} output {} cache_read {} cache_write {} total {}   ({} separate `session show` runs: {})",
            ours.input,
            ours.output,
            ours.cache_read,
            ours.cache_creation,
            ours.total(),
            mine.len(),
            ms(ours_t)
        );
        if let Some(cc) = &ccusage {
            match ccusage_totals(cc, &cmp_home, which) {
                Ok((t, el)) => {
                    println!(
                        "    ccusage        : input {} output {} cache_read {} cache_write {} total {}   (one run: {})",
                        t.input,
                        t.output,
                        t.cache_read,
                        t.cache_creation,
                        t.total(),
                        ms(el)
                    );
                    println!(
                        "    totals {}",
                        if t == ours {
                            "AGREE"
                        } else {
                            "DIFFER (see the double-counting rules in sessions::TokenUsage docs)"
                        }
                    );
                }
                Err(e) => println!("    ccusage failed: {e:#}"),
            }
        }
        if ours != truth {
            println!("    WARNING: agentsight differs from the generator's truth");
        }
    }
    Ok(ccusage)
}

fn ccusage_on_the_full_home(cc: &Path, home: &Path, gens: &[Gen], big: &Gen, big_rate: f64) {
    let cx_bytes: u64 = gens
        .iter()
        .filter(|g| matches!(g.prov, Prov::Claude | Prov::Codex))
        .map(|g| g.bytes)
        .sum::<u64>()
        + big.bytes;
    let mut tot = Duration::ZERO;
    for which in ["claude", "codex"] {
        match ccusage_totals(cc, home, which) {
            Ok((_, el)) => tot += el,
            Err(e) => println!("  ccusage {which} on the full home failed: {e:#}"),
        }
    }
    println!(
        "\n  full home, Claude + Codex ({:.2} GB): ccusage {} ({:.0} MB/s); agentsight parse at {:.0} MB/s ≈ {}",
        mb(cx_bytes) / 1e3,
        ms(tot),
        mb(cx_bytes) / tot.as_secs_f64(),
        big_rate,
        ms(Duration::from_secs_f64(mb(cx_bytes) / big_rate))
    );
}
