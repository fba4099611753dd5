"""Interleaves TCP connects and sends (whose SYN_SENT -> ESTABLISHED transition runs in
softirq) with file creation on every CPU, to prove that sequence numbers show
no gap without loss. argv: DIR PORT CONNECTS FILES (per worker)."""
import os
import socket
import sys

root, port, connects, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpus = sorted(os.sched_getaffinity(0))


def connector():
    for _ in range(connects):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.connect(("127.0.0.1", port))
        # Sends on a connected socket make no record (the peer is known from
        # connect): they must not take a sequence number either.
        # The server may have closed already (EPIPE): the syscalls still ran.
        try:
            s.send(b"x")
            s.sendmsg([b"y"])
        except OSError:
            pass
        s.close()


def creator(k):
    d = os.path.join(root, f"w{k}")
    os.mkdir(d)
    for i in range(files):
        fd = os.open(os.path.join(d, f"f{i}"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)


children = []
for k, cpu in enumerate(cpus):
    for job in (connector, lambda k=k: creator(k)):
        pid = os.fork()
        if pid == 0:
            os.sched_setaffinity(0, {cpu})
            job()
            os._exit(0)
        children.append(pid)
failed = 0
for pid in children:
    _, status = os.waitpid(pid, 0)
    failed += status != 0
sys.exit(1 if failed else 0)
