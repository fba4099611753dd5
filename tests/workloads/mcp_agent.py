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
import json
import os
import subprocess
import sys
import time

# The Claude Code transcript writer is scripted_agent.py's (run as the
# server through a symlink, this file finds it beside its real path).
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from scripted_agent import Claude  # noqa: E402

# The server's temp name is fixed so the test can name it exactly.
TMP_SUFFIX = ".0a1b2c3d.tmp"


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


def agent(a):
    os.chdir(a.cwd)
    server = subprocess.Popen(["python3", a.server, a.cwd], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    # Let the server finish starting before the conversation does.
    time.sleep(0.5)
    t = Claude(a)
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
    t.line(
        "assistant",
        {"id": "msg_99", "type": "message", "role": "assistant",
         "model": "claude-sonnet-4-5-20250929",
         "content": [{"type": "text", "text": "notes.txt rewritten."}],
         "stop_reason": "end_turn",
         "usage": {"input_tokens": 10, "output_tokens": 5,
                   "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}},
        requestId="req_99",
    )
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
