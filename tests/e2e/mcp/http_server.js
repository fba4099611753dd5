#!/usr/bin/env node
// A small remote MCP server over streamable HTTP for the e2e tests (issue 28):
//
//   node http_server.js --port 8790 --dir DIR --log FILE
//
// One endpoint, `/mcp`, on 127.0.0.1. Each client message is a POST of one
// JSON-RPC message (or a batch): requests (`initialize`, `ping`, `tools/list`,
// `tools/call`) are answered with `application/json`, notifications and
// responses with 202. `initialize` opens a session: its answer carries an
// `Mcp-Session-Id` header that every later request must send (400 without,
// 404 for an unknown or ended one); DELETE ends it. GET (a server-to-client
// stream) is not offered: 405, which the transport allows. Every answer
// closes its connection (`Connection: close`), so each message the client
// sends is a TCP connect of its own.
//
// One tool, `write_note{text}`, appends the text and a newline to DIR/notes.txt.
// Every HTTP request is appended to FILE (JSONL: method, path, session, body,
// status). Prints the port it listens on once listening. Built-in modules only.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback === undefined) {
    process.stderr.write(`http_server.js: --${name} is required\n`);
    process.exit(2);
  }
  return fallback;
}

const port = Number(option("port", "8790"));
const dir = option("dir");
const logFile = option("log");
const NOTES = path.join(dir, "notes.txt");
const ENDPOINT = "/mcp";
// Versions this server speaks; a client asking for another gets the newest.
const VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

const TOOLS = [
  {
    name: "write_note",
    description: "Append one line of text to the notes file.",
    inputSchema: {
      type: "object",
      properties: { text: { type: "string", description: "The line to append." } },
      required: ["text"],
      additionalProperties: false,
    },
    annotations: { destructiveHint: false, idempotentHint: false },
  },
];

const sessions = new Set();

function log(entry) {
  fs.appendFileSync(logFile, JSON.stringify({ ts: new Date().toISOString(), ...entry }) + "\n");
}

function rpcError(id, code, message) {
  return { jsonrpc: "2.0", id: id ?? null, error: { code, message } };
}

function callTool(params) {
  if (params?.name !== "write_note") {
    return { content: [{ type: "text", text: `Unknown tool: ${params?.name}` }], isError: true };
  }
  const text = params.arguments?.text;
  if (typeof text !== "string") {
    return { content: [{ type: "text", text: "text must be a string" }], isError: true };
  }
  fs.appendFileSync(NOTES, text + "\n");
  return { content: [{ type: "text", text: `Noted: ${text}` }] };
}

// The answer to one request, or null for a notification or a response.
function answer(msg) {
  if (msg === null || typeof msg !== "object" || msg.jsonrpc !== "2.0") {
    return rpcError(null, -32600, "Invalid Request");
  }
  if (msg.method === undefined || msg.id === undefined) return null;
  switch (msg.method) {
    case "initialize": {
      const asked = msg.params?.protocolVersion;
      return {
        jsonrpc: "2.0",
        id: msg.id,
        result: {
          protocolVersion: VERSIONS.includes(asked) ? asked : VERSIONS[0],
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: "agentsight-e2e-notes", version: "1.0.0" },
        },
      };
    }
    case "ping":
      return { jsonrpc: "2.0", id: msg.id, result: {} };
    case "tools/list":
      return { jsonrpc: "2.0", id: msg.id, result: { tools: TOOLS } };
    case "tools/call":
      return { jsonrpc: "2.0", id: msg.id, result: callTool(msg.params) };
    default:
      return rpcError(msg.id, -32601, `Method not found: ${msg.method}`);
  }
}

function reply(res, entry, status, headers, body) {
  log({ ...entry, status });
  // One connection per message: the call's own message is then a connect
  // the kernel sees inside the call, not a reused keep-alive socket.
  res.writeHead(status, { ...headers, Connection: "close" });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

// A POST: one message or a batch.
function post(req, res, entry, raw) {
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return reply(res, entry, 400, { "Content-Type": "application/json" }, rpcError(null, -32700, "Parse error"));
  }
  entry.body = parsed;
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  const opens = messages.some((m) => m?.method === "initialize");
  const headers = { "Content-Type": "application/json" };
  if (opens) {
    const id = crypto.randomUUID();
    sessions.add(id);
    headers["Mcp-Session-Id"] = id;
    entry.session = id;
  } else if (!entry.session) {
    return reply(res, entry, 400, headers, rpcError(null, -32000, "Bad Request: Mcp-Session-Id required"));
  } else if (!sessions.has(entry.session)) {
    return reply(res, entry, 404, headers, rpcError(null, -32001, "Session not found"));
  }
  const answers = messages.map(answer).filter((a) => a !== null);
  if (answers.length === 0) return reply(res, entry, 202, {});
  return reply(res, entry, 200, headers, Array.isArray(parsed) ? answers : answers[0]);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const entry = {
      method: req.method,
      path: req.url,
      session: req.headers["mcp-session-id"] ?? null,
      protocol_version: req.headers["mcp-protocol-version"] ?? null,
    };
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.pathname !== ENDPOINT) return reply(res, entry, 404, {});
    if (req.method === "POST") return post(req, res, entry, Buffer.concat(chunks).toString("utf8"));
    if (req.method === "DELETE") {
      const known = entry.session !== null && sessions.delete(entry.session);
      return reply(res, entry, known ? 200 : 404, {});
    }
    return reply(res, entry, 405, { Allow: "POST, DELETE" });
  });
});

server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`${server.address().port}\n`);
});
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => process.exit(0));
}
