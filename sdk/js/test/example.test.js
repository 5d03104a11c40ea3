// The product page's SDK example (examples/sdk-worker.mjs, unchanged) runs
// against a real server and answers a question from its context and notes.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { SDK_DIR, befriend, cli, identity, listRuntimes, poll, replyTo, startServer } from './support.js';

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

test('the seed example answers "N context messages, M notes." and stops on SIGINT', { timeout: 60_000 }, async () => {
  const sender = await identity(server, 'sender', { agent: false, name: 'Sender' });
  const receiver = await identity(server, 'receiver', { name: 'Receiver' });
  const room = await befriend(server, sender, receiver);
  // The thread's root is older than the worker (`from: 'now'`); the thread
  // endpoint still reads it as context.
  const root = await cli(server.home, 'sender', 'send', receiver.number, 'report uploaded');

  const child = spawn(process.execPath, [join('examples', 'sdk-worker.mjs')], {
    cwd: SDK_DIR,
    env: { ...process.env, RELAYGER_HOME: server.home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    // `from: 'now'` starts after registration: wait until the runtime exists.
    const runtime = await poll(
      async () => (await listRuntimes(server, receiver)).find((r) => r.name === 'sdk-worker'),
      { what: `the sdk-worker runtime (output: ${output})` },
    );

    // A thread of two messages and one note for this room.
    await receiver.client.runtimes.putNote(runtime.id, room, 'decision', {
      version: 0,
      text: 'Decision from the last conversation',
      sourceMessageIds: [root.messageId],
    });
    const question = await cli(
      server.home, 'sender', 'send', receiver.number, 'What is the status?', '--ask', '--reply-to', root.messageId,
    );
    const reply = await replyTo(sender, question).catch(async (error) => {
      const state = await receiver.client.runtimes.get(runtime.id).catch((e) => e.message);
      const log = await receiver.client.runtimes.log(runtime.id).catch((e) => e.message);
      throw new Error(`${error.message}; runtime ${JSON.stringify(state)}; log ${JSON.stringify(log)}; output: ${output}`);
    });
    assert.equal(reply.text, '2 context messages, 1 notes.');
    assert.equal(reply.sender.number, receiver.number);

    // A question without a thread: one context message.
    const lone = await cli(server.home, 'sender', 'send', receiver.number, 'And now?', '--ask');
    assert.equal((await replyTo(sender, lone)).text, '1 context messages, 1 notes.');

    // The callback's reported usage is recorded as reported (zero), not unknown.
    const stats = await receiver.client.runtimes.stats(runtime.id);
    assert.deepEqual(stats.reported, { modelCalls: 0, inputTokens: 0, outputTokens: 0 });
    assert.equal(stats.unreportedAttempts, 0);
    assert.equal(stats.jobs.handled, 2);
  } finally {
    child.kill('SIGINT');
  }
  const { code } = await exited;
  assert.equal(code, 0, `the example exits cleanly on SIGINT; output: ${output}`);
});
