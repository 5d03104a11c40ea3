// The SDK calls that stand for the CLI's commands (register, agents create,
// rooms create/add/leave, contacts withdraw/block/unblock/remove, tokens
// create/list/revoke), against a real server; profiles the SDK saves are
// read back by the real CLI.

import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { after, before, test } from 'node:test';

import { Relayger, RelaygerError } from '../src/index.js';
import { befriend, cli, identity, startServer } from './support.js';

let server;

before(async () => {
  server = await startServer();
});
after(() => server?.stop());

/** Asserts that `promise` rejects with a RelaygerError of `code` and HTTP `status`. */
async function refused(promise, code, status) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof RelaygerError, `a RelaygerError, got ${error}`);
    assert.equal(error.code, code, error.message);
    assert.equal(error.status, status);
    return true;
  });
}

test('register: a person saved as a profile the CLI uses; an agent kept in memory', async () => {
  const made = await Relayger.register({ server: server.url, name: 'Sdk Person', saveAs: 'sdk-person', home: server.home });
  assert.equal(made.identity.kind, 'person');
  assert.equal(made.identity.displayName, 'Sdk Person');
  assert.equal(made.client.number, made.identity.number);
  assert.equal(made.client.publicKey, made.identity.publicKey, 'the public half of the generated pair was sent');
  assert.equal((await made.client.me()).id, made.identity.id);
  assert.equal((await stat(made.profilePath)).mode & 0o777, 0o600);
  // The CLI reads the profile the SDK wrote, and so does fromProfile.
  const whoami = await cli(server.home, 'sdk-person', 'whoami');
  assert.equal(whoami.number, made.identity.number);
  const loaded = await Relayger.fromProfile({ profile: 'sdk-person', home: server.home });
  assert.equal(loaded.publicKey, made.identity.publicKey);
  loaded.disconnect();

  // Profiles are never overwritten: refused before any identity is made.
  await refused(
    Relayger.register({ server: server.url, name: 'Again', saveAs: 'sdk-person', home: server.home }),
    'invalid_argument',
    undefined,
  );

  const agent = await Relayger.register({ server: server.url, name: 'Sdk Agent', agent: true });
  assert.equal(agent.identity.kind, 'agent');
  assert.equal(agent.profilePath, undefined);
  assert.equal(typeof agent.secretKey, 'string');
  // The secret key is all a client needs to seal: a sealed note to itself opens.
  const rebuilt = new Relayger({
    server: server.url,
    token: agent.token.secret,
    identityId: agent.identity.id,
    secretKey: agent.secretKey,
    publicKey: agent.identity.publicKey,
  });
  assert.equal((await rebuilt.me()).number, agent.identity.number);
  const own = await rebuilt.createRoom({ name: 'solo' });
  const sealed = await rebuilt.sendSealed({ conversationId: own.id, text: 'to myself' });
  assert.deepEqual(await agent.client.open(sealed), { text: 'to myself' });
  rebuilt.disconnect();

  // The server's refusal surfaces with its code.
  await refused(Relayger.register({ server: server.url, name: '' }), 'invalid_argument', 400);
  made.client.disconnect();
  agent.client.disconnect();
});

test('agents.create: a person makes an agent it owns; an agent cannot', async () => {
  const owner = await identity(server, 'owner', { agent: false });
  const made = await owner.client.agents.create({ name: 'Assistant', saveAs: 'assistant', home: server.home });
  assert.equal(made.identity.kind, 'agent');
  assert.equal(made.identity.ownerNumber, owner.number);
  assert.equal((await made.client.me()).ownerNumber, owner.number);
  const shown = await cli(server.home, 'assistant', 'whoami');
  assert.equal(shown.number, made.identity.number);
  assert.equal(shown.ownerNumber, owner.number);
  await refused(made.client.agents.create({ name: 'Grandchild' }), 'forbidden', 403);
  made.client.disconnect();
});

test('rooms: create with contacts, add a member, leave', async () => {
  const host = await identity(server, 'host', { agent: false });
  const guest = await identity(server, 'guest', { agent: false });
  const late = await identity(server, 'late', { agent: false });
  const stranger = await identity(server, 'stranger', { agent: false });
  await befriend(server, host, guest);
  await befriend(server, host, late);

  const room = await host.client.createRoom({ name: 'planning', members: [guest.number] });
  assert.equal(room.kind, 'group');
  assert.equal(room.name, 'planning');
  assert.deepEqual(room.members.map((m) => m.number).sort(), [host.number, guest.number].sort());

  const grown = await host.client.addMember(room.id, late.number);
  assert.deepEqual(grown.members.map((m) => m.number).sort(), [host.number, guest.number, late.number].sort());
  assert.ok((await late.client.listRooms()).some((r) => r.id === room.id), 'the added member sees the room');

  assert.deepEqual(await guest.client.leaveRoom(room.id), { ok: true });
  const after = await host.client.getRoom(room.id);
  assert.deepEqual(after.members.map((m) => m.number).sort(), [host.number, late.number].sort());
  await refused(guest.client.getRoom(room.id), 'not_found', 404);

  // Only contacts may be added; the refusal carries the server's code.
  await refused(host.client.addMember(room.id, stranger.number), 'forbidden', 403);
  assert.deepEqual(
    (await host.client.getRoom(room.id)).members.map((m) => m.number).sort(),
    [host.number, late.number].sort(),
    'the refused add changed nothing',
  );
  await refused(host.client.createRoom({ name: 'x', members: [stranger.number] }), 'forbidden', 403);
});

test('contacts: withdraw, block, unblock, remove', async () => {
  const alice = await identity(server, 'c-alice', { agent: false });
  const bob = await identity(server, 'c-bob', { agent: false });

  // Withdraw a pending request: it is gone from both sides.
  await alice.client.contacts.request(bob.number);
  const withdrawn = await alice.client.contacts.withdraw(bob.number);
  assert.equal(withdrawn.state, 'withdrawn');
  assert.equal(withdrawn.number, bob.number);
  assert.deepEqual((await bob.client.contacts.requests()).incoming, []);
  assert.deepEqual((await alice.client.contacts.requests()).outgoing, []);
  await refused(alice.client.contacts.withdraw(bob.number), 'not_found', 404);

  // Block: the blocked side's request is refused; unblock lets it through.
  assert.deepEqual(await bob.client.contacts.block(alice.number), { ok: true });
  await refused(alice.client.contacts.request(bob.number), 'forbidden', 403);
  assert.deepEqual((await bob.client.contacts.requests()).incoming, []);
  assert.deepEqual(await bob.client.contacts.unblock(alice.number), { ok: true });
  await alice.client.contacts.request(bob.number);
  const contact = await bob.client.contacts.accept(alice.number);
  assert.equal(contact.number, alice.number);

  // Remove: both lose the contact and the direct room.
  assert.deepEqual(await alice.client.contacts.remove(bob.number), { ok: true });
  assert.deepEqual(await alice.client.contacts.list(), []);
  assert.deepEqual(await bob.client.contacts.list(), []);
  await refused(bob.client.getRoom(contact.roomId), 'not_found', 404);
  await refused(alice.client.send({ conversationId: contact.roomId, text: 'still there?' }), 'not_found', 404);
});

test('contacts: list every page, or one page at a time', async () => {
  const hub = await identity(server, 'p-hub', { agent: false });
  const numbers = [];
  for (const name of ['p-one', 'p-two', 'p-three']) {
    const other = await identity(server, name, { agent: false });
    await other.client.contacts.request(hub.number);
    await hub.client.contacts.accept(other.number);
    numbers.push(other.number);
  }
  const all = await hub.client.contacts.list();
  assert.deepEqual(all.map((c) => c.number), numbers, 'in the order they became contacts');
  const first = await hub.client.contacts.listPage({ limit: 2 });
  assert.equal(first.contacts.length, 2);
  assert.ok(first.next, 'a next for the third contact');
  const second = await hub.client.contacts.listPage({ limit: 2, after: first.next });
  assert.deepEqual([...first.contacts, ...second.contacts].map((c) => c.number), numbers);
  assert.equal(second.next, undefined);
  await refused(hub.client.contacts.listPage({ limit: 501 }), 'invalid_argument', 400);
});

test('tokens: create (scoped, saved as a profile), list every page, revoke', async () => {
  const owner = await identity(server, 't-owner', { agent: false });
  const readOnly = await owner.client.tokens.create({ scopes: ['read'], label: 'reader' });
  assert.deepEqual(readOnly.scopes, ['read']);
  assert.equal(readOnly.label, 'reader');
  assert.equal(typeof readOnly.secret, 'string');
  const reader = new Relayger({ server: server.url, token: readOnly.secret });
  assert.equal((await reader.me()).number, owner.number);
  await refused(reader.contacts.request('100000000'), 'forbidden', 403);
  // Saving a token needs the key pair the profile keeps: refused before any token is made.
  await refused(reader.tokens.create({ scopes: ['read'], saveAs: 'no-keys', home: server.home }), 'invalid_argument', undefined);

  const copy = await owner.client.tokens.create({ scopes: ['read', 'write', 'contacts'], saveAs: 't-copy', home: server.home });
  const fromCopy = await Relayger.fromProfile({ profile: 't-copy', home: server.home });
  assert.equal(fromCopy.identityId, owner.id);
  assert.equal(fromCopy.publicKey, owner.client.publicKey, 'the copy keeps the key pair');
  const listedByCli = await cli(server.home, 't-copy', 'tokens', 'list');
  const cliTokens = Array.isArray(listedByCli) ? listedByCli : listedByCli.tokens;
  assert.equal(cliTokens.find((t) => t.current).id, copy.id, 'the CLI acts with the saved token');

  // Every page: the first token and the two made here (none for the refused
  // save); one page gives `next`.
  const all = await owner.client.tokens.list();
  assert.equal(all.length, 3);
  assert.deepEqual(new Set(all.map((t) => t.id)).size, 3);
  assert.ok(all.some((t) => t.id === readOnly.id && !t.current && t.secret === undefined));
  assert.equal(all.filter((t) => t.current).length, 1);
  const first = await owner.client.tokens.listPage({ limit: 2 });
  assert.equal(first.tokens.length, 2);
  assert.ok(first.next, 'a next for the third token');
  const second = await owner.client.tokens.listPage({ limit: 2, after: first.next });
  assert.deepEqual([...first.tokens, ...second.tokens].map((t) => t.id), all.map((t) => t.id));
  assert.equal(second.next, undefined);
  await refused(owner.client.tokens.listPage({ limit: 0 }), 'invalid_argument', 400);

  const revoked = await owner.client.tokens.revoke(readOnly.id);
  assert.equal(revoked.id, readOnly.id);
  assert.equal(typeof revoked.revokedAt, 'string');
  await assert.rejects(reader.me(), (error) => error instanceof RelaygerError && error.status === 401);
  await refused(owner.client.tokens.revoke('00000000-0000-7000-8000-000000000000'), 'not_found', 404);
  reader.disconnect();
  fromCopy.disconnect();
});
