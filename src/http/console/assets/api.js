// fetch wrappers for the REST API. The session cookie (keyed mode) goes
// along because every request is same-origin; no key is ever held here.

/** An error answer: the API's `{"error":{"code","message"}}` envelope. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The tenant an admin token is looking at (`?tenant=`); null for tenant keys.
let tenant = null;

export function setTenant(name) {
  tenant = name || null;
}

export function currentTenant() {
  return tenant;
}

/** `?k=v&...` of the given parameters, leaving out empty ones. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** One request; resolves to `{data, headers}` or rejects with an ApiError. */
export async function request(path, { method = 'GET', params, body } = {}) {
  const all = { ...params };
  if (tenant && path.startsWith('/api/') && path !== '/api/session') all.tenant = tenant;
  const init = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path + query(all), init);
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const e = data && data.error;
    throw new ApiError(res.status, e ? e.code : `HTTP ${res.status}`, e ? e.message : res.statusText);
  }
  return { data, headers: res.headers };
}

export const get = (path, params) => request(path, { params }).then((r) => r.data);
export const post = (path, body, params) => request(path, { method: 'POST', body, params }).then((r) => r.data);

/** The change feed's address (EventSource sends the cookie itself). */
export function streamUrl(params) {
  return '/api/stream' + query({ ...params, tenant: tenant || undefined });
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
export async function pool(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
