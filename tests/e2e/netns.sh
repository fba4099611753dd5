#!/bin/sh
# Runs one e2e command inside the private network namespace `unshare -n` made:
# brings loopback up (the only interface there), starts the scripted model
# server on fixed ports (nothing else can hold them in a fresh namespace, so
# CLI configs can be written before the run), runs the command, stops the
# server, and exits with the command's status.
#
# usage: unshare -n -- sh netns.sh SERVER_JS SCENARIO LOG CWD -- COMMAND...
set -u
server=$1 scenario=$2 log=$3 cwd=$4
shift 4
[ "${1:-}" = "--" ] && shift
ip link set lo up || { echo "netns.sh: cannot bring up loopback" >&2; exit 97; }
: >"$log.ports"
node "$server" --scenario "$scenario" --log "$log" --port 8787 --target-port 8788 \
    --cwd "$cwd" >"$log.ports" 2>"$log.stderr" &
sp=$!
i=0
# Both listeners are up once the server has printed its two port lines.
while [ "$(wc -l <"$log.ports")" -lt 2 ]; do
    i=$((i + 1))
    if [ $i -gt 200 ] || ! kill -0 $sp 2>/dev/null; then
        echo "netns.sh: model server did not start:" >&2
        cat "$log.stderr" >&2
        kill $sp 2>/dev/null
        exit 98
    fi
    sleep 0.05
done
"$@"
rc=$?
kill $sp 2>/dev/null
wait $sp 2>/dev/null
exit $rc
