// The shared wire fixtures (relayger-core/fixtures/*.json), the same files
// relayger-core's unit tests read. Every file names its `kind`; a kind this
// file has no reader for fails, so a fixture cannot be added for one
// language only by accident.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';

import { checkResult } from '../src/result.js';
import { deriveKeyPair, keyPairFromBase64, open, seal, sealContext } from '../src/sealed.js';
import {
  CONTACT_REQUESTS_HEADER,
  RUNTIME_CHANGES_PARAM,
  SOCKET_FRAMES,
  SOCKET_PROTOCOL,
  SOCKET_STATES,
  STOP_REASONS,
  TOKEN_PROTOCOL_PREFIX,
  WORKER_EVENTS,
  socketFrameKind,
} from '../src/wire.js';
import { FIXTURES_DIR, readFixture } from './fixture-files.js';
/** Whether `actual` holds everything `expected` says (objects by key). */
function contains(actual, expected) {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected)) {
    return (
      actual !== null &&
      typeof actual === 'object' &&
      Object.entries(expected).every(([key, value]) => key in actual && contains(actual[key], value))
    );
  }
  try {
    assert.deepStrictEqual(actual, expected);
    return true;
  } catch {
    return false;
  }
}

/** Checks one case against `outcome`: `{ ok: parsed }` or `{ code }`. */
function checkCase(file, c, outcome) {
  const name = `${file}: ${c.name}`;
  if (c.valid) {
    assert.ok('ok' in outcome, `${name}: refused with ${outcome.code}`);
    if ('expect' in c) assert.ok(contains(outcome.ok, c.expect), `${name}: ${JSON.stringify(outcome.ok)}`);
  } else {
    assert.ok(!('ok' in outcome), `${name}: accepted`);
    assert.equal(outcome.code, c.error, name);
  }
}

/** What the SDK can say about an event object without a schema. */
function eventProblem(event) {
  if (!WORKER_EVENTS.includes(event?.event)) return 'unknown_event';
  // Fields are camelCase; the enumerated values are the Rust enums' names.
  if (Object.keys(event).some((key) => key.includes('_'))) return 'invalid_event';
  if (event.event === 'stopped' && !STOP_REASONS.includes(event.reason)) return 'invalid_event';
  if (event.event === 'started' && !SOCKET_STATES.includes(event.socket)) return 'invalid_event';
  return null;
}

async function checkSealedVectors(doc) {
  const alice = await deriveKeyPair(new Uint8Array(32).fill(parseInt(doc.alice.seedByte, 16)));
  const bob = await deriveKeyPair(new Uint8Array(32).fill(parseInt(doc.bob.seedByte, 16)));
  const b64 = (bytes) => Buffer.from(bytes).toString('base64');
  for (const [who, keys] of [
    ['alice', alice],
    ['bob', bob],
  ]) {
    assert.equal(b64(keys.secret), doc[who].secret, `${who} secret`);
    assert.equal(b64(keys.public), doc[who].public, `${who} public`);
    assert.deepEqual(keyPairFromBase64(doc[who].secret).public, keys.public, `${who} from its secret`);
  }
  const seedOf = (who) => new Uint8Array(32).fill(parseInt(doc.ephemeralSeedBytes[who], 16));
  for (const c of doc.cases) {
    const ids = { roomId: doc.roomId, messageId: doc.messageId, senderId: doc.alice.id, recipientId: doc.bob.id };
    assert.equal(Buffer.from(sealContext({ ...ids, ...c.binding, version: c.version })).toString('hex'), c.infoForBob, c.name);
    const payload = await seal({
      content: doc.content,
      roomId: doc.roomId,
      messageId: doc.messageId,
      sender: { id: doc.alice.id, keyPair: alice },
      recipients: [
        { id: doc.bob.id, publicKey: bob.public },
        { id: doc.alice.id, publicKey: alice.public },
      ],
      ephemeralSeeds: { [doc.bob.id]: seedOf('bob'), [doc.alice.id]: seedOf('alice') },
      ...c.binding,
      version: c.version,
    });
    assert.deepEqual(payload, c.payload, c.name);
    const envelope = {
      conversationId: doc.roomId,
      messageId: doc.messageId,
      sender: { id: doc.alice.id },
      sealed: c.payload,
      ...c.binding,
    };
    for (const [id, keyPair] of [
      [doc.bob.id, bob],
      [doc.alice.id, alice],
    ]) {
      assert.deepEqual(await open({ envelope, me: { id, keyPair }, senderPublicKey: alice.public }), doc.content, c.name);
    }
  }
}

// Kinds the SDK does not parse itself: it sends policies to the server as
// given, and the process ABI is between the Rust worker and its process.
// Their readers are relayger-core's; here they must still be well formed.
const READ_ELSEWHERE = new Set(['policy', 'process_config', 'process_response']);

const READERS = {
  names(doc) {
    assert.equal(doc.contactRequestsHeader, CONTACT_REQUESTS_HEADER);
    assert.equal(doc.socketProtocol, SOCKET_PROTOCOL);
    assert.equal(doc.tokenProtocolPrefix, TOKEN_PROTOCOL_PREFIX);
    assert.equal(doc.runtimeChangesParam, RUNTIME_CHANGES_PARAM);
    assert.deepEqual(doc.workerEvents, [...WORKER_EVENTS]);
    assert.deepEqual(doc.socketFrames, [...SOCKET_FRAMES]);
  },
  finish_result(doc, file) {
    for (const c of doc.cases) {
      const checked = checkResult(c.input);
      checkCase(file, c, checked.invalid ? { code: checked.code } : { ok: checked.result });
    }
  },
  worker_event(doc, file) {
    for (const c of doc.cases) {
      const problem = eventProblem(c.input);
      checkCase(file, c, problem ? { code: problem } : { ok: c.input });
    }
  },
  socket_frame(doc, file) {
    for (const c of doc.cases) {
      const kind = socketFrameKind(JSON.stringify(c.input));
      checkCase(file, c, kind ? { ok: kind } : { code: 'unknown_frame' });
    }
  },
  sealed_vector: checkSealedVectors,
};

test('every shared fixture file holds on the JavaScript side', async () => {
  const files = readdirSync(FIXTURES_DIR).sort();
  assert.ok(files.length > 0, FIXTURES_DIR);
  const kinds = new Set();
  for (const file of files) {
    assert.match(file, /\.json$/, 'fixtures are JSON files');
    const doc = readFixture(file);
    assert.equal(typeof doc.about, 'string', `${file}: says what it expects`);
    kinds.add(doc.kind);
    if (READ_ELSEWHERE.has(doc.kind)) {
      assert.ok(Array.isArray(doc.cases) && doc.cases.length > 0, `${file}: has cases`);
      for (const c of doc.cases) assert.equal(typeof c.valid, 'boolean', `${file}: ${c.name}`);
      continue;
    }
    const reader = READERS[doc.kind];
    assert.ok(reader, `${file}: no JavaScript reader for fixture kind \`${doc.kind}\``);
    await reader(doc, file);
  }
  // Every reader here has its fixture (none silently went away).
  assert.deepEqual([...kinds].sort(), [...Object.keys(READERS), ...READ_ELSEWHERE].sort());
});
