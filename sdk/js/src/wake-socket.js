// A signal socket: content-free frames that wake an idle worker (the runtime
// socket's `inbox_changed`) or an asker waiting for its question (the
// identity socket's `delivery_changed` and `inbox_changed`). It reconnects
// with backoff and replaces a connection that went silent; the owner's
// fallback poll covers whatever it misses.

import { OPEN_SOCKET } from './client.js';
import { monotonicMs, withJitter } from './util.js';
import { socketFrameKind } from './wire.js';

/**
 * The client pings every `pingMs`; a socket that has sent nothing (no
 * pong, signal or ping of the server's) for `silenceMs` is dead, and so is
 * one whose ping has gone unanswered for `silenceMs - pingMs` (frames the
 * server sent before its half stalled can arrive late, as TCP retransmits
 * them after a cut: they prove nothing about the connection now). A
 * half-open connection (the link went down without a FIN or RST) is
 * noticed within about 16 s, late frames or not, as by the Rust worker. The worker polls
 * meanwhile and the socket reconnects.
 */
const LIVENESS = Object.freeze({ pingMs: 5_000, silenceMs: 15_000 });
/** How often the liveness is looked at. */
const LIVENESS_TICKS = 5;
const MAX_BACKOFF_MS = 30_000;

/**
 * How long a ping may go unanswered (10 s): the first ping after a stall
 * began is sent within `pingMs`, so the stall is noticed within the
 * silence whatever arrived late.
 */
function pongDeadlineMs({ pingMs, silenceMs }) {
  return silenceMs - pingMs;
}
/** A connection that lasted this long resets the reconnect backoff. */
const HEALTHY_MS = 10_000;
/** How long after the handshake to look for what arrived before it. */
const OPEN_SETTLE_MS = 250;

export class WakeSocket {
  /**
   * @param {import('./client.js').Relayger} client
   * @param {string} path e.g. `/v1/runtimes/{id}/socket`
   * @param {{ onWake: () => void, onEvent: (event: object) => void, wakeOn?: string[] }} hooks
   *   `onWake` for every frame of a kind in `wakeOn` (default: `inbox_changed`)
   *   and shortly after every (re)connect; `onEvent` for
   *   `socket_disconnected` / `socket_connected`.
   */
  constructor(client, path, { onWake, onEvent, wakeOn = ['inbox_changed'], liveness = LIVENESS }) {
    this.client = client;
    this.liveness = liveness;
    this.path = path;
    this.wakeOn = new Set(wakeOn);
    this.onWake = onWake;
    this.onEvent = onEvent;
    this.socket = null;
    this.failures = 0;
    this.timers = new Set();
    this.closed = false;
  }

  /**
   * The first connection: resolves true once open, false when it failed
   * (reconnecting continues in the background) or `signal` aborted.
   */
  connect(signal) {
    return new Promise((resolve) => {
      const done = (connected) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(connected);
      };
      const onAbort = () => done(false);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.open(false, done);
    });
  }

  open(reconnect, settled = () => {}) {
    if (this.closed || this.client.closed) {
      settled(false);
      return;
    }
    let socket;
    try {
      socket = this.client[OPEN_SOCKET](this.path);
    } catch {
      settled(false);
      return;
    }
    this.socket = socket;
    let openedAt = null;
    const { pingMs, silenceMs } = this.liveness;
    const pongMs = pongDeadlineMs(this.liveness);
    let lastHeard = monotonicMs();
    let lastPing = lastHeard;
    const heard = () => {
      lastHeard = monotonicMs();
    };
    // The pings not answered yet, oldest first: [number, sent at].
    const unanswered = [];
    let pings = 0;
    const answered = (data) => {
      heard();
      const number = Number(data.toString());
      while (unanswered.length && unanswered[0][0] <= number) unanswered.shift();
    };
    let lastError = 'closed';
    const pinger = setInterval(() => {
      const now = monotonicMs();
      if (now - lastHeard >= silenceMs) {
        lastError = `the server answered nothing for ${silenceMs} ms`;
        socket.terminate();
      } else if (unanswered.length && now - unanswered[0][1] >= pongMs) {
        lastError = `the server answered no ping for ${pongMs} ms`;
        socket.terminate();
      } else if (now - lastPing >= pingMs && socket.readyState === socket.OPEN) {
        lastPing = now;
        pings += 1;
        unanswered.push([pings, now]);
        socket.ping(String(pings));
      }
    }, Math.min(pingMs, pongMs) / LIVENESS_TICKS);
    this.timers.add(pinger);
    socket.on('open', () => {
      heard();
      lastPing = lastHeard;
      openedAt = monotonicMs();
      if (reconnect) this.onEvent({ event: 'socket_connected' });
      settled(true);
      // Anything committed while the socket was not yet (or no longer)
      // listening signalled nobody: look once. The server subscribes only
      // after the handshake completes, a moment after 'open' fires here, so
      // look a little later to cover that gap too.
      this.later(OPEN_SETTLE_MS, () => this.onWake());
    });
    socket.on('message', (data) => {
      heard();
      if (this.wakeOn.has(socketFrameKind(data.toString()))) this.onWake();
    });
    socket.on('ping', heard);
    socket.on('pong', answered);
    socket.on('error', (error) => {
      // 'close' follows; reconnecting is handled there.
      lastError = error.message;
    });
    socket.on('close', (code) => {
      clearInterval(pinger);
      this.timers.delete(pinger);
      if (this.socket === socket) this.socket = null;
      settled(false);
      if (this.closed || this.client.closed) return;
      if (openedAt !== null) {
        if (monotonicMs() - openedAt >= HEALTHY_MS) this.failures = 0;
        this.onEvent({ event: 'socket_disconnected', error: lastError === 'closed' ? `closed (${code})` : lastError });
      }
      const delay = withJitter(Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(this.failures++, 10)));
      this.later(delay, () => this.open(true));
    });
  }

  later(ms, fn) {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  close() {
    this.closed = true;
    for (const timer of this.timers) {
      clearTimeout(timer);
      clearInterval(timer);
    }
    this.timers.clear();
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.removeAllListeners('close');
      socket.on('error', () => {});
      socket.terminate();
    }
  }
}
