#!/bin/bash
# A scripted "agent" for the audit tests: does its work inside the workspace
# (its cwd) and, in `bad` mode, everything the test policy forbids.
# Usage: audit_agent.sh clean ALLOWED_PORT
#        audit_agent.sh bad ALLOWED_PORT OUTSIDE_FILE DENIED_PORT UNDECLARED_PORT
set -u
mode=$1
allowed=$2

# Inside the policy: a file in the workspace, a read of it, a declared port.
echo "hello" > notes.txt
cat notes.txt > /dev/null
exec 3<>"/dev/tcp/127.0.0.1/$allowed" && exec 3>&-

if [ "$mode" = bad ]; then
    outside=$3
    denied=$4
    undeclared=$5
    # A secret read through a shell command (a child process).
    cat "$HOME/.ssh/id_rsa" > /dev/null
    # A write outside the workspace, from the shell itself.
    echo "escaped" > "$outside"
    # A denied executable to a denied destination (nothing listens there).
    curl -s --max-time 2 "http://127.0.0.1:$denied/" > /dev/null
    # A connection to a loopback port the policy does not declare.
    exec 3<>"/dev/tcp/127.0.0.1/$undeclared" && exec 3>&-
fi
exit 0
