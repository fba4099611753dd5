#!/bin/bash
# A scripted "agent" for the audit tests: does its work inside the workspace
# (its cwd), creates allowed roots (mkdir of $TMPDIR, O_TMPFILE in $TMPDIR
# and the workspace) and, in `bad` mode, everything the test policy forbids.
# $TMPDIR must name a directory that does not exist yet.
# Usage: audit_agent.sh clean ALLOWED_PORT
#        audit_agent.sh bad ALLOWED_PORT OUTSIDE_FILE DENIED_PORT UNDECLARED_PORT
set -u
mode=$1
allowed=$2

# Inside the policy: a file in the workspace, a read of it, a declared port.
echo "hello" > notes.txt
cat notes.txt > /dev/null
exec 3<>"/dev/tcp/127.0.0.1/$allowed" && exec 3>&-
# Creating allowed roots: the TMPDIR itself (a first run creating its state
# directory), and unnamed O_TMPFILE files naming the TMPDIR and the
# workspace root (SQLite's temporary files in /var/tmp do this).
mkdir "$TMPDIR"
python3 -c '
import os, sys
for d in sys.argv[1:]:
    os.close(os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600))
' "$TMPDIR" .

if [ "$mode" = bad ]; then
    outside=$3
    denied=$4
    undeclared=$5
    # A secret read through a shell command (a child process), and again
    # through a symlink in the workspace.
    cat "$HOME/.ssh/id_rsa" > /dev/null
    ln -s "$HOME/.ssh/id_rsa" innocent.txt
    cat innocent.txt > /dev/null
    # And through a hard link: the same file under a name no pattern matches.
    ln "$HOME/.ssh/id_rsa" copy.txt
    cat copy.txt > /dev/null
    # A write outside the workspace, from the shell itself.
    echo "escaped" > "$outside"
    # A denied executable to a denied destination (nothing listens there).
    curl -s --max-time 2 "http://127.0.0.1:$denied/" > /dev/null
    # A connection to a loopback port the policy does not declare.
    exec 3<>"/dev/tcp/127.0.0.1/$undeclared" && exec 3>&-
    # The denied executable again, under another name: a hard link of curl
    # the test made in the workspace (an unprivileged user may not link a
    # file it cannot write).
    if [ -x ./fetch ]; then ./fetch --version > /dev/null; fi
fi
exit 0
