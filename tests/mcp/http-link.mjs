// SPDX-License-Identifier: MIT
// A raw JSON-RPC link to pybox mcp --listen for the drivers (soak, campaign): send(message)
// POSTs it and returns once it is written; every message that comes back, from a JSON
// answer or an SSE stream as its events arrive, goes to tap(message), as a line on stdio
// would. The session id comes from the answer to initialize and goes on every request
// after it, with the protocol version. Nothing here waits for an answer.
import http from 'node:http';

export class HttpLink {
  // url: http://HOST:PORT/mcp; token: the bearer; tap(message).
  constructor({ url, token, tap }) {
    this.url = new URL(url);
    this.token = token;
    this.tap = tap;
    this.session = null;
    this.version = null;
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    this.statuses = {}; // HTTP status -> how many
    this.errors = [];   // transport failures (a connection reset, a stream cut)
  }

  headers() {
    return {
      Authorization: `Bearer ${this.token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...(this.session ? { 'Mcp-Session-Id': this.session } : {}),
      ...(this.version ? { 'MCP-Protocol-Version': this.version } : {}),
    };
  }

  // Messages of an SSE body as they come: one JSON message per event's data.
  sse(res) {
    let pending = '';
    res.on('data', (c) => {
      pending += c.toString('utf8');
      let end;
      while ((end = pending.indexOf('\n\n')) >= 0) {
        const event = pending.slice(0, end);
        pending = pending.slice(end + 2);
        const data = event.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data !== '') this.deliver(data);
      }
    });
  }

  deliver(text) {
    let m;
    try { m = JSON.parse(text); } catch { this.errors.push(`not JSON: ${text.slice(0, 80)}`); return; }
    if (m.id === 'init' && m.result?.protocolVersion) this.version = m.result.protocolVersion;
    this.tap?.(m);
  }

  send(message) {
    return new Promise((resolve) => {
      const body = JSON.stringify(message);
      const req = http.request({ host: this.url.hostname, port: this.url.port, path: this.url.pathname, method: 'POST',
        headers: { ...this.headers(), 'Content-Length': Buffer.byteLength(body) }, agent: this.agent }, (res) => {
        this.statuses[res.statusCode] = (this.statuses[res.statusCode] || 0) + 1;
        if (res.headers['mcp-session-id']) this.session = res.headers['mcp-session-id'];
        const type = String(res.headers['content-type'] || '');
        if (type.startsWith('text/event-stream')) {
          this.sse(res);
        } else {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (text !== '') this.deliver(text);
          });
        }
        res.on('error', (e) => this.errors.push(e.message));
      });
      req.on('error', (e) => { this.errors.push(e.message); resolve(); });
      req.end(body, resolve);
    });
  }

  close() { this.agent.destroy(); }
}
