# Process-tree workload with known ground truth (see tests/capture_process.rs).
# Run as: /bin/sh tree.sh WORKDIR   (WORKDIR holds a subdirectory "sub")
cd "$1/sub"
/bin/echo hello world > /dev/null
/bin/sh -c 'cd /tmp && exec /bin/true nested'
/bin/sh -c '/bin/sh -c "exit 7"; exit $?'
( exit 3 )
/bin/sh -c '( /bin/sleep 0.3; /bin/echo orphan >/dev/null ) & exit 0'
/bin/true $(/usr/bin/seq 1 2000)
/nonexistent/prog $(/usr/bin/seq 1 100) 2>/dev/null
/usr/bin/python3 -c 'import ctypes; ctypes.CDLL(None).execve(b"/nonexistent/null-argv", None, None)'
/bin/sh -c 'kill -9 $$'
/bin/sleep 0.8
exit 0
