#!/usr/bin/env bash
# Seeds each fuzz target's corpus from the session fixtures (not committed:
# libFuzzer grows the corpus directories in place).
set -eu
cd "$(dirname "$0")"
F=../fixtures/sessions/home
mkdir -p corpus/claude corpus/codex corpus/gemini corpus/cursor
cp "$F"/.claude/projects/*/*.jsonl corpus/claude/
cp "$F"/.codex/sessions/2026/03/02/*.jsonl "$F"/.codex/sessions/*.jsonl corpus/codex/
for f in "$F"/.gemini/tmp/shop/chats/*.json; do { printf '\0'; cat "$f"; } > "corpus/gemini/$(basename "$f")"; done
for f in "$F"/.gemini/tmp/shop/chats/*.jsonl; do { printf '\1'; cat "$f"; } > "corpus/gemini/$(basename "$f")"; done
cp "$F"/.cursor/projects/home-dev-web/agent-transcripts/*.jsonl corpus/cursor/
