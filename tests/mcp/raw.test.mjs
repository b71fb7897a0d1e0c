// SPDX-License-Identifier: MIT
// pybox mcp on the wire: every byte that reaches stdout is looked at.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RawServer, boxes, waitNoBoxes } from './helpers.mjs';

const call = (id, args, token) => ({ jsonrpc: '2.0', id, method: 'tools/call',
  params: { name: 'run_python', arguments: args, ...(token !== undefined ? { _meta: { progressToken: token } } : {}) } });

test('a program printing protocol messages, terminal escapes and invalid UTF-8 injects nothing', async () => {
  const s = new RawServer(['--images', 'stdlib']);
  await s.initialize();
  const fake = '{"jsonrpc":"2.0","id":1,"result":{}}';
  const code = [
    'import sys',
    `fake = ${JSON.stringify(fake)}`,
    'for _ in range(50):',
    '    print(fake)',
    '    print(fake, file=sys.stderr)',
    'sys.stdout.flush()',
    'sys.stdout.buffer.write(b"\\x1b]0;owned\\x07\\x1b[2J\\r\\n\\xff\\xfe\\xc3(\\n")',
    'sys.stdout.buffer.write(b"\\x00NUL\\n")',
  ].join('\n');
  s.send(call(2, { code }));
  const r = await s.reply(2);
  const ex = await s.close();
  assert.equal(ex.code, 0);
  assert.equal(s.messages.filter((m) => m.id === 1).length, 0, 'no protocol message with the fake id');
  assert.equal(s.messages.filter((m) => m.method !== undefined).length, 0, 'no request or notification from the server');
  const receipt = r.result.structuredContent;
  assert.equal(receipt.exit_code, 0);
  assert.ok(receipt.said.stdout.text.includes(fake), 'the fake message is inside the result, as text');
  assert.ok(receipt.said.stderr.text.includes(fake));
  assert.equal(receipt.said.stdout.utf8_valid, false);
  const bytes = s.bytes();
  assert.equal(bytes.indexOf(0x1b), -1, 'no raw escape byte on the wire');
  assert.equal(bytes.indexOf(0x00), -1, 'no raw NUL on the wire');
  assert.equal(bytes.indexOf(0x0d), -1, 'no raw carriage return on the wire');
  new TextDecoder('utf-8', { fatal: true }).decode(bytes); // throws on invalid UTF-8
  // Every line on the wire is one whole message: as many lines as messages.
  assert.equal(bytes.toString('utf8').split('\n').length - 1, s.messages.length);
});

test('a 20 MiB line is refused with an error and the server keeps serving; so is a malformed one', async () => {
  const s = new RawServer(['--images', 'stdlib']);
  await s.initialize();
  const big = JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'ping', params: { pad: 'x'.repeat(20 * 1024 * 1024) } });
  s.sendRaw(big + '\n');
  s.send({ jsonrpc: '2.0', id: 11, method: 'ping' });
  const refused = await s.next((m) => m.error !== undefined);
  assert.equal(refused.error.code, -32600);
  assert.equal(refused.id, null);
  assert.match(refused.error.message, /larger than/);
  assert.deepEqual((await s.reply(11)).result, {});
  assert.equal(s.messages.filter((m) => m.id === 10).length, 0, 'the oversized request was not run');
  s.sendRaw('{"jsonrpc":"2.0","id":12,"method":\n');
  s.send({ jsonrpc: '2.0', id: 13, method: 'ping' });
  const bad = await s.next((m) => m.error !== undefined && m.error.code === -32700);
  assert.equal(bad.id, null);
  assert.deepEqual((await s.reply(13)).result, {});
  assert.equal((await s.close()).code, 0);
});

test('cancellation on the wire: the box goes, the call never answers, ping does', async () => {
  const s = new RawServer(['--images', 'stdlib', '--max-timeout', '30']);
  await s.initialize();
  s.send(call('sleeper', { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 }, 'tok'));
  await s.next((m) => m.method === 'notifications/progress' && m.params.message === 'running');
  assert.equal((await boxes()).length, 1);
  const t0 = performance.now();
  s.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'sleeper', reason: 'test' } });
  s.send({ jsonrpc: '2.0', id: 'p', method: 'ping' });
  assert.deepEqual((await s.reply('p')).result, {});
  await waitNoBoxes(10000);
  console.log(`# box gone at most ${(performance.now() - t0).toFixed(0)} ms after the cancellation`);
  const ex = await s.close(); // everything the server will ever say has been said
  assert.equal(ex.code, 0);
  assert.equal(s.messages.filter((m) => m.id === 'sleeper').length, 0, 'no result for the cancelled call');
});

test('stdin closed while boxes run: every box removed, the server exits', async () => {
  const s = new RawServer(['--images', 'stdlib', '--max-timeout', '30']);
  await s.initialize();
  for (const id of [21, 22])
    s.send(call(id, { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 }, `t${id}`));
  for (const id of [21, 22])
    await s.next((m) => m.method === 'notifications/progress' && m.params.progressToken === `t${id}` && m.params.message === 'running');
  assert.equal((await boxes()).length, 2);
  const ex = await s.close();
  console.log(`# exited ${ex.ms.toFixed(0)} ms after stdin closed`);
  assert.equal(ex.code, 0);
  assert.ok(ex.ms < 15000, 'long before the programs would have ended');
  assert.deepEqual(await boxes(), [], 'no box left once the server has exited');
  assert.equal(s.messages.filter((m) => m.id === 21 || m.id === 22).length, 0);
});

test('a signal ends the server as stdin closing does', async () => {
  const s = new RawServer(['--images', 'stdlib', '--max-timeout', '30']);
  await s.initialize();
  s.send(call(31, { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 }, 't'));
  await s.next((m) => m.method === 'notifications/progress' && m.params.message === 'running');
  s.proc.kill('SIGTERM');
  const ex = await s.exited;
  assert.equal(ex.code, 0);
  assert.deepEqual(await boxes(), []);
  s.proc.stdin.destroy();
});
