// The global time: a record time (`as_of`, null = live) and a valid time
// (`valid_at`, null = current), and the time bar that sets them.
//
// The record-time slider steps through the moments at which the database
// changed that the console has seen (record times of fact versions, from the
// fact list, histories and the live feed); its last stop is "live". Every
// state of the data lies at one of those moments, so each stop shows a
// different picture.

import { fmtTime } from './dom.js';
import { request } from './api.js';

const points = new Map(); // record time (ms) -> highest tx seen at it
let sorted = []; // the record times, ascending
let asOf = null;
let validAt = null;
const listeners = new Set();

/** `fn(what)` after a change: 'as_of', 'valid_at' or 'points'. */
export function onChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function emit(what) {
  for (const fn of listeners) fn(what);
}

export const asOfTime = () => asOf;
export const validAtTime = () => validAt;
export const isLive = () => asOf === null;

/** The read parameters of the current time (empty when live and current). */
export function params() {
  return { as_of: asOf ?? undefined, valid_at: validAt ?? undefined };
}

/** Remembers the record times of facts (each version's and its first). */
export function noteFacts(facts) {
  let added = false;
  const add = (ms, tx) => {
    if (typeof ms !== 'number') return;
    const had = points.get(ms);
    if (had === undefined) added = true;
    if (had === undefined || (tx ?? 0) > had) points.set(ms, tx ?? had ?? null);
  };
  for (const f of facts) {
    if (!f) continue;
    add(f.recorded_at, f.tx);
    add(f.created_at, f.created_tx);
  }
  if (added) {
    sorted = [...points.keys()].sort((a, b) => a - b);
    syncSlider();
    emit('points');
  }
}

/** Forgets every record time and goes live (another tenant is shown). */
export function reset() {
  points.clear();
  sorted = [];
  asOf = null;
  syncSlider();
}

export function setAsOf(ms) {
  if (ms !== null && !points.has(ms)) {
    points.set(ms, null);
    sorted = [...points.keys()].sort((a, b) => a - b);
  }
  asOf = ms;
  syncSlider();
  emit('as_of');
}

export function setValidAt(ms) {
  validAt = ms;
  syncValid();
  emit('valid_at');
}

/** The transactions seen so far, ascending. */
export function knownTxs() {
  return [...new Set([...points.values()].filter((t) => typeof t === 'number'))].sort((a, b) => a - b);
}

/** The record times seen so far, ascending. */
export function recordTimes() {
  return sorted.slice();
}

/** Loads the record times of the tenant's facts (a bounded number of pages). */
export async function loadPoints() {
  let cursor;
  for (let page = 0; page < 5; page++) {
    const params = { status: 'all', include_retracted: true, limit: 1000, cursor };
    const { data, headers } = await request('/api/facts', { params });
    noteFacts(data || []);
    cursor = headers.get('x-next-cursor');
    if (!cursor) return;
  }
}

// --- the time bar ---------------------------------------------------------

const $ = (id) => document.getElementById(id);

function syncSlider() {
  const slider = $('as-of');
  if (!slider) return;
  slider.max = String(sorted.length);
  slider.value = String(asOf === null ? sorted.length : Math.max(0, sorted.indexOf(asOf)));
  const label = $('as-of-label');
  if (asOf === null) {
    label.textContent = 'live \u00B7 now';
    label.classList.remove('past');
  } else {
    const tx = points.get(asOf);
    label.textContent = `as of ${fmtTime(asOf)}${tx ? ` \u00B7 tx ${tx}` : ''}`;
    label.classList.add('past');
  }
  $('as-of-live').disabled = asOf === null;
  $('as-of-next').disabled = asOf === null;
  $('as-of-prev').disabled = sorted.length === 0 || slider.value === '0';
}

function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

function syncValid() {
  const input = $('valid-at');
  if (!input) return;
  input.value = validAt === null ? '' : toLocalInput(validAt);
  $('valid-now').disabled = validAt === null;
}

function atIndex(i) {
  return i >= sorted.length ? null : sorted[Math.max(0, i)];
}

/** Wires the time bar. A drag of the slider re-renders once it pauses. */
export function bindTimebar() {
  const slider = $('as-of');
  let timer;
  slider.addEventListener('input', () => {
    const ms = atIndex(Number(slider.value));
    asOf = ms;
    syncSlider();
    clearTimeout(timer);
    timer = setTimeout(() => emit('as_of'), 120);
  });
  $('as-of-prev').addEventListener('click', () => setAsOf(atIndex(Number(slider.value) - 1)));
  $('as-of-next').addEventListener('click', () => setAsOf(atIndex(Number(slider.value) + 1)));
  $('as-of-live').addEventListener('click', () => setAsOf(null));
  $('valid-at').addEventListener('change', (e) => {
    const v = e.target.value;
    const ms = v ? new Date(v).getTime() : NaN;
    setValidAt(Number.isNaN(ms) ? null : ms);
  });
  $('valid-now').addEventListener('click', () => setValidAt(null));
  syncSlider();
  syncValid();
}
