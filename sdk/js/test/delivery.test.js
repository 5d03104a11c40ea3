// What became of a question, through the SDK against the real server:
// `client.delivery`, `client.cancel`, `send({ask: true, wait})` resolving
// with the delivery once every recipient ended without an answer, and a
// runWorker callback whose question is canceled under it. Each test asks a
// fresh agent, so no other test's runtime considers its questions.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Relayger, RelaygerError, uuidv7 } from '../src/index.js';
import { RAW_REQUEST } from '../src/client.js';
import { befriend, contactsWorld, identity, startWorker } from './support.js';

const LEASE_MS = 1500;
/** Leases whose first heartbeat comes 9.6 s after the claim: a callback's finish comes first. */
const world = contactsWorld({ leaseMs: LEASE_MS });
const longLeases = contactsWorld();

let agents = 0;

/** A new agent of `inWorld` that is the asker's contact: `{agent, room}`. */
async function freshAgent(inWorld) {
  agents += 1;
  const agent = await identity(inWorld.server, `agent-${agents}`);
  const room = await befriend(inWorld.server, inWorld.asker, agent);
  return { agent, room };
}

/** The replies to `messageId` in its thread. */
async function repliesTo(client, room, messageId) {
  const thread = await client.getThread(room, messageId, { limit: 100 });
  return thread.messages.filter((m) => m.replyTo === messageId);
}

/**
 * When `event` (a worker event name) is first logged for `messageId`, on
 * the monotonic clock (awaited later: a test that fails first leaves no
 * unhandled rejection behind).
 */
function loggedAt(log, event, messageId) {
  const at = log.next((e) => e.event === event && e.messageId === messageId, 30_000).then(() => performance.now());
  at.catch(() => {});
  return at;
}

test('an answered question: send with wait resolves with the reply and the answered delivery', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(world);
  await startWorker(t, agent.client, {
    name: 'answers',
    handler: ({ message }) => ({ reply: `answer to ${message.text}` }),
  });
  const outcome = await world.asker.client.send({
    conversationId: room,
    text: 'what time is it?',
    ask: true,
    wait: { timeoutMs: 20_000 },
  });
  const { question, reply, delivery } = outcome;
  assert.equal(question.text, 'what time is it?');
  assert.equal(question.ask, true);
  assert.equal(reply.text, 'answer to what time is it?');
  assert.equal(reply.replyTo, question.messageId);
  assert.equal(reply.sender.id, agent.id);
  assert.equal(delivery.conversationId, room);
  assert.equal(delivery.messageId, question.messageId);
  assert.equal(delivery.state, 'answered');
  assert.equal(delivery.canceled, false);
  assert.deepEqual(delivery.recipients, [
    {
      identityId: agent.id,
      number: agent.number,
      state: 'answered',
      attempts: 1,
      replyMessageId: reply.messageId,
      listeners: 1,
    },
  ]);
  assert.match(delivery.updatedAt, /Z$/);
  // Any member of the room reads the same delivery.
  const read = await agent.client.delivery(room, question.messageId);
  assert.equal(read.state, 'answered');
  assert.equal(read.recipients[0].replyMessageId, reply.messageId);
});

test('a handler that always throws (maxAttempts 1): the wait resolves with failed / attempts_exhausted at once after the dead letter', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(world);
  const { log } = await startWorker(t, agent.client, {
    name: 'always-throws',
    policy: { maxAttempts: 1 },
    handler: () => {
      throw new Error('boom: the model is unavailable');
    },
  });
  const messageId = uuidv7();
  const dead = loggedAt(log, 'dead_letter', messageId);
  const outcome = await world.asker.client.send({
    conversationId: room,
    messageId,
    text: 'boom please',
    ask: true,
    wait: { timeoutMs: 20_000 },
  });
  const resolvedAt = performance.now();
  assert.equal(outcome.reply, null);
  assert.equal(outcome.question.messageId, messageId);
  assert.equal(outcome.delivery.state, 'failed');
  assert.deepEqual(outcome.delivery.recipients, [
    { identityId: agent.id, number: agent.number, state: 'failed', reason: 'attempts_exhausted', attempts: 1, listeners: 1 },
  ]);
  assert.doesNotMatch(JSON.stringify(outcome.delivery), /boom/, 'the asker sees codes, never the handler error');
  // Woken by the socket's delivery_changed, not by the 30 s fallback read.
  const afterDeadLetter = resolvedAt - (await dead);
  assert.ok(afterDeadLetter < 3000, `resolved ${Math.round(afterDeadLetter)} ms after the dead letter`);
});

test('a deadline already passed: the wait resolves with rejected / deadline_passed', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(world);
  const calls = [];
  await startWorker(t, agent.client, {
    name: 'never-late',
    handler: ({ message }) => {
      calls.push(message.text);
      return { reply: 'too late anyway' };
    },
  });
  const outcome = await world.asker.client.send({
    conversationId: room,
    text: 'What was the status?',
    ask: true,
    deadline: new Date(Date.now() - 60_000),
    wait: { timeoutMs: 20_000 },
  });
  assert.equal(outcome.reply, null);
  assert.equal(outcome.delivery.state, 'rejected');
  assert.deepEqual(
    outcome.delivery.recipients.map(({ state, reason, attempts }) => ({ state, reason, attempts })),
    [{ state: 'rejected', reason: 'deadline_passed', attempts: 0 }],
  );
  assert.deepEqual(calls, [], 'no callback ran');
});

test('an agent with no runtime: queued with listeners 0, and the wait runs to its timeout', { timeout: 60_000 }, async () => {
  const { agent, room } = await freshAgent(world);
  const started = performance.now();
  const failure = await world.asker.client
    .send({ conversationId: room, text: 'anyone there?', ask: true, wait: { timeoutMs: 1500 } })
    .then(
      () => assert.fail('the wait must time out'),
      (error) => error,
    );
  const elapsed = performance.now() - started;
  assert.ok(failure instanceof RelaygerError);
  assert.equal(failure.code, 'timeout');
  assert.match(failure.message, /the question was sent/);
  assert.ok(elapsed >= 1500 && elapsed < 10_000, `waited ${Math.round(elapsed)} ms`);
  const { question, delivery } = failure.details;
  assert.equal(question.text, 'anyone there?');
  assert.equal(delivery.state, 'queued');
  assert.deepEqual(delivery.recipients, [
    { identityId: agent.id, number: agent.number, state: 'queued', attempts: 0, listeners: 0 },
  ]);
  // The question stays: the read is the same afterwards.
  assert.equal((await world.asker.client.delivery(room, question.messageId)).state, 'queued');
});

test('wait needs a question, and is validated before anything is sent', async () => {
  const { room } = await freshAgent(world);
  for (const [options, pattern] of [
    [{ wait: true }, /needs `ask: true`/],
    [{ ask: true, wait: { timeoutMs: 0 } }, /timeoutMs/],
    [{ ask: true, wait: { timeoutMs: 600_001 } }, /timeoutMs/],
  ]) {
    await assert.rejects(
      world.asker.client.send({ conversationId: room, text: 'not sent', ...options }),
      (error) => error.code === 'invalid_argument' && pattern.test(error.message),
    );
  }
  const history = await world.asker.client.getHistory(room);
  assert.deepEqual(history.messages, [], 'nothing was sent');
});

test('cancel while queued: canceled for good, never claimed; only the sender cancels, again and again', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(world);
  // A runtime that will consider the question, not running yet.
  await agent.client.runtimes.register({ name: 'later', from: 'now' });
  const question = await world.asker.client.send({ conversationId: room, text: 'never mind this one', ask: true });
  const queued = await world.asker.client.delivery(room, question.messageId);
  assert.equal(queued.state, 'queued');
  assert.equal(queued.recipients[0].listeners, 1);

  await assert.rejects(agent.client.cancel(room, question.messageId), (error) => error.code === 'forbidden' && error.status === 403);
  const canceled = await world.asker.client.cancel(room, question.messageId);
  assert.equal(canceled.messageId, question.messageId);
  assert.equal(canceled.state, 'canceled');
  assert.equal(canceled.canceled, true);
  assert.deepEqual(
    canceled.recipients.map(({ state, attempts }) => ({ state, attempts })),
    [{ state: 'canceled', attempts: 0 }],
  );
  const again = await world.asker.client.cancel(room, question.messageId);
  assert.equal(again.state, 'canceled');
  assert.equal(again.canceled, true);

  // The worker starts and answers the next question, never the canceled one.
  const { log } = await startWorker(t, agent.client, {
    name: 'later',
    handler: ({ message }) => ({ reply: `answer to ${message.text}` }),
  });
  const next = await world.asker.client.send({ conversationId: room, text: 'this one please', ask: true, wait: { timeoutMs: 20_000 } });
  assert.equal(next.delivery.state, 'answered');
  assert.deepEqual(
    log.named('claimed').map((e) => e.messageId),
    [next.question.messageId],
  );
  const after = await world.asker.client.delivery(room, question.messageId);
  assert.equal(after.state, 'canceled');
  assert.equal(after.recipients[0].attempts, 0);
  assert.deepEqual(await repliesTo(world.asker.client, room, question.messageId), []);
});

/**
 * A worker for `agent` whose callback, for a question starting "hold",
 * reports that it runs (`entered`), then waits for `until(signal)` and
 * tries to answer; other questions are answered at once.
 */
async function holdingWorker(t, agent, until) {
  const hold = { aborts: [] };
  hold.entered = new Promise((resolve) => (hold.enter = resolve));
  const worker = await startWorker(t, agent.client, {
    name: 'holds',
    handler: async ({ message, signal }) => {
      if (!message.text.startsWith('hold')) return { reply: `answer to ${message.text}` };
      signal.addEventListener('abort', () => hold.aborts.push(signal.reason?.name));
      hold.enter();
      await until(signal);
      return { reply: 'a reply that must not be written' };
    },
  });
  return { ...worker, hold };
}

/** Resolves when `signal` aborts. */
const aborted = (signal) => new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));

/** The worker events about `messageId`, by name. */
const eventsAbout = (log, messageId) => log.events.filter((e) => e.messageId === messageId).map((e) => e.event);

test('cancel while the callback runs: the next heartbeat aborts its signal, `canceled` is reported, no reply is written, the slot is free', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(world);
  const { log, hold } = await holdingWorker(t, agent, aborted);
  const question = await world.asker.client.send({ conversationId: room, text: 'hold on', ask: true });
  await hold.entered;
  assert.equal((await world.asker.client.delivery(room, question.messageId)).state, 'working');

  const delivery = await world.asker.client.cancel(room, question.messageId);
  assert.equal(delivery.canceled, true);
  const canceled = await log.next((e) => e.event === 'canceled' && e.messageId === question.messageId);
  const claimed = log.named('claimed').find((e) => e.messageId === question.messageId);
  assert.deepEqual(canceled, { event: 'canceled', jobKey: claimed.jobKey, messageId: question.messageId });
  assert.deepEqual(hold.aborts, ['AbortError'], 'the callback signal aborted once');

  // The one slot (concurrency 1) is free: the next question is answered.
  const next = await world.asker.client.send({ conversationId: room, text: 'and now?', ask: true, wait: { timeoutMs: 20_000 } });
  assert.equal(next.reply.text, 'answer to and now?');

  assert.deepEqual(eventsAbout(log, question.messageId), ['claimed', 'canceled'], 'no failure, retry or release');
  assert.deepEqual(log.named('stopped'), [], 'the worker keeps running');
  assert.deepEqual(await repliesTo(world.asker.client, room, question.messageId), []);
  const after = await world.asker.client.delivery(room, question.messageId);
  assert.equal(after.state, 'canceled');
  assert.deepEqual(
    after.recipients.map(({ state, attempts }) => ({ state, attempts })),
    [{ state: 'canceled', attempts: 1 }],
  );
});

test('cancel while the callback runs, learned at its finish: the late reply is refused and not written', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(longLeases);
  let finish;
  const finished = new Promise((resolve) => (finish = resolve));
  // Told to answer, or stopped when the test ends early.
  const { log, hold } = await holdingWorker(t, agent, (signal) => Promise.race([finished, aborted(signal)]));
  const question = await longLeases.asker.client.send({ conversationId: room, text: 'hold until told', ask: true });
  await hold.entered;
  await longLeases.asker.client.cancel(room, question.messageId);
  // The callback answers now, long before its first heartbeat.
  finish();
  const canceled = await log.next((e) => e.event === 'canceled' && e.messageId === question.messageId);
  assert.equal(canceled.messageId, question.messageId);
  assert.deepEqual(hold.aborts, [], 'it answered before anything aborted it');
  assert.deepEqual(eventsAbout(log, question.messageId), ['claimed', 'canceled']);
  assert.deepEqual(await repliesTo(longLeases.asker.client, room, question.messageId), []);
  assert.equal((await longLeases.asker.client.delivery(room, question.messageId)).state, 'canceled');

  // The slot is free here too.
  const next = await longLeases.asker.client.send({ conversationId: room, text: 'next', ask: true, wait: { timeoutMs: 20_000 } });
  assert.equal(next.reply.text, 'answer to next');
});

test('a cancel while the asker waits: the waiting send resolves with the canceled delivery, woken by the cancel', { timeout: 60_000 }, async (t) => {
  const { agent, room } = await freshAgent(world);
  const { log, hold } = await holdingWorker(t, agent, aborted);
  const asker = await Relayger.fromProfile({ profile: world.asker.profile, home: world.server.home });
  t.after(() => asker.disconnect());
  // Resolves with the question once the waiting send has read its delivery
  // as `working`: any read after the cancel is then one a frame asked for.
  let sawWorking;
  const working = new Promise((resolve) => (sawWorking = resolve));
  let question;
  const raw = asker[RAW_REQUEST].bind(asker);
  asker[RAW_REQUEST] = async (method, path, options) => {
    const response = await raw(method, path, options);
    if (method === 'POST' && path === '/v1/messages') question = response.body;
    if (method === 'GET' && path.endsWith('/delivery') && response.body.state === 'working') sawWorking(question);
    return response;
  };
  const waiting = asker.send({ conversationId: room, text: 'hold: still needed?', ask: true, wait: { timeoutMs: 20_000 } });
  waiting.catch(() => {});
  await hold.entered;
  await working;
  const canceledAt = performance.now();
  await world.asker.client.cancel(room, question.messageId);
  const outcome = await waiting;
  const afterCancel = performance.now() - canceledAt;
  assert.equal(outcome.reply, null);
  assert.equal(outcome.question.messageId, question.messageId);
  assert.equal(outcome.delivery.state, 'canceled');
  assert.equal(outcome.delivery.canceled, true);
  assert.ok(afterCancel < 3000, `resolved ${Math.round(afterCancel)} ms after the cancel`);
  await log.next((e) => e.event === 'canceled' && e.messageId === question.messageId);
});
