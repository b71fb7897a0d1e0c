// SPDX-License-Identifier: MIT
// Leak check: `pybox mcp` built with AddressSanitizer (LeakSanitizer on) driven by the official MCP SDK client through 100 calls, on stdio or over HTTP, then ended: it must exit 0 with no sanitizer report.
//
// Contract: run from the repository root as `node tests/mcp/leak-check.mjs` (make
// leak-check) with PYBOX_BIN = the sanitized pybox (absolute), PYBOX_BACKEND = docker
// (default) or native, LEAK_CALLS = how many tools/call requests (default 100),
// LEAK_TRANSPORT = stdio (default: the end is stdin closed) or http (pybox mcp --listen
// on loopback with a token file, the SDK's Streamable HTTP client; the end is the client
// going, which cancels its calls, then SIGTERM). It makes
// a throwaway installation under /tmp (the main installation's image pins, its cache
// linked) and removes it afterwards. Stdout: one JSON object {"observed", "checks"};
// logs on stderr. Exit 0 when every check passed, 1 when one failed, 2 when it could not
// run.
//
// The calls mix what the server does for a caller: runs that exit, fail, reach their
// deadline or run out of memory; files in (inline text, base64, a folder under the
// files root) and out (text, an image, a file too big to inline, kept under the output
// root); output cut at its cap and output that is not UTF-8; calls cancelled while they
// run and at once; refusals (over-ceiling memory and timeout, an unknown argument or
// image, bad base64, a path outside the files root, a name given twice, no code); pings,
// tools/list and protocol errors between them. Each result is checked too, so a clean
// report cannot come from calls that did nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ProcessTransport } from './stdio-process.mjs';
import { ensureStdlib, installIdOf, removeInstall, snapshot, added, throwawayHome } from './install.mjs';

const log = (...a) => console.error('[leak-check]', ...a);
const cannotRun = (why) => { console.error(`leak-check: cannot run: ${why}`); process.exit(2); };

const PYBOX = process.env.PYBOX_BIN;
const BACKEND = process.env.PYBOX_BACKEND || 'docker';
const CALLS = Number(process.env.LEAK_CALLS || 100);
const TRANSPORT = process.env.LEAK_TRANSPORT || 'stdio';
if (!['stdio', 'http'].includes(TRANSPORT)) cannotRun(`LEAK_TRANSPORT=${TRANSPORT}: give stdio or http`);
if (!PYBOX || !path.isAbsolute(PYBOX)) cannotRun('PYBOX_BIN must be the absolute path of the (sanitized) pybox');
if (!['docker', 'native'].includes(BACKEND)) cannotRun(`PYBOX_BACKEND=${BACKEND}: give docker or native`);
if (!Number.isInteger(CALLS) || CALLS < 20) cannotRun('LEAK_CALLS: give a whole number of at least 20');
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-leak-'));
fs.chmodSync(tmp, 0o755);
const home = throwawayHome(tmp);
// LeakSanitizer reports at exit and makes the exit code 23; UBSan stops at the first
// finding (the build has -fno-sanitize-recover=all). Nothing else of ours is inherited.
const env = {
  PATH: process.env.PATH,
  PYBOX_HOME: home,
  ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0:print_summary=1',
  UBSAN_OPTIONS: 'print_stacktrace=1',
};
if (process.env.DOCKER_HOST) env.DOCKER_HOST = process.env.DOCKER_HOST;
const sanitizerSaid = (text) => /LeakSanitizer|AddressSanitizer|runtime error:|SUMMARY: /.test(text);

const checks = [];
const observed = { backend: BACKEND, transport: TRANSPORT, calls: CALLS };

const check = (name, ok, detail) => { checks.push({ name, ok: !!ok, detail }); log(`${ok ? 'ok  ' : 'FAIL'} ${name}: ${detail}`); };

let installId;
try {
  // Set-up is not what is checked: no leak report for it.
  ensureStdlib(PYBOX, { ...env, ASAN_OPTIONS: 'detect_leaks=0' }, BACKEND, REPO);
  installId = installIdOf(home);
  observed.install_id = installId;
} catch (e) {
  fs.rmSync(tmp, { recursive: true, force: true });
  cannotRun(`setting up the throwaway installation: ${e.message}${e.stderr ? ` (${e.stderr.toString().slice(-2000)})` : ''}`);
}

const FILES = path.join(tmp, 'files');
const OUT = path.join(tmp, 'out');
fs.mkdirSync(path.join(FILES, 'data'), { recursive: true });
fs.mkdirSync(OUT);
fs.writeFileSync(path.join(FILES, 'data', 'x.txt'), 'from the files root\n');
fs.writeFileSync(path.join(FILES, 'data', 'y.bin'), Buffer.from([0, 1, 2, 255]));
fs.writeFileSync(path.join(FILES, 'one.csv'), 'a,b\n1,2\n');

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4b90000000049454e44ae426082', 'hex');

// ---- the calls: [name, arguments, how to judge the result, cancel] ----
const receipt = (r) => r?.structuredContent || {};
const said = (r, s) => receipt(r).said?.[s]?.text ?? '';
const ran = (status, code, more = () => null) => (r) => {
  const x = receipt(r);
  if (r.isError) return `isError: ${(r.content?.[0]?.text || '').slice(0, 160)}`;
  if (x.status !== status || x.exit_code !== code) return `status ${x.status} exit ${x.exit_code}, not ${status} ${code}`;
  if (x.seen?.box?.confirmed_gone !== true) return 'box not confirmed gone';
  return more(r, x);
};
const refused = (re) => (r) => {
  const t = r.content?.[0]?.text || '';
  if (r.isError !== true) return 'not refused';
  if (r.structuredContent !== undefined) return 'a receipt for a refused call';
  return re.test(t) ? null : `text "${t.slice(0, 160)}" does not match ${re}`;
};
const kinds = [
  ['hello', { code: 'print("hello")' }, ran('TARGET_EXIT_OBSERVED', 0, (r) => said(r, 'stdout') === 'hello\n' ? null : 'stdout')],
  ['traceback', { code: 'raise ValueError("no")' }, ran('TARGET_EXIT_OBSERVED', 1, (r) => said(r, 'stderr').includes('ValueError') ? null : 'stderr')],
  ['deadline', { code: 'import time\ntime.sleep(5)', timeout_s: 0.5 }, ran('SUPERVISOR_KILL_OBSERVED', 124)],
  ['oom child', { memory_mib: 64, code: 'import subprocess, sys\np = subprocess.run([sys.executable, "-c", "b = bytearray(256 << 20)"])\nprint("child", p.returncode)' },
    ran('TARGET_EXIT_OBSERVED', 0, (r) => said(r, 'stdout') === 'child -9\n' ? null : `stdout ${JSON.stringify(said(r, 'stdout'))}`)],
  ['inline text in, text out', { files: [{ name: 'a.txt', content: 'abc' }], return_files: true,
    code: 'd = open("/box/in/a.txt").read()\nopen("/box/out/b.txt", "w").write(d.upper())' },
  ran('TARGET_EXIT_OBSERVED', 0, (r) => (r.content || []).some((c) => c.type === 'text' && c.text.startsWith('file b.txt')) ? null : 'b.txt not inline')],
  ['base64 in, image out', { files: [{ name: 'p.bin', content_base64: PNG.toString('base64') }], return_files: true,
    code: 'import shutil\nshutil.copy("/box/in/p.bin", "/box/out/img.png")' },
  ran('TARGET_EXIT_OBSERVED', 0, (r) => (r.content || []).some((c) => c.type === 'image') ? null : 'no image content')],
  ['folder from the files root', { files: [{ path: 'data' }, { path: 'one.csv' }],
    code: 'print(open("/box/in/data/x.txt").read().strip(), len(open("/box/in/data/y.bin", "rb").read()), open("/box/in/one.csv").read().count(","))' },
  ran('TARGET_EXIT_OBSERVED', 0, (r) => said(r, 'stdout') === 'from the files root 4 2\n' ? null : `stdout ${JSON.stringify(said(r, 'stdout'))}`)],
  ['big file out, kept', { return_files: true, code: 'open("/box/out/big.txt", "w").write("x" * 300000)' },
    ran('TARGET_EXIT_OBSERVED', 0, (r) => (r.content || []).some((c) => c.type === 'resource_link') ? null : 'no resource_link')],
  ['output cut', { code: 'print("y" * 100000)' },
    ran('TARGET_EXIT_OBSERVED', 0, (r, x) => x.said?.stdout?.truncated === true ? null : 'stdout not cut')],
  ['not UTF-8', { code: 'import sys\nsys.stdout.buffer.write(b"\\xff\\xfe ok\\n")' }, ran('TARGET_EXIT_OBSERVED', 0)],
  ['cancelled while running', { code: 'import time\ntime.sleep(8)', timeout_s: 9 }, null, 'running'],
  ['cancelled at once', { code: 'import time\ntime.sleep(8)', timeout_s: 9 }, null, 'at-once'],
  ['memory over the ceiling', { code: 'print(1)', memory_mib: 1024 }, refused(/memory_mib: 1024 is above the maximum of 256 MiB/)],
  ['timeout over the ceiling', { code: 'print(1)', timeout_s: 11 }, refused(/timeout_s: 11 s is above the maximum/)],
  ['unknown argument', { code: 'print(1)', shell: true }, refused(/unknown argument 'shell'/)],
  ['image not allowed', { code: 'print(1)', image: 'gpu' }, refused(/image: not allowed/)],
  ['bad base64', { code: 'print(1)', files: [{ name: 'x', content_base64: 'abc' }] }, refused(/is not base64/)],
  ['path outside the files root', { code: 'print(1)', files: [{ path: '../../etc/passwd' }] }, refused(/files: /)],
  ['name given twice', { code: 'print(1)', files: [{ name: 'a', content: '1' }, { name: 'a', content: '2' }] }, refused(/files: /)],
  ['no code', { code: '' }, refused(/code: give the Python program/)],
];

const client = new Client({ name: 'pybox-leak-check', version: '1.0.0' });
const clientErrors = [];
let clientClosing = false; // the SDK reports its own streams aborted as it closes: not the server's doing
client.onerror = (e) => { if (!clientClosing) clientErrors.push(String(e?.message ?? e).slice(0, 200)); };
const serverArgs = ['--backend', BACKEND, '--images', 'stdlib', '--max-timeout', '10', '--max-memory', '256M',
  '--files-root', FILES, '--output-root', OUT];
// stdio: the server is the transport's own process. http: a server on loopback with a
// token file of its own (http-helpers.mjs reads the installation from the environment).
let transport, http = null;
if (TRANSPORT === 'stdio') {
  transport = new ProcessTransport({ command: PYBOX, args: ['mcp', ...serverArgs], env });
} else {
  process.env.PYBOX_HOME = home;
  process.env.PYBOX_TEST_INSTALL_ID = installId;
  process.env.PYBOX_BACKEND = BACKEND;
  const { HttpServer } = await import('./http-helpers.mjs');
  try {
    http = await HttpServer.start({ args: serverArgs, env });
  } catch (e) {
    await removeInstall(home, installId).catch(() => {});
    fs.rmSync(tmp, { recursive: true, force: true });
    cannotRun(`starting pybox mcp --listen: ${e.message}`);
  }
  transport = new StreamableHTTPClientTransport(new URL(http.url), { requestInit: { headers: { Authorization: http.auth() } } });
  transport.stderr = ''; // read from the server below
}
const serverStderr = () => (http ? http.stderr : transport.stderr);

const t0 = performance.now();
const problems = [];
const tally = {};
let refusals = 0, cancels = 0, runs = 0;
try {
  await client.connect(transport, { timeout: 30000 });
  await client.listTools(undefined, { timeout: 30000 });
  const before = await snapshot({ home, installId, docker: BACKEND === 'docker' });

  const one = async (i) => {
    const [name, args, judge, cancel] = kinds[i % kinds.length];
    tally[name] = (tally[name] || 0) + 1;
    const abort = new AbortController();
    let result, error;
    const opts = { timeout: 60000, signal: abort.signal };
    if (cancel === 'running') opts.onprogress = (p) => { if (p.message === 'running') abort.abort('leak check'); };
    const call = client.callTool({ name: 'run_python', arguments: args }, undefined, opts);
    if (cancel === 'at-once') abort.abort('leak check');
    try { result = await call; } catch (e) { error = e; }
    if (cancel) {
      cancels++;
      if (!error) problems.push(`#${i} ${name}: answered though cancelled`);
      return;
    }
    if (error) { problems.push(`#${i} ${name}: ${String(error.message).slice(0, 160)}`); return; }
    const why = judge(result);
    if (why) problems.push(`#${i} ${name}: ${why}`);
    if (result.isError) refusals++;
    else runs++;
  };
  // Four calls in flight; a ping, tools/list and two protocol errors along the way.
  let next = 0;
  let pings = 0, protocolErrors = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= CALLS - 2) return;
      await one(i);
      if (i % 10 === 9) {
        await client.ping({ timeout: 10000 });
        pings++;
      }
      if (i % 25 === 12) {
        await client.listTools(undefined, { timeout: 10000 });
        for (const req of [{ method: 'pybox/none', params: {} }, { method: 'tools/call', params: { name: 'nope', arguments: {} } }]) {
          try { await client.request(req, { parse: (x) => x }, { timeout: 10000 }); } catch (e) { if (e.code === -32601 || e.code === -32602) protocolErrors++; }
        }
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  // The last two calls are still running when stdin closes: the server cancels them,
  // removes their boxes and answers neither.
  let runningNow = 0, bothRunning;
  const running = new Promise((r) => { bothRunning = r; });
  const inFlight = [0, 1].map(() => client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(8)', timeout_s: 9 } },
    undefined, { timeout: 60000, onprogress: (p) => { if (p.message === 'running' && ++runningNow === 2) bothRunning(); } })
    .then((r) => `answered: ${(r.content?.[0]?.text || '').slice(0, 200)}`, () => 'not answered'));
  tally['running at the close'] = 2;
  // Both running, or why not: out of time, or the calls ended first (a refusal, say).
  let timer;
  const why = await Promise.race([running.then(() => null),
    new Promise((r) => { timer = setTimeout(() => r('the last two calls did not both run within 30 s'), 30000); }),
    Promise.all(inFlight).then((x) => `the last two calls ended before both ran: ${x.join(' / ')}`)]);
  clearTimeout(timer);
  if (why) throw new Error(why);
  observed.calls_ms = Math.round(performance.now() - t0);
  observed.runs = runs;
  observed.refusals = refusals;
  observed.cancelled = cancels;
  observed.pings = pings;
  observed.protocol_errors = protocolErrors;
  observed.kinds = tally;
  check('every call answered as expected', problems.length === 0,
    `${CALLS - 2} calls (${runs} ran, ${refusals} refused, ${cancels} cancelled: none answered), ${pings} pings, ` +
    `${protocolErrors} protocol errors answered` + (problems.length ? `; wrong: ${problems.slice(0, 5).join('; ')}` : ''));

  // The end. stdio: stdin closed, nothing else; the server cancels the two calls, exits,
  // and LeakSanitizer scans the heap on the way out. http: the client goes (its calls
  // are cancelled as it does), then SIGTERM drains what is left (nothing) and exits.
  let ex;
  const endProblems = [];
  if (http) {
    clientClosing = true;
    await client.close();
    const lastTwoGone = await Promise.all(inFlight);
    await http.line(/(call token=alice session=\w+ status=CANCELLED[^\n]*\n[\s\S]*){2}/, 30000)
      .catch(() => endProblems.push('the two calls of a client that went were not both cancelled'));
    const stopped = await http.stop('SIGTERM', 120000).catch((e) => ({ code: null, signal: null, error: e.message }));
    ex = { ...stopped, byItself: stopped.error === undefined };
    tally['running when the client went'] = lastTwoGone.length;
  } else {
    transport.endInput();
    ex = await transport.waitExit(120000);
  }
  const lastTwo = await Promise.all(inFlight);
  check('calls running at the close cancelled', lastTwo.every((x) => x === 'not answered') && endProblems.length === 0,
    `the last two calls: ${lastTwo.join(', ')}` + (endProblems.length ? `; ${endProblems.join('; ')}` : ''));
  observed.server_exit = ex;
  observed.sanitizer_report = sanitizerSaid(serverStderr());
  const report = serverStderr().split('\n').filter((l) => /Sanitizer|SUMMARY|runtime error|Direct leak|Indirect leak/.test(l));
  observed.sanitizer_lines = report.slice(0, 20);
  check(`server exited 0 by itself once ${http ? 'SIGTERM came' : 'stdin closed'}`, ex.byItself && ex.code === 0,
    `exit ${ex.code ?? `signal ${ex.signal}`}${ex.byItself ? '' : ' (did not exit within 120 s: killed)'}`);
  check('no sanitizer report', !observed.sanitizer_report,
    report.length ? report.slice(0, 6).join(' / ') : 'LeakSanitizer and UBSan said nothing');
  if (observed.sanitizer_report) fs.writeSync(2, `---- server stderr ----\n${serverStderr().slice(-20000)}\n`);
  check('client saw no stray message', clientErrors.length === 0, clientErrors.length ? clientErrors.slice(0, 3).join(' / ') : 'none');

  const after = await snapshot({ home, installId, docker: BACKEND === 'docker' });
  const left = added(before, after);
  observed.left = left.by_kind;
  check('nothing left', left.total === 0, left.total ? JSON.stringify(left.by_kind).slice(0, 300)
    : 'no box, volume, note, cgroup leaf or staging folder of the installation');
} catch (e) {
  check('the leak check ran to its end', false, `${String(e?.message ?? e).slice(0, 300)}; server stderr: ${serverStderr().slice(-1500)}`);
  transport.proc?.kill('SIGKILL');
  http?.proc.kill('SIGKILL');
} finally {
  if (http) fs.rmSync(http.folder.dir, { recursive: true, force: true });
  observed.total_ms = Math.round(performance.now() - t0);
  await removeInstall(home, installId).catch((e) => log(`removing the installation: ${e.message}`));
  fs.rmSync(tmp, { recursive: true, force: true });
}

process.stdout.write(JSON.stringify({ observed, checks }) + '\n', () => process.exit(checks.every((c) => c.ok) ? 0 : 1));
