// DOM helpers. Every piece of data reaches the page as a text node or an
// attribute value, never as markup: fact values are user input.

export const SVG_NS = 'http://www.w3.org/2000/svg';

function build(node, attrs, children) {
  let value;
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k === 'value' && 'value' in node) value = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  // After the children: a <select> takes a value only once it has its options.
  if (value !== undefined) node.value = value;
  return node;
}

/** An HTML element: `el('a', {href: '#/x'}, 'text', child)`. */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

/** Unix ms as local `YYYY-MM-DD HH:MM:SS.mmm`. */
export function fmtTime(ms) {
  if (ms === null || ms === undefined) return '';
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return String(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** Unix ms as a short local date (and time when it is not midnight). */
export function fmtDate(ms) {
  if (ms === null || ms === undefined) return '';
  const d = new Date(ms);
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  if (!d.getHours() && !d.getMinutes() && !d.getSeconds() && !d.getMilliseconds()) return day;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A fact's object as text: strings as they are, anything else as JSON. */
export function fmtValue(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** Whether a value is an entity reference (`Type:id`). */
export function isEntity(v) {
  return typeof v === 'string' && /^[A-Za-z][A-Za-z0-9_-]*:\S+$/.test(v);
}

/** `#/view/arg?k=v` with every part encoded. */
export function href(view, arg, params) {
  let h = `#/${view}`;
  if (arg !== undefined && arg !== null && arg !== '') h += `/${encodeURIComponent(arg)}`;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `${h}?${s}` : h;
}

export function factLink(id, text) {
  return el('a', { href: href('fact', id), class: 'mono', title: `fact ${id}` }, text ?? shortId(id));
}

/** An entity name that opens the facts about it, with links to its timeline and its graph. */
export function entityLinks(name) {
  return el('span', { class: 'entity' },
    el('a', { href: href('facts', null, { subject: name }), title: `facts about ${name}` }, name), ' ',
    el('a', { href: href('timeline', name), title: `timeline of ${name}`, class: 'icon' }, '\u25A4'), ' ',
    el('a', { href: href('graph', name), title: `graph around ${name}`, class: 'icon' }, '\u25CE'));
}

/** A fact's object: entity refs become links, everything else text. */
export function valueNode(v) {
  return isEntity(v) ? entityLinks(v) : el('span', { class: typeof v === 'string' ? '' : 'mono' }, fmtValue(v));
}

export function shortId(id) {
  const s = String(id);
  return s.length > 13 ? `${s.slice(0, 8)}\u2026${s.slice(-4)}` : s;
}

export function statusNode(status) {
  return el('span', { class: ['status', status] }, status);
}

/** A table: `columns` are `[header, cell(row) -> node|string, class?]`. */
export function table(columns, rows, { onRow, selected } = {}) {
  const head = el('tr', {}, columns.map(([h, , cls]) => el('th', { class: cls }, h)));
  const body = rows.map((r) => el('tr', {
    class: [onRow && 'row', selected && selected(r) && 'selected'],
    onclick: onRow ? (e) => { if (!e.target.closest('a, button')) onRow(r); } : undefined,
  }, columns.map(([, cell, cls]) => el('td', { class: cls }, cell(r)))));
  return el('table', { class: 'data' }, el('thead', {}, head), el('tbody', {}, body));
}

export function errorNode(err) {
  const msg = err && err.code ? `${err.code}: ${err.message}` : String(err && err.message ? err.message : err);
  return el('p', { class: 'error', role: 'alert' }, msg);
}

/** A labelled input for the toolbars. */
export function field(label, input) {
  return el('label', {}, label, input);
}
