// Starts a Codex session the way an IDE client does: `codex app-server` over
// stdio, `thread/start` in the current directory, one `turn/start` with the
// prompt, until `turn/completed`. Such a thread records Codex's own default
// approval policy (`on-request`), where `codex exec` records `never`.
// Prints the thread id; exits 1 on an error or after 60 s.
//
// usage: node codex_thread.js PROMPT   (codex on PATH, its config in HOME)
'use strict';
const { spawn } = require('node:child_process');
const readline = require('node:readline');

const prompt = process.argv[2];
const child = spawn('codex', ['app-server', '--listen', 'stdio://'], {
  stdio: ['pipe', 'pipe', 'ignore'],
});
const send = (m) => child.stdin.write(JSON.stringify(m) + '\n');
const fail = (why) => {
  process.stderr.write(`codex_thread: ${why}\n`);
  child.kill('SIGKILL');
  process.exit(1);
};
setTimeout(() => fail('no turn/completed within 60 s'), 60000).unref();
child.on('exit', (code) => fail(`app-server exited (${code}) before the turn completed`));

let thread = null;
readline.createInterface({ input: child.stdout }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.error) fail(`request ${m.id}: ${m.error.message}`);
  if (m.method && m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: 'not answered' } });
  } else if (m.id === 0) {
    send({ method: 'initialized' });
    send({ id: 1, method: 'thread/start', params: { cwd: process.cwd() } });
  } else if (m.id === 1) {
    thread = m.result.thread.id;
    send({ id: 2, method: 'turn/start', params: { threadId: thread, input: [{ type: 'text', text: prompt }] } });
  } else if (m.method === 'turn/completed' && m.params.threadId === thread) {
    if (m.params.turn.status !== 'completed') fail(`turn ${m.params.turn.status}`);
    child.removeAllListeners('exit');
    child.on('exit', () => {
      process.stdout.write(`${thread}\n`);
      process.exit(0);
    });
    child.stdin.end();
  }
});
send({ id: 0, method: 'initialize', params: { clientInfo: { name: 'agentsight-e2e', version: '0' } } });
