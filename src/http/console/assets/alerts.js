// Alerts (`GET /api/alerts`) with ack (`POST /api/alerts/{id}/ack`) and
// "evaluate now". An alert is facts (`Alert:<id>` with `alert.*`
// predicates), so at a past record time the view reads those facts as they
// stood, read-only.

import { get, post } from './api.js';
import { el, errorNode, field, fmtTime, href } from './dom.js';
import { timeBanner } from './facts.js';
import * as time from './time.js';

const STATES = [['', 'open and acked'], ['open', 'open'], ['acked', 'acked'], ['resolved', 'resolved'], ['all', 'all']];

/** The alerts as their facts stood at record time `asOf`. */
async function alertsAsOf(asOf, state) {
  const read = (predicate) => get('/api/facts', { predicate, as_of: asOf, limit: 1000 });
  const [states, rules, keys, messages, fired] = await Promise.all(
    ['alert.state', 'alert.rule', 'alert.key', 'alert.message', 'alert.fired_at'].map(read));
  const by = (facts) => new Map(facts.map((f) => [f.subject, f.object]));
  const [rule, key, message, firedAt] = [by(rules), by(keys), by(messages), by(fired)];
  const wanted = state === 'all' ? null : state ? [state] : ['open', 'acked'];
  return states
    .filter((f) => f.subject.startsWith('Alert:') && (!wanted || wanted.includes(f.object)))
    .map((f) => ({
      id: f.subject.slice('Alert:'.length), subject: f.subject, state: f.object, rule: rule.get(f.subject),
      key: key.get(f.subject), message: message.get(f.subject), fired_at: firedAt.get(f.subject),
    }))
    .sort((a, b) => (b.fired_at ?? 0) - (a.fired_at ?? 0));
}

function card(a, live, ctx) {
  const head = el('div', { class: 'head' },
    el('strong', {}, `${a.rule ?? 'alert'}${a.key ? ` \u00B7 ${a.key}` : ''}`),
    el('span', { class: ['pill', a.state] }, a.state), el('span', { class: 'grow' }));
  const times = [
    a.fired_at && `fired ${fmtTime(a.fired_at)}`,
    a.acked_at && `acked ${fmtTime(a.acked_at)}`,
    a.resolved_at && `resolved ${fmtTime(a.resolved_at)}`,
  ].filter(Boolean).join(' \u00B7 ');
  const body = [head, el('p', {}, a.message ?? ''),
    el('p', { class: 'note' }, times, a.value !== undefined ? ` \u00B7 value ${a.value}, limit ${a.limit}` : '', ' \u00B7 ',
      el('a', { href: href('timeline', `Alert:${a.id}`) }, 'history'))];
  const box = el('div', { class: 'card', 'data-alert': a.id }, body);
  if (live && a.state === 'open') {
    const ack = el('button', { type: 'button', class: 'small', 'data-ack': a.id }, 'Acknowledge');
    ack.addEventListener('click', async () => {
      ack.disabled = true;
      try {
        await post(`/api/alerts/${encodeURIComponent(a.id)}/ack`);
        ctx.rerender();
      } catch (e) {
        box.append(errorNode(e));
        ack.disabled = false;
      }
    });
    head.append(ack);
  }
  return box;
}

export const alertsView = {
  live: true,
  async render(root, { params: p }, ctx) {
    const state = el('select', { name: 'state', value: p.state || '' }, STATES.map(([v, l]) => el('option', { value: v }, l)));
    state.addEventListener('change', () => { location.hash = href('alerts', null, { state: state.value }); });
    const evaluate = el('button', { type: 'button', class: 'secondary', id: 'alerts-evaluate' }, 'Evaluate now');
    const outcome = el('span', { class: 'note' });
    evaluate.addEventListener('click', async () => {
      evaluate.disabled = true;
      try {
        const r = await post('/api/alerts/evaluate');
        outcome.textContent = `${r.fired.length} fired, ${r.resolved.length} resolved, ${r.unchanged.length} unchanged`;
        setTimeout(() => ctx.rerender(), 600);
      } catch (e) {
        outcome.replaceChildren(errorNode(e));
      } finally {
        evaluate.disabled = false;
      }
    });
    const live = time.isLive();
    root.append(el('h2', {}, 'Alerts'),
      el('div', { class: 'toolbar' }, field('State', state), live ? evaluate : '', outcome));
    const banner = timeBanner({ valid: false });
    if (banner) root.append(banner, el('p', { class: 'note' }, 'At a past record time alerts are read-only.'));
    const alerts = live ? await get('/api/alerts', { state: p.state || undefined }) : await alertsAsOf(time.asOfTime(), p.state);
    if (!alerts.length) {
      root.append(el('p', { class: 'empty', id: 'alerts-empty' }, 'No alerts.'));
      return;
    }
    root.append(el('div', { class: 'cards', id: 'alerts-list' }, alerts.map((a) => card(a, live, ctx))));
  },
};
