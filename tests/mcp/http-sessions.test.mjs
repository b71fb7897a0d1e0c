// SPDX-License-Identifier: MIT
// Python sessions over pybox mcp --listen, as tenants that share a server: a session_open
// cancelled or abandoned leaves no session behind, each token has its own share of the
// sessions, an HTTP session's end does not stall the server meanwhile.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { boxes, waitNoBoxes, SKIP_LONG_HTTP, SKIP_TIMING } from './helpers.mjs';
import { HttpServer, connect, request, postHeaders, initialize, tokenFolder, PROTOCOL } from './http-helpers.mjs';

const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const OPEN = (id) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'session_open', arguments: {} } });

// Until the installation holds n boxes (a session_open's box is being made).
async function boxesReach(n, limitMs = 60000) {
  const t0 = performance.now();
  while ((await boxes()).length < n) {
    assert.ok(performance.now() - t0 < limitMs, `no ${n} boxes within ${limitMs} ms`);
    await new Promise((r) => setImmediate(r));
  }
}

// session_open over raw HTTP: its result (or error) as the server answered it.
async function openRaw(server, session, token = 'alice') {
  const r = await request(server, { headers: postHeaders(server, { token, session }), body: OPEN('open') });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text).result;
}

test('a session_open cancelled (notifications/cancelled) or abandoned (the client hangs up) opens no session: every place of --python-sessions is still there, no box is left', async () => {
  const server = await HttpServer.start({ args: ['--python-sessions', '2', '--python-sessions-per-token', '2'] });
  const { client, errors } = await connect(server);
  try {
    // notifications/cancelled while the box is made
    const abort = new AbortController();
    const call = client.callTool({ name: 'session_open', arguments: {} }, undefined, { signal: abort.signal, timeout: 60000 });
    call.catch(() => {});
    await boxesReach(1);
    abort.abort('the test cancels');
    await assert.rejects(call);
    await server.line(/call token=alice session=\w+ status=CANCELLED run=- /);
    await waitNoBoxes(30000);
    // a client that hangs up while the box is made
    const session = await initialize(server);
    const sock = net.connect(server.port, server.host);
    sock.on('error', () => {});
    const body = OPEN('gone');
    // gone as soon as its request is out: before the box is made and ready
    await new Promise((resolve) => sock.write(`POST /mcp HTTP/1.1\r\nHost: x\r\n${Object.entries(postHeaders(server, { session }))
      .map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, resolve));
    sock.destroy();
    await server.line(/client gone token=alice[^\n]*\n[\s\S]*call token=alice session=\w+ status=CANCELLED/);
    await waitNoBoxes(30000);
    // both places are free
    const ids = [];
    for (let i = 0; i < 2; i++) {
      const r = await client.callTool({ name: 'session_open', arguments: {} }, undefined, { timeout: 60000 });
      assert.ok(!r.isError, text(r));
      ids.push(r.structuredContent.session_id);
    }
    assert.equal((await boxes()).length, 2, 'the two sessions\' boxes, and no other');
    for (const id of ids) {
      const r = await client.callTool({ name: 'session_close', arguments: { session_id: id } });
      assert.ok(!r.isError, text(r));
    }
    await waitNoBoxes(30000);
    assert.deepEqual(errors, []);
  } finally {
    await client.close();
    await server.close();
  }
  assert.deepEqual(await boxes(), []);
});

// Python sessions have a share per token over HTTP: one token that opens its share is
// refused the next with the per-token bound named, and another token can still open.
test('each token its share of --python-sessions: one token holding its share leaves the others theirs; the refusal names the per-token bound', async () => {
  const server = await HttpServer.start({ args: ['--python-sessions', '2'] });
  try {
    const alice = await initialize(server, 'alice');
    const alice2 = await initialize(server, 'alice'); // the same token, another HTTP session
    const bob = await initialize(server, 'bob');
    const mine = await openRaw(server, alice);
    assert.ok(!mine.isError, text(mine));
    const more = await openRaw(server, alice2);
    assert.ok(more.isError, 'a second session for the same token');
    assert.match(text(more), /this token has 1 session live or opening, the most one token keeps \(--python-sessions-per-token, set by the server\)/);
    const theirs = await openRaw(server, bob, 'bob');
    assert.ok(!theirs.isError, `bob is not refused for alice's sessions: ${text(theirs)}`);
    assert.match(server.stderr, /at most 2 live at once \(at most 1 per token\)/);
    assert.equal((await boxes()).length, 2);
    for (const [session, token, r] of [[alice, 'alice', mine], [bob, 'bob', theirs]]) {
      const closed = await request(server, { headers: postHeaders(server, { token, session }), body: JSON.stringify({
        jsonrpc: '2.0', id: 'close', method: 'tools/call', params: { name: 'session_close', arguments: { session_id: r.structuredContent.session_id } } }) });
      assert.ok(!JSON.parse(closed.text).result.isError, closed.text);
    }
    await waitNoBoxes(30000);
  } finally {
    await server.close();
  }
  assert.deepEqual(await boxes(), []);
});

test('--python-sessions-per-token: at most --python-sessions; given, it is the share', async () => {
  const server = await HttpServer.start({ args: ['--python-sessions', '3', '--python-sessions-per-token', '3'] });
  try {
    assert.match(server.stderr, /at most 3 live at once \(at most 3 per token\)/);
  } finally {
    await server.close();
  }
  const folder = tokenFolder();
  try {
    await assert.rejects(HttpServer.start({ folder, args: ['--python-sessions', '2', '--python-sessions-per-token', '3'] }),
      /--python-sessions-per-token: 3 is more than --python-sessions \(2\)/);
  } finally {
    fs.rmSync(folder.dir, { recursive: true, force: true });
  }
});

// A run_python call that sleeps, on an HTTP session of its own, its box seen running;
// abandon() hangs up and resolves once the server has logged the client gone.
async function abandonedCall(server, boxesBefore) {
  const session = await initialize(server);
  const abort = new AbortController();
  const body = JSON.stringify({ jsonrpc: '2.0', id: 'sleep', method: 'tools/call',
    params: { name: 'run_python', arguments: { code: 'import time\ntime.sleep(25)', timeout_s: 30 } } });
  const pending = request(server, { headers: postHeaders(server, { session }), body, signal: abort.signal }).catch((e) => e);
  await boxesReach(boxesBefore + 1);
  return async (limitMs) => {
    const gone = server.logLines('client gone').length;
    abort.abort();
    await pending;
    await server.line(new RegExp(`(client gone[^\\n]*\\n[\\s\\S]*){${gone + 1}}`), limitMs);
  };
}

// The end of an MCP session ends its Python sessions, each box closed and removed, which
// takes what the backend takes. Done on the server's main thread, that stalled every
// client's disconnection, deadline, keep-alive and signal meanwhile. Here the removal is
// held (a test hook) after the MCP session is deleted: another client's hang-up is still
// seen at once, and SIGTERM still drains.
test('an MCP session whose Python session is being removed does not stall the server: another client that hangs up is still seen, SIGTERM still drains', { skip: SKIP_TIMING }, async () => {
  const bin = process.env.PYBOX_TEST_BIN;
  assert.ok(bin, 'PYBOX_TEST_BIN (the test build) is set by the integration tests');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-http-hold-'));
  const fifo = path.join(dir, 'hold');
  execFileSync('mkfifo', [fifo]);
  const server = await HttpServer.start({ bin, args: ['--python-sessions', '2', '--max-timeout', '30'],
    env: { PYBOX_TEST_SESSION_END_HOLD: fifo } });
  let held;
  const release = async () => { if (held) { const h = held; held = undefined; await h.write('x'); await h.close(); } };
  try {
    const session = await initialize(server);
    const opened = await openRaw(server, session);
    assert.ok(!opened.isError, text(opened));
    const deleted = await request(server, { method: 'DELETE', headers: postHeaders(server, { session }) });
    assert.equal(deleted.status, 204, deleted.text);
    // the server opens the FIFO when the session's end reaches its box: held from now on
    held = await fs.promises.open(fifo, 'w');
    const other = await abandonedCall(server, 1);
    await other(10000);
    server.proc.kill('SIGTERM');
    await server.line(/SIGTERM: draining/, 10000);
    await release();
    const ex = await server.exited;
    assert.equal(ex.code, 0, server.stderr);
    const id = opened.structuredContent.session_id;
    assert.match(server.stderr, new RegExp(`session ${id.slice(0, 8)} ended \\(its MCP connection ended\\)`));
    assert.ok(!server.stderr.includes(id), 'the log names a Python session by its first 8 digits, never its whole id');
  } finally {
    await release().catch(() => {});
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  await waitNoBoxes(30000);
});

// The session's GET stream lasts as long as the session: it is not a body being read,
// whose deadline (60 s) once cut it whatever its keep-alives. Five keep-alives (one each
// 15 s) come on it, then DELETE ends it.
test('the session\'s GET stream outlives the body deadline: keep-alives past 60 s, then DELETE ends it', { skip: SKIP_LONG_HTTP }, async () => {
  const server = await HttpServer.start();
  try {
    const session = await initialize(server);
    const t0 = performance.now();
    let keepalives = 0;
    let ended = false;
    let fifth;
    const five = new Promise((resolve) => { fifth = resolve; });
    const done = new Promise((resolve, reject) => {
      const req = http.request({ host: server.host, port: server.port, method: 'GET', path: '/mcp',
        headers: { Authorization: server.auth(), Accept: 'text/event-stream', 'Mcp-Session-Id': session, 'MCP-Protocol-Version': PROTOCOL } },
      (res) => {
        assert.equal(res.statusCode, 200);
        res.on('data', (c) => {
          keepalives += (c.toString('utf8').match(/: keep-alive/g) || []).length;
          if (keepalives >= 5) fifth();
        });
        res.on('end', () => { ended = true; resolve(); });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    await Promise.race([five, done]);
    const s = (performance.now() - t0) / 1000;
    assert.ok(!ended, `the stream ended after ${s.toFixed(1)} s with ${keepalives} keep-alives`);
    assert.ok(s > 61, `${s} s`);
    const deleted = await request(server, { method: 'DELETE', headers: postHeaders(server, { session }) });
    assert.equal(deleted.status, 204);
    await done;
    assert.ok(ended);
  } finally {
    await server.close();
  }
});

// Request bodies held at once are bounded per token (64 MiB) and in all: six bodies of
// 15 MiB from one token, all held at once (none complete until the six are sent), get at
// most four answers and a 429 with its reason for the rest; another token is served
// meanwhile. Each body is a ping padded with spaces.
test('request bodies held at once: one token\'s past its share get 429 with the reason, another token is served meanwhile', async () => {
  const server = await HttpServer.start();
  const socks = [];
  try {
    const session = await initialize(server, 'bob');
    const ping = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}');
    const size = 15 * 1024 * 1024;
    const pad = Buffer.alloc(size - ping.length - 1, 0x20);
    const head = `POST /mcp HTTP/1.1\r\nHost: x\r\n${Object.entries(postHeaders(server, { token: 'bob', session }))
      .map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${size}\r\n\r\n`;
    const answers = [];
    for (let i = 0; i < 6; i++) {
      const sock = net.connect(server.port, server.host);
      const got = { text: '', closed: false };
      answers.push(got);
      socks.push(sock);
      sock.on('data', (c) => { got.text += c.toString('latin1'); });
      sock.on('error', () => {});
      got.done = new Promise((resolve) => sock.on('close', () => { got.closed = true; resolve(); }));
      // all but the last byte: the body is held, not yet whole
      await new Promise((resolve) => { sock.write(head); sock.write(ping); sock.write(pad, () => resolve()); sock.once('close', resolve); });
    }
    const alice = await initialize(server, 'alice');
    const pong = await request(server, { headers: postHeaders(server, { session: alice }), body: ping.toString() });
    assert.equal(pong.status, 200, pong.text);
    for (const s of socks) if (!s.destroyed) s.end(' ');
    // each answered: the whole ones with a pong, the others refused
    const t0 = performance.now();
    while (answers.some((a) => !/\r\n\r\n[\s\S]*\}/.test(a.text) && !a.closed)) {
      assert.ok(performance.now() - t0 < 30000, 'every connection answered or closed');
      await new Promise((r) => setTimeout(r, 20));
    }
    // refused while it was being sent, a body's answer may be lost to the client (the
    // server closes a connection whose body it will not read): the log has each refusal
    const ok = answers.filter((a) => /^HTTP\/1\.1 200 /.test(a.text));
    assert.ok(ok.length <= 4, `${ok.length} bodies of 15 MiB held at once, past 64 MiB`);
    assert.ok(ok.length >= 1);
    const reason = /refused 429 POST token=bob session=\S+: too many requests: this token's request bodies being sent at once pass 64 MiB \(set by the server\)/g;
    assert.equal((server.stderr.match(reason) || []).length, 6 - ok.length, server.stderr);
    for (const a of answers.filter((x) => !ok.includes(x)))
      assert.ok(a.text === '' || /^HTTP\/1\.1 429 [\s\S]*pass 64 MiB/.test(a.text), a.text.slice(0, 200));
  } finally {
    for (const s of socks) s.destroy();
    await server.close();
  }
});

// A client may half-close its side once its request is sent (shutdown(SHUT_WR)): that is
// not a hang-up, and its call runs to its answer. A client that closes outright is still
// seen at once and its call cancelled (the other tests of a client that goes).
test('a client that half-closes after its request still gets its answer', async () => {
  const server = await HttpServer.start();
  try {
    const session = await initialize(server);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 'half', method: 'tools/call',
      params: { name: 'run_python', arguments: { code: 'import time\ntime.sleep(1)\nprint("answered")' } } });
    const got = await new Promise((resolve) => {
      const sock = net.connect(server.port, server.host);
      const chunks = [];
      sock.on('data', (c) => chunks.push(c));
      sock.on('error', () => {});
      sock.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      sock.write(`POST /mcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${Object.entries(postHeaders(server, { session }))
        .map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      sock.end(); // FIN: nothing more is sent, the answer is still read
    });
    const final = got.replace(/^(HTTP\/1\.1 1\d\d [^\r]*\r\n(?:[^\r]+\r\n)*\r\n)*/, '');
    assert.match(final, /^HTTP\/1\.1 200 /, got.slice(0, 300));
    const result = JSON.parse(final.slice(final.indexOf('\r\n\r\n') + 4)).result;
    assert.equal(result.structuredContent.said.stdout.text, 'answered\n');
    assert.doesNotMatch(server.stderr, /client gone/);
  } finally {
    await server.close();
  }
  assert.deepEqual(await boxes(), []);
});
