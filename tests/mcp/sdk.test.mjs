// SPDX-License-Identifier: MIT
// pybox mcp driven by the official MCP TypeScript SDK client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { PYBOX, serverEnv, boxes, volumes, waitNoBoxes, createdBetween, coldUnlessAsked, SKIP_TIMING } from './helpers.mjs';

async function connect(args) {
  const transport = new StdioClientTransport({ command: PYBOX, args: ['mcp', ...coldUnlessAsked(args)], env: serverEnv,
    stderr: 'pipe' });
  const client = new Client({ name: 'pybox-tests', version: '1.0.0' });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return { client, errors };
}

const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

test('data image: a CSV in, a result file and a chart back, the receipt valid against the output schema', { skip: SKIP_TIMING }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-mcp-'));
  const filesRoot = path.join(dir, 'in');
  const outputRoot = path.join(dir, 'out');
  fs.mkdirSync(filesRoot);
  fs.mkdirSync(outputRoot);
  const csv = 'region,amount\nnorth,10\nsouth,32\nnorth,5\n';
  fs.writeFileSync(path.join(filesRoot, 'sales.csv'), csv);
  const { client, errors } = await connect(['--images', 'stdlib,data', '--max-timeout', '30', '--max-memory', '512M',
    '--files-root', filesRoot, '--output-root', outputRoot]);
  try {
    assert.equal(client.getServerVersion().name, 'pybox');
    assert.ok(client.getServerCapabilities().tools, 'the server offers tools');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['run_python', 'session_open', 'session_close']);
    const tool = tools[0];
    assert.match(tool.description, /nothing persists between calls/);
    assert.deepEqual(tool.inputSchema.properties.image.enum, ['stdlib', 'data']);
    assert.equal(tool.inputSchema.properties.timeout_s.maximum, 30);
    assert.equal(tool.outputSchema.type, 'object');

    const code = [
      'import pandas as pd',
      'import matplotlib',
      'matplotlib.use("Agg")',
      'import matplotlib.pyplot as plt',
      'df = pd.read_csv("/box/in/sales.csv")',
      'totals = df.groupby("region")["amount"].sum()',
      'totals.to_csv("/box/out/totals.csv")',
      'totals.plot.bar()',
      'plt.savefig("/box/out/chart.png")',
      'open("/box/out/blob.bin", "wb").write(bytes(range(256)))',
      'print("regions:", len(totals))',
    ].join('\n');
    const result = await client.callTool({ name: 'run_python', arguments: {
      code, image: 'data', timeout_s: 30, files: [{ name: 'sales.csv', content: csv }], return_files: true } });
    // callTool has validated structuredContent against the tool's output schema (it throws otherwise).
    assert.ok(!result.isError, text(result));
    const r = result.structuredContent;
    assert.equal(r.schema, 'pybox.receipt/2');
    assert.equal(r.status, 'TARGET_EXIT_OBSERVED', text(result));
    assert.equal(r.exit_code, 0);
    assert.equal(r.asked.image.name, 'data');
    assert.equal(r.said.stdout.text, 'regions: 2\n');
    assert.equal(r.seen.box.confirmed_gone, true);
    // The receipt is signed: pybox verify accepts it as the client got it.
    const verified = spawnSync(PYBOX, ['verify', '-'], { input: JSON.stringify(r), env: serverEnv, encoding: 'utf8' });
    assert.equal(verified.status, 0, verified.stdout + verified.stderr);
    assert.match(verified.stdout, /^valid: signed by key [0-9a-f]{32} of this installation\n$/);

    const totals = result.content.find((c) => c.type === 'text' && c.text.startsWith('file totals.csv'));
    assert.ok(totals, 'the result file comes back inline');
    assert.match(totals.text, /^file totals\.csv \(\d+ bytes, untrusted, written by the program/);
    assert.match(totals.text, /\n {2}\| north,15\n {2}\| south,32\n/, 'each line of the file fenced');
    const chart = result.content.find((c) => c.type === 'image');
    assert.ok(chart, 'the chart comes back as an image');
    assert.equal(chart.mimeType, 'image/png');
    const png = Buffer.from(chart.data, 'base64');
    assert.ok(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])));
    assert.ok(png.length > 1000, `a real chart (${png.length} bytes)`);
    const link = result.content.find((c) => c.type === 'resource_link');
    assert.ok(link, 'a binary file is kept under the output root and linked');
    assert.equal(link.name, 'blob.bin');
    const kept = new URL(link.uri).pathname;
    assert.ok(kept.startsWith(fs.realpathSync(outputRoot) + '/'), kept);
    assert.ok(fs.readFileSync(kept).equals(Buffer.from([...Array(256).keys()])));

    // The schema check is real: the same validator refuses a receipt that lost a field.
    const validator = client.getToolOutputValidator('run_python');
    assert.equal(validator(r).valid, true);
    const broken = structuredClone(r);
    delete broken.said.stdout.truncated;
    assert.equal(validator(broken).valid, false);

    // The same file by path under the files root; a path outside it is refused.
    const byPath = await client.callTool({ name: 'run_python', arguments: {
      code: 'print(open("/box/in/sales.csv").read().count("north"))', files: [{ path: 'sales.csv' }] } });
    assert.equal(byPath.structuredContent.said.stdout.text, '2\n', text(byPath));
    const outside = await client.callTool({ name: 'run_python', arguments: {
      code: 'print(1)', files: [{ path: '../../../etc/passwd' }] } });
    assert.equal(outside.isError, true);
    assert.match(text(outside), /\(set by the server\)/);
    assert.deepEqual(errors, []);
  } finally {
    await client.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('ceilings: a 31 s timeout, an image not allowed and too much memory are refused (set by the server), no box built', async () => {
  const { client } = await connect(['--images', 'stdlib', '--max-timeout', '30', '--max-memory', '256M']);
  try {
    await client.listTools();
    const since = Date.now() / 1000;
    const timeout = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)', timeout_s: 31 } });
    assert.equal(timeout.isError, true);
    assert.match(text(timeout), /timeout_s: 31 s is above the maximum of 30 s \(set by the server\)/);
    const image = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)', image: 'data' } });
    assert.equal(image.isError, true);
    assert.match(text(image), /image: not allowed \(set by the server\); allowed: stdlib/);
    const memory = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)', memory_mib: 257 } });
    assert.equal(memory.isError, true);
    assert.match(text(memory), /above the maximum of 256 MiB \(set by the server\)/);
    const until = Date.now() / 1000 + 0.001;
    assert.deepEqual(await createdBetween(since, until), [], 'a refusal builds no box');
    // At the ceiling itself the call runs.
    const ok = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)', timeout_s: 30, memory_mib: 256 } });
    assert.equal(ok.structuredContent.exit_code, 0, text(ok));
    assert.equal(ok.structuredContent.asked.limits.timeout_s, 30);
    assert.equal(ok.structuredContent.asked.limits.memory_bytes, 256 * 1024 * 1024);
  } finally {
    await client.close();
  }
});

// What the call folders under an output root hold, in bytes.
function held(root) {
  let sum = 0;
  const walk = (p) => {
    const st = fs.lstatSync(p);
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) walk(path.join(p, n));
    else sum += st.size;
  };
  for (const n of fs.readdirSync(root)) walk(path.join(root, n));
  return sum;
}

test('an agent looping return_files is refused (set by the server) at the output root\'s ceiling; past their age, folders go', async () => {
  const outputRoot = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-mcp-')));
  const max = 50 * 1024 * 1024;
  const { client } = await connect(['--images', 'stdlib', '--output-root', outputRoot, '--output-root-max', '50M',
    '--output-root-age', '1h']);
  const code = 'open("/box/out/big.bin", "wb").write(b"\\xff" * (8 << 20))';
  try {
    let refused = null;
    let kept = 0;
    for (let i = 0; i < 10 && refused === null; i++) {
      const since = Date.now() / 1000;
      const r = await client.callTool({ name: 'run_python', arguments: { code, return_files: true } });
      if (r.isError) {
        refused = r;
        assert.deepEqual(await createdBetween(since, Date.now() / 1000 + 0.001), [], 'a refusal builds no box');
      } else {
        assert.equal(r.structuredContent.exit_code, 0, text(r));
        assert.equal(r.content.filter((c) => c.type === 'resource_link').length, 1, text(r));
        kept++;
      }
      assert.ok(held(outputRoot) <= max, `the output root holds ${held(outputRoot)} bytes, past the ceiling`);
    }
    assert.ok(refused, 'ten calls of 8 MiB each were all kept under a 50 MiB ceiling');
    assert.equal(kept, 3, 'three calls fit (8 MiB each, and room for one more call\'s 34 MiB)');
    assert.match(text(refused), /^return_files: this server's output root holds \d+ (KiB|MiB) of the 50 MiB it may hold \(set by the server\), with 0 MiB more held by calls in progress, and one call's files may take up to 34052 KiB: call without return_files, or again once files older than 1h have gone$/);
    // Without return_files nothing is kept, and the call runs.
    const plain = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)' } });
    assert.equal(plain.structuredContent.exit_code, 0, text(plain));
    // Folders whose files were written over an hour ago go before the next call counts.
    const old = Date.now() / 1000 - 7200;
    const folders = fs.readdirSync(outputRoot);
    for (const n of folders) fs.utimesSync(path.join(outputRoot, n), old, old);
    const again = await client.callTool({ name: 'run_python', arguments: { code, return_files: true } });
    assert.ok(!again.isError, text(again));
    const now = fs.readdirSync(outputRoot);
    assert.equal(now.length, 1, `left: ${now}`);
    assert.ok(!folders.includes(now[0]));
  } finally {
    await client.close();
    fs.rmSync(outputRoot, { recursive: true, force: true });
  }
});

test('a cancelled 20 s sleep: its box is removed, no result comes, and the server answers ping after', async () => {
  const { client, errors } = await connect(['--images', 'stdlib', '--max-timeout', '30']);
  try {
    const abort = new AbortController();
    let cancelledAt = 0;
    const call = client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(20)\n', timeout_s: 30 } },
      undefined, {
        signal: abort.signal,
        timeout: 60000,
        onprogress: async (p) => {
          if (p.message !== 'running' || cancelledAt) return;
          assert.equal((await boxes()).length, 1, 'the box runs');
          cancelledAt = performance.now();
          abort.abort('the test cancels');
        },
      });
    await assert.rejects(call);
    assert.ok(cancelledAt > 0, 'cancelled while running');
    await waitNoBoxes(10000);
    const sinceCancel = performance.now() - cancelledAt;
    console.log(`# box gone at most ${sinceCancel.toFixed(0)} ms after the cancellation`);
    assert.ok(sinceCancel < 10000, 'stopped long before the program would have ended');
    await client.ping();
    const after = await client.callTool({ name: 'run_python', arguments: { code: 'print("still serving")' } });
    assert.equal(after.structuredContent.said.stdout.text, 'still serving\n');
    assert.deepEqual(errors, [], 'no answer for the cancelled request reached the client');
  } finally {
    await client.close();
  }
});

test('8 calls at once: each its own box and its own correct receipt; nothing left in the engine', async () => {
  const { client, errors } = await connect(['--images', 'stdlib', '--max-timeout', '30']);
  try {
    const calls = [...Array(8).keys()].map((i) => client.callTool({ name: 'run_python', arguments: {
      code: `import sys, time\ntime.sleep(0.5)\nprint(${i} * ${i})\nprint("box ${i}", file=sys.stderr)\n`, timeout_s: 25 } },
    undefined, { timeout: 120000 }));
    const results = await Promise.all(calls);
    results.forEach((res, i) => {
      const r = res.structuredContent;
      assert.equal(r.status, 'TARGET_EXIT_OBSERVED', text(res));
      assert.equal(r.said.stdout.text, `${i * i}\n`);
      assert.equal(r.said.stderr.text, `box ${i}\n`);
      assert.equal(r.seen.box.confirmed_gone, true);
    });
    assert.equal(new Set(results.map((r) => r.structuredContent.run_id)).size, 8, 'eight runs');
    assert.equal(new Set(results.map((r) => r.structuredContent.seen.box.id)).size, 8, 'eight boxes');
    assert.deepEqual(await boxes(), []);
    assert.deepEqual(await volumes(), []);
    assert.deepEqual(errors, []);
  } finally {
    await client.close();
  }
});

// The server's end, as a client ends it: stdin closed; then nothing of its boxes is left.
async function closeAndCount(client) {
  await client.close();
  return waitNoBoxes(20000);
}

test('warm boxes: 50 calls of print(1) and 50 of a pandas import, each its own box made ahead with what its preload imported said, nothing left after the server ends', { skip: SKIP_TIMING }, async () => {
  const { client, errors } = await connect(['--images', 'stdlib,data', '--warm', '1', '--max-timeout', '30']);
  let closed = false;
  try {
    const runs = [
      { image: 'stdlib', code: 'print(1)', out: '1\n', preload: [] },
      { image: 'data', code: 'import pandas; print(pandas.__version__)', out: /^\d+\.\d+/, preload: ['numpy', 'pandas'] },
    ];
    for (const run of runs) {
      const ids = new Set();
      let lastUid = null;
      for (let i = 0; i < 50; i++) {
        const res = await client.callTool({ name: 'run_python', arguments: { code: run.code, image: run.image } },
          undefined, { timeout: 120000 });
        const r = res.structuredContent;
        assert.equal(r.status, 'TARGET_EXIT_OBSERVED', text(res));
        if (typeof run.out === 'string') assert.equal(r.said.stdout.text, run.out);
        else assert.match(r.said.stdout.text, run.out);
        const st = r.seen.start;
        // Each call of a warm server finds its box ready: made, verified, its preload said.
        assert.equal(st.kind, 'warm', `call ${i} of ${run.image} started cold: ${st.why_cold}`);
        assert.equal(r.seen.box.verified, true);
        assert.ok(Date.parse(st.box_made_at) <= Date.parse(r.asked.at), 'the box was made before the program came');
        assert.ok(st.waited_ms >= 0);
        assert.equal(st.preload.failed, null);
        for (const m of run.preload) assert.ok(st.preload.imported.includes(m), `${m} not said imported: ${st.preload.imported}`);
        assert.deepEqual(st.preload.imported, st.preload.modules);
        // What counts from the program's arrival: its CPU, beside the box's whole.
        assert.ok(st.at_arrival && st.at_arrival.taken, 'the counters at the program\'s arrival');
        assert.ok(st.since_arrival.cpu_ns >= 0 && st.since_arrival.cpu_ns <= r.seen.kernel.final.cpu_ns);
        assert.equal(r.seen.box.confirmed_gone, true);
        // A box of its own: never one an earlier call had; never the user of the box that
        // waited beside it while it ran.
        assert.ok(!ids.has(r.seen.box.id), `box ${r.seen.box.id} served twice`);
        ids.add(r.seen.box.id);
        assert.equal(r.asked.policy.user_of_its_own, true);
        assert.notEqual(r.asked.policy.program_uid, lastUid, 'two boxes alive at once with one user');
        lastUid = r.asked.policy.program_uid;
      }
      assert.equal(ids.size, 50);
    }
    assert.deepEqual(errors, []);
    closed = true;
    const ms = await closeAndCount(client);
    console.log(`# every box gone ${ms.toFixed(0)} ms after the server ended`);
    assert.deepEqual(await volumes(), []);
  } finally {
    if (!closed) await client.close();
  }
});

// A warm box runs its program through the same runner as a large cold one
// (guest/main.py): what it says and how it ends are the interpreter's own for `-`,
// which a cold server's small program runs as. The first five broke the warm path
// before it took the runner (a hook called inside a handler, a hook that raises, a
// KeyboardInterrupt ended by exit 1, builtins rebound by the program, sys.orig_argv);
// the last five, its own shutdown before it followed the interpreter's (an exit status
// past a C long, sys.stderr None, os functions replaced, a stream that cannot be flushed:
// status 120, an error in the threads' shutdown).
const endings = [
  'import sys\nprint(sys.argv, sys.orig_argv[1:], __file__, __name__, __spec__)\nraise ValueError("plain")\n',
  'import sys\ntype = None; isinstance = len; SystemExit = None\n' +
    'def hook(t, v, tb):\n    print("hook", t.__name__, sys.exc_info()[0])\n    raise RuntimeError("from the hook")\n' +
    'sys.excepthook = hook\nraise LookupError("first")\n',
  'import sys\ndef hook(t, v, tb):\n    print("hook", t.__name__, sys.exc_info()[0])\nsys.excepthook = hook\nraise KeyboardInterrupt\n',
  'import builtins, sys\nbuiltins.isinstance = None; builtins.print = None; builtins.SystemExit = None\nsys.exit("a message")\n',
  'import sys, atexit\natexit.register(lambda: sys.stdout.write("atexit ran\\n"))\ndel sys.excepthook\n1 / 0\n',
  // and the interpreter's own end, which the bootstrap makes for a warm box
  'import sys\nsys.exit(2**63)\n',
  'import sys\nsys.stderr = None\nsys.exit("to descriptor 2")\n',
  'import os, sys\nos._exit = lambda c: print("mocked", c)\nos.kill = lambda *a: print("mocked")\nsys.exit(5)\n',
  'import sys\nclass W:\n    def write(self, s): return len(s)\n    def flush(self): raise OSError("no flush")\n' +
    '    def __repr__(self): return "<W>"\nsys.stdout = W()\n',
  'import threading\ndef stuck(): raise RuntimeError("at shutdown")\nthreading._shutdown = stuck\n',
];

test('a warm box ends a program as the interpreter does: said, status and signal as a cold box\'s', async () => {
  const warm = await connect(['--images', 'stdlib', '--warm', '1']);
  const cold = await connect(['--images', 'stdlib', '--warm', '0']);
  const differ = [];
  try {
    for (const code of endings) {
      const ends = [];
      for (const { client } of [warm, cold]) {
        const res = await client.callTool({ name: 'run_python', arguments: { code } });
        const r = res.structuredContent;
        ends.push({ kind: r.seen.start.kind, out: r.said.stdout.text, err: r.said.stderr.text,
          exit: r.seen.init_record.exit_code, signal: r.seen.init_record.signal });
      }
      const [w, c] = ends;
      assert.equal(w.kind, 'warm');
      assert.equal(c.kind, 'cold');
      if (JSON.stringify({ ...w, kind: null }) !== JSON.stringify({ ...c, kind: null }))
        differ.push(`${code}warm: ${JSON.stringify(w)}\ncold: ${JSON.stringify(c)}`);
    }
    assert.deepEqual(differ, [], `warm and cold differ for ${differ.length} of ${endings.length}:\n${differ.join('\n\n')}`);
  } finally {
    await warm.client.close();
    await cold.client.close();
  }
});

test('a warm server: a call asking other limits than its boxes starts cold and says why; --warm 0 keeps none', async () => {
  const { client } = await connect(['--images', 'stdlib', '--warm', '1', '--max-memory', '512M']);
  try {
    const res = await client.callTool({ name: 'run_python', arguments: { code: 'print(2)', memory_mib: 256 } });
    const st = res.structuredContent.seen.start;
    assert.equal(st.kind, 'cold');
    assert.match(st.why_cold, /asked for 256 MiB of memory; the warm boxes of stdlib have 128 MiB/);
  } finally {
    await client.close();
  }
  const cold = await connect(['--images', 'stdlib', '--warm', '0']);
  try {
    const res = await cold.client.callTool({ name: 'run_python', arguments: { code: 'print(3)' } });
    assert.equal(res.structuredContent.seen.start.kind, 'cold');
    assert.match(res.structuredContent.seen.start.why_cold, /keeps no warm box \(--warm 0\)/);
    assert.deepEqual(await boxes(), [], 'no box waits on a server that keeps none');
  } finally {
    await cold.client.close();
  }
});
