// A module handler run by `relayger worker run --handler` imports the SDK,
// loads its own profile and answers privately with sendSealed; the asker
// opens the sealed reply with the CLI.
//
// The module runs in a Node worker thread whose environment has RELAYGER_*
// (and other credential variables) removed, so it cannot find the profile
// directory through RELAYGER_HOME: the directory is baked into the module
// file and passed as `home`, the documented way.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { CLI_BIN, EventLog, SDK_DIR, befriend, cli, identity, startServer, untilSignalled } from './support.js';

let server;
let moduleDir;
before(async () => {
  server = await startServer();
  moduleDir = await mkdtemp(join(tmpdir(), 'relayger-sdk-module-'));
});
after(async () => {
  await server?.stop();
  if (moduleDir) await rm(moduleDir, { recursive: true, force: true });
});

test('a --handler module loads its profile with the SDK and answers with sendSealed', { timeout: 90_000 }, async () => {
  const sender = await identity(server, 'sender', { agent: false, name: 'Sender' });
  const receiver = await identity(server, 'receiver', { name: 'Receiver' });
  const room = await befriend(server, sender, receiver);

  const sdkEntry = pathToFileURL(join(SDK_DIR, 'src', 'index.js')).href;
  const handlerFile = join(moduleDir, 'private-handler.mjs');
  await writeFile(
    handlerFile,
    `import { Relayger } from ${JSON.stringify(sdkEntry)};

export async function handle({ message, signal }) {
  // RELAYGER_HOME is not in this thread's environment: the profile
  // directory is given explicitly.
  const client = await Relayger.fromProfile({ profile: 'receiver', home: ${JSON.stringify(server.home)} });
  try {
    await client.sendSealed({
      conversationId: message.conversationId,
      text: 'private: ' + message.text,
      replyTo: message.messageId,
      signal,
    });
  } finally {
    client.disconnect();
  }
  return { skip: 'answered privately' + (process.env.RELAYGER_HOME === undefined ? '' : ' (RELAYGER_HOME visible)') };
}
`,
  );

  const child = spawn(
    CLI_BIN,
    ['--profile', 'receiver', '--json', 'worker', 'run', 'private-worker', '--from', 'now', '--handler', handlerFile],
    { env: { ...process.env, RELAYGER_HOME: server.home }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const log = new EventLog();
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      log.onEvent(JSON.parse(line));
    } catch {
      // not an event line
    }
  });
  try {
    await log.next('started', 30_000).catch((error) => {
      throw new Error(`${error.message}; stderr: ${stderr}`);
    });

    const question = await cli(server.home, 'sender', 'send', receiver.number, 'what is the secret?', '--ask');
    const done = await log
      .next((e) => ['skipped', 'replied', 'failed', 'dead_letter'].includes(e.event) && e.messageId === question.messageId, 45_000)
      .catch((error) => {
        throw new Error(`${error.message}; stderr: ${stderr}`);
      });
    assert.equal(done.event, 'skipped', `the module answered privately; event ${JSON.stringify(done)}; stderr: ${stderr}`);
    assert.equal(done.reason, 'answered privately');

    // The asker finds the sealed reply in the thread and opens it with the CLI.
    const reply = await untilSignalled(
      sender.client,
      async () => {
        const thread = await cli(server.home, 'sender', 'thread', room, question.messageId, '--limit', '100');
        return thread.messages.find((m) => m.replyTo === question.messageId);
      },
      { what: 'the sealed reply in the thread' },
    );
    assert.equal(reply.text, null, 'no plaintext on the server');
    assert.ok(reply.sealed, 'the reply is sealed');
    assert.equal(reply.sender.number, receiver.number);
    assert.equal(reply.opened?.text, 'private: what is the secret?');
    const shown = await cli(server.home, 'sender', 'message', room, reply.messageId);
    assert.equal(shown.opened.text, 'private: what is the secret?');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  }
  const { code } = await exited;
  assert.equal(code, 0, `the worker exits cleanly on SIGINT; stderr: ${stderr}`);
  assert.equal(log.events.at(-1)?.event, 'stopped');
});
