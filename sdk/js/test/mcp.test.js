// `relayger mcp` driven by the official MCP TypeScript SDK client, against a
// real server, with a real `worker run --builtin uppercase` answering.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { CLI_BIN, EventLog, befriend, cli, identity, startServer } from './support.js';

const TOOLS = [
  'whoami',
  'contacts_list',
  'contact_requests',
  'contact_accept',
  'contact_decline',
  'send',
  'ask_and_wait',
  'delivery',
  'cancel',
  'inbox',
  'ack',
  'message',
  'thread',
  'runtimes_list',
  'runtime_inspect',
  'runtime_stats',
  'runtime_log',
  'notes_list',
  'note_write',
  'dead_letters',
  'retry',
];

let server;
let asker;
let agent;
let other;
let room;
let otherRoom;
let worker;
const clients = [];

/** An MCP client session with `relayger --profile <profile> mcp` over stdio. */
async function connect(profile, home = server.home) {
  const transport = new StdioClientTransport({
    command: CLI_BIN,
    args: ['--profile', profile, 'mcp'],
    env: { ...process.env, RELAYGER_HOME: home },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'relayger-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** Calls a tool; resolves with its result (tool errors included). */
function call(client, name, args = {}, options) {
  return client.callTool({ name, arguments: args }, undefined, options);
}

/** The structured content of a successful call. */
async function ok(client, name, args) {
  const result = await call(client, name, args);
  assert.notEqual(result.isError, true, `${name} failed: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

/** Runs `worker run NAME --builtin uppercase` as `profile`; resolves once started. */
async function startWorker(profile, name) {
  const child = spawn(CLI_BIN, ['--profile', profile, '--json', 'worker', 'run', name, '--builtin', 'uppercase', '--from', 'now'], {
    env: { ...process.env, RELAYGER_HOME: server.home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const log = new EventLog();
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      log.onEvent(JSON.parse(line));
    } catch {
      // not an event line
    }
  });
  await log.next('started', 30_000).catch((error) => {
    throw new Error(`${error.message}; stderr: ${stderr}`);
  });
  return {
    log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
    },
  };
}

/** Resolves with the first notification `pred` accepts, recorded or future. */
class Notifications {
  constructor(client) {
    this.seen = [];
    this.waiters = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
      this.seen.push(notification.params.uri);
      for (const waiter of [...this.waiters]) {
        if (waiter.uri === notification.params.uri) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    });
  }

  /** Waits for an update of `uri` that comes after this call. */
  next(uri, timeoutMs = 15_000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no update of ${uri} within ${timeoutMs} ms; saw ${this.seen}`)), timeoutMs);
      this.waiters.push({
        uri,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }
}

before(async () => {
  server = await startServer();
  asker = await identity(server, 'asker', { agent: false });
  agent = await identity(server, 'agent');
  other = await identity(server, 'other', { agent: false });
  room = await befriend(server, asker, agent);
  otherRoom = await befriend(server, asker, other);
  worker = await startWorker('agent', 'replier');
});

after(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await worker?.stop();
  await server?.stop();
});

test('lists the tools, each with a description and an object input schema', async () => {
  const client = await connect('asker');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
  for (const tool of tools) {
    assert.ok(tool.description?.length > 10, `${tool.name} has a description`);
    assert.equal(tool.inputSchema.type, 'object', `${tool.name}'s input schema`);
  }
  const send = tools.find((t) => t.name === 'send');
  for (const field of ['to', 'roomId', 'text', 'ask', 'deadline', 'replyTo', 'sealed']) {
    assert.ok(send.inputSchema.properties[field], `send takes ${field}`);
  }
  assert.equal(tools.find((t) => t.name === 'inbox').annotations.readOnlyHint, true);
  assert.equal(send.annotations.readOnlyHint, undefined, 'send changes something');
  assert.equal(send.annotations.openWorldHint, true);
  const me = await ok(client, 'whoami');
  assert.equal(me.number, asker.number);
});

test('ask_and_wait gets the uppercase worker reply with progress; thread reads it, paged', async () => {
  const client = await connect('asker');
  const progress = [];
  const result = await call(
    client,
    'ask_and_wait',
    { to: agent.number, text: 'hello from mcp', timeoutSeconds: 60 },
    { onprogress: (p) => progress.push(p), timeout: 90_000 },
  );
  assert.notEqual(result.isError, true, JSON.stringify(result.content));
  const { question, reply } = result.structuredContent;
  assert.equal(question.conversationId, room);
  assert.equal(question.ask, true);
  assert.equal(reply.text, 'HELLO FROM MCP');
  assert.equal(reply.replyTo, question.messageId);
  assert.equal(reply.byRuntime, true);
  assert.ok(progress.length >= 1, 'at least one progress notification');
  assert.equal(progress[0].total, 60);
  assert.match(result.content[0].text, /^\[external data/);
  assert.match(result.content[0].text, /HELLO FROM MCP/);

  const thread = await ok(client, 'thread', { roomId: room, messageId: question.messageId });
  assert.deepEqual(
    thread.messages.map((m) => m.text),
    ['hello from mcp', 'HELLO FROM MCP'],
  );
  assert.equal(thread.next, null);
  const first = await ok(client, 'thread', { roomId: room, messageId: question.messageId, limit: 1, maxBytes: 4096 });
  assert.deepEqual(first.messages.map((m) => m.text), ['hello from mcp']);
  assert.equal(first.next, question.seq);
  const second = await ok(client, 'thread', { roomId: room, messageId: question.messageId, after: first.next });
  assert.deepEqual(second.messages.map((m) => m.text), ['HELLO FROM MCP']);
});

test('ask_and_wait without a reply in time returns the delivery: queued, nobody listening; the question stays sent', async () => {
  const client = await connect('asker');
  const result = await call(client, 'ask_and_wait', { to: other.number, text: 'anyone there?', timeoutSeconds: 1 });
  assert.notEqual(result.isError, true);
  assert.equal(result.structuredContent.outcome, 'timeout');
  assert.equal(result.structuredContent.delivery.state, 'queued');
  assert.equal(result.structuredContent.delivery.recipients[0].listeners, 0);
  const inbox = await cli(server.home, 'other', 'inbox');
  const questions = inbox.rooms.flatMap((r) => r.messages).filter((m) => m.text === 'anyone there?');
  assert.equal(questions.length, 1);
  assert.equal(questions[0].ask, true);
});

test('writes a note with a version and reads it back; a stale version is refused', async () => {
  const client = await connect('agent');
  const { runtimes } = await ok(client, 'runtimes_list');
  const runtime = runtimes.find((r) => r.name === 'replier');
  assert.ok(runtime, 'the worker registered its runtime');
  assert.equal((await ok(client, 'runtime_inspect', { runtimeId: runtime.id })).id, runtime.id);
  await ok(client, 'runtime_stats', { runtimeId: runtime.id });
  await ok(client, 'runtime_log', { runtimeId: runtime.id, limit: 5 });
  assert.deepEqual((await ok(client, 'dead_letters', { runtimeId: runtime.id })).jobs, []);
  const noJob = await call(client, 'retry', { runtimeId: runtime.id, jobId: '01900000-0000-7000-8000-000000000000' });
  assert.equal(noJob.isError, true);
  assert.equal(noJob.structuredContent.error.code, 'not_found');

  const write = (version, text) =>
    call(client, 'note_write', { runtimeId: runtime.id, roomId: room, key: 'decision', version, text });
  const created = await write(0, 'Plan B');
  assert.equal(created.structuredContent.version, 1);
  const updated = await write(1, 'Plan B, then C');
  assert.equal(updated.structuredContent.version, 2);
  const stale = await write(1, 'stale');
  assert.equal(stale.isError, true);
  assert.equal(stale.structuredContent.error.code, 'version_conflict');
  const { notes } = await ok(client, 'notes_list', { runtimeId: runtime.id, roomId: room });
  assert.deepEqual(
    notes.map((n) => [n.key, n.version, n.text]),
    [['decision', 2, 'Plan B, then C']],
  );
});

test('a subscribed inbox is updated when a message arrives, and contact requests likewise', async () => {
  const client = await connect('asker');
  const updates = new Notifications(client);
  const { resources } = await client.listResources();
  const uris = resources.map((r) => r.uri);
  for (const uri of ['relayger://inbox', 'relayger://contacts/requests', `relayger://rooms/${room}`, `relayger://rooms/${otherRoom}`]) {
    assert.ok(uris.includes(uri), `${uri} is listed`);
  }
  await client.subscribeResource({ uri: 'relayger://inbox' });
  await client.subscribeResource({ uri: `relayger://rooms/${otherRoom}` });
  await client.subscribeResource({ uri: 'relayger://contacts/requests' });

  const inboxUpdated = updates.next('relayger://inbox');
  const roomUpdated = updates.next(`relayger://rooms/${otherRoom}`);
  const sent = await cli(server.home, 'other', 'send', asker.number, 'wake up, assistant');
  await Promise.all([inboxUpdated, roomUpdated]);
  const inbox = await client.readResource({ uri: 'relayger://inbox' });
  const rooms = JSON.parse(inbox.contents[0].text).rooms;
  const entry = rooms.find((r) => r.roomId === otherRoom);
  assert.ok(entry.messages.some((m) => m.messageId === sent.messageId && m.text === 'wake up, assistant'));
  assert.match(inbox.contents[1].text, /^\[external data/);
  const roomResource = JSON.parse((await client.readResource({ uri: `relayger://rooms/${otherRoom}` })).contents[0].text);
  assert.equal(roomResource.room.id, otherRoom);
  assert.ok(roomResource.unacknowledged.some((m) => m.messageId === sent.messageId));

  const requestsUpdated = updates.next('relayger://contacts/requests');
  const stranger = await identity(server, 'stranger', { agent: false });
  await cli(server.home, 'stranger', 'contacts', 'request', asker.number);
  await requestsUpdated;
  const requests = await ok(client, 'contact_requests');
  assert.deepEqual(requests.incoming.map((r) => r.number), [stranger.number]);
  const declined = await ok(client, 'contact_decline', { number: stranger.number });
  assert.equal(declined.number, stranger.number);
  const friend = await identity(server, 'friend', { agent: false });
  const friendRequested = updates.next('relayger://contacts/requests');
  await cli(server.home, 'friend', 'contacts', 'request', asker.number);
  await friendRequested;
  const contact = await ok(client, 'contact_accept', { number: friend.number });
  assert.equal(contact.number, friend.number);
  const { contacts } = await ok(client, 'contacts_list');
  assert.ok(contacts.some((c) => c.number === friend.number && c.roomId === contact.roomId));
  assert.ok(!contacts.some((c) => c.number === stranger.number));

  // Acknowledged, the message leaves the inbox.
  const acked = await ok(client, 'ack', { roomId: otherRoom, seq: sent.seq });
  assert.equal(acked.ackedSeq, sent.seq);
  const view = await ok(client, 'inbox');
  assert.ok(!view.rooms.some((r) => r.roomId === otherRoom));
  await client.unsubscribeResource({ uri: `relayger://rooms/${otherRoom}` });
});

test("a room-restricted token's tools cannot reach other rooms", async () => {
  await cli(server.home, 'asker', 'tokens', 'create', '--scopes', 'read,write', '--room', room, '--save-as', 'asker-limited');
  const client = await connect('asker-limited');
  const allowed = await ok(client, 'send', { roomId: room, text: 'inside my room' });
  assert.equal(allowed.conversationId, room);

  const before = await cli(server.home, 'other', 'rooms', 'list');
  const refused = await call(client, 'send', { roomId: otherRoom, text: 'outside my room' });
  assert.equal(refused.isError, true);
  assert.equal(refused.structuredContent.error.code, 'not_found');
  assert.match(refused.content[0].text, /^error: not_found: /);
  const byNumber = await call(client, 'send', { to: other.number, text: 'outside my room' });
  assert.equal(byNumber.structuredContent.error.code, 'not_found');
  const thread = await call(client, 'thread', { roomId: otherRoom, messageId: allowed.messageId });
  assert.equal(thread.structuredContent.error.code, 'not_found');
  assert.deepEqual(await cli(server.home, 'other', 'rooms', 'list'), before, 'nothing reached the other room');

  const inbox = await ok(client, 'inbox');
  assert.ok(inbox.rooms.every((r) => r.roomId === room), 'the inbox shows only the allowed room');
  const uris = (await client.listResources()).resources.map((r) => r.uri);
  assert.ok(uris.includes(`relayger://rooms/${room}`));
  assert.ok(!uris.includes(`relayger://rooms/${otherRoom}`), 'the other room is not listed');
  await assert.rejects(client.readResource({ uri: `relayger://rooms/${otherRoom}` }), (error) => {
    assert.equal(error.data.error.code, 'not_found');
    return true;
  });
  await assert.rejects(client.subscribeResource({ uri: `relayger://rooms/${otherRoom}` }), (error) => {
    assert.equal(error.data.error.code, 'not_found');
    return true;
  });
  await client.subscribeResource({ uri: `relayger://rooms/${room}` });
});

test('a bad argument gives a tool error with the code and changes nothing', async () => {
  const client = await connect('asker');
  const before = await cli(server.home, 'asker', 'rooms', 'list');
  const cases = [
    { roomId: 'not-a-uuid', text: 'x' },
    { to: agent.number, text: 'x', deadline: '2030-01-01T00:00:00Z' },
    { to: agent.number, text: 'x', ask: true, deadline: 'tomorrow' },
    { to: agent.number, roomId: room, text: 'x' },
    { to: agent.number, text: 42 },
    { to: agent.number, text: 'x', colour: 'blue' },
  ];
  for (const args of cases) {
    const result = await call(client, 'send', args);
    assert.equal(result.isError, true, `${JSON.stringify(args)} is refused`);
    assert.equal(result.structuredContent.error.code, 'invalid_argument', JSON.stringify(args));
    assert.match(result.content[0].text, /^error: invalid_argument: /);
  }
  const wait = await call(client, 'ask_and_wait', { to: agent.number, text: 'x', timeoutSeconds: 0 });
  assert.equal(wait.structuredContent.error.code, 'invalid_argument');
  const ack = await call(client, 'ack', { roomId: room, seq: 'seven' });
  assert.equal(ack.structuredContent.error.code, 'invalid_argument');
  assert.deepEqual(await cli(server.home, 'asker', 'rooms', 'list'), before, 'no message was sent');
});

test('sealed: send seals locally, message opens it locally', async () => {
  const client = await connect('asker');
  const sent = await ok(client, 'send', { to: agent.number, text: 'the secret plan', sealed: true });
  assert.equal(sent.text, null, 'no plaintext reaches the server');
  assert.ok(sent.sealed);
  const agentClient = await connect('agent');
  const shown = await call(agentClient, 'message', { roomId: room, messageId: sent.messageId });
  assert.equal(shown.structuredContent.opened.text, 'the secret plan');
  assert.match(shown.content[0].text, /\[sealed\] the secret plan/);
  // An identity outside the room cannot read it at all.
  const otherClient = await connect('other');
  const denied = await call(otherClient, 'message', { roomId: room, messageId: sent.messageId });
  assert.equal(denied.isError, true);

  // A member who joined after a sealed message sees it as one they cannot open, and why.
  const group = await cli(server.home, 'asker', 'rooms', 'create', '--name', 'sealed-group', '--member', agent.number);
  const before = await ok(client, 'send', { roomId: group.id, text: 'before you joined', sealed: true });
  await cli(server.home, 'asker', 'rooms', 'add', group.id, other.number);
  const late = await call(otherClient, 'message', { roomId: group.id, messageId: before.messageId });
  assert.notEqual(late.isError, true, JSON.stringify(late.content));
  assert.equal(late.structuredContent.opened, undefined);
  assert.equal(late.structuredContent.openError, 'not_a_recipient');
  assert.match(late.content[0].text, /\[sealed, cannot open: not_a_recipient\]/);
});

test('--http serves Streamable HTTP on loopback and refuses other addresses', async () => {
  const refused = await cli(server.home, 'asker', 'mcp', '--http', '0.0.0.0:0').then(
    () => assert.fail('a non-loopback address was served'),
    (error) => error,
  );
  assert.equal(JSON.parse(refused.stderr).error.code, 'invalid_argument');

  const child = spawn(CLI_BIN, ['--profile', 'asker', 'mcp', '--http', '127.0.0.1:0'], {
    env: { ...process.env, RELAYGER_HOME: server.home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const url = await new Promise((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const match = /relayger mcp listening on (http:\/\/\S+)/.exec(line);
        if (match) resolve(match[1]);
      });
      child.once('exit', (code) => reject(new Error(`relayger mcp --http exited (${code})`)));
    });
    // A web page cannot drive it: any Origin is refused, as is a Host that is not loopback.
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'page', version: '1' } },
    };
    const post = (headers) =>
      new Promise((resolve, reject) => {
        const request = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (response) => {
          response.resume();
          resolve(response.statusCode);
        });
        request.once('error', reject);
        request.end(JSON.stringify(initialize));
      });
    assert.equal(await post({ origin: 'https://evil.example' }), 403);
    assert.equal(await post({ host: 'evil.example' }), 403);

    const client = new Client({ name: 'relayger-test-http', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    try {
      const { tools } = await client.listTools();
      assert.equal(tools.length, TOOLS.length);
      const me = await ok(client, 'whoami');
      assert.equal(me.number, asker.number);
      // Subscriptions wake an HTTP session too.
      const updates = new Notifications(client);
      await client.subscribeResource({ uri: `relayger://rooms/${room}` });
      const updated = updates.next(`relayger://rooms/${room}`);
      await cli(server.home, 'agent', 'send', asker.number, 'over http');
      await updated;
    } finally {
      await client.close();
    }
  } finally {
    child.kill('SIGINT');
    await exited;
  }
});

test('a subscription survives a server restart: the socket is opened again and the update still comes', { timeout: 90_000 }, async (t) => {
  const own = await startServer();
  t.after(() => own.stop());
  const reader = await identity(own, 'reader', { agent: false });
  const writer = await identity(own, 'writer', { agent: false });
  await befriend(own, reader, writer);
  const client = await connect('reader', own.home);
  const updates = new Notifications(client);
  await client.subscribeResource({ uri: 'relayger://inbox' });
  await own.restart();
  const updated = updates.next('relayger://inbox', 60_000);
  await cli(own.home, 'writer', 'send', reader.number, 'after the restart');
  await updated;
  const inbox = await ok(client, 'inbox');
  assert.ok(inbox.rooms.some((r) => r.messages.some((m) => m.text === 'after the restart')));
});
