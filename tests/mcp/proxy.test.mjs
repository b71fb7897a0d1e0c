// SPDX-License-Identifier: MIT
// pybox mcp --listen behind nginx, configured by docs/nginx-pybox-mcp.conf itself: TLS
// ends at nginx (a certificate the test makes with openssl, trusted by the client and
// nothing else), PyBox listens on a unix socket whose group nginx's workers are in. The
// official SDK client works through it; a request framed two ways (request smuggling)
// is stopped there and the request hidden in it never reaches PyBox.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { boxes } from './helpers.mjs';
import { HttpServer, tokenFolder, initialize, request, postHeaders } from './http-helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const CONF = path.join(here, '..', '..', 'docs', 'nginx-pybox-mcp.conf');
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));

// The documented file with this test's socket, port and certificate: each line changed
// must be found exactly once, so the test runs the file as written, not a copy of it.
function siteConf(sock, port, dir) {
  let text = fs.readFileSync(CONF, 'utf8');
  const swaps = [
    ['server unix:/run/pybox-mcp/mcp.sock;', `server unix:${sock};`],
    ['listen 443 ssl;', `listen 127.0.0.1:${port} ssl;`],
    ['ssl_certificate /etc/ssl/certs/mcp.example.org.pem;', `ssl_certificate ${dir}/cert.pem;`],
    ['ssl_certificate_key /etc/ssl/private/mcp.example.org.key;', `ssl_certificate_key ${dir}/key.pem;`],
  ];
  for (const [from, to] of swaps) {
    assert.equal(text.split(from).length, 2, `${CONF} has "${from}" once`);
    text = text.replace(from, to);
  }
  return text;
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function startNginx(dir, sock) {
  const port = await freePort();
  fs.writeFileSync(path.join(dir, 'pybox-mcp.conf'), siteConf(sock, port, dir));
  for (const t of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
    fs.mkdirSync(path.join(dir, t));
    fs.chownSync(path.join(dir, t), 65534, 65534);
  }
  fs.writeFileSync(path.join(dir, 'nginx.conf'), [
    'daemon off;', 'master_process on;', 'worker_processes 1;', 'user nobody nogroup;',
    `pid ${dir}/nginx.pid;`, `error_log ${dir}/error.log info;`,
    'events { worker_connections 64; }',
    'http {',
    `  access_log ${dir}/access.log;`,
    `  client_body_temp_path ${dir}/body;`, `  proxy_temp_path ${dir}/proxy;`, `  fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi;`, `  scgi_temp_path ${dir}/scgi;`,
    `  include ${dir}/pybox-mcp.conf;`,
    '}', ''].join('\n'));
  const proc = spawn(NGINX, ['-c', path.join(dir, 'nginx.conf'), '-p', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  // Ready once it answers on its port.
  const t0 = performance.now();
  for (;;) {
    const up = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (proc.exitCode !== null || performance.now() - t0 > 10000)
      throw new Error(`nginx did not start: ${stderr} ${fs.existsSync(`${dir}/error.log`) ? fs.readFileSync(`${dir}/error.log`, 'utf8') : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { port, proc, exited, stop: async () => { proc.kill('SIGQUIT'); return exited; } };
}

// One exchange over TLS, every byte the test's: what came back until nginx closed it.
function tlsExchange(port, ca, bytes) {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca }, () => s.write(bytes));
    let got = '';
    const timer = setTimeout(() => s.destroy(), 15000);
    s.on('data', (c) => { got += c.toString('latin1'); });
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(timer); resolve(got); });
  });
}

test('through nginx with TLS (docs/nginx-pybox-mcp.conf): the SDK client, progress as it happens, a cancellation, smuggling stopped', async () => {
  assert.ok(NGINX, 'nginx is not installed: scripts/setup.sh installs nginx-light');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pybox-proxy-'));
  fs.chmodSync(dir, 0o755); // nginx's workers (nobody) reach the socket and their folders
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'),
    '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
  const ca = fs.readFileSync(path.join(dir, 'cert.pem'));
  const sock = path.join(dir, 'mcp.sock');
  const folder = tokenFolder(['alice']);
  const server = await HttpServer.start({ listen: `unix:${sock}`, folder, args: ['--socket-group', 'nogroup', '--max-timeout', '30'] });
  let nginx;
  try {
    nginx = await startNginx(dir, sock);
    const url = `https://127.0.0.1:${nginx.port}/mcp`;
    // The SDK client in a process of its own that trusts the test's certificate.
    const out = await new Promise((resolve, reject) => {
      const p = spawn(process.execPath, [path.join(here, 'proxy-client.mjs'), url, server.tokens.alice],
        { env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(dir, 'cert.pem') }, stdio: ['ignore', 'pipe', 'pipe'] });
      let so = '';
      let se = '';
      p.stdout.on('data', (d) => { so += d; });
      p.stderr.on('data', (d) => { se += d; });
      p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(so)) : reject(new Error(`client ${code}: ${se}\n${server.stderr}`))));
    });
    assert.deepEqual(out.tools, ['run_python', 'session_open', 'session_close']);
    assert.deepEqual(out.first, { status: 'TARGET_EXIT_OBSERVED', stdout: '42\n' });
    assert.equal(out.slow.stdout, 'slow\n');
    // Progress came through as it happened: the first reading a second or more before the result.
    const readings = out.slow.progress.filter((p) => p.message.startsWith('running '));
    assert.ok(readings.length >= 2, JSON.stringify(out.slow.progress));
    assert.ok(out.slow.ms - readings[0].ms > 1000, `progress was held back: ${JSON.stringify(out.slow)}`);
    assert.match(out.cancelled, /^rejected/);
    assert.deepEqual(out.errors, []);
    await server.line(/call token=alice session=\w+ status=CANCELLED/);
    await server.line(/session token=alice session=\w+ ended \(deleted by the client\)/);
    // Without a token, through the proxy too: 401 from PyBox.
    const noToken = await tlsExchange(nginx.port, ca, 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      'Accept: application/json, text/event-stream\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    assert.match(noToken, /^HTTP\/1\.1 401 /);

    // Smuggling: a live session, and a DELETE of it hidden in a body framed two ways.
    const session = await initialize(server);
    const hidden = `DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${server.auth()}\r\nMcp-Session-Id: ${session}\r\n\r\n`;
    const body = `0\r\n\r\n${hidden}`;
    const base = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${server.auth()}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nMcp-Session-Id: ${session}\r\n`;
    const attempts = [
      `${base}Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
      `${base}Transfer-Encoding: chunked\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      `${base}Content-Length: ${body.length}\r\nContent-Length: 5\r\n\r\n${body}`,
      `${base}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n${body}`,
    ];
    const before = server.stderr.length;
    for (const a of attempts) {
      const got = await tlsExchange(nginx.port, ca, a);
      const answers = got.match(/HTTP\/1\.1 \d+/g) || [];
      assert.ok(answers.length >= 1 && /^HTTP\/1\.1 (400|501) /.test(got), `nginx answered: ${got.slice(0, 200)}`);
      assert.ok(!answers.slice(1).some((s) => s.endsWith('204')), `the hidden DELETE was answered: ${got}`);
      console.log(`# nginx: ${answers.join(", ")} for ${a.split("\r\n").slice(5, 8).join(" | ")}`);
    }
    // PyBox never saw the DELETE: the session lives, and nothing of it was logged.
    const alive = await request(server, { headers: postHeaders(server, { session }), body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(alive.status, 200);
    assert.ok(!server.stderr.slice(before).includes('ended'), server.stderr.slice(before));
    assert.deepEqual(await boxes(), []);
  } finally {
    if (nginx) await nginx.stop();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
