#!/usr/bin/env node
// Scripted model server for agentsight's end-to-end tests.
//
// Speaks just enough of four wire APIs (Anthropic Messages, OpenAI Responses as
// Codex uses it, OpenAI Chat Completions, Gemini
// generateContent/streamGenerateContent) to drive the real
// agent CLIs through a scripted scenario, so they make real tool calls and write
// their own genuine transcripts. Only Node's built-in modules: the e2e tier must
// not depend on anything fetched from a registry besides the CLIs themselves.
//
// Usage:
//   node server.js --scenario FILE --log FILE [--port N] [--target-port N] [--cwd DIR]
//
// Port 0 (the default) lets the kernel choose; the chosen port is printed on
// stdout as the first line, the target port (a plain HTTP endpoint that the
// network scenario fetches) as the second line. Every request and every
// response sent is appended to the log as one JSON object per line, with the
// exact token usage reported, so tests can compare the transcript's totals.

'use strict';

const http = require('http');
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const a = { port: 0, targetPort: 0, cwd: process.cwd() };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    switch (k) {
      case '--scenario': a.scenario = v; i++; break;
      case '--log': a.log = v; i++; break;
      case '--port': a.port = Number(v); i++; break;
      case '--target-port': a.targetPort = Number(v); i++; break;
      case '--cwd': a.cwd = v; i++; break;
      default: throw new Error(`unknown argument ${k}`);
    }
  }
  if (!a.scenario || !a.log) throw new Error('--scenario and --log are required');
  return a;
}

const args = parseArgs(process.argv.slice(2));
const scenario = JSON.parse(fs.readFileSync(args.scenario, 'utf8'));
const logFd = fs.openSync(args.log, 'a');
let seq = 0;
// Main (tool-carrying) responses and auxiliary ones are numbered separately so
// that the usage of a main response does not depend on how many side calls
// (titles, classifiers, quota probes) a CLI version happens to make.
let mainCount = 0;
let auxCount = 0;
let targetPort = args.targetPort;

function log(obj) {
  fs.writeSync(logFd, JSON.stringify({ seq: seq++, ts: new Date().toISOString(), ...obj }) + '\n');
}

// ---------------------------------------------------------------- scenario

// Replaces {{CWD}}, {{TMP}} (the run's TMPDIR, `tmp/` beside the workspace)
// {{TARGET_PORT}} and {{MODEL_PORT}} (this server's own: a call that reaches
// the model server directly, around a relay) in every string of a value.
function subst(v) {
  if (typeof v === 'string') {
    return v
      .replaceAll('{{CWD}}', args.cwd)
      .replaceAll('{{TMP}}', path.join(path.dirname(args.cwd), 'tmp'))
      .replaceAll('{{TARGET_PORT}}', String(targetPort))
      .replaceAll('{{MODEL_PORT}}', String(server.address().port));
  }
  if (Array.isArray(v)) return v.map(subst);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, subst(x)]));
  }
  return v;
}

// The turn to play is decided from the request alone: it is the first turn
// whose preceding turns asked for exactly as many tool calls as the request
// carries tool results. Parallel calls in one turn therefore advance by N.
function pickTurn(resultCount) {
  let before = 0;
  for (let i = 0; i < scenario.turns.length; i++) {
    if (before >= resultCount) return i;
    before += (scenario.turns[i].calls || []).length;
  }
  return scenario.turns.length - 1;
}

// Deterministic, distinct usage per response so totals are checkable and a
// double-count or a missed response shows up as a wrong sum.
function usageFor(kind, n) {
  if (kind === 'aux') {
    return { input: 300 + n, cached: 0, output: 5 + n, reasoning: 0, cacheCreation: 0 };
  }
  return {
    input: 1000 + 100 * n, // prompt tokens, including the cached ones
    // Read from cache (0 on the first call); never all of the prompt, also
    // past the fourth call.
    cached: Math.min(400 * n, 900 + 100 * n),
    cacheCreation: n === 0 ? 600 : 50, // Anthropic only: written to cache
    output: 40 + 3 * n, // visible output, excluding reasoning
    reasoning: 10 + n, // Codex reasoning / Gemini thoughts
  };
}

// ---------------------------------------------------------------- tools

// One offered tool: { name, props: {name: schema}, required, custom, format }.
function toolsOf(api, body) {
  const out = [];
  if (api === 'anthropic') {
    for (const t of body.tools || []) {
      if (!t.name) continue;
      out.push({ name: t.name, props: (t.input_schema || {}).properties || {}, required: (t.input_schema || {}).required || [] });
    }
  } else if (api === 'openai') {
    for (const t of body.tools || []) {
      if (t.type === 'function') {
        out.push({ name: t.name, props: (t.parameters || {}).properties || {}, required: (t.parameters || {}).required || [] });
      } else if (t.type === 'custom') {
        out.push({ name: t.name, props: {}, required: [], custom: true, format: t.format });
      } else if (t.type === 'tool_search') {
        // Codex's client-executed search for its deferred (MCP) tools.
        out.push({ name: 'tool_search', props: {}, required: [], search: true });
      } else if (t.type === 'namespace') {
        for (const f of t.tools || []) {
          out.push({ name: f.name, namespace: t.name, props: (f.parameters || {}).properties || {}, required: [] });
        }
      }
    }
    // Tools a tool_search returned earlier in the conversation: callable by
    // namespace and name from then on.
    for (const i of Array.isArray(body.input) ? body.input : []) {
      if (!i || i.type !== 'tool_search_output') continue;
      for (const ns of i.tools || []) {
        if (ns.type !== 'namespace') continue;
        for (const f of ns.tools || []) {
          out.push({ name: f.name, namespace: ns.name, props: (f.parameters || {}).properties || {}, required: [], found: true });
        }
      }
    }
  } else if (api === 'chat') {
    for (const t of body.tools || []) {
      const f = t && t.function;
      if (!f || !f.name) continue;
      out.push({ name: f.name, props: (f.parameters || {}).properties || {}, required: (f.parameters || {}).required || [] });
    }
    // Qwen Code's deferred tools: behind `tool_search` (a `select:NAME`
    // query) and the `tool_call{name, arguments}` bridge. A tool a search
    // returned earlier in the conversation is callable through the bridge.
    if (out.some((t) => t.name === 'tool_search') && out.some((t) => t.name === 'tool_call')) {
      out.push({ name: 'tool_search', props: {}, required: [], search: true, bridge: true });
      for (const n of bridgeFound(body)) out.push({ name: n, props: {}, required: [], bridged: true });
    }
  } else {
    for (const group of body.tools || []) {
      for (const f of group.functionDeclarations || []) {
        const schema = f.parametersJsonSchema || f.parameters || {};
        out.push({ name: f.name, props: schema.properties || {}, required: schema.required || [] });
      }
    }
  }
  return out;
}

// Copilot CLI 1.0.102: bash, view, create; opencode 1.18.33: bash, read,
// write (camelCase `filePath`); Qwen Code 0.24.4: Gemini CLI's names.
const PREFERRED = {
  shell: ['Bash', 'exec_command', 'shell_command', 'shell', 'run_shell_command', 'bash'],
  write_file: ['Write', 'write_file', 'apply_patch', 'create', 'write'],
  read_file: ['Read', 'read_file', 'view', 'read'],
  list_dir: ['LS', 'list_directory', 'Glob'],
};

function findTool(tools, names) {
  for (const n of names) {
    const t = tools.find((x) => x.name === n);
    if (t) return t;
  }
  return null;
}

function propName(tool, candidates) {
  return candidates.find((c) => c in tool.props) || null;
}

function absPath(p) {
  return path.isAbsolute(p) ? p : path.join(args.cwd, p);
}

function shQuote(s) {
  return `'${String(s).replaceAll("'", `'\\''`)}'`;
}

// Builds the arguments for a shell tool from its schema: Codex's `shell` takes
// an argv array, `exec_command` a `cmd` string, the others a `command` string.
function shellCall(tool, command, escalate) {
  const input = {};
  const key = propName(tool, ['command', 'cmd']);
  if (!key) throw new Error(`shell tool ${tool.name} has no command property`);
  input[key] = tool.props[key].type === 'array' ? ['bash', '-lc', command] : command;
  const wd = propName(tool, ['workdir', 'dir_path', 'directory']);
  if (wd && wd !== 'directory') input[wd] = args.cwd;
  if ('description' in tool.props) input.description = `run ${command.split(' ')[0]}`;
  if ('yield_time_ms' in tool.props) input.yield_time_ms = 10000;
  // `escalate` (a justification): Codex's request to run the command outside
  // its sandbox, which needs the user's approval under `on-request`.
  if (escalate && 'sandbox_permissions' in tool.props) {
    input.sandbox_permissions = 'require_escalated';
    input.justification = escalate;
  }
  return { name: tool.name, input };
}

function patchText(p, content) {
  const lines = content.replace(/\n$/, '').split('\n').map((l) => `+${l}`);
  return `*** Begin Patch\n*** Add File: ${p}\n${lines.join('\n')}\n*** End Patch\n`;
}

// Maps one generic intent of the scenario onto a tool the CLI offered.
function concreteCall(intent, tools) {
  if (intent.mcp) return mcpCall(subst(intent.mcp), tools);
  // Other keys of an intent (expected status, exit code) are for the tests.
  const kind = Object.keys(intent).find((k) => k in PREFERRED);
  if (!kind) throw new Error(`no known intent in ${JSON.stringify(intent)}`);
  const arg = subst(intent[kind]);
  const shell = findTool(tools, PREFERRED.shell);
  if (kind === 'shell') {
    if (!shell) throw new Error('no shell tool offered');
    return shellCall(shell, arg, intent.escalate);
  }
  const t = findTool(tools, PREFERRED[kind] || []);
  if (kind === 'write_file') {
    if (t && t.name === 'apply_patch') {
      const text = patchText(arg.path, arg.content);
      return t.custom ? { name: t.name, custom: text } : { name: t.name, input: { input: text } };
    }
    if (t) {
      const pk = propName(t, ['file_path', 'absolute_path', 'filePath', 'path']);
      const ck = propName(t, ['content', 'file_text']) || 'content';
      return { name: t.name, input: { [pk]: absPath(arg.path), [ck]: arg.content } };
    }
    if (!shell) throw new Error('no write tool offered');
    return shellCall(shell, `printf %s ${shQuote(arg.content)} > ${shQuote(arg.path)}`);
  }
  if (kind === 'read_file') {
    if (t) {
      const pk = propName(t, ['file_path', 'absolute_path', 'filePath', 'path']);
      return { name: t.name, input: { [pk]: absPath(arg) } };
    }
    if (!shell) throw new Error('no read tool offered');
    return shellCall(shell, `cat ${shQuote(arg)}`);
  }
  if (kind === 'list_dir') {
    if (t && t.name === 'Glob') return { name: t.name, input: { pattern: '*', path: absPath(arg) } };
    if (t) {
      const pk = propName(t, ['path', 'dir_path', 'absolute_path']);
      return { name: t.name, input: { [pk]: absPath(arg) } };
    }
    if (!shell) throw new Error('no list tool offered');
    return shellCall(shell, `ls ${shQuote(arg)}`);
  }
  throw new Error(`unknown intent ${kind}`);
}

// An MCP intent `{"mcp": {server, tool, arguments}}` as the CLI names MCP
// tools: Claude Code `mcp__S__T`, Gemini CLI `mcp_S_T`, Copilot CLI `S-T`,
// opencode `S_T`; Qwen Code defers them behind `tool_search` and calls
// them through `tool_call{name: "mcp__S__T", arguments}`; Codex defers them
// behind `tool_search` and calls them by namespace (`mcp__S__`) and name once
// a search returned them. Not found yet but searchable: a `search` marker,
// which plan() turns into a tool_search call.
function mcpCall(m, tools) {
  const args = m.arguments || {};
  const names = [`mcp__${m.server}__${m.tool}`, `mcp_${m.server}_${m.tool}`, `${m.server}-${m.tool}`, `${m.server}_${m.tool}`];
  const direct = tools.find((t) => !t.namespace && !t.bridged && !t.search && names.includes(t.name));
  if (direct) return { name: direct.name, input: args };
  const ns = tools.find((t) => t.namespace && t.name === m.tool && t.namespace.replace(/_+$/, '') === `mcp__${m.server}`);
  if (ns) return { name: ns.name, namespace: ns.namespace, input: args };
  // Qwen Code: through its bridge once a search returned the tool.
  const qwenName = `mcp__${m.server}__${m.tool}`;
  if (tools.some((t) => t.bridged && t.name === qwenName)) return { name: 'tool_call', input: { name: qwenName, arguments: args } };
  const bridge = tools.find((t) => t.search && t.bridge);
  if (bridge) {
    const query = { query: `select:${qwenName}` };
    return { name: 'tool_search', input: query, search: query };
  }
  if (tools.some((t) => t.search)) return { name: 'tool_search', search: { query: `${m.server} ${m.tool}`, limit: 8 } };
  throw new Error(`MCP tool ${m.server}/${m.tool} not offered`);
}

// The ids of a chat conversation's `tool_search` calls.
function searchCallIds(body) {
  const ids = new Set();
  for (const m of body.messages || []) {
    for (const tc of (m && m.role === 'assistant' && m.tool_calls) || []) {
      if (tc.function && tc.function.name === 'tool_search') ids.add(tc.id);
    }
  }
  return ids;
}

// The tools `select:NAME` searches of a chat conversation returned (their
// result names them).
function bridgeFound(body) {
  const queried = new Map();
  for (const m of body.messages || []) {
    for (const tc of (m && m.role === 'assistant' && m.tool_calls) || []) {
      if (!tc.function || tc.function.name !== 'tool_search') continue;
      let q = '';
      try { q = JSON.parse(tc.function.arguments || '{}').query || ''; } catch { q = ''; }
      if (q.startsWith('select:')) queried.set(tc.id, q.slice('select:'.length));
    }
  }
  const found = [];
  for (const m of body.messages || []) {
    if (!m || m.role !== 'tool' || !queried.has(m.tool_call_id)) continue;
    const text = typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
    const n = queried.get(m.tool_call_id);
    if (text.includes(n)) found.push(n);
  }
  return found;
}

// ---------------------------------------------------------------- requests

function countResults(api, body) {
  let n = 0;
  if (api === 'anthropic') {
    for (const m of body.messages || []) {
      if (Array.isArray(m.content)) n += m.content.filter((b) => b && b.type === 'tool_result').length;
    }
  } else if (api === 'openai') {
    const items = Array.isArray(body.input) ? body.input : [];
    n = items.filter((i) => i && (i.type === 'function_call_output' || i.type === 'custom_tool_call_output')).length;
  } else if (api === 'chat') {
    // One `role: "tool"` message per result, each naming its call; a
    // search of deferred tools (Qwen Code's `tool_search`) is no call of
    // the scenario.
    const searches = searchCallIds(body);
    n = (body.messages || []).filter((m) => m && m.role === 'tool' && m.tool_call_id && !searches.has(m.tool_call_id)).length;
  } else {
    for (const c of body.contents || []) {
      n += (c.parts || []).filter((p) => p && p.functionResponse).length;
    }
  }
  return n;
}

// A request that offers no tools is a CLI side call (title, classifier, quota
// probe); it is answered plainly and logged as auxiliary.
function plan(api, body) {
  const tools = toolsOf(api, body);
  if (tools.length === 0) {
    const n = auxCount++;
    return { kind: 'aux', text: auxText(api, body), calls: [], usage: usageFor('aux', n), turn: null };
  }
  // A continuation scenario (a session continued by `agentsight session
  // message`) starts after the earlier run's `prior_results` tool results.
  const results = Math.max(0, countResults(api, body) - (scenario.prior_results || 0));
  const turn = pickTurn(results);
  const t = scenario.turns[turn];
  const n = mainCount++;
  let calls = (t.calls || []).map((c) => concreteCall(c, tools));
  // A turn whose MCP tools are still deferred first searches for them (one
  // tool_search call per missing tool); the search result carries no tool
  // result of a call, so the next request picks the same turn again.
  const searches = calls.filter((c) => c.search);
  if (searches.length) {
    return { kind: 'main', search: true, text: '', calls: searches, usage: usageFor('main', n), turn, results };
  }
  const text = t.final != null ? subst(t.final) : (t.text != null ? subst(t.text) : '');
  return { kind: 'main', text, calls, usage: usageFor('main', n), turn, results };
}

// Gemini's routing classifier asks for JSON matching a schema: answer with the
// first enum value / a short string per property so the CLI parses it.
function auxText(api, body) {
  const gc = body.generationConfig || {};
  const rf = body.response_format || {};
  const schema = gc.responseJsonSchema || gc.responseSchema || (rf.json_schema && rf.json_schema.schema);
  if (schema) return JSON.stringify(fillSchema(schema));
  return 'OK';
}

function fillSchema(s) {
  if (!s || typeof s !== 'object') return null;
  if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
  const type = String(s.type || '').toLowerCase();
  if (type === 'object' || s.properties) {
    const o = {};
    for (const [k, v] of Object.entries(s.properties || {})) o[k] = fillSchema(v);
    return o;
  }
  if (type === 'array') return [];
  if (type === 'number' || type === 'integer') return typeof s.minimum === 'number' ? s.minimum : 0;
  if (type === 'boolean') return false;
  return 'scripted';
}

let idCounter = 0;
// A continuation scenario's ids carry its name: the earlier run's server
// handed out the same numbers, and a CLI that sees a tool-use id again in
// the session's history treats the new call's result as a duplicate
// (Claude Code drops it from the next request).
function nextId(prefix) {
  idCounter++;
  const scope = scenario.prior_results ? `${scenario.name}_` : '';
  return `${prefix}e2e${scope}${String(idCounter).padStart(6, '0')}`;
}

// ---------------------------------------------------------------- Anthropic

function anthropicEvents(body, p) {
  const u = p.usage;
  const model = body.model || 'claude-sonnet-4-5';
  // Anthropic's input_tokens exclude cache reads and cache writes.
  const usage = {
    input_tokens: p.kind === 'aux' ? u.input : u.input - u.cached,
    cache_creation_input_tokens: p.kind === 'aux' ? 0 : u.cacheCreation,
    cache_read_input_tokens: p.kind === 'aux' ? 0 : u.cached,
    output_tokens: u.output,
  };
  // The real API splits cache writes by lifetime; Claude Code copies this
  // object into its transcript, and readers prefer it over the flat count.
  usage.cache_creation = { ephemeral_5m_input_tokens: usage.cache_creation_input_tokens, ephemeral_1h_input_tokens: 0 };
  const content = [];
  if (p.text) content.push({ type: 'text', text: p.text });
  for (const c of p.calls) content.push({ type: 'tool_use', id: nextId('toolu_'), name: c.name, input: c.input });
  const msgId = nextId('msg_');
  const ev = [];
  ev.push(['message_start', {
    type: 'message_start',
    message: { id: msgId, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
  }]);
  content.forEach((b, i) => {
    if (b.type === 'text') {
      ev.push(['content_block_start', { type: 'content_block_start', index: i, content_block: { type: 'text', text: '' } }]);
      ev.push(['content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'text_delta', text: b.text } }]);
    } else {
      ev.push(['content_block_start', { type: 'content_block_start', index: i, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } }]);
      ev.push(['content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } }]);
    }
    ev.push(['content_block_stop', { type: 'content_block_stop', index: i }]);
  });
  ev.push(['message_delta', {
    type: 'message_delta',
    delta: { stop_reason: p.calls.length ? 'tool_use' : 'end_turn', stop_sequence: null },
    usage,
  }]);
  ev.push(['message_stop', { type: 'message_stop' }]);
  const message = { id: msgId, type: 'message', role: 'assistant', model, content, stop_reason: p.calls.length ? 'tool_use' : 'end_turn', stop_sequence: null, usage };
  return { ev, message, reported: { model, id: msgId, ...usage } };
}

// ---------------------------------------------------------------- OpenAI

function openaiEvents(body, p) {
  const u = p.usage;
  const model = body.model || 'gpt-5.5';
  const respId = nextId('resp_');
  const output = [];
  if (p.text) {
    output.push({ type: 'message', id: nextId('msg_'), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: p.text, annotations: [] }] });
  }
  for (const c of p.calls) {
    if (c.search) {
      output.push({ type: 'tool_search_call', id: nextId('tsc_'), call_id: nextId('call_'), status: 'completed', execution: 'client', arguments: c.search });
    } else if (c.namespace) {
      output.push({ type: 'function_call', id: nextId('fc_'), call_id: nextId('call_'), namespace: c.namespace, name: c.name, arguments: JSON.stringify(c.input), status: 'completed' });
    } else if (c.custom != null) {
      output.push({ type: 'custom_tool_call', id: nextId('ctc_'), call_id: nextId('call_'), name: c.name, input: c.custom, status: 'completed' });
    } else {
      output.push({ type: 'function_call', id: nextId('fc_'), call_id: nextId('call_'), name: c.name, arguments: JSON.stringify(c.input), status: 'completed' });
    }
  }
  // Responses API: input_tokens include cached ones; output_tokens include reasoning.
  const usage = {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cached },
    output_tokens: u.output + u.reasoning,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: u.input + u.output + u.reasoning,
  };
  const base = { id: respId, object: 'response', created_at: Math.floor(Date.now() / 1000), model, status: 'in_progress', output: [] };
  const ev = [];
  let sn = 0;
  const push = (type, data) => ev.push([type, { type, sequence_number: sn++, ...data }]);
  push('response.created', { response: base });
  push('response.in_progress', { response: base });
  output.forEach((item, i) => {
    if (item.type === 'message') {
      push('response.output_item.added', { output_index: i, item: { ...item, status: 'in_progress', content: [] } });
      push('response.content_part.added', { output_index: i, item_id: item.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      push('response.output_text.delta', { output_index: i, item_id: item.id, content_index: 0, delta: p.text });
      push('response.output_text.done', { output_index: i, item_id: item.id, content_index: 0, text: p.text });
      push('response.content_part.done', { output_index: i, item_id: item.id, content_index: 0, part: item.content[0] });
    } else if (item.type === 'tool_search_call') {
      push('response.output_item.added', { output_index: i, item: { ...item, status: 'in_progress' } });
    } else if (item.type === 'function_call') {
      push('response.output_item.added', { output_index: i, item: { ...item, arguments: '', status: 'in_progress' } });
      push('response.function_call_arguments.delta', { output_index: i, item_id: item.id, delta: item.arguments });
      push('response.function_call_arguments.done', { output_index: i, item_id: item.id, arguments: item.arguments });
    } else {
      push('response.output_item.added', { output_index: i, item: { ...item, input: '', status: 'in_progress' } });
      push('response.custom_tool_call_input.delta', { output_index: i, item_id: item.id, delta: item.input });
      push('response.custom_tool_call_input.done', { output_index: i, item_id: item.id, input: item.input });
    }
    push('response.output_item.done', { output_index: i, item });
  });
  push('response.completed', { response: { ...base, status: 'completed', output, usage } });
  return { ev, reported: { model, id: respId, ...usage } };
}

// ---------------------------------------------------------------- Chat Completions

// Splits a string into up to `n` non-empty pieces, so that streamed text and
// tool-call arguments arrive over several chunks as the real API sends them
// (a client that keeps only the last delta shows up as wrong arguments).
function pieces(s, n) {
  const out = [];
  const step = Math.max(1, Math.ceil(s.length / n));
  for (let i = 0; i < s.length; i += step) out.push(s.slice(i, i + step));
  return out.length ? out : [''];
}

// OpenAI Chat Completions: prompt_tokens include the cached ones
// (`prompt_tokens_details.cached_tokens`), completion_tokens include
// reasoning (`completion_tokens_details.reasoning_tokens`). A streamed
// answer carries usage only when the request asked for it
// (`stream_options.include_usage`): one last chunk with empty `choices`.
function chatAnswer(body, p) {
  const u = p.usage;
  const model = body.model || 'gpt-4.1';
  const id = nextId('chatcmpl-');
  const created = Math.floor(Date.now() / 1000);
  const aux = p.kind === 'aux';
  const usage = {
    prompt_tokens: u.input,
    completion_tokens: u.output + (aux ? 0 : u.reasoning),
    total_tokens: u.input + u.output + (aux ? 0 : u.reasoning),
    prompt_tokens_details: { cached_tokens: aux ? 0 : u.cached },
    completion_tokens_details: { reasoning_tokens: aux ? 0 : u.reasoning },
  };
  const toolCalls = p.calls.map((c) => ({ id: nextId('call_'), type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } }));
  const finish = toolCalls.length ? 'tool_calls' : 'stop';
  const message = { role: 'assistant', content: p.text || null, refusal: null };
  if (toolCalls.length) message.tool_calls = toolCalls;
  const completion = {
    id, object: 'chat.completion', created, model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    usage,
  };
  const base = { id, object: 'chat.completion.chunk', created, model };
  const chunk = (delta, finishReason = null) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] });
  const chunks = [chunk({ role: 'assistant', content: '', refusal: null })];
  if (p.text) for (const t of pieces(p.text, 2)) chunks.push(chunk({ content: t }));
  toolCalls.forEach((tc, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } }] }));
    for (const a of pieces(tc.function.arguments, 3)) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: a } }] }));
  });
  chunks.push(chunk({}, finish));
  const streamed = !!body.stream;
  const withUsage = !streamed || !!(body.stream_options && body.stream_options.include_usage);
  if (streamed && withUsage) chunks.push({ ...base, choices: [], usage });
  return { chunks, completion, reported: withUsage ? { model, id, ...usage } : null };
}

function chatSse(res, chunks) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\n\n`);
  res.write('data: [DONE]\n\n');
  res.end();
}

// ---------------------------------------------------------------- Gemini

function geminiChunks(model, p) {
  const u = p.usage;
  const parts = [];
  if (p.text) parts.push({ text: p.text });
  for (const c of p.calls) parts.push({ functionCall: { name: c.name, args: c.input } });
  // Gemini: promptTokenCount includes cachedContentTokenCount; candidates exclude thoughts.
  const usageMetadata = {
    promptTokenCount: u.input,
    candidatesTokenCount: u.output,
    totalTokenCount: u.input + u.output + (p.kind === 'aux' ? 0 : u.reasoning),
  };
  if (p.kind !== 'aux') {
    usageMetadata.cachedContentTokenCount = u.cached;
    usageMetadata.thoughtsTokenCount = u.reasoning;
  }
  const respId = nextId('gem_');
  // Text and calls come in separate chunks, as the real API streams them; the
  // usage rides on the last chunk only.
  const chunks = [];
  parts.forEach((part, i) => {
    const last = i === parts.length - 1;
    const c = { candidates: [{ content: { role: 'model', parts: [part] }, index: 0 }], modelVersion: model, responseId: respId };
    if (last) {
      c.candidates[0].finishReason = 'STOP';
      c.usageMetadata = usageMetadata;
    }
    chunks.push(c);
  });
  if (chunks.length === 0) {
    chunks.push({ candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: 'STOP', index: 0 }], usageMetadata, modelVersion: model, responseId: respId });
  }
  return { chunks, reported: { model, id: respId, ...usageMetadata } };
}

// ---------------------------------------------------------------- HTTP

function sse(res, events) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  for (const [name, data] of events) {
    if (name) res.write(`event: ${name}\n`);
    res.write(`data: ${JSON.stringify(data)}\n\n`);
  }
  res.end();
}

function json(res, status, obj) {
  const s = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
  res.end(s);
}

// ---------------------------------------------------------------- failures

// A turn with `"fail"` is answered with an error instead of a model reply,
// every time it is asked for (a CLI's retries get the same answer):
// `rate_limit` (429), `auth` (401) with each provider's real error body, or
// `stall` (status 200, the stream's first events, then silence with the
// connection held open). The bodies follow the providers' documented error
// shapes; the Codex 429 also carries the usage headers Codex reads its
// `rate_limits` from.
function failureBody(api, fail) {
  const resetsIn = 3600;
  const resetsAt = Math.floor(Date.now() / 1000) + resetsIn;
  if (api === 'anthropic') {
    const error = fail === 'rate_limit'
      ? { type: 'rate_limit_error', message: "This request would exceed your account's rate limit. Please try again later." }
      : { type: 'authentication_error', message: 'invalid x-api-key' };
    return {
      status: fail === 'rate_limit' ? 429 : 401,
      headers: fail === 'rate_limit' ? { 'retry-after': String(resetsIn), 'anthropic-ratelimit-requests-remaining': '0' } : {},
      body: { type: 'error', error, request_id: nextId('req_') },
    };
  }
  if (api === 'chat') {
    // OpenAI's Chat Completions errors; the retry-after is short enough that
    // a client honouring it retries within the test.
    if (fail === 'rate_limit') {
      return {
        status: 429,
        headers: { 'retry-after': '20', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '20s' },
        body: { error: { message: 'Rate limit reached for requests. Please try again in 20s.', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } },
      };
    }
    return {
      status: 401,
      headers: {},
      body: { error: { message: 'Incorrect API key provided: sk-agent***e2e.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
    };
  }
  if (api === 'openai') {
    if (fail === 'rate_limit') {
      return {
        status: 429,
        headers: {
          'x-codex-primary-used-percent': '100',
          'x-codex-primary-window-minutes': '300',
          'x-codex-primary-reset-at': String(resetsAt),
          'x-codex-secondary-used-percent': '42',
          'x-codex-secondary-window-minutes': '10080',
          'x-codex-secondary-reset-at': String(resetsAt + 86400),
        },
        body: { error: { type: 'usage_limit_reached', message: 'The usage limit has been reached', plan_type: 'plus', resets_at: resetsAt, resets_in_seconds: resetsIn } },
      };
    }
    return {
      status: 401,
      headers: {},
      body: { error: { message: 'Incorrect API key provided: sk-agent***e2e.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
    };
  }
  if (fail === 'rate_limit') {
    return {
      status: 429,
      headers: {},
      body: { error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } },
    };
  }
  return {
    status: 401,
    headers: {},
    body: { error: { code: 401, message: 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.', status: 'UNAUTHENTICATED' } },
  };
}

// Open connections of stalled streams: held until the server stops.
const stalled = [];

// Headers and the first events of a stream, then nothing more.
function stall(api, res, body, p) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  let first;
  if (api === 'anthropic') {
    first = anthropicEvents(body, p).ev.slice(0, 3);
  } else if (api === 'openai') {
    first = openaiEvents(body, p).ev.slice(0, 2);
  } else if (api === 'chat') {
    first = chatAnswer(body, p).chunks.slice(0, 2).map((c) => [null, c]);
  } else {
    const c = geminiChunks(body.model || 'gemini', p).chunks[0];
    const { finishReason, ...cand } = c.candidates[0];
    first = [[null, { ...c, candidates: [cand], usageMetadata: undefined }]];
  }
  for (const [name, data] of first) {
    if (name) res.write(`event: ${name}\n`);
    res.write(`data: ${JSON.stringify(data)}\n\n`);
  }
  stalled.push(res);
}

// A turn with `"delay_ms"` is answered that much later (the model "thinks"):
// the CLI has written its prompt and waits, which a live view must show as
// working. Other requests are answered at once.
function delayed(p, answer) {
  const t = p.turn != null ? scenario.turns[p.turn] : null;
  if (t && t.delay_ms && p.kind === 'main') setTimeout(answer, t.delay_ms);
  else answer();
}

// Answers a request whose turn fails; true if it did.
function answerFailure(api, res, entry, p, body) {
  const t = p.turn != null ? scenario.turns[p.turn] : null;
  if (!t || !t.fail) return false;
  if (t.fail === 'stall') {
    log({ ...entry, api, kind: 'main', turn: p.turn, fail: 'stall' });
    stall(api, res, body, { ...p, calls: [], text: p.text || 'Working on it' });
    return true;
  }
  const f = failureBody(api, t.fail);
  log({ ...entry, api, kind: 'main', turn: p.turn, fail: t.fail, status: f.status, response: f.body });
  const s = JSON.stringify(f.body);
  res.writeHead(f.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s), ...f.headers });
  res.end(s);
  return true;
}

function handle(req, res, bytes) {
  const raw = bytes.toString('utf8');
  const url = new URL(req.url, 'http://127.0.0.1');
  let body = {};
  try {
    body = raw.length ? JSON.parse(raw) : {};
  } catch {
    body = { unparsed: raw.slice(0, 2000) };
  }
  // The body's size and digest as received: what a wire capture must hold byte for byte.
  const digest = require('crypto').createHash('sha256').update(bytes).digest('hex');
  const entry = { method: req.method, path: url.pathname, query: url.search, headers: { 'user-agent': req.headers['user-agent'] || null }, body_bytes: bytes.length, body_sha256: digest, request: body };
  try {
    if (req.method === 'POST' && url.pathname === '/v1/messages') {
      const p = plan('anthropic', body);
      if (answerFailure('anthropic', res, entry, p, body)) return;
      const { ev, message, reported } = anthropicEvents(body, p);
      log({ ...entry, api: 'anthropic', kind: p.kind, turn: p.turn, tool_results: p.results, calls: p.calls, text: p.text, usage: reported, stream: !!body.stream });
      delayed(p, () => (body.stream ? sse(res, ev) : json(res, 200, message)));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/v1/messages/count_tokens') {
      log({ ...entry, api: 'anthropic', kind: 'count_tokens' });
      json(res, 200, { input_tokens: 1000 });
      return;
    }
    if (req.method === 'POST' && /\/responses$/.test(url.pathname)) {
      const p = plan('openai', body);
      if (answerFailure('openai', res, entry, p, body)) return;
      const { ev, reported } = openaiEvents(body, p);
      log({ ...entry, api: 'openai', kind: p.kind, turn: p.turn, tool_results: p.results, calls: p.calls, text: p.text, usage: reported, stream: body.stream !== false, ...(p.search ? { search: true } : {}) });
      delayed(p, () => sse(res, ev.map(([n, d]) => [n, d])));
      return;
    }
    if (req.method === 'POST' && /^(\/v1)?\/chat\/completions$/.test(url.pathname)) {
      const p = plan('chat', body);
      if (answerFailure('chat', res, entry, p, body)) return;
      const { chunks, completion, reported } = chatAnswer(body, p);
      log({ ...entry, api: 'chat', kind: p.kind, turn: p.turn, tool_results: p.results, calls: p.calls, text: p.text, usage: reported, stream: !!body.stream });
      delayed(p, () => (body.stream ? chatSse(res, chunks) : json(res, 200, completion)));
      return;
    }
    const gm = url.pathname.match(/\/models\/([^/:]+):(streamGenerateContent|generateContent|countTokens)$/);
    if (req.method === 'POST' && gm) {
      const model = gm[1];
      if (gm[2] === 'countTokens') {
        log({ ...entry, api: 'gemini', kind: 'count_tokens' });
        json(res, 200, { totalTokens: 1000 });
        return;
      }
      const p = plan('gemini', { ...body, model });
      if (answerFailure('gemini', res, entry, p, { ...body, model })) return;
      const { chunks, reported } = geminiChunks(model, p);
      const stream = gm[2] === 'streamGenerateContent';
      log({ ...entry, api: 'gemini', kind: p.kind, turn: p.turn, tool_results: p.results, calls: p.calls, text: p.text, usage: reported, stream });
      delayed(p, () => {
        if (!stream) {
          // A non-streamed answer is the chunks merged into one candidate.
          const parts = chunks.flatMap((c) => c.candidates[0].content.parts);
          const last = chunks[chunks.length - 1];
          json(res, 200, { ...last, candidates: [{ ...last.candidates[0], content: { role: 'model', parts } }] });
        } else if (url.searchParams.get('alt') === 'sse') {
          sse(res, chunks.map((c) => [null, c]));
        } else {
          json(res, 200, chunks);
        }
      });
      return;
    }
    log({ ...entry, api: null, kind: 'unhandled' });
    json(res, 404, { error: { message: `scripted server: no route for ${req.method} ${url.pathname}` } });
  } catch (e) {
    log({ ...entry, kind: 'error', error: String(e && e.stack || e) });
    json(res, 500, { error: { message: String(e && e.message || e) } });
  }
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => handle(req, res, Buffer.concat(chunks)));
});

// The network scenario's destination: answers every GET with a fixed body and
// logs the hit, so a test can tell the command really reached it.
const target = http.createServer((req, res) => {
  log({ method: req.method, path: req.url, kind: 'target' });
  const s = 'agentsight-e2e-target-ok\n';
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(s) });
  res.end(s);
});

server.listen(args.port, '127.0.0.1', () => {
  target.listen(args.targetPort, '127.0.0.1', () => {
    targetPort = target.address().port;
    process.stdout.write(`${server.address().port}\n${targetPort}\n`);
  });
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    for (const r of stalled) r.destroy();
    server.close();
    target.close();
    process.exit(0);
  });
}
