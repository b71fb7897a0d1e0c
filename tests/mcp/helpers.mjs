// SPDX-License-Identifier: MIT
// Shared by the MCP client tests: the pybox binary and installation the integration
// harness set up (tests/test_mcp.c), the installation's boxes and what its backend saw made, as pybox-campaign inspect says, and a raw line client.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import assert from 'node:assert/strict';
import { inspect } from './install.mjs';

export const PYBOX = process.env.PYBOX_BIN;
export const INSTALL = process.env.PYBOX_TEST_INSTALL_ID;
assert.ok(PYBOX && process.env.PYBOX_HOME && INSTALL,
  'run through the integration tests (make integration): PYBOX_BIN, PYBOX_HOME and PYBOX_TEST_INSTALL_ID are set there');

// What the server needs from the environment, passed on explicitly (MCP clients start
// servers with a reduced environment).
export const serverEnv = { PYBOX_HOME: process.env.PYBOX_HOME, PATH: process.env.PATH };
if (process.env.DOCKER_HOST) serverEnv.DOCKER_HOST = process.env.DOCKER_HOST;
// The backend the tests run on (as pybox reads it): docker, or native (boxes PyBox makes
// itself). Its boxes are asked of pybox-campaign inspect, which asks the backend.
// The server is always told which, so that it never falls back to its own default.
export const BACKEND = process.env.PYBOX_BACKEND || 'docker';
// The cases whose wall-clock bounds a machine too slow for them cannot meet (the data
// image's imports within a call's deadline), left out as the integration runner leaves
// out the cases it tags timing (CK_EXCLUDE_TAGS=timing, tests/itest.c): a reason to skip
// them, or false.
const timingLeftOut = (process.env.CK_EXCLUDE_TAGS || '').split(/[ ,]+/).includes('timing');
export const SKIP_TIMING = timingLeftOut && 'timing: left out on this machine (CK_EXCLUDE_TAGS)';
// The same machine, for the tests over HTTP that repeat there, many boxes and minutes of
// emulated time over, what the stdio tests show on that host (a transport's concern, not
// the host's): left out where the timing cases are (make vm-check under software
// emulation); make check runs them all.
export const SKIP_LONG_HTTP = timingLeftOut && 'timing: a long test over HTTP, left out on this machine (CK_EXCLUDE_TAGS)';
serverEnv.PYBOX_BACKEND = BACKEND;

// This installation's boxes (any state) and volumes, as its backend lists them: { id,
// name, run_id, running, cgroup, procs } (pybox-campaign inspect).
const items = (kind) => inspect(process.env.PYBOX_HOME, [BACKEND]).backends[BACKEND].items.filter((x) => x.kind === kind);
export const boxes = async () => items('box');
export const volumes = async () => items('volume');

// What the backend saw made between two times (unix seconds), as pybox-campaign inspect
// says (the backend's events, pybox/box.h): Docker's engine logs each box it creates; the
// native backend keeps no log, and a box made (or removed) changes the folders it is made
// in, whose modification time the kernel keeps.
export async function createdBetween(since, until) {
  const events = inspect(process.env.PYBOX_HOME, [BACKEND], { since, until }).backends[BACKEND].events;
  return BACKEND === 'native' ? events : events.filter((e) => e.kind === 'box' && e.action === 'create');
}

// Ask until none of this installation's boxes is left; returns the time it
// took (ms). Fails after limitMs.
export async function waitNoBoxes(limitMs) {
  const t0 = performance.now();
  for (;;) {
    const left = await boxes();
    if (left.length === 0) return performance.now() - t0;
    if (performance.now() - t0 > limitMs) assert.fail(`boxes still there after ${limitMs} ms: ${left.map((b) => b.name).join(' ')}`);
    await new Promise((r) => setImmediate(r));
  }
}

// A server's arguments with --warm 0 unless they name --warm: the tests that count the
// boxes a call builds (none for a refusal, one per call) run a server that keeps none
// waiting; the warm boxes have tests of their own.
export const coldUnlessAsked = (args) => args.some((a) => a.startsWith('--warm')) ? args : [...args, '--warm', '0'];

// A raw client: one message per line, every line kept as it came (bytes), so tests can
// see exactly what reached stdout.
export class RawServer {
  constructor(args = []) {
    this.proc = spawn(PYBOX, ['mcp', ...coldUnlessAsked(args)], { env: serverEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    this.raw = [];
    this.messages = [];
    this.waiters = [];
    this.stderr = '';
    let pending = Buffer.alloc(0);
    this.proc.stdout.on('data', (chunk) => {
      this.raw.push(chunk);
      pending = Buffer.concat([pending, chunk]);
      let nl;
      while ((nl = pending.indexOf(10)) >= 0) {
        const line = pending.subarray(0, nl).toString('utf8');
        pending = pending.subarray(nl + 1);
        const msg = JSON.parse(line); // a line that is not JSON fails the test here
        this.messages.push(msg);
        this.waiters = this.waiters.filter((w) => !(w.pred(msg) && (w.resolve(msg), true)));
      }
    });
    this.proc.stderr.on('data', (c) => { this.stderr += c.toString('utf8'); });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
  }

  send(obj) { this.sendRaw(JSON.stringify(obj) + '\n'); }
  sendRaw(text) { this.proc.stdin.write(text); }

  // The first message (already received or to come) that pred accepts.
  next(pred, limitMs = 60000) {
    const seen = this.messages.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no such message within ${limitMs} ms; stderr: ${this.stderr}`)), limitMs);
      this.waiters.push({ pred, resolve: (m) => { clearTimeout(timer); resolve(m); } });
    });
  }

  reply(id, limitMs) { return this.next((m) => m.id === id && (m.result !== undefined || m.error !== undefined), limitMs); }

  async initialize() {
    this.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    const r = await this.reply('init');
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }

  // Close stdin and wait for the server to end; returns its exit and the time it took.
  async close() {
    const t0 = performance.now();
    this.proc.stdin.end();
    const ex = await this.exited;
    return { ...ex, ms: performance.now() - t0 };
  }

  bytes() { return Buffer.concat(this.raw); }
}
