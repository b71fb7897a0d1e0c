// SPDX-License-Identifier: MIT
// An MCP stdio transport for the official SDK client that owns its server process: every message the server sends is also shown to a tap, stdin can be ended alone, and the server's exit is kept.
//
// The SDK's own StdioClientTransport signals the server 2 s after closing its stdin and
// hides the exit status; the leak check and the soak need the server to end by itself
// (a sanitizer's report comes at exit) and its exit code. The framing is the SDK's own
// (ReadBuffer, serializeMessage).
import { spawn } from 'node:child_process';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';

export class ProcessTransport {
  // command, args, env: the server; tap(message): sees every message from the server
  // before the client does (may be undefined).
  constructor({ command, args, env, tap }) {
    this.params = { command, args, env };
    this.tap = tap;
    this.stderr = '';
    this.stderrMax = 4 * 1024 * 1024; // a sanitizer's report is kept whole up to this
    this.readBuffer = new ReadBuffer({ maxBufferSize: 64 * 1024 * 1024 });
    this.exit = null; // {code, signal} once the server has exited
  }

  async start() {
    const p = spawn(this.params.command, this.params.args, { env: this.params.env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = p;
    this.exited = new Promise((resolve) => p.on('close', (code, signal) => {
      this.exit = { code, signal };
      resolve(this.exit);
      this.onclose?.();
    }));
    p.stdout.on('data', (chunk) => {
      try {
        this.readBuffer.append(chunk);
        for (;;) {
          const m = this.readBuffer.readMessage();
          if (m === null) break;
          this.tap?.(m);
          this.onmessage?.(m);
        }
      } catch (e) {
        this.onerror?.(e);
      }
    });
    p.stderr.on('data', (d) => {
      if (this.stderr.length < this.stderrMax) this.stderr += d.toString('utf8');
    });
    p.stdin.on('error', (e) => this.onerror?.(e));
    await new Promise((resolve, reject) => {
      p.once('spawn', resolve);
      p.once('error', reject);
    });
  }

  get pid() { return this.proc?.pid ?? null; }

  send(message) {
    return new Promise((resolve, reject) => {
      if (!this.proc || this.stdinEnded) {
        reject(new Error('the server\'s stdin is closed'));
        return;
      }
      if (this.proc.stdin.write(serializeMessage(message))) resolve();
      else this.proc.stdin.once('drain', resolve);
    });
  }

  // Ends the server's stdin only: the server shuts down by itself.
  endInput() {
    if (this.proc && !this.stdinEnded) {
      this.stdinEnded = true;
      this.proc.stdin.end();
    }
  }

  // The client's close: stdin ends; the process is waited for by whoever asks `exited`.
  async close() { this.endInput(); }

  // Waits for the exit, at most limitMs; then SIGKILL (counted as not exiting by itself).
  async waitExit(limitMs) {
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), limitMs); });
    const ex = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (ex) return { ...ex, byItself: true };
    this.proc.kill('SIGKILL');
    return { ...(await this.exited), byItself: false };
  }
}
