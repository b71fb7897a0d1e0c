// SPDX-License-Identifier: MIT
// The official SDK client through nginx over TLS (tests/mcp/proxy.test.mjs starts it with
// NODE_EXTRA_CA_CERTS naming the test's own certificate, so TLS is verified as a client
// verifies it): a call, progress while the call runs, a cancellation, the session's end.
// Arguments: URL TOKEN. Prints one JSON object of what it saw.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'pybox-proxy-test', version: '1.0.0' });
const errors = [];
client.onerror = (e) => errors.push(String(e?.message ?? e));
const out = {};
await client.connect(transport);
out.session = transport.sessionId;
out.tools = (await client.listTools()).tools.map((t) => t.name);
const first = await client.callTool({ name: 'run_python', arguments: { code: 'print(6 * 7)' } });
out.first = { status: first.structuredContent.status, stdout: first.structuredContent.said.stdout.text };
// Progress: when each arrived, against when the result did.
const t0 = performance.now();
const seen = [];
const slow = await client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(2.5)\nprint("slow")', timeout_s: 10 } },
  undefined, { onprogress: (p) => seen.push({ message: p.message, ms: performance.now() - t0 }) });
out.slow = { status: slow.structuredContent.status, stdout: slow.structuredContent.said.stdout.text, ms: performance.now() - t0, progress: seen };
// Cancelled while running.
const abort = new AbortController();
const cancelled = client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(20)', timeout_s: 25 } },
  undefined, { signal: abort.signal, onprogress: (p) => { if (p.message === 'running') abort.abort('cancel'); } });
out.cancelled = await cancelled.then(() => 'answered', (e) => `rejected: ${e.name}`);
await client.ping();
await transport.terminateSession();
await client.close();
out.errors = errors.filter((e) => !/AbortError|aborted/.test(e));
process.stdout.write(JSON.stringify(out) + '\n');
