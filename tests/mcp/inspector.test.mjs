// SPDX-License-Identifier: MIT
// pybox mcp driven by the MCP Inspector in its CLI mode, over stdio and over HTTP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { PYBOX, serverEnv, SKIP_LONG_HTTP } from './helpers.mjs';
import { HttpServer } from './http-helpers.mjs';

const require = createRequire(import.meta.url);
const cli = path.join(path.dirname(require.resolve('@modelcontextprotocol/inspector/package.json')), 'cli', 'build', 'cli.js');
const envArgs = Object.entries(serverEnv).flatMap(([k, v]) => ['-e', `${k}=${v}`]);

function inspector(args, target = [...envArgs, PYBOX, 'mcp', '--images', 'stdlib', '--warm', '0']) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, '--cli', ...target, ...args],
      { timeout: 120000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`inspector failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      });
  });
}

test('the Inspector lists the tool', async () => {
  const out = await inspector(['--method', 'tools/list']);
  assert.deepEqual(out.tools.map((t) => t.name), ['run_python', 'session_open', 'session_close']);
  assert.equal(out.tools[0].inputSchema.required[0], 'code');
  assert.equal(out.tools[0].outputSchema.properties.schema.const, 'pybox.receipt/2');
});

test('the Inspector calls run_python', async () => {
  const out = await inspector(['--method', 'tools/call', '--tool-name', 'run_python', '--tool-arg', 'code=print(6*7)']);
  assert.equal(out.isError, undefined);
  assert.equal(out.structuredContent.said.stdout.text, '42\n');
  assert.match(out.content[0].text, /status: TARGET_EXIT_OBSERVED, exit code 0/);
});

test('the Inspector over HTTP: tools listed and run_python called with the bearer token; refused without it', { skip: SKIP_LONG_HTTP }, async () => {
  const server = await HttpServer.start();
  try {
    const target = [server.url, '--transport', 'http', '--header', `Authorization: ${server.auth()}`];
    const list = await inspector(['--method', 'tools/list'], target);
    assert.deepEqual(list.tools.map((t) => t.name), ['run_python', 'session_open', 'session_close']);
    const out = await inspector(['--method', 'tools/call', '--tool-name', 'run_python', '--tool-arg', 'code=print(6*7)'], target);
    assert.equal(out.structuredContent.said.stdout.text, '42\n');
    await server.line(/call token=alice session=\w+ status=TARGET_EXIT_OBSERVED run=[0-9a-f]{32} /);
    await assert.rejects(inspector(['--method', 'tools/list'], [server.url, '--transport', 'http']), /401|nauthorized/);
    await assert.rejects(inspector(['--method', 'tools/list'],
      [server.url, '--transport', 'http', '--header', `Authorization: Bearer ${'0'.repeat(64)}`]), /401|nauthorized/);
  } finally {
    await server.close();
  }
});
