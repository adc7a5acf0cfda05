// The search box over `GET /api/search`: hybrid recall (full text, the
// graph, embeddings when configured) at the global record time.

import { get } from './api.js';
import { el, entityLinks, factLink, field, href, statusNode, table, valueNode } from './dom.js';
import { timeBanner } from './facts.js';
import * as time from './time.js';

export const searchView = {
  async render(root, { params: p }) {
    const q = el('input', { name: 'question', type: 'search', value: p.q || '', placeholder: 'where does sarah work?', size: 48 });
    const topK = el('select', { name: 'top_k', value: p.top_k || '10' }, ['5', '10', '25', '50'].map((k) => el('option', { value: k }, k)));
    const candidates = el('input', { type: 'checkbox', name: 'include_candidates' });
    candidates.checked = p.candidates === '1';
    const form = el('form', { class: 'toolbar', id: 'search-form' },
      field('Question', q), field('Results', topK), field('Candidates', candidates), el('button', { type: 'submit' }, 'Search'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      location.hash = href('search', null, { q: q.value.trim(), top_k: topK.value, candidates: candidates.checked ? '1' : '' });
    });
    root.append(el('h2', {}, 'Search'), form);
    if (!p.q) {
      root.append(el('p', { class: 'empty' }, 'Ask in plain words; the answer lists the facts that match best.'));
      return;
    }
    const banner = timeBanner({ valid: false });
    if (banner) root.append(banner);
    const res = await get('/api/search', {
      question: p.q, top_k: p.top_k || 10, include_candidates: p.candidates === '1' ? true : undefined, as_of: time.asOfTime() ?? undefined,
    });
    time.noteFacts(res.answer_facts);
    const why = new Map(res.matches.map((m) => [m.id, m]));
    if (res.stale) root.append(el('p', { class: 'banner' }, 'The index had not caught up with the latest writes; recent facts may be missing.'));
    if (res.terms && res.terms.length) root.append(el('p', { class: 'note' }, `Terms: ${res.terms.join(', ')}`));
    if (res.entities && res.entities.length) root.append(el('p', {}, 'Entities: ', res.entities.map((e) => [entityLinks(e), ' '])));
    if (!res.answer_facts.length) {
      root.append(el('p', { class: 'empty', id: 'search-empty' }, 'Nothing matches.'));
      return;
    }
    const results = table([
      ['#', (f) => String(res.answer_facts.indexOf(f) + 1), 'num'],
      ['Subject', (f) => entityLinks(f.subject)],
      ['Predicate', (f) => f.predicate],
      ['Object', (f) => valueNode(f.object), 'value'],
      ['Status', (f) => statusNode(f.status)],
      ['Found by', (f) => (why.get(f.id)?.reasons || []).join(', ')],
      ['Score', (f) => (why.get(f.id)?.score ?? 0).toFixed(4), 'num'],
      ['Fact', (f) => factLink(f.id)],
    ], res.answer_facts);
    results.id = 'search-results';
    root.append(results);
  },
};
