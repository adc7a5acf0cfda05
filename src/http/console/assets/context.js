// A preview of the context packet an agent would get (`POST /api/context`)
// for some seeds, a goal and a token budget, at the global record time.

import { post } from './api.js';
import { el, entityLinks, factLink, field, href, statusNode, table, valueNode } from './dom.js';
import { timeBanner } from './facts.js';
import * as time from './time.js';

export const contextView = {
  async render(root, { params: p }) {
    const seeds = el('input', { name: 'seeds', value: p.seeds || '', placeholder: 'Person:sarah, Org:acme', size: 30 });
    const goal = el('input', { name: 'goal', value: p.goal || '', placeholder: 'prepare a call with sarah', size: 32 });
    const budget = el('input', { name: 'token_budget', type: 'number', min: 1, value: p.budget || '500', size: 6 });
    const form = el('form', { class: 'toolbar', id: 'context-form' },
      field('Seeds', seeds), field('Goal', goal), field('Token budget', budget), el('button', { type: 'submit' }, 'Build'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      location.hash = href('context', null, { seeds: seeds.value.trim(), goal: goal.value.trim(), budget: budget.value });
    });
    root.append(el('h2', {}, 'Context packet'), form);
    const seedList = (p.seeds || '').split(',').map((s) => s.trim()).filter(Boolean);
    if (!seedList.length && !(p.goal || '').trim()) {
      root.append(el('p', { class: 'empty' }, 'Give seed entities and/or a goal to preview the packet an agent would receive.'));
      return;
    }
    const banner = timeBanner({ valid: false });
    if (banner) root.append(banner);
    const body = { seeds: seedList, goal: p.goal || '' };
    const tokens = Number(p.budget);
    if (Number.isInteger(tokens) && tokens > 0) body.token_budget = tokens;
    if (!time.isLive()) body.as_of = time.asOfTime();
    const packet = await post('/api/context', body);
    time.noteFacts(packet.facts);

    const limit = body.token_budget;
    const meter = el('div', { class: 'meter' }, el('span'));
    meter.firstChild.style.width = `${Math.min(100, limit ? (100 * packet.tokens) / limit : 100)}%`;
    root.append(el('p', { id: 'context-tokens' },
      `${packet.tokens} tokens in the packet${limit ? ` of a budget of ${limit}` : ''}; `,
      `${packet.total_tokens} for all ${packet.candidates} candidate facts.`), meter);
    if (packet.entities.length) root.append(el('p', {}, 'Entities: ', packet.entities.map((e) => [entityLinks(e), ' '])));
    for (const w of packet.warnings || []) {
      root.append(el('p', { class: 'banner' }, `${w.kind}: ${w.message} `, (w.facts || []).map((id) => [factLink(id), ' '])));
    }
    root.append(el('h3', {}, 'Summary'), el('pre', { id: 'context-summary' }, packet.summary));
    const rank = new Map((packet.ranking || []).map((r) => [r.id, r]));
    root.append(el('h3', {}, `Facts (${packet.facts.length})`));
    if (packet.facts.length) {
      root.append(table([
        ['Subject', (f) => entityLinks(f.subject)],
        ['Predicate', (f) => f.predicate],
        ['Object', (f) => valueNode(f.object), 'value'],
        ['Status', (f) => statusNode(f.status)],
        ['Origin', (f) => rank.get(f.id)?.origin ?? ''],
        ['Score', (f) => (rank.get(f.id)?.score ?? 0).toFixed(3), 'num'],
        ['Tokens', (f) => String(rank.get(f.id)?.tokens ?? ''), 'num'],
        ['Fact', (f) => factLink(f.id)],
      ], packet.facts));
    } else {
      root.append(el('p', { class: 'empty' }, 'No facts fit.'));
    }
    if (packet.pages && packet.pages.length) {
      root.append(el('h3', {}, `Pages (${packet.pages.length})`));
      for (const pg of packet.pages) {
        root.append(el('div', { class: 'card' }, el('div', { class: 'head' }, el('strong', {}, pg.title), entityLinks(pg.subject)),
          el('pre', {}, pg.body)));
      }
    }
  },
};
