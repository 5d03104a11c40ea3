// The HTTP/WebSocket client: one method per route the SDK needs, sealing
// and opening with the profile's key, and a `disconnect` that ends every
// request and socket the client started.

import WebSocket from 'ws';

import { sendAndWait, waitTimeoutMs } from './answer-wait.js';
import { RelaygerError, SealedOpenError, abortError } from './errors.js';
import { checkedServer, exchange } from './http.js';
import { checkProfileFree, defaultProfileName, loadProfile, profileDir, saveProfile } from './profile.js';
import { generateKeyPair, keyPairFromBase64, open as openSealed, parsePublicKey, seal } from './sealed.js';
import { everyPage, uuidv7 } from './util.js';

/** Internal: the raw request (status, headers, body) for the worker loop. */
export const RAW_REQUEST = Symbol('relayger.rawRequest');
/** Internal: a WebSocket the client tracks and closes on disconnect. */
export const OPEN_SOCKET = Symbol('relayger.openSocket');

const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

const UUID_PATTERN = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const MIN_ID_PREFIX = 4;

/** The id of the runtime `input` names: an exact name, else a unique start of an id. */
function resolveRuntime(input, runtimes) {
  const text = input.trim();
  const describe = (r) => `${r.name} (${r.id})`;
  const named = runtimes.find((r) => r.name === text);
  if (named) return named.id;
  const prefix = text.toLowerCase();
  const matches = prefix.length >= MIN_ID_PREFIX && /^[0-9a-f-]+$/.test(prefix)
    ? runtimes.filter((r) => r.id.startsWith(prefix))
    : [];
  if (matches.length === 1) return matches[0].id;
  if (matches.length > 1) {
    throw new RelaygerError(
      'invalid_argument',
      `\`${text}\` matches ${matches.length} runtimes: ${matches.map(describe).join(', ')}; give the name or more of the id`,
      { details: { candidates: matches.map((r) => ({ id: r.id, name: r.name })) } },
    );
  }
  const known = runtimes.length ? `; this agent has ${runtimes.map(describe).join(', ')}` : '; this agent has no runtimes';
  throw new RelaygerError('not_found', `no runtime named or with id \`${text}\`${known}`);
}

function segment(value, what) {
  if (value === undefined || value === null || value === '') {
    throw new RelaygerError('invalid_argument', `${what} is required`);
  }
  return encodeURIComponent(String(value));
}

const messagePath = (conversationId, messageId) =>
  `/v1/rooms/${segment(conversationId, 'conversationId')}/messages/${segment(messageId, 'messageId')}`;

/**
 * The result of registering an identity (`Relayger.register`) or creating
 * an agent (`client.agents.create`): a client for it, and what a profile
 * keeps, saved as profile `saveAs` when given (the key pair exists nowhere
 * else: keep `secretKey` or save a profile).
 */
async function registered(response, { server, keyPair, saveAs, home, requestTimeoutMs }) {
  const { identity, token } = response;
  let profilePath;
  if (saveAs !== undefined) {
    try {
      profilePath = await saveProfile(saveAs, home, {
        server,
        tokenId: token.id,
        token: token.secret,
        identityId: identity.id,
        number: identity.number,
        kind: identity.kind,
        displayName: identity.displayName,
        ownerNumber: identity.ownerNumber,
        keyPair,
      });
    } catch (error) {
      throw new RelaygerError(
        error instanceof RelaygerError ? error.code : 'internal',
        `identity ${identity.number} was created but its profile could not be saved, so its key is lost: ${error.message}`,
        { cause: error },
      );
    }
  }
  const client = new Relayger({
    server,
    token: token.secret,
    identityId: identity.id,
    number: identity.number,
    kind: identity.kind,
    displayName: identity.displayName,
    keyPair,
    profile: saveAs,
    requestTimeoutMs,
    // The server already passed the token rule for the registration.
    allowInsecureHttp: true,
  });
  const result = { client, identity, token, secretKey: Buffer.from(keyPair.secret).toString('base64') };
  if (profilePath !== undefined) result.profilePath = profilePath;
  return result;
}

function deadlineText(deadline) {
  if (deadline === undefined || deadline === null) return undefined;
  if (deadline instanceof Date) return deadline.toISOString();
  return String(deadline);
}

/** A client for one identity on one server. */
export class Relayger {
  #token;
  #keyPair;
  #timeoutMs;
  #closed = false;
  #shutdown = new AbortController();
  #sockets = new Set();
  #senderKeys = new Map();

  /**
   * @param {object} options
   * @param {string} options.server the server's base URL
   * @param {string} options.token a bearer token
   * @param {string} [options.identityId] the identity's id (needed for sealing/opening)
   * @param {string} [options.secretKey] base64 X25519 secret key (needed for sealing/opening)
   * @param {string} [options.publicKey] base64 X25519 public key; checked against secretKey
   * @param {string} [options.number]
   * @param {string} [options.kind]
   * @param {string} [options.displayName]
   * @param {string} [options.profile] the profile's name, for messages
   * @param {number} [options.requestTimeoutMs] per HTTP request (default 30000)
   * @param {boolean} [options.allowInsecureHttp] send the token over plain http:// to a
   *   host that is not this machine (default: refused, unless RELAYGER_ALLOW_INSECURE_HTTP=1)
   */
  constructor(options) {
    const { server, token } = options ?? {};
    const base = checkedServer(server, options?.allowInsecureHttp);
    if (typeof token !== 'string' || token === '') {
      throw new RelaygerError('invalid_argument', '`token` is required');
    }
    this.server = base;
    this.#token = token;
    this.identityId = options.identityId?.toLowerCase();
    this.number = options.number;
    this.kind = options.kind;
    this.displayName = options.displayName;
    this.profile = options.profile;
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (options.keyPair) {
      this.#keyPair = options.keyPair;
    } else if (options.secretKey !== undefined) {
      try {
        this.#keyPair = keyPairFromBase64(options.secretKey, options.publicKey);
      } catch (error) {
        throw new RelaygerError('invalid_argument', `invalid key pair: ${error.message}`);
      }
    }
    this.publicKey = this.#keyPair ? Buffer.from(this.#keyPair.public).toString('base64') : undefined;

    const contactPage = (opts) =>
      this.#get('/v1/contacts', { ...opts, query: { after: opts.after, limit: opts.limit } });
    this.contacts = Object.freeze({
      // Every contact, following each page's `next`.
      list: async (opts = {}) => everyPage((after) => contactPage({ ...opts, after, limit: undefined }), 'contacts'),
      listPage: (opts = {}) => contactPage(opts),
      // Every page, following `next`; with `after` or `limit`, that one page.
      requests: async (opts = {}) => {
        const page = (after, limit) =>
          this.#get('/v1/contacts/requests', { ...opts, query: { as: opts.as, after, limit } });
        if (opts.after !== undefined || opts.limit !== undefined) return page(opts.after, opts.limit);
        const all = await page();
        while (all.next) {
          const more = await page(all.next);
          all.incoming.push(...more.incoming);
          all.outgoing.push(...more.outgoing);
          all.count = more.count;
          all.next = more.next;
        }
        delete all.next;
        return all;
      },
      request: async (number, opts) => this.#post('/v1/contacts/requests', { number: String(number) }, opts),
      accept: async (number, opts = {}) =>
        this.#post(`/v1/contacts/requests/${segment(number, 'number')}/accept`, { as: opts.as }, opts),
      decline: async (number, opts = {}) =>
        this.#post(`/v1/contacts/requests/${segment(number, 'number')}/decline`, { as: opts.as }, opts),
      withdraw: async (number, opts) => this.#request('DELETE', `/v1/contacts/requests/${segment(number, 'number')}`, opts),
      block: async (number, opts) => this.#post(`/v1/contacts/${segment(number, 'number')}/block`, undefined, opts),
      unblock: async (number, opts) => this.#request('DELETE', `/v1/contacts/${segment(number, 'number')}/block`, opts),
      remove: async (number, opts) => this.#request('DELETE', `/v1/contacts/${segment(number, 'number')}`, opts),
    });

    this.agents = Object.freeze({
      // A new agent owned by this person, with its own key pair and token.
      create: async ({ name, saveAs, home, signal } = {}) => {
        const dir = home ?? profileDir();
        if (saveAs !== undefined) await checkProfileFree(saveAs, dir);
        const keyPair = generateKeyPair();
        const response = await this.#post(
          '/v1/agents',
          { name, publicKey: Buffer.from(keyPair.public).toString('base64') },
          { signal },
        );
        return registered(response, {
          server: this.server,
          keyPair,
          saveAs,
          home: dir,
          requestTimeoutMs: this.#timeoutMs,
        });
      },
    });

    const tokenPage = (opts = {}) => this.#get('/v1/tokens', { ...opts, query: { after: opts.after, limit: opts.limit } });
    this.tokens = Object.freeze({
      // A new token of this identity; with `saveAs`, a copy of this
      // identity's profile holding it (same identity and keys).
      create: async ({ scopes, roomIds, label, saveAs, home, signal } = {}) => {
        const dir = home ?? profileDir();
        let me;
        if (saveAs !== undefined) {
          this.#requireKeys();
          await checkProfileFree(saveAs, dir);
          me = await this.me({ signal });
        }
        const created = await this.#post('/v1/tokens', { scopes, roomIds, label }, { signal });
        if (me !== undefined) {
          await saveProfile(saveAs, dir, {
            server: this.server,
            tokenId: created.id,
            token: created.secret,
            identityId: me.id,
            number: me.number,
            kind: me.kind,
            displayName: me.displayName,
            ownerNumber: me.ownerNumber,
            keyPair: this.#keyPair,
          });
        }
        return created;
      },
      // Every token (newest first), following each page's `next`.
      list: async (opts = {}) => everyPage((after) => tokenPage({ ...opts, after, limit: undefined }), 'tokens'),
      listPage: tokenPage,
      revoke: async (id, opts) => this.#request('DELETE', `/v1/tokens/${segment(id, 'tokenId')}`, opts),
    });

    // A runtime is named by its id, its name or a unique start of its id
    // (the same rule as the CLI's); only a non-id costs a list call.
    const resolve = async (id, opts) => {
      if (typeof id === 'string' && UUID_PATTERN.test(id.trim())) return id.trim();
      segment(id, 'runtimeId');
      const runtimes = await this.#get('/v1/runtimes', opts).then((body) => body.runtimes);
      return resolveRuntime(String(id), runtimes);
    };
    const rt = async (id, opts) => `/v1/runtimes/${segment(await resolve(id, opts), 'runtimeId')}`;
    const job = async (id, jobId, opts) => `${await rt(id, opts)}/jobs/${segment(jobId, 'jobId')}`;
    this.runtimes = Object.freeze({
      list: async (opts) => this.#get('/v1/runtimes', opts).then((body) => body.runtimes),
      resolve,
      get: async (id, opts) => this.#get(await rt(id, opts), opts),
      register: async ({ name, from, policy } = {}, opts) => this.#post('/v1/runtimes', { name, from, policy }, opts),
      delete: async (id, opts) => this.#request('DELETE', await rt(id, opts), opts),
      configure: async (id, { version, policy } = {}, opts) => this.#post(`${await rt(id, opts)}/configure`, { version, policy }, opts),
      claim: async (id, { maxJobs, handlerTimeoutMs } = {}, opts) =>
        this.#post(`${await rt(id, opts)}/claim`, { maxJobs, handlerTimeoutMs }, opts),
      heartbeat: async (id, jobId, { owner, version } = {}, opts) =>
        this.#post(`${await job(id, jobId, opts)}/heartbeat`, { owner, version }, opts),
      finish: async (id, jobId, { owner, version, result } = {}, opts) =>
        this.#post(`${await job(id, jobId, opts)}/finish`, { owner, version, result }, opts),
      release: async (id, jobId, { owner, version } = {}, opts) =>
        this.#post(`${await job(id, jobId, opts)}/release`, { owner, version }, opts),
      retry: async (id, jobId, opts) => this.#post(`${await job(id, jobId, opts)}/retry`, undefined, opts),
      // Every dead letter, newest first, following each page's `next`.
      deadLetters: async (id, opts = {}) => {
        const path = `${await rt(id, opts)}/dead-letters`;
        return everyPage((after) => this.#get(path, { ...opts, query: { after } }), 'jobs');
      },
      deadLettersPage: async (id, opts = {}) =>
        this.#get(`${await rt(id, opts)}/dead-letters`, { ...opts, query: { after: opts.after, limit: opts.limit } }),
      log: async (id, opts = {}) =>
        this.#get(`${await rt(id, opts)}/log`, { ...opts, query: { limit: opts.limit } }).then((body) => body.records),
      stats: async (id, opts) => this.#get(`${await rt(id, opts)}/stats`, opts),
      getNotes: async (id, conversationId, opts = {}) =>
        this.runtimes.getNotesPage(id, conversationId, opts).then((body) => body.notes),
      // One page of notes, newest first, and `next` (a note key) when more follow.
      getNotesPage: async (id, conversationId, opts = {}) =>
        this.#get(`${await rt(id, opts)}/notes/${segment(conversationId, 'conversationId')}`, {
          ...opts,
          query: { limit: opts.limit, after: opts.after },
        }),
      putNote: async (id, conversationId, key, { text, version, sourceMessageIds } = {}, opts) =>
        this.#request(
          'PUT',
          `${await rt(id, opts)}/notes/${segment(conversationId, 'conversationId')}/${segment(key, 'key')}`,
          { ...opts, body: { version, text, sourceMessageIds } },
        ),
    });
  }

  /**
   * `POST /v1/register`: a new person (or, with `agent: true`, an agent)
   * on `server`. The key pair is generated here; only its public half is
   * sent. With `saveAs`, the identity is saved as that profile under `home`
   * (checked free first, so no identity is created without a place for its
   * key). Resolves with `{ client, identity, token, secretKey, profilePath? }`.
   */
  static async register(options = {}) {
    const { server, name, agent = false, invite, saveAs, home, requestTimeoutMs, allowInsecureHttp, signal } = options;
    const base = checkedServer(server, allowInsecureHttp);
    const dir = home ?? profileDir();
    if (saveAs !== undefined) await checkProfileFree(saveAs, dir);
    const keyPair = generateKeyPair();
    const timeoutMs = requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const { body } = await exchange(base, 'POST', '/v1/register', {
      body: { name, kind: agent ? 'agent' : 'person', publicKey: Buffer.from(keyPair.public).toString('base64'), invite },
      signal,
      timeoutMs,
    });
    return registered(body, { server: base, keyPair, saveAs, home: dir, requestTimeoutMs: timeoutMs });
  }

  /**
   * A client for a local profile, read from `$RELAYGER_HOME/<profile>.json`
   * (default directory: the user's config directory + `/relayger`; default
   * profile: `$RELAYGER_PROFILE`, else the one `relayger profiles use`
   * chose, else `default`).
   *
   * @param {{ profile?: string, home?: string, requestTimeoutMs?: number, allowInsecureHttp?: boolean }} [options]
   */
  static async fromProfile(options = {}) {
    const dir = options.home ?? profileDir();
    const name = options.profile ?? defaultProfileName(process.env, dir);
    const profile = await loadProfile(name, dir);
    return new Relayger({
      server: profile.server,
      token: profile.token,
      identityId: profile.identityId,
      number: profile.number,
      kind: profile.kind,
      displayName: profile.displayName,
      keyPair: profile.keyPair,
      profile: name,
      requestTimeoutMs: options.requestTimeoutMs,
      allowInsecureHttp: options.allowInsecureHttp,
    });
  }

  /** Whether `disconnect()` was called. */
  get closed() {
    return this.#closed;
  }

  /** `GET /v1/me`: the identity the token belongs to. */
  async me(opts) {
    return this.#get('/v1/me', opts);
  }

  /** `GET /v1/identities/{number}`: another identity's public fields. */
  async identity(number, opts) {
    return this.#get(`/v1/identities/${segment(number, 'number')}`, opts);
  }

  /** `GET /v1/rooms`: every room, following each page's `next`. */
  async listRooms(opts = {}) {
    return everyPage((after) => this.listRoomsPage({ ...opts, after }), 'rooms');
  }

  /**
   * One page of `GET /v1/rooms`: `{ rooms, next? }`, at most `limit` rooms
   * (default 50, at most 100) after `after` (a previous page's `next`).
   */
  async listRoomsPage(opts = {}) {
    return this.#get('/v1/rooms', { ...opts, query: { after: opts.after, limit: opts.limit } });
  }

  /** `POST /v1/rooms`: a group room with this identity and `members` (contacts' numbers). */
  async createRoom({ name, members = [], signal } = {}) {
    return this.#post('/v1/rooms', { name, members: members.map(String) }, { signal });
  }

  /** `POST /v1/rooms/{room}/members`: adds a contact to the room; resolves with the room. */
  async addMember(conversationId, number, opts) {
    return this.#post(
      `/v1/rooms/${segment(conversationId, 'conversationId')}/members`,
      { number: String(number) },
      opts,
    );
  }

  /** `POST /v1/rooms/{room}/leave`: this identity leaves the room. */
  async leaveRoom(conversationId, opts) {
    return this.#post(`/v1/rooms/${segment(conversationId, 'conversationId')}/leave`, undefined, opts);
  }

  /** `GET /v1/rooms/{room}`: the room with its current members and their public keys. */
  async getRoom(conversationId, opts) {
    return this.#get(`/v1/rooms/${segment(conversationId, 'conversationId')}`, opts);
  }

  /** `GET /v1/rooms/{room}/messages/{message}`: one message envelope. */
  async getMessage(conversationId, messageId, opts) {
    return this.#get(messagePath(conversationId, messageId), opts);
  }

  /**
   * `GET /v1/rooms/{room}/messages/{message}/delivery`: what became of a
   * question for every other member of its room (`state` sums them up;
   * each recipient's `state`, `reason` code, `attempts`, `replyMessageId`
   * and `listeners`). Readable by the room's members.
   */
  async delivery(conversationId, messageId, opts) {
    return this.#get(`${messagePath(conversationId, messageId)}/delivery`, opts);
  }

  /**
   * `DELETE /v1/rooms/{room}/messages/{message}/ask`: the sender cancels its
   * question. Jobs not yet taken end `canceled` and are never claimed; a
   * worker holding one learns it at its next heartbeat or finish, aborts its
   * handler and writes no reply. Idempotent; resolves with the delivery.
   */
  async cancel(conversationId, messageId, opts) {
    return this.#request('DELETE', `${messagePath(conversationId, messageId)}/ask`, opts);
  }

  /**
   * `GET …/thread`: the root and reply chain of `messageId`, one page within
   * `maxBytes` (512–65536, default 8192) and `limit` (at most 100). `next`
   * is the last returned seq when more follow (pass it as `after`), else null.
   */
  async getThread(conversationId, messageId, { limit, maxBytes, after, signal } = {}) {
    return this.#get(`${messagePath(conversationId, messageId)}/thread`, {
      signal,
      query: { after, limit, maxBytes },
    });
  }

  /**
   * `GET /v1/rooms/{room}/messages`: one page of the room's history, oldest
   * first: after the seq `after`, before the seq `before`, or (neither) the
   * newest (`limit`: default 50, at most 100). `next` is the page's last seq
   * when newer messages exist (pass it as `after`), `prev` its first seq
   * when older ones exist (pass it as `before`); null otherwise. Acknowledged
   * messages are read here too: this is not the inbox.
   */
  async getHistory(conversationId, { before, after, limit, signal } = {}) {
    return this.#get(`/v1/rooms/${segment(conversationId, 'conversationId')}/messages`, {
      signal,
      query: { after, before, limit },
    });
  }

  /**
   * `GET /v1/inbox`: one bounded page of the messages after this identity's
   * ACK cursor, per room (`{ after, limit }`: continue after a previous
   * page's `next`; at most `limit` messages, default 200, at most 500).
   */
  async inbox(opts = {}) {
    return this.#get('/v1/inbox', { ...opts, query: { after: opts.after, limit: opts.limit } });
  }

  /** `POST /v1/rooms/{room}/ack`: everything up to `seq` has been seen. */
  async ack(conversationId, seq, opts) {
    return this.#post(`/v1/rooms/${segment(conversationId, 'conversationId')}/ack`, { seq }, opts);
  }

  /**
   * `POST /v1/messages`: a plain message to a contact (`to`, a number) or a
   * room (`conversationId`). Returns the stored envelope; with `ask` and
   * `wait` (`true`, or `{timeoutMs}`), what became of the question instead:
   * see `#sendMaybeWaiting`.
   */
  async send({ to, conversationId, text, ask, deadline, replyTo, messageId, wait, signal } = {}) {
    if ((to === undefined) === (conversationId === undefined)) {
      throw new RelaygerError('invalid_argument', 'give exactly one of `to` or `conversationId`');
    }
    return this.#sendMaybeWaiting({ ask, wait, signal }, () =>
      this.#post(
        '/v1/messages',
        {
          to: to === undefined ? undefined : String(to),
          roomId: conversationId,
          messageId,
          text,
          ask: Boolean(ask),
          deadline: deadlineText(deadline),
          replyTo,
        },
        { signal },
      ),
    );
  }

  /**
   * `send()` alone, or with `wait`: the identity socket is opened first,
   * then the question is sent, and the promise resolves `{question, reply,
   * delivery}` with the earliest reply, or with `reply: null` as soon as
   * every recipient ended without one (`delivery.state` failed, rejected or
   * canceled). No answer within the wait rejects with `timeout`
   * (`details: {question, delivery}`).
   */
  async #sendMaybeWaiting({ ask, wait, signal }, send) {
    const timeoutMs = waitTimeoutMs(wait, ask);
    if (timeoutMs === undefined) return send();
    if (this.#closed) throw new RelaygerError('client_closed', 'the client was disconnected');
    return sendAndWait(this, send, { timeoutMs, signal, shutdown: this.#shutdown.signal });
  }

  /**
   * Seals `text` (or `{schema, data, text?}`, or `content`) end to end for
   * every current member of the room, this identity included, and sends it.
   * The message id is `messageId` or a new UUID v7; it, `ask`, `deadline`
   * and `replyTo` are bound into the ciphertext (a deadline finer than a
   * microsecond is refused). If membership changes between reading the room
   * and sending, the server refuses the recipient set: send again. `wait`
   * as with `send`.
   */
  async sendSealed(options = {}) {
    const { to, conversationId, ask, wait, signal } = options;
    const keyPair = this.#requireKeys();
    if ((to === undefined) === (conversationId === undefined)) {
      throw new RelaygerError('invalid_argument', 'give exactly one of `to` or `conversationId`');
    }
    return this.#sendMaybeWaiting({ ask, wait, signal }, () => this.#sealAndSend(keyPair, options));
  }

  async #sealAndSend(keyPair, { to, conversationId, text, schema, data, content, ask, deadline, replyTo, messageId, signal }) {
    const body = content ?? Object.fromEntries(Object.entries({ text, schema, data }).filter(([, v]) => v !== undefined));
    const roomId = conversationId ?? (await this.#directRoom(String(to), signal));
    const room = await this.getRoom(roomId, { signal });
    const recipients = [];
    for (const member of room.members) {
      if (member.id.toLowerCase() === this.identityId) continue;
      const publicKey = parsePublicKey(member.publicKey);
      if (!publicKey) {
        throw new RelaygerError('invalid_argument', `member ${member.number} has no usable public key`);
      }
      recipients.push({ id: member.id, publicKey });
    }
    recipients.push({ id: this.identityId, publicKey: keyPair.public });
    const id = messageId ?? uuidv7();
    const envelope = { ask: Boolean(ask), deadline: deadlineText(deadline), replyTo };
    let sealed;
    try {
      sealed = await seal({
        content: body,
        roomId: room.id,
        messageId: id,
        sender: { id: this.identityId, keyPair },
        recipients,
        ...envelope,
      });
    } catch (error) {
      throw new RelaygerError('invalid_argument', error.message, { cause: error });
    }
    return this.#post(
      '/v1/messages',
      { roomId: room.id, messageId: id, sealed, ...envelope },
      { signal },
    );
  }

  /**
   * Opens this identity's copy of a sealed message envelope with the
   * profile's key. Returns `{text}` or `{schema, data, text?}`; throws a
   * `SealedOpenError` (with a stable `reason`) when it cannot. The sender's
   * public key is fetched once per client with `GET /v1/identities/{number}`.
   */
  async open(envelope, { signal } = {}) {
    const keyPair = this.#requireKeys();
    if (!envelope?.sealed) throw new SealedOpenError('not_sealed', 'the message is not sealed');
    const sender = envelope.sender ?? {};
    const senderPublicKey =
      String(sender.id).toLowerCase() === this.identityId ? keyPair.public : await this.#senderKey(sender, signal);
    return openSealed({ envelope, me: { id: this.identityId, keyPair }, senderPublicKey });
  }

  /**
   * Ends every request and socket this client started and refuses new ones
   * (`client_closed`). Safe to call more than once.
   */
  disconnect() {
    if (this.#closed) return;
    this.#closed = true;
    this.#shutdown.abort(new RelaygerError('client_closed', 'the client was disconnected'));
    for (const socket of this.#sockets) socket.terminate();
    this.#sockets.clear();
  }

  #requireKeys() {
    if (!this.#keyPair || !this.identityId) {
      throw new RelaygerError('invalid_argument', 'this client has no key pair; create it from a profile');
    }
    return this.#keyPair;
  }

  async #directRoom(number, signal) {
    const contacts = await this.contacts.list({ signal });
    const contact = contacts.find((c) => c.number === number);
    if (!contact) throw new RelaygerError('not_found', `${number} is not one of your contacts`);
    return contact.roomId;
  }

  async #senderKey(sender, signal) {
    const id = String(sender.id).toLowerCase();
    const cached = this.#senderKeys.get(id);
    if (cached) return cached;
    let identity;
    try {
      identity = await this.identity(sender.number, { signal });
    } catch (error) {
      if (signal?.aborted) throw abortError(signal);
      throw new SealedOpenError('sender_key_unavailable', `the sender's public key is unavailable: ${error.message}`);
    }
    // The number must still name the identity that sent the message.
    const key = identity.id.toLowerCase() === id ? parsePublicKey(identity.publicKey) : null;
    if (!key) throw new SealedOpenError('sender_key_unavailable', "the sender's public key is unavailable");
    this.#senderKeys.set(id, key);
    return key;
  }

  #get(path, opts = {}) {
    return this.#request('GET', path, opts);
  }

  #post(path, body, opts = {}) {
    return this.#request('POST', path, { ...opts, body });
  }

  async #request(method, path, opts = {}) {
    return (await this[RAW_REQUEST](method, path, opts)).body;
  }

  /**
   * @returns {Promise<{ status: number, headers: Headers, body: any }>}
   */
  async [RAW_REQUEST](method, path, { body, query, signal, timeoutMs } = {}) {
    if (this.#closed) throw new RelaygerError('client_closed', 'the client was disconnected');
    if (signal?.aborted) throw abortError(signal);
    return exchange(this.server, method, path, {
      token: this.#token,
      body,
      query,
      signal,
      shutdown: this.#shutdown.signal,
      timeoutMs: timeoutMs ?? this.#timeoutMs,
    });
  }

  /** Opens a WebSocket to `path` with the bearer token; closed by `disconnect()`. */
  [OPEN_SOCKET](path) {
    if (this.#closed) throw new RelaygerError('client_closed', 'the client was disconnected');
    const url = this.server.replace(/^http/, 'ws') + path;
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.#token}` },
      handshakeTimeout: Math.min(this.#timeoutMs, 10_000),
    });
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    return socket;
  }
}

