// Sealed messages between the SDK and the Rust CLI, both ways, over a real
// server; and a handler that answers a sealed question privately.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { runWorker } from '../src/index.js';
import { EventLog, befriend, cli, identity, startServer, untilSignalled } from './support.js';

let server;
let alice;
let bob;
let carol;
let room;

before(async () => {
  server = await startServer();
  alice = await identity(server, 'alice', { agent: false });
  bob = await identity(server, 'bob');
  carol = await identity(server, 'carol');
  room = await befriend(server, alice, bob);
  await befriend(server, alice, carol);
});
after(() => server?.stop());

test('sealed by the SDK, opened by the CLI (recipient and sender copy)', async (t) => {
  const sent = await alice.client.sendSealed({ to: bob.number, text: 'for your eyes only', ask: true });
  assert.equal(sent.text, null);
  assert.equal(sent.conversationId, room);
  assert.match(sent.messageId, /^[0-9a-f]{8}-[0-9a-f]{4}-7/, 'a client-generated UUID v7');
  assert.deepEqual(sent.sealed.recipients.map((r) => r.identityId).sort(), [alice.id, bob.id].sort());
  const asBob = await cli(server.home, 'bob', 'message', room, sent.messageId);
  assert.equal(asBob.opened.text, 'for your eyes only');
  assert.equal(asBob.ask, true);
  const asAlice = await cli(server.home, 'alice', 'message', room, sent.messageId);
  assert.equal(asAlice.opened.text, 'for your eyes only');

  const structured = await alice.client.sendSealed({
    conversationId: room,
    schema: 'status/v1',
    data: { done: 3, names: ['ä', '"q"'] },
    text: 'three done',
  });
  const opened = (await cli(server.home, 'bob', 'message', room, structured.messageId)).opened;
  assert.deepEqual(opened, { schema: 'status/v1', data: { done: 3, names: ['ä', '"q"'] }, text: 'three done' });
});

test('sealed by the CLI, opened by the SDK', async (t) => {
  const sent = await cli(server.home, 'alice', 'send', bob.number, 'sealed by rust', '--sealed');
  const envelope = await bob.client.getMessage(room, sent.messageId);
  assert.deepEqual(await bob.client.open(envelope), { text: 'sealed by rust' });
  assert.deepEqual(await alice.client.open(envelope), { text: 'sealed by rust' }, "the sender's own copy");
  // Someone who is not a recipient gets a reason, not content.
  await assert.rejects(carol.client.open(envelope), (e) => e.reason === 'not_a_recipient');
  // Altered ciphertext does not open.
  const altered = structuredClone(envelope);
  const entry = altered.sealed.recipients.find((r) => r.identityId === bob.id);
  const bytes = Buffer.from(entry.ciphertext, 'base64');
  bytes[bytes.length - 1] ^= 1;
  entry.ciphertext = bytes.toString('base64');
  await assert.rejects(bob.client.open(altered), (e) => e.reason === 'cannot_open');
  await assert.rejects(bob.client.open({ ...envelope, sealed: undefined }), (e) => e.reason === 'not_sealed');
});

test('a sealed question with a deadline and a parent opens across the SDK and the CLI', async (t) => {
  const parent = await alice.client.send({ to: bob.number, text: 'the parent' });
  const fromSdk = await alice.client.sendSealed({
    to: bob.number,
    text: 'by when?',
    ask: true,
    deadline: new Date(Date.now() + 3_600_000),
    replyTo: parent.messageId,
  });
  assert.equal(fromSdk.sealed.version, 2);
  const shown = await cli(server.home, 'bob', 'message', room, fromSdk.messageId);
  assert.equal(shown.opened.text, 'by when?');
  assert.equal(shown.replyTo, parent.messageId);
  const fromCli = await cli(
    server.home,
    'alice',
    'send',
    bob.number,
    'to the microsecond',
    '--sealed',
    '--ask',
    '--deadline',
    '2030-01-01T00:00:00.123456Z',
    '--reply-to',
    parent.messageId,
  );
  const envelope = await bob.client.getMessage(room, fromCli.messageId);
  assert.equal(envelope.sealed.version, 2);
  assert.equal(envelope.deadline, '2030-01-01T00:00:00.123456Z');
  assert.deepEqual(await bob.client.open(envelope), { text: 'to the microsecond' });
});

test('a sealed note the server turns into a question or moves into another thread opens nowhere', async (t) => {
  const other = await alice.client.send({ to: bob.number, text: 'another thread' });
  const note = await alice.client.sendSealed({ to: bob.number, text: 'only a note' });
  assert.equal(note.sealed.version, 2);
  const id = note.messageId;
  const restore = `UPDATE messages SET ask = false, deadline = NULL, reply_to = NULL WHERE id = '${id}'`;
  for (const [what, rewrite, check] of [
    ['ask', `UPDATE messages SET ask = true WHERE id = '${id}'`, (e) => e.ask === true],
    [
      'deadline',
      `UPDATE messages SET ask = true, deadline = now() + interval '1 day' WHERE id = '${id}'`,
      (e) => e.deadline !== null,
    ],
    ['replyTo', `UPDATE messages SET reply_to = '${other.messageId}' WHERE id = '${id}'`, (e) => e.replyTo === other.messageId],
  ]) {
    await server.sql(rewrite);
    const envelope = await bob.client.getMessage(room, id);
    assert.ok(check(envelope), `the server now says another ${what}`);
    await assert.rejects(bob.client.open(envelope), (e) => e.reason === 'cannot_open', `SDK, ${what}`);
    await assert.rejects(alice.client.open(envelope), (e) => e.reason === 'cannot_open', `sender's copy, ${what}`);
    const shown = await cli(server.home, 'bob', 'message', room, id);
    assert.equal(shown.openError, 'cannot_open', `CLI, ${what}`);
    assert.equal(shown.opened, undefined);
    await server.sql(restore);
    assert.deepEqual(await bob.client.open(await bob.client.getMessage(room, id)), { text: 'only a note' }, `restored after ${what}`);
  }
});

test('a group room: the SDK seals for every current member', async (t) => {
  const group = await cli(server.home, 'alice', 'rooms', 'create', '--name', 'trio', '--member', bob.number, '--member', carol.number);
  const sent = await alice.client.sendSealed({ conversationId: group.id, text: 'hello, three of us' });
  assert.equal(sent.sealed.recipients.length, 3);
  for (const who of ['alice', 'bob', 'carol']) {
    const shown = await cli(server.home, who, 'message', group.id, sent.messageId);
    assert.equal(shown.opened.text, 'hello, three of us', who);
  }
  const fromCli = await cli(server.home, 'carol', 'send', '--room', group.id, 'carol seals too', '--sealed');
  const envelope = await bob.client.getMessage(group.id, fromCli.messageId);
  assert.deepEqual(await bob.client.open(envelope), { text: 'carol seals too' });
});

test('a handler gets `opened` for a sealed question and answers privately with sendSealed', { timeout: 60_000 }, async (t) => {
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const log = new EventLog();
  await bob.client.runtimes.register({ name: 'private', from: 'now' });
  const running = runWorker(bob.client, {
    name: 'private',
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: async ({ message, opened, signal }) => {
      if (!opened) return { skip: 'not sealed' };
      await bob.client.sendSealed({
        conversationId: message.conversationId,
        replyTo: message.messageId,
        text: `privately: ${opened.text.toUpperCase()}`,
        signal,
      });
      return { skip: 'answered privately' };
    },
  });
  const question = await cli(server.home, 'alice', 'send', bob.number, 'the secret plan?', '--ask', '--sealed');
  const answer = await untilSignalled(
    alice.client,
    async () => {
      const thread = await alice.client.getThread(room, question.messageId, { limit: 100 });
      return thread.messages.find((m) => m.replyTo === question.messageId);
    },
    { what: 'the private answer' },
  );
  assert.equal(answer.text, null, 'no plaintext on the server');
  assert.equal(answer.byRuntime, false);
  const shown = await cli(server.home, 'alice', 'message', room, answer.messageId);
  assert.equal(shown.opened.text, 'privately: THE SECRET PLAN?');
  const skipped = await log.next('skipped');
  assert.equal(skipped.reason, 'answered privately');
  cancel.abort();
  await running;
});
