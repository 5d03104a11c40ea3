// The sealed-message construction against the documented test vector
// (docs/sealed-messages.md), byte for byte, and the strict readers.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { uuidv7 } from '../src/index.js';
import {
  contentPlaintext,
  deadlineMicros,
  deriveKeyPair,
  keyPairFromBase64,
  open,
  parseContent,
  seal,
  sealContext,
} from '../src/sealed.js';
import { decodeBase64 } from '../src/util.js';
import { readFixture } from './fixture-files.js';

const fill = (byte) => new Uint8Array(32).fill(byte);
const b64 = (bytes) => Buffer.from(bytes).toString('base64');
const ALICE = '0190a6e0-0000-7000-8000-0000000000a1';
const BOB = '0190a6e0-0000-7000-8000-0000000000b0';
const ROOM = '0190a6e0-0000-7000-8000-00000000000a';
const MESSAGE = '0190a6e0-0000-7000-8000-00000000000b';
const PARENT = '0190a6e0-0000-7000-8000-000000000009';
const DEADLINE = '2026-10-02T12:00:00Z';
// The documented vectors, shared with relayger-core's tests.
const VECTORS = readFixture('sealed-vectors.json');
const vectorOf = (version) => VECTORS.cases.find((c) => c.version === version).payload;
// Version 2: a question with a deadline in PARENT's thread.
const VECTOR = vectorOf(2);
const QUESTION = { ask: true, deadline: DEADLINE, replyTo: PARENT };
// Version 1, as the page printed it before version 2: a note, ids only.
const VECTOR_V1 = vectorOf(1);
const envelope = (sealed, overrides = {}) => ({
  conversationId: ROOM,
  messageId: MESSAGE,
  sender: { id: ALICE },
  sealed,
  ...(sealed?.version === 2 ? QUESTION : { ask: false, deadline: null, replyTo: null }),
  ...overrides,
});
const reason = async (promise) => (await promise.then(() => null, (e) => e)).reason;

test('the shared fixture is the documented vectors this file assumes', () => {
  assert.deepEqual(
    VECTORS.cases.map((c) => [c.version, c.binding]),
    [
      [2, QUESTION],
      [1, { ask: false, deadline: null, replyTo: null }],
    ],
  );
  assert.deepEqual([VECTORS.roomId, VECTORS.messageId, VECTORS.alice.id, VECTORS.bob.id], [ROOM, MESSAGE, ALICE, BOB]);
  assert.equal(VECTOR.recipients[0].enc, '9aO68fiNwCQlkR4e6F5nAlyh4rtq1hf6AZCSUUbUXUs=');
});

test('the documented keys derive from their seeds', async () => {
  const alice = await deriveKeyPair(fill(0xa1));
  const bob = await deriveKeyPair(fill(0xb0));
  assert.equal(b64(alice.secret), 'yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=');
  assert.equal(b64(alice.public), 'LePf1WGcaFqUNCtkx+2iMNlwX/vSNBQAfys6Ek1BEWY=');
  assert.equal(b64(bob.secret), '+PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=');
  assert.equal(b64(bob.public), 'yiVSnwaM9yAJgv9sFvNqTm3yPPzuZJ2xpmWCFGi2I2E=');
});

test('info/aad is the documented 109 bytes (version 2) and 82 bytes (version 1)', () => {
  const ids = { roomId: ROOM, messageId: MESSAGE, senderId: ALICE, recipientId: BOB };
  const idsHex =
    '0190a6e000007000800000000000000a' +
    '0190a6e000007000800000000000000b' +
    '0190a6e00000700080000000000000a1' +
    '0190a6e00000700080000000000000b0';
  assert.equal(
    Buffer.from(sealContext({ ...ids, ...QUESTION })).toString('hex'),
    '72656c61796765722f7365616c65642f7632' + idsHex + '01' + '01' + '00065cda4590b000' + '01' + '0190a6e0000070008000000000000009',
  );
  assert.equal(
    Buffer.from(sealContext({ ...ids, ask: false, deadline: null, replyTo: null })).toString('hex'),
    '72656c61796765722f7365616c65642f7632' + idsHex + '00' + '00' + '0000000000000000' + '00' + '0'.repeat(32),
  );
  assert.equal(
    Buffer.from(sealContext({ version: 1, ...ids, ...QUESTION })).toString('hex'),
    '72656c61796765722f7365616c65642f7631' + idsHex,
  );
});

test('deadlines are microseconds since the epoch, as the Rust side counts them', () => {
  assert.equal(deadlineMicros('2026-10-02T12:00:00Z'), 1_790_942_400_000_000n);
  assert.equal(deadlineMicros('2026-10-02T12:00:00.25Z'), 1_790_942_400_250_000n);
  assert.equal(deadlineMicros('1969-12-31T23:59:59.5Z'), -500_000n);
  assert.equal(deadlineMicros('2026-10-02T12:00:00.123456789Z'), 1_790_942_400_123_456n);
  assert.throws(() => deadlineMicros('2026-10-02T12:00:00.1234567Z', { exact: true }), /microseconds/);
  assert.equal(deadlineMicros('2026-10-02T12:00:00.123456000Z', { exact: true }), 1_790_942_400_123_456n);
  for (const bad of ['2026-10-02 12:00:00Z', '2026-10-02T12:00:00+00:00', 'soon']) {
    assert.throws(() => deadlineMicros(bad), TypeError, bad);
  }
});

test('sealing with the documented ephemeral seeds reproduces both test vectors exactly', async () => {
  const alice = await deriveKeyPair(fill(0xa1));
  const bob = await deriveKeyPair(fill(0xb0));
  const sealWith = (extra) =>
    seal({
      content: { text: 'hello, sealed world' },
      roomId: ROOM,
      messageId: MESSAGE,
      sender: { id: ALICE, keyPair: alice },
      recipients: [
        { id: BOB, publicKey: bob.public },
        { id: ALICE, publicKey: alice.public },
      ],
      ephemeralSeeds: { [BOB]: fill(0xe1), [ALICE]: fill(0xe2) },
      ...extra,
    });
  assert.deepEqual(await sealWith(QUESTION), VECTOR);
  assert.deepEqual(await sealWith({ version: 1 }), VECTOR_V1);
});

test('both copies of each vector open; any other sender key or binding fails', async () => {
  const alice = keyPairFromBase64('yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=');
  const bob = keyPairFromBase64('+PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=');
  const expected = { text: 'hello, sealed world' };
  for (const vector of [VECTOR, VECTOR_V1]) {
    assert.deepEqual(await open({ envelope: envelope(vector), me: { id: BOB, keyPair: bob }, senderPublicKey: alice.public }), expected);
    assert.deepEqual(await open({ envelope: envelope(vector), me: { id: ALICE, keyPair: alice }, senderPublicKey: alice.public }), expected);
  }

  const bobOpens = (env, senderPublicKey = alice.public) => open({ envelope: env, me: { id: BOB, keyPair: bob }, senderPublicKey });
  for (const vector of [VECTOR, VECTOR_V1]) {
    const v = `version ${vector.version}`;
    assert.equal(await reason(bobOpens(envelope(vector), bob.public)), 'cannot_open', `${v}: another sender key`);
    assert.equal(await reason(bobOpens(envelope(vector, { messageId: uuidv7() }))), 'cannot_open', `${v}: another message`);
    assert.equal(await reason(bobOpens(envelope(vector, { conversationId: uuidv7() }))), 'cannot_open', `${v}: another room`);
    const tampered = structuredClone(vector);
    const bytes = decodeBase64(tampered.recipients[0].ciphertext);
    bytes[0] ^= 1;
    tampered.recipients[0].ciphertext = b64(bytes);
    assert.equal(await reason(bobOpens(envelope(tampered))), 'cannot_open', `${v}: altered bytes`);
    assert.equal(
      await reason(open({ envelope: envelope(vector), me: { id: uuidv7(), keyPair: bob }, senderPublicKey: alice.public })),
      'not_a_recipient',
    );
    assert.equal(await reason(bobOpens(envelope({ ...vector, version: 3 }))), 'unsupported_version');
    assert.equal(await reason(bobOpens(envelope({ ...vector, suite: 'other' }))), 'unsupported_suite');
    const doubled = { ...vector, recipients: [vector.recipients[0], vector.recipients[0]] };
    assert.equal(await reason(bobOpens(envelope(doubled))), 'malformed');
    const unpadded = structuredClone(vector);
    unpadded.recipients[0].enc = unpadded.recipients[0].enc.replace(/=$/, '');
    assert.equal(await reason(bobOpens(envelope(unpadded))), 'malformed');
  }
  // Relabelled, neither version opens as the other.
  assert.equal(await reason(bobOpens(envelope({ ...VECTOR_V1, version: 2 }, { ask: false, deadline: null, replyTo: null }))), 'cannot_open');
  assert.equal(await reason(bobOpens(envelope({ ...VECTOR, version: 1 }))), 'cannot_open');
});

test('version 2 binds ask, deadline and replyTo: an envelope that says otherwise does not open', async () => {
  const bob = keyPairFromBase64('+PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=');
  const alice = keyPairFromBase64('yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=');
  const bobOpens = (overrides) =>
    open({ envelope: envelope(VECTOR, overrides), me: { id: BOB, keyPair: bob }, senderPublicKey: alice.public });
  for (const [name, overrides] of [
    ['ask cleared', { ask: false, deadline: null }],
    ['deadline dropped', { deadline: null }],
    ['deadline moved a microsecond', { deadline: '2026-10-02T12:00:00.000001Z' }],
    ['replyTo dropped', { replyTo: null }],
    ['replyTo another message', { replyTo: uuidv7() }],
  ]) {
    assert.equal(await reason(bobOpens(overrides)), 'cannot_open', name);
  }
  // The same instant spelled differently is the same deadline.
  assert.deepEqual(await bobOpens({ deadline: '2026-10-02T12:00:00.000Z' }), { text: 'hello, sealed world' });
  // Version 1 never bound them: a changed envelope still opens it.
  assert.deepEqual(
    await open({
      envelope: envelope(VECTOR_V1, QUESTION),
      me: { id: BOB, keyPair: bob },
      senderPublicKey: alice.public,
    }),
    { text: 'hello, sealed world' },
  );
  await assert.rejects(
    seal({
      content: { text: 'x' },
      roomId: ROOM,
      messageId: MESSAGE,
      sender: { id: ALICE, keyPair: alice },
      recipients: [],
      ask: true,
      deadline: '2026-10-02T12:00:00.0000001Z',
    }),
    /microseconds/,
  );
});

test('base64 is read strictly: one spelling per byte string', () => {
  assert.deepEqual([...decodeBase64('AAE=')], [0, 1]);
  for (const bad of ['AAE', 'AAF=', 'AA E=', 'AA-_', 'AAE=\n', '====']) {
    assert.equal(decodeBase64(bad), null, bad);
  }
});

test('content is written in the documented order and read strictly', () => {
  const text = (value) => new TextDecoder().decode(contentPlaintext(value));
  assert.equal(text({ text: 'hi' }), '{"text":"hi"}');
  assert.equal(text({ text: 'see data', data: [1], schema: 's' }), '{"schema":"s","data":[1],"text":"see data"}');
  assert.equal(text({ schema: 's', data: null }), '{"schema":"s","data":null}');
  for (const bad of [{}, { schema: 's' }, { data: 1 }, { schema: '', data: 1 }, { text: 1 }, { text: 'x', extra: 1 }]) {
    assert.throws(() => contentPlaintext(bad), TypeError, JSON.stringify(bad));
  }
  const read = (json) => parseContent(new TextEncoder().encode(json));
  assert.deepEqual(read(' { "text" : "" } '), { text: '' });
  assert.deepEqual(read('{"data":{"text":1,"text":2},"schema":"s"}'), { schema: 's', data: { text: 2 } });
  for (const bad of [
    '{"text":"a","text":"b"}',
    '{"text":null}',
    '{"schema":null,"data":1}',
    '{"schema":"s"}',
    '{"data":1}',
    '{"schema":"","data":1}',
    '{"text":"a","more":1}',
    '["text"]',
    '"text"',
    '{"text":"a"',
  ]) {
    assert.throws(() => read(bad), (e) => e.reason === 'malformed', bad);
  }
});

test('message ids are UUID v7', () => {
  const id = uuidv7();
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const ms = Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
  assert.ok(Math.abs(ms - Date.now()) < 5000);
  assert.notEqual(uuidv7(), id);
});

test('a profile key pair must match its public half', () => {
  assert.throws(
    () => keyPairFromBase64('yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=', 'yiVSnwaM9yAJgv9sFvNqTm3yPPzuZJ2xpmWCFGi2I2E='),
    /not the public half/,
  );
  // An unclamped secret loads as the same key as its clamped form.
  const unclamped = keyPairFromBase64('zmugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxaA=');
  assert.equal(b64(unclamped.public), 'LePf1WGcaFqUNCtkx+2iMNlwX/vSNBQAfys6Ek1BEWY=');
  assert.equal(b64(unclamped.secret), 'yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=');
});
