// SPDX-License-Identifier: MIT
// pybox mcp --listen against hostile HTTP: no token, a wrong one, another token's session,
// a forged Origin, oversized bodies, slow-loris heads, floods of sessions, calls and
// connections, a body framed two ways, and requests that break the protocol. Each is
// refused with its status and reason, the same request with only the offending part
// made right passes, and the server serves on with nothing left behind (no session, no
// box, no descriptor).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { boxes, serverEnv } from './helpers.mjs';
import { HttpServer, connect, request, postHeaders, initialize, rawExchange, tokenFolder, PROTOCOL } from './http-helpers.mjs';

const PING = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
const fds = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
const errorOf = (r) => JSON.parse(r.text).error;

// The server still serves: a call through the SDK client gets its receipt.
async function stillServing(server) {
  const { client } = await connect(server);
  try {
    const r = await client.callTool({ name: 'run_python', arguments: { code: 'print("serving")' } });
    assert.ok(r.structuredContent, JSON.stringify(r.content));
    assert.equal(r.structuredContent.said.stdout.text, 'serving\n');
  } finally {
    await client.close();
  }
}

// Descriptors the server holds, once the connections the test opened have closed: no
// more than before, else something was left behind (fewer is a connection of before that
// the server closed meanwhile, or the engine client's, which comes and goes).
async function sameDescriptors(server, before) {
  const t0 = performance.now();
  for (;;) {
    const now = fds(server.proc.pid);
    if (now <= before) return;
    assert.ok(performance.now() - t0 < 15000, `the server holds ${now} descriptors, ${before} before`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('tokens: none, a wrong one, a malformed one, another token\'s session; an unauthenticated body is never parsed', async () => {
  const server = await HttpServer.start();
  try {
    const session = await initialize(server, 'alice');
    const before = fds(server.proc.pid);
    const headers = postHeaders(server, { session });
    const none = { ...headers };
    delete none.Authorization;
    let r = await request(server, { headers: none, body: PING });
    assert.equal(r.status, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="pybox mcp"');
    assert.match(errorOf(r).message, /a bearer token is needed/);
    r = await request(server, { headers: { ...headers, Authorization: `Bearer ${'f'.repeat(64)}` }, body: PING });
    assert.equal(r.status, 401);
    assert.match(r.headers['www-authenticate'], /error="invalid_token"/);
    for (const bad of [`Basic ${server.tokens.alice}`, `Bearer  ${server.tokens.alice}`, `Bearer ${server.tokens.alice}x`,
      `Bearer ${server.tokens.alice.slice(0, -1)}`, 'Bearer']) {
      r = await request(server, { headers: { ...headers, Authorization: bad }, body: PING });
      assert.equal(r.status, 401, bad);
    }
    // Not JSON at all, without a token: 401, not a parse error: the body was not read.
    r = await request(server, { headers: none, body: '{{{{ not json' });
    assert.equal(r.status, 401);
    // bob's token on alice's session: as if there were none.
    r = await request(server, { headers: postHeaders(server, { session, token: 'bob' }), body: PING });
    assert.equal(r.status, 404);
    assert.equal(errorOf(r).code, -32001);
    // The same request with alice's token passes.
    r = await request(server, { headers, body: PING });
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), { jsonrpc: '2.0', id: 1, result: {} });
    assert.equal(server.logLines('refused 401').length, 8, server.stderr);
    await sameDescriptors(server, before);
    await stillServing(server);
  } finally {
    await server.close();
  }
});

test('Origin: a forged one is refused (403), a listed one and none pass', async () => {
  const server = await HttpServer.start({ args: ['--allow-origins', 'http://localhost:6274,https://agents.example.org'] });
  try {
    const session = await initialize(server);
    const headers = postHeaders(server, { session });
    for (const forged of ['http://evil.example', 'http://localhost:6275', 'null', 'http://localhost:6274/x']) {
      const r = await request(server, { headers: { ...headers, Origin: forged }, body: PING });
      assert.equal(r.status, 403, forged);
      assert.match(errorOf(r).message, /forbidden: the origin .* is not allowed/);
    }
    // Refused before the token is even looked at: a forged origin with no token is 403.
    const noToken = { ...headers, Origin: 'http://evil.example' };
    delete noToken.Authorization;
    assert.equal((await request(server, { headers: noToken, body: PING })).status, 403);
    for (const ok of ['http://localhost:6274', 'HTTPS://Agents.Example.org']) {
      const r = await request(server, { headers: { ...headers, Origin: ok }, body: PING });
      assert.equal(r.status, 200, ok);
    }
    assert.equal((await request(server, { headers, body: PING })).status, 200);
    // With no origin listed, any Origin is refused.
    const strict = await HttpServer.start();
    try {
      const s2 = await initialize(strict);
      const r = await request(strict, { headers: { ...postHeaders(strict, { session: s2 }), Origin: 'http://127.0.0.1:1' }, body: PING });
      assert.equal(r.status, 403);
    } finally {
      await strict.close();
    }
    await stillServing(server);
  } finally {
    await server.close();
  }
});

test('bodies: one declared over 16 MiB is refused from its head (413), one sent over it too; one just under passes', async () => {
  const server = await HttpServer.start();
  try {
    const session = await initialize(server);
    const before = fds(server.proc.pid);
    // Declared: the answer comes before a byte of the body is sent.
    const head = `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.auth()}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nMcp-Session-Id: ${session}\r\nContent-Length: ${17 * 1024 * 1024}\r\n\r\n`;
    const declared = await rawExchange(server, head);
    assert.match(declared.text, /^HTTP\/1\.1 413 /);
    assert.match(declared.text, /content too large: a message may be at most 16777216 bytes/);
    assert.ok(declared.closedByServer, 'the connection is closed: the body is not read');
    // Chunked, with no length given: refused once it passes the bound.
    const big = await new Promise((resolve) => {
      const sock = net.connect(server.port, server.host);
      let got = '';
      sock.on('data', (c) => { got += c.toString('latin1'); });
      sock.on('close', () => resolve(got));
      sock.on('error', () => {}); // EPIPE or a reset once the server has closed it
      sock.write(head.replace(/Content-Length: \d+/, 'Transfer-Encoding: chunked'));
      const chunk = 'x'.repeat(1024 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < 20 && !sock.destroyed) {
          sent++;
          if (!sock.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)) { sock.once('drain', more); return; }
        }
      };
      more();
    });
    // The answer may be lost to the reset that closing a connection with unread bytes
    // sends; the refusal is in the log either way, and the connection is closed.
    assert.ok(big === '' || /^HTTP\/1\.1 413 /.test(big), big.slice(0, 100));
    await server.line(/refused 413 POST[^\n]*\n[\s\S]*refused 413 POST/);
    // 16 MiB less a little: parsed and answered (a ping's padding is ignored).
    const pad = 'x'.repeat(16 * 1024 * 1024 - 200);
    const r = await request(server, { headers: postHeaders(server, { session }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'ping', params: { pad } }) });
    assert.equal(r.status, 200, r.text.slice(0, 200));
    assert.equal(JSON.parse(r.text).id, 'big');
    await sameDescriptors(server, before);
    await stillServing(server);
  } finally {
    await server.close();
  }
});

test('slow-loris heads: connections that trickle a head are closed at the head\'s deadline while others are served', async () => {
  const server = await HttpServer.start();
  try {
    const before = fds(server.proc.pid);
    // A byte a second: libmicrohttpd's own inactivity timeout (30 s) never fires; only
    // the head's deadline (10 s from the connection) closes them.
    const N = 40;
    const t0 = performance.now();
    const slow = [...Array(N).keys()].map(() => new Promise((resolve) => {
      const sock = net.connect(server.port, server.host);
      let timer;
      const header = `POST /mcp HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(60)}`;
      let i = 0;
      sock.on('connect', () => {
        timer = setInterval(() => { if (i < header.length) sock.write(header[i++]); }, 1000);
      });
      sock.on('error', () => {});
      sock.on('close', () => { clearInterval(timer); resolve(performance.now() - t0); });
    }));
    // Meanwhile an honest client is served.
    await stillServing(server);
    const closedAfter = await Promise.all(slow);
    const last = Math.max(...closedAfter);
    console.log(`# ${N} slow heads closed by the server after ${Math.min(...closedAfter).toFixed(0)}-${last.toFixed(0)} ms`);
    assert.ok(Math.min(...closedAfter) >= 9000, 'not before the deadline');
    assert.ok(last < 14000, `the last slow head was closed after ${last} ms`);
    await sameDescriptors(server, before);
    await stillServing(server);
  } finally {
    await server.close();
  }
});

test('floods: sessions past --max-http-sessions, calls past --max-calls, connections past --max-connections: 429 each, then served again', async () => {
  const server = await HttpServer.start({ args: ['--max-http-sessions', '4', '--max-calls', '2', '--max-connections', '6', '--max-timeout', '30'] });
  try {
    const sessions = [];
    for (let i = 0; i < 4; i++) sessions.push(await initialize(server));
    const init = JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize',
      params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'flood', version: '1' } } });
    for (let i = 0; i < 10; i++) {
      const r = await request(server, { headers: postHeaders(server), body: init });
      assert.equal(r.status, 429);
      assert.equal(r.headers['mcp-session-id'], undefined);
      assert.match(errorOf(r).message, /too many sessions: this token has 4/);
    }
    // Another token's sessions are its own.
    const bobs = await initialize(server, 'bob');
    // Every session still serves; one ended makes room for one more.
    for (const s of sessions) assert.equal((await request(server, { headers: postHeaders(server, { session: s }), body: PING })).status, 200);
    const del = await request(server, { method: 'DELETE', headers: { Authorization: server.auth(), 'Mcp-Session-Id': sessions.pop() } });
    assert.equal(del.status, 204);
    sessions.push(await initialize(server));

    // Calls: two long ones in flight (across two sessions), a third refused.
    const long = (s, id, token = 'alice') => request(server, { headers: postHeaders(server, { session: s, token }), body: JSON.stringify({ jsonrpc: '2.0', id,
      method: 'tools/call', params: { name: 'run_python', arguments: { code: 'import time\ntime.sleep(8)', timeout_s: 20 } } }) });
    const running = [long(sessions[0], 1), long(sessions[1], 2)];
    const t0 = performance.now();
    while ((await boxes()).length < 2) {
      assert.ok(performance.now() - t0 < 20000);
      await new Promise((r) => setImmediate(r));
    }
    const third = await long(sessions[2], 3);
    assert.equal(third.status, 429);
    assert.equal(errorOf(third).code, -32603);
    assert.match(errorOf(third).message, /too many calls in progress/);
    // bob is not held back by alice's calls.
    const bobCall = long(bobs, 4, 'bob');
    // Connections: 2 waiting calls + 4 open streams reach 6; the 7th request is refused.
    const waiting = [0, 1, 2, 3].map((i) => request(server, { method: 'GET', headers: { Authorization: server.auth(),
      Accept: 'text/event-stream', 'Mcp-Session-Id': sessions[i] }, limitMs: 60000 }).catch((e) => e));
    let seventh;
    const t1 = performance.now();
    do {
      seventh = await request(server, { headers: postHeaders(server, { session: sessions[3] }), body: PING });
      if (seventh.status === 429) break;
      await new Promise((r) => setTimeout(r, 20));
    } while (performance.now() - t1 < 10000);
    assert.equal(seventh.status, 429, seventh.text);
    assert.match(errorOf(seventh).message, /this token has 6 connections with a request in progress/);
    for (const r of await Promise.all([...running, bobCall])) assert.equal(r.status, 200);
    // Ending the sessions ends their streams: the connections come back.
    for (const s of sessions)
      await request(server, { method: 'DELETE', headers: { Authorization: server.auth(), 'Mcp-Session-Id': s } });
    await Promise.all(waiting);
    await stillServing(server);
    assert.deepEqual(await boxes(), []);
  } finally {
    await server.close();
  }
});

test('a body framed two ways (request smuggling) is refused and its connection closed; the request hidden in it never runs', async () => {
  const server = await HttpServer.start();
  try {
    const session = await initialize(server);
    const before = fds(server.proc.pid);
    // Read by Content-Length, the body is a whole DELETE of the session; read as chunked,
    // it ends at once and the DELETE would be a second request on the connection.
    const hidden = `DELETE /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.auth()}\r\nMcp-Session-Id: ${session}\r\n\r\n`;
    const body = `0\r\n\r\n${hidden}`;
    const base = `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.auth()}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nMcp-Session-Id: ${session}\r\n`;
    const attempts = [
      `${base}Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
      `${base}Transfer-Encoding: chunked\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      `${base}Content-Length: ${body.length}\r\nContent-Length: 5\r\n\r\n${body}`,
      `${base}Transfer-Encoding: gzip, chunked\r\n\r\n${body}`,
      `${base}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n${body}`,
    ];
    for (const a of attempts) {
      const r = await rawExchange(server, a);
      assert.match(r.text, /^HTTP\/1\.1 400 /, a.split('\r\n').slice(-4).join(' | '));
      assert.equal((r.text.match(/HTTP\/1\.1 /g) || []).length, 1, 'one answer: the hidden request was not read');
      assert.ok(r.closedByServer);
    }
    // The session was never deleted: the hidden DELETE did not run.
    assert.equal((await request(server, { headers: postHeaders(server, { session }), body: PING })).status, 200);
    assert.equal(server.logLines('session').filter((l) => l.includes('ended')).length, 0, server.stderr);
    // Two requests on one connection, each framed one way, are both served in order.
    const ping2 = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' });
    const pipelined = `${base}Content-Length: ${PING.length}\r\n\r\n${PING}${base}Content-Length: ${ping2.length}\r\nConnection: close\r\n\r\n${ping2}`;
    const both = await rawExchange(server, pipelined);
    assert.equal((both.text.match(/HTTP\/1\.1 200 /g) || []).length, 2, both.text);
    await sameDescriptors(server, before);
    await stillServing(server);
  } finally {
    await server.close();
  }
});

test('requests that break the protocol: each its status and reason, the server serving on', async () => {
  const server = await HttpServer.start();
  try {
    const session = await initialize(server);
    const h = postHeaders(server, { session });
    const cases = [
      [{ headers: h, body: '{"jsonrpc":"2.0","id":1,' }, 400, -32700],
      [{ headers: h, body: `[${PING}]` }, 400, -32600],
      [{ headers: h, body: '   ' }, 400, -32600],
      [{ headers: h, body: '{"jsonrpc":"2.0","id":1,"method":"nope"}' }, 200, -32601],
      [{ headers: { ...h, 'MCP-Protocol-Version': '2024-11-05' }, body: PING }, 400, -32000],
      [{ headers: postHeaders(server), body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' }, 400, -32000],
      [{ headers: { ...h, 'Mcp-Session-Id': 'f'.repeat(32) }, body: PING }, 404, -32001],
      [{ headers: { ...h, 'Mcp-Session-Id': '../../etc' }, body: PING }, 404, -32001],
      [{ headers: { ...h, Accept: 'application/json' }, body: PING }, 406, -32000],
      [{ headers: { ...h, 'Content-Type': 'text/plain' }, body: PING }, 415, -32000],
      [{ method: 'GET', headers: { Authorization: server.auth(), Accept: 'text/event-stream' } }, 400, -32000],
      [{ method: 'GET', headers: { Authorization: server.auth(), Accept: 'application/json', 'Mcp-Session-Id': session } }, 406, -32000],
      [{ method: 'PUT', headers: h, body: PING }, 405, -32000],
      [{ path: '/other', headers: h, body: PING }, 404, -32000],
      [{ path: '/mcp/../mcp', headers: h, body: PING }, 404, -32000],
      [{ method: 'DELETE', headers: { Authorization: server.auth(), 'Mcp-Session-Id': session, 'Content-Length': '1' }, body: 'x' }, 400, -32000],
    ];
    for (const [req, status, code] of cases) {
      const r = await request(server, req);
      assert.equal(r.status, status, `${JSON.stringify(req).slice(0, 160)}: ${r.text}`);
      assert.equal(errorOf(r).code, code, r.text);
    }
    const put = await request(server, { method: 'PUT', headers: h, body: PING });
    assert.equal(put.headers.allow, 'GET, POST, DELETE');
    assert.equal((await request(server, { headers: h, body: PING })).status, 200);
    await stillServing(server);
  } finally {
    await server.close();
  }
});

// Whoever may write the socket's folder can replace the socket by a link between its
// bind and the setting of its group (the test build waits there, PYBOX_TEST_LISTEN_BOUND):
// a server that set the mode or group by the path would follow the link to the file
// behind it (root's /etc/shadow, run as root) and hand it to the socket's group.
test('a unix socket replaced by a link while the server makes it: the file behind the link keeps its mode and group, the server does not start', async () => {
  const bin = process.env.PYBOX_TEST_BIN;
  assert.ok(bin, 'PYBOX_TEST_BIN (the test build) is set by the integration tests');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-http-link-'));
  const folder = tokenFolder();
  try {
    const victim = path.join(dir, 'victim');
    fs.writeFileSync(victim, 'secret\n', { mode: 0o600 });
    const before = fs.statSync(victim);
    const fifo = path.join(dir, 'bound');
    execFileSync('mkfifo', [fifo]);
    const sock = path.join(dir, 'mcp.sock');
    const group = before.gid === 65534 ? 0 : 65534;
    const proc = spawn(bin, ['mcp', '--listen', `unix:${sock}`, '--token-file', folder.file, '--socket-group', String(group)],
      { env: { ...serverEnv, PYBOX_TEST_LISTEN_BOUND: fifo }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (d) => { stderr += d.toString('utf8'); });
    const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
    // The socket is bound and the server waits on the FIFO.
    const t0 = performance.now();
    while (!fs.existsSync(sock)) {
      assert.ok(performance.now() - t0 < 20000, `no socket was bound: ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    fs.renameSync(sock, `${sock}.moved`);
    fs.symlinkSync(victim, sock);
    fs.writeFileSync(fifo, 'x');
    // It stops, or (had it followed the link) serves: then it is stopped here.
    const serving = new Promise((resolve) => {
      const t = setInterval(() => { if (/listening on/.test(stderr)) { clearInterval(t); resolve(); } }, 20);
      exited.then(() => clearInterval(t));
    });
    await Promise.race([exited, serving]);
    if (proc.exitCode === null) proc.kill('SIGINT');
    const code = await exited;
    const after = fs.statSync(victim);
    assert.equal(after.mode & 0o7777, 0o600, 'the mode of the file behind the link is unchanged');
    assert.equal(after.gid, before.gid, 'its group is unchanged');
    assert.equal(code, 125, stderr);
    assert.match(stderr, /was replaced while the server made it/);
    assert.equal(fs.statSync(`${sock}.moved`).mode & 0o777, 0o660, 'the socket was bound with its mode');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(folder.dir, { recursive: true, force: true });
  }
});

// Descriptors are shared by connections and calls: a flood of connections (here 300 that
// send nothing, against a server allowed 200 descriptors and 4 tokens' worth of
// connections; the hard limit above a box's own 256) takes at most half of them, and a
// call made meanwhile on a connection of before gets its receipt. Connections taking them
// all left the call none (EMFILE).
test('a flood of connections cannot take the descriptors calls need: a call made meanwhile gets its receipt', async () => {
  const server = await HttpServer.start({ names: ['alice', 'bob', 'carol', 'dave'], under: ['prlimit', '--nofile=200:4096'] });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const flood = [];
  try {
    const session = await initialize(server);
    const ping = await request(server, { agent, headers: postHeaders(server, { session }), body: PING });
    assert.equal(ping.status, 200, ping.text);
    const base = fds(server.proc.pid);
    for (let i = 0; i < 300; i++) {
      flood.push(await new Promise((resolve) => {
        const s = net.connect(server.port, server.host);
        s.on('connect', () => resolve(s));
        s.on('error', () => resolve(s));
      }));
    }
    // The server has taken what it will of them (libmicrohttpd leaves the rest waiting in
    // the kernel's queue): its descriptors have grown by at least 60.
    const t0 = performance.now();
    while (fds(server.proc.pid) < base + 60) {
      assert.ok(performance.now() - t0 < 20000, `the server took ${fds(server.proc.pid) - base} of the connections`);
      await new Promise((res) => setTimeout(res, 50));
    }
    const r = await request(server, { agent, headers: postHeaders(server, { session }), body: JSON.stringify({ jsonrpc: '2.0',
      id: 2, method: 'tools/call', params: { name: 'run_python', arguments: { code: 'print("still")', timeout_s: 20 } } }) });
    assert.equal(r.status, 200, r.text);
    const result = JSON.parse(r.text).result;
    assert.ok(result?.structuredContent, r.text);
    assert.equal(result.structuredContent.said.stdout.text, 'still\n', JSON.stringify(result.content).slice(0, 2000));
    assert.match(server.stderr, /at most 68 connections in all/);
    assert.ok(fds(server.proc.pid) <= base + 68, 'no more connections than the limit were taken');
    for (const s of flood) s.destroy();
    agent.destroy();
    await stillServing(server);
  } finally {
    for (const s of flood) s.destroy();
    agent.destroy();
    await server.close();
  }
  assert.deepEqual(await boxes(), []);
});
