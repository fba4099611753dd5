#!/usr/bin/env python3
"""A scripted Claude Code agent with a stdio MCP server, for the views tests.

`mcp_agent.py agent --home H --cwd W --session-id S --server PATH` writes a
real-format Claude Code transcript under H while doing what it claims:

1. it starts its configured MCP server `python3 PATH W` (a child, as
   Claude Code starts its stdio servers before the first prompt);
2. an MCP call `mcp__fs__write_file` of the existing W/notes.txt: the
   server writes `notes.txt.0a1b2c3d.tmp` and renames it onto the path (as
   the reference filesystem server writes an existing file);
3. a Bash call `cat notes.txt`, run by `bash -c`.

`PATH` is this file under a name the tool knows as the reference filesystem
server (`mcp-server-filesystem`); run that way, it is the server: one JSON
request a line on stdin, one answer a line on stdout.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import uuid

# The server's temp name is fixed so the test can name it exactly.
TMP_SUFFIX = ".0a1b2c3d.tmp"


def now_iso():
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def pause():
    # Keeps each step's timestamps distinct at millisecond resolution, and
    # the server's writes well inside its call's window.
    time.sleep(0.1)


def serve(root):
    for line in sys.stdin:
        req = json.loads(line)
        path = os.path.join(root, req["arguments"]["path"])
        tmp = path + TMP_SUFFIX
        with open(tmp, "w") as f:
            f.write(req["arguments"]["content"])
        os.rename(tmp, path)
        sys.stdout.write(json.dumps({"text": "Successfully wrote to " + path}) + "\n")
        sys.stdout.flush()


class Transcript:
    def __init__(self, a):
        self.a = a
        enc = "".join(c if c.isalnum() else "-" for c in a.cwd)
        d = os.path.join(a.home, ".claude", "projects", enc)
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(d, a.session_id + ".jsonl")
        self.parent = None

    def line(self, kind, message, **extra):
        u = str(uuid.uuid4())
        rec = {
            "type": kind,
            "uuid": u,
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.a.cwd,
            "sessionId": self.a.session_id,
            "version": "2.1.40",
            "gitBranch": "main",
            "timestamp": now_iso(),
            "message": message,
        }
        rec.update(extra)
        self.parent = u
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def assistant(self, n, content, stop):
        self.line(
            "assistant",
            {
                "id": "msg_%02d" % n,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": content,
                "stop_reason": stop,
                "usage": {"input_tokens": 10, "output_tokens": 5,
                          "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            },
            requestId="req_%02d" % n,
        )

    def call(self, n, name, inp):
        tid = "toolu_%02d" % n
        self.assistant(n, [{"type": "tool_use", "id": tid, "name": name, "input": inp}], "tool_use")
        return tid

    def result(self, tid, content, tur):
        self.line(
            "user",
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": False}]},
            toolUseResult=tur,
        )


def agent(a):
    os.chdir(a.cwd)
    server = subprocess.Popen(["python3", a.server, a.cwd], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    # Let the server finish starting before the conversation does.
    time.sleep(0.5)
    t = Transcript(a)
    t.line("user", {"role": "user", "content": "Rewrite notes.txt with the fs server, then show it"})
    pause()
    args = {"path": "notes.txt", "content": "rewritten through MCP\n"}
    tid = t.call(1, "mcp__fs__write_file", args)
    pause()
    server.stdin.write(json.dumps({"tool": "write_file", "arguments": args}) + "\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())["text"]
    pause()
    text = [{"type": "text", "text": answer}]
    t.result(tid, text, text)
    pause()
    cmd = "cat notes.txt"
    tid = t.call(2, "Bash", {"command": cmd, "description": "show notes"})
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    t.result(tid, p.stdout, {"stdout": p.stdout, "stderr": p.stderr,
                             "interrupted": False, "isImage": False})
    pause()
    t.assistant(99, [{"type": "text", "text": "notes.txt rewritten."}], "end_turn")
    server.stdin.close()
    server.wait()


def main():
    if os.path.basename(sys.argv[0]) == "mcp-server-filesystem":
        serve(sys.argv[1])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["agent"])
    ap.add_argument("--home", required=True)
    ap.add_argument("--cwd", required=True)
    ap.add_argument("--session-id", required=True)
    ap.add_argument("--server", required=True)
    agent(ap.parse_args())


if __name__ == "__main__":
    main()
