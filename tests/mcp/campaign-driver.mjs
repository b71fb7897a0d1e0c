// SPDX-License-Identifier: MIT
// Evidence campaign, MCP case: drives `pybox mcp` with the official SDK client on stdio and over Streamable HTTP (`pybox mcp --listen`), and with raw clients on each; prints one JSON object.
//
// Contract: run from the repository root as `node tests/mcp/campaign-driver.mjs` with
// PYBOX_BIN (absolute path of pybox), PYBOX_HOME (the campaign's installation, images
// pinned) and PYBOX_CAMPAIGN_TMP (an empty scratch folder). Stdout gets exactly one JSON
// object {"observed": {...}, "checks": [{name, ok, detail}, ...]}; logs go to stderr.
// Exit 0 when the driver ran to the end (whatever the checks found), non-zero only when
// it could not run. Every check has its own server, its own deadline and its own clean-up,
// so one failing or hanging does not stop or disturb the others.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const log = (...a) => console.error('[mcp-campaign]', ...a);
console.log = (...a) => console.error(...a); // stdout carries the one JSON object only

function cannotRun(why) {
  console.error(`campaign-driver: cannot run: ${why}`);
  process.exit(2);
}

// ---- environment ----
const PYBOX = process.env.PYBOX_BIN;
const HOME = process.env.PYBOX_HOME;
const TMP = process.env.PYBOX_CAMPAIGN_TMP;
if (!PYBOX || !path.isAbsolute(PYBOX)) cannotRun('PYBOX_BIN must be the absolute path of the pybox binary');
try { fs.accessSync(PYBOX, fs.constants.X_OK); } catch { cannotRun(`${PYBOX} is not executable`); }
if (!HOME || !path.isAbsolute(HOME)) cannotRun('PYBOX_HOME must be an absolute path');
if (!TMP || !fs.existsSync(TMP) || !fs.statSync(TMP).isDirectory()) cannotRun('PYBOX_CAMPAIGN_TMP must be an existing folder');
let INSTALL;
try {
  INSTALL = fs.readFileSync(path.join(HOME, 'install-id'), 'utf8').trim(); // pybox/state.c: load_install_id
} catch (e) { cannotRun(`no installation id in ${HOME} (${e.code || e.message})`); }
if (!/^[0-9a-f]{32}$/.test(INSTALL)) cannotRun(`${HOME}/install-id does not hold an installation id`);

// helpers.mjs reads the installation id from the environment when it is loaded.
process.env.PYBOX_TEST_INSTALL_ID = INSTALL;
const { serverEnv, boxes, volumes, createdBetween } = await import('./helpers.mjs');
const { HttpServer, request, postHeaders, initialize } = await import('./http-helpers.mjs');

const here = path.dirname(fileURLToPath(import.meta.url));
const SDK_VERSION = JSON.parse(fs.readFileSync(
  path.join(here, 'node_modules/@modelcontextprotocol/sdk/package.json'), 'utf8')).version;

const FILES_ROOT = path.join(TMP, 'files');
const OUTPUT_ROOT = path.join(TMP, 'out');
fs.mkdirSync(FILES_ROOT, { recursive: true });
fs.mkdirSync(OUTPUT_ROOT, { recursive: true });
const SERVER_ARGS = ['mcp', '--images', 'stdlib,data', '--warm', '0', '--max-timeout', '30',
  '--files-root', FILES_ROOT, '--output-root', OUTPUT_ROOT];

process.on('unhandledRejection', (e) => log('unhandled rejection (ignored):', e?.message ?? e));
process.on('uncaughtException', (e) => log('uncaught exception (ignored):', e?.message ?? e));

// ---- small tools ----
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ms = (x) => Math.round(x);
const short = (s, n = 160) => {
  const t = String(s).replace(/\s+/g, ' ').trim();
  return t.length > n ? t.slice(0, n) + '…' : t;
};

function withTimeout(promise, limitMs, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${limitMs} ms`)), limitMs); }),
  ]).finally(() => clearTimeout(timer));
}

// The engine, with a deadline on every question.
const engineIds = async () => (await withTimeout(boxes(), 5000, 'engine (containers)')).map((b) => b.id);
const volumeNames = async () => (await withTimeout(volumes(), 5000, 'engine (volumes)')).map((v) => v.id);
// This installation's containers that were not there before (ids in pre).
const newBoxes = async (pre) => (await engineIds()).filter((id) => !pre.has(id));
const newVolumes = async (pre) => (await volumeNames()).filter((n) => !pre.has(n));

// Poll the engine until none of this installation's containers (other than pre) is left;
// returns ms from t0, or null after limitMs.
async function goneAfter(pre, t0, limitMs) {
  for (;;) {
    const left = await newBoxes(pre);
    const now = performance.now();
    if (left.length === 0) return now - t0;
    if (now - t0 > limitMs) return null;
    await new Promise((r) => setImmediate(r));
  }
}

const textOf = (result) => (result.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// ---- clients ----

// A server over HTTP for one check: on loopback, a port the kernel picks, a token file of
// its own; stopped (its calls cancelled) at the check's end.
async function httpServer(ctx, extra = []) {
  const server = await HttpServer.start({ args: [...SERVER_ARGS.slice(1), ...extra] });
  ctx.serverStderr = () => server.stderr.slice(-4000);
  ctx.cleanups.push(async () => { await server.close('SIGINT'); });
  return server;
}

// The official SDK client, on stdio (the default) or over Streamable HTTP.
async function sdkConnect(ctx, via = 'stdio') {
  if (via === 'http') {
    const server = await httpServer(ctx);
    const transport = new StreamableHTTPClientTransport(new URL(server.url),
      { requestInit: { headers: { Authorization: server.auth() } } });
    const c = { transport, errors: [], negotiated: null, server, closing: false };
    const setVersion = transport.setProtocolVersion.bind(transport);
    transport.setProtocolVersion = (v) => { c.negotiated = v; setVersion(v); };
    c.client = new Client({ name: 'pybox-campaign', version: '1.0.0' });
    // The SDK reports its own streams aborted as it closes: not the server's doing.
    c.client.onerror = (e) => { if (!c.closing) c.errors.push(short(e?.message ?? e, 200)); };
    c.close = async () => { c.closing = true; await c.client.close(); };
    ctx.cleanups.push(() => c.close());
    await c.client.connect(transport, { timeout: 10000 });
    return c;
  }
  const transport = new StdioClientTransport({ command: PYBOX, args: SERVER_ARGS, env: serverEnv, stderr: 'pipe' });
  const c = { transport, errors: [], negotiated: null, stderr: '' };
  transport.stderr.on('data', (d) => { c.stderr = (c.stderr + d.toString('utf8')).slice(-4000); });
  ctx.serverStderr = () => c.stderr;
  // The SDK client tells the transport the negotiated version right after initialize.
  transport.setProtocolVersion = (v) => { c.negotiated = v; };
  c.client = new Client({ name: 'pybox-campaign', version: '1.0.0' });
  c.client.onerror = (e) => c.errors.push(short(e?.message ?? e, 200));
  c.close = () => c.client.close();
  ctx.cleanups.push(async () => {
    const pid = transport.pid;
    await c.client.close(); // stdin closed, then SIGTERM, then SIGKILL (the SDK's own steps)
    if (pid) await waitPidGone(pid, 5000);
  });
  await c.client.connect(transport, { timeout: 10000 });
  return c;
}

async function waitPidGone(pid, limitMs) {
  const t0 = performance.now();
  while (performance.now() - t0 < limitMs) {
    try { process.kill(pid, 0); } catch { return true; }
    await sleep(20);
  }
  return false;
}

// A raw client: one JSON message per line, every line looked at.
class RawServer {
  constructor(ctx) {
    this.messages = [];
    this.lines = 0;
    this.badLines = [];
    this.waiters = [];
    this.stderr = '';
    this.rawBytes = [];
    this.proc = spawn(PYBOX, SERVER_ARGS, { env: serverEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, sig) => resolve({ code, sig }));
      this.proc.on('error', (e) => { this.spawnError = e; resolve({ code: null, sig: null, error: e.message }); });
    });
    // 'close' comes once stdout has been read to its end: every message is in by then.
    this.closed = new Promise((resolve) => this.proc.on('close', (code, sig) => {
      this.ended = `the server ended (exit ${code ?? sig})` + (this.stderr ? ` (server stderr: ${short(this.stderr, 200)})` : '');
      for (const w of this.waiters) w.reject(new Error(`${w.what}: not received; ${this.ended}`));
      this.waiters = [];
      resolve();
    }));
    this.proc.stdin.on('error', (e) => { this.stdinError = e.message; });
    ctx.serverStderr = () => this.stderr;
    let pending = Buffer.alloc(0);
    this.proc.stdout.on('data', (chunk) => {
      this.rawBytes.push(chunk);
      pending = Buffer.concat([pending, chunk]);
      let nl;
      while ((nl = pending.indexOf(10)) >= 0) {
        const line = pending.subarray(0, nl).toString('utf8');
        pending = pending.subarray(nl + 1);
        this.lines++;
        let msg;
        try { msg = JSON.parse(line); } catch { this.badLines.push(short(line, 80)); continue; }
        this.messages.push(msg);
        this.waiters = this.waiters.filter((w) => !(w.pred(msg) && (w.resolve(msg), true)));
      }
    });
    this.proc.stderr.on('data', (d) => { this.stderr = (this.stderr + d.toString('utf8')).slice(-4000); });
    ctx.cleanups.push(async () => {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null || this.spawnError) return;
      this.proc.stdin.end();
      if (await Promise.race([this.exited.then(() => true), sleep(10000).then(() => false)])) return;
      this.proc.kill('SIGTERM');
      if (await Promise.race([this.exited.then(() => true), sleep(5000).then(() => false)])) return;
      this.proc.kill('SIGKILL');
      await Promise.race([this.exited, sleep(2000)]);
    });
  }

  send(obj) { this.sendRaw(JSON.stringify(obj) + '\n'); }
  sendRaw(text) { this.proc.stdin.write(text); }

  next(pred, limitMs, what) {
    const seen = this.messages.find(pred);
    if (seen) return Promise.resolve(seen);
    if (this.ended) return Promise.reject(new Error(`${what}: not received; ${this.ended}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error(`${what}: not received within ${limitMs} ms` + (this.stderr ? ` (server stderr: ${short(this.stderr, 200)})` : '')));
      }, limitMs);
      const done = (m) => { clearTimeout(timer); resolve(m); };
      const fail = (e) => { clearTimeout(timer); reject(e); };
      this.waiters.push({ pred, resolve: done, reject: fail, what });
    });
  }

  reply(id, limitMs, what = `reply to ${JSON.stringify(id)}`) {
    return this.next((m) => m.id === id && (m.result !== undefined || m.error !== undefined), limitMs, what);
  }

  async initialize() {
    this.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'pybox-campaign-raw', version: '1' } } });
    const r = await this.reply('init', 10000, 'initialize');
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }

  // Close stdin; the exit and the time it took (null ms when it did not exit in time).
  async close(limitMs) {
    const t0 = performance.now();
    this.proc.stdin.end();
    const ex = await Promise.race([this.exited, sleep(limitMs).then(() => null)]);
    if (ex) await Promise.race([this.closed, sleep(2000)]);
    return ex ? { ...ex, ms: performance.now() - t0 } : { code: null, sig: null, ms: null };
  }
}

const callMsg = (id, args, token) => ({ jsonrpc: '2.0', id, method: 'tools/call',
  params: { name: 'run_python', arguments: args, ...(token !== undefined ? { _meta: { progressToken: token } } : {}) } });

// ---- the check runner ----
const observed = {
  sdk_version: SDK_VERSION,
  node_version: process.version,
  install_id: INSTALL,
  server_args: SERVER_ARGS.slice(1).map((a) => a.startsWith(TMP) ? '<tmp>' + a.slice(TMP.length) : a).join(' '),
};
const checks = [];

async function check(name, limitMs, fn) {
  const facts = [];
  const fails = [];
  const ctx = {
    cleanups: [],
    note: (s) => facts.push(s),
    want: (cond, what) => { if (!cond) fails.push(what); return !!cond; },
    pre: new Set(), preVolumes: new Set(),
  };
  const t0 = performance.now();
  log(`check: ${name}`);
  try {
    ctx.pre = new Set(await engineIds());
    ctx.preVolumes = new Set(await volumeNames());
    if (ctx.pre.size) facts.push(`${ctx.pre.size} container(s) of the installation already there, not counted`);
    await withTimeout(fn(ctx), limitMs, 'the check');
  } catch (e) {
    const said = ctx.serverStderr ? short(ctx.serverStderr(), 200) : '';
    fails.push(short(e?.message ?? e, 300) + (said && !String(e?.message).includes('stderr') ? ` (server stderr: ${said})` : ''));
  }
  for (const c of ctx.cleanups.reverse()) {
    try { await withTimeout(Promise.resolve().then(c), 20000, 'clean-up'); } catch (e) { log(`${name}: clean-up: ${e.message}`); }
  }
  const ok = fails.length === 0;
  const detail = [facts.join('; '), ok ? '' : `FAILED: ${fails.join('; ')}`].filter((x) => x).join(' | ');
  checks.push({ name, ok, detail });
  log(`${ok ? 'ok  ' : 'FAIL'} ${name} (${ms(performance.now() - t0)} ms): ${detail}`);
}

const started = performance.now();

// The checks the SDK client makes run on each transport: a check's name and what it
// observed say which (" over HTTP", "_http").
const VIAS = ['stdio', 'http'];
const named = (name, via) => (via === 'http' ? `${name} over HTTP` : name);
const key = (name, via) => (via === 'http' ? `${name}_http` : name);

for (const via of VIAS) {

// 1
await check(named('initialize and list tools', via), 30000, async (ctx) => {
  const { note, want } = ctx;
  const c = await sdkConnect(ctx, via);
  const v = c.negotiated;
  observed[key('negotiated_protocol_version', via)] = v;
  const server = c.client.getServerVersion();
  observed[key('server_info', via)] = server ? `${server.name} ${server.version}` : null;
  note(`protocol ${v} negotiated (SDK ${SDK_VERSION} asked 2025-11-25); server ${observed[key('server_info', via)]}`);
  want(v === '2025-11-25' || v === '2025-06-18', `negotiated version ${v}`);
  want(c.client.getServerCapabilities()?.tools, 'tools capability');
  const { tools } = await c.client.listTools(undefined, { timeout: 10000 });
  const tool = tools.find((t) => t.name === 'run_python');
  note(`${tools.length} tool(s): ${tools.map((t) => t.name).join(', ')}`);
  if (want(tool, 'run_python listed')) {
    const ins = tool.inputSchema || {};
    const outs = tool.outputSchema;
    note(`inputSchema ${ins.type} with ${Object.keys(ins.properties || {}).join(',')} (required ${(ins.required || []).join(',')}); ` +
      `image enum ${JSON.stringify(ins.properties?.image?.enum)}; timeout_s max ${ins.properties?.timeout_s?.maximum}`);
    want(ins.type === 'object' && ins.properties?.code, 'inputSchema is an object schema with code');
    note(outs ? `outputSchema ${outs.type} with ${Object.keys(outs.properties || {}).length} top-level properties` : 'no outputSchema');
    want(outs && outs.type === 'object', 'outputSchema present, an object schema');
  }
  want(c.errors.length === 0, `client errors: ${c.errors.join(' / ')}`);
});

// 2
await check(named('data image: CSV in, file and chart back', via), 120000, async (ctx) => {
  const { note, want } = ctx;
  const c = await sdkConnect(ctx, via);
  await c.client.listTools(undefined, { timeout: 10000 }); // the SDK validates results only for tools it has listed
  const validator = c.client.getToolOutputValidator('run_python');
  want(typeof validator === 'function', 'the SDK holds an output-schema validator for run_python');
  const csv = 'region,amount\nnorth,10\nsouth,32\nnorth,5\neast,7\n';
  const code = [
    'import pandas as pd',
    'import matplotlib',
    'matplotlib.use("Agg")',
    'import matplotlib.pyplot as plt',
    'df = pd.read_csv("/box/in/sales.csv")',
    'totals = df.groupby("region")["amount"].sum()',
    'totals.to_csv("/box/out/result.csv")',
    'totals.plot.bar()',
    'plt.tight_layout()',
    'plt.savefig("/box/out/chart.png")',
    'print("regions:", len(totals))',
  ].join('\n');
  const t0 = performance.now();
  let result;
  try {
    result = await c.client.callTool({ name: 'run_python', arguments: {
      code, image: 'data', timeout_s: 30, files: [{ name: 'sales.csv', content: csv }], return_files: true } },
    undefined, { timeout: 90000 });
  } catch (e) {
    // callTool throws when structuredContent does not match the published output schema.
    throw new Error(`callTool: ${short(e.message, 250)}`);
  }
  observed[key('data_call_ms', via)] = ms(performance.now() - t0);
  note(`call ${observed[key('data_call_ms', via)]} ms; SDK output-schema validation passed`);
  const r = result.structuredContent || {};
  const files = r.seen?.files || {};
  note(`isError ${!!result.isError}; status ${r.status}, exit ${r.exit_code}, image ${r.asked?.image?.name}, ` +
    `files ${files.status}: ${(files.returned || []).map((f) => `${f.name} ${f.bytes} B`).join(', ')}`);
  want(!result.isError, `isError: ${short(textOf(result))}`);
  want(r.status === 'TARGET_EXIT_OBSERVED' && r.exit_code === 0, 'program exited 0 by itself');
  want(r.said?.stdout?.text === 'regions: 3\n', `stdout ${JSON.stringify(r.said?.stdout?.text)}`);
  want(r.seen?.box?.confirmed_gone === true, 'box confirmed gone');
  want(validator && validator(r).valid === true, 'receipt valid against the output schema');
  const names = (files.returned || []).map((f) => f.name).sort();
  want(JSON.stringify(names) === JSON.stringify(['chart.png', 'result.csv']), `returned ${names.join(',')}`);
  const kinds = (result.content || []).map((x) => x.type);
  note(`content: ${kinds.join(',')}`);
  const inline = (result.content || []).find((x) => x.type === 'text' && x.text.startsWith('file result.csv'));
  // Inline text comes fenced: each of the program's lines starts with "  | ".
  want(inline && /\n {2}\| east,7\n {2}\| north,15\n {2}\| south,32\n/.test(inline.text), 'result.csv inline (fenced) with the grouped sums');
  const img = (result.content || []).find((x) => x.type === 'image');
  if (want(img, 'an image content block')) {
    const png = Buffer.from(img.data, 'base64');
    const magic = png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    note(`image ${img.mimeType}, ${png.length} bytes, PNG signature ${magic ? 'present' : 'absent'}`);
    want(img.mimeType === 'image/png' && magic && png.length > 1000, 'a real PNG chart');
  }
  // With --output-root every returned file is also kept, one new folder per call.
  const kept = fs.readdirSync(OUTPUT_ROOT).filter((d) => /^[0-9a-f]{16}$/.test(d))
    .flatMap((d) => fs.readdirSync(path.join(OUTPUT_ROOT, d)).map((f) => `${d}/${f}`));
  note(`kept under --output-root: ${kept.length} file(s)`);
  want(kept.some((f) => f.endsWith('/chart.png')) && kept.some((f) => f.endsWith('/result.csv')), 'files kept under the output root');
  want(c.errors.length === 0, `client errors: ${c.errors.join(' / ')}`);
});

// 3 and 4: refusals decided by the server's ceilings, before any box is built.
async function refusal(ctx, args, expect, via) {
  const c = await sdkConnect(ctx, via);
  await c.client.listTools(undefined, { timeout: 10000 });
  const since = Date.now() / 1000;
  const result = await c.client.callTool({ name: 'run_python', arguments: args }, undefined, { timeout: 20000 });
  const until = Date.now() / 1000 + 0.001;
  const t = textOf(result);
  const created = await withTimeout(createdBetween(since, until), 5000, 'engine (events)');
  ctx.note(`isError ${result.isError === true}; text "${short(t, 140)}"; containers created meanwhile: ${created.length}`);
  ctx.want(result.isError === true, 'isError true');
  ctx.want(t.includes('(set by the server)'), 'text says "(set by the server)"');
  ctx.want(expect.test(t), `text matches ${expect}`);
  ctx.want(result.structuredContent === undefined, 'no receipt (nothing ran)');
  ctx.want(created.length === 0, 'no box built');
  ctx.want((await newBoxes(ctx.pre)).length === 0, 'no container left');
}

await check(named('timeout above the ceiling refused', via), 30000, (ctx) =>
  refusal(ctx, { code: 'print(1)', timeout_s: 31 }, /timeout_s: 31 s is above the maximum of 30 s/, via));

await check(named('image not allowed refused', via), 30000, (ctx) =>
  refusal(ctx, { code: 'print(1)', image: 'gpu' }, /image: not allowed \(set by the server\); allowed: stdlib, data/, via));

// 6
await check(named('cancelled call: box gone within a second', via), 60000, async (ctx) => {
  const { note, want, pre } = ctx;
  const c = await sdkConnect(ctx, via);
  const abort = new AbortController();
  let cancelledAt = 0;
  let boxesWhenRunning = -1;
  let runningSeen;
  const running = new Promise((r) => { runningSeen = r; });
  const t0 = performance.now();
  const call = c.client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 } },
    undefined, { signal: abort.signal, timeout: 45000, onprogress: (p) => { if (p.message === 'running') runningSeen(); } });
  const outcome = call.then(() => 'answered', (e) => `rejected (${short(e?.name === 'AbortError' ? 'AbortError' : e?.message ?? e, 60)})`);
  await withTimeout(Promise.race([running, outcome.then((o) => { throw new Error(`call ended before running: ${o}`); })]),
    30000, 'progress "running"');
  boxesWhenRunning = (await newBoxes(pre)).length;
  cancelledAt = performance.now();
  abort.abort('the campaign cancels');
  const gone = await goneAfter(pre, cancelledAt, 10000);
  const settled = await withTimeout(outcome, 5000, 'the cancelled call settling');
  observed[key('cancel_to_gone_ms', via)] = gone === null ? null : ms(gone);
  const p0 = performance.now();
  let ping = 'no answer';
  try { await c.client.ping({ timeout: 5000 }); ping = `answered in ${ms(performance.now() - p0)} ms`; } catch (e) { ping = `failed: ${short(e.message, 80)}`; }
  // Close, so everything the server will ever say has reached the client.
  await c.close();
  note(`running after ${ms(cancelledAt - t0)} ms with ${boxesWhenRunning} box(es); call ${settled}; ` +
    `box gone ${gone === null ? 'NOT within 10 s' : `${ms(gone)} ms`} after the cancellation; ping ${ping}; late answers ${c.errors.length}`);
  want(boxesWhenRunning === 1, `one box while running (${boxesWhenRunning})`);
  want(settled.startsWith('rejected'), 'the call ended without a result');
  want(gone !== null && gone <= 1000, 'box gone within 1000 ms');
  want(ping.startsWith('answered'), 'ping answered');
  want(c.errors.length === 0, `no answer for the cancelled request (${c.errors.join(' / ')})`);
});

// 7
await check(named('8 calls at once', via), 120000, async (ctx) => {
  const { note, want, pre, preVolumes } = ctx;
  const c = await sdkConnect(ctx, via);
  await c.client.listTools(undefined, { timeout: 10000 });
  const t0 = performance.now();
  const results = await Promise.allSettled([...Array(8).keys()].map((i) => c.client.callTool({ name: 'run_python',
    arguments: { code: `import time\ntime.sleep(0.5)\nprint(${i})\n`, timeout_s: 25 } }, undefined, { timeout: 90000 })));
  const wall = performance.now() - t0;
  observed[key('concurrent_wall_ms', via)] = ms(wall);
  let right = 0;
  const wrong = [];
  let sumTotal = 0;
  results.forEach((res, i) => {
    if (res.status !== 'fulfilled') { wrong.push(`#${i} ${short(res.reason?.message ?? res.reason, 60)}`); return; }
    const r = res.value.structuredContent || {};
    sumTotal += r.seen?.timings_ms?.total || 0;
    if (!res.value.isError && r.status === 'TARGET_EXIT_OBSERVED' && r.exit_code === 0 && r.said?.stdout?.text === `${i}\n` &&
      r.seen?.box?.confirmed_gone === true) right++;
    else wrong.push(`#${i} ${r.status}, stdout ${JSON.stringify(r.said?.stdout?.text)}` +
      (r.error ? `, PyBox's error (${r.error.kind}): ${JSON.stringify(short(r.error.message, 300))}` : '') +
      (r.seen?.box?.confirmed_gone === false ? ', box NOT confirmed gone' : ''));
  });
  const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value.structuredContent || {});
  const runs = new Set(ok.map((r) => r.run_id)).size;
  const boxIds = new Set(ok.map((r) => r.seen?.box?.id)).size;
  const leftBoxes = await newBoxes(pre);
  const leftVolumes = await newVolumes(preVolumes);
  note(`${right}/8 receipts right (own number on stdout, exit 0, box confirmed gone); ${runs} runs, ${boxIds} boxes; ` +
    `wall ${ms(wall)} ms vs ${ms(sumTotal)} ms summed receipt totals; left in the engine: ${leftBoxes.length} containers, ${leftVolumes.length} volumes` +
    (wrong.length ? `; wrong: ${wrong.join(', ')}` : ''));
  want(right === 8, 'all 8 receipts right');
  want(runs === 8 && boxIds === 8, 'eight runs, eight boxes');
  want(leftBoxes.length === 0 && leftVolumes.length === 0, 'nothing left in the engine');
  want(c.errors.length === 0, `client errors: ${c.errors.join(' / ')}`);
});

} // each transport

// 5
await check('forged protocol message stays inside the result', 60000, async (ctx) => {
  const { note, want } = ctx;
  const s = new RawServer(ctx);
  await s.initialize();
  const fake = '{"jsonrpc":"2.0","id":1,"result":{}}';
  const N = 50;
  const code = [
    'import sys',
    `fake = ${JSON.stringify(fake)}`,
    `for _ in range(${N}):`,
    '    print(fake)',
    '    print(fake, file=sys.stderr)',
  ].join('\n');
  // Real requests use string ids, so any message with the numeric id 1 is forged.
  s.send(callMsg('forge', { code }));
  const r = await s.reply('forge', 30000);
  s.send({ jsonrpc: '2.0', id: 'ping-after', method: 'ping' });
  await s.reply('ping-after', 10000);
  const ex = await s.close(15000);
  const forged = s.messages.filter((m) => m.id === 1 || (m.id !== 'init' && m.id !== 'forge' && m.id !== 'ping-after' &&
    m.result !== undefined && JSON.stringify(m.result) === '{}')).length;
  const fromServer = s.messages.filter((m) => m.method !== undefined).length;
  const receipt = r.result?.structuredContent || {};
  const out = receipt.said?.stdout?.text || '';
  const err = receipt.said?.stderr?.text || '';
  const inOut = out.split('\n').filter((l) => l === fake).length;
  const inErr = err.split('\n').filter((l) => l === fake).length;
  const inText = (r.result?.content?.[0]?.text || '').split(fake).length - 1;
  observed.forged_messages_on_wire = forged;
  note(`${N} forged lines printed to each stream; wire: ${s.lines} lines, ${s.messages.length} messages, ` +
    `${s.badLines.length} non-JSON; forged-shape messages besides the real responses: ${forged}; server-initiated: ${fromServer}; ` +
    `inside the result: stdout ${inOut}, stderr ${inErr}, text block ${inText}; server exit ${ex.code}`);
  want(forged === 0, 'no forged message on the wire');
  want(s.badLines.length === 0 && s.lines === s.messages.length, 'every line one whole JSON message');
  want(fromServer === 0, 'no request or notification from the server');
  want(receipt.status === 'TARGET_EXIT_OBSERVED' && receipt.exit_code === 0, `status ${receipt.status}`);
  want(inOut === N && inErr === N, 'the forged lines are inside the receipt');
  want(inText >= 1, 'the forged text is inside the text block');
  want(ex.code === 0, `server exit ${ex.code}`);
});

// 8
await check('20 MiB line refused, server still answers', 60000, async (ctx) => {
  const { note, want } = ctx;
  const s = new RawServer(ctx);
  await s.initialize();
  const big = JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'ping', params: { pad: 'x'.repeat(20 * 1024 * 1024) } });
  const t0 = performance.now();
  s.sendRaw(big + '\n');
  s.send({ jsonrpc: '2.0', id: 'after', method: 'ping' });
  const refused = await s.next((m) => m.error !== undefined, 30000, 'an error for the 20 MiB line');
  const tRefused = performance.now() - t0;
  const pong = await s.reply('after', 30000);
  const tPong = performance.now() - t0;
  observed.oversize_refusal_ms = ms(tRefused);
  const ex = await s.close(15000);
  const ranBig = s.messages.filter((m) => m.id === 'big').length;
  note(`${(Buffer.byteLength(big) / 1048576).toFixed(1)} MiB line: error ${refused.error?.code} id ${JSON.stringify(refused.id)} ` +
    `"${short(refused.error?.message, 80)}" after ${ms(tRefused)} ms; ping after it ${pong.result ? 'answered' : 'refused'} at ${ms(tPong)} ms; ` +
    `answers to the big request: ${ranBig}; server exit ${ex.code}`);
  want(refused.error?.code === -32600 && refused.id === null, 'JSON-RPC error -32600 with id null');
  want(pong.result && Object.keys(pong.result).length === 0, 'ping answered');
  want(ranBig === 0, 'the oversized request was not run');
  want(ex.code === 0, `server exit ${ex.code}`);
});

// 9
await check('stdin closed: every box removed, server exits', 60000, async (ctx) => {
  const { note, want, pre, preVolumes } = ctx;
  const s = new RawServer(ctx);
  await s.initialize();
  const ids = ['long-1', 'long-2'];
  for (const id of ids) s.send(callMsg(id, { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 }, `tok-${id}`));
  for (const id of ids)
    await s.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === `tok-${id}` && m.params?.message === 'running',
      30000, `progress "running" for ${id}`);
  const running = (await newBoxes(pre)).length;
  const ex = await s.close(20000);
  observed.stdin_close_exit_ms = ex.ms === null ? null : ms(ex.ms);
  const leftBoxes = await newBoxes(pre);
  const leftVolumes = await newVolumes(preVolumes);
  const answered = s.messages.filter((m) => ids.includes(m.id)).length;
  note(`${running} boxes running, stdin closed: server exited ${ex.ms === null ? 'NOT within 20 s' : `after ${ms(ex.ms)} ms`} ` +
    `with code ${ex.code}; left in the engine: ${leftBoxes.length} containers, ${leftVolumes.length} volumes; results sent for the cancelled calls: ${answered}`);
  want(running === 2, `two boxes running before the close (${running})`);
  want(ex.ms !== null && ex.code === 0, 'server exited with 0');
  want(ex.ms !== null && ex.ms < 15000, 'exited long before the programs would have ended');
  want(leftBoxes.length === 0 && leftVolumes.length === 0, 'no container or volume of the installation remains');
  want(answered === 0, 'no result for the cancelled calls');
});

// 10: the raw checks over HTTP, each on a server of its own.
await check('over HTTP: forged protocol message stays inside the result', 60000, async (ctx) => {
  const { note, want } = ctx;
  const server = await httpServer(ctx);
  const session = await initialize(server);
  const fake = '{"jsonrpc":"2.0","id":1,"result":{}}';
  const N = 50;
  const code = ['import sys', `fake = ${JSON.stringify(fake)}`, `for _ in range(${N}):`, '    print(fake)',
    '    print("event: message\\ndata: " + fake + "\\n", file=sys.stderr)'].join('\n');
  const r = await request(server, { headers: postHeaders(server, { session }), body: JSON.stringify({ jsonrpc: '2.0',
    id: 'forge', method: 'tools/call', params: { name: 'run_python', arguments: { code }, _meta: { progressToken: 'f' } } }) });
  const events = r.text.split('\n\n').filter((e) => e !== '');
  const parsed = events.map((e) => {
    const lines = e.split('\n');
    return lines.length === 2 && lines[0] === 'event: message' && lines[1].startsWith('data: ') ? JSON.parse(lines[1].slice(6)) : null;
  });
  const bad = parsed.filter((m) => m === null).length;
  const forged = parsed.filter((m) => m && m.id === 1).length;
  const result = parsed.find((m) => m && m.id === 'forge');
  const receipt = result?.result?.structuredContent || {};
  const inOut = (receipt.said?.stdout?.text || '').split('\n').filter((l) => l === fake).length;
  note(`status ${r.status} ${r.headers['content-type']}; ${events.length} events (${bad} not one whole message), ` +
    `forged on the wire ${forged}; forged lines inside the receipt: ${inOut}`);
  want(r.status === 200 && String(r.headers['content-type']).startsWith('text/event-stream'), 'an SSE answer');
  want(bad === 0, 'every event one message');
  want(forged === 0, 'no forged message on the wire');
  want(parsed.filter((m) => m && m.id !== undefined).length === 1, 'one result, the request\'s');
  want(inOut === N, 'the forged lines are inside the receipt');
});

await check('over HTTP: no token, a wrong one, a forged Origin, a 20 MiB body refused; the server still answers', 60000, async (ctx) => {
  const { note, want } = ctx;
  const server = await httpServer(ctx);
  const session = await initialize(server);
  const ping = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
  const headers = postHeaders(server, { session });
  const noAuth = { ...headers };
  delete noAuth.Authorization;
  const got = {
    'no token': (await request(server, { headers: noAuth, body: ping })).status,
    'a wrong token': (await request(server, { headers: { ...headers, Authorization: `Bearer ${'0'.repeat(64)}` }, body: ping })).status,
    'a forged Origin': (await request(server, { headers: { ...headers, Origin: 'http://evil.example' }, body: ping })).status,
    'a 20 MiB body': (await request(server, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping',
      params: { pad: 'x'.repeat(20 * 1024 * 1024) } }) }).catch((e) => ({ status: e.code }))).status,
  };
  const after = (await request(server, { headers, body: ping })).status;
  observed.http_refusals = got;
  note(`${Object.entries(got).map(([k, v]) => `${k}: ${v}`).join(', ')}; a ping after them: ${after}; ` +
    `refusals logged: ${server.logLines('refused').length}`);
  want(got['no token'] === 401 && got['a wrong token'] === 401, '401 without the right token');
  want(got['a forged Origin'] === 403, '403 for the forged Origin');
  want(got['a 20 MiB body'] === 413 || got['a 20 MiB body'] === 'EPIPE' || got['a 20 MiB body'] === 'ECONNRESET',
    '413 (or the connection closed) for the body');
  want(after === 200, 'ping answered after');
});

await check('over HTTP: SIGINT while boxes run: every box removed, server exits', 60000, async (ctx) => {
  const { note, want, pre, preVolumes } = ctx;
  const server = await httpServer(ctx);
  const session = await initialize(server);
  const pending = ['long-1', 'long-2'].map((id) => request(server, { headers: postHeaders(server, { session }),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_python',
      arguments: { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 } } }) }).catch((e) => ({ status: e.code })));
  const t0 = performance.now();
  while ((await newBoxes(pre)).length < 2 && performance.now() - t0 < 30000) await sleep(20);
  const running = (await newBoxes(pre)).length;
  const t1 = performance.now();
  const ex = await server.stop('SIGINT', 20000).catch(() => null);
  const exitMs = ms(performance.now() - t1);
  const answers = await Promise.all(pending);
  const leftBoxes = await newBoxes(pre);
  const leftVolumes = await newVolumes(preVolumes);
  observed.http_sigint_exit_ms = exitMs;
  note(`${running} boxes running; SIGINT: exit ${ex ? ex.code : 'NOT within 20 s'} after ${exitMs} ms; answers ` +
    `${answers.map((a) => a.status).join(', ')}; left in the engine: ${leftBoxes.length} containers, ${leftVolumes.length} volumes`);
  want(running === 2, `two boxes running (${running})`);
  want(ex && ex.code === 0, 'server exited with 0');
  want(leftBoxes.length === 0 && leftVolumes.length === 0, 'no container or volume of the installation remains');
});

observed.leftover_containers_at_end = (await engineIds().catch(() => [null])).length;
observed.leftover_volumes_at_end = (await volumeNames().catch(() => [null])).length;
observed.checks_passed = checks.filter((c) => c.ok).length;
observed.checks_total = checks.length;
observed.driver_ms = ms(performance.now() - started);

process.stdout.write(JSON.stringify({ observed, checks }) + '\n', () => process.exit(0));
