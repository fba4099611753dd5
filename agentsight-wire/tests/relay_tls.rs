//! The relay to an https upstream: a loopback rustls server with a test CA.

mod relay_common;

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use agentsight_wire::relay::{Relay, RelayConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use relay_common::*;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA: its certificate and the issuer that signs leaves.
fn ca(name: &str) -> (CertificateDer<'static>, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.der().clone(), Issuer::new(params, key))
}

/// A server config for `localhost` / 127.0.0.1 signed by `issuer`.
fn server_config(issuer: &Issuer<'static, KeyPair>) -> Arc<rustls::ServerConfig> {
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = params.signed_by(&key, issuer).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    Arc::new(config)
}

fn client_config(root: CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// A one-connection TLS upstream answering one request; returns the head it got.
fn tls_upstream(
    l: TcpListener,
    config: Arc<rustls::ServerConfig>,
    answer: &'static [u8],
) -> std::thread::JoinHandle<Option<Vec<u8>>> {
    std::thread::spawn(move || {
        let (tcp, _) = l.accept().ok()?;
        tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let conn = rustls::ServerConnection::new(config).ok()?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let head = read_until(&mut s, b"\r\n\r\n");
        if head.is_empty() {
            return None;
        }
        s.write_all(answer).ok()?;
        s.flush().ok()?;
        Some(head)
    })
}

fn relay_with(port: u16, tls: Arc<rustls::ClientConfig>) -> (Relay, Collected) {
    let got = Collected::default();
    let mut config = RelayConfig::new(vec![route(0, &format!("https://localhost:{port}/v1"))]);
    config.tls = Some(tls);
    (Relay::start(config, got.sink()).unwrap(), got)
}

#[test]
fn https_upstream_relayed_with_its_certificate_verified() {
    let (root, issuer) = ca("relay test CA");
    let (l, port) = listener();
    let answer: &'static [u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{ok}";
    let upstream = tls_upstream(l, server_config(&issuer), answer);
    let (relay, got) = relay_with(port, client_config(root));
    let mut c = connect(relay.addr());
    send(
        &mut c,
        b"GET /w0/v1/models HTTP/1.1\r\nHost: a\r\nX-K: v\r\n\r\n",
    );
    assert_eq!(read_n(&mut c, answer.len()), answer);
    assert_eq!(
        String::from_utf8(upstream.join().unwrap().unwrap()).unwrap(),
        format!("GET /v1/models HTTP/1.1\r\nHost: localhost:{port}\r\nX-K: v\r\n\r\n")
    );
    let ex = got.wait(1);
    assert_eq!(ex[0].error, None);
    assert_eq!(ex[0].upstream, format!("https://localhost:{port}/v1"));
    assert_eq!(ex[0].response.as_ref().unwrap().body, b"{ok}");
    relay.stop(Duration::from_secs(1));
}

#[test]
fn https_upstream_with_an_unknown_issuer_refused() {
    let (_, issuer) = ca("relay test CA");
    let (other_root, _) = ca("another test CA");
    let (l, port) = listener();
    let upstream = tls_upstream(l, server_config(&issuer), b"HTTP/1.1 200 OK\r\n\r\n");
    let (relay, got) = relay_with(port, client_config(other_root));
    let mut c = connect(relay.addr());
    send(&mut c, b"GET /w0/v1/models HTTP/1.1\r\nHost: a\r\n\r\n");
    let answer = String::from_utf8(read_to_end(&mut c)).unwrap();
    let cause = format!("TLS to localhost:{port}: invalid peer certificate: UnknownIssuer");
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with(&format!("\r\n\r\n{cause}\n")), "{answer}");
    let ex = got.wait(1);
    assert_eq!(ex[0].error.as_deref(), Some(cause.as_str()));
    assert_eq!(ex[0].response, None);
    assert_eq!(
        upstream.join().unwrap(),
        None,
        "no request reached the upstream"
    );
    relay.stop(Duration::from_secs(1));
}

#[test]
fn https_upstream_connection_kept_alive() {
    let (root, issuer) = ca("relay test CA");
    let (l, port) = listener();
    let answer: &'static [u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let config = server_config(&issuer);
    let upstream = std::thread::spawn(move || {
        let (tcp, _) = l.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn = rustls::ServerConnection::new(config).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let mut heads = Vec::new();
        for _ in 0..2 {
            heads.push(read_until(&mut s, b"\r\n\r\n"));
            s.write_all(answer).unwrap();
            s.flush().unwrap();
        }
        heads
    });
    let (relay, got) = relay_with(port, client_config(root));
    let mut c = connect(relay.addr());
    for _ in 0..2 {
        // A pause, so anything the server sent after its answer (TLS 1.3
        // session tickets) has arrived before the next request.
        std::thread::sleep(Duration::from_millis(50));
        send(&mut c, b"GET /w0/v1/models HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(read_n(&mut c, answer.len()), answer);
    }
    let heads = upstream.join().unwrap();
    assert_eq!(heads.len(), 2, "both requests on one TLS connection");
    assert_eq!(heads[0], heads[1]);
    let ex = got.wait(2);
    assert_eq!(
        ex.iter()
            .map(|e| (e.seq, e.error.clone()))
            .collect::<Vec<_>>(),
        [(0, None), (1, None)]
    );
    relay.stop(Duration::from_secs(1));
}
