#!/usr/bin/env bash
# Compares every view of two agentsight binaries on the same inputs, byte for
# byte: a refactoring must not change the capture format or any output.
#
#   tests/golden/compare-views.sh BEFORE_BIN AFTER_BIN RUNS_DIR
#
# RUNS_DIR holds kept e2e runs: run the real-CLI tier with the BEFORE binary
# and AGENTSIGHT_E2E_KEEP=1, then move /var/tmp/agentsight-e2e-* there:
#
#   AGENTSIGHT_E2E_KEEP=1 AGENTSIGHT_BIN=BEFORE_BIN \
#     cargo test --release -p agentsight-tests --test e2e_agents
#
# Each run has `home/` (the agent's transcripts) and, when it was recorded,
# `server/capture.db`. For every run: show, export (jsonl, OTLP JSON, the
# Perfetto trace), the HTML report (redacted and exact, with the policy's
# findings), sessions (JSON and text), and per session: session show,
# correlate (JSON and text), audit in the four formats with
# examples/policy.toml. Then both binaries record the same
# command (as root) and the two captures' schema and meta keys are compared.
# Exit status 0 when everything is identical; the first lines of each
# difference are printed otherwise. Needs root, jq and sqlite3.
set -u
before=$1 after=$2 runs=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
policy=$repo/examples/policy.toml
out=$(mktemp -d /tmp/compare-views.XXXXXX)
checked=0 differ=0

# compare NAME ARGS...: runs both binaries, compares stdout and exit status.
compare() {
    local name=$1
    shift
    "$before" "$@" >"$out/b" 2>"$out/be"
    echo "exit $?" >>"$out/b"
    "$after" "$@" >"$out/a" 2>"$out/ae"
    echo "exit $?" >>"$out/a"
    checked=$((checked + 1))
    if ! cmp -s "$out/b" "$out/a"; then
        differ=$((differ + 1))
        echo "DIFFERS: $name: $*"
        diff "$out/b" "$out/a" | head -8
    fi
}

# compare_file NAME ARGS...: as compare, for a command that writes its
# output with `-o FILE`: the file's bytes are compared too.
compare_file() {
    local name=$1
    shift
    rm -f "$out/bf" "$out/af"
    "$before" "$@" -o "$out/bf" >"$out/b" 2>"$out/be"
    echo "exit $?" >>"$out/b"
    "$after" "$@" -o "$out/af" >"$out/a" 2>"$out/ae"
    echo "exit $?" >>"$out/a"
    # The summary lines name the output file: compare them with one name.
    sed -i "s#$out/bf#OUT#g" "$out/b" "$out/be"
    sed -i "s#$out/af#OUT#g" "$out/a" "$out/ae"
    checked=$((checked + 1))
    if ! cmp -s "$out/b" "$out/a" || ! cmp -s "$out/be" "$out/ae" || ! cmp -s "$out/bf" "$out/af"; then
        differ=$((differ + 1))
        echo "DIFFERS: $name: $*"
        diff "$out/b" "$out/a" | head -4
        diff "$out/be" "$out/ae" | head -4
        cmp "$out/bf" "$out/af" | head -2
    fi
}

for run in "$runs"/*/; do
    run=${run%/}
    name=$(basename "$run")
    home=$run/home
    db=$run/server/capture.db
    compare "$name sessions" sessions --json --home "$home"
    compare "$name sessions text" sessions --home "$home"
    ids=$("$before" sessions --json --home "$home" | jq -r '.[].session_id' 2>/dev/null)
    for id in $ids; do
        compare "$name session" session show "$id" --json --home "$home"
        compare "$name session text" session show "$id" --home "$home"
    done
    [ -f "$db" ] || continue
    compare "$name show" show --db "$db"
    compare "$name export" export --db "$db"
    compare "$name export otlp" export --db "$db" --format otlp-json
    compare_file "$name export perfetto" export --db "$db" --format perfetto
    compare_file "$name report" report --db "$db" --policy "$policy"
    compare_file "$name report exact" report --db "$db" --no-redact
    for f in text json sarif junit; do
        compare "$name audit $f" audit --db "$db" --policy "$policy" --format "$f"
    done
    for id in $ids; do
        compare "$name correlate" correlate "$id" --db "$db" --json --home "$home"
        compare "$name correlate text" correlate "$id" --db "$db" --home "$home"
    done
done

# The capture format: schema and meta keys of a capture each binary records.
for which in before after; do
    bin=${!which}
    rm -f "$out/$which.db"
    "$bin" record --quiet --user agentsight-test -o "$out/$which.db" -- /bin/sh -c 'echo hi > /dev/null' >/dev/null 2>&1
    sqlite3 "$out/$which.db" .schema >"$out/$which.schema"
    sqlite3 "$out/$which.db" "select key from meta order by key" >"$out/$which.meta"
done
for part in schema meta; do
    checked=$((checked + 1))
    if ! cmp -s "$out/before.$part" "$out/after.$part"; then
        differ=$((differ + 1))
        echo "DIFFERS: capture $part"
        diff "$out/before.$part" "$out/after.$part" | head -20
    fi
done

echo "compare-views: $checked outputs compared, $differ differ"
rm -rf "$out"
[ "$differ" -eq 0 ]
