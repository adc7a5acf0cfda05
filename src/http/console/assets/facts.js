// The facts browser: a filtered list (`GET /api/facts`) and one fact's
// detail: its provenance, every version (`/history`) and the supersession
// chain both ways. Both read at the global record time and valid time.

import { ApiError, get, request } from './api.js';
import {
  el, entityLinks, errorNode, factLink, field, fmtDate, fmtTime, href, shortId, statusNode, table, valueNode,
} from './dom.js';
import * as time from './time.js';

const STATUSES = [
  ['', 'current (default)'],
  ['active', 'active'],
  ['candidate', 'candidate'],
  ['superseded', 'superseded'],
  ['retracted', 'retracted'],
  ['all', 'all'],
];

/** `[from, until)` in dates. */
export function interval(f) {
  return `[${fmtDate(f.valid_from)}, ${f.valid_until === null || f.valid_until === undefined ? '\u221E' : fmtDate(f.valid_until)})`;
}

/** A line that says which moment the data is shown at. */
export function timeBanner({ valid = true } = {}) {
  const parts = [];
  if (!time.isLive()) parts.push(`as the database knew it at ${fmtTime(time.asOfTime())}`);
  if (valid && time.validAtTime() !== null) parts.push(`true in the world at ${fmtTime(time.validAtTime())}`);
  if (!parts.length) return null;
  return el('div', { class: 'banner', id: 'time-banner' }, `Showing data ${parts.join(', ')}.`);
}

function listParams(p) {
  const status = p.status || '';
  return {
    subject: p.subject,
    predicate: p.predicate,
    object: p.object,
    status: status || undefined,
    include_retracted: status === 'all' || status === 'retracted' ? true : undefined,
    limit: 100,
    ...time.params(),
  };
}

function filterForm(p) {
  const subject = el('input', { name: 'subject', value: p.subject || '', placeholder: 'Person:sarah', size: 22 });
  const predicate = el('input', { name: 'predicate', value: p.predicate || '', placeholder: 'works_at', size: 16 });
  const object = el('input', { name: 'object', value: p.object || '', placeholder: 'Org:acme', size: 16 });
  const status = el('select', { name: 'status', value: p.status || '' },
    STATUSES.map(([v, label]) => el('option', { value: v }, label)));
  const form = el('form', { class: 'toolbar', id: 'facts-filter' },
    field('Subject', subject), field('Predicate', predicate), field('Object', object), field('Status', status),
    el('button', { type: 'submit' }, 'Filter'),
    el('button', { type: 'button', class: 'secondary', onclick: () => { location.hash = href('facts'); } }, 'Clear'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = href('facts', null, {
      subject: subject.value.trim(), predicate: predicate.value.trim(), object: object.value.trim(), status: status.value,
    });
  });
  return form;
}

function factsTable(facts, p) {
  return table([
    ['Subject', (f) => entityLinks(f.subject)],
    ['Predicate', (f) => f.predicate],
    ['Object', (f) => valueNode(f.object), 'value'],
    ['Status', (f) => statusNode(f.status)],
    ['Conf.', (f) => f.confidence.toFixed(2), 'num opt'],
    ['Valid', (f) => interval(f), 'time'],
    ['Recorded', (f) => fmtTime(f.recorded_at), 'time opt'],
  ], facts, {
    onRow: (f) => { location.hash = href('facts', null, { ...p, fact: f.id }); },
    selected: (f) => f.id === p.fact,
  });
}

export const factsView = {
  live: true,
  async render(root, { params: p }) {
    root.append(el('h2', {}, 'Facts'), filterForm(p));
    const banner = timeBanner();
    if (banner) root.append(banner);
    const list = el('div', { id: 'facts-list' });
    const side = el('div', { id: 'fact-detail-pane' });
    root.append(p.fact ? el('div', { class: 'split' }, list, side) : list);
    const detail = p.fact ? factDetail(p.fact) : null;
    let { data: facts, headers } = await request('/api/facts', { params: listParams(p) });
    time.noteFacts(facts);
    const rows = el('div', {});
    const draw = () => rows.replaceChildren(
      facts.length ? factsTable(facts, p) : el('p', { class: 'empty' }, 'No facts match.'));
    draw();
    list.append(rows);
    let cursor = headers.get('x-next-cursor');
    if (cursor) {
      const more = el('button', { type: 'button', class: 'secondary', id: 'facts-more' }, 'More');
      more.addEventListener('click', async () => {
        const next = await request('/api/facts', { params: { ...listParams(p), cursor } });
        facts = facts.concat(next.data);
        time.noteFacts(next.data);
        cursor = next.headers.get('x-next-cursor');
        draw();
        if (!cursor) more.remove();
      });
      list.append(el('p', {}, more));
    }
    if (detail) side.append(await detail);
  },
};

export const factView = {
  nav: 'facts',
  live: true,
  async render(root, { arg }) {
    root.append(el('p', {}, el('a', { href: href('facts') }, '\u2190 all facts')));
    const banner = timeBanner({ valid: false });
    if (banner) root.append(banner);
    root.append(await factDetail(arg));
  },
};

/** Follows the chain from `start` one way (`next` picks the links) up to `max` hops. */
async function follow(start, next, max = 12) {
  const out = [];
  const seen = new Set([start.id]);
  let frontier = next(start);
  while (frontier.length && out.length < max) {
    const id = frontier.shift();
    if (seen.has(id)) continue;
    seen.add(id);
    try {
      const f = await get(`/api/facts/${encodeURIComponent(id)}`);
      out.push(f);
      frontier.push(...next(f));
    } catch {
      out.push({ id, missing: true });
    }
  }
  return out;
}

function chainItem(f, self) {
  if (f.missing) return el('li', {}, factLink(f.id), ' (not readable)');
  return el('li', { class: self ? 'self' : '' },
    factLink(f.id), ' ', f.predicate, ' ', valueNode(f.object), ' \u00B7 ', statusNode(f.status), ' \u00B7 ', interval(f),
    self ? ' \u2190 this fact' : '');
}

/** One fact: its version at the record time, provenance, versions and chain. */
export async function factDetail(id) {
  const box = el('section', { class: 'detail', id: 'fact-detail', 'data-fact': id });
  const at = time.asOfTime();
  let fact;
  let history;
  try {
    [fact, history] = await Promise.all([
      get(`/api/facts/${encodeURIComponent(id)}`, { as_of: at ?? undefined }).catch((e) => {
        if (e instanceof ApiError && e.status === 404 && at !== null) return null;
        throw e;
      }),
      get(`/api/facts/${encodeURIComponent(id)}/history`),
    ]);
  } catch (e) {
    box.append(el('h2', {}, `Fact ${shortId(id)}`), errorNode(e));
    return box;
  }
  time.noteFacts(history.versions);
  const latest = history.versions[history.versions.length - 1];
  const shown = fact || latest;
  box.append(el('h2', {}, entityLinks(shown.subject), ' ', el('span', { class: 'predicate' }, shown.predicate), ' ',
    valueNode(shown.object)));
  if (!fact) {
    box.append(el('p', { class: 'banner' },
      `Not yet recorded at ${fmtTime(at)}: it was first recorded at ${fmtTime(latest.created_at)}. Its latest version is shown.`));
  }
  box.append(el('dl', { class: 'props' },
    el('dt', {}, 'Status'), el('dd', { id: 'fact-status' }, statusNode(shown.status)),
    el('dt', {}, 'Valid'), el('dd', {}, interval(shown)),
    el('dt', {}, 'Id'), el('dd', { class: 'mono' }, shown.id)));

  box.append(el('h3', {}, 'Provenance'));
  box.append(el('dl', { class: 'props' },
    el('dt', {}, 'Source'), el('dd', {}, shown.source ?? '\u2014'),
    el('dt', {}, 'Confidence'), el('dd', {}, String(shown.confidence)),
    el('dt', {}, 'First recorded'), el('dd', {}, `${fmtTime(shown.created_at)} (tx ${shown.created_tx})`),
    el('dt', {}, 'This version'), el('dd', {}, `${fmtTime(shown.recorded_at)} (tx ${shown.tx})`),
    el('dt', {}, 'Properties'),
    el('dd', {}, shown.properties ? el('pre', {}, JSON.stringify(shown.properties, null, 2)) : '\u2014')));

  box.append(el('h3', {}, `Versions (${history.versions.length})`));
  box.append(el('p', { class: 'note' }, 'Every version of this fact, oldest first. Click one to see the data as of its record time.'));
  const visible = (v) => fact && v.tx === fact.tx;
  const versions = table([
    ['tx', (v) => String(v.tx), 'num'],
    ['Recorded', (v) => fmtTime(v.recorded_at), 'time'],
    ['Status', (v) => statusNode(v.status)],
    ['Valid', (v) => interval(v), 'time'],
    ['Superseded by', (v) => (v.superseded_by ? factLink(v.superseded_by) : '')],
  ], history.versions, { onRow: (v) => time.setAsOf(v.recorded_at), selected: visible });
  versions.id = 'fact-versions';
  box.append(versions);

  box.append(el('h3', {}, 'Supersession chain'));
  const back = (f) => [...(f.supersedes || []), ...(f.continues ? [f.continues] : [])];
  const fwd = (f) => [...(f.superseded_by ? [f.superseded_by] : []), ...(f.continued_by || [])];
  const [earlier, later] = await Promise.all([follow(latest, back), follow(latest, fwd)]);
  if (!earlier.length && !later.length) {
    box.append(el('p', { class: 'note' }, 'This fact neither replaced nor was replaced by another.'));
  } else {
    box.append(el('ol', { class: 'chain', id: 'fact-chain' },
      earlier.reverse().map((f) => chainItem(f, false)), chainItem(latest, true), later.map((f) => chainItem(f, false))));
  }
  return box;
}
