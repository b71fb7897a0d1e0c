// SPDX-License-Identifier: MIT
// Scale-out, the measured half: what one call of pybox mcp --listen costs on this machine, and the latencies it gives N clients at once; campaign/scale/model.py takes both (docs/scale-out.md).
//
// Run from the repository root: node campaign/scale/measure.mjs > measured.json, with
// PYBOX_BIN (absolute), PYBOX_HOME (an installation with the stdlib image pinned),
// PYBOX_BACKEND (native by default), SCALE_CALLS (calls per client per load, default 40),
// SCALE_LOADS (default "1,2,4,8"). One server on loopback with a token file of its own;
// clients speak raw HTTP (tests/mcp/http-link.mjs), each a closed loop: its next call as
// soon as its last result came, no think time.
//
// 1. Each kind of call alone (one client), SCALE_CALLS times: its latency as the client
//    sees it (the POST to the last byte of the result), the CPU the server and its boxes
//    spent on it (from /proc/PID/stat: the server's threads and its reaped children,
//    which is every box's processes on the native backend, so other work on a shared
//    machine does not count), the box's peak memory from the receipt.
// 2. The mix (kinds in their shares, in a fixed order per client) at each load: every
//    call's latency, calls per second, and the CPU per call again.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = (...a) => console.error('[scale]', ...a);
const PYBOX = process.env.PYBOX_BIN;
const HOME = process.env.PYBOX_HOME;
if (!PYBOX || !path.isAbsolute(PYBOX) || !HOME) {
  console.error('measure: give PYBOX_BIN (absolute) and PYBOX_HOME');
  process.exit(2);
}
const BACKEND = process.env.PYBOX_BACKEND || 'native';
const CALLS = Number(process.env.SCALE_CALLS || 40);
const LOADS = (process.env.SCALE_LOADS || '1,2,4,8').split(',').map(Number);
process.env.PYBOX_BACKEND = BACKEND;
process.env.PYBOX_TEST_INSTALL_ID = fs.readFileSync(path.join(HOME, 'install-id'), 'utf8').trim();
const { HttpServer } = await import('../../tests/mcp/http-helpers.mjs');
const { HttpLink } = await import('../../tests/mcp/http-link.mjs');

// The kinds of call an agent sends, with their share of the mix: a quick answer, a
// computation of about a tenth of a second, a program that holds memory and writes
// output. Each prints its own number, so an answer that went to the wrong call shows.
const KINDS = [
  { kind: 'print', share: 0.6, code: (n) => `print(${n})` },
  { kind: 'compute', share: 0.3, code: (n) => `s = sum(i * i for i in range(2000000))\nprint(${n})` },
  { kind: 'memory', share: 0.1, code: (n) => `b = bytearray(48 << 20)\nprint("x" * 20000)\nprint(${n})` },
];

const TICK = 1000 / 100; // ms per clock tick (USER_HZ is 100 on Linux)
// The whole machine's busy time (ms, all cores), from /proc/stat: what others on a shared
// machine use meanwhile is this less ours.
function machineBusyMs() {
  const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: busy is all but idle and iowait
  return (cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7]) * TICK;
}
// This process's CPU (the clients), ms.
const clientMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
function cpuMs(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  // utime stime cutime cstime: fields 14 to 17 of the line, 12 to 15 after the name
  return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK;
}

// Every client has a session of its own: 1 + 3 + the loads' clients.
const server = await HttpServer.start({ args: ['--backend', BACKEND, '--images', 'stdlib', '--max-timeout', '30',
  '--max-calls', '64', '--max-connections', '256', '--max-http-sessions', String(4 + LOADS.reduce((a, b) => a + b, 0))] });
const pid = server.proc.pid;
const pending = new Map();
let nextId = 0;
const links = [];
function newLink() {
  const link = new HttpLink({ url: server.url, token: server.tokens.alice, tap: (m) => {
    const w = pending.get(m.id);
    if (w && (m.result !== undefined || m.error !== undefined)) { pending.delete(m.id); w(m); }
  } });
  links.push(link);
  return link;
}
async function initialize(link) {
  const got = new Promise((r) => pending.set('init', r));
  await link.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'pybox-scale', version: '1' } } });
  let timer;
  await Promise.race([got, new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no session: ${JSON.stringify(link.statuses)}; ${server.stderr.slice(-300)}`)), 10000);
  })]);
  clearTimeout(timer);
  await link.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
}
// One call: its latency (ms) and what its receipt says; wrong when the answer is not its own.
async function call(link, kind) {
  const id = `c${nextId++}`;
  const n = nextId;
  const got = new Promise((r) => pending.set(id, r));
  const t0 = performance.now();
  await link.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_python',
    arguments: { code: kind.code(n), timeout_s: 20 } } });
  const m = await got;
  const ms = performance.now() - t0;
  const r = m.result?.structuredContent;
  const ok = r?.status === 'TARGET_EXIT_OBSERVED' && (r.said?.stdout?.text || '').endsWith(`${n}\n`);
  const why = ok ? null : `${id} ${kind.kind}: ${r ? `${r.status} exit ${r.exit_code} stdout ${JSON.stringify((r.said?.stdout?.text || '').slice(-40))}`
    + (r.error ? ` error ${JSON.stringify(r.error).slice(0, 200)}` : '') : JSON.stringify(m).slice(0, 300)}`;
  return { ms, ok, why, kind: kind.kind, total_ms: r?.seen?.timings_ms?.total ?? null,
    peak: r?.seen?.kernel?.final?.memory_peak_bytes ?? null, box_cpu_ms: r ? (r.seen?.kernel?.final?.cpu_ns ?? 0) / 1e6 : null };
}

const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
const r1 = (x) => Math.round(x * 10) / 10;
const out = { machine: { cpus: os.cpus().length, memory_mib: Math.round(os.totalmem() / 1048576), model: os.cpus()[0]?.model,
  backend: BACKEND, kernel: os.release() }, calls_per_client: CALLS, kinds: {}, loads: [] };

// A few calls first: images in the page cache, the server's threads made.
{
  const link = newLink();
  await initialize(link);
  for (let i = 0; i < 5; i++) await call(link, KINDS[0]);
}

// 1. each kind alone
for (const kind of KINDS) {
  const link = newLink();
  await initialize(link);
  const c0 = cpuMs(pid), k0 = clientMs(), b0 = machineBusyMs();
  const t0 = performance.now();
  const res = [];
  for (let i = 0; i < CALLS; i++) res.push(await call(link, kind));
  const wall = performance.now() - t0;
  const cpu = cpuMs(pid) - c0, client = clientMs() - k0, busy = machineBusyMs() - b0;
  const lat = res.map((r) => r.ms);
  out.kinds[kind.kind] = { share: kind.share, calls: CALLS, wrong: res.filter((r) => !r.ok).length,
    wrong_said: res.filter((r) => !r.ok).slice(0, 5).map((r) => r.why),
    cpu_ms_per_call: r1(cpu / CALLS), client_cpu_ms_per_call: r1(client / CALLS),
    others_cores: r1(Math.max(0, busy - cpu - client) / wall * 100) / 100, latency_ms: { mean: r1(mean(lat)), p50: r1(pct(lat, 0.5)), p99: r1(pct(lat, 0.99)) },
    receipt_total_ms_mean: r1(mean(res.map((r) => r.total_ms))), box_cpu_ms_mean: r1(mean(res.map((r) => r.box_cpu_ms))),
    memory_peak_mib_max: r1(Math.max(...res.map((r) => r.peak || 0)) / 1048576), wall_ms: Math.round(wall) };
  log(kind.kind, JSON.stringify(out.kinds[kind.kind]));
}

// 2. the mix at each load: client k runs the kinds in a fixed order drawn by their shares
const order = [];
for (const k of KINDS) for (let i = 0; i < Math.round(k.share * 10); i++) order.push(k);
for (const load of LOADS) {
  const clients = [];
  for (let i = 0; i < load; i++) {
    const link = newLink();
    await initialize(link);
    clients.push(link);
  }
  const c0 = cpuMs(pid), k0 = clientMs(), b0 = machineBusyMs();
  const t0 = performance.now();
  const res = [];
  await Promise.all(clients.map(async (link, ci) => {
    for (let i = 0; i < CALLS; i++) res.push(await call(link, order[(i * 7 + ci * 3) % order.length]));
  }));
  const wall = performance.now() - t0;
  const cpu = cpuMs(pid) - c0, client = clientMs() - k0, busy = machineBusyMs() - b0;
  const lat = res.map((r) => r.ms);
  const entry = { clients: load, calls: res.length, wrong: res.filter((r) => !r.ok).length,
    wrong_said: res.filter((r) => !r.ok).slice(0, 5).map((r) => r.why), wall_ms: Math.round(wall),
    calls_per_s: r1(res.length / (wall / 1000)), cpu_ms_per_call: r1(cpu / res.length),
    client_cpu_ms_per_call: r1(client / res.length), others_cores: r1(Math.max(0, busy - cpu - client) / wall * 100) / 100,
    latency_ms: { mean: r1(mean(lat)), p50: r1(pct(lat, 0.5)), p90: r1(pct(lat, 0.9)), p99: r1(pct(lat, 0.99)) },
    by_kind: Object.fromEntries(KINDS.map((k) => {
      const l = res.filter((r) => r.kind === k.kind).map((r) => r.ms);
      return [k.kind, { calls: l.length, mean: r1(mean(l)), p99: r1(pct(l, 0.99)) }];
    })) };
  out.loads.push(entry);
  log(`load ${load}:`, JSON.stringify(entry));
}

for (const l of links) l.close();
const ex = await server.close('SIGTERM');
out.server_exit = ex;
out.calls_logged = server.logLines('call').length;
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
