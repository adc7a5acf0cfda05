// End-to-end test of the operator console in headless Chromium.
//
//   node tests/console/e2e.mjs --keyed URL --open URL --shots DIR --profile DIR
//
// --keyed is a server with tenants `nas` (key nas-key-1) and `acme`
// (acme-key-1), --open one in open mode, both empty; scripts/console-e2e.sh
// starts them. Each check prints `ok - ...` or `FAIL - ...`; the process
// exits non-zero when any failed. Screenshots of the main views go to --shots.

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
for (const need of ['keyed', 'open', 'shots', 'profile']) {
  if (!args[need]) {
    console.error(`usage: e2e.mjs --keyed URL --open URL --shots DIR --profile DIR (missing --${need})`);
    process.exit(2);
  }
}
const KEYED = args.keyed;
const OPEN = args.open;
const NAS = 'nas-key-1';
const ACME = 'acme-key-1';
// Text that only tenant acme has: it must never show while nas is signed in.
const ACME_MARKERS = ['acme-only-marker-7731', 'Org:acmecorp-private', 'Person:mallory', 'acme-late-marker-9902'];
const XSS = '<img src=x onerror="window.__xss=1">';
const year = (y) => Date.UTC(y, 0, 1);

let passed = 0;
let failed = 0;
const failures = [];

async function check(name, fn) {
  try {
    await fn();
    passed += 1;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed += 1;
    failures.push(name);
    console.log(`FAIL - ${name}\n    ${String(e && e.stack ? e.stack : e).split('\n').slice(0, 4).join('\n    ')}`);
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

// --- the data, through the REST API -------------------------------------------------

async function api(base, key, method, pathname, body) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(base + pathname, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}
const assertFact = (base, key, fact) => api(base, key, 'POST', '/api/facts', fact);
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

async function seed() {
  const f = {};
  // Distinct record times: the slider steps through them.
  const add = async (name, key, fact) => {
    f[name] = await assertFact(KEYED, key, fact);
    await pause(15);
  };
  await add('acme', NAS, { subject: 'Person:sarah', predicate: 'works_at', object: 'Org:acme', valid_from: year(2020), source: 'hr-import' });
  await add('role1', NAS, { subject: 'Person:sarah', predicate: 'role', object: 'staff engineer', valid_from: year(2021), source: 'hr-import' });
  await add('lives', NAS, { subject: 'Person:sarah', predicate: 'lives_in', object: 'City:lisbon', valid_from: year(2019), source: 'crm' });
  await add('knows', NAS, { subject: 'Person:sarah', predicate: 'knows', object: 'Person:tom', valid_from: year(2018), source: 'crm' });
  await add('tom', NAS, { subject: 'Person:tom', predicate: 'works_at', object: 'Org:globex', valid_from: year(2019) });
  await add('globexCity', NAS, { subject: 'Org:globex', predicate: 'located_in', object: 'City:berlin', valid_from: year(2010) });
  await add('acmeCity', NAS, { subject: 'Org:acme', predicate: 'located_in', object: 'City:paris', valid_from: year(2005) });
  await add('rumor', NAS, { subject: 'Person:sarah', predicate: 'rumor', object: 'leaving for Org:initech', confidence: 0.4, source: 'chat' });
  await add('xss', NAS, { subject: 'Note:markup', predicate: 'body', object: XSS, source: 'web form' });
  await add('globex', NAS, { subject: 'Person:sarah', predicate: 'works_at', object: 'Org:globex', valid_from: year(2024), source: 'linkedin' });
  await add('role2', NAS, { subject: 'Person:sarah', predicate: 'role', object: 'principal engineer', valid_from: Date.UTC(2024, 6, 1), source: 'linkedin' });
  // Tenant acme: the same subject name, and things only acme has.
  await add('acmeSarah', ACME, { subject: 'Person:sarah', predicate: 'works_at', object: 'Org:acmecorp-private', source: 'acme-only' });
  await add('mallory', ACME, { subject: 'Person:mallory', predicate: 'secret', object: 'acme-only-marker-7731' });
  await add('mallory2', ACME, { subject: 'Person:mallory', predicate: 'knows', object: 'Person:sarah' });
  // An open alert for nas: candidates over 5% of its live facts.
  await api(KEYED, NAS, 'PUT', '/api/alerts/rules', { confidence: { max_share: 0.05, min_facts: 4 } });
  const ev = await api(KEYED, NAS, 'POST', '/api/alerts/evaluate');
  assert(ev.fired.length >= 1, `no alert fired: ${JSON.stringify(ev)}`);
  // And one for acme, which nas must not see.
  await api(KEYED, ACME, 'PUT', '/api/alerts/rules', { confidence: { max_share: 0.0, min_facts: 1 } });
  await assertFact(KEYED, ACME, { subject: 'Person:mallory', predicate: 'hint', object: 'maybe', confidence: 0.2 });
  await api(KEYED, ACME, 'POST', '/api/alerts/evaluate');
  return f;
}

// --- the browser ---------------------------------------------------------------

fs.rmSync(args.profile, { recursive: true, force: true });
fs.mkdirSync(args.profile, { recursive: true });
fs.mkdirSync(args.shots, { recursive: true });

const context = await chromium.launchPersistentContext(args.profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
  viewport: { width: 1366, height: 768 },
  colorScheme: 'light',
});
context.setDefaultTimeout(10_000);
const page = context.pages()[0] || (await context.newPage());

// Everything the page asks for stays on the servers under test; no CSP
// violation and no script error may happen anywhere.
const offOrigin = [];
const pageErrors = [];
const cspErrors = [];
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(KEYED) && !u.startsWith(OPEN) && !u.startsWith('data:')) offOrigin.push(u);
});
page.on('pageerror', (e) => pageErrors.push(e.message));
page.on('console', (m) => {
  if (/Content.Security.Policy/i.test(m.text())) cspErrors.push(m.text());
});

/** The slider's label at transaction `tx` (and not at tx 10 when tx is 1). */
const txLabel = (tx) => new RegExp(`\\btx ${tx}$`);
const shot = (name) => page.screenshot({ path: path.join(args.shots, `console-${name}.png`) });
const mainText = () => page.locator('#main').innerText();
const bodyText = () => page.locator('body').innerText();

/** Waits until the text of `selector` satisfies `pred` (the views render asynchronously). */
async function waitText(selector, pred, what, timeout = 10_000) {
  const end = Date.now() + timeout;
  let last = '';
  while (Date.now() < end) {
    last = await page.locator(selector).innerText({ timeout: 1000 }).catch(() => '');
    if (pred(last)) return last;
    await pause(100);
  }
  throw new Error(`timed out waiting for ${what}; ${selector} shows:\n${last.slice(0, 1200)}`);
}
const waitMain = (pred, what, timeout) => waitText('#main', pred, what, timeout);
const waitList = (pred, what, timeout) => waitText('#facts-list', pred, what, timeout);

/** No text of tenant acme anywhere on the page. */
async function noAcme(where) {
  const text = await bodyText();
  for (const m of ACME_MARKERS) assert(!text.includes(m), `${where}: the page shows acme's ${m}`);
}

/** Opens a view and waits until it has rendered. */
async function go(hash) {
  const before = await page.locator('#main').getAttribute('data-rendered');
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction((b) => document.getElementById('main').dataset.rendered !== b, before);
}

const facts = await seed();
console.log(`seeded ${Object.keys(facts).length} facts in tenants nas and acme`);

await check('GET / redirects to /console', async () => {
  const res = await page.goto(KEYED + '/');
  assert(new URL(page.url()).pathname === '/console', `landed on ${page.url()}`);
  assert(res.ok(), `status ${res.status()}`);
});

await check('keyed mode, signed out: the login form, and no data', async () => {
  await page.locator('#login-form').waitFor({ state: 'visible' });
  assert(await page.locator('#shell').isHidden(), 'the shell shows before signing in');
  await shot('login');
});

await check('a wrong key is refused with a message', async () => {
  await page.fill('#login-key', 'not-a-key');
  await page.click('#login-form button[type=submit]');
  await page.locator('#login-error', { hasText: 'invalid key' }).waitFor();
  assert(await page.locator('#shell').isHidden(), 'signed in with a wrong key');
});

await check('sign in with a tenant key (POST /api/session sets the cookie)', async () => {
  await page.fill('#login-key', NAS);
  await page.click('#login-form button[type=submit]');
  await page.locator('#shell').waitFor({ state: 'visible' });
  await page.locator('#who-tenant', { hasText: 'nas' }).waitFor();
  const cookies = await context.cookies(KEYED);
  const c = cookies.find((x) => x.name === 'tempora_session');
  assert(c && c.httpOnly, `no HttpOnly tempora_session cookie: ${JSON.stringify(cookies)}`);
  assert(await page.locator('#login').isHidden(), 'the login form still shows');
});

await check('facts browser: filter by subject and predicate shows the current value', async () => {
  await go('#/facts?subject=Person%3Asarah&predicate=works_at');
  const text = await waitList((t) => t.includes('Org:globex'), 'the globex fact');
  assert(!text.includes('Org:acme'), 'the superseded acme fact shows in the default (current) list');
  await noAcme('facts list');
});

await check('facts browser: status filter shows the superseded fact', async () => {
  await page.fill('#facts-filter input[name=predicate]', '');
  await page.selectOption('#facts-filter select[name=status]', 'superseded');
  await page.click('#facts-filter button[type=submit]');
  await waitList((t) => t.includes('Org:acme') && t.includes('staff engineer') && !t.includes('Org:globex'), 'the superseded facts');
  await page.selectOption('#facts-filter select[name=status]', 'all');
  await page.click('#facts-filter button[type=submit]');
  await waitList((t) => t.includes('Org:acme') && t.includes('Org:globex') && t.includes('leaving for Org:initech'), 'all facts');
  await noAcme('facts list, all statuses');
});

await check("a fact's detail: provenance, versions and supersession chain", async () => {
  await page.locator('#facts-list tr.row', { hasText: 'Org:acme' }).first().click();
  await page.locator('#fact-detail').waitFor();
  await page.locator('#fact-versions tbody tr').nth(1).waitFor();
  const detail = await page.locator('#fact-detail').innerText();
  assert(detail.includes('hr-import'), 'no source in the provenance');
  assert((await page.locator('#fact-versions tbody tr').count()) === 2, 'the acme fact should have two versions');
  const chain = await page.locator('#fact-chain').innerText();
  assert(chain.includes('Org:globex') && chain.includes('this fact'), `chain: ${chain}`);
  await shot('facts');
});

await check('time travel: the record-time slider shows the older value', async () => {
  await go('#/facts?subject=Person%3Asarah&predicate=works_at');
  await waitList((t) => t.includes('Org:globex') && !t.includes('Org:acme'), 'the live list');
  // Step back through the record times with the keyboard, as a person would,
  // until the slider stands at the transaction that wrote the acme fact.
  const slider = page.locator('#as-of');
  await slider.focus();
  await page.keyboard.press('End');
  let label = '';
  for (let i = 0; i < 60; i++) {
    label = await page.locator('#as-of-label').innerText();
    if (txLabel(facts.acme.tx).test(label)) break;
    await page.keyboard.press('ArrowLeft');
  }
  assert(txLabel(facts.acme.tx).test(label), `the slider never reached tx ${facts.acme.tx} (label: ${label})`);
  await waitList((t) => t.includes('Org:acme') && !t.includes('Org:globex'), 'the older value at that record time');
  await page.locator('#time-banner', { hasText: 'as the database knew it at' }).waitFor();
  // Forward again: the value changes back at the globex transaction.
  await page.click('#as-of-live');
  await waitList((t) => t.includes('Org:globex') && !t.includes('Org:acme'), 'the live value again');
});

await check('time travel: the valid-time picker shows what was true then', async () => {
  await page.fill('#valid-at', '2022-06-01T12:00:00');
  await page.dispatchEvent('#valid-at', 'change');
  await waitList((t) => t.includes('Org:acme') && !t.includes('Org:globex'), 'acme, true in 2022');
  await page.locator('#time-banner', { hasText: 'true in the world at' }).waitFor();
  await page.click('#valid-now');
  await waitList((t) => t.includes('Org:globex') && !t.includes('Org:acme'), 'the current value again');
});

await check("a fact's history moves the slider to a version's record time", async () => {
  await go(`#/fact/${facts.acme.id}`);
  await page.locator('#fact-versions tbody tr').nth(1).waitFor();
  await page.locator('#fact-versions tbody tr').first().click();
  await page.locator('#as-of-label', { hasText: txLabel(facts.acme.tx) }).waitFor();
  await page.locator('#fact-status', { hasText: 'active' }).waitFor();
  await page.click('#as-of-live');
  await page.locator('#fact-status', { hasText: 'superseded' }).waitFor();
});

await check('timeline: bars of validity, the record-time history beneath, both following the slider', async () => {
  await go('#/timeline/Person%3Asarah');
  await page.locator('#timeline-valid').waitFor();
  await page.locator('#timeline-record').waitFor();
  const bars = await page.locator('#timeline-valid .bar').count();
  assert(bars === 7, `expected 7 bars (7 facts of Person:sarah), got ${bars}`);
  assert((await page.locator(`#timeline-valid .bar[data-fact="${facts.acme.id}"].superseded`).count()) === 1, 'acme bar not superseded');
  await page.locator('#timeline-record .mark').first().waitFor();
  await page.fill('#valid-at', '2022-06-01T12:00:00');
  await page.dispatchEvent('#valid-at', 'change');
  await page.locator('#valid-cursor', { hasText: 'valid at 2022-06-01' }).waitFor();
  // A version mark of the acme fact's lane moves the record time there.
  await page.locator(`#timeline-record .mark[data-tx="${facts.role1.tx}"]`).first().click();
  await page.locator('#as-of-label', { hasText: txLabel(facts.role1.tx) }).waitFor();
  await page.locator('#record-cursor').waitFor();
  await page.waitForFunction(() => document.querySelectorAll('#timeline-valid .bar').length === 2);
  await shot('timeline');
  await page.click('#as-of-live');
  await page.click('#valid-now');
  await page.waitForFunction(() => document.querySelectorAll('#timeline-valid .bar').length === 7);
  await noAcme('timeline');
});

await check('graph: the neighbourhood from /api/walk; a click re-centres it', async () => {
  await go('#/graph/Person%3Asarah');
  await page.locator('#graph .node.start[data-entity="Person:sarah"]').waitFor();
  for (const n of ['Org:globex', 'Person:tom', 'City:lisbon', 'City:berlin']) {
    assert((await page.locator(`#graph .node[data-entity="${n}"]`).count()) === 1, `no node ${n}`);
  }
  await shot('graph');
  await noAcme('graph of Person:sarah');
  await page.locator('#graph .node[data-entity="Org:globex"]').click();
  await page.locator('#graph .node.start[data-entity="Org:globex"]').waitFor();
  assert(decodeURIComponent(await page.evaluate(() => location.hash)).startsWith('#/graph/Org:globex'), 'the address did not follow');
});

await check('live feed: a new fact arrives while watching; none of another tenant', async () => {
  await go('#/feed');
  await page.locator('#feed-list').waitFor();
  await page.locator('#feed-state', { hasText: 'live' }).waitFor();
  await assertFact(KEYED, ACME, { subject: 'Person:mallory', predicate: 'note', object: 'acme-late-marker-9902' });
  const fresh = await assertFact(KEYED, NAS, { subject: 'Person:sarah', predicate: 'speaks', object: 'Portuguese', source: 'e2e' });
  await page.locator(`#feed-list li[data-tx="${fresh.tx}"]`, { hasText: 'Portuguese' }).waitFor();
  await pause(300);
  await noAcme('live feed');
  await shot('feed');
});

await check('the feed badge counts changes while another view is open', async () => {
  await go('#/facts?subject=Person%3Asarah');
  await waitMain((t) => t.includes('Portuguese'), 'the list with the new fact');
  await assertFact(KEYED, NAS, { subject: 'Person:sarah', predicate: 'speaks', object: 'English', source: 'e2e' });
  await page.locator('#feed-badge:not([hidden])', { hasText: '1' }).waitFor();
  // The live list follows the change too.
  await waitMain((t) => t.includes('English'), 'the list with the second new fact');
});

await check('a live re-render keeps a filter being typed, and the focus', async () => {
  await go('#/facts?subject=Person%3Asarah&status=active');
  await waitMain((t) => t.includes('English'), 'the list');
  await page.fill('#facts-filter input[name=predicate]', 'speaks');
  await page.selectOption('#facts-filter select[name=status]', 'all');
  await page.focus('#facts-filter input[name=predicate]');
  const before = await page.locator('#main').getAttribute('data-rendered');
  await assertFact(KEYED, NAS, { subject: 'Person:sarah', predicate: 'speaks', object: 'Catalan', source: 'e2e' });
  await waitMain((t) => t.includes('Catalan'), 'the list with the new fact');
  const after = await page.locator('#main').getAttribute('data-rendered');
  assert(after !== before, 'the list did not re-render');
  const typed = await page.inputValue('#facts-filter input[name=predicate]');
  assert(typed === 'speaks', `the predicate being typed became "${typed}"`);
  const status = await page.inputValue('#facts-filter select[name=status]');
  assert(status === 'all', `the chosen status became "${status}"`);
  const focused = await page.evaluate(() => document.activeElement && document.activeElement.name);
  assert(focused === 'predicate', `the focus moved to ${focused}`);
  await page.click('#facts-filter button[type=submit]');
  await waitList((t) => t.includes('Catalan') && !t.includes('works_at'), 'the list filtered by the typed predicate');
});

await check('search box over /api/search', async () => {
  await go('#/search');
  await page.fill('#search-form input[name=question]', 'principal engineer');
  await page.click('#search-form button[type=submit]');
  await page.locator('#search-results', { hasText: 'principal engineer' }).waitFor();
  await page.fill('#search-form input[name=question]', 'acme-only-marker-7731 mallory');
  await page.click('#search-form button[type=submit]');
  await waitMain((t) => t.includes('Nothing matches') || t.includes('Found by'), 'a search answer');
  await noAcme('search for acme text');
});

await check('context packet preview for a seed and a token budget', async () => {
  await go('#/context');
  await page.fill('#context-form input[name=seeds]', 'Person:sarah');
  await page.fill('#context-form input[name=goal]', 'prepare a call with sarah');
  await page.fill('#context-form input[name=token_budget]', '120');
  await page.click('#context-form button[type=submit]');
  await page.locator('#context-tokens', { hasText: 'of a budget of 120' }).waitFor();
  const text = await mainText();
  const used = Number(/(\d+) tokens in the packet/.exec(text)?.[1]);
  assert(used > 0 && used <= 120, `tokens in the packet: ${used}`);
  assert(text.includes('Person:sarah'), 'no facts of the seed');
  await noAcme('context packet');
});

await check('alerts: an open alert is acknowledged', async () => {
  await go('#/alerts');
  const card = page.locator('#alerts-list .card').first();
  await card.waitFor();
  assert((await page.locator('#alerts-list .card').count()) === 1, 'nas should see exactly its one alert');
  await card.locator('.pill', { hasText: 'open' }).waitFor();
  await shot('alerts');
  const stops = Number(await page.getAttribute('#as-of', 'max'));
  await card.locator('button[data-ack]').click();
  await page.locator('#alerts-list .card .pill', { hasText: 'acked' }).waitFor();
  const list = await api(KEYED, NAS, 'GET', '/api/alerts');
  assert(list.length === 1 && list[0].state === 'acked', `the server has: ${JSON.stringify(list)}`);
  // The ack reached the slider through the feed; one stop before it the
  // alert was open, shown read-only.
  await page.waitForFunction((n) => Number(document.getElementById('as-of').max) > n, stops);
  await page.locator('#as-of').focus();
  await page.keyboard.press('End');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('ArrowLeft');
  await page.locator('#alerts-list .card .pill', { hasText: 'open' }).waitFor();
  assert((await page.locator('#alerts-list button[data-ack]').count()) === 0, 'an Acknowledge button at a past record time');
  await page.click('#as-of-live');
  await page.locator('#alerts-list .card .pill', { hasText: 'acked' }).waitFor();
});

await check('a fact value holding markup renders as text', async () => {
  await go('#/facts?subject=Note%3Amarkup');
  await waitMain((t) => t.includes(XSS), 'the markup shown as text');
  assert((await page.locator('#main img').count()) === 0, 'an <img> element was created from a fact value');
  assert(await page.evaluate(() => window.__xss === undefined), 'the onerror handler ran');
  await go('#/timeline/Note%3Amarkup');
  await page.locator('#timeline-valid').waitFor();
  await go('#/feed');
  await page.locator('#feed-list').waitFor();
  assert(await page.evaluate(() => window.__xss === undefined), 'the onerror handler ran');
});

await check("another tenant's facts never show: subject, graph and direct addresses", async () => {
  await go('#/facts?subject=Person%3Amallory&status=all');
  await waitMain((t) => t.includes('No facts match'), 'an empty list');
  await go('#/graph/Person%3Amallory');
  await waitMain((t) => t.includes('No entity-ref facts link'), 'an empty graph');
  await go(`#/fact/${facts.mallory.id}`);
  await waitMain((t) => t.includes('NotFound'), 'not found');
  await go('#/timeline/Person%3Amallory');
  await waitMain((t) => t.includes('No facts about this subject'), 'an empty timeline');
  await go('#/facts?status=all');
  await waitMain((t) => t.includes('Person:sarah'), 'every fact of nas');
  await noAcme('every fact of nas');
});

await check('sign out; then tenant acme sees its own facts and none of nas', async () => {
  await page.click('#logout');
  await page.locator('#login-form').waitFor({ state: 'visible' });
  assert(!(await context.cookies(KEYED)).some((c) => c.name === 'tempora_session'), 'the cookie is still set');
  await page.fill('#login-key', ACME);
  await page.click('#login-form button[type=submit]');
  await page.locator('#who-tenant', { hasText: 'acme' }).waitFor();
  await go('#/facts?subject=Person%3Asarah&status=all');
  const text = await waitMain((t) => t.includes('Org:acmecorp-private'), "acme's own fact");
  for (const m of ['Org:globex', 'principal engineer', 'Portuguese']) assert(!text.includes(m), `acme sees nas's ${m}`);
  await go('#/feed');
  await page.locator('#feed-list li').first().waitFor();
  const feedText = await mainText();
  assert(!feedText.includes('Portuguese') && !feedText.includes('Org:globex'), "acme's feed shows nas's changes");
});

await check('open mode: no sign-in, the mode is shown, facts are browsable', async () => {
  await assertFact(OPEN, null, { subject: 'Person:ada', predicate: 'works_at', object: 'Org:analytical', valid_from: year(1843) });
  await page.goto(OPEN + '/console#/facts');
  await page.locator('#shell').waitFor({ state: 'visible' });
  assert(await page.locator('#login').isHidden(), 'the login form shows in open mode');
  await page.locator('#who .mode.open', { hasText: 'open mode' }).waitFor();
  assert((await page.locator('#logout').count()) === 0, 'a sign-out button in open mode');
  await waitMain((t) => t.includes('Org:analytical'), 'the open-mode fact');
});

await check('nothing was loaded from another origin; no CSP violation; no script error', async () => {
  assert(offOrigin.length === 0, `requests elsewhere: ${offOrigin.join(', ')}`);
  assert(cspErrors.length === 0, `CSP violations: ${cspErrors.join(' | ')}`);
  assert(pageErrors.length === 0, `script errors: ${pageErrors.join(' | ')}`);
});

await context.close();
console.log(`console e2e: ${passed} checks passed, ${failed} failed${failed ? ` (${failures.join('; ')})` : ''}`);
process.exit(failed ? 1 : 0);
