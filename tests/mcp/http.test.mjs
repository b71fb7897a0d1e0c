// SPDX-License-Identifier: MIT
// pybox mcp --listen driven by the official MCP TypeScript SDK's Streamable HTTP client:
// the same results and receipts as over stdio, files, progress, cancellation, a client
// that goes, session end, calls at once, the drain on SIGTERM.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { PYBOX, serverEnv, boxes, volumes, waitNoBoxes, SKIP_LONG_HTTP } from './helpers.mjs';
import { HttpServer, connect, closing, request, postHeaders, initialize, sameParts, PROTOCOL } from './http-helpers.mjs';

const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

function verified(receipt) {
  const v = spawnSync(PYBOX, ['verify', '-'], { input: JSON.stringify(receipt), env: serverEnv, encoding: 'utf8' });
  assert.equal(v.status, 0, v.stdout + v.stderr);
}

// A 1x1 PNG the program writes, so the image comes back as image content.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==';

// The calls both transports get, in order.
const CALLS = [
  { code: 'print(6 * 7)' },
  { code: 'import sys\nprint("to stderr", file=sys.stderr)\nraise SystemExit(3)' },
  { code: '1/0' },
  { code: 'import time\ntime.sleep(5)', timeout_s: 0.5 },
  { code: 'print("\\x1b[31mred\\u202e\\n{\\"jsonrpc\\":\\"2.0\\",\\"id\\":1,\\"result\\":{}}")' },
  { code: 'print(1)', timeout_s: 31 },
  { code: 'print(1)', image: 'nope' },
  {
    code: [
      'import base64',
      'print(open("/box/in/in.csv").read().count("north"))',
      'open("/box/out/sums.csv", "w").write("north,15\\n")',
      `open("/box/out/dot.png", "wb").write(base64.b64decode("${PNG}"))`,
      'open("/box/out/blob.bin", "wb").write(bytes(range(256)))',
    ].join('\n'),
    files: [{ name: 'in.csv', content: 'region,amount\nnorth,10\nsouth,32\nnorth,5\n' },
      { name: 'raw.bin', content_base64: Buffer.from([0, 1, 2, 255]).toString('base64') },
      { path: 'shared.txt' }],
    return_files: true,
  },
];

test('the SDK client gets the same results and receipts over HTTP as over stdio', { skip: SKIP_LONG_HTTP }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-http-same-'));
  const filesRoot = path.join(dir, 'in');
  const outStdio = path.join(dir, 'out-stdio');
  const outHttp = path.join(dir, 'out-http');
  for (const d of [filesRoot, outStdio, outHttp]) fs.mkdirSync(d);
  fs.writeFileSync(path.join(filesRoot, 'shared.txt'), 'from the files root\n');
  const common = ['--images', 'stdlib', '--warm', '0', '--max-timeout', '30', '--files-root', filesRoot];
  const stdioClient = new Client({ name: 'pybox-tests', version: '1.0.0' });
  await stdioClient.connect(new StdioClientTransport({ command: PYBOX, args: ['mcp', ...common, '--output-root', outStdio],
    env: serverEnv, stderr: 'pipe' }));
  const server = await HttpServer.start({ args: [...common, '--output-root', outHttp] });
  const { client, errors } = await connect(server);
  try {
    const [stdioTools, httpTools] = [await stdioClient.listTools(), await client.listTools()];
    assert.deepEqual(httpTools, stdioTools, 'the same tools/list');
    assert.deepEqual(client.getServerVersion(), stdioClient.getServerVersion());
    for (const [i, args] of CALLS.entries()) {
      const viaStdio = await stdioClient.callTool({ name: 'run_python', arguments: args });
      const viaHttp = await client.callTool({ name: 'run_python', arguments: args });
      assert.deepEqual(sameParts(viaHttp), sameParts(viaStdio), `call ${i} (${args.code.slice(0, 30)})`);
      if (viaHttp.structuredContent) {
        verified(viaHttp.structuredContent);
        verified(viaStdio.structuredContent);
        assert.notEqual(viaHttp.structuredContent.run_id, viaStdio.structuredContent.run_id);
      }
    }
    // What the last call brought back, as both transports gave it.
    const last = await client.callTool({ name: 'run_python', arguments: CALLS.at(-1) });
    assert.equal(last.structuredContent.said.stdout.text, '2\n', text(last));
    assert.ok(last.content.some((c) => c.type === 'image' && c.mimeType === 'image/png'));
    assert.ok(last.content.some((c) => c.type === 'text' && /^file sums\.csv/.test(c.text)));
    const link = last.content.find((c) => c.type === 'resource_link');
    assert.ok(new URL(link.uri).pathname.startsWith(fs.realpathSync(outHttp) + '/'), link.uri);
    assert.equal(server.logLines('call').length, CALLS.length + 1, server.stderr);
    assert.deepEqual(errors, []);
  } finally {
    await client.close();
    await stdioClient.close();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.deepEqual(await boxes(), []);
  assert.deepEqual(await volumes(), []);
});

test('progress over HTTP: the steps, then once a second the elapsed time and the kernel\'s readings, never the program\'s text', { skip: SKIP_LONG_HTTP }, async () => {
  const server = await HttpServer.start();
  const { client, errors } = await connect(server);
  try {
    const seen = [];
    const r = await client.callTool({ name: 'run_python', arguments: {
      code: 'import sys, time\nx = bytearray(24 << 20)\nfor i in range(3):\n    print("PRINTED", i, flush=True)\n    time.sleep(1)',
      timeout_s: 10 } }, undefined, { onprogress: (p) => seen.push(p), timeout: 60000 });
    assert.equal(r.structuredContent.status, 'TARGET_EXIT_OBSERVED', text(r));
    const steps = seen.map((p) => p.message).filter((m) => !m.startsWith('running '));
    assert.deepEqual(steps, ['noted', 'created', 'started', 'running', 'removing', 'done']);
    const readings = seen.filter((p) => p.message.startsWith('running '));
    assert.ok(readings.length >= 2, `readings: ${JSON.stringify(seen)}`);
    for (const p of readings) {
      assert.match(p.message, /^running [\d.]+ s of 10 s; memory [\d.]+ MiB; \d+ process(es)?; CPU [\d.]+ s$/);
      assert.ok(p.progress > 4 && p.progress < 5);
    }
    assert.ok(readings.some((p) => Number(p.message.match(/memory ([\d.]+) MiB/)[1]) >= 24), 'the 24 MiB the program holds');
    const values = seen.map((p) => p.progress);
    assert.deepEqual(values, [...values].sort((a, b) => a - b), 'progress only grows');
    assert.ok(!JSON.stringify(seen).includes('PRINTED'), 'no program text in progress');
    assert.deepEqual(errors, []);
  } finally {
    await client.close();
    await server.close();
  }
});

test('cancelled over HTTP: notifications/cancelled ends the box at once, no result comes, the session serves on', async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30'] });
  const { client, errors } = await connect(server);
  try {
    const abort = new AbortController();
    let cancelledAt = 0;
    const call = client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(20)', timeout_s: 30 } },
      undefined, { signal: abort.signal, timeout: 60000, onprogress: async (p) => {
        if (p.message !== 'running' || cancelledAt) return;
        assert.equal((await boxes()).length, 1, 'the box runs');
        cancelledAt = performance.now();
        abort.abort('the test cancels');
      } });
    await assert.rejects(call);
    await waitNoBoxes(10000);
    const ms = performance.now() - cancelledAt;
    console.log(`# box gone ${ms.toFixed(0)} ms after notifications/cancelled`);
    assert.ok(ms < 5000, `${ms} ms`);
    await server.line(/call token=alice session=\w+ status=CANCELLED run=- /);
    await client.ping();
    const after = await client.callTool({ name: 'run_python', arguments: { code: 'print("still serving")' } });
    assert.equal(after.structuredContent.said.stdout.text, 'still serving\n');
    assert.deepEqual(errors, [], 'no answer for the cancelled request reached the client');
  } finally {
    await client.close();
    await server.close();
  }
});

test('a client that goes mid-call, on an SSE stream or waiting for JSON: its box is removed at once', async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30'] });
  try {
    const session = await initialize(server);
    for (const progress of [true, false]) {
      const abort = new AbortController();
      const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'run_python',
        arguments: { code: 'import time\ntime.sleep(20)', timeout_s: 30 }, ...(progress ? { _meta: { progressToken: 'p' } } : {}) } });
      const pending = request(server, { headers: postHeaders(server, { session }), body, signal: abort.signal }).catch((e) => e);
      const t0 = performance.now();
      while ((await boxes()).length === 0) {
        assert.ok(performance.now() - t0 < 20000, 'the box never started');
        await new Promise((r) => setImmediate(r));
      }
      const before = server.logLines('client gone').length;
      const goneAt = performance.now();
      abort.abort();
      await pending;
      await waitNoBoxes(10000);
      const ms = performance.now() - goneAt;
      console.log(`# ${progress ? 'SSE' : 'JSON'}: box gone ${ms.toFixed(0)} ms after the client went`);
      assert.ok(ms < 5000, `${ms} ms`);
      await server.line(new RegExp(`(client gone[^\\n]*\\n[\\s\\S]*){${before + 1}}`));
    }
    const pong = await request(server, { headers: postHeaders(server, { session }), body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(pong.status, 200);
  } finally {
    await server.close();
  }
});

test('session end: DELETE cancels the session\'s calls and removes their boxes; the session is gone after (404)', async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30'] });
  const { client, transport, errors } = await connect(server);
  try {
    const session = transport.sessionId;
    assert.match(session, /^[0-9a-f]{32}$/);
    let running;
    const started = new Promise((r) => { running = r; });
    const call = client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(20)', timeout_s: 30 } },
      undefined, { timeout: 60000, onprogress: (p) => { if (p.message === 'running') running(); } });
    call.catch(() => {});
    await started;
    assert.equal((await boxes()).length, 1);
    await transport.terminateSession();
    await waitNoBoxes(10000);
    await server.line(/session token=alice session=\w+ ended \(deleted by the client\); its calls are cancelled/);
    const stale = await request(server, { headers: postHeaders(server, { session }), body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(stale.status, 404);
    assert.equal(JSON.parse(stale.text).error.code, -32001);
    assert.deepEqual(errors.filter((e) => !closing(e)), []);
  } finally {
    await client.close();
    await server.close();
  }
});

// A Python session (session_open) is the MCP connection's that opened it: over HTTP, its
// Mcp-Session-Id session. Named from another one, of the same token or another, it is
// refused as an unknown id is; the HTTP session's end (DELETE, or its idle limit) ends it
// and removes its box.
test('a Python session belongs to the HTTP session that opened it: another one is refused it as unknown; DELETE or the idle end of its HTTP session ends it, its box removed', { skip: SKIP_LONG_HTTP }, async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30', '--http-session-idle', '10'] });
  const owner = await connect(server);
  const other = await connect(server); // the same token, another HTTP session
  const bob = await connect(server, { token: 'bob' });
  const opened = [];
  try {
    const open = async (c) => {
      const r = await c.client.callTool({ name: 'session_open', arguments: {} }, undefined, { timeout: 60000 });
      assert.ok(!r.isError, text(r));
      opened.push(r.structuredContent.session_id);
      return r.structuredContent.session_id;
    };
    const id = await open(owner);
    const mine = await owner.client.callTool({ name: 'run_python', arguments: { code: 'x = 41', session_id: id } });
    assert.ok(!mine.isError, text(mine));
    const unknown = await owner.client.callTool({ name: 'run_python', arguments: { code: 'print(1)', session_id: 'f'.repeat(32) } });
    assert.ok(unknown.isError);
    for (const [who, c] of [['the same token', other], ['another token', bob]]) {
      for (const [tool, args] of [['run_python', { code: 'print(x)', session_id: id }], ['session_close', { session_id: id }]]) {
        const r = await c.client.callTool({ name: tool, arguments: args });
        assert.ok(r.isError, `${tool} from ${who}: ${text(r)}`);
        assert.equal(text(r), text(unknown).replace('f'.repeat(32), id), `${tool} from ${who}: refused as an unknown id is`);
        assert.equal(r.structuredContent?.said, undefined, 'no box was used');
      }
    }
    const still = await owner.client.callTool({ name: 'run_python', arguments: { code: 'print(x + 1)', session_id: id } });
    assert.equal(still.structuredContent.said.stdout.text, '42\n', text(still));
    assert.equal((await boxes()).length, 1, 'the session\'s box');
    // DELETE of the HTTP session ends its Python session.
    await owner.transport.terminateSession();
    await server.line(new RegExp(`session ${id.slice(0, 8)} ended \\(its MCP connection ended\\)`), 30000);
    await waitNoBoxes(10000);
    // The idle end of an HTTP session (one with no stream of its own open, as the SDK's
    // keeps one) ends its Python session.
    const raw = await initialize(server, 'bob');
    const answer = await request(server, { headers: postHeaders(server, { token: 'bob', session: raw }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'open', method: 'tools/call', params: { name: 'session_open', arguments: {} } }) });
    const id2 = JSON.parse(answer.text).result?.structuredContent?.session_id;
    assert.match(String(id2), /^[0-9a-f]{32}$/, answer.text);
    assert.equal((await boxes()).length, 1);
    await server.line(new RegExp(`session token=bob session=${raw.slice(0, 8)} ended \\(idle\\)`), 60000);
    await server.line(new RegExp(`session ${id2.slice(0, 8)} ended \\(its MCP connection ended\\)`), 30000);
    await waitNoBoxes(10000);
    assert.deepEqual([...other.errors, ...bob.errors].filter((e) => !closing(e)), []);
  } finally {
    for (const c of [owner, other, bob]) await c.client.close().catch(() => {});
    await server.close();
  }
});

test('8 calls at once over HTTP: each its own box and its own receipt; one GET stream per session', { skip: SKIP_LONG_HTTP }, async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30'] });
  const { client, transport, errors } = await connect(server);
  try {
    const results = await Promise.all([...Array(8).keys()].map((i) => client.callTool({ name: 'run_python', arguments: {
      code: `import sys, time\ntime.sleep(0.5)\nprint(${i} * ${i})\nprint("box ${i}", file=sys.stderr)\n`, timeout_s: 25 } },
    undefined, { timeout: 120000 })));
    results.forEach((res, i) => {
      const r = res.structuredContent;
      assert.equal(r.status, 'TARGET_EXIT_OBSERVED', text(res));
      assert.equal(r.said.stdout.text, `${i * i}\n`);
      assert.equal(r.said.stderr.text, `box ${i}\n`);
    });
    assert.equal(new Set(results.map((r) => r.structuredContent.run_id)).size, 8);
    // The SDK opened the session's own stream after initialize; a second is refused.
    const second = await request(server, { method: 'GET', headers: { Authorization: server.auth(), Accept: 'text/event-stream',
      'Mcp-Session-Id': transport.sessionId }, limitMs: 10000 });
    assert.equal(second.status, 409, second.text);
    assert.deepEqual(await boxes(), []);
    assert.deepEqual(errors, []);
  } finally {
    await client.close();
    await server.close();
  }
});

test('SIGTERM drains: a call in progress runs to its end and its result goes out; nothing new is taken; the server exits 0', { skip: SKIP_LONG_HTTP }, async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30'] });
  try {
    const session = await initialize(server);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'run_python',
      arguments: { code: 'import time\ntime.sleep(2)\nprint("finished")', timeout_s: 20 }, _meta: { progressToken: 1 } } });
    const pending = request(server, { headers: postHeaders(server, { session }), body });
    const t0 = performance.now();
    while ((await boxes()).length === 0) {
      assert.ok(performance.now() - t0 < 20000, 'the box never started');
      await new Promise((r) => setImmediate(r));
    }
    server.proc.kill('SIGTERM');
    await server.line(/SIGTERM: draining: 1 call in progress/);
    // No new connection is taken (refused, or reset if it reached the kernel's queue
    // just before); a request on one already open would get 503.
    const refused = await request(server, { headers: postHeaders(server, { session }), body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })
      .then((r) => r.status, (e) => e.code);
    assert.ok(['ECONNREFUSED', 'ECONNRESET', 503].includes(refused), `a new request during the drain: ${refused}`);
    const answer = await pending;
    assert.equal(answer.status, 200);
    const events = answer.text.split('\n\n').filter((e) => e.trim() !== '').map((e) => JSON.parse(e.split('\ndata: ')[1]));
    const result = events.at(-1);
    assert.equal(result.id, 9);
    assert.equal(result.result.structuredContent.said.stdout.text, 'finished\n');
    const ex = await server.stop('SIGTERM');
    assert.deepEqual(ex, { code: 0, signal: null }, server.stderr);
    assert.deepEqual(await boxes(), []);
    assert.match(server.stderr, /stopped\n$/);
  } finally {
    await server.close('SIGINT');
  }
});

test('SIGINT stops at once: calls in progress are cancelled and their boxes removed', async () => {
  const server = await HttpServer.start({ args: ['--max-timeout', '30'] });
  const { client } = await connect(server);
  let running;
  const started = new Promise((r) => { running = r; });
  const call = client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(25)', timeout_s: 30 } },
    undefined, { timeout: 60000, onprogress: (p) => { if (p.message === 'running') running(); } });
  call.catch(() => {});
  await started;
  const t0 = performance.now();
  const ex = await server.close('SIGINT');
  assert.equal(ex.code, 0, server.stderr);
  assert.ok(performance.now() - t0 < 15000);
  assert.deepEqual(await boxes(), []);
  await client.close();
});

test('a unix socket: mode 0660 and the group named; calls through it; removed at the end', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-http-sock-'));
  const sock = path.join(dir, 'mcp.sock');
  const server = await HttpServer.start({ listen: `unix:${sock}`, args: ['--socket-group', String(os.userInfo().gid === 0 ? 65534 : os.userInfo().gid)] });
  try {
    const st = fs.statSync(sock);
    assert.ok(st.isSocket());
    assert.equal(st.mode & 0o777, 0o660);
    if (os.userInfo().uid === 0) assert.equal(st.gid, 65534);
    const session = await initialize(server);
    const r = await request(server, { headers: postHeaders(server, { session }), body: JSON.stringify({ jsonrpc: '2.0', id: 2,
      method: 'tools/call', params: { name: 'run_python', arguments: { code: 'print("over a socket")' } } }) });
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.text).result.structuredContent.said.stdout.text, 'over a socket\n');
  } finally {
    await server.close('SIGTERM');
    assert.ok(!fs.existsSync(sock), 'the socket is removed at the end');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('start-up refusals: no token file, a public address without --listen-public, a token file others can read', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-http-refuse-'));
  const loose = path.join(dir, 'loose');
  fs.writeFileSync(loose, `alice ${'a'.repeat(64)}\n`, { mode: 0o644 });
  fs.chmodSync(loose, 0o644);
  const good = path.join(dir, 'good');
  fs.writeFileSync(good, `alice ${'b'.repeat(64)}\n`, { mode: 0o600 });
  const cases = [
    [['--listen', '127.0.0.1:0'], /--listen needs --token-file FILE/],
    [['--token-file', good], /--token-file needs --listen/],
    [['--listen', '0.0.0.0:0', '--token-file', good], /not a loopback address: give --listen-public/],
    [['--listen', '127.0.0.1:0', '--token-file', loose], /can be read or written by others than its owner/],
    [['--listen', 'localhost:80', '--token-file', good], /is not an address to listen on/],
    [['--listen', '127.0.0.1:0', '--token-file', good, '--socket-group', 'root'], /--socket-group is for --listen unix/],
    [['--listen', '127.0.0.1:0', '--token-file', good, '--allow-origins', 'evil'], /is not an origin/],
    [['--listen', '127.0.0.1:0', '--token-file', good, '--max-calls', '0'], /--max-calls: give a whole number from 1/],
    [['--listen-public=yes'], /--listen-public takes no value/],
  ];
  try {
    for (const [args, want] of cases) {
      const r = spawnSync(PYBOX, ['mcp', ...args], { env: serverEnv, encoding: 'utf8', timeout: 20000 });
      assert.equal(r.status, 125, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, want, args.join(' '));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
