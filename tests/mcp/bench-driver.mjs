// SPDX-License-Identifier: MIT
// make bench's MCP part (docs/bench.md): one call as an agent makes it, from the official
// SDK client's request to its response, on a server that keeps warm boxes and on one that
// keeps none, interleaved in one session; each server's first call is a warm-up. Prints
// one JSON object on stdout:
//   {"<image>": {"code", "calls", "cold_ms", "warm_ms", "warm_calls", "ratio", "failed"}}
// where warm_calls counts the warm server's calls whose receipt says they started warm;
// and "session": a session's print(1) call beyond the program's own time (the box's
// init's count of the call), and a call reading a DataFrame an earlier call of the
// session made, beside the same line's own time in the session's interpreter:
//   {"session": {"print_overhead_ms", "print_calls", "df_call_ms", "df_line_ms", "df_ratio", "failed"}}
//   node tests/mcp/bench-driver.mjs PYBOX_BINARY RUNS
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [bin, runsArg] = process.argv.slice(2);
const runs = Math.max(1, Number(runsArg) || 10);
const env = { PATH: process.env.PATH };
for (const k of ['PYBOX_HOME', 'PYBOX_BACKEND', 'DOCKER_HOST']) if (process.env[k]) env[k] = process.env[k];

const cases = [
  { image: 'stdlib', code: 'print(1)', want: /^1\n$/, calls: Math.min(runs, 20) },
  { image: 'data', code: 'import pandas; print(pandas.__version__)', want: /^\d+\.\d+/, calls: Math.min(runs, 8) },
];

// A server; for a warm one, the boxes its log says are ready, by image (docs/mcp.md:
// "warm box of IMAGE ready"), and a wait for the next one.
async function server(warm) {
  const transport = new StdioClientTransport({ command: bin,
    args: ['mcp', '--images', 'stdlib,data', '--warm', String(warm), '--max-timeout', '60'], env,
    stderr: warm > 0 ? 'pipe' : 'ignore' });
  const client = new Client({ name: 'pybox-bench', version: '1.0.0' });
  const ready = new Map();
  let woken = () => {};
  if (warm > 0) {
    let partial = '';
    transport.stderr.on('data', (chunk) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop();
      for (const l of lines) {
        const m = /warm box of (\S+) ready/.exec(l);
        if (m) ready.set(m[1], (ready.get(m[1]) || 0) + 1);
      }
      woken();
    });
  }
  // Until the log has said n boxes of the image ready (bounded: a box takes seconds).
  client.readyBoxes = async (image, n) => {
    const until = Date.now() + 120000;
    while ((ready.get(image) || 0) < n) {
      if (Date.now() > until) throw new Error(`no warm box of ${image} said ready in 120 s`);
      await new Promise((r) => { woken = r; setTimeout(r, 1000); });
    }
  };
  await client.connect(transport);
  return client;
}

// One call: its time from request to response (ms), and what its receipt says.
async function call(client, c) {
  const t0 = performance.now();
  const res = await client.callTool({ name: 'run_python', arguments: { code: c.code, image: c.image } },
    undefined, { timeout: 180000 });
  const ms = performance.now() - t0;
  const r = res.structuredContent;
  const ok = r && r.status === 'TARGET_EXIT_OBSERVED' && c.want.test(r.said.stdout.text);
  return { ms, ok, kind: r?.seen?.start?.kind, why: r?.seen?.start?.why_cold };
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// A session's calls, on a server's own session (the cold server: a session's box is its own).
async function sessions(client) {
  const r = { print_overhead_ms: 0, print_calls: Math.min(runs, 20), df_call_ms: 0, df_line_ms: 0, df_ratio: 0, failed: 0 };
  const run = async (id, code) => {
    const t0 = performance.now();
    const res = await client.callTool({ name: 'run_python', arguments: { code, session_id: id } }, undefined,
      { timeout: 180000 });
    const ms = performance.now() - t0;
    const c = res.structuredContent;
    const ok = c && c.status === 'SESSION_CALL_ENDED';
    if (!ok) r.failed++;
    return { ms, c, ok };
  };
  const open = async (args) => (await client.callTool({ name: 'session_open', arguments: args }, undefined,
    { timeout: 180000 })).structuredContent?.session_id;
  const a = await open({ image: 'stdlib' });
  if (!a) { r.failed++; return r; }
  await run(a, 'print(1)');
  const over = [];
  for (let i = 0; i < r.print_calls; i++) {
    const x = await run(a, 'print(1)');
    if (x.ok) over.push(x.ms - x.c.seen.start.session.init_call_ms);
  }
  await client.callTool({ name: 'session_close', arguments: { session_id: a } });
  r.print_overhead_ms = median(over);
  const d = await open({ image: 'data', timeout_s: 60 });
  if (!d) { r.failed++; return r; }
  await run(d, 'import pandas\nx = pandas.DataFrame({"a": range(2_000_000)})');
  const calls = [], lines = [];
  const line = 'import time\nt = time.perf_counter()\ny = x.groupby(x.a % 1000).sum()\nprint(time.perf_counter() - t)';
  for (let i = 0; i < Math.min(runs, 8); i++) {
    const x = await run(d, line);
    if (!x.ok) continue;
    calls.push(x.ms);
    lines.push(Number(x.c.said.stdout.text) * 1000);
  }
  await client.callTool({ name: 'session_close', arguments: { session_id: d } });
  r.df_call_ms = median(calls);
  r.df_line_ms = median(lines);
  r.df_ratio = r.df_line_ms > 0 ? r.df_call_ms / r.df_line_ms : 0;
  return r;
}

const out = {};
const cold = await server(0);
const warm = await server(1);
try {
  for (const c of cases) {
    const tc = [], tw = [];
    let warmCalls = 0, failed = 0;
    let taken = 0;
    await call(cold, c);
    await warm.readyBoxes(c.image, ++taken);
    await call(warm, c);
    for (let i = 0; i < c.calls; i++) {
      // The cold call first; then the warm call once the warm server's log says its next
      // box is ready, as it is when an agent reads the last answer before its next call
      // (the data image's box takes longer than the cold call: its preload imports more).
      const a = await call(cold, c);
      await warm.readyBoxes(c.image, ++taken);
      const b = await call(warm, c);
      if (!a.ok || !b.ok) failed++;
      tc.push(a.ms);
      tw.push(b.ms);
      if (b.kind === 'warm') warmCalls++;
    }
    const cm = median(tc), wm = median(tw);
    out[c.image] = { code: c.code, calls: c.calls, cold_ms: cm, warm_ms: wm, warm_calls: warmCalls,
      ratio: cm > 0 ? wm / cm : 0, failed };
  }
  out.session = await sessions(cold);
} finally {
  await cold.close();
  await warm.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
