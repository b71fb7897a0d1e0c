// SPDX-License-Identifier: MIT
// pybox mcp as an ordinary user, started as the README's client configuration starts it
// (the official SDK client spawning `pybox mcp --backend native` with the environment such
// a client gives, no PYBOX_HOME): the tool, a file in and a file back, a ceiling refused
// "(set by the server)", a cancelled call whose box goes, a warm box (made before its call)
// taken by a call, a session whose second call sees the first's state, each receipt rootless.
// Run by tests/vm-rootless.sh as that user:   node tests/mcp/rootless-driver.mjs PYBOX
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const pybox = process.argv[2];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-mcp-user-'));
const filesRoot = path.join(dir, 'in');
const outputRoot = path.join(dir, 'out');
fs.mkdirSync(filesRoot);
fs.mkdirSync(outputRoot);
fs.writeFileSync(path.join(filesRoot, 'numbers.txt'), '1 2 3 4\n');
const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
// What a desktop client gives the server: the SDK's default environment (HOME, LOGNAME,
// PATH, SHELL, TERM, USER: no XDG_RUNTIME_DIR, no DBUS_SESSION_BUS_ADDRESS, so pybox must
// find the user's runtime folder itself), and the configuration's "env": here where the
// user's installation is, which the README's configuration leaves at its default.
const env = process.env.XDG_STATE_HOME ? { XDG_STATE_HOME: process.env.XDG_STATE_HOME } : {};
const transport = new StdioClientTransport({ command: pybox, env, stderr: 'inherit',
  args: ['mcp', '--backend', 'native', '--images', 'stdlib', '--max-timeout', '30', '--max-memory', '512M',
    '--files-root', filesRoot, '--output-root', outputRoot] });
const client = new Client({ name: 'pybox-rootless', version: '1.0.0' });
const errors = [];
client.onerror = (e) => errors.push(e);
let failed = 0;
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok mcp-${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL mcp-${name}: ${e.stack || e}`);
  }
}
await client.connect(transport);
try {
  await step('tools', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['run_python', 'session_open', 'session_close']);
  });
  await step('run', async () => {
    const res = await client.callTool({ name: 'run_python', arguments: { code: 'print(6 * 7)', timeout_s: 30 } },
      undefined, { timeout: 120000 });
    const r = res.structuredContent;
    assert.equal(r.status, 'TARGET_EXIT_OBSERVED', text(res));
    assert.equal(r.said.stdout.text, '42\n');
    assert.match(r.seen.backend_description, /rootless: as user /);
    assert.notEqual(r.asked.policy.program_uid, process.getuid(), 'the box runs as its own id, not the user');
    assert.equal(r.seen.box.confirmed_gone, true);
  });
  await step('files', async () => {
    const res = await client.callTool({ name: 'run_python', arguments: {
      code: 'n = sum(map(int, open("/box/in/numbers.txt").read().split()))\nopen("/box/out/sum.txt", "w").write(str(n))\n',
      files: [{ path: 'numbers.txt' }], return_files: true, timeout_s: 30 } }, undefined, { timeout: 120000 });
    assert.ok(!res.isError, text(res));
    assert.equal(res.structuredContent.exit_code, 0, text(res));
    assert.match(text(res), /10/, 'the file back holds the sum');
  });
  await step('ceiling', async () => {
    const res = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)', timeout_s: 31 } });
    assert.equal(res.isError, true);
    assert.match(text(res), /timeout_s: 31 s is above the maximum of 30 s \(set by the server\)/);
  });
  await step('cancel', async () => {
    const abort = new AbortController();
    let cancelled = false;
    const call = client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(25)\n', timeout_s: 30 } },
      undefined, { signal: abort.signal, timeout: 120000, onprogress: (p) => {
        if (p.message === 'running' && !cancelled) {
          cancelled = true;
          abort.abort('the test cancels');
        }
      } });
    await assert.rejects(call);
    assert.ok(cancelled, 'cancelled while running');
    await client.ping();
    const after = await client.callTool({ name: 'run_python', arguments: { code: 'print("still serving")', timeout_s: 30 } },
      undefined, { timeout: 120000 });
    assert.equal(after.structuredContent.said.stdout.text, 'still serving\n', text(after));
  });
  await step('warm', async () => {
    // The server keeps one box of stdlib made ahead (--warm 1) with the image's limits and
    // deadline: a call asking no others finds it once it is ready. A call that came first
    // starts cold, saying only that none was ready yet; a warm box made and then not used
    // (its making or its verification failed) fails.
    let st;
    for (let i = 0; i < 20; i++) {
      const res = await client.callTool({ name: 'run_python', arguments: { code: 'print(7)' } },
        undefined, { timeout: 120000 });
      const r = res.structuredContent;
      assert.equal(r.status, 'TARGET_EXIT_OBSERVED', text(res));
      assert.equal(r.said.stdout.text, '7\n');
      assert.match(r.seen.backend_description, /rootless: as user /);
      st = r.seen.start;
      if (st.kind === 'warm')
        break;
      assert.match(st.why_cold, /^no warm box of stdlib was ready$/, `a call started cold: ${st.why_cold}`);
    }
    assert.equal(st.kind, 'warm', `twenty calls, none warm: ${st.why_cold}`);
  });
  await step('session', async () => {
    const o = await client.callTool({ name: 'session_open', arguments: { image: 'stdlib', timeout_s: 30 } },
      undefined, { timeout: 120000 });
    assert.equal(o.isError, undefined, text(o));
    const id = o.structuredContent.session_id;
    assert.equal(o.structuredContent.box_verified, true);
    const call = (code) => client.callTool({ name: 'run_python', arguments: { session_id: id, code } }, undefined,
      { timeout: 120000 });
    const r1 = (await call('x = 41\nprint("made")\n')).structuredContent;
    assert.equal(r1.status, 'SESSION_CALL_ENDED');
    assert.equal(r1.seen.start.kind, 'session');
    assert.match(r1.seen.backend_description, /rootless: as user /);
    assert.notEqual(r1.asked.policy.program_uid, process.getuid(), 'the session runs as its own id, not the user');
    const r2 = (await call('print(x + 1)\n')).structuredContent;
    assert.equal(r2.status, 'SESSION_CALL_ENDED');
    assert.equal(r2.said.stdout.text, '42\n', 'the second call sees the first one\'s state');
    assert.equal(r2.seen.box.id, r1.seen.box.id, 'one box for the session');
    const cl = await client.callTool({ name: 'session_close', arguments: { session_id: id } });
    assert.equal(cl.structuredContent.status, 'SESSION_CLOSED_OBSERVED', text(cl));
  });
  await step('no-errors', async () => assert.deepEqual(errors, []));
} finally {
  await client.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
