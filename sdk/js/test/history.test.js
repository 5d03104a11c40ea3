// getHistory pages a room both ways through GET /v1/rooms/{room}/messages,
// against a real server: acknowledged messages included, each message once,
// `next`/`prev` null at the ends, bad cursors refused.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { RelaygerError } from '../src/index.js';
import { befriend, identity, startServer } from './support.js';

let server;
let asker;
let agent;
let room;

before(async () => {
  server = await startServer();
  asker = await identity(server, 'history-asker', { agent: false });
  agent = await identity(server, 'history-agent');
  room = await befriend(server, asker, agent);
});
after(() => server?.stop());

test('getHistory pages a room backwards and forwards, acknowledged messages included', async () => {
  const sent = [];
  for (let i = 1; i <= 7; i++) sent.push(await asker.client.send({ conversationId: room, text: `line ${i}` }));
  // The agent acknowledges everything: the inbox is empty, the history is not.
  await agent.client.ack(room, sent.at(-1).seq);
  const inbox = await agent.client.inbox();
  assert.equal(inbox.rooms.find((r) => r.roomId === room)?.messages.length ?? 0, 0);

  const texts = (page) => page.messages.map((m) => m.text);
  // Backwards from the newest page, following `prev`.
  const newest = await agent.client.getHistory(room, { limit: 3 });
  assert.deepEqual(texts(newest), ['line 5', 'line 6', 'line 7']);
  assert.equal(newest.next, null, 'nothing newer than the newest page');
  assert.equal(newest.prev, sent[4].seq);
  const backwards = [...newest.messages];
  let page = newest;
  while (page.prev !== null) {
    page = await agent.client.getHistory(room, { before: page.prev, limit: 3 });
    backwards.unshift(...page.messages);
  }
  // The room also holds whatever befriending wrote before the seven lines.
  const seqs = backwards.map((m) => m.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'oldest first, each once');
  assert.equal(new Set(seqs).size, seqs.length);
  assert.deepEqual(
    backwards.filter((m) => m.text?.startsWith('line ')).map((m) => m.messageId),
    sent.map((m) => m.messageId),
  );

  // Forwards from the start, following `next`.
  const forwards = [];
  let cursor = 0;
  for (;;) {
    const next = await agent.client.getHistory(room, { after: cursor, limit: 2 });
    assert.ok(next.messages.length <= 2);
    forwards.push(...next.messages);
    if (next.next === null) break;
    cursor = next.next;
  }
  assert.deepEqual(forwards.map((m) => m.seq), seqs);

  // A page in the middle has both cursors.
  const middle = await agent.client.getHistory(room, { after: sent[1].seq, limit: 2 });
  assert.deepEqual(texts(middle), ['line 3', 'line 4']);
  assert.equal(middle.next, sent[3].seq);
  assert.equal(middle.prev, sent[2].seq);
});

test('getHistory refuses bad input and rooms the caller is not in', async () => {
  const refused = (promise, code, status) =>
    assert.rejects(promise, (e) => e instanceof RelaygerError && e.code === code && e.status === status);
  await refused(agent.client.getHistory(room, { limit: 0 }), 'invalid_argument', 400);
  await refused(agent.client.getHistory(room, { limit: 101 }), 'invalid_argument', 400);
  await refused(agent.client.getHistory(room, { before: 2, after: 5 }), 'invalid_argument', 400);
  const stranger = await identity(server, 'history-stranger', { agent: false });
  await refused(stranger.client.getHistory(room), 'not_found', 404);
});
