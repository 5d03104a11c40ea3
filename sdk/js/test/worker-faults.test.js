// runWorker paced and guarded as the Rust worker is, against a real server
// with a short lease: claims follow core's pacing rule (a grant with nothing
// more pending is no reason to claim again; a grant's `retryAt` is), a
// lease that cannot be renewed aborts the callback before the server's
// expiry, stopping during a claim gives back what it granted, and the
// runtime socket's pings notice a half-open connection.

import assert from 'node:assert/strict';
import { createConnection, createServer } from 'node:net';
import { test } from 'node:test';

import { WebSocketServer } from 'ws';

import { Relayger, runWorker } from '../src/index.js';
import { RAW_REQUEST } from '../src/client.js';
import { loadProfile } from '../src/profile.js';
import { WakeSocket } from '../src/wake-socket.js';
import { EventLog, contactsWorld, replyTo } from './support.js';

const LEASE_MS = 1500;
const world = contactsWorld({ leaseMs: LEASE_MS });

/**
 * A client of the agent whose claims are recorded: `claims.granted` holds
 * each answered claim's number of jobs; `claims.reach(n)` resolves once n
 * claims were answered.
 */
async function recordingClient(t) {
  const client = await Relayger.fromProfile({ profile: 'agent', home: world.server.home });
  t.after(() => client.disconnect());
  const claims = { granted: [], waiters: [] };
  claims.reach = (n) =>
    claims.granted.length >= n ? Promise.resolve() : new Promise((resolve) => claims.waiters.push({ n, resolve }));
  const raw = client[RAW_REQUEST].bind(client);
  client[RAW_REQUEST] = async (method, path, options) => {
    const response = await raw(method, path, options);
    if (path.endsWith('/claim')) {
      claims.granted.push(response.body?.jobs?.length ?? 0);
      for (const waiter of claims.waiters.filter((w) => claims.granted.length >= w.n)) waiter.resolve();
    }
    return response;
  };
  return { client, claims };
}

/** Replaces the global fetch for the test: `wrap(realFetch)` gives the replacement. */
function replaceFetch(t, wrap) {
  const real = globalThis.fetch;
  globalThis.fetch = wrap(real);
  const restore = () => {
    globalThis.fetch = real;
  };
  t.after(restore);
  return restore;
}

test('a grant with nothing more pending is no reason to claim again; a signal is', { timeout: 60_000 }, async (t) => {
  const { client, claims } = await recordingClient(t);
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const running = runWorker(client, {
    name: 'paced',
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    fallbackPollMs: 600_000,
    handler: () => ({ skip: 'counted' }),
  });
  await log.next('started');
  // The first claim and the one just after the socket opened, both idle.
  await claims.reach(2);
  // A skip writes no message, so no signal follows it: each question's
  // signal asks for one claim, which grants it, and nothing asks for a
  // claim after that grant.
  for (const text of ['first', 'second', 'third']) {
    const question = await world.ask(text);
    await log.next((e) => e.event === 'skipped' && e.messageId === question.messageId);
  }
  await claims.reach(5);
  assert.deepEqual(claims.granted.slice(2), [1, 1, 1], `claims and their grants: ${claims.granted}`);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
});

test('a grant says when another process\'s lease expires: its job is taken over soon after', { timeout: 60_000 }, async (t) => {
  const name = 'takes-over';
  const policy = { concurrency: 2 };
  const runtime = await world.agent.client.runtimes.register({ name, from: 'now', policy });
  const held = await world.ask('held by a process that goes silent');
  const claimed = await world.agent.client.runtimes.claim(runtime.id, { maxJobs: 1 });
  assert.equal(claimed.jobs.length, 1);
  const [job] = claimed.jobs;
  assert.equal(job.message.messageId, held.messageId);
  // The other process lives (renews its lease) until this worker's grant
  // has been handled, then goes silent.
  let alive = true;
  let lastBeat = performance.now();
  const beating = (async () => {
    while (alive) {
      const sent = performance.now();
      await world.agent.client.runtimes.heartbeat(runtime.id, job.jobId, { owner: job.owner, version: job.version });
      lastBeat = sent;
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 5));
    }
  })();
  const fresh = await world.ask('skip me');
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const running = runWorker(world.agent.client, {
    name,
    from: 'now',
    policy,
    signal: cancel.signal,
    onEvent: log.onEvent,
    fallbackPollMs: 600_000,
    handler: ({ message }) => (message.text === 'skip me' ? { skip: 'not for me' } : { reply: message.text.toUpperCase() }),
  });
  await log.next((e) => e.event === 'skipped' && e.messageId === fresh.messageId);
  alive = false;
  await beating;
  const reply = await replyTo(world.asker, held, { timeoutMs: 20_000 });
  assert.equal(reply.text, 'HELD BY A PROCESS THAT GOES SILENT');
  const afterExpiry = performance.now() - lastBeat - LEASE_MS;
  assert.ok(afterExpiry < 4000, `taken over ${afterExpiry} ms after the lease ended`);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
});

test('a lease that cannot be renewed aborts the callback before the server\'s expiry', { timeout: 60_000 }, async (t) => {
  const name = 'unrenewable';
  await world.agent.client.runtimes.register({ name, from: 'now' });
  const question = await world.ask('the heartbeats will not get through');
  // The server cannot be reached for heartbeats (a network error, as on a
  // cut link); everything else goes through.
  const restore = replaceFetch(t, (real) => (url, init) =>
    String(url).endsWith('/heartbeat') ? Promise.reject(new TypeError('fetch failed')) : real(url, init),
  );
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  let claimedAt;
  let abortedAt;
  let reason;
  const running = runWorker(world.agent.client, {
    name,
    from: 'now',
    signal: cancel.signal,
    onEvent: (event) => {
      if (event.event === 'claimed') claimedAt ??= performance.now();
      log.onEvent(event);
    },
    handler: ({ signal, attempt }) => {
      if (attempt > 1) return { skip: 'seen' };
      return new Promise((_, reject) =>
        signal.addEventListener('abort', () => {
          abortedAt = performance.now();
          reason = signal.reason.message;
          reject(signal.reason);
        }),
      );
    },
  });
  const failed = await log.next((e) => e.event === 'failed' && e.messageId === question.messageId);
  restore();
  assert.equal(failed.error, 'lease_expired');
  assert.match(reason, /lease/);
  // The server's expiry is at least LEASE_MS after the claim was answered;
  // the callback was told to stop a callback grace (a third of the lease at
  // most) before it.
  const ranFor = abortedAt - claimedAt;
  assert.ok(ranFor < LEASE_MS - 250, `the callback ran ${ranFor} ms of a ${LEASE_MS} ms lease`);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
});

test('stopping while a claim is in flight gives back what it granted', { timeout: 60_000 }, async (t) => {
  const name = 'stopped-mid-claim';
  const runtime = await world.agent.client.runtimes.register({ name, from: 'now' });
  const question = await world.ask('granted as the worker stops');
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  let armed = true;
  // The stop comes once the server has answered the claim, before its body
  // is read.
  replaceFetch(t, (real) => async (url, init) => {
    const response = await real(url, init);
    if (armed && String(url).endsWith('/claim')) {
      armed = false;
      cancel.abort();
    }
    return response;
  });
  const running = runWorker(world.agent.client, {
    name,
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: () => assert.fail('no callback runs'),
  });
  assert.equal((await running).reason, 'interrupted');
  const released = log.named('released');
  assert.equal(released.length, 1, JSON.stringify(log.events));
  assert.equal(released[0].messageId, question.messageId);
  const inspect = await world.agent.client.runtimes.get(runtime.id);
  assert.equal(inspect.jobs.pending, 1, 'back to pending at once');
  assert.equal(inspect.activeLeases, 0);
});

/**
 * A TCP proxy to `target` (a `http://host:port` URL) that delivers every
 * chunk `delayMs` after it arrived, each way: a slow link (latency, not a
 * bandwidth limit). Resolves with the proxy's URL.
 */
async function slowLink(t, target, delayMs) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const proxy = createServer((client) => {
    const upstream = createConnection(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    const relay = (from, to) => {
      from.on('data', (chunk) => setTimeout(() => to.write(chunk), delayMs));
      from.on('end', () => setTimeout(() => to.end(), delayMs));
    };
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => proxy.close(resolve));
  });
  return `http://127.0.0.1:${proxy.address().port}`;
}

test('over a slow link a short lease is renewed in time', { timeout: 60_000 }, async (t) => {
  // 150 ms each way against a 1500 ms lease whose callback may run 1000 ms
  // without a renewal (counted from the claim's send): the claim's answer
  // takes a third of that. A first heartbeat a whole period after the
  // answer came back after the limit, and the callback was aborted
  // (lease_expired) though the link was working.
  const name = 'slow-link';
  await world.agent.client.runtimes.register({ name, from: 'now' });
  const profile = await loadProfile('agent', world.server.home);
  const client = new Relayger({ ...profile, server: await slowLink(t, world.server.url, 150) });
  t.after(() => client.disconnect());
  const log = new EventLog();
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const running = runWorker(client, {
    name,
    from: 'now',
    signal: cancel.signal,
    onEvent: log.onEvent,
    handler: async ({ message, attempt, signal }) => {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, 900);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(signal.reason);
        });
      });
      return { reply: `${message.text} (attempt ${attempt})` };
    },
  });
  await log.next('started');
  for (const text of ['first', 'second']) {
    const question = await world.ask(text);
    const outcome = await log.next(
      (e) => ['replied', 'failed'].includes(e.event) && e.messageId === question.messageId,
      20_000,
    );
    assert.equal(outcome.event, 'replied', JSON.stringify(outcome));
    assert.equal((await replyTo(world.asker, question)).text, `${text} (attempt 1)`);
  }
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
});

/** A WakeSocket on `client` with quick liveness; its events go to `log`. */
function quickSocket(client, path, log) {
  return new WakeSocket(client, path, {
    onWake: () => {},
    onEvent: log.onEvent,
    liveness: { pingMs: 100, silenceMs: 600 },
  });
}

test('a half-open socket is noticed within its silence, and the socket reconnects', { timeout: 30_000 }, async (t) => {
  // A server whose connections go quiet after the handshake: it neither
  // reads nor writes, as when the link went down without a FIN or RST.
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => wss.once('listening', resolve));
  t.after(() => {
    // A paused connection never ends by itself.
    for (const connection of wss.clients) connection.terminate();
    return new Promise((resolve) => wss.close(resolve));
  });
  let connections = 0;
  wss.on('connection', (socket) => {
    connections++;
    socket._socket.pause();
  });
  const client = new Relayger({ server: `http://127.0.0.1:${wss.address().port}`, token: 'token' });
  t.after(() => client.disconnect());
  const log = new EventLog();
  const socket = quickSocket(client, '/v1/runtimes/r/socket', log);
  t.after(() => socket.close());
  assert.equal(await socket.connect(), true);
  const opened = performance.now();
  const lost = await log.next('socket_disconnected', 10_000);
  const noticed = performance.now() - opened;
  assert.match(lost.error, /answered nothing/);
  assert.ok(noticed >= 600 && noticed < 2000, `noticed after ${noticed} ms`);
  await log.next('socket_connected', 10_000);
  assert.ok(connections >= 2, `${connections} connections`);
});

test('a socket whose pings go unanswered is dead even while frames sent before the stall still arrive', { timeout: 30_000 }, async (t) => {
  // The server's half of the connection stalls right after the handshake
  // (nothing it sends after that point gets through, pongs included), but a
  // frame it had sent before the stall arrives late, as TCP retransmits
  // what a cut held once the link is back. That late frame proves nothing
  // about the connection now: the socket must still be noticed dead within
  // the bound (the soak's 20 s for a 15 s silence, here 800 ms for 600 ms).
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong: false });
  await new Promise((resolve) => wss.once('listening', resolve));
  t.after(() => {
    for (const connection of wss.clients) connection.terminate();
    return new Promise((resolve) => wss.close(resolve));
  });
  let stalledAt;
  wss.on('connection', (socket) => {
    if (stalledAt !== undefined) return;
    stalledAt = performance.now();
    setTimeout(() => socket.send('{"event":"inbox_changed"}'), 300);
  });
  const client = new Relayger({ server: `http://127.0.0.1:${wss.address().port}`, token: 'token' });
  t.after(() => client.disconnect());
  const log = new EventLog();
  const socket = quickSocket(client, '/v1/runtimes/r/socket', log);
  t.after(() => socket.close());
  assert.equal(await socket.connect(), true);
  const lost = await log.next('socket_disconnected', 10_000);
  const noticed = performance.now() - stalledAt;
  assert.match(lost.error, /answered (nothing|no ping)/);
  assert.ok(noticed < 800, `noticed ${noticed} ms after the stall began`);
});

test('the server answers the socket\'s pings: a quiet socket stays open', { timeout: 30_000 }, async (t) => {
  const client = await Relayger.fromProfile({ profile: 'agent', home: world.server.home });
  t.after(() => client.disconnect());
  const log = new EventLog();
  const socket = quickSocket(client, '/v1/socket', log);
  t.after(() => socket.close());
  assert.equal(await socket.connect(), true);
  // Several silences long, with nothing to signal: only pongs arrive.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  assert.deepEqual(log.named('socket_disconnected'), []);
});
