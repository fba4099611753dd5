#!/usr/bin/env python3
"""A scripted coding agent for the correlate tests.

It writes a real-format transcript (Claude Code project JSONL, or a Codex
rollout) under --home while really doing what each tool call claims, the way
the real agents do it:

- Claude Code: every line appended with open/append/close; Bash runs
  `bash -c CMD`; Write/Read are done by the agent process itself.
- Codex: the rollout is kept open; `shell` is recorded as `bash -lc CMD` but
  run by re-executing this program, which then execs `bash -c CMD` (as Codex
  re-execs itself); apply_patch writes from the agent process, no child.

Plus, undeclared in the transcript: one file write (--undeclared) and one
TCP connection to 127.0.0.1:--port, both from the agent process.
"""

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import uuid


def now_iso():
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def pause():
    # Keeps each step's timestamps distinct at millisecond resolution.
    time.sleep(0.05)


def undeclared(args):
    with open(args.undeclared, "w") as f:
        f.write("not in the transcript\n")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect_ex(("127.0.0.1", args.port))
    s.close()


class Claude:
    def __init__(self, args):
        self.a = args
        enc = "".join(c if c.isalnum() else "-" for c in args.cwd)
        d = os.path.join(args.home, ".claude", "projects", enc)
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(d, args.session_id + ".jsonl")
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
        # Claude Code appends each line with appendFileSync.
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def call(self, n, name, inp):
        tid = "toolu_%02d" % n
        self.line(
            "assistant",
            {
                "id": "msg_%02d" % n,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "tool_use", "id": tid, "name": name, "input": inp}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5,
                          "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            },
            requestId="req_%02d" % n,
        )
        return tid

    def result(self, tid, text, tur, is_error=False):
        self.line(
            "user",
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": is_error}]},
            toolUseResult=tur,
        )

    def run(self):
        a = self.a
        self.line("user", {"role": "user", "content": a.prompt})
        pause()
        cmd = "echo hello > notes.txt && cat notes.txt"
        tid = self.call(1, "Bash", {"command": cmd, "description": "write notes"})
        p = subprocess.run(["bash", "-c", cmd], cwd=a.cwd, capture_output=True, text=True)
        self.result(tid, p.stdout, {"stdout": p.stdout, "stderr": p.stderr,
                                    "interrupted": False, "isImage": False})
        pause()
        out = os.path.join(a.cwd, "out.txt")
        tid = self.call(2, "Write", {"file_path": out, "content": "done\n"})
        with open(out, "w") as f:
            f.write("done\n")
        self.result(tid, "File created successfully at: " + out,
                    {"type": "create", "filePath": out, "content": "done\n"})
        pause()
        notes = os.path.join(a.cwd, "notes.txt")
        tid = self.call(3, "Read", {"file_path": notes})
        with open(notes) as f:
            body = f.read()
        self.result(tid, "1\t" + body, {"type": "text", "file": {"filePath": notes, "content": body}})
        pause()
        undeclared(a)
        pause()
        self.line(
            "assistant",
            {"id": "msg_99", "type": "message", "role": "assistant",
             "model": "claude-sonnet-4-5-20250929",
             "content": [{"type": "text", "text": "Notes written and checked."}],
             "stop_reason": "end_turn",
             "usage": {"input_tokens": 10, "output_tokens": 7,
                       "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}},
            requestId="req_99",
        )


class Codex:
    def __init__(self, args):
        self.a = args
        t = datetime.datetime.now()
        d = os.path.join(args.home, ".codex", "sessions", t.strftime("%Y"), t.strftime("%m"),
                         t.strftime("%d"))
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(
            d, "rollout-%s-%s.jsonl" % (t.strftime("%Y-%m-%dT%H-%M-%S"), args.session_id))
        # Codex keeps its rollout open for the whole session.
        self.f = open(self.path, "a")

    def line(self, kind, payload):
        self.f.write(json.dumps({"timestamp": now_iso(), "type": kind, "payload": payload}) + "\n")
        self.f.flush()

    def shell(self, n, cmd):
        cid = "call_%02d" % n
        self.line("response_item", {"type": "function_call", "name": "shell",
                                    "arguments": json.dumps({"command": ["bash", "-lc", cmd],
                                                             "workdir": self.a.cwd}),
                                    "call_id": cid})
        t0 = time.time()
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--exec-helper",
                            "bash", "-c", cmd], cwd=self.a.cwd, capture_output=True, text=True)
        out = {"output": p.stdout + p.stderr,
               "metadata": {"exit_code": p.returncode,
                            "duration_seconds": round(time.time() - t0, 3)}}
        self.line("response_item", {"type": "function_call_output", "call_id": cid,
                                    "output": json.dumps(out)})

    def run(self):
        a = self.a
        self.line("session_meta", {"id": a.session_id, "timestamp": now_iso(), "cwd": a.cwd,
                                   "originator": "codex_exec", "cli_version": "0.169.0",
                                   "source": "exec", "model_provider": "mock"})
        self.line("event_msg", {"type": "user_message", "message": "Write notes, then check them",
                                "images": [], "local_images": [], "text_elements": []})
        self.line("turn_context", {"turn_id": "t-1", "cwd": a.cwd, "approval_policy": "never",
                                   "sandbox_policy": {"type": "danger-full-access"},
                                   "model": "gpt-5.5", "summary": "auto"})
        pause()
        self.shell(1, "echo hello > notes.txt && cat notes.txt")
        pause()
        patch = "*** Begin Patch\n*** Add File: out.txt\n+done\n*** End Patch\n"
        self.line("response_item", {"type": "custom_tool_call", "status": "completed",
                                    "call_id": "call_02", "name": "apply_patch", "input": patch})
        with open(os.path.join(a.cwd, "out.txt"), "w") as f:
            f.write("done\n")
        self.line("response_item", {"type": "custom_tool_call_output", "call_id": "call_02",
                                    "output": json.dumps({"output": "Success. Updated the following files:\nA out.txt\n",
                                                          "metadata": {"exit_code": 0, "duration_seconds": 0.0}})})
        pause()
        self.shell(3, "ls notes.txt")
        pause()
        undeclared(a)
        pause()
        usage = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 20,
                 "reasoning_output_tokens": 5, "total_tokens": 120}
        self.line("event_msg", {"type": "token_count", "info": {"total_token_usage": usage,
                                                              "last_token_usage": usage,
                                                              "model_context_window": 200000}})
        self.line("event_msg", {"type": "agent_message", "message": "Notes written and checked."})
        self.line("event_msg", {"type": "task_complete", "turn_id": "t-1",
                                "last_agent_message": "Notes written and checked."})
        self.f.close()


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--exec-helper":
        # Like Codex's re-exec of itself: become the shell.
        os.execvp(sys.argv[2], sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["claude", "codex"], required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--cwd", required=True)
    ap.add_argument("--session-id", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--undeclared", required=True)
    # The Claude prompt (the hostile-text tests put terminal controls in it).
    ap.add_argument("--prompt", default="Write notes, then check them")
    args = ap.parse_args()
    os.chdir(args.cwd)
    (Claude if args.format == "claude" else Codex)(args).run()


if __name__ == "__main__":
    main()
