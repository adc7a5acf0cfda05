// The live feed: one EventSource on `/api/stream` for the whole session
// (the browser sends the session cookie with it), the latest changes kept in
// memory, and the view that lists them as they arrive.

import { streamUrl } from './api.js';
import { el, entityLinks, factLink, fmtTime, statusNode, valueNode } from './dom.js';
import * as time from './time.js';

const KEEP = 300;
const events = [];
const listeners = new Set();
let source = null;
let unseen = 0;
let viewing = false;

function setState(text, live) {
  const node = document.getElementById('feed-state');
  node.textContent = `feed: ${text}`;
  node.classList.toggle('live', live);
}

function badge() {
  const b = document.getElementById('feed-badge');
  b.hidden = unseen === 0;
  b.textContent = unseen > 99 ? '99+' : String(unseen);
}

/** `fn(event)` for every change that arrives. */
export function onEvent(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

// Events up to this tx were already committed when the console opened:
// they fill the list but are not counted as new.
let backlog = 0;

/**
 * Connects. With `after`, the transactions after that one are replayed
 * first; those up to `upTo` count as already seen.
 */
export function start({ after, upTo } = {}) {
  if (source) source.close();
  setState('connecting', false);
  backlog = upTo || 0;
  source = new EventSource(streamUrl(typeof after === 'number' ? { after_tx: after } : {}));
  source.addEventListener('open', () => setState('live', true));
  source.addEventListener('error', () => {
    setState(source.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting', false);
  });
  source.addEventListener('message', (m) => {
    let ev;
    try {
      ev = JSON.parse(m.data);
    } catch {
      return;
    }
    ev.received = Date.now();
    events.unshift(ev);
    if (events.length > KEEP) events.length = KEEP;
    if (ev.fact) time.noteFacts([ev.fact]);
    if (!viewing && !(ev.tx <= backlog)) {
      unseen += 1;
      badge();
    }
    for (const fn of listeners) fn(ev);
  });
}

/** Forgets every event (an admin picked another tenant). */
export function clear() {
  if (source) source.close();
  source = null;
  events.length = 0;
  unseen = 0;
  badge();
}

function item(ev, fresh) {
  const f = ev.fact;
  const head = [el('span', { class: 'time' }, fmtTime(f ? f.recorded_at : ev.received)),
    el('span', { class: ['op', ev.op] }, ev.op), el('span', { class: 'tx' }, `tx ${ev.tx}`)];
  let body;
  if (f) {
    body = [entityLinks(f.subject), ' ', el('span', { class: 'predicate' }, f.predicate), ' ', valueNode(f.object), ' ',
      statusNode(f.status), ' ', factLink(f.id)];
    if (ev.superseded && ev.superseded.length) body.push(el('span', { class: 'note' }, ` closed ${ev.superseded.length} older fact(s)`));
    if (ev.continued && ev.continued.length) body.push(el('span', { class: 'note' }, ` left ${ev.continued.length} tail(s)`));
  } else if (ev.predicate) {
    body = [`predicate ${ev.predicate.name} is now ${ev.predicate.cardinality}`];
  } else if (ev.threshold !== undefined) {
    body = [`candidate threshold is now ${ev.threshold}`];
  } else {
    body = [JSON.stringify(ev)];
  }
  return el('li', { class: fresh ? 'fresh' : '', 'data-tx': ev.tx }, ...head, el('span', { class: 'body' }, ...body));
}

export const feedView = {
  render(root, _route, ctx) {
    viewing = true;
    unseen = 0;
    badge();
    const list = el('ol', { class: 'feed', id: 'feed-list' }, events.map((ev) => item(ev, false)));
    const empty = el('p', { class: 'empty', id: 'feed-empty' }, 'Waiting for changes\u2026 Every write of this tenant appears here as it commits.');
    root.append(el('h2', {}, 'Live feed'),
      el('p', { class: 'note' }, 'Changes as they are committed, newest first. The feed is always live; the record-time slider does not apply to it.'),
      events.length ? '' : empty, list);
    const off = onEvent((ev) => {
      empty.remove();
      list.prepend(item(ev, true));
      while (list.children.length > KEEP) list.lastChild.remove();
    });
    ctx.onCleanup(() => {
      off();
      viewing = false;
    });
  },
};
