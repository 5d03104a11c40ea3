// One JSON exchange with the server, and the rule for where a token may
// travel: what the client and registration (which has no token yet) share.

import { RelaygerError, abortError } from './errors.js';
import { anySignal } from './util.js';

/** The environment variable that allows plain HTTP to other machines. */
const ALLOW_INSECURE_HTTP_ENV = 'RELAYGER_ALLOW_INSECURE_HTTP';

/**
 * Whether a token may travel to `server`: over https:// always, over plain
 * http:// only to this machine (localhost, 127.0.0.0/8, ::1), the same rule
 * as the Rust client's.
 */
export function tokenMayTravel(server) {
  let url;
  try {
    url = new URL(server);
  } catch {
    return false;
  }
  if (url.protocol === 'https:') return true;
  if (url.protocol !== 'http:') return false;
  const host = url.hostname.toLowerCase();
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function allowedByEnv(value) {
  return ['1', 'true', 'yes'].includes(String(value ?? '').trim().toLowerCase());
}

/** The server's base URL once it passes the rules for sending a token to it. */
export function checkedServer(server, allowInsecureHttp) {
  if (typeof server !== 'string' || !/^https?:\/\//.test(server)) {
    throw new RelaygerError('invalid_argument', '`server` must be an http(s) URL');
  }
  const allowInsecure = allowInsecureHttp ?? allowedByEnv(process.env[ALLOW_INSECURE_HTTP_ENV]);
  if (!allowInsecure && !tokenMayTravel(server)) {
    throw new RelaygerError(
      'invalid_argument',
      `refusing to send a token over plain HTTP to ${server}, which is not this machine: ` +
        `use https://, or pass allowInsecureHttp: true (or set ${ALLOW_INSECURE_HTTP_ENV}=1)`,
    );
  }
  return server.replace(/\/+$/, '');
}

/**
 * One JSON exchange with the server: `{ status, headers, body }`, or a
 * RelaygerError with the server's code (or `timeout`, `network_error`,
 * `unexpected_response`; the abort reason when `signal` or `shutdown` ends it).
 */
export async function exchange(server, method, path, { token, body, query, signal, shutdown, timeoutMs }) {
  const url = new URL(server + path);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = anySignal([signal, shutdown, timeout]);
  const headers = { accept: 'application/json' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  let payload;
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let response;
  let text;
  try {
    response = await fetch(url, { method, headers, body: payload, signal: combined.signal });
    text = await response.text();
  } catch (error) {
    if (signal?.aborted) throw abortError(signal);
    if (shutdown?.aborted) throw shutdown.reason;
    if (timeout.aborted) {
      throw new RelaygerError('timeout', `${method} ${path}: no answer within ${timeoutMs} ms`);
    }
    throw new RelaygerError('network_error', `${method} ${path}: ${error.cause?.message ?? error.message}`, {
      cause: error,
    });
  } finally {
    combined.dispose();
  }
  let parsed = null;
  if (text !== '') {
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new RelaygerError('unexpected_response', `${method} ${path}: HTTP ${response.status}, not JSON`, {
        status: response.status,
      });
    }
  }
  if (!response.ok) {
    const error = parsed?.error;
    if (error && typeof error.code === 'string') {
      throw new RelaygerError(error.code, error.message ?? error.code, {
        status: response.status,
        details: error.details,
      });
    }
    throw new RelaygerError('unexpected_response', `${method} ${path}: HTTP ${response.status}`, {
      status: response.status,
    });
  }
  return { status: response.status, headers: response.headers, body: parsed };
}
