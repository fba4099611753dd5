#!/usr/bin/env bash
# Seeds each fuzz target's corpus from the session fixtures (not committed:
# libFuzzer grows the corpus directories in place).
set -eu
cd "$(dirname "$0")"
F=../fixtures/sessions/home
mkdir -p corpus/claude corpus/codex corpus/gemini corpus/cursor corpus/live
cp "$F"/.claude/projects/*/*.jsonl corpus/claude/
cp "$F"/.codex/sessions/2026/03/02/*.jsonl "$F"/.codex/sessions/*.jsonl corpus/codex/
for f in "$F"/.gemini/tmp/shop/chats/*.json; do { printf '\0'; cat "$f"; } > "corpus/gemini/$(basename "$f")"; done
for f in "$F"/.gemini/tmp/shop/chats/*.jsonl; do { printf '\1'; cat "$f"; } > "corpus/gemini/$(basename "$f")"; done
cp "$F"/.cursor/projects/home-dev-web/agent-transcripts/*.jsonl corpus/cursor/
# live: byte 0 = provider (0 claude, 1 codex, 2 gemini, 3 cursor) | 4 when the tail starts the file.
L=../fixtures/live
i=0
for p in claude codex gemini cursor; do
  find "$L/$p" -type f | while read -r f; do printf "\\$(printf '%03o' $((i | 4)))" > "corpus/live/$p-$(basename "$f")"; cat "$f" >> "corpus/live/$p-$(basename "$f")"; done
  i=$((i + 1))
done
