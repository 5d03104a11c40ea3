// Test support: a real relayger-server (with its own PostgreSQL) on a free
// port, identities created with the real `relayger` CLI in a throwaway
// RELAYGER_HOME, and small waiting helpers that never sleep blindly.

import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Relayger, runWorker } from '../src/index.js';
import { OPEN_SOCKET } from '../src/client.js';

export const SDK_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = resolve(SDK_DIR, '..', '..');

function binary(name) {
  const target = process.env.CARGO_TARGET_DIR
    ? isAbsolute(process.env.CARGO_TARGET_DIR)
      ? process.env.CARGO_TARGET_DIR
      : resolve(REPO_ROOT, process.env.CARGO_TARGET_DIR)
    : join(REPO_ROOT, 'target');
  const path = join(target, 'debug', process.platform === 'win32' ? `${name}.exe` : name);
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: build the binaries first with \`cargo build --workspace --bins\``);
  }
  return path;
}

export const SERVER_BIN = binary('relayger-server');
export const CLI_BIN = binary('relayger');

/**
 * Starts relayger-server on 127.0.0.1:0 with a fresh data directory and
 * resolves once it prints its listening line. `restart()` stops it and
 * starts it again on the same address and data; `stop()` sends SIGINT,
 * waits for the process to exit and removes the directory.
 */
export async function startServer({ leaseMs } = {}) {
  const base = await mkdtemp(join(tmpdir(), 'relayger-sdk-'));
  // The self-managed PostgreSQL may run as another user (when root): it
  // must be able to reach its data directory.
  await chmod(base, 0o755);
  const dataDir = join(base, 'data');
  await mkdir(dataDir, { mode: 0o755 });
  await chmod(dataDir, 0o755);
  const server = { home: join(base, 'home'), leaseMs, url: null, process: null };
  const launch = async (listen) => {
    const args = ['--listen', listen, '--data-dir', dataDir];
    if (leaseMs) args.push('--lease-ms', String(leaseMs));
    const child = spawn(SERVER_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr = (stderr + chunk).slice(-8000);
    });
    const exited = new Promise((resolveExit) => child.once('exit', (code, signal) => resolveExit({ code, signal })));
    server.url = await new Promise((resolveUrl, reject) => {
      const lines = createInterface({ input: child.stdout });
      lines.on('line', (line) => {
        const match = /relayger-server listening on (http:\/\/\S+)/.exec(line);
        if (match) resolveUrl(match[1]);
      });
      exited.then(({ code, signal }) =>
        reject(new Error(`relayger-server exited (${code ?? signal}) before listening:\n${stderr}`)),
      );
    });
    server.process = { child, exited };
  };
  const halt = async () => {
    const { child, exited } = server.process;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
    await exited;
  };
  await launch('127.0.0.1:0');
  server.restart = async () => {
    await halt();
    await launch(new URL(server.url).host);
  };
  // Runs one SQL statement on the server's own database with `psql`, as a
  // test standing in for a server that rewrites what it stores.
  server.sql = async (statement) => {
    const password = (await readFile(join(dataDir, 'pg-password'), 'utf8')).trim();
    const pid = await readFile(join(dataDir, 'postgresql', 'data', 'postmaster.pid'), 'utf8');
    const port = pid.split('\n')[3].trim();
    const url = `postgres://postgres:${password}@127.0.0.1:${port}/relayger`;
    return new Promise((resolveRun, reject) => {
      execFile('psql', [url, '-v', 'ON_ERROR_STOP=1', '-qAtc', statement], (error, stdout, stderr) =>
        error ? reject(new Error(`psql failed: ${stderr || error.message}`)) : resolveRun(stdout.trim()),
      );
    });
  };
  server.stop = async () => {
    await halt();
    await rm(base, { recursive: true, force: true });
  };
  return server;
}

/**
 * A server (with leases of `leaseMs`), an asker and an agent who are
 * contacts, made before the file's tests and stopped after them:
 * `world.server`, `world.asker`, `world.agent`, `world.room`, and
 * `world.ask(text)`, a question from the asker.
 */
export function contactsWorld({ leaseMs } = {}) {
  const world = {
    ask: (text) => world.asker.client.send({ conversationId: world.room, text, ask: true }),
  };
  before(async () => {
    world.server = await startServer({ leaseMs });
    world.asker = await identity(world.server, 'asker', { agent: false });
    world.agent = await identity(world.server, 'agent');
    world.room = await befriend(world.server, world.asker, world.agent);
  });
  after(() => world.server?.stop());
  return world;
}

/** Runs the real CLI with `--json` against profiles in `home`; resolves with parsed JSON. */
export function cli(home, profile, ...args) {
  return new Promise((resolveRun, reject) => {
    execFile(
      CLI_BIN,
      ['--profile', profile, '--json', ...args],
      { env: { ...process.env, RELAYGER_HOME: home }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) {
          error.stdout = stdout;
          error.stderr = stderr;
          error.message = `relayger ${args.join(' ')} failed: ${stderr || error.message}`;
          reject(error);
          return;
        }
        try {
          resolveRun(stdout.trim() === '' ? null : JSON.parse(stdout));
        } catch {
          resolveRun(stdout);
        }
      },
    );
  });
}

/** Registers `profile` with the CLI and returns an SDK client for it. */
export async function identity(server, profile, { agent = true, name = profile } = {}) {
  const args = ['register', '--server', server.url, '--name', name];
  if (agent) args.push('--agent');
  const registered = await cli(server.home, profile, ...args);
  const client = await Relayger.fromProfile({ profile, home: server.home });
  return { profile, number: registered.identity.number, id: registered.identity.id, client };
}

/** Makes `a` and `b` contacts; resolves with their direct room id. */
export async function befriend(server, a, b) {
  await cli(server.home, a.profile, 'contacts', 'request', b.number);
  const contact = await cli(server.home, b.profile, 'contacts', 'accept', a.number);
  return contact.roomId;
}

/**
 * The runtimes of `who`, as `relayger --json runtimes list` shows them, or
 * `GET /v1/runtimes` while the CLI has no `runtimes` command yet.
 */
export async function listRuntimes(server, who) {
  try {
    const listed = await cli(server.home, who.profile, 'runtimes', 'list');
    return Array.isArray(listed) ? listed : listed.runtimes;
  } catch (error) {
    if (!/unrecognized subcommand/.test(error.stderr ?? '')) throw error;
    return who.client.runtimes.list();
  }
}

/** Resolves `fn()`'s first truthy value, re-checking on every identity-socket signal of `client`. */
export async function untilSignalled(client, fn, { timeoutMs = 15_000, what = 'condition' } = {}) {
  const socket = client[OPEN_SOCKET]('/v1/socket');
  try {
    await new Promise((resolveOpen, reject) => {
      socket.once('open', resolveOpen);
      socket.once('error', reject);
    });
    let wake;
    socket.on('message', () => wake?.());
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const signalled = new Promise((r) => {
        wake = r;
      });
      const value = await fn();
      if (value) return value;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      let timer;
      await Promise.race([signalled, new Promise((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
    }
  } finally {
    socket.terminate();
  }
}

/** The runtime reply to `question` (an envelope), once it lands. */
export function replyTo(asker, question, options) {
  return untilSignalled(
    asker.client,
    async () => {
      const thread = await asker.client.getThread(question.conversationId, question.messageId, { limit: 100 });
      return thread.messages.find((m) => m.replyTo === question.messageId && m.byRuntime);
    },
    { what: `a reply to "${question.text}"`, ...options },
  );
}

/**
 * Records worker events; `next(pred)` resolves with the first recorded or
 * future event matching `pred` (an event name or a function).
 */
export class EventLog {
  constructor() {
    this.events = [];
    this.waiters = [];
    this.onEvent = (event) => {
      this.events.push(event);
      for (const waiter of [...this.waiters]) {
        if (waiter.match(event)) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve(event);
        }
      }
    };
  }

  named(name) {
    return this.events.filter((e) => e.event === name);
  }

  next(pred, timeoutMs = 15_000) {
    const match = typeof pred === 'string' ? (e) => e.event === pred : pred;
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolveEvent, reject) => {
      const waiter = { match, resolve: resolveEvent };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`no event matching ${pred} within ${timeoutMs} ms; got ${JSON.stringify(this.events)}`));
      }, timeoutMs);
      waiter.resolve = (event) => {
        clearTimeout(timer);
        resolveEvent(event);
      };
      this.waiters.push(waiter);
    });
  }
}

/** Resolves with `fn()`'s first truthy value, checking every `intervalMs`. */
/**
 * Starts `runWorker(client, options)` (from `now` unless told otherwise)
 * with an EventLog and an abort that also fires when the test ends;
 * resolves with `{ cancel, log, running }` once the worker reports
 * `started`.
 */
export async function startWorker(t, client, options) {
  const cancel = new AbortController();
  t.after(() => cancel.abort());
  const log = new EventLog();
  const running = runWorker(client, { from: 'now', ...options, signal: cancel.signal, onEvent: log.onEvent });
  await log.next('started');
  return { cancel, log, running };
}

export async function poll(fn, { timeoutMs = 15_000, intervalMs = 100, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
