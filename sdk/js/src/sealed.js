// Sealed messages: HPKE (RFC 9180) Auth mode with DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256 and ChaCha20-Poly1305, one ciphertext per room member, the
// room/message/sender/recipient ids and (from version 2) the envelope's ask,
// deadline and replyTo bound into info and AAD. The byte-level
// contract (shared with the Rust implementation) is docs/sealed-messages.md.

import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';

import { Chacha20Poly1305 } from '@hpke/chacha20poly1305';
import { CipherSuite, HkdfSha256 } from '@hpke/core';
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';

import { SealedOpenError } from './errors.js';
import { decodeBase64, encodeBase64, isUuid, uuidBytes } from './util.js';

/** The version `seal` writes; `open` also reads version 1 (ids only). */
export const SEALED_VERSION = 2;
const READ_VERSIONS = [1, 2];
export const SEALED_SUITE = 'DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305';
/** Plaintext limit: a ciphertext (plaintext + 16-byte tag) is at most 70,000 bytes. */
export const MAX_PLAINTEXT_BYTES = 69_984;

const KEY_BYTES = 32;
const TAG_BYTES = 16;
const PREFIX_BYTES = 'relayger/sealed/vN'.length;
const IDS_BYTES = PREFIX_BYTES + 4 * 16;
// ask (1), deadline present (1) + microseconds (8), replyTo present (1) + id (16).
const CONTEXT_BYTES = { 1: IDS_BYTES, 2: IDS_BYTES + 1 + 9 + 17 };
const RFC3339_UTC = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?Z$/;
// PKCS#8 / SPKI headers of an X25519 key (RFC 8410), for deriving a public key.
const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');

const suite = new CipherSuite({
  kem: new DhkemX25519HkdfSha256(),
  kdf: new HkdfSha256(),
  aead: new Chacha20Poly1305(),
});

/**
 * A deadline (RFC 3339 UTC text with `Z`) as BigInt microseconds since the
 * Unix epoch, rounded down. With `exact`, a deadline finer than a
 * microsecond (which the server would round) throws a TypeError.
 */
export function deadlineMicros(text, { exact = false } = {}) {
  const match = RFC3339_UTC.exec(String(text));
  if (!match) throw new TypeError(`deadline \`${text}\` is not an RFC 3339 UTC time with Z`);
  const [, year, month, day, hour, minute, second, fraction = ''] = match;
  const date = new Date(0);
  date.setUTCFullYear(Number(year), Number(month) - 1, Number(day));
  date.setUTCHours(Number(hour), Number(minute), Number(second), 0);
  if (Number.isNaN(date.getTime())) throw new TypeError(`deadline \`${text}\` is not a valid time`);
  if (exact && /[1-9]/.test(fraction.slice(6))) {
    throw new TypeError('the deadline must be a whole number of microseconds');
  }
  return (BigInt(date.getTime()) / 1000n) * 1_000_000n + BigInt(fraction.slice(0, 6).padEnd(6, '0'));
}

/**
 * The bytes used as both `info` and `aad` for one recipient's copy
 * (docs/sealed-messages.md has the table). Version 1 (82 bytes):
 * "relayger/sealed/v1" || room id || message id || sender id || recipient id.
 * Version 2 (109 bytes): "relayger/sealed/v2" || the same ids || ask (0/1)
 * || deadline present (0/1) || deadline as big-endian signed microseconds
 * since the epoch (zeros when absent) || replyTo present (0/1) || replyTo
 * (zeros when absent).
 */
export function sealContext({ version = SEALED_VERSION, roomId, messageId, senderId, recipientId, ask, deadline, replyTo }) {
  const out = new Uint8Array(CONTEXT_BYTES[version]);
  out.set(new TextEncoder().encode(`relayger/sealed/v${version}`), 0);
  [roomId, messageId, senderId, recipientId].forEach((id, i) => {
    out.set(uuidBytes(id), PREFIX_BYTES + 16 * i);
  });
  if (version === 2) {
    const view = new DataView(out.buffer);
    const hasDeadline = deadline !== undefined && deadline !== null;
    const hasReplyTo = replyTo !== undefined && replyTo !== null;
    out[IDS_BYTES] = ask === true ? 1 : 0;
    out[IDS_BYTES + 1] = hasDeadline ? 1 : 0;
    if (hasDeadline) view.setBigInt64(IDS_BYTES + 2, deadlineMicros(deadline));
    out[IDS_BYTES + 10] = hasReplyTo ? 1 : 0;
    if (hasReplyTo) out.set(uuidBytes(replyTo), IDS_BYTES + 11);
  }
  return out;
}

/** Clamps an X25519 scalar as RFC 7748 does (RFC 9180 §7.1.2 stores it so). */
function clamp(secret) {
  const out = Uint8Array.from(secret);
  out[0] &= 248;
  out[31] &= 127;
  out[31] |= 64;
  return out;
}

/** The X25519 public key (32 bytes) of a 32-byte secret key. */
export function publicKeyOf(secret) {
  const der = Buffer.concat([PKCS8_X25519, Buffer.from(clamp(secret))]);
  const spki = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({
    format: 'der',
    type: 'spki',
  });
  return new Uint8Array(spki.subarray(spki.length - KEY_BYTES));
}

/**
 * A key pair from the profile's base64 strings; the public half must be the
 * one `secretKey` gives (as profiles require). Throws a TypeError otherwise.
 */
export function keyPairFromBase64(secretKey, publicKey) {
  const secret = decodeBase64(secretKey);
  if (!secret || secret.length !== KEY_BYTES) {
    throw new TypeError('secretKey is not standard base64 of 32 bytes');
  }
  const derived = publicKeyOf(secret);
  if (publicKey !== undefined && encodeBase64(derived) !== publicKey) {
    throw new TypeError('publicKey is not the public half of secretKey');
  }
  return { secret: clamp(secret), public: derived };
}

/** A new X25519 key pair from the system's random source, as raw 32-byte halves. */
export function generateKeyPair() {
  const secret = clamp(randomBytes(KEY_BYTES));
  return { secret, public: publicKeyOf(secret) };
}

/** The DeriveKeyPair(ikm) of RFC 9180 §7.1.3, as raw 32-byte halves. */
export async function deriveKeyPair(ikm) {
  const pair = await suite.kem.deriveKeyPair(toArrayBuffer(ikm));
  return {
    secret: clamp(new Uint8Array(await suite.kem.serializePrivateKey(pair.privateKey))),
    public: new Uint8Array(await suite.kem.serializePublicKey(pair.publicKey)),
  };
}

/**
 * Parses a public key as the server stores it: strict base64 of 32 bytes.
 * Returns null when it is not one.
 */
export function parsePublicKey(text) {
  const bytes = decodeBase64(text);
  return bytes && bytes.length === KEY_BYTES ? bytes : null;
}

function toArrayBuffer(bytes) {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
}

/**
 * The plaintext bytes of `content`: compact JSON in the documented field
 * order, `{"text"}` or `{"schema","data","text"?}`. Throws a TypeError for
 * content no recipient would accept.
 */
export function contentPlaintext(content) {
  if (content === null || typeof content !== 'object' || Array.isArray(content)) {
    throw new TypeError('sealed content must be {text} or {schema, data, text?}');
  }
  for (const key of Object.keys(content)) {
    if (!['text', 'schema', 'data'].includes(key)) {
      throw new TypeError(`sealed content has an unknown field \`${key}\``);
    }
  }
  const { text, schema, data } = content;
  if (text !== undefined && typeof text !== 'string') throw new TypeError('`text` must be a string');
  let json;
  if (schema === undefined && data === undefined) {
    if (text === undefined) throw new TypeError('sealed content needs text, or schema and data');
    json = JSON.stringify({ text });
  } else {
    if (typeof schema !== 'string' || schema === '') {
      throw new TypeError('`schema` must be a non-empty string when `data` is given');
    }
    if (data === undefined) throw new TypeError('`schema` needs `data`');
    const ordered = { schema, data };
    if (text !== undefined) ordered.text = text;
    json = JSON.stringify(ordered);
    if (json === undefined || JSON.stringify(data) === undefined) {
      throw new TypeError('`data` must be JSON');
    }
  }
  const bytes = new TextEncoder().encode(json);
  if (bytes.length > MAX_PLAINTEXT_BYTES) {
    throw new TypeError(`sealed content is ${bytes.length} bytes; at most ${MAX_PLAINTEXT_BYTES}`);
  }
  return bytes;
}

/** The keys of the top-level object of already valid JSON, in order, duplicates kept. */
function topLevelKeys(json) {
  const keys = [];
  let depth = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === '"') {
      let j = i + 1;
      while (json[j] !== '"') j += json[j] === '\\' ? 2 : 1;
      const raw = json.slice(i, j + 1);
      let k = j + 1;
      while (/\s/.test(json[k] ?? '')) k++;
      if (depth === 1 && json[k] === ':') keys.push(JSON.parse(raw));
      i = j;
    }
  }
  return keys;
}

/**
 * Reads opened plaintext strictly, as every implementation must agree on
 * what a message says: one JSON object, no unknown or duplicate fields,
 * `schema` and `data` together, `schema` non-empty, no `null` strings.
 */
export function parseContent(bytes) {
  const malformed = (why) => new SealedOpenError('malformed', `the opened content is invalid: ${why}`);
  let json;
  try {
    json = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw malformed('not UTF-8');
  }
  let value;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw malformed(error.message);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw malformed('not a JSON object');
  const keys = topLevelKeys(json);
  for (const key of keys) {
    if (!['text', 'schema', 'data'].includes(key)) throw malformed(`unknown field \`${key}\``);
  }
  if (new Set(keys).size !== keys.length) throw malformed('duplicate field');
  const has = (key) => Object.hasOwn(value, key);
  if (has('text') && typeof value.text !== 'string') throw malformed('`text` must be a string');
  if (has('schema') && typeof value.schema !== 'string') throw malformed('`schema` must be a string');
  if (has('schema') && !has('data')) throw malformed('schema without data');
  if (has('data') && !has('schema')) throw malformed('data without schema');
  if (has('schema')) {
    if (value.schema === '') throw malformed('schema must not be empty');
    const content = { schema: value.schema, data: value.data };
    if (has('text')) content.text = value.text;
    return content;
  }
  if (!has('text')) throw malformed('content needs text, or schema and data');
  return { text: value.text };
}

/**
 * Seals `content` for every recipient (`[{ id, publicKey: Uint8Array }]`,
 * the sender's own entry included) as `sender` (`{ id, keyPair }`) in
 * message `messageId` of room `roomId`, with the envelope's `ask`,
 * `deadline` (RFC 3339 UTC text) and `replyTo` bound in. Returns the
 * `sealed` payload.
 *
 * `version` (1 writes the old, weaker format) and `ephemeralSeeds`
 * (recipient id → 32-byte seed) exist only to reproduce the documented test
 * vectors; never pass them otherwise.
 */
export async function seal({
  content,
  roomId,
  messageId,
  sender,
  recipients,
  ask = false,
  deadline,
  replyTo,
  version = SEALED_VERSION,
  ephemeralSeeds,
}) {
  if (!isUuid(roomId) || !isUuid(messageId) || !isUuid(sender.id)) {
    throw new TypeError('room, message and sender ids must be UUIDs');
  }
  if (!READ_VERSIONS.includes(version)) throw new TypeError(`sealed version ${version} does not exist`);
  if (replyTo !== undefined && replyTo !== null && !isUuid(replyTo)) throw new TypeError('replyTo must be a UUID');
  if (deadline !== undefined && deadline !== null) deadlineMicros(deadline, { exact: true });
  const plaintext = contentPlaintext(content);
  const seen = new Set();
  const senderKey = {
    privateKey: await suite.kem.importKey('raw', toArrayBuffer(sender.keyPair.secret), false),
    publicKey: await suite.kem.importKey('raw', toArrayBuffer(sender.keyPair.public), true),
  };
  const entries = [];
  for (const recipient of recipients) {
    const id = recipient.id.toLowerCase();
    if (seen.has(id)) throw new TypeError(`recipient ${id} is listed twice`);
    seen.add(id);
    const ctx = sealContext({ version, roomId, messageId, senderId: sender.id, recipientId: id, ask, deadline, replyTo });
    const params = {
      recipientPublicKey: await suite.kem.importKey('raw', toArrayBuffer(recipient.publicKey), true),
      senderKey,
      info: toArrayBuffer(ctx),
    };
    const seed = ephemeralSeeds?.[id];
    if (seed) params.ekm = toArrayBuffer(seed);
    const { enc, ct } = await suite.seal(params, toArrayBuffer(plaintext), toArrayBuffer(ctx));
    entries.push({ identityId: id, enc: encodeBase64(enc), ciphertext: encodeBase64(ct) });
  }
  return { version, suite: SEALED_SUITE, recipients: entries };
}

/**
 * Opens `me`'s copy (`{ id, keyPair }`) of the sealed message `envelope`,
 * sent by the holder of `senderPublicKey` (32 bytes). Returns the content;
 * throws a SealedOpenError with a stable `reason` otherwise. A version 2
 * payload whose envelope `ask`, `deadline` or `replyTo` is not what was
 * sealed (the server changed it) is `cannot_open`.
 */
export async function open({ envelope, me, senderPublicKey }) {
  const payload = envelope?.sealed;
  if (!payload) throw new SealedOpenError('not_sealed', 'the message is not sealed');
  if (!READ_VERSIONS.includes(payload.version)) {
    throw new SealedOpenError('unsupported_version', `sealed version ${payload.version} is not supported`);
  }
  if (payload.suite !== SEALED_SUITE) {
    throw new SealedOpenError('unsupported_suite', `sealed suite ${payload.suite} is not supported`);
  }
  const recipients = Array.isArray(payload.recipients) ? payload.recipients : [];
  const mine = recipients.filter((entry) => String(entry?.identityId).toLowerCase() === me.id.toLowerCase());
  if (mine.length === 0) throw new SealedOpenError('not_a_recipient', 'this identity is not among the recipients');
  if (mine.length > 1) {
    throw new SealedOpenError('malformed', 'more than one recipient entry for this identity');
  }
  const enc = decodeBase64(mine[0].enc);
  if (!enc || enc.length !== KEY_BYTES) throw new SealedOpenError('malformed', 'enc must be base64 of 32 bytes');
  const ciphertext = decodeBase64(mine[0].ciphertext);
  if (!ciphertext || ciphertext.length < TAG_BYTES) {
    throw new SealedOpenError('malformed', `ciphertext must be base64 of at least ${TAG_BYTES} bytes`);
  }
  let plaintext;
  try {
    const ctx = sealContext({
      version: payload.version,
      roomId: envelope.conversationId,
      messageId: envelope.messageId,
      senderId: envelope.sender.id,
      recipientId: me.id,
      ask: envelope.ask,
      deadline: envelope.deadline,
      replyTo: envelope.replyTo,
    });
    plaintext = await suite.open(
      {
        recipientKey: await suite.kem.importKey('raw', toArrayBuffer(me.keyPair.secret), false),
        senderPublicKey: await suite.kem.importKey('raw', toArrayBuffer(senderPublicKey), true),
        enc: toArrayBuffer(enc),
        info: toArrayBuffer(ctx),
      },
      toArrayBuffer(ciphertext),
      toArrayBuffer(ctx),
    );
  } catch {
    throw new SealedOpenError('cannot_open', 'the sealed message cannot be opened');
  }
  return parseContent(new Uint8Array(plaintext));
}
