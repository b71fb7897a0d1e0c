// SPDX-License-Identifier: MIT
// For the leak check and the soak: a throwaway PyBox installation, and what an installation's runs left behind on either backend, as pybox-campaign inspect says.
//
// What a run leaves while it is alive (pybox/journal.c, pybox/uid.c, docs/cleanup.md):
// its note; its uid's lease; with Docker, its box and volume (label pybox.install) and
// the box's cgroup; with the native backend, its cgroup leaf (or scope) and its staging
// folder. pybox-campaign inspect (docs/campaign.md) asks each backend and the kernel for
// them: no layout is spelled here.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

// The pybox-campaign beside the pybox under test (or PYBOX_CAMPAIGN_BIN).
export const campaignBin = () => process.env.PYBOX_CAMPAIGN_BIN
  || path.join(path.dirname(process.env.PYBOX_BIN || 'pybox'), 'pybox-campaign');

// What the installation in home has now, on these backends (pybox-campaign inspect
// --json): { installation, backends: { name: { items, kept } }, notes, leases }. Throws
// when a backend cannot say.
// With { since, until } (seconds since the epoch), each backend's events between the two
// times too (backends.name.events: what its engine logged, or the folders a box's making
// changed); with { remove: true }, everything of the installation removed first (what is
// listed is what could not go).
export function inspect(home, backends, { since, until, remove } = {}) {
  const args = ['inspect', '--home', home, '--json'];
  for (const b of backends) args.push('--backend', b);
  if (since !== undefined) args.push('--since', since.toFixed(9), '--until', until.toFixed(9));
  if (remove) args.push('--remove');
  return JSON.parse(execFileSync(campaignBin(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
}
const itemsOf = (j, backend, kind) => ((j.backends[backend] || {}).items || []).filter((x) => x.kind === kind);

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

// The installation's native cgroup parents (folders PyBox made once and keeps; none under
// systemd), as the backend says (its kept).
export function nativeParents(home) {
  return inspect(home, ['native']).backends.native.kept;
}

// Everything of the installation that is there now: ids and names by kind. Docker boxes
// and volumes only when the backend is docker (or always: both backends may be in use).
export async function snapshot({ home, runIds = new Set(), docker = true }) {
  const j = inspect(home, docker ? ['native', 'docker'] : ['native']);
  const native = itemsOf(j, 'native', 'box');
  return {
    boxes: docker ? itemsOf(j, 'docker', 'box').map((b) => b.id) : [],
    volumes: docker ? itemsOf(j, 'docker', 'volume').map((v) => v.id) : [],
    docker_cgroups: [],
    notes: j.notes.map((n) => n.run_id),
    native_leaves: native.flatMap((b) => b.cgroup),
    native_staging: native.filter((b) => b.state.includes('staging')).map((b) => b.run_id),
    leases: j.leases.filter((l) => runIds.has(l.run_id)).map((l) => `${l.uid}:${l.run_id}`),
  };
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

// Remove what the installation has on every backend (pybox-campaign inspect --remove: its
// boxes and volumes, forced, and its native cgroup parents, once empty) and its folder.
export async function removeInstall(home) {
  inspect(home, [], { remove: true }); // every backend: one that cannot be opened is skipped
  fs.rmSync(home, { recursive: true, force: true });
}
