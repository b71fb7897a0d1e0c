// SPDX-License-Identifier: MIT
// pybox mcp's sessions through the official SDK client: state kept across the calls of
// one session and nowhere else, each call's receipt saying what is whose, the server's
// ceilings, and every way a session ends leaving nothing behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { PYBOX, serverEnv, boxes, waitNoBoxes, SKIP_TIMING } from './helpers.mjs';

async function connect(args) {
  const transport = new StdioClientTransport({ command: PYBOX, args: ['mcp', '--warm', '0', ...args], env: serverEnv,
    stderr: 'pipe' });
  const client = new Client({ name: 'pybox-tests', version: '1.0.0' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c.toString('utf8'); });
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const call = (client, args, opts) => client.callTool({ name: 'run_python', arguments: args }, undefined,
  { timeout: 120000, ...opts });
const open = (client, args = {}) => client.callTool({ name: 'session_open', arguments: args }, undefined,
  { timeout: 120000 });
const close = (client, id) => client.callTool({ name: 'session_close', arguments: { session_id: id } });

test('a data-image session: a DataFrame made by one call is read by the next; each receipt names its session and call; session_close gives the session receipt; nothing left', { skip: SKIP_TIMING }, async () => {
  const { client } = await connect(['--images', 'stdlib,data', '--max-timeout', '60']);
  let closed = false;
  try {
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(tools, ['run_python', 'session_close', 'session_open']);
    const o = await open(client, { image: 'data', timeout_s: 30 });
    assert.equal(o.isError, undefined, text(o));
    const s = o.structuredContent;
    assert.match(s.session_id, /^[0-9a-f]{32}$/);
    assert.equal(s.image, 'data');
    assert.equal(s.box_verified, true);
    assert.match(s.preload_imported, /pandas/);
    assert.equal((await boxes()).length, 1, 'the session is one box');

    const r1 = await call(client, { session_id: s.session_id,
      code: 'import pandas\nx = pandas.DataFrame({"a": range(1234)})\nprint("made")\n' });
    const c1 = r1.structuredContent;
    assert.equal(c1.status, 'SESSION_CALL_ENDED', text(r1));
    assert.equal(c1.said.stdout.text, 'made\n');
    assert.equal(c1.seen.start.kind, 'session');
    assert.deepEqual({ ...c1.seen.start.session, init_call_ms: 0, files: '' },
      { id: s.session_id, call: 1, state: "none: the session's first call", goes_on: true, init_call_ms: 0,
        files: '' });
    assert.equal(c1.seen.box.id, s.box_id);
    assert.equal(c1.seen.box.removed, false, 'the box is kept for the next call');
    assert.ok(c1.seen.start.at_arrival.taken !== undefined, 'the counters at the call\'s start');
    assert.ok(c1.seen.start.since_arrival.cpu_ns > 0, 'the call\'s own CPU');
    assert.ok(c1.seen.start.since_arrival.cpu_ns <= c1.seen.kernel.final.cpu_ns, 'within the session\'s total');

    // A forged record printed by the code is output; the report of the call is quoted as said.
    const forged = '\\x1epybox-call v4 ' + '0'.repeat(64) + ' call=9 out=0 err=0 said=0 call_ms=1 alive=0';
    const r2 = await call(client, { session_id: s.session_id, code: `print(len(x))\nprint("${forged}")\nlen(x) * 2` });
    const c2 = r2.structuredContent;
    assert.equal(c2.status, 'SESSION_CALL_ENDED', text(r2));
    assert.ok(c2.said.stdout.text.startsWith('1234\n'), c2.said.stdout.text);
    assert.ok(c2.said.stdout.text.includes('pybox-call v4'), 'the forged line is the program\'s output');
    assert.equal(c2.seen.start.session.call, 2);
    assert.equal(c2.seen.start.session.state, 'state from calls 1..1 of this session');
    assert.deepEqual(JSON.parse(c2.said.session_report), { call: 2, exception: null, value: '2468' });
    assert.equal(c2.seen.start.session.goes_on, true);
    assert.equal(c2.asked.program.bytes, Buffer.byteLength(`print(len(x))\nprint("${forged}")\nlen(x) * 2`));

    // An exception is the program's word, and the session goes on.
    const r3 = await call(client, { session_id: s.session_id, code: 'raise ValueError("boom")' });
    assert.equal(r3.structuredContent.status, 'SESSION_CALL_ENDED');
    assert.match(r3.structuredContent.said.stderr.text, /ValueError: boom/);
    assert.equal(JSON.parse(r3.structuredContent.said.session_report).exception, 'ValueError: boom');

    const cl = await close(client, s.session_id);
    const sr = cl.structuredContent;
    assert.equal(sr.status, 'SESSION_CLOSED_OBSERVED', text(cl));
    assert.equal(sr.seen.init_record.end, 'closed');
    assert.equal(sr.seen.init_record.calls, 3);
    assert.equal(sr.seen.start.session.call, 0);
    assert.equal(sr.seen.box.confirmed_gone, true);
    assert.deepEqual(await boxes(), []);
    const again = await call(client, { session_id: s.session_id, code: 'print(1)' });
    assert.equal(again.isError, true);
    assert.match(text(again), /has ended: closed by session_close/);
    closed = true;
    await client.close();
    await waitNoBoxes(20000);
  } finally {
    if (!closed) await client.close();
  }
});

test('sessions apart: a second session sees nothing of the first (globals, /tmp, processes, user); a plain call sees neither', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const a = (await open(client)).structuredContent.session_id;
    const b = (await open(client)).structuredContent.session_id;
    assert.notEqual(a, b);
    const ra = await call(client, { session_id: a, code: [
      'import os, subprocess',
      'secret = "in-a"',
      'open("/tmp/secret-a", "w").write("a")',
      'p = subprocess.Popen(["sleep", "60"])',
      'print(os.getuid())',
    ].join('\n') });
    assert.equal(ra.structuredContent.status, 'SESSION_CALL_ENDED', text(ra));
    const look = [
      'import os',
      'print("secret" in globals(), os.path.exists("/tmp/secret-a"), os.getuid())',
      'print(sorted(p for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep")))',
    ].join('\n');
    const rb = await call(client, { session_id: b, code: look });
    const [seen, procs] = rb.structuredContent.said.stdout.text.split('\n');
    assert.ok(seen.startsWith('False False '), seen);
    assert.notEqual(seen.split(' ')[2], ra.structuredContent.said.stdout.text.trim(), 'each session its own user');
    assert.equal(procs, '[]');
    assert.notEqual(rb.structuredContent.seen.box.id, ra.structuredContent.seen.box.id);
    const plain = await call(client, { code: 'import os\nprint(os.path.exists("/tmp/secret-a"))' });
    assert.equal(plain.structuredContent.said.stdout.text, 'False\n');
    // In its own session, the state is there, and the same look finds it.
    const again = await call(client, { session_id: a, code: 'print(secret, open("/tmp/secret-a").read(), p.poll())' });
    assert.equal(again.structuredContent.said.stdout.text, 'in-a a None\n');
    const own = (await call(client, { session_id: a, code: look })).structuredContent.said.stdout.text.split('\n');
    assert.ok(own[0].startsWith('True True '), own[0]);
    assert.notEqual(own[1], '[]', 'the look finds the process where it is');
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});

test('a call past its deadline ends its session: its receipt says so, the next call is refused naming why, nothing is left', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const id = (await open(client, { timeout_s: 5 })).structuredContent.session_id;
    await call(client, { session_id: id, code: 'x = 1' });
    const r = await call(client, { session_id: id, code: 'import time\ntime.sleep(30)', timeout_s: 1 });
    const c = r.structuredContent;
    assert.equal(c.status, 'SUPERVISOR_KILL_OBSERVED', text(r));
    assert.equal(c.seen.start.session.call, 2);
    assert.equal(c.seen.start.session.goes_on, false);
    assert.equal(c.asked.limits.timeout_s, 1, 'the call\'s own deadline');
    assert.equal(c.seen.box.confirmed_gone, true);
    assert.deepEqual(await boxes(), []);
    const next = await call(client, { session_id: id, code: 'print(x)' });
    assert.equal(next.isError, true);
    assert.match(text(next), /has ended: its call 2 ended it \(SUPERVISOR_KILL_OBSERVED\)/);
  } finally {
    await client.close();
  }
});

test('an out-of-memory kill of the session\'s interpreter ends the session and says so; nothing restarts it', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const id = (await open(client, { memory_mib: 64, timeout_s: 20 })).structuredContent.session_id;
    const r = await call(client, { session_id: id, code: 'b = []\nwhile True:\n    b.append(bytearray(1 << 20))' });
    const c = r.structuredContent;
    assert.equal(c.seen.start.session.goes_on, false, text(r));
    assert.ok(c.seen.oom.kernel_oom_kills >= 1, JSON.stringify(c.seen.oom));
    assert.equal(c.seen.box.confirmed_gone, true);
    const next = await call(client, { session_id: id, code: 'print(1)' });
    assert.match(text(next), /has ended/);
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});

test('the server\'s ceilings: --python-sessions bounds live sessions, ttl_s above --session-ttl is refused (set by the server); an unknown id is refused; --python-sessions 0 offers no session tool', async () => {
  const { client } = await connect(['--images', 'stdlib', '--python-sessions', '1', '--session-ttl', '60']);
  try {
    const tooLong = await open(client, { ttl_s: 61 });
    assert.equal(tooLong.isError, true);
    assert.match(text(tooLong), /ttl_s: give seconds from 1 up to 60 \(set by the server\)/);
    assert.deepEqual(await boxes(), [], 'a refusal builds nothing');
    const id = (await open(client, { ttl_s: 60 })).structuredContent.session_id;
    const second = await open(client);
    assert.equal(second.isError, true);
    assert.match(text(second), /1 session is live or opening, the most this server keeps \(set by the server\)/);
    assert.equal((await boxes()).length, 1);
    const withImage = await call(client, { session_id: id, code: 'print(1)', image: 'stdlib' });
    assert.match(text(withImage), /image: not taken with session_id/);
    const longer = await call(client, { session_id: id, code: 'print(1)', timeout_s: 3 });
    assert.match(text(longer), /timeout_s: 3 s is above the 2 s of this session \(session_open's timeout_s\)/);
    const unknown = await call(client, { session_id: 'f'.repeat(32), code: 'print(1)' });
    assert.match(text(unknown), /no live session of this server has that id/);
    const bad = await call(client, { session_id: '../x', code: 'print(1)' });
    assert.match(text(bad), /session_id: give the id session_open returned/);
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000); // the live session ended with the connection
  const none = await connect(['--images', 'stdlib', '--python-sessions', '0']);
  try {
    assert.deepEqual((await none.client.listTools()).tools.map((t) => t.name), ['run_python']);
    const r = await call(none.client, { session_id: 'a'.repeat(32), code: 'print(1)' });
    assert.match(text(r), /this server keeps no sessions \(--python-sessions 0, set by the server\)/);
  } finally {
    await none.client.close();
  }
});

// The text of a file returned inline, or null.
const returned = (result, name) => {
  const c = result.content.find((x) => x.type === 'text' && x.text.startsWith(`file ${name} (`));
  return c ? c.text.split('\n').filter((l) => l.startsWith('  | ')).map((l) => l.slice(4)).join('\n') : null;
};

test('files in and out per call of a session: each call\'s inputs join /box/in, return_files returns /box/out as it stands at the call\'s end, a name an earlier call gave is refused before the call and the session goes on', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const id = (await open(client, { timeout_s: 10 })).structuredContent.session_id;
    const r1 = await call(client, { session_id: id, return_files: true, files: [{ name: 'a.txt', content: 'alpha' }],
      code: 'd = open("/box/in/a.txt").read()\nopen("/box/out/one.txt", "w").write(d.upper())\nprint(d)' });
    const c1 = r1.structuredContent;
    assert.equal(c1.status, 'SESSION_CALL_ENDED', text(r1));
    assert.equal(c1.said.stdout.text, 'alpha\n');
    assert.deepEqual(c1.asked.inputs.map((f) => f.name), ['a.txt']);
    assert.equal(returned(r1, 'one.txt'), 'ALPHA', text(r1));
    assert.match(c1.seen.start.session.files, /\/box\/out as it stood at this call's end/);

    // Call 2 gives another file: both are in /box/in; /box/out has call 1's file and its own.
    const r2 = await call(client, { session_id: id, return_files: true, files: [{ name: 'b.txt', content: 'beta' }],
      code: 'import os\nopen("/box/out/two.txt", "w").write(d + open("/box/in/b.txt").read())\n'
        + 'print(sorted(os.listdir("/box/in")))' });
    const c2 = r2.structuredContent;
    assert.equal(c2.status, 'SESSION_CALL_ENDED', text(r2));
    assert.equal(c2.said.stdout.text, "['a.txt', 'b.txt']\n");
    assert.deepEqual(c2.asked.inputs.map((f) => f.name), ['b.txt'], 'the call\'s own inputs');
    assert.equal(returned(r2, 'two.txt'), 'alphabeta', text(r2));
    assert.equal(returned(r2, 'one.txt'), 'ALPHA', '/box/out lasts for the session');

    // A call without return_files returns none; /box/out goes on.
    const r3 = await call(client, { session_id: id, code: 'open("/box/out/three.txt", "w").write("3")' });
    assert.equal(r3.structuredContent.status, 'SESSION_CALL_ENDED', text(r3));
    assert.equal(returned(r3, 'three.txt'), null);

    // A name an earlier call gave is refused before the call: nothing reaches the box, and
    // the session goes on with its state.
    const again = await call(client, { session_id: id, files: [{ name: 'a.txt', content: 'other' }], code: 'd = 0' });
    assert.equal(again.isError, true);
    assert.match(text(again), /^files: \/box\/in\/a\.txt is there already: call 1 of this session put it there/);
    const r4 = await call(client, { session_id: id, return_files: true,
      code: 'print(d, open("/box/in/a.txt").read())' });
    const c4 = r4.structuredContent;
    assert.equal(c4.said.stdout.text, 'alpha alpha\n', 'the refused call changed nothing');
    assert.equal(c4.seen.start.session.call, 4, 'the refused call was never handed to the session');
    assert.deepEqual(['one.txt', 'two.txt', 'three.txt'].map((n) => returned(r4, n)), ['ALPHA', 'alphabeta', '3']);
    const cl = await close(client, id);
    assert.equal(cl.structuredContent.status, 'SESSION_CLOSED_OBSERVED', text(cl));
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});

test('a session with no call for its idle limit ends, its box removed; the next call is refused naming why', async () => {
  const { client } = await connect(['--images', 'stdlib', '--session-idle', '5']);
  try {
    const id = (await open(client)).structuredContent.session_id;
    await call(client, { session_id: id, code: 'x = 1' });
    assert.equal((await boxes()).length, 1);
    await waitNoBoxes(30000);
    const next = await call(client, { session_id: id, code: 'print(x)' });
    assert.match(text(next), /has ended: no call came for 5 s, its idle limit/);
  } finally {
    await client.close();
  }
});

test('what an earlier call started cannot write into a later call\'s output once its process has left the interpreter; a thread of the session can, and the receipt says whose state it saw', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const id = (await open(client, { timeout_s: 10 })).structuredContent.session_id;
    // A child process holding call 1's stdout keeps writing after call 1 ended.
    const r1 = await call(client, { session_id: id, code: [
      'import subprocess',
      'print("one", flush=True)',
      'subprocess.Popen(["sh", "-c", "while true; do echo LEAK-FROM-CALL-1; sleep 0.05; done"])',
    ].join('\n') });
    assert.equal(r1.structuredContent.said.stdout.text.split('\n')[0], 'one');
    const r2 = await call(client, { session_id: id, code: 'import time\ntime.sleep(0.5)\nprint("two")' });
    assert.equal(r2.structuredContent.said.stdout.text, 'two\n', 'call 1\'s process wrote into call 2');
    assert.equal(r2.structuredContent.seen.start.session.state, 'state from calls 1..1 of this session');
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});

// What one call may leave for the next: files in /tmp and /box/out, the environment, a
// process, the interpreter's own state (a module changed, a global, the random state).
const LEAVE = [
  'import os, sys, json, random, subprocess',
  'open("/tmp/trace", "w").write("t")',
  'open("/box/out/trace", "w").write("o")',
  'os.environ["TRACE"] = "e"',
  'json.TRACE = "m"',
  'builtins = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__',
  'builtins["TRACE"] = "b"',
  'random.seed(12345)',
  'subprocess.Popen(["sleep", "60"])',
  'print("left")',
].join('\n');
const LOOK = [
  'import os, sys, json, random',
  'found = []',
  'if os.path.exists("/tmp/trace"): found.append("tmp")',
  'if os.path.exists("/box/out/trace"): found.append("out")',
  'if "TRACE" in os.environ: found.append("env")',
  'if hasattr(json, "TRACE"): found.append("module")',
  'b = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__',
  'if "TRACE" in b: found.append("builtins")',
  'for p in os.listdir("/proc"):',
  '    if p.isdigit():',
  '        try:',
  '            if open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep"): found.append("process")',
  '        except OSError: pass',
  'r = random.getstate()',
  'random.seed(12345)',
  'if random.getstate() == r: found.append("random")',
  'try:',
  '    os.fstat(3); found.append("fd3")',
  'except OSError: pass',
  'print(",".join(found) or "none")',
].join('\n');

test('warm boxes leave nothing for the next call: a program looking for an earlier call\'s traces finds none; the same look in a session (one box kept) finds them all', async () => {
  const transport = new StdioClientTransport({ command: PYBOX, args: ['mcp', '--images', 'stdlib', '--warm', '1'],
    env: serverEnv, stderr: 'pipe' });
  const client = new Client({ name: 'pybox-tests', version: '1.0.0' });
  await client.connect(transport);
  try {
    const one = await call(client, { code: LEAVE });
    assert.equal(one.structuredContent.seen.start.kind, 'warm', one.structuredContent.seen.start.why_cold);
    assert.equal(one.structuredContent.said.stdout.text, 'left\n');
    const two = await call(client, { code: LOOK });
    assert.equal(two.structuredContent.seen.start.kind, 'warm', two.structuredContent.seen.start.why_cold);
    assert.equal(two.structuredContent.said.stdout.text, 'none\n');
    assert.notEqual(two.structuredContent.seen.box.id, one.structuredContent.seen.box.id);
    // The control: a box kept for a second program (a session) shows every trace.
    const id = (await open(client, { timeout_s: 2 })).structuredContent.session_id;
    await call(client, { session_id: id, code: LEAVE });
    const kept = await call(client, { session_id: id, code: LOOK });
    assert.equal(kept.structuredContent.said.stdout.text, 'tmp,out,env,module,builtins,process,random,fd3\n');
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});

test('a session call cancelled by the client ends its session: no result comes, its box is removed, the next call says why', async () => {
  const { client } = await connect(['--images', 'stdlib', '--max-timeout', '30']);
  try {
    const id = (await open(client, { timeout_s: 30 })).structuredContent.session_id;
    const ac = new AbortController();
    let progressed;
    const running = new Promise((r) => { progressed = r; });
    const pending = client.callTool({ name: 'run_python', arguments: { session_id: id, code: 'import time\ntime.sleep(20)' } },
      undefined, { signal: ac.signal, timeout: 60000, onprogress: (p) => { if (p.message === 'running') progressed(); } });
    await running;
    ac.abort();
    await assert.rejects(pending);
    await waitNoBoxes(20000);
    // The server has handled the cancel once the next call on that id is answered.
    let next;
    for (let i = 0; i < 100; i++) {
      next = await call(client, { session_id: id, code: 'print(1)' });
      if (!/a call runs in session/.test(text(next))) break;
    }
    assert.match(text(next), /has ended: its call 1 ended it \(CANCELLED\)/);
  } finally {
    await client.close();
  }
});

// What the program printed is all the receipt says it printed: init's call record (with
// the box's secret) that comes before its done record is init's, whatever ended the call.
test('a call that ends its session (its deadline, its interpreter killed) says on stdout exactly what the program printed: no init record, no secret', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const cases = [
      { code: 'import time\nprint("a", flush=True)\ntime.sleep(30)', timeout_s: 2 },
      { code: 'import os\nprint("a", flush=True)\nos.kill(os.getpid(), 9)' },
    ];
    for (const k of cases) {
      const id = (await open(client, { timeout_s: 10 })).structuredContent.session_id;
      const r = await call(client, { session_id: id, ...k });
      const c = r.structuredContent;
      assert.equal(c.seen.start.session.goes_on, false, text(r));
      assert.equal(c.said.stdout.text, 'a\n', JSON.stringify(c.said.stdout));
      assert.equal(c.said.stdout.total_bytes, 2);
      for (const [what, s] of [['the receipt', JSON.stringify(c)], ['the text', text(r)]]) {
        assert.ok(!s.includes('pybox-call') && !s.includes('\x1e') && !s.includes('\\u001e'), `${what} holds init's record`);
      }
      // The box's secret is 64 hex digits: none is in what is shown as the program's.
      assert.doesNotMatch(c.said.stdout.text + c.said.stderr.text, /[0-9a-f]{64}/);
    }
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});

// A thread an earlier call left in the interpreter can write on init's channel (fd 3)
// while the next call's program is still on its way: a `done` it forges must not end the
// call before init has all of its program, or the rest would be read as commands (`E`
// ending the session as if closed) and PyBox's receipts would say what did not happen.
test('a done forged on init\'s channel while a call\'s program still arrives: the rest of the program is never read as commands; the session goes on and no receipt says it was closed', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  let id;
  try {
    id = (await open(client, { timeout_s: 20 })).structuredContent.session_id;
    const spam = [
      'import threading, socket, os, time',
      'def spam():',
      '    s = socket.socket(fileno=os.dup(3))',
      '    end = time.time() + 15',
      '    while time.time() < end:',
      '        try: s.send(b"done 2 {}", socket.MSG_DONTWAIT)',
      '        except BlockingIOError: time.sleep(0.0005)',
      'threading.Thread(target=spam, daemon=True).start()',
      'x = 1',
    ].join('\n');
    const r1 = await call(client, { session_id: id, code: spam });
    assert.equal(r1.structuredContent.status, 'SESSION_CALL_ENDED', text(r1));
    // About 1 MiB, every line of it an `E` command were init to read it as commands.
    const code2 = "x = 2\nprint('call 2 ran in full')\n" + '#E\n'.repeat(340000) + 'x = 3\n';
    const r2 = await call(client, { session_id: id, code: code2, timeout_s: 20 });
    const c2 = r2.structuredContent;
    assert.equal(c2.status, 'SESSION_CALL_ENDED', text(r2));
    assert.equal(c2.seen.start.session.call, 2);
    assert.equal(c2.seen.start.session.goes_on, true);
    assert.equal(c2.asked.program.bytes, Buffer.byteLength(code2));
    const r3 = await call(client, { session_id: id, code: 'print(x)', timeout_s: 5 });
    const c3 = r3.structuredContent;
    assert.equal(c3.status, 'SESSION_CALL_ENDED', text(r3));
    assert.equal(c3.seen.start.session.call, 3);
    assert.equal(c3.seen.start.session.goes_on, true);
    assert.equal(c3.seen.init_record, null, 'the session did not end');
    assert.match(c3.said.stdout.text, /^[23]\n$/);
    const cl = await close(client, id);
    id = undefined;
    assert.equal(cl.structuredContent.status, 'SESSION_CLOSED_OBSERVED', text(cl));
    assert.equal(cl.structuredContent.seen.init_record.end, 'closed');
    assert.equal(cl.structuredContent.seen.init_record.calls, 3, 'init counted the three calls PyBox handed over');
  } finally {
    if (id !== undefined) await close(client, id).catch(() => {});
    await client.close();
  }
  await waitNoBoxes(20000);
});

// A session's lifetime bounds its calls: a call taken near its end gets what is left of
// it as its deadline, and its receipt says why; a call after it is refused, naming it.
test('a call taken near the end of its session\'s lifetime is stopped at that end, and its receipt says the lifetime cut its deadline; after the lifetime no call is taken', async () => {
  const { client } = await connect(['--images', 'stdlib']);
  try {
    const id = (await open(client, { ttl_s: 3, timeout_s: 25 })).structuredContent.session_id;
    const r = await call(client, { session_id: id, timeout_s: 20,
      code: 'import time\nfor i in range(20):\n    print(i, flush=True)\n    time.sleep(1)' });
    const c = r.structuredContent;
    assert.equal(c.status, 'SUPERVISOR_KILL_OBSERVED', text(r));
    assert.ok(c.asked.limits.timeout_s > 0 && c.asked.limits.timeout_s <= 3, `its deadline ${c.asked.limits.timeout_s} s`);
    assert.equal(c.seen.start.session.lifetime_cut_timeout_ms, 20000);
    assert.equal(c.seen.start.session.goes_on, false);
    assert.equal(c.seen.init_record.end, 'stopped', 'PyBox stopped it, not init\'s own clock past the lifetime');
    assert.match(text(r), /what was left of the session's lifetime \(ttl_s\), not 20 s/);

    const id2 = (await open(client, { ttl_s: 1 })).structuredContent.session_id;
    await new Promise((res) => setTimeout(res, 1500));
    const late = await call(client, { session_id: id2, code: 'print(1)' });
    assert.equal(late.isError, true);
    assert.match(text(late), /has ended: its lifetime ran out/);
  } finally {
    await client.close();
  }
  await waitNoBoxes(20000);
});
