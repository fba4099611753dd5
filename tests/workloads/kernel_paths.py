"""Opens files through every path trick whose kernel path differs from the
path as given. argv: DIR (holding secret.txt, real/marker.txt, the links and
the bind mount bound/ that the test prepared)."""
import os
import sys

os.chdir(sys.argv[1])


def read(path):
    fd = os.open(path, os.O_RDONLY)
    os.close(fd)


read("innocent.txt")            # a symlink to secret.txt
read("linkdir/../marker.txt")   # linkdir -> real/sub: the kernel's .. is real/
read("hard.txt")                # a hard link to secret.txt
fd = os.open("secret.txt", os.O_RDONLY)
read(f"/proc/self/fd/{fd}")     # the magic link to secret.txt
os.close(fd)
read("bound/marker.txt")        # a bind mount of real/
fd = os.open("before.txt", os.O_WRONLY | os.O_CREAT, 0o600)
os.rename("before.txt", "after.txt")  # renamed while open
os.close(fd)
read("after.txt")
