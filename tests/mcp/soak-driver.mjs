// SPDX-License-Identifier: MIT
// Soak: many mixed `pybox exec` runs a few at once, then many MCP calls with 8 in flight, some cancelled, pings between, on stdio or over HTTP; counts what went wrong and what was left, and watches the server's memory and descriptors.
//
// Contract (a campaign driver, docs/campaign.md): run from the repository root as `node
// tests/mcp/soak-driver.mjs [--transport stdio|http] [--runs N]` with PYBOX_BIN
// (absolute), PYBOX_HOME (the installation: images pinned), PYBOX_CAMPAIGN_TMP (an empty
// scratch folder), PYBOX_BACKEND (docker, the default, or native: passed to every pybox
// command), SOAK_RUNS (default 500; --runs wins), SOAK_MCP (default 300), SOAK_PARALLEL
// (exec runs at once, default 4), SOAK_TRANSPORT (stdio, the default, or http: pybox mcp
// --listen on loopback with a token file, every call a POST; --transport wins). Stdout:
// one JSON object {"observed", "checks"}; logs on stderr. Exit 0 when it ran to the end,
// whatever the checks say; 2 when it could not run.
//
// Counted: a wrong exit code or status word, a receipt that does not parse, a run or
// call id lost (never answered) or duplicated (answered twice, or two runs with one run
// id), a cancelled call answered; what the runs left (boxes, volumes, the boxes' cgroups,
// native cgroup leaves and staging folders, run notes, uid leases of these runs); the
// server's resident memory and open descriptors after every 50 calls, with nothing in
// flight (flat: every reading within 20% of the one after the first 50).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProcessTransport } from './stdio-process.mjs';
import { HttpLink } from './http-link.mjs';
import { added, ensureStdlib, installIdOf, nativeParents, snapshot } from './install.mjs';

const log = (...a) => console.error('[soak]', ...a);
console.log = (...a) => console.error(...a); // stdout carries the one JSON object only
const cannotRun = (why) => { console.error(`soak-driver: cannot run: ${why}`); process.exit(2); };

const PYBOX = process.env.PYBOX_BIN;
const HOME = process.env.PYBOX_HOME;
const TMP = process.env.PYBOX_CAMPAIGN_TMP;
const BACKEND = process.env.PYBOX_BACKEND || 'docker';
const num = (name, dflt, min) => {
  const v = process.env[name] === undefined || process.env[name] === '' ? dflt : Number(process.env[name]);
  if (!Number.isInteger(v) || v < min) cannotRun(`${name}: give a whole number of at least ${min}`);
  return v;
};
const argOf = (name) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : undefined; };
if (argOf('--runs') !== undefined) process.env.SOAK_RUNS = argOf('--runs');
const TRANSPORT = argOf('--transport') || process.env.SOAK_TRANSPORT || 'stdio';
if (!['stdio', 'http'].includes(TRANSPORT)) cannotRun(`transport ${TRANSPORT}: give stdio or http`);
const RUNS = num('SOAK_RUNS', 500, 0);
const CALLS = num('SOAK_MCP', 300, 0);
const PARALLEL = num('SOAK_PARALLEL', 4, 1);
const IN_FLIGHT = 8;
const SAMPLE_EVERY = 50;
if (!PYBOX || !path.isAbsolute(PYBOX)) cannotRun('PYBOX_BIN must be the absolute path of the pybox binary');
if (!HOME || !path.isAbsolute(HOME)) cannotRun('PYBOX_HOME must be an absolute path');
if (!TMP || !fs.existsSync(TMP) || !fs.statSync(TMP).isDirectory()) cannotRun('PYBOX_CAMPAIGN_TMP must be an existing folder');
if (!['docker', 'native'].includes(BACKEND)) cannotRun(`PYBOX_BACKEND=${BACKEND}: give docker or native`);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const env = { PATH: process.env.PATH, PYBOX_HOME: HOME };
if (process.env.DOCKER_HOST) env.DOCKER_HOST = process.env.DOCKER_HOST;
let INSTALL;
try {
  ensureStdlib(PYBOX, env, BACKEND, REPO);
  INSTALL = installIdOf(HOME);
} catch (e) {
  cannotRun(`the installation in ${HOME}: ${e.message}`);
}

const observed = { backend: BACKEND, transport: TRANSPORT, install_id: INSTALL, exec_runs: RUNS, exec_parallel: PARALLEL, mcp_calls: CALLS, mcp_in_flight: IN_FLIGHT };
const checks = [];
const check = (name, ok, detail) => { checks.push({ name, ok: !!ok, detail }); log(`${ok ? 'ok  ' : 'FAIL'} ${name}: ${detail}`); };
const ms = (x) => Math.round(x);
const median = (v) => { const s = [...v].sort((a, b) => a - b); return s.length ? s[Math.floor(s.length / 2)] : null; };
const runIds = new Set();
// The Docker boxes' cgroups as their receipts name them (seen.kernel.cgroup.path: where
// PyBox read the kernel's readings, found from the engine's answer): none may outlive its box.
const boxCgroups = new Set();
const docker = BACKEND === 'docker';
const before = await snapshot({ home: HOME, installId: INSTALL, docker });
const parentsBefore = new Set(nativeParents(HOME));

// ---- part 1: pybox exec ----

// Each kind: the arguments, the program, and what its receipt must say.
const OUT_ROOT = path.join(TMP, 'out');
fs.mkdirSync(OUT_ROOT, { recursive: true });
const kinds = [
  { kind: 'clean exit', program: 'print("soak")\n', exit: 0, status: 'TARGET_EXIT_OBSERVED',
    more: (r) => r.said?.stdout?.text === 'soak\n' || 'stdout' },
  { kind: 'traceback', program: 'raise RuntimeError("soak")\n', exit: 1, status: 'TARGET_EXIT_OBSERVED',
    more: (r) => (r.said?.stderr?.text || '').includes('RuntimeError: soak') || 'no traceback on stderr' },
  { kind: 'deadline', args: ['--timeout', '0.3'], program: 'import time\ntime.sleep(30)\n', exit: 124, status: 'SUPERVISOR_KILL_OBSERVED' },
  { kind: 'OOM child', args: ['--memory', '64M'], exit: 0, status: 'TARGET_EXIT_OBSERVED',
    program: 'import subprocess, sys\np = subprocess.run([sys.executable, "-c", "b = bytearray(160 << 20)"])\nprint(p.returncode)\n',
    more: (r) => (r.said?.stdout?.text === '-9\n' && r.seen?.oom?.kernel_oom_kills >= 1) || `stdout ${JSON.stringify(r.said?.stdout?.text)}, oom ${JSON.stringify(r.seen?.oom)}` },
  { kind: 'fork burst', args: ['--pids', '16', '--timeout', '5'], exit: 0, status: 'TARGET_EXIT_OBSERVED',
    program: 'import os, time\nok = bad = 0\nfor i in range(40):\n    try:\n        if os.fork() == 0:\n            time.sleep(0.2)\n            os._exit(0)\n        ok += 1\n    except OSError:\n        bad += 1\nprint(ok, bad)\n',
    more: (r) => r.seen?.kernel?.final?.pids_refused >= 1 || `no refused fork counted (${JSON.stringify(r.seen?.kernel?.final)})` },
  { kind: '100 KB of output', program: 'import sys\nsys.stdout.write("x" * 102400)\n', exit: 0, status: 'TARGET_EXIT_OBSERVED',
    more: (r) => (r.said?.stdout?.total_bytes === 102400 && r.said?.stdout?.truncated === true) || `stdout ${JSON.stringify({ ...r.said?.stdout, text: undefined })}` },
  { kind: 'files out', out: true, exit: 0, status: 'TARGET_EXIT_OBSERVED',
    program: 'for n in ("a.txt", "b.csv", "c.bin"):\n    open("/box/out/" + n, "w").write(n * 100)\n',
    more: (r, dir) => {
      const got = fs.existsSync(dir) ? fs.readdirSync(dir).sort().join(',') : '(none)';
      return (r.seen?.files?.status === 'delivered' && got === 'a.txt,b.csv,c.bin') || `files ${r.seen?.files?.status}: ${got}`;
    } },
];

function execOnce(i) {
  const k = kinds[i % kinds.length];
  const args = ['exec', '--json', '--backend', BACKEND, ...(k.args || [])];
  const dir = path.join(OUT_ROOT, `run-${i}`);
  if (k.out) args.push('--output', dir);
  return new Promise((resolve) => {
    const t0 = performance.now();
    const p = spawn(PYBOX, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [], err = [];
    p.stdout.on('data', (c) => out.push(c));
    p.stderr.on('data', (c) => err.push(c));
    p.on('close', (code, sig) => {
      resolve({ i, k, dir, code: code ?? 128 + (sig ? 9 : 0), wall: performance.now() - t0,
        out: Buffer.concat(out).toString('utf8'), err: Buffer.concat(err).toString('utf8').slice(-500) });
    });
    p.stdin.on('error', () => {});
    p.stdin.end(k.program);
  });
}

const exec = { wrong_exit: 0, wrong_status: 0, unparsable: 0, wrong_other: 0, duplicate_run_ids: 0, wrong: [], by_kind: {} };
const tExec = performance.now();
{
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= RUNS) return;
      const r = await execOnce(i);
      const bk = exec.by_kind[r.k.kind] || (exec.by_kind[r.k.kind] = { runs: 0, wrong: 0, wall_ms: [] });
      bk.runs++;
      bk.wall_ms.push(r.wall);
      let rec;
      try { rec = JSON.parse(r.out); } catch { rec = null; }
      const bad = (what) => { bk.wrong++; if (exec.wrong.length < 8) exec.wrong.push(`#${i} ${r.k.kind}: ${what}`); };
      if (rec === null || typeof rec !== 'object') {
        exec.unparsable++;
        bad(`receipt does not parse (exit ${r.code}; ${r.err.trim().slice(-160)})`);
        continue;
      }
      if (rec.run_id) {
        if (runIds.has(rec.run_id)) { exec.duplicate_run_ids++; bad(`run id ${rec.run_id} seen twice`); }
        runIds.add(rec.run_id);
      }
      if (rec.seen?.kernel?.cgroup?.path) boxCgroups.add(rec.seen.kernel.cgroup.path);
      if (r.code !== r.k.exit || rec.exit_code !== r.k.exit) {
        exec.wrong_exit++;
        bad(`exit ${r.code} (receipt ${rec.exit_code}), not ${r.k.exit}` + (rec.error?.message ? `: ${rec.error.message.slice(0, 200)}` : ''));
      }
      if (rec.status !== r.k.status) { exec.wrong_status++; bad(`status ${rec.status}, not ${r.k.status}`); }
      const more = r.k.more ? r.k.more(rec, r.dir) : true;
      if (more !== true) { exec.wrong_other++; bad(more); }
      if (rec.seen?.box?.confirmed_gone !== true) { exec.wrong_other++; bad('box not confirmed gone'); }
      if ((i + 1) % 100 === 0) log(`exec: ${i + 1}/${RUNS}`);
    }
  };
  await Promise.all([...Array(PARALLEL)].map(worker));
}
observed.exec_s = Math.round((performance.now() - tExec) / 100) / 10;
observed.exec_runs_per_s = RUNS ? Math.round(RUNS / ((performance.now() - tExec) / 1000) * 10) / 10 : 0;
observed.exec_wrong_exit = exec.wrong_exit;
observed.exec_wrong_status = exec.wrong_status;
observed.exec_unparsable = exec.unparsable;
observed.exec_duplicate_run_ids = exec.duplicate_run_ids;
observed.exec_wrong_other = exec.wrong_other;
observed.exec_kinds = Object.fromEntries(Object.entries(exec.by_kind).map(([k, v]) => [k, { runs: v.runs, wrong: v.wrong, median_wall_ms: ms(median(v.wall_ms)) }]));
const execOk = exec.wrong_exit + exec.wrong_status + exec.unparsable + exec.duplicate_run_ids + exec.wrong_other === 0 && runIds.size === RUNS;
check(`${RUNS} pybox exec runs, ${PARALLEL} at once`, execOk,
  `${kinds.length} kinds (${kinds.map((k) => k.kind).join(', ')}) in ${observed.exec_s} s; wrong exit codes ${exec.wrong_exit}, ` +
  `wrong status words ${exec.wrong_status}, unparsable receipts ${exec.unparsable}, other wrong findings ${exec.wrong_other}, ` +
  `${runIds.size} distinct run ids (duplicated ${exec.duplicate_run_ids})` + (exec.wrong.length ? `; ${exec.wrong.join('; ')}` : ''));

// ---- part 2: the MCP server ----

const threadsOf = (pid) => fs.readdirSync(`/proc/${pid}/task`).length;
// Until the server has no call in progress: its threads back to the idle count (a
// cancelled call's worker still removes its box after the client has moved on).
async function quiesce(pid, idle, limitMs) {
  const t0 = performance.now();
  while (threadsOf(pid) > idle) {
    if (performance.now() - t0 > limitMs) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

// The server's resident memory (KiB) and open descriptors, from /proc.
function usage(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number((status.match(/^VmRSS:\s+(\d+) kB/m) || [])[1]);
  return { rss_kib: rss, fds: fs.readdirSync(`/proc/${pid}/fd`).length };
}

const mcp = { answered: new Map(), progress: new Map(), lost: 0, duplicated: 0, answered_cancelled: 0, wrong: 0, wrong_list: [],
  duplicate_run_ids: 0, pings: 0, pings_answered: 0, ping_ms: [], samples: [], cancelled: 0 };
const waiters = new Map(); // id -> resolve
const progressWaiters = new Map(); // token -> resolve (on "running")
const stray = [];
const tap = (m) => {
  if (m.id !== undefined && (m.result !== undefined || m.error !== undefined)) {
    mcp.answered.set(m.id, (mcp.answered.get(m.id) || 0) + 1);
    const w = waiters.get(m.id);
    if (w) { waiters.delete(m.id); w(m); }
  } else if (m.method === 'notifications/progress') {
    const t = m.params?.progressToken;
    if (m.params?.message === 'running') { const w = progressWaiters.get(t); if (w) { progressWaiters.delete(t); w(); } }
  } else if (stray.length < 5) {
    stray.push(JSON.stringify(m).slice(0, 120));
  }
};
const serverArgs = ['--backend', BACKEND, '--images', 'stdlib', '--warm', '0', '--max-timeout', '10'];
// The server: on stdio, the transport's own process; over HTTP, pybox mcp --listen on
// loopback with a token file of its own (http-helpers.mjs reads the installation from the
// environment), each message a POST of its own.
let transport, httpServer = null, link = null;
if (TRANSPORT === 'stdio') {
  transport = new ProcessTransport({ command: PYBOX, args: ['mcp', ...serverArgs], env, tap });
} else {
  process.env.PYBOX_TEST_INSTALL_ID = INSTALL;
  process.env.PYBOX_BACKEND = BACKEND;
  const { HttpServer } = await import('./http-helpers.mjs');
  transport = {
    start: async () => {
      httpServer = await HttpServer.start({ args: serverArgs, env });
      link = new HttpLink({ url: httpServer.url, token: httpServer.tokens.alice, tap });
    },
    get pid() { return httpServer?.proc.pid; },
    get stderr() { return httpServer?.stderr ?? ''; },
    get proc() { return httpServer?.proc; },
  };
}
const send = (m) => (link ? link.send(m) : transport.send(m));
const reply = (id, limitMs) => new Promise((resolve) => {
  const timer = setTimeout(() => { waiters.delete(id); resolve(null); }, limitMs);
  waiters.set(id, (m) => { clearTimeout(timer); resolve(m); });
});
const running = (token, limitMs) => new Promise((resolve) => {
  const timer = setTimeout(() => { progressWaiters.delete(token); resolve(false); }, limitMs);
  progressWaiters.set(token, () => { clearTimeout(timer); resolve(true); });
});

// Call i: its own number printed back, so crossed answers show; every tenth is
// cancelled once it runs.
function callSpec(i) {
  if (i % 10 === 5) return { cancel: true, args: { code: 'import time\ntime.sleep(8)\n', timeout_s: 9 } };
  switch (i % 4) {
    case 0: return { args: { code: `print(${i})` }, status: 'TARGET_EXIT_OBSERVED', exit: 0, stdout: `${i}\n` };
    case 1: return { args: { code: `print(${i})\nraise SystemExit(3)` }, status: 'TARGET_EXIT_OBSERVED', exit: 3, stdout: `${i}\n` };
    case 2: return { args: { code: `import time\ntime.sleep(0.2)\nprint(${i})` }, status: 'TARGET_EXIT_OBSERVED', exit: 0, stdout: `${i}\n` };
    // The deadline leaves Python a second to start and print, however loaded the machine.
    default: return { args: { code: `import time\nprint(${i}, flush=True)\ntime.sleep(5)`, timeout_s: 1 }, status: 'SUPERVISOR_KILL_OBSERVED', exit: 124, stdout: `${i}\n` };
  }
}

const mcpRunIds = new Set();
async function callOnce(i) {
  const s = callSpec(i);
  const id = `call-${i}`;
  const got = reply(id, 60000);
  const isRunning = s.cancel ? running(`tok-${i}`, 30000) : null;
  await send({ jsonrpc: '2.0', id, method: 'tools/call',
    params: { name: 'run_python', arguments: s.args, ...(s.cancel ? { _meta: { progressToken: `tok-${i}` } } : {}) } });
  if (s.cancel) {
    mcp.cancelled++;
    if (!(await isRunning)) { mcp.wrong++; mcp.wrong_list.push(`${id}: never running`); }
    await send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'soak' } });
    // Nothing may come for it; the ping after it is answered once the cancel was read.
    return;
  }
  const m = await got;
  if (m === null) return; // counted as lost below
  const r = m.result?.structuredContent;
  const why = !r ? `no receipt (${JSON.stringify(m.error || m.result?.content?.[0]?.text || '').slice(0, 100)})`
    : r.status !== s.status ? `status ${r.status}` : r.exit_code !== s.exit ? `exit ${r.exit_code}`
      : r.said?.stdout?.text !== s.stdout ? `stdout ${JSON.stringify(r.said?.stdout?.text)} (crossed?)`
        : r.seen?.box?.confirmed_gone !== true ? 'box not confirmed gone' : null;
  if (r?.run_id) {
    if (mcpRunIds.has(r.run_id) || runIds.has(r.run_id)) mcp.duplicate_run_ids++;
    mcpRunIds.add(r.run_id);
  }
  if (r?.seen?.kernel?.cgroup?.path) boxCgroups.add(r.seen.kernel.cgroup.path);
  if (why) { mcp.wrong++; if (mcp.wrong_list.length < 8) mcp.wrong_list.push(`${id}: ${why}`); }
}

const tMcp = performance.now();
let serverExit = null;
if (CALLS > 0) {
  try {
    await transport.start();
    await send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'pybox-soak', version: '1' } } });
    const init = reply('init', 30000);
    if (!(await init)) throw new Error(`no answer to initialize; server stderr: ${transport.stderr.slice(-300)}`);
    await send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const idleThreads = threadsOf(transport.pid);
    observed.server_idle_threads = idleThreads;
    let next = 0, pingN = 0;
    // Blocks of 50 with 8 in flight; between blocks nothing is in flight and the
    // server's memory and descriptors are read.
    for (let block = 0; block * SAMPLE_EVERY < CALLS; block++) {
      const end = Math.min(CALLS, (block + 1) * SAMPLE_EVERY);
      const worker = async () => {
        for (;;) {
          const i = next++;
          if (i >= end) { next = Math.max(next, end); return; }
          await callOnce(i);
          // A ping after every fifth call, answered while others run.
          if (i % 5 === 4) {
            const pid = `ping-${pingN++}`;
            const t = performance.now();
            const p = reply(pid, 10000);
            mcp.pings++;
            await send({ jsonrpc: '2.0', id: pid, method: 'ping' });
            if (await p) { mcp.pings_answered++; mcp.ping_ms.push(performance.now() - t); }
          }
        }
      };
      await Promise.all([...Array(IN_FLIGHT)].map(worker));
      next = end;
      if (!(await quiesce(transport.pid, idleThreads, 30000))) throw new Error(`calls still in progress 30 s after block ${block + 1}`);
      // The reader joins finished calls whenever a line comes in: a ping, then read.
      const settled = reply(`settle-${block}`, 10000);
      await send({ jsonrpc: '2.0', id: `settle-${block}`, method: 'ping' });
      if (!(await settled)) throw new Error('no answer to a ping between blocks');
      mcp.samples.push({ after: end, ...usage(transport.pid) });
      log(`mcp: ${end}/${CALLS}, server ${JSON.stringify(mcp.samples.at(-1))}`);
    }
    // A cancelled call's answer, if one came anyway, has had every chance by now: the
    // last ping was answered after its cancellation was read.
    if (link) {
      // Over HTTP the end is SIGTERM: nothing is in flight, so the drain is immediate.
      const ex = await httpServer.stop('SIGTERM', 30000).then((e) => ({ ...e, byItself: true }),
        () => ({ code: null, signal: 'SIGKILL', byItself: false }));
      serverExit = ex;
      observed.http_statuses = link.statuses;
      observed.http_errors = link.errors.slice(0, 5);
      if (link.errors.length) check('no HTTP transport error', false, link.errors.slice(0, 5).join('; '));
      link.close();
      fs.rmSync(httpServer.folder.dir, { recursive: true, force: true });
    } else {
      transport.endInput();
      serverExit = await transport.waitExit(30000);
    }
  } catch (e) {
    check('the MCP part ran to its end', false, `${String(e?.message ?? e).slice(0, 300)}`);
    transport.proc?.kill('SIGKILL');
    if (httpServer) fs.rmSync(httpServer.folder.dir, { recursive: true, force: true });
  }
}
for (let i = 0; i < CALLS; i++) {
  const n = mcp.answered.get(`call-${i}`) || 0;
  const cancelled = callSpec(i).cancel;
  if (cancelled && n > 0) mcp.answered_cancelled++;
  if (!cancelled && n === 0) mcp.lost++;
  if (n > 1) mcp.duplicated++;
}
observed.mcp_s = Math.round((performance.now() - tMcp) / 100) / 10;
observed.mcp_lost_ids = mcp.lost;
observed.mcp_duplicated_ids = mcp.duplicated;
observed.mcp_cancelled = mcp.cancelled;
observed.mcp_answered_though_cancelled = mcp.answered_cancelled;
observed.mcp_wrong_results = mcp.wrong;
observed.mcp_duplicate_run_ids = mcp.duplicate_run_ids;
observed.mcp_pings = mcp.pings;
observed.mcp_pings_answered = mcp.pings_answered;
observed.mcp_ping_median_ms = mcp.ping_ms.length ? Math.round(median(mcp.ping_ms) * 10) / 10 : null;
observed.server_samples = mcp.samples;
observed.server_exit = serverExit;
if (CALLS > 0) {
  check(`${CALLS} MCP calls, ${IN_FLIGHT} in flight, ${mcp.cancelled} cancelled`,
    mcp.lost + mcp.duplicated + mcp.answered_cancelled + mcp.wrong + mcp.duplicate_run_ids === 0 && stray.length === 0,
    `in ${observed.mcp_s} s; lost ids ${mcp.lost}, duplicated ids ${mcp.duplicated}, cancelled yet answered ${mcp.answered_cancelled}, ` +
    `wrong results ${mcp.wrong}, duplicated run ids ${mcp.duplicate_run_ids}; ${mcp.pings_answered}/${mcp.pings} pings answered ` +
    `(median ${observed.mcp_ping_median_ms} ms)` + (mcp.wrong_list.length ? `; ${mcp.wrong_list.join('; ')}` : '') +
    (stray.length ? `; unexpected messages: ${stray.join(' ')}` : ''));
  check('pings answered between calls', mcp.pings > 0 && mcp.pings_answered === mcp.pings, `${mcp.pings_answered} of ${mcp.pings}`);
  const s = mcp.samples;
  if (s.length >= 2) {
    const flat = (key) => {
      const base = s[0][key];
      const worst = s.reduce((w, x) => Math.max(w, Math.abs(x[key] - base) / base), 0);
      return { first: base, last: s.at(-1)[key], max: Math.max(...s.map((x) => x[key])), worst_pct: Math.round(worst * 1000) / 10 };
    };
    const rss = flat('rss_kib'), fds = flat('fds');
    observed.server_rss_kib = rss;
    observed.server_fds = fds;
    check('server memory flat', rss.worst_pct <= 20,
      `resident ${rss.first} KiB after the first ${SAMPLE_EVERY} calls, ${rss.last} KiB after ${s.at(-1).after}, at most ${rss.max} KiB ` +
      `(${rss.worst_pct}% from the first; flat is within 20%)`);
    check('server descriptors flat', fds.worst_pct <= 20,
      `${fds.first} open after the first ${SAMPLE_EVERY} calls, ${fds.last} after ${s.at(-1).after}, at most ${fds.max} (${fds.worst_pct}% from the first)`);
  }
  check(`server exits 0 when ${link ? 'SIGTERM comes' : 'its stdin ends'}`, serverExit && serverExit.byItself && serverExit.code === 0,
    serverExit ? `exit ${serverExit.code ?? `signal ${serverExit.signal}`}${serverExit.byItself ? '' : ' (killed after 30 s)'}` : 'not reached');
}

// ---- what is left ----
for (const id of mcpRunIds) runIds.add(id);
const after = await snapshot({ home: HOME, installId: INSTALL, runIds, docker });
const left = added(before, after);
const cg = docker ? [...boxCgroups].filter((p) => fs.existsSync(p)) : [];
observed.left = { ...Object.fromEntries(Object.entries(left.by_kind).map(([k, v]) => [k, v.length])), docker_cgroups: cg.length };
observed.docker_cgroups_named = boxCgroups.size;
observed.leftovers = left.total + cg.length;
check('nothing left', left.total + cg.length === 0,
  left.total + cg.length === 0
    ? `${runIds.size} runs: no box, volume, box cgroup${docker ? ` (of ${boxCgroups.size} their receipts named)` : ''}, native cgroup leaf or staging folder, run note or uid lease of theirs left`
    : `left: ${JSON.stringify({ ...left.by_kind, docker_cgroups: cg }).slice(0, 400)}`);
// The installation's native cgroup parents that these runs made (PyBox makes one when a
// box needs it and keeps it): removed when empty, as the rest of what the runs made.
for (const d of nativeParents(HOME)) {
  if (parentsBefore.has(d)) continue;
  try { fs.rmdirSync(d); } catch (e) { log(`${d}: ${e.code}`); }
}
observed.total_s = Math.round((performance.now() - tExec) / 100) / 10;

process.stdout.write(JSON.stringify({ observed, checks }) + '\n', () => process.exit(0));
