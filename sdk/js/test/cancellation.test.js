// runWorker's cancellation and callback lifecycle ("SDK cancellation and
// callback lifecycle" on the product page), against a real server with a
// short lease.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';

import { Relayger, runWorker } from '../src/index.js';
import { RAW_REQUEST } from '../src/client.js';
import { EventLog, befriend, identity, listRuntimes, replyTo, startServer } from './support.js';

const LEASE_MS = 1500;
let server;
let asker;
let agent;
let room;

before(async () => {
  server = await startServer({ leaseMs: LEASE_MS });
  asker = await identity(server, 'asker', { agent: false });
  agent = await identity(server, 'agent');
  room = await befriend(server, asker, agent);
});
after(() => server?.stop());

const ask = (text) => asker.client.send({ conversationId: room, text, ask: true });

test('an already aborted signal creates no runtime record', async (t) => {
  const log = new EventLog();
  const result = await runWorker(agent.client, {
    name: 'never-started',
    from: 'now',
    signal: AbortSignal.abort(),
    handler: () => assert.fail('no callback'),
    onEvent: log.onEvent,
  });
  assert.deepEqual(result, { reason: 'interrupted', runtimeId: null });
  assert.deepEqual(log.events, [{ event: 'stopped', reason: 'interrupted' }]);
  const runtimes = await listRuntimes(server, agent);
  assert.equal(runtimes.filter((r) => r.name === 'never-started').length, 0);
});

test('the registration request itself is aborted', async (t) => {
  // A server that accepts the registration request and never answers it.
  let seen;
  const arrived = new Promise((resolve) => (seen = resolve));
  const hanging = createServer((request) => seen(`${request.method} ${request.url}`));
  await new Promise((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  const client = new Relayger({ server: `http://127.0.0.1:${hanging.address().port}`, token: 't' });
  try {
    const cancel = new AbortController();
  t.after(() => cancel.abort());
    const log = new EventLog();
    const running = runWorker(client, {
      name: 'stuck-registration',
      signal: cancel.signal,
      handler: () => assert.fail('no callback'),
      onEvent: log.onEvent,
    });
    assert.equal(await arrived, 'POST /v1/runtimes');
    const abortedAt = performance.now();
    cancel.abort();
    assert.deepEqual(await running, { reason: 'interrupted', runtimeId: null });
    assert.ok(performance.now() - abortedAt < 1000, 'resolves at once, not after a request timeout');
    assert.deepEqual(log.named('started'), []);
  } finally {
    client.disconnect();
    hanging.closeAllConnections();
    await new Promise((resolve) => hanging.close(resolve));
  }

  // Against the real server: cancelled while registering, it starts nothing.
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const log = new EventLog();
  const running = runWorker(agent.client, {
    name: 'cancelled-registration',
    from: 'now',
    signal: cancel.signal,
    handler: () => assert.fail('no callback'),
    onEvent: log.onEvent,
  });
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
  assert.deepEqual(log.named('started'), []);
  assert.deepEqual(log.named('claimed'), []);
});

test('a callback that ignores its signal stops the worker with handler_did_not_stop; no new work is taken', { timeout: 60_000 }, async (t) => {
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const calls = [];
  const name = 'ignores-signal';
  // Register first so that both questions are after the start.
  const runtime = await agent.client.runtimes.register({ name, from: 'now' });
  const first = await ask('first: will hang');
  const second = await ask('second: must wait');
  const started = performance.now();
  const failure = await runWorker(agent.client, {
    name,
    from: 'now',
    signal: cancel.signal,
    handlerTimeoutMs: 300,
    onEvent: log.onEvent,
    handler: ({ message }) => {
      calls.push(message.text);
      return new Promise(() => {}); // never settles, never looks at its signal
    },
  }).then(
    () => assert.fail('runWorker must reject'),
    (error) => error,
  );
  const elapsed = performance.now() - started;
  assert.equal(failure.code, 'handler_did_not_stop');
  assert.equal(failure.runtimeId, runtime.id);
  assert.ok(elapsed >= 1300 && elapsed < 5000, `timeout 300 ms + 1 s grace, took ${elapsed} ms`);
  assert.deepEqual(calls, ['first: will hang'], 'no callback next to the stuck one');
  assert.equal(log.named('claimed').length, 1);
  assert.deepEqual(log.events.at(-1), {
    event: 'stopped',
    reason: 'handler_did_not_stop',
    jobKey: log.named('claimed')[0].jobKey,
  });

  // The stuck job's lease was neither released nor renewed: once it
  // expires, another worker of the same name answers both questions.
  const inspect = await agent.client.runtimes.get(runtime.id);
  assert.equal(inspect.jobs.claimed, 1);
  assert.equal(inspect.jobs.pending, 1);
  const next = new AbortController();
  t.after(() => next.abort());
  const log2 = new EventLog();
  const answering = runWorker(agent.client, {
    name,
    from: 'now',
    signal: next.signal,
    onEvent: log2.onEvent,
    handler: ({ message }) => ({ reply: `answered: ${message.text}` }),
  });
  assert.equal((await replyTo(asker, second)).text, 'answered: second: must wait');
  assert.equal((await replyTo(asker, first)).text, 'answered: first: will hang');
  const retried = await log2.next((e) => e.event === 'claimed' && e.messageId === first.messageId);
  assert.equal(retried.attempt, 2);
  next.abort();
  assert.equal((await answering).reason, 'interrupted');
});

test('a callback that honours cancellation lets the next job run', { timeout: 60_000 }, async (t) => {
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const name = 'honours-signal';
  await agent.client.runtimes.register({ name, from: 'now' });
  const slow = await ask('slow one');
  const quick = await ask('quick one');
  const seenReasons = [];
  const running = runWorker(agent.client, {
    name,
    from: 'now',
    signal: cancel.signal,
    handlerTimeoutMs: 300,
    onEvent: log.onEvent,
    handler: ({ message, attempt, signal }) => {
      if (message.text === 'slow one' && attempt === 1) {
        return new Promise((_, reject) =>
          signal.addEventListener('abort', () => {
            seenReasons.push(signal.reason.name);
            reject(signal.reason);
          }),
        );
      }
      return { reply: `done: ${message.text}`, usage: { modelCalls: 1, inputTokens: 5, outputTokens: 2 } };
    },
  });
  const reply = await replyTo(asker, quick);
  assert.equal(reply.text, 'done: quick one');
  const failed = await log.next('failed');
  assert.equal(failed.messageId, slow.messageId);
  assert.equal(failed.error, 'handler_timeout');
  assert.deepEqual(seenReasons, ['TimeoutError']);
  await log.next((e) => e.event === 'replied' && e.messageId === quick.messageId);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
  assert.deepEqual(log.events.at(-1), { event: 'stopped', reason: 'interrupted' });
  // Usage is what the callback reported: one attempt with usage, one (the
  // timed-out one) without — unknown, not zero.
  const stats = await agent.client.runtimes.stats(log.named('started')[0].runtimeId);
  assert.deepEqual(stats.reported, { modelCalls: 1, inputTokens: 5, outputTokens: 2 });
  assert.equal(stats.unreportedAttempts, 1);
});

test('aborting the signal releases the in-flight job and resolves', { timeout: 60_000 }, async (t) => {
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const name = 'released-on-stop';
  const runtime = await agent.client.runtimes.register({ name, from: 'now' });
  const question = await ask('hold on');
  let entered;
  const inCallback = new Promise((resolve) => (entered = resolve));
  const running = runWorker(agent.client, {
    name,
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: ({ signal }) => {
      entered();
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    },
  });
  await inCallback;
  cancel.abort();
  assert.deepEqual(await running, { reason: 'interrupted', runtimeId: runtime.id });
  const released = log.named('released');
  assert.equal(released.length, 1);
  assert.equal(released[0].messageId, question.messageId);
  const inspect = await agent.client.runtimes.get(runtime.id);
  assert.equal(inspect.jobs.pending, 1, 'back to pending at once');
  assert.equal(inspect.activeLeases, 0);
  const stats = await agent.client.runtimes.stats(runtime.id);
  assert.equal(stats.unfinishedAttempts, 1);
});

test('losing the lease aborts the callback with lease_lost', { timeout: 60_000 }, async (t) => {
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const name = 'loses-lease';
  await agent.client.runtimes.register({ name, from: 'now' });
  const question = await ask('block the event loop');
  let reason;
  const running = runWorker(agent.client, {
    name,
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: ({ signal, attempt }) => {
      if (attempt > 1) return { skip: 'seen' };
      // Blocking the event loop past the lease: no heartbeat can go out.
      const until = Date.now() + LEASE_MS + 700;
      while (Date.now() < until);
      return new Promise((_, reject) =>
        signal.addEventListener('abort', () => {
          reason = signal.reason.message;
          reject(signal.reason);
        }),
      );
    },
  });
  const failed = await log.next('failed');
  assert.equal(failed.messageId, question.messageId);
  assert.equal(failed.error, 'lease_lost');
  assert.match(reason, /lease/);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
});

test('an idle worker waits for the socket instead of polling', { timeout: 60_000 }, async (t) => {
  const client = await Relayger.fromProfile({ profile: 'agent', home: server.home });
  t.after(() => client.disconnect());
  let claims = 0;
  const raw = client[RAW_REQUEST].bind(client);
  client[RAW_REQUEST] = (method, path, options) => {
    if (path.endsWith('/claim')) claims++;
    return raw(method, path, options);
  };
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const running = runWorker(client, {
    name: 'idle',
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: ({ message }) => ({ reply: `idle worker heard: ${message.text}` }),
  });
  const started = await log.next('started');
  assert.equal(started.socket, 'connected');
  assert.equal(started.agentNumber, agent.number);
  // Idle for a while: at most the first claim and the one after the socket opened.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  assert.ok(claims <= 2, `${claims} claims while idle`);
  const before = performance.now();
  const question = await ask('wake up');
  const reply = await replyTo(asker, question);
  assert.equal(reply.text, 'idle worker heard: wake up');
  assert.ok(performance.now() - before < 5000, 'woken by the socket, long before the 30 s fallback poll');
  cancel.abort();
  await running;
  client.disconnect();
});

test('a refused registration is fatal: runWorker rejects with the server code', async () => {
  await agent.client.runtimes.register({ name: 'configured', from: 'now', policy: { concurrency: 2 } });
  const log = new EventLog();
  const failure = await runWorker(agent.client, {
    name: 'configured',
    from: 'now',
    onEvent: log.onEvent,
    handler: () => assert.fail('no callback'),
  }).then(
    () => assert.fail('runWorker must reject'),
    (error) => error,
  );
  assert.equal(failure.code, 'runtime_configuration_conflict');
  assert.equal(failure.status, 409);
  assert.equal(log.events.length, 1);
  assert.deepEqual(log.events[0], {
    event: 'stopped',
    reason: 'error',
    code: 'runtime_configuration_conflict',
    message: failure.message,
  });
});

test('with concurrency 2 both callbacks run at once, and nothing new starts beside one that will not stop', { timeout: 60_000 }, async (t) => {
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const name = 'pair';
  const policy = { concurrency: 2 };
  await agent.client.runtimes.register({ name, from: 'now', policy });
  await ask('stuck');
  const wrapsUp = await ask('wraps up');
  await ask('third');
  const log = new EventLog();
  const running = new Set();
  let together = 0;
  const failure = await runWorker(agent.client, {
    name,
    from: 'now',
    policy,
    signal: cancel.signal,
    handlerTimeoutMs: 500,
    onEvent: log.onEvent,
    handler: async ({ message, signal }) => {
      running.add(message.text);
      together = Math.max(together, running.size);
      if (message.text === 'stuck') return new Promise(() => {});
      // Honours its signal: wraps up as soon as it aborts.
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
      running.delete(message.text);
      return { reply: `wrapped up: ${message.text}` };
    },
  }).then(
    () => assert.fail('runWorker must reject'),
    (error) => error,
  );
  assert.equal(failure.code, 'handler_did_not_stop');
  assert.equal(together, 2, 'two callbacks at once');
  assert.deepEqual(
    log.named('claimed').map((e) => e.messageId).length,
    2,
    `the third question is not started next to the stuck one: ${JSON.stringify(log.events)}`,
  );
  const replied = log.named('replied');
  assert.equal(replied.length, 1, 'the other in-flight job ends normally');
  assert.equal(replied[0].messageId, wrapsUp.messageId);
});
