// SPDX-License-Identifier: MIT
// Shared by the tests of pybox mcp --listen: a server on a port the kernel picks (loopback
// only) or a unix socket, with a token file of its own; the official SDK client over
// Streamable HTTP; raw HTTP requests whose every byte the test chooses.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PYBOX, serverEnv } from './helpers.mjs';

export const PROTOCOL = '2025-11-25';

// A folder of the test's own (0700) with a token file (0600): one random token per name.
export function tokenFolder(names = ['alice', 'bob']) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-http-'));
  fs.chmodSync(dir, 0o700);
  const tokens = Object.fromEntries(names.map((n) => [n, crypto.randomBytes(32).toString('hex')]));
  const file = path.join(dir, 'tokens');
  fs.writeFileSync(file, Object.entries(tokens).map(([n, t]) => `${n} ${t}\n`).join(''), { mode: 0o600 });
  return { dir, file, tokens };
}

// pybox mcp --listen, started and waited for until it says where it listens.
export class HttpServer {
  // under: a command that runs the server (prlimit with its options, say); bin: the pybox
  // binary (the test build, for a test hook).
  static async start({ listen = '127.0.0.1:0', args = [], names, env = {}, folder, under = [], bin = PYBOX } = {}) {
    const s = new HttpServer();
    s.folder = folder ?? tokenFolder(names);
    s.tokens = s.folder.tokens;
    s.stderr = '';
    s.waiters = [];
    // no warm boxes unless asked: the tests count the boxes a call makes
    const argv = [bin, 'mcp', '--listen', listen, '--token-file', s.folder.file, '--warm', '0', ...args];
    s.proc = spawn(under.length > 0 ? under[0] : bin, [...under.slice(1), ...argv].slice(under.length > 0 ? 0 : 1),
      { env: { ...serverEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    s.stdout = '';
    s.proc.stdout.on('data', (d) => { s.stdout += d.toString('utf8'); });
    s.proc.stderr.on('data', (d) => {
      s.stderr += d.toString('utf8');
      s.waiters = s.waiters.filter((w) => !(w.re.test(s.stderr) && (w.resolve(), true)));
    });
    s.exited = new Promise((resolve) => s.proc.on('exit', (code, signal) => resolve({ code, signal })));
    const said = await Promise.race([s.line(/listening on (\S+), endpoint \/mcp/, 20000), s.exited.then((e) => e)]);
    if (said.code !== undefined) throw new Error(`pybox mcp --listen exited ${JSON.stringify(said)}: ${s.stderr}`);
    const at = s.stderr.match(/listening on (\S+), endpoint \/mcp/)[1];
    s.address = at;
    if (at.startsWith('unix:')) {
      s.socketPath = at.slice(5);
      s.url = 'http://localhost/mcp';
    } else {
      s.url = `http://${at}/mcp`;
      const m = at.match(/^(.*):(\d+)$/);
      s.host = m[1].replace(/^\[|\]$/g, '');
      s.port = Number(m[2]);
    }
    return s;
  }

  // Resolves once stderr (so far or to come) matches re.
  line(re, limitMs = 30000) {
    if (re.test(this.stderr)) return Promise.resolve(this.stderr.match(re));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`stderr never matched ${re} within ${limitMs} ms: ${this.stderr}`)), limitMs);
      this.waiters.push({ re, resolve: () => { clearTimeout(timer); resolve(this.stderr.match(re)); } });
    });
  }

  // The log's lines of one kind ("call", "refused", "session", "client gone").
  logLines(kind) {
    return this.stderr.split('\n').filter((l) => l.includes(` pybox mcp: ${kind}`));
  }

  auth(name = 'alice') { return `Bearer ${this.tokens[name]}`; }

  // Send sig (SIGINT: calls cancelled; SIGTERM: drained) and wait for the exit.
  async stop(sig = 'SIGINT', limitMs = 60000) {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(sig);
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), limitMs); });
    const ex = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (ex === null) {
      this.proc.kill('SIGKILL');
      await this.exited;
      throw new Error(`pybox mcp --listen did not exit within ${limitMs} ms of ${sig}: ${this.stderr}`);
    }
    return ex;
  }

  async close(sig = 'SIGINT') {
    try { return await this.stop(sig); } finally { fs.rmSync(this.folder.dir, { recursive: true, force: true }); }
  }
}

// The official SDK client over Streamable HTTP, with the token as its bearer.
export async function connect(server, { token = 'alice', headers = {}, name = 'pybox-tests' } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: { Authorization: server.auth(token), ...headers } },
  });
  const client = new Client({ name, version: '1.0.0' });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return { client, transport, errors };
}

// Errors the SDK client reports about itself while it closes (its streams aborted).
export const closing = (e) => /AbortError|aborted/.test(String(e?.message ?? e));

// One HTTP request with exactly these headers and body, on a connection of its own (or
// agent's); the status, headers and body as they came. socketPath: a unix socket instead.
export function request(server, { method = 'POST', path: p = '/mcp', headers = {}, body, limitMs = 60000, signal, agent = false } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: server.host, port: server.port, socketPath: server.socketPath, method, path: p, headers, agent, signal,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(limitMs, () => req.destroy(new Error(`no answer within ${limitMs} ms`)));
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

// The headers a well-behaved client sends on a POST.
export function postHeaders(server, { token = 'alice', session, version = PROTOCOL, extra = {} } = {}) {
  return {
    Authorization: server.auth(token),
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    ...(session ? { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': version } : {}),
    ...extra,
  };
}

// initialize over raw HTTP: the session id.
export async function initialize(server, token = 'alice') {
  const r = await request(server, {
    headers: postHeaders(server, { token }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize',
      params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  if (r.status !== 200 || !r.headers['mcp-session-id']) throw new Error(`initialize: ${r.status} ${r.text}`);
  return r.headers['mcp-session-id'];
}

// Bytes on a raw connection (TCP or unix), and everything the server sends until it
// closes the connection or limitMs pass; whether the server closed it.
export function rawExchange(server, bytes, { limitMs = 15000 } = {}) {
  return new Promise((resolve) => {
    const sock = server.socketPath ? net.connect(server.socketPath) : net.connect(server.port, server.host);
    const chunks = [];
    let closedByServer = false;
    const timer = setTimeout(() => { sock.destroy(); }, limitMs);
    sock.on('data', (c) => chunks.push(c));
    sock.on('end', () => { closedByServer = true; });
    sock.on('error', () => {});
    sock.on('close', () => { clearTimeout(timer); resolve({ text: Buffer.concat(chunks).toString('latin1'), closedByServer }); });
    sock.write(bytes);
  });
}

// The parts of a run_python result that two runs of the same call share: the receipt
// without what names this run (ids, times, the host user leased, the kernel's readings,
// the signature's value), and the content blocks with kept files' links reduced to their
// names and bytes.
export function sameParts(result) {
  const r = structuredClone(result);
  const rc = r.structuredContent;
  if (rc) {
    delete rc.run_id;
    delete rc.asked.at;
    delete rc.asked.policy.user;
    delete rc.asked.policy.program_uid;
    delete rc.asked.policy.sha256; // of the exact specification, which names the run and its user
    delete rc.seen.box.id;
    delete rc.seen.box.name;
    if (rc.seen.box.after_end) delete rc.seen.box.after_end.collector_ms; // how long the kernel's collector took
    delete rc.seen.kernel;
    delete rc.seen.timings_ms;
    if (rc.seen.files) delete rc.seen.files.folder; // each server's own output root
    if (rc.seen.init_record) delete rc.seen.init_record.program_ms;
    if (rc.seen.backend_record) {
      delete rc.seen.backend_record.started_at;
      delete rc.seen.backend_record.finished_at;
    }
    if (rc.signature) delete rc.signature.value;
  }
  r.content = (r.content || []).map((c) => {
    if (c.type !== 'resource_link') return c;
    return { type: c.type, name: c.name, bytes: fs.readFileSync(new URL(c.uri).pathname).toString('base64') };
  });
  return r;
}
