// Profile files as docs/profiles.md describes them (no server needed; the
// name rule is compared with the real `relayger` CLI's).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Relayger, RelaygerError, profileDir } from '../src/index.js';
import { CLI_BIN } from './support.js';

let dir;
const profile = {
  version: 1,
  server: 'http://127.0.0.1:7070/',
  tokenId: '01a236e5-a87c-71df-b7a6-4c76e69f910c',
  token: 'rlg_secret',
  identityId: '01a236e5-a87a-7634-b7aa-a191cebf1d83',
  number: '100000001',
  kind: 'agent',
  displayName: 'Receiver',
  ownerNumber: '100000000',
  publicKey: 'LePf1WGcaFqUNCtkx+2iMNlwX/vSNBQAfys6Ek1BEWY=',
  secretKey: 'yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=',
  someFutureKey: true,
};

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relayger-sdk-profile-'));
  await writeFile(join(dir, 'receiver.json'), JSON.stringify(profile));
  await writeFile(join(dir, 'v2.json'), JSON.stringify({ ...profile, version: 2 }));
  await writeFile(join(dir, 'mismatch.json'), JSON.stringify({ ...profile, publicKey: 'yiVSnwaM9yAJgv9sFvNqTm3yPPzuZJ2xpmWCFGi2I2E=' }));
});
after(() => rm(dir, { recursive: true, force: true }));

test('the directory is $RELAYGER_HOME, else the config directory + /relayger', () => {
  assert.equal(profileDir({ RELAYGER_HOME: '/somewhere' }), '/somewhere');
  if (process.platform === 'linux') {
    assert.equal(profileDir({ RELAYGER_HOME: '', XDG_CONFIG_HOME: '/xdg' }), '/xdg/relayger');
    assert.equal(profileDir({ XDG_CONFIG_HOME: 'relative' }), join(homedir(), '.config', 'relayger'));
    assert.equal(profileDir({}), join(homedir(), '.config', 'relayger'));
  }
});

test('a profile loads; unknown keys are ignored; the token is not shown', async () => {
  const client = await Relayger.fromProfile({ profile: 'receiver', home: dir });
  assert.equal(client.server, 'http://127.0.0.1:7070');
  assert.equal(client.number, '100000001');
  assert.equal(client.identityId, profile.identityId);
  assert.equal(client.publicKey, profile.publicKey);
  assert.ok(!JSON.stringify(client).includes('rlg_secret'));
  client.disconnect();
  await assert.rejects(client.me(), (e) => e.code === 'client_closed');
});

test('RELAYGER_HOME and RELAYGER_PROFILE are honoured', async () => {
  const saved = { home: process.env.RELAYGER_HOME, profile: process.env.RELAYGER_PROFILE };
  process.env.RELAYGER_HOME = dir;
  process.env.RELAYGER_PROFILE = 'receiver';
  try {
    const client = await Relayger.fromProfile();
    assert.equal(client.profile, 'receiver');
  } finally {
    for (const [key, value] of [['RELAYGER_HOME', saved.home], ['RELAYGER_PROFILE', saved.profile]]) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
});

test('the profile chosen with `relayger profiles use` is the default; RELAYGER_PROFILE wins', async () => {
  const saved = process.env.RELAYGER_PROFILE;
  delete process.env.RELAYGER_PROFILE;
  try {
    await writeFile(join(dir, 'current'), 'receiver\n');
    const client = await Relayger.fromProfile({ home: dir });
    assert.equal(client.profile, 'receiver');
    process.env.RELAYGER_PROFILE = 'v2';
    await assert.rejects(Relayger.fromProfile({ home: dir }), (e) => e.code === 'invalid_argument');
  } finally {
    await rm(join(dir, 'current'), { force: true });
    if (saved === undefined) delete process.env.RELAYGER_PROFILE;
    else process.env.RELAYGER_PROFILE = saved;
  }
});

test('missing, invalid and mismatched profiles are refused with invalid_argument', async () => {
  const refused = (options, pattern) =>
    assert.rejects(Relayger.fromProfile({ home: dir, ...options }), (e) => {
      assert.ok(e instanceof RelaygerError);
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, pattern);
      return true;
    });
  await refused({ profile: 'nobody' }, /profile `nobody` does not exist in .*relayger --profile nobody register/);
  await refused({ profile: '../x' }, /not a valid profile name/);
  await refused({ profile: 'v2' }, /format version 2/);
  await refused({ profile: 'mismatch' }, /not the public half/);
});

test('profile names: the SDK and the Rust client refuse the same ones', async (t) => {
  const empty = await mkdtemp(join(tmpdir(), 'relayger-sdk-names-'));
  t.after(() => rm(empty, { recursive: true, force: true }));
  const env = { ...process.env, RELAYGER_HOME: empty };
  delete env.RELAYGER_PROFILE;
  const rust = (name) =>
    new Promise((resolveRun) => {
      execFile(CLI_BIN, [`--profile=${name}`, 'whoami'], { env }, (error, stdout, stderr) => resolveRun(stderr));
    });
  const verdict = (text) =>
    text.includes('is not a valid profile name') ? 'invalid' : text.includes('does not exist') ? 'missing' : text;
  const names = ['work.agent_2-b', '-dash-first', '.hidden', '...', 'p'.repeat(64), 'p'.repeat(65), '', '.', '..', 'a/b', 'has space', 'émile', 'tab\tname'];
  const verdicts = new Set();
  for (const name of names) {
    const js = await Relayger.fromProfile({ home: empty, profile: name }).then(
      () => 'loaded',
      (error) => error.message,
    );
    assert.equal(verdict(js), verdict(await rust(name)), JSON.stringify(name));
    verdicts.add(verdict(js));
  }
  assert.deepEqual([...verdicts].sort(), ['invalid', 'missing']);
});

test('a token goes over plain http:// only to this machine unless allowed', () => {
  const saved = process.env.RELAYGER_ALLOW_INSECURE_HTTP;
  delete process.env.RELAYGER_ALLOW_INSECURE_HTTP;
  try {
    for (const server of ['https://relay.example.com', 'http://127.0.0.1:7070', 'http://localhost:7070', 'http://[::1]:7070']) {
      assert.equal(new Relayger({ server, token: 'rlg_x' }).server, server);
    }
    for (const server of ['http://relay.example.com', 'http://10.0.0.5:7070', 'http://0.0.0.0:7070', 'http://localhost@relay.example.com']) {
      assert.throws(
        () => new Relayger({ server, token: 'rlg_x' }),
        (error) => error instanceof RelaygerError && error.code === 'invalid_argument' && /allowInsecureHttp/.test(error.message),
        server,
      );
      assert.equal(new Relayger({ server, token: 'rlg_x', allowInsecureHttp: true }).server, server);
    }
    process.env.RELAYGER_ALLOW_INSECURE_HTTP = '1';
    assert.equal(new Relayger({ server: 'http://relay.example.com', token: 'rlg_x' }).server, 'http://relay.example.com');
  } finally {
    if (saved === undefined) delete process.env.RELAYGER_ALLOW_INSECURE_HTTP;
    else process.env.RELAYGER_ALLOW_INSECURE_HTTP = saved;
  }
});
