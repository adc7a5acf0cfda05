// An entity's neighbourhood from `GET /api/walk`, drawn radially: the
// entity in the centre, each depth on its own ring. Clicking a node makes
// it the centre; the edges below open the facts behind them.

import { get } from './api.js';
import { el, entityLinks, factLink, field, href, svg, table } from './dom.js';
import { timeBanner } from './facts.js';
import * as time from './time.js';

const HEIGHT = 470;

function layout(result, width) {
  const cx = width / 2;
  const cy = HEIGHT / 2;
  const byDepth = new Map();
  for (const node of result.reached) {
    const d = result.depths[node] ?? 0;
    if (!byDepth.has(d)) byDepth.set(d, []);
    byDepth.get(d).push(node);
  }
  const maxDepth = Math.max(0, ...byDepth.keys());
  // Elliptical rings use the width of the pane.
  const rx = (cx - 100) / Math.max(1, maxDepth);
  const ry = (cy - 40) / Math.max(1, maxDepth);
  const pos = new Map([[result.start, { x: cx, y: cy, angle: 0 }]]);
  // Parents of each node one ring in, so children sit near their parents.
  const parents = new Map();
  for (const e of result.edges) {
    for (const [a, b] of [[e.from, e.to], [e.to, e.from]]) {
      if ((result.depths[b] ?? 0) === (result.depths[a] ?? 0) - 1) {
        if (!parents.has(a)) parents.set(a, []);
        parents.get(a).push(b);
      }
    }
  }
  for (let d = 1; d <= maxDepth; d++) {
    const nodes = byDepth.get(d) || [];
    const wanted = (n) => {
      const ps = (parents.get(n) || []).map((p) => pos.get(p)).filter(Boolean);
      return ps.length ? ps.reduce((s, p) => s + p.angle, 0) / ps.length : 0;
    };
    nodes.sort((a, b) => wanted(a) - wanted(b) || a.localeCompare(b));
    const offset = d % 2 ? 0 : Math.PI / Math.max(2, nodes.length);
    nodes.forEach((n, i) => {
      const angle = offset + (2 * Math.PI * i) / nodes.length;
      pos.set(n, { x: cx + rx * d * Math.cos(angle), y: cy + ry * d * Math.sin(angle), angle });
    });
  }
  return pos;
}

function drawing(result, width, params) {
  const pos = layout(result, width);
  const g = svg('svg', { class: 'drawing', id: 'graph', width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: 'img',
    'aria-label': `graph around ${result.start}` });
  g.append(svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }))));
  // One line per direction between two nodes, labelled with every predicate along it.
  const pairs = new Map();
  for (const e of result.edges) {
    const key = `${e.from}\u0000${e.to}`;
    if (!pairs.has(key)) pairs.set(key, { a: e.from, b: e.to, labels: [] });
    const p = pairs.get(key);
    if (!p.labels.includes(e.predicate)) p.labels.push(e.predicate);
  }
  for (const { a, b, labels } of pairs.values()) {
    const pa = pos.get(a);
    const pb = pos.get(b);
    if (!pa || !pb || a === b) continue;
    // Stop at the target's circle, so the arrow head shows.
    const len = Math.hypot(pb.x - pa.x, pb.y - pa.y) || 1;
    const r = (b === result.start ? 11 : 8) + 2;
    const x2 = pb.x - ((pb.x - pa.x) * r) / len;
    const y2 = pb.y - ((pb.y - pa.y) * r) / len;
    g.append(svg('line', { class: 'edge', x1: pa.x, y1: pa.y, x2, y2, 'marker-end': 'url(#arrow)' }));
    const text = labels.join(', ');
    g.append(svg('text', { class: 'edge-label', x: (pa.x + pb.x) / 2, y: (pa.y + pb.y) / 2 - 3, 'text-anchor': 'middle' },
      text.length > 28 ? `${text.slice(0, 27)}\u2026` : text));
  }
  for (const n of result.reached) {
    const p = pos.get(n);
    if (!p) continue;
    const label = n.length > 26 ? `${n.slice(0, 25)}\u2026` : n;
    const node = svg('g', { class: ['node', n === result.start && 'start'], 'data-entity': n, tabindex: 0, role: 'link' },
      svg('title', {}, n === result.start ? `${n} (centre)` : `${n}: click to centre the graph here`),
      svg('circle', { cx: p.x, cy: p.y, r: n === result.start ? 11 : 8 }),
      svg('text', { x: p.x, y: p.y + 24, 'text-anchor': 'middle' }, label));
    const go = () => { location.hash = href('graph', n, params); };
    node.addEventListener('click', go);
    node.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
    g.append(node);
  }
  return g;
}

export const graphView = {
  live: true,
  async render(root, { arg, params: p }, ctx) {
    const params = { depth: p.depth || '2', direction: p.direction || 'both', max_nodes: p.max_nodes || '60' };
    const input = el('input', { name: 'start', value: arg || '', placeholder: 'Person:sarah', size: 28 });
    const depth = el('select', { name: 'depth', value: params.depth }, ['1', '2', '3', '4'].map((d) => el('option', { value: d }, d)));
    const direction = el('select', { name: 'direction', value: params.direction },
      [['both', 'both ways'], ['out', 'outgoing'], ['in', 'incoming']].map(([v, l]) => el('option', { value: v }, l)));
    const max = el('select', { name: 'max_nodes', value: params.max_nodes }, ['30', '60', '120', '200'].map((d) => el('option', { value: d }, d)));
    const form = el('form', { class: 'toolbar', id: 'graph-form' },
      field('Entity', input), field('Depth', depth), field('Direction', direction), field('Max nodes', max),
      el('button', { type: 'submit' }, 'Walk'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      location.hash = href('graph', input.value.trim(), { depth: depth.value, direction: direction.value, max_nodes: max.value });
    });
    root.append(el('h2', {}, arg ? `Graph around ${arg}` : 'Graph'), form);
    if (!arg) {
      root.append(el('p', { class: 'empty' }, 'Name an entity (Type:id) to walk its neighbourhood.'));
      return;
    }
    const banner = timeBanner({ valid: false });
    if (banner) root.append(banner);
    if (time.validAtTime() !== null) {
      root.append(el('p', { class: 'note' }, 'A walk follows the facts current at the record time; the valid time does not apply here.'));
    }
    const result = await get('/api/walk', { start: arg, ...params, as_of: time.asOfTime() ?? undefined });
    if (result.reached.length <= 1) {
      root.append(el('p', { class: 'empty' }, `No entity-ref facts link ${arg} to another entity.`), el('p', {}, entityLinks(arg)));
      return;
    }
    root.append(drawing(result, ctx.width, params));
    if (result.truncated) root.append(el('p', { class: 'note' }, 'The walk stopped at its node limit; raise "Max nodes" or the depth to see more.'));
    root.append(el('h3', {}, `Edges (${result.edges.length})`));
    root.append(table([
      ['From', (e) => entityLinks(e.from)],
      ['Predicate', (e) => e.predicate],
      ['To', (e) => entityLinks(e.to)],
      ['Depth', (e) => String(e.depth), 'num'],
      ['Fact', (e) => factLink(e.fact_id)],
    ], result.edges));
  },
};
