// SPDX-License-Identifier: MIT
// pybox mcp as an ordinary user, started as the README's client configuration starts it
// (the official SDK client spawning `pybox mcp --backend native` with the user's own
// environment, no PYBOX_HOME): the tool, a file in and a file back, a ceiling refused
// "(set by the server)", a cancelled call whose box goes, each receipt rootless.
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
// What a desktop client gives the server: the user's environment as it is.
const env = { ...process.env };
delete env.PYBOX_HOME;
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
    assert.deepEqual(tools.map((t) => t.name), ['run_python']);
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
  await step('no-errors', async () => assert.deepEqual(errors, []));
} finally {
  await client.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
