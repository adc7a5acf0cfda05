// A subject's timeline: its facts as bars of validity on the valid-time
// axis (one row per predicate, more when values overlap), and beneath, the
// record-time history: one lane per fact, a segment per version from the
// moment it was recorded until the next version replaced it.

import { get, pool } from './api.js';
import { el, field, fmtTime, fmtValue, href, svg } from './dom.js';
import { interval, timeBanner } from './facts.js';
import * as time from './time.js';

const LABEL_W = 170;
const ROW_H = 26;
const AXIS_H = 26;
const PAD_R = 16;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const STEPS = [
  [1, 'ms'], [5, 'ms'], [10, 'ms'], [50, 'ms'], [100, 'ms'], [250, 'ms'], [500, 'ms'],
  [SECOND, 's'], [5 * SECOND, 's'], [15 * SECOND, 's'], [MINUTE, 'm'], [5 * MINUTE, 'm'], [15 * MINUTE, 'm'],
  [HOUR, 'h'], [3 * HOUR, 'h'], [6 * HOUR, 'h'], [12 * HOUR, 'h'], [DAY, 'd'], [2 * DAY, 'd'], [7 * DAY, 'd'],
  [30 * DAY, 'mo', 1], [91 * DAY, 'mo', 3], [182 * DAY, 'mo', 6], [365 * DAY, 'y', 1], [2 * 365 * DAY, 'y', 2],
  [5 * 365 * DAY, 'y', 5], [10 * 365 * DAY, 'y', 10], [25 * 365 * DAY, 'y', 25], [50 * 365 * DAY, 'y', 50],
  [100 * 365 * DAY, 'y', 100],
];

const pad = (n) => String(n).padStart(2, '0');

/** Tick positions and labels over `[lo, hi]`, about `n` of them, on calendar boundaries. */
export function ticks(lo, hi, n) {
  const span = Math.max(1, hi - lo);
  const [step, unit, count] = STEPS.find(([s]) => span / s <= n) || STEPS[STEPS.length - 1];
  const out = [];
  const d = new Date(lo);
  if (unit === 'y') {
    let y = Math.ceil(d.getFullYear() / count) * count;
    for (let t = new Date(y, 0, 1).getTime(); t <= hi; y += count, t = new Date(y, 0, 1).getTime()) {
      if (t >= lo) out.push([t, String(y)]);
    }
  } else if (unit === 'mo') {
    let y = d.getFullYear();
    let m = Math.ceil(d.getMonth() / count) * count;
    for (;;) {
      const t = new Date(y, m, 1).getTime();
      if (t > hi) break;
      if (t >= lo) out.push([t, `${new Date(t).getFullYear()}-${pad(new Date(t).getMonth() + 1)}`]);
      m += count;
    }
  } else {
    const offset = d.getTimezoneOffset() * MINUTE;
    for (let t = Math.ceil((lo - offset) / step) * step + offset; t <= hi; t += step) {
      const x = new Date(t);
      const hms = `${pad(x.getHours())}:${pad(x.getMinutes())}:${pad(x.getSeconds())}`;
      const label = unit === 'd' ? `${x.getFullYear()}-${pad(x.getMonth() + 1)}-${pad(x.getDate())}`
        : unit === 'ms' ? `${hms}.${String(x.getMilliseconds()).padStart(3, '0')}`
          : unit === 's' ? hms : `${pad(x.getHours())}:${pad(x.getMinutes())}`;
      out.push([t, label]);
    }
  }
  return out;
}

function scale(lo, hi, x0, x1) {
  const k = (x1 - x0) / Math.max(1, hi - lo);
  return (t) => x0 + (t - lo) * k;
}

function axis(lo, hi, x, y, height, width) {
  const n = Math.max(2, Math.floor((width - LABEL_W) / 110));
  // A label needs about 7 px a character; one that would run off the right edge is left out.
  return svg('g', { class: 'axis' }, ticks(lo, hi, n).map(([t, label]) => svg('g', {},
    svg('line', { x1: x(t), x2: x(t), y1: y, y2: y + height, class: 'grid' }),
    x(t) + 3 + label.length * 7 <= width ? svg('text', { x: x(t) + 3, y: y + 12 }, label) : null)));
}

function cursor(xpos, top, bottom, label, id) {
  return svg('g', { id },
    svg('line', { class: 'cursor', x1: xpos, x2: xpos, y1: top, y2: bottom }),
    svg('text', { class: 'cursor-label', x: xpos + 4, y: bottom - 4 }, label));
}

/** Rows of the valid-time chart: per predicate, lanes of non-overlapping facts. */
function lanes(facts) {
  const byPredicate = new Map();
  for (const f of [...facts].sort((a, b) => a.valid_from - b.valid_from)) {
    if (!byPredicate.has(f.predicate)) byPredicate.set(f.predicate, []);
    const rows = byPredicate.get(f.predicate);
    const end = (g) => (g.valid_until ?? Infinity);
    let row = rows.find((r) => end(r[r.length - 1]) <= f.valid_from);
    if (!row) rows.push((row = []));
    row.push(f);
  }
  const out = [];
  for (const p of [...byPredicate.keys()].sort()) {
    byPredicate.get(p).forEach((row, i) => out.push({ label: i === 0 ? p : '', facts: row }));
  }
  return out;
}

function validChart(facts, width) {
  const now = Date.now();
  const validAt = time.validAtTime();
  const rows = lanes(facts);
  const froms = facts.map((f) => f.valid_from);
  const ends = facts.map((f) => f.valid_until ?? f.valid_from);
  let lo = Math.min(...froms, validAt ?? Infinity);
  let hi = Math.max(...ends, now, validAt ?? -Infinity);
  const padT = Math.max((hi - lo) * 0.04, MINUTE);
  lo -= padT;
  hi += padT;
  const height = AXIS_H + rows.length * ROW_H + 8;
  const x = scale(lo, hi, LABEL_W, width - PAD_R);
  const g = svg('svg', { class: 'drawing', id: 'timeline-valid', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': 'facts as bars of validity' });
  g.append(axis(lo, hi, x, 0, height, width));
  rows.forEach((row, i) => {
    const y = AXIS_H + i * ROW_H;
    if (row.label) g.append(svg('text', { class: 'lane-label', x: 6, y: y + 16 }, row.label));
    for (const f of row.facts) {
      const x0 = x(f.valid_from);
      const x1 = f.valid_until === null || f.valid_until === undefined ? width - PAD_R : x(f.valid_until);
      const w = Math.max(3, x1 - x0);
      const text = fmtValue(f.object);
      const bar = svg('g', { class: ['bar', f.status], 'data-fact': f.id, tabindex: 0 },
        svg('title', {}, `${f.predicate} ${text}\n${f.status} \u00B7 valid ${interval(f)}\nconfidence ${f.confidence}`),
        svg('rect', { x: x0, y: y + 3, width: w, height: ROW_H - 7, rx: 3 }));
      if (w > 30) {
        const clip = text.length * 6.5 > w - 8 ? `${text.slice(0, Math.max(1, Math.floor((w - 8) / 6.5) - 1))}\u2026` : text;
        bar.append(svg('text', { x: x0 + 5, y: y + 17 }, clip));
      }
      bar.addEventListener('click', () => { location.hash = href('fact', f.id); });
      g.append(bar);
    }
  });
  const at = validAt ?? now;
  g.append(cursor(x(at), AXIS_H - 4, height, validAt === null ? 'now' : `valid at ${fmtTime(validAt)}`, 'valid-cursor'));
  return g;
}

function recordChart(facts, histories, width) {
  const asOf = time.asOfTime();
  const all = histories.flat();
  if (!all.length) return el('p', { class: 'empty' }, 'No versions.');
  let lo = Math.min(...all.map((v) => v.recorded_at));
  let hi = Math.max(...all.map((v) => v.recorded_at), asOf ?? -Infinity);
  const padT = Math.max((hi - lo) * 0.08, 50);
  lo -= padT;
  hi += padT * 2;
  const height = AXIS_H + facts.length * ROW_H + 8;
  const x = scale(lo, hi, LABEL_W, width - PAD_R);
  const g = svg('svg', { class: 'drawing', id: 'timeline-record', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': 'record-time history of the facts' });
  g.append(axis(lo, hi, x, 0, height, width));
  facts.forEach((f, i) => {
    const y = AXIS_H + i * ROW_H;
    const label = `${f.predicate}: ${fmtValue(f.object)}`;
    g.append(svg('text', { class: 'lane-label', x: 6, y: y + 16 }, label.length > 24 ? `${label.slice(0, 23)}\u2026` : label,
      svg('title', {}, label)));
    const versions = histories[i];
    versions.forEach((v, j) => {
      const x0 = x(v.recorded_at);
      const x1 = j + 1 < versions.length ? x(versions[j + 1].recorded_at) : width - PAD_R;
      const future = asOf !== null && v.recorded_at > asOf;
      const seg = svg('g', { class: ['bar', v.status, future && 'future'], 'data-tx': v.tx },
        svg('title', {}, `tx ${v.tx} \u00B7 ${v.status}\nrecorded ${fmtTime(v.recorded_at)}\nvalid ${interval(v)}`),
        svg('rect', { x: x0, y: y + 7, width: Math.max(2, x1 - x0), height: ROW_H - 14, rx: 2 }));
      const mark = svg('g', { class: 'mark', 'data-tx': v.tx },
        svg('title', {}, `tx ${v.tx}: see the data as of ${fmtTime(v.recorded_at)}`),
        svg('circle', { cx: x0, cy: y + ROW_H / 2, r: 4.5 }));
      mark.addEventListener('click', () => time.setAsOf(v.recorded_at));
      seg.addEventListener('click', () => time.setAsOf(v.recorded_at));
      g.append(seg, mark);
    });
  });
  if (asOf !== null) g.append(cursor(x(asOf), AXIS_H - 4, height, `as of ${fmtTime(asOf)}`, 'record-cursor'));
  return g;
}

export const timelineView = {
  nav: 'timeline',
  live: true,
  async render(root, { arg }, ctx) {
    const input = el('input', { name: 'subject', value: arg || '', placeholder: 'Person:sarah', size: 28 });
    const form = el('form', { class: 'toolbar', id: 'timeline-form' }, field('Subject', input), el('button', { type: 'submit' }, 'Show'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      location.hash = href('timeline', input.value.trim());
    });
    root.append(el('h2', {}, arg ? `Timeline of ${arg}` : 'Timeline'), form);
    if (!arg) {
      root.append(el('p', { class: 'empty' }, 'Name a subject to see its facts over valid time and record time.'));
      return;
    }
    const banner = timeBanner();
    if (banner) root.append(banner);
    const params = { subject: arg, status: 'all', include_retracted: true, limit: 1000, as_of: time.asOfTime() ?? undefined };
    const facts = await get('/api/facts', params);
    time.noteFacts(facts);
    if (!facts.length) {
      root.append(el('p', { class: 'empty' }, time.isLive() ? 'No facts about this subject.' : 'No facts about this subject at this record time.'));
      return;
    }
    facts.sort((a, b) => a.predicate.localeCompare(b.predicate) || a.valid_from - b.valid_from);
    const shown = facts.slice(0, 60);
    const histories = await pool(shown, 6, (f) => get(`/api/facts/${encodeURIComponent(f.id)}/history`)
      .then((h) => h.versions).catch(() => []));
    histories.forEach((h) => time.noteFacts(h));
    root.append(el('h3', {}, 'Valid time'),
      el('p', { class: 'note' }, 'Each bar is a fact over the interval it holds in the world. Filled: active or superseded; dashed: candidate or retracted. Click a bar for the fact.'),
      validChart(facts, ctx.width));
    root.append(el('h3', {}, 'Record time'),
      el('p', { class: 'note' }, 'When the database learned each version. Click a version to move the record-time slider there.'),
      recordChart(shown, histories, ctx.width));
    if (facts.length > shown.length) root.append(el('p', { class: 'note' }, `Record-time lanes for the first ${shown.length} of ${facts.length} facts.`));
  },
};
