"""A loopback TLS server for the TLS-by-symbol capture test.

Usage: tls_server.py CERT KEY LOGDIR PORTFILE
Listens on 127.0.0.1 (a free port, written to PORTFILE), and for each
connection reads one HTTP/1.1 request (head + Content-Length body), writes
the exact bytes received to LOGDIR/request-N and answers with a fixed
response whose exact bytes go to LOGDIR/response-N, then closes.
"""
import os
import socket
import ssl
import sys

cert, key, logdir, portfile = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(8)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


n = 0
while True:
    raw, _ = srv.accept()
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        raw.close()
        continue
    n += 1
    try:
        req = read_request(conn)
        body = b"tls-response-%d:" % n + b"R" * 3000 + b"\n"
        resp = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % len(body)
        ) + body
        with open(os.path.join(logdir, "request-%d" % n), "wb") as f:
            f.write(req)
        with open(os.path.join(logdir, "response-%d" % n), "wb") as f:
            f.write(resp)
        conn.sendall(resp)
        conn.close()
    except (ssl.SSLError, OSError):
        conn.close()
