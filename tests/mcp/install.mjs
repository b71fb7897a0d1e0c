// SPDX-License-Identifier: MIT
// For the leak check and the soak: a throwaway PyBox installation, the engine asked directly, and what an installation's runs left behind on either backend.
//
// What a run leaves while it is alive (pybox/journal.c, pybox/uid.c, docs/cleanup.md):
// its note under <home>/runs/; its uid's lease in /run/pybox/uids/<uid> ("<run id>
// <expires>"); with Docker, its box and volume (label pybox.install) and the box's cgroup;
// with the native backend, its cgroup leaf pybox-<install id>/<run id> in each
// controller and its staging folder <home>/native/staging/<run id>.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const socketPath = () => {
  const h = process.env.DOCKER_HOST;
  return h && h.startsWith('unix://') ? h.slice(7) : '/var/run/docker.sock';
};

function request(method, p, limitMs = 10000) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socketPath(), path: p, method, timeout: limitMs }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error(`engine ${method} ${p}: no answer within ${limitMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

export async function engine(p) {
  const r = await request('GET', p);
  if (r.status !== 200) throw new Error(`engine GET ${p}: ${r.status} ${r.body.slice(0, 200)}`);
  return JSON.parse(r.body);
}

const filter = (installId) => encodeURIComponent(JSON.stringify({ label: [`pybox.install=${installId}`] }));
export const dockerBoxes = (installId) => engine(`/containers/json?all=1&filters=${filter(installId)}`);
export const dockerVolumes = async (installId) => (await engine(`/volumes?filters=${filter(installId)}`)).Volumes || [];

export function installIdOf(home) {
  const id = fs.readFileSync(path.join(home, 'install-id'), 'utf8').trim(); // pybox/state.c
  if (!/^[0-9a-f]{32}$/.test(id)) throw new Error(`${home}/install-id does not hold an installation id`);
  return id;
}

// The main installation's folder, as pybox finds it (pybox/state.c), or PYBOX_MAIN_HOME.
export function mainHome() {
  if (process.env.PYBOX_MAIN_HOME) return process.env.PYBOX_MAIN_HOME;
  if (process.getuid() === 0) return '/var/lib/pybox';
  if (process.env.XDG_STATE_HOME) return path.join(process.env.XDG_STATE_HOME, 'pybox');
  return path.join(process.env.HOME, '.local/state/pybox');
}

// A new installation under tmp: the main one's Docker image pins (the images are the
// engine's, shared) and a link to its root filesystem cache. Native pins are not copied:
// a native image is a folder of the installation that built it (ensureStdlib builds
// one). Returns its folder.
export function throwawayHome(tmp) {
  const home = path.join(tmp, 'home');
  fs.mkdirSync(home, { mode: 0o700 });
  const main = mainHome();
  if (fs.existsSync(path.join(main, 'images.json'))) fs.copyFileSync(path.join(main, 'images.json'), path.join(home, 'images.json'));
  if (fs.existsSync(path.join(main, 'cache'))) fs.symlinkSync(path.join(main, 'cache'), path.join(home, 'cache'));
  return home;
}

// An installation id for env.PYBOX_HOME when it has none yet (32 hex digits, as pybox
// makes one: pybox/state.c), and the stdlib image pinned for the backend. Docker: the
// pins copied from the main installation are used as they are; nothing is ever built or
// imported into the engine, which other installations share. Native: built from the
// cached root filesystem into this installation's own folder when not pinned yet (about
// 2 s).
export function ensureStdlib(bin, env, backend, repo) {
  const home = env.PYBOX_HOME;
  const idFile = path.join(home, 'install-id');
  if (!fs.existsSync(idFile)) fs.writeFileSync(idFile, `${randomBytes(16).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  const pins = path.join(home, backend === 'docker' ? 'images.json' : `images-${backend}.json`);
  let pinned = false;
  try { pinned = !!JSON.parse(fs.readFileSync(pins, 'utf8')).stdlib; } catch { pinned = false; }
  if (pinned) return;
  if (backend === 'docker') throw new Error(`no stdlib image pinned in ${pins} (make setup)`);
  execFileSync(bin, ['image', 'build', 'stdlib', '--backend', backend],
    { env: { ...env, PYBOX_IMAGES: path.join(repo, 'images') }, stdio: ['ignore', 'ignore', 'pipe'] });
}

const cgroupRoot = () => process.env.PYBOX_TEST_CGROUP_ROOT || '/sys/fs/cgroup';
const ls = (d) => { try { return fs.readdirSync(d); } catch { return []; } };
const isRunId = (n) => /^[0-9a-f]{32}$/.test(n);

// On cgroup v2 under systemd each native box is in a scope of its own in pybox.slice,
// "pybox-<install>-<run>.scope", PyBox's leaf "box" inside it (pybox/native/cgroup.h,
// docs/cgroups.md); elsewhere a leaf per box under the installation's parent.
const underSystemd = () => fs.existsSync(path.join(cgroupRoot(), 'cgroup.controllers'))
  && fs.existsSync('/run/systemd/system');

// Native cgroup leaves of an installation: [{controller, run}] (v1 controllers and v2).
export function nativeLeaves(installId) {
  const root = cgroupRoot();
  const out = [];
  if (underSystemd()) {
    const prefix = `pybox-${installId}-`;
    for (const n of ls(path.join(root, 'pybox.slice'))) {
      const run = n.startsWith(prefix) && n.endsWith('.scope') ? n.slice(prefix.length, -6) : '';
      if (isRunId(run) && fs.existsSync(path.join(root, 'pybox.slice', n, 'box'))) out.push({ controller: 'v2', run });
    }
    return out;
  }
  const parents = ['memory', 'pids', 'cpu', 'cpuacct', 'cpu,cpuacct', 'unified', '']
    .map((c) => [c || 'v2', path.join(root, c, `pybox-${installId}`)]);
  const seen = new Set();
  for (const [c, dir] of parents) {
    let real;
    try { real = fs.realpathSync(dir); } catch { continue; }
    if (seen.has(real)) continue;
    seen.add(real);
    for (const n of ls(dir)) if (isRunId(n)) out.push({ controller: c, run: n });
  }
  return out;
}

// The installation's native cgroup parents (folders PyBox made once and keeps; none under
// systemd).
export function nativeParents(installId) {
  const root = cgroupRoot();
  if (underSystemd()) return [];
  return ['memory', 'pids', 'cpu', 'cpuacct', 'cpu,cpuacct', 'unified', '']
    .map((c) => path.join(root, c, `pybox-${installId}`)).filter((d) => fs.existsSync(d));
}

// Lease files naming one of runIds: [{uid, run, expires}].
export function leasesOf(runIds) {
  const dir = '/run/pybox/uids';
  const out = [];
  for (const n of ls(dir)) {
    let text = '';
    try { text = fs.readFileSync(path.join(dir, n), 'utf8'); } catch { continue; }
    const [run, exp] = text.trim().split(' ');
    if (runIds.has(run)) out.push({ uid: n, run, expires: Number(exp) });
  }
  return out;
}

// Everything of the installation that is there now: ids and names by kind. Docker boxes
// and volumes only when the backend is docker (or always: both backends may be in use).
export async function snapshot({ home, installId, runIds = new Set(), docker = true }) {
  const s = {
    boxes: [], volumes: [], docker_cgroups: [],
    notes: ls(path.join(home, 'runs')),
    native_leaves: nativeLeaves(installId).map((l) => `${l.controller}/${l.run}`),
    native_staging: ls(path.join(home, 'native', 'staging')),
    leases: leasesOf(runIds).map((l) => `${l.uid}:${l.run}`),
  };
  if (docker) {
    s.boxes = (await dockerBoxes(installId)).map((b) => b.Id);
    s.volumes = (await dockerVolumes(installId)).map((v) => v.Name);
  }
  return s;
}

// Docker cgroup folders of these box ids still on the host (v1 and v2 layouts).
export function dockerCgroupsOf(boxIds) {
  const root = cgroupRoot();
  const out = [];
  for (const id of boxIds) {
    for (const p of [`memory/docker/${id}`, `pids/docker/${id}`, `cpuacct/docker/${id}`, `docker/${id}`,
      `system.slice/docker-${id}.scope`])
      if (fs.existsSync(path.join(root, p))) out.push(p);
  }
  return out;
}

// What is in after but not in before, by kind; counts and a few names.
export function added(before, after) {
  const d = {};
  let total = 0;
  for (const k of Object.keys(after)) {
    const pre = new Set(before[k] || []);
    const extra = after[k].filter((x) => !pre.has(x));
    d[k] = extra;
    total += extra.length;
  }
  return { by_kind: d, total };
}

// Remove what the installation has in the engine (only ever its own label), its native
// cgroup parents (empty by now) and its folder.
export async function removeInstall(home, installId) {
  for (const b of await dockerBoxes(installId).catch(() => [])) await request('DELETE', `/containers/${b.Id}?force=1&v=1`);
  for (const v of await dockerVolumes(installId).catch(() => [])) await request('DELETE', `/volumes/${v.Name}?force=1`);
  for (const d of nativeParents(installId)) {
    try { fs.rmdirSync(d); } catch { /* a leaf is still there: it is reported as left */ }
  }
  fs.rmSync(home, { recursive: true, force: true });
}
