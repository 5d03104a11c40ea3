// The shared wire fixtures (relayger-core/fixtures/*.json), the same files
// relayger-core's unit tests read. Every file names its `kind`; a kind this
// file has no reader for fails, so a fixture cannot be added for one
// language only by accident. Kinds whose rules live in Rust are read here
// through what the SDK does with them, against a real server: policies are
// sent as given, a worker.json's context limits are the limits of the
// thread and notes routes the SDK reads, and a process's response line
// ends in the same result check as the SDK's.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, test } from 'node:test';

import { claimWhenJobEnds, nextClaim } from '../src/claim-pacing.js';
import { checkResult } from '../src/result.js';
import { deriveKeyPair, keyPairFromBase64, open, seal, sealContext } from '../src/sealed.js';
import {
  CONTACT_REQUESTS_HEADER,
  RUNTIME_CHANGES_PARAM,
  SOCKET_FRAMES,
  SOCKET_PROTOCOL,
  SOCKET_STATES,
  STOP_REASONS,
  TOKEN_PROTOCOL_PREFIX,
  WORKER_EVENTS,
  socketFrameKind,
} from '../src/wire.js';
import { FIXTURES_DIR, readFixture } from './fixture-files.js';
import { befriend, identity, startServer } from './support.js';

/** Whether `actual` holds everything `expected` says (objects by key). */
function contains(actual, expected) {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected)) {
    return (
      actual !== null &&
      typeof actual === 'object' &&
      Object.entries(expected).every(([key, value]) => key in actual && contains(actual[key], value))
    );
  }
  try {
    assert.deepStrictEqual(actual, expected);
    return true;
  } catch {
    return false;
  }
}

/** Checks one case against `outcome`: `{ ok: parsed }` or `{ code }`. */
function checkCase(file, c, outcome) {
  const name = `${file}: ${c.name}`;
  if (c.valid) {
    assert.ok('ok' in outcome, `${name}: refused with ${outcome.code}`);
    if ('expect' in c) assert.ok(contains(outcome.ok, c.expect), `${name}: ${JSON.stringify(outcome.ok)}`);
  } else {
    assert.ok(!('ok' in outcome), `${name}: accepted`);
    assert.equal(outcome.code, c.error, name);
  }
}

/** What the SDK can say about an event object without a schema. */
function eventProblem(event) {
  if (!WORKER_EVENTS.includes(event?.event)) return 'unknown_event';
  // Fields are camelCase; the enumerated values are the Rust enums' names.
  if (Object.keys(event).some((key) => key.includes('_'))) return 'invalid_event';
  if (event.event === 'stopped' && !STOP_REASONS.includes(event.reason)) return 'invalid_event';
  if (event.event === 'started' && !SOCKET_STATES.includes(event.socket)) return 'invalid_event';
  return null;
}

async function checkSealedVectors(doc) {
  const alice = await deriveKeyPair(new Uint8Array(32).fill(parseInt(doc.alice.seedByte, 16)));
  const bob = await deriveKeyPair(new Uint8Array(32).fill(parseInt(doc.bob.seedByte, 16)));
  const b64 = (bytes) => Buffer.from(bytes).toString('base64');
  for (const [who, keys] of [
    ['alice', alice],
    ['bob', bob],
  ]) {
    assert.equal(b64(keys.secret), doc[who].secret, `${who} secret`);
    assert.equal(b64(keys.public), doc[who].public, `${who} public`);
    assert.deepEqual(keyPairFromBase64(doc[who].secret).public, keys.public, `${who} from its secret`);
  }
  const seedOf = (who) => new Uint8Array(32).fill(parseInt(doc.ephemeralSeedBytes[who], 16));
  for (const c of doc.cases) {
    const ids = { roomId: doc.roomId, messageId: doc.messageId, senderId: doc.alice.id, recipientId: doc.bob.id };
    assert.equal(Buffer.from(sealContext({ ...ids, ...c.binding, version: c.version })).toString('hex'), c.infoForBob, c.name);
    const payload = await seal({
      content: doc.content,
      roomId: doc.roomId,
      messageId: doc.messageId,
      sender: { id: doc.alice.id, keyPair: alice },
      recipients: [
        { id: doc.bob.id, publicKey: bob.public },
        { id: doc.alice.id, publicKey: alice.public },
      ],
      ephemeralSeeds: { [doc.bob.id]: seedOf('bob'), [doc.alice.id]: seedOf('alice') },
      ...c.binding,
      version: c.version,
    });
    assert.deepEqual(payload, c.payload, c.name);
    const envelope = {
      conversationId: doc.roomId,
      messageId: doc.messageId,
      sender: { id: doc.alice.id },
      sealed: c.payload,
      ...c.binding,
    };
    for (const [id, keyPair] of [
      [doc.bob.id, bob],
      [doc.alice.id, alice],
    ]) {
      assert.deepEqual(await open({ envelope, me: { id, keyPair }, senderPublicKey: alice.public }), doc.content, c.name);
    }
  }
}

/** The claim pacing cases, against the SDK's copy of core's rule. */
function checkClaimPacing(doc, file) {
  const at = (text) => (text === null ? null : Date.parse(text));
  for (const c of doc.nextClaim) {
    const answer = { ...c.answer, retryAt: at(c.answer.retryAt), serverDate: at(c.answer.serverDate) };
    const pacing = {
      localNow: at(c.pacing.localNow),
      retryStreak: c.pacing.retryStreak,
      previousDue: at(c.pacing.previousDue),
      fallbackMs: doc.fallbackMs,
    };
    let expected;
    if (c.expect === 'onSignal') expected = { onSignal: true };
    else if ('now' in c.expect) expected = { now: true, due: at(c.expect.now) };
    else expected = { afterMs: c.expect.afterMs };
    assert.deepEqual(nextClaim(answer, pacing), expected, `${file}: ${c.name}`);
  }
  for (const c of doc.claimWhenJobEnds) {
    assert.equal(claimWhenJobEnds(c.lastClaimLeftWork, c.jobWasFinal), c.claim, `${file}: ${JSON.stringify(c)}`);
  }
}

const NOTES_KEPT = 30;

// A real server, an agent befriended with a person, a question in their
// room and a runtime of the agent: made on first use, once.
let world;
function serverWorld() {
  world ??= (async () => {
    const server = await startServer();
    const asker = await identity(server, 'fixture-asker', { agent: false });
    const agent = await identity(server, 'fixture-agent');
    const room = await befriend(server, asker, agent);
    const question = await asker.client.send({ conversationId: room, text: 'a question', ask: true });
    const runtime = await agent.client.runtimes.register({ name: 'fixture-reader', from: 'now' });
    // More notes than any notes limit a worker.json may ask for.
    for (let i = 0; i < NOTES_KEPT; i += 1) {
      await agent.client.runtimes.putNote(runtime.id, room, `fixture-${i}`, { version: 0, text: `note ${i}` });
    }
    return { server, agent, room, question, runtime };
  })();
  return world;
}
after(async () => {
  if (world) (await world).server.stop();
});

/** `{ ok: value }` or `{ code, status, message }` of an SDK call. */
function settle(promise) {
  return promise.then(
    (ok) => ({ ok }),
    (error) => ({ code: error.code, status: error.status, message: error.message }),
  );
}

/**
 * Policies: the SDK sends them as given and the server parses them, so each
 * case goes to the server through `runtimes.register`. A refused one is a
 * 400 naming the field at fault. Cases given as raw text (bad JSON, a
 * repeated key) cannot be a JavaScript value and stay the Rust reader's.
 */
async function checkPolicies(doc, file) {
  const { agent } = await serverWorld();
  let sent = 0;
  for (const [index, c] of doc.cases.entries()) {
    if (!('input' in c)) continue;
    sent += 1;
    const name = `${file}: ${c.name}`;
    const outcome = await settle(agent.client.runtimes.register({ name: `policy-${index}`, from: 'now', policy: c.input }));
    if (c.valid) {
      assert.ok('ok' in outcome, `${name}: refused with ${outcome.code}: ${outcome.message}`);
      assert.ok(contains(outcome.ok.policy, c.expect ?? {}), `${name}: ${JSON.stringify(outcome.ok.policy)}`);
      // Runtimes per agent are few: each valid case gives its one back.
      await agent.client.runtimes.delete(outcome.ok.id);
    } else {
      assert.ok(!('ok' in outcome), `${name}: accepted`);
      assert.equal(outcome.status, 400, `${name}: ${outcome.code}: ${outcome.message}`);
      assert.ok(outcome.message.includes(c.field), `${name}: \`${outcome.message}\` names ${c.field}`);
    }
  }
  assert.ok(sent > 0, `${file}: no case a JavaScript value can carry`);
}

/**
 * worker.json: the Rust worker loads it; what the SDK shares with it are
 * the `context` limits, which are those of the thread and notes routes the
 * SDK reads (`getThread`, `runtimes.getNotes`). Every case that is valid or
 * refused for a thread or notes limit reads with those limits: a valid
 * limit is honoured (all of a notes limit, with more notes kept than any
 * may ask for), a refused thread limit is a 400 from the route, and a
 * refused notes limit is one the route does not honour (it clamps the page
 * rather than refusing). The rest of the file (executable, env, unknown
 * fields) is the Rust reader's alone.
 */
async function checkProcessConfigs(doc, file) {
  const { agent, room, question, runtime } = await serverWorld();
  let read = 0;
  for (const c of doc.cases) {
    const context = c.input?.context;
    if (context === null || typeof context !== 'object' || Array.isArray(context)) continue;
    if (!c.valid && !/^context\.(thread|notes)\./.test(c.field)) continue;
    const name = `${file}: ${c.name}`;
    assert.ok(context.thread || context.notes, `${name}: reads nothing`);
    read += 1;
    if (context.thread) {
      const outcome = await settle(agent.client.getThread(room, question.messageId, context.thread));
      if (c.valid || !c.field.startsWith('context.thread.')) {
        assert.ok('ok' in outcome, `${name}: the thread route refused: ${outcome.message}`);
      } else {
        assert.equal(outcome.status, 400, `${name}: ${JSON.stringify(outcome)}`);
        assert.equal(outcome.code, 'invalid_argument', name);
      }
    }
    if (context.notes) {
      const notes = await agent.client.runtimes.getNotes(runtime.id, room, context.notes);
      const asked = context.notes.limit;
      if (c.valid || !c.field.startsWith('context.notes.')) {
        if (asked !== undefined) assert.equal(notes.length, asked, `${name}: the notes route gave ${notes.length}`);
      } else {
        assert.notEqual(notes.length, asked, `${name}: the notes route honoured a limit worker.json refuses`);
      }
    }
  }
  assert.ok(read > 0, `${file}: no case with context limits`);
}

// The process ABI's framing codes: one line of at most `maxBytes`, JSON.
// They are the Rust worker's alone (the SDK reads no process output).
const FRAMING_CODES = new Set(['empty_output', 'extra_lines', 'invalid_json', 'response_too_large']);

/**
 * A process's response line: once framed (the Rust worker's part), the
 * result is checked by the same rules as a Node module's, so every case
 * not decided by the framing must agree with the SDK's `checkResult`.
 */
function checkProcessResponses(doc, file) {
  let checked = 0;
  for (const c of doc.cases) {
    if (!c.valid && FRAMING_CODES.has(c.error)) continue;
    const line = c.stdout.replace(/\r?\n$/, '');
    assert.ok(!line.includes('\n') && line.length <= doc.maxBytes, `${file}: ${c.name}: one line within maxBytes`);
    const result = checkResult(JSON.parse(line));
    checkCase(file, c, result.invalid ? { code: result.code } : { ok: result.result });
    checked += 1;
  }
  assert.ok(checked > 0, `${file}: no case past the framing`);
}

const READERS = {
  names(doc) {
    assert.equal(doc.contactRequestsHeader, CONTACT_REQUESTS_HEADER);
    assert.equal(doc.socketProtocol, SOCKET_PROTOCOL);
    assert.equal(doc.tokenProtocolPrefix, TOKEN_PROTOCOL_PREFIX);
    assert.equal(doc.runtimeChangesParam, RUNTIME_CHANGES_PARAM);
    assert.deepEqual(doc.workerEvents, [...WORKER_EVENTS]);
    assert.deepEqual(doc.socketFrames, [...SOCKET_FRAMES]);
  },
  finish_result(doc, file) {
    for (const c of doc.cases) {
      const checked = checkResult(c.input);
      checkCase(file, c, checked.invalid ? { code: checked.code } : { ok: checked.result });
    }
  },
  worker_event(doc, file) {
    for (const c of doc.cases) {
      const problem = eventProblem(c.input);
      checkCase(file, c, problem ? { code: problem } : { ok: c.input });
    }
  },
  socket_frame(doc, file) {
    for (const c of doc.cases) {
      const kind = socketFrameKind(JSON.stringify(c.input));
      checkCase(file, c, kind ? { ok: kind } : { code: 'unknown_frame' });
    }
  },
  claim_pacing: checkClaimPacing,
  sealed_vector: checkSealedVectors,
  policy: checkPolicies,
  process_config: checkProcessConfigs,
  process_response: checkProcessResponses,
};

test('every shared fixture file holds on the JavaScript side', { timeout: 120_000 }, async () => {
  const files = readdirSync(FIXTURES_DIR).sort();
  assert.ok(files.length > 0, FIXTURES_DIR);
  const kinds = new Set();
  for (const file of files) {
    assert.match(file, /\.json$/, 'fixtures are JSON files');
    const doc = readFixture(file);
    assert.equal(typeof doc.about, 'string', `${file}: says what it expects`);
    kinds.add(doc.kind);
    const reader = READERS[doc.kind];
    assert.ok(reader, `${file}: no JavaScript reader for fixture kind \`${doc.kind}\``);
    await reader(doc, file);
  }
  // Every reader here has its fixture (none silently went away).
  assert.deepEqual([...kinds].sort(), Object.keys(READERS).sort());
});
