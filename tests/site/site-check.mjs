// SPDX-License-Identifier: MIT
// The evidence site in headless Chromium: every page opened, failing on a console error,
// a page error, a failed load, a link that leaves the site or names no file, a
// walkthrough without its ten steps or its chart, a page without its Content-Security-Policy,
// any script that runs (a dialog; every link that is not a file is clicked); the policy
// shown to stop an inline script, a handler and a javascript: link on a copy of a page,
// and the same copy without it shown to run them (so the check can see script); every
// receipt's chart drawn by `pybox chart`, parsed as XML by Chromium and opened as an
// image; a screenshot of the walkthrough the navigation offers. Run on the committed
// records, and on them with forge.mjs's hostile records added (scripts/site-check.sh).
//
// usage: node site-check.mjs EVIDENCE_DIR OUT_DIR   (PYBOX_BIN: the pybox to draw with;
// CHROMIUM: the browser, /usr/bin/chromium by default)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const [evidence, out] = process.argv.slice(2);
if (!evidence || !out) {
  console.error('usage: node site-check.mjs EVIDENCE_DIR OUT_DIR');
  process.exit(2);
}
const site = path.resolve(evidence, 'site');
const root = path.resolve(evidence);
const problems = [];
const problem = (where, what) => problems.push(`${where}: ${what}`);
let passed = 0;

function htmlFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return htmlFiles(p);
    return e.name.endsWith('.html') ? [p] : [];
  }).sort();
}

// Where a link on a page goes: a file of the evidence folder, or a problem.
function checkLink(page, ref, ids) {
  const where = path.relative(site, page);
  if (/^[a-z][a-z0-9+.-]*:/i.test(ref) || ref.startsWith('//')) {
    problem(where, `link leaves the site: ${ref}`);
    return;
  }
  const [file, fragment] = ref.split('#');
  if (file === '') {
    if (fragment && !ids.includes(fragment)) problem(where, `no element #${fragment}`);
    return;
  }
  const target = path.resolve(path.dirname(page), decodeURIComponent(file));
  if (target !== root && !target.startsWith(root + path.sep)) {
    problem(where, `link leaves the evidence folder: ${ref}`);
  } else if (!fs.existsSync(target) || !fs.statSync(target).isFile()) {
    problem(where, `broken link: ${ref}`);
  }
}

// One tab for every page: its console, errors and failed loads are gathered while the
// page it holds loads (a new tab per page costs more than the page).
let tab = null;
let current = '';
async function open(browser, file) {
  if (tab === null) {
    tab = await browser.newPage();
    tab.on('console', (m) => {
      if (m.type() === 'error') problem(current, `console error: ${m.text()}`);
    });
    tab.on('pageerror', (e) => problem(current, `page error: ${e.message}`));
    tab.on('requestfailed', (r) => problem(current, `failed load: ${r.url()} (${r.failure()?.errorText})`));
    tab.on('dialog', async (d) => {
      problem(current, `script ran: ${d.type()} ${JSON.stringify(d.message())}`);
      await d.dismiss();
    });
  }
  current = path.relative(site, file) || file;
  await tab.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  return tab;
}

// The policy as Chromium enforces it: a copy of the index with an inline script, a
// handler and a javascript: link put in runs none of them, and Chromium says it refused
// each; the same copy without the policy runs all three (else this check could not see
// script). The copy sits beside the pages (its style sheet loads as theirs do) only while
// it is open.
async function policyEnforced(browser) {
  const index = fs.readFileSync(path.join(site, 'index.html'), 'utf8');
  const flag = (what) => `document.documentElement.dataset.${what} = 'ran'`;
  const inject = `<body>\n<script>${flag('inline')}</script>` +
    `<img src="missing.png" onerror="${flag('handler')}">` +
    `<a id="pybox-probe" href="javascript:void(${flag('link')})">probe</a>`;
  const withPolicy = index.replace('<body>', inject);
  const without = withPolicy.replace(/<meta http-equiv="Content-Security-Policy"[^>]*>\n?/, '');
  if (withPolicy === index || without === withPolicy) {
    problem('index.html', 'no <body> or no policy to probe');
    return;
  }
  const probe = path.join(site, 'pybox-policy-probe.html');
  for (const [policy, text] of [[true, withPolicy], [false, without]]) {
    fs.writeFileSync(probe, text);
    const tab2 = await browser.newPage();
    let refusals = 0;
    let waiting = null;
    // Chromium's word on each thing the policy stopped, waited for (not slept on).
    const refused = (n) => new Promise((resolve, reject) => {
      if (refusals >= n) return resolve();
      const timer = setTimeout(() => reject(new Error(`${refusals} refusals, not ${n}`)), 10000);
      waiting = { n, resolve: () => { clearTimeout(timer); resolve(); } };
    });
    tab2.on('console', (m) => {
      if (!/Content Security Policy/.test(m.text())) return;
      refusals++;
      if (waiting && refusals >= waiting.n) waiting.resolve();
    });
    tab2.on('dialog', (d) => d.dismiss());
    try {
      await tab2.goto(pathToFileURL(probe).href, { waitUntil: 'load' });
      if (policy) {
        await refused(2);
        await tab2.click('#pybox-probe');
        await refused(3);
        const flags = await tab2.evaluate(() => ({ ...document.documentElement.dataset }));
        if (Object.keys(flags).length > 0) problem('policy', `script ran under the policy: ${JSON.stringify(flags)}`);
        else console.log('site-check: the policy stopped an inline script, a handler and a javascript: link');
        const styled = await tab2.$eval('nav', (e) => getComputedStyle(e).backgroundColor);
        if (styled !== 'rgb(31, 78, 121)') problem('policy', `the style sheet did not apply: ${styled}`);
      } else {
        await tab2.waitForFunction(() => document.documentElement.dataset.handler === 'ran', { timeout: 10000 });
        await tab2.click('#pybox-probe');
        await tab2.waitForFunction(() => document.documentElement.dataset.link === 'ran', { timeout: 10000 });
        const flags = await tab2.evaluate(() => ({ ...document.documentElement.dataset }));
        if (flags.inline !== 'ran') problem('policy', 'without the policy the inline script did not run');
      }
    } catch (e) {
      problem('policy', `${policy ? 'with' : 'without'} the policy: ${e.message}`);
    } finally {
      await tab2.close();
      fs.rmSync(probe, { force: true });
    }
  }
}

const receipts = [];
for (const name of fs.readdirSync(path.join(root, 'records')).sort()) {
  if (!name.endsWith('.json')) continue;
  const rec = JSON.parse(fs.readFileSync(path.join(root, 'records', name), 'utf8'));
  for (const run of rec.runs ?? []) if (run.receipt?.seen?.kernel) receipts.push(run.receipt);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Chromium's own sandbox cannot start as root; the pages are PyBox's own, from files.
  args: process.getuid?.() === 0 ? ['--no-sandbox', '--disable-gpu'] : ['--disable-gpu'],
});
try {
  const pages = htmlFiles(site);
  if (pages.length === 0) problem(site, 'no pages');
  let walkthroughs = 0;
  for (const file of pages) {
    const page = await open(browser, file);
    const before = problems.length;
    const refs = await page.$$eval('[href], [src]', (els) =>
      els.map((e) => e.getAttribute('href') ?? e.getAttribute('src')));
    const ids = await page.$$eval('[id]', (els) => els.map((e) => e.id));
    for (const ref of refs) checkLink(file, ref, ids);
    const csp = await page.$$eval('head > meta[http-equiv="Content-Security-Policy"]',
      (els) => els.map((e) => e.getAttribute('content')));
    if (csp.length !== 1 || !/(^|; )default-src 'none'(;|$)/.test(csp[0]) ||
        !/(^|; )script-src 'none'(;|$)/.test(csp[0]) || /unsafe/.test(csp[0]))
      problem(path.relative(site, file), `no policy forbidding script: ${JSON.stringify(csp)}`);
    // What a click on a link that is no file would do (a javascript: link runs then).
    const odd = await page.$$eval('a[href]', (els) =>
      els.map((a, i) => (a.protocol === 'file:' ? -1 : i)).filter((i) => i >= 0));
    for (const i of odd) {
      problem(path.relative(site, file), 'a link that is no file, clicked');
      await page.$$eval('a[href]', (els, k) => els[k].click(), i);
    }
    if (path.basename(path.dirname(file)) === 'runs') {
      walkthroughs++;
      const steps = await page.$$eval('ol.steps > li', (els) => els.length);
      if (steps !== 10) problem(path.relative(site, file), `${steps} steps, not 10`);
      const area = await page.$eval('.chart svg', (e) => {
        const r = e.getBoundingClientRect();
        return r.width * r.height;
      }).catch(() => 0);
      if (!(area > 0)) problem(path.relative(site, file), 'no chart shown');
    }
    if (problems.length === before) passed++;
  }
  if (walkthroughs === 0) problem(site, 'no walkthrough page');
  await policyEnforced(browser);

  // Every receipt's chart, standalone: well-formed XML by xmllint, and the moments its
  // receipt says happened drawn; the first of each kind (a deadline, an OOM kill, refused
  // forks) also opened in Chromium as an image (its XML parser shows a parsererror for a
  // text that is not well-formed). The walkthroughs above showed every chart inline.
  const charts = path.join(out, 'charts');
  fs.mkdirSync(charts, { recursive: true });
  const seen = { deadline: 0, oom: 0, refused: 0 };
  for (const r of receipts) {
    const where = `chart of ${r.run_id}`;
    const svgFile = path.join(charts, `${r.run_id}.svg`);
    const res = spawnSync(process.env.PYBOX_BIN || 'pybox', ['chart'], { input: JSON.stringify(r) });
    if (res.status !== 0) {
      problem(where, `pybox chart exit ${res.status}: ${res.stderr}`);
      continue;
    }
    fs.writeFileSync(svgFile, res.stdout);
    const svg = res.stdout.toString();
    const before = problems.length;
    const lint = spawnSync('xmllint', ['--noout', '--nonet', svgFile]);
    if (lint.status !== 0) problem(where, `xmllint: ${lint.stderr || lint.error}`);
    const kinds = [];
    if (r.seen.clock === 'host_deadline') {
      kinds.push('deadline');
      if (!svg.includes('PyBox deadline')) problem(where, 'the deadline is not drawn');
    }
    if ((r.seen.kernel.final?.oom_kills ?? 0) > 0) {
      kinds.push('oom');
      if (!/[1-9][0-9]* OOM kills?/.test(svg)) problem(where, 'the OOM kill is not shown');
    }
    if ((r.seen.kernel.final?.pids_refused ?? 0) > 0) {
      kinds.push('refused');
      if (!/[1-9][0-9]* refused/.test(svg)) problem(where, 'the refused forks are not shown');
    }
    if (kinds.some((k) => seen[k] === 0)) {
      const page = await open(browser, svgFile);
      const shape = await page.evaluate(() => ({
        root: document.documentElement.localName,
        broken: document.getElementsByTagName('parsererror').length,
      }));
      if (shape.root !== 'svg' || shape.broken > 0) problem(where, 'not well-formed SVG in Chromium');
      else console.log(`site-check: ${kinds.join(', ')}: ${r.run_id}.svg opened in Chromium`);
    }
    for (const k of kinds) seen[k]++;
    if (problems.length === before) passed++;
  }
  for (const [what, n] of Object.entries(seen))
    if (n === 0) problem('records', `no receipt with ${what} to draw`);

  // The walkthrough the navigation offers, as a person sees it.
  const index = path.join(site, 'index.html');
  const page = await open(browser, index);
  const walk = await page.$eval('nav a[href^="runs/"]', (a) => a.href).catch(() => null);
  if (walk) {
    const w = await open(browser, fileURLToPath(walk));
    await w.setViewport({ width: 1200, height: 900 });
    await w.screenshot({ path: path.join(out, 'walkthrough.png'), fullPage: true });
    console.log(`site-check: walkthrough screenshot in ${path.join(out, 'walkthrough.png')}`);
  } else {
    problem('index.html', 'the navigation offers no walkthrough');
  }
} finally {
  await browser.close();
}

for (const p of problems) console.error(`site-check: ${p}`);
console.log(`site-check: ${passed} passed, ${problems.length} failed`);
process.exit(problems.length === 0 ? 0 : 1);
