// The console's entry point: signs in (or not, in open mode), then routes
// `#/view/arg?params` to a view and re-renders the active view whenever the
// global time changes.

import { currentTenant } from './api.js';
import { el, errorNode } from './dom.js';
import { mode, renderWho, showLogin, whoami } from './session.js';
import * as time from './time.js';
import * as feed from './feed.js';
import { factsView, factView } from './facts.js';
import { timelineView } from './timeline.js';
import { graphView } from './graph.js';
import { searchView } from './search.js';
import { contextView } from './context.js';
import { alertsView } from './alerts.js';

const views = {
  facts: factsView,
  fact: factView,
  timeline: timelineView,
  graph: graphView,
  feed: feed.feedView,
  search: searchView,
  context: contextView,
  alerts: alertsView,
};

const main = document.getElementById('main');
let seq = 0;
let cleanups = [];
let active = null;
// Transactions the feed replays when the console opens.
const FEED_REPLAY = 20;

function parseHash() {
  const h = location.hash.replace(/^#\/?/, '');
  const [path, qs] = h.split('?', 2);
  const [name, ...rest] = path.split('/');
  const arg = rest.length ? decodeURIComponent(rest.join('/')) : '';
  const params = Object.fromEntries(new URLSearchParams(qs || ''));
  return { name: views[name] ? name : 'facts', arg, params };
}

/** Renders the view of the address into a detached node, then swaps it in, so a slow answer never overwrites a newer one and a re-render never flashes empty. */
async function render({ keepScroll = false } = {}) {
  const token = ++seq;
  const route = parseHash();
  const view = views[route.name];
  for (const fn of cleanups) fn();
  cleanups = [];
  active = view;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('current', a.dataset.view === (view.nav || route.name));
  }
  const ctx = {
    width: Math.max(480, main.clientWidth - 48),
    current: () => token === seq,
    onCleanup: (fn) => cleanups.push(fn),
    rerender: () => render({ keepScroll: true }),
  };
  const root = el('div', { class: `view view-${route.name}`, 'data-view': route.name });
  try {
    if (document.body.dataset.scope === 'admin' && !currentTenant()) {
      root.append(el('p', { class: 'banner' },
        'Signed in with an admin token: name a tenant (bottom left) to look at its memory.'));
    } else {
      await view.render(root, route, ctx);
    }
  } catch (e) {
    root.append(errorNode(e));
  }
  if (token !== seq) return;
  const top = main.scrollTop;
  const refocus = keepScroll ? carryEdits(main, root) : null;
  main.replaceChildren(root);
  if (keepScroll) main.scrollTop = top;
  if (refocus) refocus();
  main.dataset.rendered = String(token);
}

/** The field of `form` named `name`, when it is one element (not a group of radios). */
function fieldOf(form, name) {
  const f = form.elements.namedItem(name);
  return f instanceof Element ? f : null;
}

/**
 * A re-render in place (a change arrived, the slider moved) builds the view's
 * forms afresh from the address. Fields someone has edited and not yet
 * submitted are carried into the new forms, so a live list never resets a
 * filter under their hands. Returns a function that puts the focus (and the
 * caret) back where it was, to call once the new view is in the page.
 */
function carryEdits(from, to) {
  for (const form of from.querySelectorAll('form[id][data-dirty]')) {
    const fresh = to.querySelector(`form#${CSS.escape(form.id)}`);
    if (!fresh) continue;
    for (const f of form.elements) {
      const twin = f.name ? fieldOf(fresh, f.name) : null;
      if (!twin || twin.type !== f.type) continue;
      if (f.type === 'checkbox' || f.type === 'radio') twin.checked = f.checked;
      else if ('value' in f && f.type !== 'submit' && f.type !== 'button') twin.value = f.value;
    }
    fresh.dataset.dirty = '1';
  }
  const focused = document.activeElement;
  if (!focused || !from.contains(focused) || !focused.form || !focused.form.id || !focused.name) return null;
  const form = to.querySelector(`form#${CSS.escape(focused.form.id)}`);
  const twin = form ? fieldOf(form, focused.name) : null;
  if (!twin) return null;
  const caret = typeof focused.selectionStart === 'number' ? [focused.selectionStart, focused.selectionEnd] : null;
  return () => {
    twin.focus();
    if (caret && typeof twin.setSelectionRange === 'function') twin.setSelectionRange(...caret);
  };
}

// A form a person has typed into: see carryEdits.
for (const type of ['input', 'change']) {
  main.addEventListener(type, (ev) => {
    if (ev.target.form) ev.target.form.dataset.dirty = '1';
  });
}

let liveTimer;
/** A change arrived: a live view that shows current data follows it. */
function onFeedEvent() {
  if (!time.isLive() || !active || !active.live) return;
  clearTimeout(liveTimer);
  liveTimer = setTimeout(() => render({ keepScroll: true }), 400);
}

/** The record times for the slider, then the feed, replaying the last few changes. */
async function startData() {
  try {
    await time.loadPoints();
  } catch {
    // The slider then fills from what the views read.
  }
  const txs = time.knownTxs();
  const recent = txs.length ? txs[Math.max(0, txs.length - FEED_REPLAY)] - 1 : undefined;
  feed.start({ after: recent, upTo: txs[txs.length - 1] });
}

async function start() {
  let me;
  try {
    me = await whoami();
  } catch (e) {
    document.body.append(errorNode(e));
    return;
  }
  if (!me) {
    showLogin();
    return;
  }
  document.body.dataset.scope = me.scope;
  renderWho(me, {
    onTenant: (tenant) => {
      feed.clear();
      time.reset();
      if (tenant) startData();
      render();
    },
  });
  document.getElementById('shell').hidden = false;
  document.getElementById('timebar').hidden = false;
  time.bindTimebar();
  time.onChange((what) => {
    if (what !== 'points') render({ keepScroll: true });
  });
  feed.onEvent(onFeedEvent);
  if (me.scope !== 'admin' || me.tenant) startData();
  window.addEventListener('hashchange', () => render());
  if (!location.hash) history.replaceState(null, '', '#/facts');
  await render();
}

document.body.dataset.mode = mode;
start();
