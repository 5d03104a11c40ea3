// The sealed-message construction against the documented test vector
// (docs/sealed-messages.md), byte for byte, and the strict readers.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { uuidv7 } from '../src/index.js';
import { contentPlaintext, deriveKeyPair, keyPairFromBase64, open, parseContent, seal, sealContext } from '../src/sealed.js';
import { decodeBase64 } from '../src/util.js';

const fill = (byte) => new Uint8Array(32).fill(byte);
const b64 = (bytes) => Buffer.from(bytes).toString('base64');
const ALICE = '0190a6e0-0000-7000-8000-0000000000a1';
const BOB = '0190a6e0-0000-7000-8000-0000000000b0';
const ROOM = '0190a6e0-0000-7000-8000-00000000000a';
const MESSAGE = '0190a6e0-0000-7000-8000-00000000000b';
const VECTOR = {
  version: 1,
  suite: 'DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305',
  recipients: [
    {
      identityId: BOB,
      enc: '9aO68fiNwCQlkR4e6F5nAlyh4rtq1hf6AZCSUUbUXUs=',
      ciphertext: 'vwWNLtcDXww1WTznM2IGTy7guDfux1x8BN/QSbAorXjDLoR3moU76bNiqaY6Cw==',
    },
    {
      identityId: ALICE,
      enc: 'Sy8OhJpLnFa3afCeU4xvxXcFuNxZfw7xvPkTe9FVKkg=',
      ciphertext: 'hizLvww96OCRurT1KJiTOjSLHR82Xl/8JdxUmh0dqvWXrTA8k61c9IxLV3FnPw==',
    },
  ],
};
const envelope = (sealed, overrides = {}) => ({
  conversationId: ROOM,
  messageId: MESSAGE,
  sender: { id: ALICE },
  sealed,
  ...overrides,
});

test('the documented keys derive from their seeds', async () => {
  const alice = await deriveKeyPair(fill(0xa1));
  const bob = await deriveKeyPair(fill(0xb0));
  assert.equal(b64(alice.secret), 'yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=');
  assert.equal(b64(alice.public), 'LePf1WGcaFqUNCtkx+2iMNlwX/vSNBQAfys6Ek1BEWY=');
  assert.equal(b64(bob.secret), '+PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=');
  assert.equal(b64(bob.public), 'yiVSnwaM9yAJgv9sFvNqTm3yPPzuZJ2xpmWCFGi2I2E=');
});

test('info/aad is the documented 82 bytes', () => {
  const ctx = sealContext(ROOM, MESSAGE, ALICE, BOB);
  assert.equal(
    Buffer.from(ctx).toString('hex'),
    '72656c61796765722f7365616c65642f7631' +
      '0190a6e000007000800000000000000a' +
      '0190a6e000007000800000000000000b' +
      '0190a6e00000700080000000000000a1' +
      '0190a6e00000700080000000000000b0',
  );
});

test('sealing with the documented ephemeral seeds reproduces the test vector exactly', async () => {
  const alice = await deriveKeyPair(fill(0xa1));
  const bob = await deriveKeyPair(fill(0xb0));
  const sealed = await seal({
    content: { text: 'hello, sealed world' },
    roomId: ROOM,
    messageId: MESSAGE,
    sender: { id: ALICE, keyPair: alice },
    recipients: [
      { id: BOB, publicKey: bob.public },
      { id: ALICE, publicKey: alice.public },
    ],
    ephemeralSeeds: { [BOB]: fill(0xe1), [ALICE]: fill(0xe2) },
  });
  assert.deepEqual(sealed, VECTOR);
});

test('both copies of the vector open; any other sender key or binding fails', async () => {
  const alice = keyPairFromBase64('yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=');
  const bob = keyPairFromBase64('+PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=');
  const expected = { text: 'hello, sealed world' };
  assert.deepEqual(await open({ envelope: envelope(VECTOR), me: { id: BOB, keyPair: bob }, senderPublicKey: alice.public }), expected);
  assert.deepEqual(await open({ envelope: envelope(VECTOR), me: { id: ALICE, keyPair: alice }, senderPublicKey: alice.public }), expected);

  const reason = async (promise) => (await promise.then(() => null, (e) => e)).reason;
  const bobOpens = (env, senderPublicKey = alice.public) => open({ envelope: env, me: { id: BOB, keyPair: bob }, senderPublicKey });
  assert.equal(await reason(bobOpens(envelope(VECTOR), bob.public)), 'cannot_open', 'another sender key');
  assert.equal(await reason(bobOpens(envelope(VECTOR, { messageId: uuidv7() }))), 'cannot_open', 'another message');
  assert.equal(await reason(bobOpens(envelope(VECTOR, { conversationId: uuidv7() }))), 'cannot_open', 'another room');
  const tampered = structuredClone(VECTOR);
  const bytes = decodeBase64(tampered.recipients[0].ciphertext);
  bytes[0] ^= 1;
  tampered.recipients[0].ciphertext = b64(bytes);
  assert.equal(await reason(bobOpens(envelope(tampered))), 'cannot_open', 'altered bytes');
  assert.equal(
    await reason(open({ envelope: envelope(VECTOR), me: { id: uuidv7(), keyPair: bob }, senderPublicKey: alice.public })),
    'not_a_recipient',
  );
  assert.equal(await reason(bobOpens(envelope({ ...VECTOR, version: 2 }))), 'unsupported_version');
  assert.equal(await reason(bobOpens(envelope({ ...VECTOR, suite: 'other' }))), 'unsupported_suite');
  const doubled = { ...VECTOR, recipients: [VECTOR.recipients[0], VECTOR.recipients[0]] };
  assert.equal(await reason(bobOpens(envelope(doubled))), 'malformed');
  const unpadded = structuredClone(VECTOR);
  unpadded.recipients[0].enc = unpadded.recipients[0].enc.replace(/=$/, '');
  assert.equal(await reason(bobOpens(envelope(unpadded))), 'malformed');
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
