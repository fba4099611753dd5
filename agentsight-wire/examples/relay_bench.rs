//! The relay's cost, measured on loopback in one run:
//! - per-chunk latency of an SSE stream (chunks 2 ms apart, each stamped by
//!   the upstream with CLOCK_MONOTONIC when written), read by a client
//!   directly and through the relay (p50, p99);
//! - body throughput of a 256 MiB response, directly and through the relay;
//! - the relay's peak RSS (VmHWM): the relay runs in a child process (this
//!   example started again with `serve`), so only its memory is counted.
//!
//! `cargo run --release -p agentsight-wire --example relay_bench`
//! (`cargo xtask bench relay` runs it). Targets: +≤ 1 ms p50, +≤ 5 ms p99
//! per chunk, ≥ 100 MB/s, RSS ≤ 16 MiB; it exits 1 when one is missed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentsight_wire::monotonic_ns;
use agentsight_wire::relay::{Relay, RelayConfig};
use agentsight_wire::routes::{Route, Upstream};

const CHUNKS: usize = 1000;
const CHUNK_GAP: Duration = Duration::from_millis(2);
const BIG: u64 = 256 * 1024 * 1024;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        return serve(args.get(2).ok_or("serve needs an upstream URL")?);
    }
    let upstream = TcpListener::bind("127.0.0.1:0")?;
    let up_addr = upstream.local_addr()?;
    std::thread::spawn(move || upstream_server(upstream));

    let mut child = Command::new(std::env::current_exe()?)
        .args(["serve", &format!("http://{up_addr}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    let relay: SocketAddr = line.trim().parse()?;

    let direct = latencies(up_addr, "/sse")?;
    let relayed = latencies(relay, "/w0/sse")?;
    let direct_tp = throughput(up_addr, "/big")?;
    let relayed_tp = throughput(relay, "/w0/big")?;

    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest)?;
    child.wait()?;
    let hwm_kib: u64 = rest
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM_KiB "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("the relay process did not report VmHWM")?;
    let stats = rest.lines().find(|l| l.starts_with("stats ")).unwrap_or("");

    let (d50, d99) = (pct(&direct, 50), pct(&direct, 99));
    let (r50, r99) = (pct(&relayed, 50), pct(&relayed, 99));
    let rss = hwm_kib as f64 / 1024.0;
    println!(
        "relay_bench: {CHUNKS} SSE chunks {CHUNK_GAP:?} apart; a {} MiB body",
        BIG >> 20
    );
    println!(
        "{:<22}{:>12}{:>12}{:>12}{:>14}",
        "", "direct", "relay", "added", "target"
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    println!(
        "{:<22}{:>12.1}{:>12.1}{:>+12.1}{:>14}",
        "chunk latency p50 µs",
        us(d50),
        us(r50),
        us(r50) - us(d50),
        "≤ +1000"
    );
    println!(
        "{:<22}{:>12.1}{:>12.1}{:>+12.1}{:>14}",
        "chunk latency p99 µs",
        us(d99),
        us(r99),
        us(r99) - us(d99),
        "≤ +5000"
    );
    println!(
        "{:<22}{:>12.0}{:>12.0}{:>12}{:>14}",
        "body MB/s", direct_tp, relayed_tp, "", "≥ 100"
    );
    println!(
        "{:<22}{:>12}{:>12.1}{:>12}{:>14}",
        "relay VmHWM MiB", "", rss, "", "≤ 16"
    );
    println!("relay {stats}");
    let met = r50.saturating_sub(d50) <= 1_000_000
        && r99.saturating_sub(d99) <= 5_000_000
        && relayed_tp >= 100.0
        && rss <= 16.0;
    println!("targets {}", if met { "met" } else { "MISSED" });
    if !met {
        std::process::exit(1);
    }
    Ok(())
}

/// The child: a relay to `url` until stdin closes; then its stats and VmHWM.
fn serve(url: &str) -> Res<()> {
    let route = Route {
        name: "BENCH_BASE_URL".into(),
        upstream: Upstream::parse(url)?,
        index: 0,
    };
    let relay = Relay::start(RelayConfig::new(vec![route]), Box::new(drop))?;
    println!("{}", relay.addr());
    std::io::stdout().flush()?;
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    let stats = relay.stop(Duration::from_secs(1));
    println!(
        "stats exchanges {} errors {} up {} B down {} B connections {}",
        stats.exchanges, stats.errors, stats.bytes_up, stats.bytes_down, stats.connections
    );
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or("no VmHWM")?;
    println!("VmHWM_KiB {hwm}");
    Ok(())
}

/// One SSE event, fixed size: the monotonic time it was written, padded.
fn sse_event(ns: u64) -> Vec<u8> {
    let data = format!(
        "event: content_block_delta\ndata: {{\"t\":{ns:020},\"delta\":{{\"text\":\"{}\"}}}}\n\n",
        "x".repeat(120)
    );
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

fn upstream_server(l: TcpListener) {
    for s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = answer(s);
        });
    }
}

fn answer(mut s: TcpStream) -> Res<()> {
    s.set_nodelay(true)?;
    let head = read_head(&mut s)?;
    if head.starts_with(b"GET /sse ") {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
        for _ in 0..CHUNKS {
            std::thread::sleep(CHUNK_GAP);
            s.write_all(&sse_event(monotonic_ns()))?;
        }
        s.write_all(b"0\r\n\r\n")?;
    } else {
        s.write_all(
            format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )?;
        let block = vec![b'z'; 64 * 1024];
        let mut left = BIG;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            s.write_all(&block[..n])?;
            left -= n as u64;
        }
    }
    Ok(())
}

fn read_head(s: &mut TcpStream) -> Res<Vec<u8>> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b)? == 0 {
            return Err("closed before the head ended".into());
        }
        head.push(b[0]);
    }
    Ok(head)
}

/// Each chunk's latency: read time minus the upstream's stamp.
fn latencies(addr: SocketAddr, path: &str) -> Res<Vec<u64>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes())?;
    read_head(&mut s)?;
    let mut chunk = vec![0u8; sse_event(0).len()];
    let mut out = Vec::with_capacity(CHUNKS);
    for _ in 0..CHUNKS {
        s.read_exact(&mut chunk)?;
        let now = monotonic_ns();
        let text = String::from_utf8_lossy(&chunk);
        let at = text.find("\"t\":").ok_or("no stamp")? + 4;
        let sent: u64 = text.get(at..at + 20).ok_or("short stamp")?.parse()?;
        out.push(now.saturating_sub(sent));
    }
    out.sort_unstable();
    Ok(out)
}

/// MB/s (10^6 bytes) of the big body.
fn throughput(addr: SocketAddr, path: &str) -> Res<f64> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes())?;
    let start = Instant::now();
    read_head(&mut s)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    while got < BIG {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(format!("body ended after {got} bytes").into());
        }
        got += n as u64;
    }
    Ok(got as f64 / 1e6 / start.elapsed().as_secs_f64())
}

fn pct(sorted: &[u64], p: usize) -> u64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}
