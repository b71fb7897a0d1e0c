// SPDX-License-Identifier: MIT
// Hostile records for the site check: copies of a committed record with a receipt, each
// string that reaches a page (the record's backend, host.backends' keys and values, the
// case's title, claim and labels, the runs' names and checks, the receipt's words) set to
// an attack on the Markdown, the HTML text, an attribute or a link. Each copy is named by
// its SHA-256 as the campaign names records, newer than every other record (so the pages
// cite it), its run ids fresh (so each run gets its walkthrough), and without the
// campaign's receipt key (a record from before receipts were signed: its receipts are not
// verified, so they can be changed too).
//
// usage: node forge.mjs RECORDS_DIR   (adds the forged records to that folder)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node forge.mjs RECORDS_DIR');
  process.exit(2);
}

// Every attack is an alert(N): site-check.mjs fails on any dialog, and on any link that
// is not a file of the evidence folder.
export const attacks = [
  '[docs](javascript&#58;alert&#40;1&#41;.md)',
  '[x](javascript:alert(2))',
  '<script>alert(3)</script>',
  '" onmouseover="alert(4)" x="',
  "' onfocus='alert(5)' autofocus x='",
  '<img src=x onerror=alert(6)>',
  '[y](&#x6a;avascript:alert(7).md)',
  '[z](//example.org/x.md)',
  '[w](records/../../../../etc/passwd)',
  '`a` [b](javascript%3aalert(8).md) **c',
  '<svg onload=alert(9)>',
  '</pre></code><a href="javascript:alert(10)">x</a>',
  '[v](README.md#"><script>alert(11)</script>)',
  '&lt;script&gt;alert(12)&lt;/script&gt;',
];

const names = fs.readdirSync(dir).filter((n) => /^[0-9a-f]{64}\.json$/.test(n)).sort();
const records = names.map((n) => JSON.parse(fs.readFileSync(path.join(dir, n), 'utf8')));
const base = records.find((r) => r.verdict === 'pass' && r.case?.kind === 'receipt' &&
  (r.runs ?? []).some((run) => run.receipt?.seen?.kernel));
if (!base) {
  console.error(`forge: no passing receipt record with a receipt in ${dir}`);
  process.exit(1);
}
const newest = records.map((r) => r.started).sort().at(-1);
const later = (t, k) => new Date(Date.parse(t) + 60000 * (k + 1)).toISOString();

let next = 0;
const attack = () => attacks[next++ % attacks.length];
// Every string of an object's tree set to an attack, except what must keep its shape for
// the record to be read at all (times, verdicts, ok, run ids, schemas, the checked paths).
const keep = new Set(['schema', 'started', 'finished', 'verdict', 'run_id', 'at', 'path', 'op', 'kind', 'id',
  'sha256', 'signature', 'key_id', 'receipt_key', 'receipt_key_id', 'clock', 'status', 'pass']);
function poison(o) {
  for (const [k, v] of Object.entries(o)) {
    if (keep.has(k)) continue;
    if (typeof v === 'string') o[k] = attack();
    else if (v && typeof v === 'object') poison(v);
  }
}

for (let k = 0; k < 3; k++) {
  const r = structuredClone(base);
  r.started = later(newest, 2 * k);
  r.finished = later(newest, 2 * k + 1);
  delete r.host.receipt_key;
  delete r.host.receipt_key_id;
  r.backend = attacks[k]; // the first: the red team's record
  r.host.backends = { [attack()]: attack(), [attacks[0]]: attack() };
  poison(r.host);
  poison(r.case);
  delete r.case.show; // its paths must stay paths; its labels are poisoned below
  r.case.show = [{ label: attack(), path: 'receipt.status' }];
  for (const run of r.runs) {
    run.name = attack();
    if (run.receipt) {
      run.receipt.run_id = crypto.randomBytes(16).toString('hex');
      poison(run.receipt.asked ?? {});
      poison(run.receipt.said ?? {});
      run.receipt.unknown = [attack(), attack()];
      if (run.receipt.seen) run.receipt.seen.backend = attack();
    }
    for (const x of run.observed?.checks ?? []) {
      x.name = attack();
      x.detail = attack();
    }
  }
  const text = JSON.stringify(r, null, 2) + '\n';
  const name = crypto.createHash('sha256').update(text).digest('hex') + '.json';
  fs.writeFileSync(path.join(dir, name), text);
  console.log(`forge: ${name} (backend ${JSON.stringify(r.backend)})`);
}
