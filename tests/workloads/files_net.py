# File and network workload with known ground truth (tests/capture_files_net.rs).
# argv: WORKDIR TCP_PORT CLOSED_PORT TCP6_PORT UNIX_PATH
import os, socket, sys

work, port, closed, port6, unix_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
os.chdir(work)
os.chdir("sub")                                   # relative chdir
fd = os.open("rel.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
for _ in range(10):
    os.write(fd, b"x" * 100)                      # 1000 bytes in 10 writes
os.close(fd)
dirfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
fd = os.open("viadirfd.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dirfd)
os.write(fd, b"hello")
os.close(fd)
os.close(dirfd)
for path in ("missing.txt", "../locked.txt"):
    try:
        os.open(path, os.O_RDONLY)
    except OSError:
        pass
os.rename("rel.txt", "renamed.txt")
os.unlink("renamed.txt")
os.mkdir("newdir", 0o755)
os.symlink("viadirfd.txt", "link")
os.rmdir("newdir")

s = socket.create_connection(("127.0.0.1", port)); s.close()
s = socket.socket(); print(s.connect_ex(("127.0.0.1", closed))); s.close()
s = socket.socket(socket.AF_INET6); s.connect(("::1", port6)); s.close()
u = socket.socket(socket.AF_UNIX); u.connect(unix_path); u.close()
q = bytes([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]) + b"\x05agent\x07example\x04test\x00\x00\x01\x00\x01"
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); d.sendto(q, ("127.0.0.1", 53)); d.close()
# A query on a connected UDP socket (as glibc's resolver sends them): the row
# names its destination in the same fields as the sendto above.
q2 = bytes([0x56, 0x78, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]) + b"\x09connected\x07example\x04test\x00\x00\x01\x00\x01"
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(("127.0.0.1", 53)); c.send(q2); c.close()
