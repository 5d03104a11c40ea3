// Names the SDK shares with the server and the Rust clients
// (relayger_core::wire::names); relayger-core/fixtures/names.json pins them
// for both languages.

/** Idle claim response header: pending incoming contact requests. */
export const CONTACT_REQUESTS_HEADER = 'relayger-contact-requests';
/** The WebSocket subprotocol a browser offers (and the server answers). */
export const SOCKET_PROTOCOL = 'relayger.v1';
/** The subprotocol prefix that carries a token: `relayger.token.TOKEN`. */
export const TOKEN_PROTOCOL_PREFIX = 'relayger.token.';
/** `GET /v1/socket?runtimeChanges=true` also signals runtime changes. */
export const RUNTIME_CHANGES_PARAM = 'runtimeChanges';

/** Every worker event name (`{event: …}` given to `onEvent`). */
export const WORKER_EVENTS = Object.freeze([
  'started',
  'claimed',
  'replied',
  'skipped',
  'handled',
  'failed',
  'dead_letter',
  'released',
  'canceled',
  'contact_requests',
  'contact_accepted',
  'contact_error',
  'socket_connected',
  'socket_disconnected',
  'unavailable',
  'stopped',
]);
/** Why a worker stopped (`stopped`'s `reason`). */
export const STOP_REASONS = Object.freeze(['interrupted', 'handler_did_not_stop', 'error']);
/** The runtime socket's state in `started`. */
export const SOCKET_STATES = Object.freeze(['connected', 'unavailable', 'disabled']);

/** Every socket text frame's `event`. */
export const SOCKET_FRAMES = Object.freeze(['inbox_changed', 'runtime_changed', 'delivery_changed']);

/** A socket text frame's kind, or null for anything the server never sends. */
export function socketFrameKind(text) {
  let frame;
  try {
    frame = JSON.parse(text);
  } catch {
    return null;
  }
  const kind = frame?.event;
  return typeof kind === 'string' && SOCKET_FRAMES.includes(kind) ? kind : null;
}
