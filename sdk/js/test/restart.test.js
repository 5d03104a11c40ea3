// The worker rides out a server restart: requests are retried with backoff,
// the socket reconnects, and the next question is answered.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { runWorker } from '../src/index.js';
import { EventLog, befriend, identity, replyTo, startServer } from './support.js';

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

test('a worker keeps answering across a server restart', { timeout: 90_000 }, async (t) => {
  const asker = await identity(server, 'asker', { agent: false });
  const agent = await identity(server, 'agent');
  const room = await befriend(server, asker, agent);
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const log = new EventLog();
  const running = runWorker(agent.client, {
    name: 'steady',
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: ({ message }) => ({ reply: `heard: ${message.text}` }),
  });
  await log.next('started');
  const before = await asker.client.send({ conversationId: room, text: 'before', ask: true });
  assert.equal((await replyTo(asker, before)).text, 'heard: before');

  await server.restart();
  const afterRestart = await asker.client.send({ conversationId: room, text: 'after', ask: true });
  assert.equal((await replyTo(asker, afterRestart, { timeoutMs: 45_000 })).text, 'heard: after');
  assert.equal(log.named('stopped').length, 0, 'the worker never stopped');
  assert.equal(log.named('socket_disconnected').length, 1, JSON.stringify(log.events));
  await log.next('socket_connected', 45_000);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
});
