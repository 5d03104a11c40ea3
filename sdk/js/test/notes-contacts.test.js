// Runtime notes (read/write, and written atomically with a reply) and the
// worker's contact-request handling, against a real server.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Relayger, RelaygerError } from '../src/index.js';
import { RAW_REQUEST } from '../src/client.js';
import { befriend, cli, identity, replyTo, startServer, startWorker } from './support.js';

let server;
let asker;
let agent;
let room;

before(async () => {
  server = await startServer();
  asker = await identity(server, 'asker', { agent: false });
  agent = await identity(server, 'agent');
  room = await befriend(server, asker, agent);
});
after(() => server?.stop());

test('notes: create, list, update, stale versions refused', async (t) => {
  const runtime = await agent.client.runtimes.register({ name: 'memory', from: 'now' });
  const source = await asker.client.send({ conversationId: room, text: 'we chose plan B' });
  const created = await agent.client.runtimes.putNote(runtime.id, room, 'decision', {
    version: 0,
    text: 'Plan B',
    sourceMessageIds: [source.messageId],
  });
  assert.equal(created.version, 1);
  assert.deepEqual(created.sourceMessageIds, [source.messageId]);
  const updated = await agent.client.runtimes.putNote(runtime.id, room, 'decision', { version: 1, text: 'Plan B, then C' });
  assert.equal(updated.version, 2);
  await assert.rejects(
    agent.client.runtimes.putNote(runtime.id, room, 'decision', { version: 1, text: 'stale' }),
    (e) => e instanceof RelaygerError && e.code === 'version_conflict' && e.status === 409,
  );
  for (const key of ['a', 'b']) {
    await agent.client.runtimes.putNote(runtime.id, room, key, { version: 0, text: key });
  }
  const notes = await agent.client.runtimes.getNotes(runtime.id, room, { limit: 20 });
  assert.equal(notes.length, 3);
  assert.equal(notes.find((n) => n.key === 'decision').text, 'Plan B, then C');
  assert.equal((await agent.client.runtimes.getNotes(runtime.id, room, { limit: 2 })).length, 2);
  // Notes are private to the agent: the asker cannot read them.
  await assert.rejects(asker.client.runtimes.getNotes(runtime.id, room), (e) => e.code === 'not_found');
});

test('runtimes are named by name, id or a unique start of the id', async () => {
  const first = await agent.client.runtimes.register({ name: 'named-one', from: 'now' });
  const second = await agent.client.runtimes.register({ name: 'named-two', from: 'now' });
  assert.equal((await agent.client.runtimes.get('named-one')).id, first.id);
  assert.equal(await agent.client.runtimes.resolve(second.id), second.id);
  assert.equal(await agent.client.runtimes.resolve(second.id.slice(0, 30)), second.id);
  assert.deepEqual(await agent.client.runtimes.getNotes('named-two', room), []);
  assert.equal((await agent.client.runtimes.stats('named-two')).claims, 0);
  await assert.rejects(agent.client.runtimes.get('nobody'), (e) => e.code === 'not_found' && e.message.includes('named-one'));
  // UUIDv7 ids made moments apart share their start: that start is ambiguous.
  let prefix = '';
  while (first.id[prefix.length] === second.id[prefix.length]) prefix += first.id[prefix.length];
  assert.ok(prefix.length >= 4, `${first.id} ${second.id}`);
  await assert.rejects(
    agent.client.runtimes.stats(prefix),
    (e) => e.code === 'invalid_argument' && e.message.includes('named-one') && e.message.includes('named-two'),
  );
  await agent.client.runtimes.delete('named-one');
  await agent.client.runtimes.delete('named-two');
});

test('a note returned with the reply commits with it; a stale one rolls the reply back', { timeout: 60_000 }, async (t) => {
  const runtime = await agent.client.runtimes.register({ name: 'noting', from: 'now' });
  const { cancel, log, running } = await startWorker(t, agent.client, {
    name: 'noting',
    handler: ({ message }) => ({
      reply: `noted: ${message.text}`,
      note: {
        key: 'last',
        text: message.text,
        version: message.text === 'stale' ? 7 : 0,
        sourceMessageIds: [message.messageId],
      },
    }),
  });
  const first = await asker.client.send({ conversationId: room, text: 'remember this', ask: true });
  assert.equal((await replyTo(asker, first)).text, 'noted: remember this');
  const notes = await agent.client.runtimes.getNotes(runtime.id, room);
  assert.deepEqual(
    notes.map((n) => [n.key, n.text, n.sourceMessageIds]),
    [['last', 'remember this', [first.messageId]]],
  );

  const stale = await asker.client.send({ conversationId: room, text: 'stale', ask: true });
  const failed = await log.next((e) => e.event === 'failed' && e.messageId === stale.messageId);
  assert.equal(failed.error, 'version_conflict');
  const thread = await asker.client.getThread(room, stale.messageId);
  assert.deepEqual(thread.messages.map((m) => m.text), ['stale'], 'no reply was written');
  cancel.abort();
  await running;
});

test('acceptContacts accepts a new request at once; the requester is then answered', { timeout: 60_000 }, async (t) => {
  const bot = await identity(server, 'bot');
  const { cancel, log, running } = await startWorker(t, bot.client, {
    name: 'open-bot',
    acceptContacts: true,
    handler: ({ message }) => ({ reply: message.text }),
  });
  const visitor = await identity(server, 'visitor', { agent: false });
  await cli(server.home, 'visitor', 'contacts', 'request', bot.number);
  const accepted = await log.next('contact_accepted');
  assert.deepEqual(accepted, { event: 'contact_accepted', number: visitor.number });
  // The accept wakes the worker; its idle claim reports the count back at 0.
  // (Asking only after that claim also keeps clear of a server race in which
  // a message committed during a scan of its room is left unscanned.)
  await log.next((e) => e.event === 'contact_requests' && e.count === 0);
  const question = await visitor.client.send({ to: bot.number, text: 'echo me', ask: true });
  assert.equal((await replyTo(visitor, question)).text, 'echo me');
  cancel.abort();
  await running;
});

test('a request withdrawn while being accepted is a contact_error; the worker keeps running', { timeout: 60_000 }, async (t) => {
  const bot = await identity(server, 'bot2');
  const fickle = await identity(server, 'fickle', { agent: false });
  const steady = await identity(server, 'steady', { agent: false });
  const client = await Relayger.fromProfile({ profile: 'bot2', home: server.home });
  t.after(() => client.disconnect());
  // Withdraw the request between the worker listing it and accepting it.
  const raw = client[RAW_REQUEST].bind(client);
  let withdrawn = false;
  client[RAW_REQUEST] = async (method, path, options) => {
    const response = await raw(method, path, options);
    if (method === 'GET' && path === '/v1/contacts/requests' && !withdrawn) {
      withdrawn = true;
      await cli(server.home, 'fickle', 'contacts', 'withdraw', bot.number);
    }
    return response;
  };
  const { cancel, log, running } = await startWorker(t, client, {
    name: 'open-bot',
    acceptContacts: true,
    handler: ({ message }) => ({ reply: message.text }),
  });
  await cli(server.home, 'fickle', 'contacts', 'request', bot.number);
  const error = await log.next('contact_error');
  assert.equal(error.number, fickle.number);
  assert.equal(typeof error.code, 'string');
  await cli(server.home, 'steady', 'contacts', 'request', bot.number);
  assert.equal((await log.next('contact_accepted')).number, steady.number);
  cancel.abort();
  assert.equal((await running).reason, 'interrupted');
  client.disconnect();
});

test('a worker whose every slot is busy still accepts a new request at once', { timeout: 60_000 }, async (t) => {
  // As the Rust worker: a signal while every slot is busy sends one claim
  // (for one job; the server grants it only if a slot is free there), whose
  // answer carries the contact-request count. Without it nothing happened
  // until the long job ended.
  const bot = await identity(server, 'busy-bot');
  const regular = await identity(server, 'regular', { agent: false });
  await befriend(server, regular, bot);
  let release;
  const held = new Promise((resolve) => {
    release = resolve;
  });
  let running = 0;
  const worker = await startWorker(t, bot.client, {
    name: 'busy-bot',
    acceptContacts: true,
    policy: { concurrency: 1 },
    handler: async ({ signal }) => {
      running++;
      await Promise.race([held, new Promise((resolve) => signal.addEventListener('abort', resolve))]);
      running--;
      return { skip: 'released' };
    },
  });
  t.after(() => release());
  await regular.client.send({ to: bot.number, text: 'a long job', ask: true });
  await worker.log.next('claimed');
  assert.equal(running, 1, 'the only slot is busy');
  const newcomer = await identity(server, 'newcomer', { agent: false });
  await cli(server.home, 'newcomer', 'contacts', 'request', bot.number);
  const accepted = await worker.log.next('contact_accepted', 10_000);
  assert.deepEqual(accepted, { event: 'contact_accepted', number: newcomer.number });
  assert.equal(running, 1, 'accepted while the job still ran');
  assert.deepEqual(worker.log.named('skipped'), []);
  release();
  await worker.log.next('skipped');
  worker.cancel.abort();
  assert.equal((await worker.running).reason, 'interrupted');
});

test('without acceptContacts the count is reported once per change and nothing is accepted', { timeout: 60_000 }, async (t) => {
  const quiet = await identity(server, 'quiet');
  const { cancel, log, running } = await startWorker(t, quiet.client, {
    name: 'reporter',
    handler: () => ({ skip: 'nothing to say' }),
  });
  const caller = await identity(server, 'caller', { agent: false });
  await cli(server.home, 'caller', 'contacts', 'request', quiet.number);
  assert.deepEqual(await log.next('contact_requests'), { event: 'contact_requests', count: 1 });
  const pending = await quiet.client.contacts.requests();
  assert.deepEqual(pending.incoming.map((r) => r.number), [caller.number]);
  assert.deepEqual(log.named('contact_accepted'), []);

  // The owner (here: the SDK) answers; the next idle claim reports zero.
  const contact = await quiet.client.contacts.accept(caller.number);
  assert.equal(contact.number, caller.number);
  await log.next((e) => e.event === 'contact_requests' && e.count === 0);
  const question = await caller.client.send({ to: quiet.number, text: 'anyone?', ask: true });
  await log.next((e) => e.event === 'skipped' && e.messageId === question.messageId);
  assert.deepEqual(log.named('contact_requests').map((e) => e.count), [1, 0], 'once per change');
  cancel.abort();
  await running;
});

test('long lists: listRooms follows every page, and one page at a time gives next', async () => {
  const rooms = 55;
  const made = new Set();
  for (let i = 0; i < rooms; i += 1) {
    const created = await asker.client[RAW_REQUEST]('POST', '/v1/rooms', {
      body: { name: `paged ${i}`, members: [agent.number] },
    });
    made.add(created.body.id);
  }
  // More than one default page (50): everything, each room once.
  const all = await agent.client.listRooms();
  const ids = all.map((r) => r.id);
  assert.equal(new Set(ids).size, ids.length);
  for (const id of made) assert.ok(ids.includes(id), `room ${id} listed`);
  // Page by page with a small limit reaches the same rooms.
  const paged = [];
  let after;
  do {
    const page = await agent.client.listRoomsPage({ limit: 20, after });
    assert.ok(page.rooms.length <= 20);
    paged.push(...page.rooms.map((r) => r.id));
    after = page.next;
  } while (after);
  assert.deepEqual(paged, ids);
  await assert.rejects(agent.client.listRoomsPage({ limit: 0 }), (e) => e.code === 'invalid_argument' && e.status === 400);

  // Contact requests: one page of one, then its next.
  const lonely = await identity(server, 'lonely', { agent: false });
  const others = [await identity(server, 'p1', { agent: false }), await identity(server, 'p2', { agent: false })];
  for (const other of others) await other.client.contacts.request(lonely.number);
  const first = await lonely.client.contacts.requests({ limit: 1 });
  assert.equal(first.incoming.length, 1);
  assert.equal(first.count, 2, 'count is every incoming request');
  assert.ok(first.next, 'a next for the second request');
  const second = await lonely.client.contacts.requests({ limit: 1, after: first.next });
  assert.equal(second.incoming.length, 1);
  assert.equal(second.next, undefined);
  assert.notEqual(second.incoming[0].id, first.incoming[0].id);
  const whole = await lonely.client.contacts.requests();
  assert.equal(whole.incoming.length, 2);
});
