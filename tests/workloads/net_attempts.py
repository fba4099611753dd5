# record --enforce's network workload (tests/tests/enforce_record.rs): each
# attempt prints NAME=ok or NAME=<errno name>, in order.
#   argv: allowed_port denied_port undeclared_port udp_port gate_file ready_file
import errno
import os
import socket
import sys
import time

allowed, denied, undeclared, udp = (int(a) for a in sys.argv[1:5])
gate, ready = sys.argv[5], sys.argv[6]


def outcome(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def tcp(family, addr, port):
    def go():
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.connect((addr, port))
    return go


def udp_send(addr, port):
    def go():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"agentsight", (addr, port))
    return go


attempts = [
    ("allowed", tcp(socket.AF_INET, "127.0.0.1", allowed)),
    ("denied", tcp(socket.AF_INET, "127.0.0.1", denied)),
    ("undeclared", tcp(socket.AF_INET, "127.0.0.1", undeclared)),
    ("mapped_allowed", tcp(socket.AF_INET6, "::ffff:127.0.0.1", allowed)),
    ("mapped_denied", tcp(socket.AF_INET6, "::ffff:127.0.0.1", denied)),
    ("v6_undeclared", tcp(socket.AF_INET6, "::1", undeclared)),
    ("udp_undeclared", udp_send("127.0.0.1", udp)),
    ("udp_dns", udp_send("127.0.0.1", 53)),
]
for name, f in attempts:
    print(f"{name}={outcome(f)}", flush=True)
open(ready, "w").close()
while not os.path.exists(gate):
    time.sleep(0.02)
# After the test's own connect to the denied port: still refused here.
print(f"denied_again={outcome(tcp(socket.AF_INET, '127.0.0.1', denied))}", flush=True)
