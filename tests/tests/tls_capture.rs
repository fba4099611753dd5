//! TLS plaintext by symbol (`record --wire`): real clients (curl, python's
//! urllib, node's https; git's https helper on GnuTLS) send a known body over TLS to a loopback server
//! with a test CA; the capture holds exactly the bytes the server received
//! and sent, per client connection. A static program without the TLS
//! functions gets the "not decrypted" row. HTTP/2: curl and node's http2
//! client (two streams on one connection) against node's HTTP/2 server,
//! decoded into one exchange per stream with the exact bodies.

use std::{
    collections::BTreeMap,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use agentsight_tests::*;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA and a server certificate for 127.0.0.1 signed by it.
fn make_certs(dir: &Path) {
    let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(dir).args(args));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=agentsight test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "1",
        "-extfile",
        "san.ext",
    ]);
}

fn start_server(dir: &Path) -> (Server, u16) {
    let logs = dir.join("server");
    std::fs::create_dir_all(&logs).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/tls_server.py");
    let child = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(dir.join("srv.pem"))
        .arg(dir.join("srv.key"))
        .arg(&logs)
        .arg(dir.join("port"))
        .stdout(Stdio::null())
        .spawn()
        .expect("start the TLS server");
    listening(Server(child), &dir.join("port"))
}

/// The server once it wrote its port to `port_file` (within 10 s).
fn listening(server: Server, port_file: &Path) -> (Server, u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(p) = std::fs::read_to_string(port_file) {
            return (server, p.trim().parse().unwrap());
        }
        assert!(Instant::now() < deadline, "the server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A static program that exports no TLS function and lives 300 ms.
fn static_sleeper(dir: &Path) -> String {
    let c = dir.join("sleeper.c");
    std::fs::write(
        &c,
        "#include <unistd.h>\nint main(void) { usleep(300000); return 0; }\n",
    )
    .unwrap();
    let bin = dir.join("sleeper");
    run(Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(&bin)
        .arg(&c));
    bin.display().to_string()
}

const NODE_CLIENT: &str = "const https = require('https'); const fs = require('fs');
const body = fs.readFileSync(process.argv[2]);
const req = https.request({host: '127.0.0.1', port: +process.argv[3], method: 'POST', path: '/node',
  headers: {'Content-Type': 'text/plain', 'Content-Length': body.length}}, (res) => {
  res.on('data', () => {}); res.on('end', () => process.exit(0)); });
req.on('error', (e) => { console.error(e); process.exit(3); });
req.end(body);";

const PY_CLIENT: &str = "import ssl, sys, urllib.request
body = open(sys.argv[1], 'rb').read()
ctx = ssl.create_default_context(cafile=sys.argv[3])
req = urllib.request.Request('https://127.0.0.1:%s/python' % sys.argv[2], data=body,
    headers={'Content-Type': 'text/plain'})
urllib.request.urlopen(req, context=ctx).read()";

/// (comm, conn, direction) → the bytes of every record, in order; and the
/// fds the records carried.
type Streams = BTreeMap<(String, i64, String), (Vec<u8>, Vec<Option<i64>>)>;

fn streams(cap: &agentsight::store::Capture) -> Streams {
    let comm: BTreeMap<i64, String> = cap
        .processes()
        .unwrap()
        .into_iter()
        .map(|p| (p.id, p.comm.unwrap_or_default()))
        .collect();
    let mut out = Streams::new();
    for r in cap.reader().tls_records().unwrap() {
        assert_eq!(r.cut, 0, "a record under the 16 KiB bound was cut");
        let name = comm.get(&r.process_id).cloned().unwrap_or_default();
        let e = out.entry((name, r.conn as i64, r.direction)).or_default();
        e.0.extend_from_slice(&r.data);
        e.1.push(r.fd.map(i64::from));
    }
    out
}

/// The capture's `via tls` exchanges with their process's comm.
fn tls_exchanges(
    cap: &agentsight::store::Capture,
) -> Vec<(String, agentsight::store::wire::WireExchangeRow)> {
    let comm: BTreeMap<i64, String> = cap
        .processes()
        .unwrap()
        .into_iter()
        .map(|p| (p.id, p.comm.unwrap_or_default()))
        .collect();
    cap.reader()
        .wire_exchanges()
        .unwrap()
        .into_iter()
        .filter(|x| x.raw.via == agentsight_wire::Via::Tls)
        .map(|x| {
            let name = x.process_id.and_then(|p| comm.get(&p).cloned());
            (name.unwrap_or_default(), x)
        })
        .collect()
}

/// The client's one TLS exchange is exactly what the server logged: the
/// request (head and body) it got, the response it sent, decoded.
fn check_exchange(
    tls: &[(String, agentsight::store::wire::WireExchangeRow)],
    client: &str,
    request: &[u8],
    response: &[u8],
    body: &[u8],
    port: u16,
) {
    let mine: Vec<_> = tls.iter().filter(|(c, _)| c == client).collect();
    assert_eq!(mine.len(), 1, "{client}: its TLS exchanges");
    let x = &mine[0].1;
    let raw = &x.raw;
    assert_eq!(raw.error, None, "{client}");
    assert_eq!(
        (raw.route.as_str(), raw.client_port, raw.seq),
        ("tls", 0, 0),
        "{client}"
    );
    assert_eq!(
        [&raw.request.head[..], &raw.request.body].concat(),
        request,
        "{client}"
    );
    let resp = raw.response.as_ref().expect("a response");
    assert_eq!([&resp.head[..], &resp.body].concat(), response, "{client}");
    assert_eq!(
        (resp.body_dropped, raw.request.body_dropped),
        (0, 0),
        "{client}"
    );
    let d = &x.decoded;
    assert_eq!(d.status, Some(200), "{client}");
    if client == "git-remote-http" {
        assert_eq!(d.method.as_deref(), Some("GET"));
        assert_eq!(
            d.path.as_deref(),
            Some("/git/info/refs?service=git-upload-pack")
        );
        assert!(raw.request.body.is_empty());
    } else {
        assert_eq!(d.method.as_deref(), Some("POST"), "{client}");
        let path = if client == "python3" {
            "/python"
        } else {
            &format!("/{client}")
        };
        assert_eq!(d.path.as_deref(), Some(path), "{client}");
        assert_eq!(raw.request.body, body, "{client}");
    }
    // Every client names the server's 127.0.0.1:PORT in Host.
    assert_eq!(
        raw.upstream,
        format!("https://127.0.0.1:{port}"),
        "{client}"
    );
}

#[test]
fn curl_python_node_and_git_plaintext_is_captured_exactly() {
    require_root();
    let dir = scratch("tls");
    make_certs(&dir);
    let (_server, port) = start_server(&dir);
    let body: Vec<u8> = (0..5000).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(dir.join("body.txt"), &body).unwrap();
    let sleeper = static_sleeper(&dir);
    // The recorded command gets sudo's reset environment: the clients are files.
    std::fs::write(dir.join("client.py"), PY_CLIENT).unwrap();
    std::fs::write(dir.join("client.js"), NODE_CLIENT).unwrap();
    let db = dir.join("tls.db");
    let script = format!(
        "set -e; curl -sS --cacert ca.pem -H 'Expect:' -H 'Content-Type: text/plain' --data-binary @body.txt https://127.0.0.1:{port}/curl > /dev/null
/usr/bin/python3 client.py body.txt {port} ca.pem
NODE_EXTRA_CA_CERTS=ca.pem /usr/bin/node client.js body.txt {port}
GIT_SSL_CAINFO=ca.pem git ls-remote https://127.0.0.1:{port}/git > /dev/null 2>&1 || true
{sleeper}"
    );
    let out = record(&db, &["--wire"], &["/bin/sh", "-c", &script]);
    assert_exit_0(&out);
    let cap = agentsight::store::Capture::open(&db).unwrap();
    let streams = streams(&cap);
    let tls = tls_exchanges(&cap);
    assert_eq!(
        tls.len(),
        4,
        "one TLS exchange per client: {:?}",
        tls.iter()
            .map(|(c, x)| (c, &x.raw.request.head))
            .collect::<Vec<_>>()
    );
    let shown = std::process::Command::new(bin())
        .args(["show", "--db"])
        .arg(&db)
        .output()
        .expect("show");
    let shown = String::from_utf8_lossy(&shown.stdout);
    let via: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains(" via tls (pid "))
        .collect();
    assert_eq!(via.len(), 4, "show's TLS lines:\n{shown}");
    eprintln!("{}", via.join("\n"));
    let logs = dir.join("server");
    // git's https helper (GnuTLS; its comm is cut to 15 bytes) sends a GET.
    let clients = ["curl", "python3", "node", "git-remote-http"];
    for (i, client) in clients.iter().enumerate() {
        let n = i + 1;
        let request = std::fs::read(logs.join(format!("request-{n}"))).unwrap();
        let response = std::fs::read(logs.join(format!("response-{n}"))).unwrap();
        if *client == "git-remote-http" {
            assert!(request.starts_with(b"GET /git/info/refs"), "{request:?}");
        } else {
            assert!(
                request.ends_with(&body),
                "{client}: the server got {request:?}"
            );
        }
        let sent: Vec<_> = streams
            .iter()
            .filter(|((comm, _, d), (bytes, _))| comm == client && d == "send" && *bytes == request)
            .collect();
        assert_eq!(
            sent.len(),
            1,
            "{client}: no captured stream equals the request; streams: {:?}",
            streams.keys().collect::<Vec<_>>()
        );
        check_exchange(&tls, client, &request, &response, &body, port);
        let ((_, c, _), (_, fds)) = sent[0];
        let (received, _) = streams
            .get(&((*client).to_owned(), *c, "recv".to_owned()))
            .unwrap_or_else(|| panic!("{client}: no recv stream on its connection"));
        assert_eq!(received, &response, "{client}: the response");
        eprintln!("{client}: fds of its sends: {fds:?}");
        if *client == "node" {
            // TLSWrap encrypts into a memory BIO: no socket syscall inside
            // the call, so the fd is unknown, never guessed.
            assert!(fds.iter().all(Option::is_none), "{client}: {fds:?}");
        } else {
            // The library's own write(2)/sendto(2) named the socket.
            assert!(
                fds.iter().all(|f| f.is_some_and(|f| f > 2)),
                "{client}: {fds:?}"
            );
        }
    }
    let notes: Vec<(Option<String>, bool, String)> = cap
        .reader()
        .tls_processes()
        .unwrap()
        .into_iter()
        .map(|n| (n.exe, !n.libraries.is_empty(), n.note))
        .collect();
    assert!(
        notes.contains(&(
            Some(sleeper.clone()),
            false,
            format!("TLS not decrypted: no supported library in {sleeper}")
        )),
        "{notes:#?}"
    );
    // curl lives a few ms: its note must not hang on a scan catching it
    // with its libraries mapped (the kernel notes which probed file it called).
    let curl = notes
        .iter()
        .find(|n| n.0.as_deref() == Some("/usr/bin/curl"))
        .unwrap_or_else(|| panic!("curl's note: {notes:#?}"));
    assert!(
        curl.1 && curl.2.starts_with("TLS decrypted through ") && curl.2.contains("libssl.so.3"),
        "{notes:#?}"
    );
    tool_https_is_not_model_traffic(&db, &dir, &tls, port);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The clients' HTTPS is no model API's: no model call, so no
/// `model-endpoint` finding though no endpoint of theirs is allowed; the
/// body (a `never_send` file) that curl, python and node sent is found in
/// their exchanges, said to go to the server, not to the model.
fn tool_https_is_not_model_traffic(
    db: &Path,
    dir: &Path,
    tls: &[(String, agentsight::store::wire::WireExchangeRow)],
    port: u16,
) {
    assert!(tls.iter().all(|(_, x)| !x.is_model_call()));
    let body = dir.join("body.txt");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[wire]\nallowed_endpoints = [\"https://api.anthropic.com\"]\nnever_send = [{:?}]\n",
            body.display().to_string()
        ),
    )
    .unwrap();
    let (_, report) = agentsight_tests::e2e_check::audit_json(db, &policy);
    let wire: Vec<(&str, &str)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            ["model-endpoint", "content-sent-to-model"].contains(&f["rule"].as_str().unwrap())
        })
        .map(|f| (f["rule"].as_str().unwrap(), f["message"].as_str().unwrap()))
        .collect();
    let curl = tls.iter().find(|(c, _)| c == "curl").unwrap().1.id;
    let expected = format!(
        "content of never_send file {} was sent to https://127.0.0.1:{port}: 1 of its 1 identifying lines in exchange {curl} (tls, not a model API: POST /curl), 3 exchange(s) in all",
        body.display()
    );
    assert_eq!(
        wire,
        vec![("content-sent-to-model", expected.as_str())],
        "{report:#}"
    );
}

const NODE_H2_CLIENT: &str = "const http2 = require('http2'); const fs = require('fs');
const [bodyFile, port, ca] = process.argv.slice(2);
const body = fs.readFileSync(bodyFile);
const session = http2.connect('https://127.0.0.1:' + port, { ca: fs.readFileSync(ca) });
let left = 2;
for (const path of ['/node-a', '/node-b']) {
  const r = session.request({ ':method': 'POST', ':path': path, 'content-type': 'text/plain' });
  r.on('data', () => {});
  r.on('end', () => { if (--left === 0) session.close(); });
  r.on('error', (e) => { console.error(e); process.exit(3); });
  r.end(body);
}";

fn start_h2_server(dir: &Path) -> (Server, u16) {
    let logs = dir.join("h2");
    std::fs::create_dir_all(&logs).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/h2_server.js");
    let child = Command::new("/usr/bin/node")
        .arg(script)
        .arg(dir.join("srv.pem"))
        .arg(dir.join("srv.key"))
        .arg(&logs)
        .arg(dir.join("h2port"))
        .stdout(Stdio::null())
        .spawn()
        .expect("start the HTTP/2 server");
    listening(Server(child), &dir.join("h2port"))
}

/// curl (`--http2`, libcurl's nghttp2 over OpenSSL) and node's http2
/// client (two requests multiplexed on one connection) post a known body to
/// a real HTTP/2 server: each stream is one exchange, its head as HPACK
/// decoded it, its body the exact bytes the server got, its response the
/// exact bytes the server sent (two DATA writes, read as two events).
#[test]
fn http2_streams_are_decoded_exactly() {
    require_root();
    let dir = scratch("tls-h2");
    make_certs(&dir);
    let (_server, port) = start_h2_server(&dir);
    let body: Vec<u8> = (0..5000).map(|i| b'A' + (i % 26) as u8).collect();
    std::fs::write(dir.join("body.txt"), &body).unwrap();
    std::fs::write(dir.join("h2client.js"), NODE_H2_CLIENT).unwrap();
    let db = dir.join("h2.db");
    let script = format!(
        "set -e; curl -sS --http2 --cacert ca.pem -H 'Content-Type: text/plain' --data-binary @body.txt https://127.0.0.1:{port}/curl-h2 > /dev/null
/usr/bin/node h2client.js body.txt {port} ca.pem"
    );
    let out = record(&db, &["--wire"], &["/bin/sh", "-c", &script]);
    assert_exit_0(&out);
    let logs = dir.join("h2");
    let cap = agentsight::store::Capture::open(&db).unwrap();
    let tls = tls_exchanges(&cap);
    let got: Vec<(&str, Option<&str>)> = tls
        .iter()
        .map(|(c, x)| (c.as_str(), x.decoded.path.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("curl", Some("/curl-h2")),
            ("node", Some("/node-a")),
            ("node", Some("/node-b"))
        ]
    );
    for (comm, x) in &tls {
        let path = x.decoded.path.clone().unwrap();
        let name = path.trim_start_matches('/');
        let logged: serde_json::Value =
            serde_json::from_slice(&std::fs::read(logs.join(format!("{name}.json"))).unwrap())
                .unwrap();
        // The server got the body: the ground truth the capture must equal.
        let received = std::fs::read(logs.join(format!("{name}.body"))).unwrap();
        assert_eq!(received, body, "{comm} {path}: what the server got");
        assert_eq!(logged["method"], "POST");
        let head = String::from_utf8_lossy(&x.raw.request.head).into_owned();
        assert!(
            head.starts_with(&format!("POST {path} HTTP/2\r\nhost: 127.0.0.1:{port}\r\n")),
            "{comm}: {head}"
        );
        assert!(
            head.contains("\r\ncontent-type: text/plain\r\n"),
            "{comm}: {head}"
        );
        assert_eq!(x.raw.request.body, body, "{comm} {path}");
        assert_eq!(x.raw.request.body_dropped, 0);
        let resp = x.raw.response.as_ref().expect("a response");
        let sent = std::fs::read(logs.join(format!("{name}.response"))).unwrap();
        assert_eq!(resp.body, sent, "{comm} {path}");
        let rhead = String::from_utf8_lossy(&resp.head).into_owned();
        assert!(rhead.starts_with("HTTP/2 200\r\n"), "{rhead}");
        assert!(
            rhead.contains("\r\ncontent-type: text/event-stream\r\n"),
            "{rhead}"
        );
        assert_eq!(x.raw.error, None, "{comm} {path}");
        assert_eq!(x.raw.upstream, format!("https://127.0.0.1:{port}"));
        let d = &x.decoded;
        assert_eq!(
            (d.method.as_deref(), d.status, d.streamed, d.events),
            (Some("POST"), Some(200), true, 2),
            "{comm} {path}: {:?}",
            d.notes
        );
    }
    // Both node streams came over one connection.
    assert_eq!(tls[1].1.raw.conn, tls[2].1.raw.conn);
    assert_eq!((tls[1].1.raw.seq, tls[2].1.raw.seq), (0, 1));
    let notes = cap.reader().wire_notes().unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
