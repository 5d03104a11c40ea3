// The dashboard's access to the server: the token (sessionStorage only,
// never in a URL), JSON requests with the error envelope, and the signal
// socket, which presents the token as a WebSocket subprotocol because a
// browser cannot set Authorization on a socket.

const TOKEN_KEY = 'relayger.dashboard.token';
const SOCKET_PROTOCOL = 'relayger.v1';
const TOKEN_PROTOCOL_PREFIX = 'relayger.token.';

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  save(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** A refused request: the envelope's code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** `METHOD path` with the session's token; the JSON answer. */
export async function api(method, path, body) {
  const headers = { authorization: `Bearer ${session.token ?? ''}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
  });
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    throw new ApiError(
      response.status,
      json?.error?.code ?? 'http_error',
      json?.error?.message ?? `${response.status} ${response.statusText}`,
    );
  }
  return json;
}

export const segment = (value) => encodeURIComponent(String(value));

/**
 * What became of a question (`GET …/delivery`: its state for each other
 * member of the room), or null when the server refuses to say (a server
 * without the route, a room this token cannot read).
 */
export async function readDelivery(roomId, messageId) {
  try {
    return await api('GET', `/v1/rooms/${segment(roomId)}/messages/${segment(messageId)}/delivery`);
  } catch (error) {
    if (error instanceof ApiError) return null;
    throw error;
  }
}

/**
 * Holds the signal socket at `path` open: `onSignal()` for every frame,
 * `onState(open)` when it opens or drops. Reconnects with a doubling delay
 * (at most 30 s) until `close()`.
 */
export function holdSocket(path, { onSignal, onState }) {
  let socket = null;
  let closed = false;
  let delay = 500;
  let timer = null;
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const connect = () => {
    const token = session.token;
    if (closed || !token) return;
    socket = new WebSocket(`${scheme}//${location.host}${path}`, [
      SOCKET_PROTOCOL,
      TOKEN_PROTOCOL_PREFIX + token,
    ]);
    socket.addEventListener('open', () => {
      delay = 500;
      onState(true);
    });
    socket.addEventListener('message', () => onSignal());
    socket.addEventListener('close', () => {
      onState(false);
      if (closed) return;
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30_000);
    });
  };
  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      socket?.close();
    },
  };
}

/**
 * `GET path` page after page (following each answer's `next` as `after`,
 * at most `maxPages`), the `fields` lists of every page joined.
 */
export async function everyPage(path, fields, maxPages = 20) {
  const joined = Object.fromEntries(fields.map((field) => [field, []]));
  let after = null;
  for (let page = 0; page < maxPages; page++) {
    const separator = path.includes('?') ? '&' : '?';
    const answer = await api('GET', after ? `${path}${separator}after=${segment(after)}` : path);
    for (const field of fields) joined[field].push(...answer[field]);
    if (!answer.next) break;
    after = answer.next;
  }
  return joined;
}
