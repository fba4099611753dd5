#!/bin/sh
# Runs one e2e command inside the private network namespace `unshare -n` made:
# brings loopback up (the only interface there), starts the scripted model
# server on fixed ports (nothing else can hold them in a fresh namespace, so
# CLI configs can be written before the run), and, for a scenario with
# `"mcp_http": true`, the streamable-HTTP MCP server (mcp/http_server.js) on
# 8790 (notes in DIR/mcp-http/, requests logged to DIR/mcp-http.jsonl, DIR the
# log's directory); runs the command, stops the servers, and exits with the
# command's status.
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
hp=
if node -e 'process.exit(JSON.parse(require("fs").readFileSync(process.argv[1])).mcp_http ? 0 : 1)' "$scenario"; then
    dir=$(dirname "$log")
    mkdir -p "$dir/mcp-http"
    : >"$dir/mcp-http.port"
    node "$(dirname "$0")/mcp/http_server.js" --port 8790 --dir "$dir/mcp-http" \
        --log "$dir/mcp-http.jsonl" >"$dir/mcp-http.port" 2>"$dir/mcp-http.stderr" &
    hp=$!
    i=0
    while [ ! -s "$dir/mcp-http.port" ]; do
        i=$((i + 1))
        if [ $i -gt 200 ] || ! kill -0 $hp 2>/dev/null; then
            echo "netns.sh: MCP HTTP server did not start:" >&2
            cat "$dir/mcp-http.stderr" >&2
            kill $sp $hp 2>/dev/null
            exit 98
        fi
        sleep 0.05
    done
fi
"$@"
rc=$?
kill $sp $hp 2>/dev/null
wait $sp $hp 2>/dev/null
exit $rc
