// Type-checked only (`tsc --noEmit`, run by test/types.test.js), never run:
// every SDK call used as the README and examples use it, with its result
// read as the server returns it, so a missing or wrong declaration in
// index.d.ts fails the suite. The `@ts-expect-error` lines are misuses the
// declarations must refuse (an unused one is itself an error).

import {
  Relayger,
  RelaygerError,
  SealedOpenError,
  profileDir,
  runWorker,
  uuidv7,
  type AskOutcome,
  type CreatedToken,
  type Delivery,
  type DeliveryState,
  type Done,
  type MessageEnvelope,
  type Registration,
  type Room,
  type TokenInfo,
  type WorkerEvent,
} from '@relayger/sdk';

export async function everyCall(server: string, home: string): Promise<void> {
  // Identities: register (person, agent, saved or not), profiles, agents.
  const person: Registration = await Relayger.register({ server, name: 'Alice', saveAs: 'alice', home });
  const agentOnly = await Relayger.register({ server, name: 'Bot', agent: true, invite: 'code' });
  const secret: string = agentOnly.secretKey;
  const path: string | undefined = person.profilePath;
  const token: CreatedToken = person.token;
  const client: Relayger = person.client;
  const loaded = await Relayger.fromProfile({ profile: 'alice', home, requestTimeoutMs: 5000, allowInsecureHttp: false });
  const direct = new Relayger({ server, token: token.secret, identityId: person.identity.id, secretKey: secret });
  const assistant = await client.agents.create({ name: 'Assistant', saveAs: 'assistant', home });
  const owner: string | undefined = assistant.identity.ownerNumber;
  const me = await client.me();
  const other = await client.identity(me.number);
  const kind: 'person' | 'agent' = other.kind;

  // Contacts.
  await client.contacts.request('100000002');
  const contacts = await client.contacts.list();
  const roomOfContact: string = contacts[0].roomId;
  const contactPage = await client.contacts.listPage({ limit: 2 });
  const nextContact: string | undefined = contactPage.next;
  const pending = await client.contacts.requests({ as: owner });
  const count: number = pending.count;
  const page = await client.contacts.requests({ limit: 1, after: pending.next });
  await client.contacts.accept(page.incoming[0].number, { as: owner });
  await client.contacts.decline(100000003);
  const withdrawn = await client.contacts.withdraw('100000002');
  const state: 'pending' | 'accepted' | 'declined' | 'withdrawn' = withdrawn.state;
  const blocked: Done = await client.contacts.block('100000004');
  const unblocked: boolean = (await client.contacts.unblock('100000004')).ok;
  await client.contacts.remove(100000002);

  // Rooms and messages.
  const room: Room = await client.createRoom({ name: 'planning', members: ['100000002', 100000003] });
  const grown: Room = await client.addMember(room.id, '100000004');
  const rooms: Room[] = await client.listRooms();
  const roomPage = await client.listRoomsPage({ limit: 20, after: rooms[0].id });
  const nextRoom: string | undefined = roomPage.next;
  const fetched = await client.getRoom(grown.id);
  const sent = await client.send({ to: '100000002', text: 'What is the status?', ask: true, deadline: new Date() });
  const sealed = await client.sendSealed({ conversationId: fetched.id, schema: 'x', data: { a: 1 }, replyTo: sent.messageId });
  const opened = await client.open(sealed);
  const message = await client.getMessage(sent.conversationId, sent.messageId);
  const thread = await client.getThread(message.conversationId, message.messageId, { limit: 5, maxBytes: 4096, after: 0 });
  const threadNext: number | null = thread.next;
  const history = await client.getHistory(message.conversationId, { before: 10, limit: 5 });
  const older: number | null = history.prev;
  const newer: number | null = (await client.getHistory(message.conversationId, { after: older ?? 0 })).next;
  const inbox = await client.inbox({ limit: 100 });
  const acked: number = (await client.ack(inbox.rooms[0].roomId, inbox.rooms[0].lastSeq)).ackedSeq;
  const left: Done = await client.leaveRoom(room.id, { signal: AbortSignal.timeout(1000) });

  // What became of a question: read, canceled, or waited for.
  const delivery: Delivery = await client.delivery(sent.conversationId, sent.messageId);
  const deliveryState: DeliveryState = delivery.state;
  const firstRecipient = delivery.recipients[0];
  const why: string | undefined = firstRecipient.reason;
  const replyId: string | undefined = firstRecipient.replyMessageId;
  const listening: number = firstRecipient.listeners + firstRecipient.attempts;
  const canceled: boolean = (await client.cancel(sent.conversationId, sent.messageId)).canceled;
  const asked: AskOutcome = await client.send({ to: '100000002', text: 'Ready?', ask: true, wait: { timeoutMs: 20_000 } });
  const answer: string | null | undefined = asked.reply?.text;
  const ended: DeliveryState = asked.delivery.state;
  const question: string = asked.question.messageId;
  const sealedAsk = await client.sendSealed({ to: '100000002', text: 'Ready?', ask: true, wait: true });
  const sealedReply = sealedAsk.reply === null ? null : await client.open(sealedAsk.reply);

  // Tokens.
  const reader: CreatedToken = await client.tokens.create({ scopes: ['read'], roomIds: [room.id], label: 'reader' });
  await client.tokens.create({ scopes: ['read', 'write', 'contacts'], saveAs: 'alice-copy', home });
  const tokens: TokenInfo[] = await client.tokens.list();
  const current: boolean = tokens[0].current;
  const tokenPage = await client.tokens.listPage({ limit: 2, after: reader.id });
  const nextToken: string | undefined = tokenPage.next;
  const revoked: string | undefined = (await client.tokens.revoke(reader.id)).revokedAt;

  // Runtimes (what tools and tests use) and the worker, as the example does.
  const runtime = await assistant.client.runtimes.register({ name: 'sdk-worker', from: 'now', policy: { triggers: ['questions'] } });
  const runtimes = await assistant.client.runtimes.list();
  const inspected = await assistant.client.runtimes.get(runtimes[0].id);
  await assistant.client.runtimes.configure(runtime.id, { version: inspected.version, policy: { concurrency: 2 } });
  const claim = await assistant.client.runtimes.claim(runtime.id, { maxJobs: 1, handlerTimeoutMs: 1000 });
  const job = claim.jobs[0];
  await assistant.client.runtimes.heartbeat(runtime.id, job.jobId, { owner: job.owner, version: job.version });
  const finished = await assistant.client.runtimes.finish(runtime.id, job.jobId, {
    owner: job.owner,
    version: job.version,
    result: { reply: 'done', usage: { modelCalls: 1, inputTokens: 2, outputTokens: 3 } },
  });
  const outcome: string = finished.outcome;
  await assistant.client.runtimes.release(runtime.id, job.jobId, { owner: job.owner, version: job.version });
  await assistant.client.runtimes.retry(runtime.id, job.jobId);
  const dead = await assistant.client.runtimes.deadLetters(runtime.id);
  const log = await assistant.client.runtimes.log(runtime.id, { limit: 10 });
  const stats = await assistant.client.runtimes.stats(runtime.id);
  const notes = await assistant.client.runtimes.getNotes(runtime.id, room.id, { limit: 2 });
  const note = await assistant.client.runtimes.putNote(runtime.id, room.id, 'decision', { version: 0, text: 'Plan B' });
  await assistant.client.runtimes.delete(runtime.id);
  const cancel = new AbortController();
  const events: WorkerEvent[] = [];
  const stopped = await runWorker(assistant.client, {
    name: 'sdk-worker',
    from: 'now',
    signal: cancel.signal,
    acceptContacts: true,
    onEvent: (event) => events.push(event),
    handler: async ({ message: incoming, runtimeId, signal, jobKey, opened: content }) => {
      signal.throwIfAborted();
      const context = await assistant.client.getThread(incoming.conversationId, incoming.messageId, { limit: 5 });
      const kept = await assistant.client.runtimes.getNotes(runtimeId, incoming.conversationId, { limit: 2 });
      if (content === undefined) return { skip: `no content for ${jobKey}` };
      return { reply: `${context.messages.length} context messages, ${kept.length} notes.` };
    },
  });
  const reason: 'interrupted' = stopped.reason;

  try {
    await client.me();
  } catch (error) {
    if (error instanceof SealedOpenError) console.log(error.reason);
    else if (error instanceof RelaygerError) console.log(error.code, error.status, error.details);
  }
  client.disconnect();
  const closed: boolean = client.closed;
  console.log(path, owner, kind, roomOfContact, nextContact, count, state, blocked, unblocked, nextRoom, opened, threadNext, newer);
  console.log(acked, left, current, nextToken, revoked, outcome, dead, log, stats, notes, note, reason, closed);
  console.log(loaded, direct, agentOnly, profileDir(), uuidv7());
  console.log(deliveryState, why, replyId, listening, canceled, answer, ended, question, sealedReply);
}

export async function misuses(client: Relayger): Promise<void> {
  // @ts-expect-error register needs a server and a name
  await Relayger.register({ name: 'no server' });
  // @ts-expect-error scopes are read, write, contacts
  await client.tokens.create({ scopes: ['admin'] });
  // @ts-expect-error a room needs a name
  await client.createRoom({ members: ['100000002'] });
  // @ts-expect-error block takes the number to block
  await client.contacts.block();
  // @ts-expect-error revoke answers a TokenInfo, not a Done
  const done: Done = await client.tokens.revoke('id');
  // @ts-expect-error tokens.list returns the tokens, not a page
  const next: string = (await client.tokens.list()).next;
  // @ts-expect-error an agent is created with a name
  await client.agents.create({ saveAs: 'x' });
  // @ts-expect-error leaveRoom names the room
  await client.leaveRoom();
  // @ts-expect-error a send that waits resolves with an AskOutcome, not the envelope
  const envelope: MessageEnvelope = await client.send({ to: '100000002', text: 'Ready?', ask: true, wait: true });
  // @ts-expect-error cancel names the question's room and id
  await client.cancel('room');
  console.log(done, next, envelope);
}
