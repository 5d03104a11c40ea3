import { webcrypto } from 'node:crypto';

import { abortError } from './errors.js';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Standard base64 with padding, strictly: other alphabets, missing padding,
 * whitespace and non-zero trailing bits are refused, so every byte string
 * has exactly one accepted spelling (as the Rust side decodes).
 * Returns null for anything else.
 */
export function decodeBase64(text) {
  if (typeof text !== 'string' || !BASE64.test(text)) return null;
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) return null;
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

export function encodeBase64(bytes) {
  return Buffer.from(bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes).toString('base64');
}

export function isUuid(text) {
  return typeof text === 'string' && UUID.test(text);
}

/** The 16 bytes of a UUID in RFC 9562 order (the order of its hex digits). */
export function uuidBytes(id) {
  if (!isUuid(id)) throw new TypeError(`not a UUID: ${id}`);
  return Uint8Array.from(Buffer.from(id.replaceAll('-', ''), 'hex'));
}

/** A new UUID version 7: 48 bits of Unix milliseconds, then random bits. */
export function uuidv7() {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  const ms = Date.now();
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | (bytes[6] & 0x0f);
  bytes[8] = 0x80 | (bytes[8] & 0x3f);
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * A signal that aborts when any of `signals` does (AbortSignal.any arrived
 * only in Node 20.3). Undefined entries are ignored. `dispose()` detaches
 * the listeners once the operation is over, so long-lived signals do not
 * collect one listener per request.
 */
export function anySignal(signals) {
  const live = signals.filter(Boolean);
  const controller = new AbortController();
  const listeners = [];
  const dispose = () => {
    for (const [signal, listener] of listeners) signal.removeEventListener('abort', listener);
    listeners.length = 0;
  };
  for (const signal of live) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      dispose();
      break;
    }
    const listener = () => {
      controller.abort(signal.reason);
      dispose();
    };
    signal.addEventListener('abort', listener, { once: true });
    listeners.push([signal, listener]);
  }
  return { signal: controller.signal, dispose };
}

/** Resolves after `ms`, or rejects with the abort reason when `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError(signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * What an idle loop waits for: `wake()` (a socket frame, a job's end, a
 * stop) ends the running `sleep(ms)` at once, or the next one if none runs;
 * the loop clears `pending` when it looks again.
 */
export class Wakeup {
  pending = false;
  #resolve = null;

  wake() {
    this.pending = true;
    const resolve = this.#resolve;
    this.#resolve = null;
    resolve?.(true);
  }

  /** Resolves true when woken (now or since `pending` was cleared), false after `ms`. */
  async sleep(ms) {
    if (this.pending) return true;
    let timer;
    const woken = await new Promise((resolve) => {
      this.#resolve = resolve;
      timer = setTimeout(() => resolve(false), ms === Infinity ? 2 ** 31 - 1 : Math.max(0, ms));
    });
    clearTimeout(timer);
    this.#resolve = null;
    return woken;
  }
}

/** `ms` plus up to `fraction` of it at random, so processes do not march in step. */
export function withJitter(ms, fraction = 0.2) {
  return Math.round(ms * (1 + Math.random() * fraction));
}

/** A monotonic clock in milliseconds (never goes back with the wall clock). */
export function monotonicMs() {
  return performance.now();
}

/**
 * Every item of a paged list: `page(after)` resolves with one page, whose
 * `key` holds its items and `next` the cursor of the page after it.
 */
export async function everyPage(page, key) {
  const items = [];
  let after;
  do {
    const one = await page(after);
    items.push(...one[key]);
    after = one.next;
  } while (after);
  return items;
}
