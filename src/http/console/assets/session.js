// Who is using the console: open mode, a tenant key or an admin token, and
// signing in and out through `POST`/`DELETE /api/session` (the HttpOnly
// `tempora_session` cookie; the key never stays in the page).

import { ApiError, get, request, setTenant } from './api.js';
import { el } from './dom.js';

/** `open` or `keyed`, as the server wrote it into the page. */
export const mode = document.querySelector('meta[name="tempora-mode"]')?.content === 'open' ? 'open' : 'keyed';

const TENANT_KEY = 'tempora.console.tenant';

/**
 * The signed-in principal: `{scope: 'open'|'tenant'|'admin', tenant}`, or
 * null when a key is needed. In keyed mode every gated route answers 404
 * without a valid cookie, so a 404 from `/api/stats` means "signed out".
 */
export async function whoami() {
  if (mode === 'open') return { scope: 'open', tenant: 'default' };
  let stats;
  try {
    stats = await get('/api/stats');
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
  // A tenant key reads its facts; an admin token must name a tenant first.
  try {
    await request('/api/facts', { params: { limit: 1 } });
    return { scope: 'tenant', tenant: stats.tenant };
  } catch (e) {
    if (e instanceof ApiError && e.status === 400) {
      const chosen = sessionStorage.getItem(TENANT_KEY);
      setTenant(chosen);
      return { scope: 'admin', tenant: chosen };
    }
    throw e;
  }
}

/** Trades a key for the session cookie; resolves to the login answer. */
export async function login(key) {
  const res = await fetch('/api/session', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ key }),
  });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const e = body && body.error;
    throw new ApiError(res.status, e ? e.code : `HTTP ${res.status}`, res.status === 401 ? 'invalid key' : e?.message);
  }
  return body;
}

export async function logout() {
  sessionStorage.removeItem(TENANT_KEY);
  await fetch('/api/session', { method: 'DELETE', credentials: 'same-origin' });
}

/** Shows the login form; a successful sign-in reloads the page, so nothing of an earlier session stays in memory. */
export function showLogin() {
  document.getElementById('login').hidden = false;
  const form = document.getElementById('login-form');
  const input = document.getElementById('login-key');
  const error = document.getElementById('login-error');
  input.focus();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.textContent = '';
    try {
      await login(input.value);
      input.value = '';
      location.reload();
    } catch (e) {
      error.textContent = e.message || String(e);
      input.select();
    }
  });
}

/** The right end of the top bar: mode, tenant, the admin's tenant picker, sign out. */
export function renderWho(me, { onTenant }) {
  const who = document.getElementById('who');
  const parts = [];
  if (me.scope === 'open') {
    parts.push(el('span', { class: 'mode open', title: 'No keys are configured: anyone who reaches this server can read and write.' }, 'open mode'));
    parts.push(el('span', {}, 'tenant ', el('span', { class: 'tenant' }, me.tenant)));
  } else if (me.scope === 'tenant') {
    parts.push(el('span', { class: 'mode' }, 'keyed'));
    parts.push(el('span', {}, 'tenant ', el('span', { class: 'tenant', id: 'who-tenant' }, me.tenant)));
  } else {
    const input = el('input', { id: 'admin-tenant', placeholder: 'tenant name', value: me.tenant || '' });
    input.addEventListener('change', () => {
      const t = input.value.trim();
      if (t) sessionStorage.setItem(TENANT_KEY, t);
      else sessionStorage.removeItem(TENANT_KEY);
      setTenant(t);
      onTenant(t || null);
    });
    parts.push(el('span', { class: 'mode' }, 'admin'));
    parts.push(el('label', {}, 'tenant ', input));
  }
  if (me.scope !== 'open') {
    parts.push(el('button', {
      type: 'button', class: 'small secondary', id: 'logout',
      onclick: async () => {
        await logout();
        location.reload();
      },
    }, 'Sign out'));
  }
  who.replaceChildren(...parts);
}
