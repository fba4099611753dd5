"""Per-call cost of SSL_write (python's ssl → OpenSSL's SSL_write_ex) with
and without agentsight's TLS probes.

Usage: tls_bench.py CERT KEY CALLS SIZE
A client and a server TLS object over memory BIOs in this one process (no
socket: the probes' cost is not hidden behind syscalls). Only the client's
write calls are timed; the server drains in untimed batches. Prints
"us_per_call=X" (median of 5 runs).
"""
import ssl
import statistics
import sys
import time

cert, key, calls, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
sctx.load_cert_chain(cert, key)
cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
cctx.check_hostname = False
cctx.verify_mode = ssl.CERT_NONE
c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
client = cctx.wrap_bio(c_in, c_out)
server = sctx.wrap_bio(s_in, s_out, server_side=True)


def pump():
    s_in.write(c_out.read())
    c_in.write(s_out.read())


done = [False, False]
while not all(done):
    for i, obj in enumerate((client, server)):
        if done[i]:
            continue
        try:
            obj.do_handshake()
            done[i] = True
        except ssl.SSLWantReadError:
            pass
    pump()

payload = b"x" * size
BATCH = 256
runs = []
for _ in range(5):
    spent = 0
    left = calls
    while left:
        n = min(BATCH, left)
        t0 = time.perf_counter_ns()
        for _ in range(n):
            client.write(payload)
        spent += time.perf_counter_ns() - t0
        left -= n
        s_in.write(c_out.read())
        try:
            while True:
                server.read(65536)
        except ssl.SSLWantReadError:
            pass
    runs.append(spent / calls / 1000)
print("us_per_call=%.3f" % statistics.median(runs))
