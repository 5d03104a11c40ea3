// Type declarations for @relayger/sdk. Wire objects mirror the server's JSON
// (camelCase fields, RFC 3339 UTC times with `Z`, ids as UUID strings).

export type IdentityKind = 'person' | 'agent';

export interface RequestOptions {
  /** Aborts the request; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

// ---------------------------------------------------------------- wire types

export interface IdentityRef {
  id: string;
  number: string;
  kind: IdentityKind;
}

export interface Identity extends IdentityRef {
  displayName: string;
  ownerNumber?: string;
  publicKey?: string;
  createdAt: string;
}

export interface SealedRecipient {
  identityId: string;
  /** Base64 of the 32-byte HPKE encapsulated key. */
  enc: string;
  /** Base64 of the AEAD ciphertext (tag included). */
  ciphertext: string;
}

export interface SealedPayload {
  /** 2 binds `ask`, `deadline` and `replyTo` too (written now); 1 still opens. */
  version: 1 | 2;
  suite: 'DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305';
  recipients: SealedRecipient[];
}

/** A message as every reader sees it; `conversationId` is the room id. */
export interface MessageEnvelope {
  conversationId: string;
  messageId: string;
  seq: number;
  sender: IdentityRef;
  /** Null for a sealed message. */
  text: string | null;
  sealed?: SealedPayload;
  ask: boolean;
  deadline: string | null;
  replyTo: string | null;
  /** Written by a runtime (a worker's reply). */
  byRuntime: boolean;
  createdAt: string;
}

/** The content of a sealed message once opened. */
export type SealedContent = { text: string } | { schema: string; data: unknown; text?: string };

export interface ThreadPage {
  /** The root and its reply chain in room-seq order, within the byte budget. */
  messages: MessageEnvelope[];
  /** The last returned seq when more follow (pass it as `after`), else null. */
  next: number | null;
}

export interface HistoryPage {
  /** One page of the room's messages, oldest first. */
  messages: MessageEnvelope[];
  /** The page's last seq when newer messages exist (pass it as `after`), else null. */
  next: number | null;
  /** The page's first seq when older messages exist (pass it as `before`), else null. */
  prev: number | null;
}

/**
 * Where a question stands for one recipient, or summed up for all (the most
 * advanced wins: answered > working > queued > canceled > failed > rejected).
 * - `queued`: nobody holds it yet (a person is `queued` until they reply);
 * - `working`: a runtime holds a lease on it;
 * - `answered`: the recipient replied (`replyMessageId`);
 * - `failed`: every attempt failed (a dead letter; reason `attempts_exhausted`);
 * - `rejected`: not answered on purpose (`reason`: a policy skip code such as
 *   `deadline_passed` or `sender_not_allowed`, `handler_skipped`, `no_reply`);
 * - `canceled`: the asker canceled it.
 */
export type DeliveryState = 'queued' | 'working' | 'answered' | 'failed' | 'rejected' | 'canceled';

/** One recipient of a question: another member of its room. */
export interface RecipientDelivery {
  identityId: string;
  number: string;
  state: DeliveryState;
  /** A snake_case code for `rejected` / `failed`; never the handler's text or the recipient's policy. */
  reason?: string;
  /** Leases granted on it across the recipient's runtimes. */
  attempts: number;
  /** The recipient's first reply, when `answered`. */
  replyMessageId?: string;
  /** The recipient's runtimes that will consider the message: 0 when nobody is listening yet. */
  listeners: number;
}

/** What became of a question (`client.delivery`, `client.cancel`, `send` with `wait`). */
export interface Delivery {
  conversationId: string;
  messageId: string;
  /** The recipients summed up; `failed`, `rejected` or `canceled` only when every recipient ended so. */
  state: DeliveryState;
  /** True once the asker canceled the question. */
  canceled: boolean;
  recipients: RecipientDelivery[];
  /** The latest change: the question, a job's, a reply's or the cancel. */
  updatedAt: string;
}

export interface HistoryOptions extends RequestOptions {
  /** Only messages with a seq below this (a page's `prev`). */
  before?: number;
  /** Only messages with a seq above this (a page's `next`). */
  after?: number;
  /** At most this many messages (default 50, server cap 100). */
  limit?: number;
}

export interface RoomMember {
  id: string;
  number: string;
  kind: IdentityKind;
  displayName: string;
  publicKey?: string;
}

export interface Room {
  id: string;
  kind: 'direct' | 'group';
  name?: string;
  members: RoomMember[];
  lastSeq: number;
  createdAt: string;
}

export interface InboxResponse {
  rooms: { roomId: string; ackedSeq: number; lastSeq: number; messages: MessageEnvelope[] }[];
  /** Present when rooms were left: pass it as `after` for the next page. */
  next?: string;
}

/** What a token may do. */
export type Scope = 'read' | 'write' | 'contacts';

/** A token just created; `secret` is shown only here (the server keeps its hash). */
export interface CreatedToken {
  id: string;
  secret: string;
  scopes: Scope[];
  /** Present when the token is restricted to these rooms. */
  roomIds?: string[];
  label?: string;
  createdAt: string;
}

/** A token without its secret. */
export interface TokenInfo {
  id: string;
  scopes: Scope[];
  roomIds?: string[];
  label?: string;
  createdAt: string;
  revokedAt?: string;
  /** Whether this is the token making the request. */
  current: boolean;
}

export interface TokenList {
  /** Newest first. */
  tokens: TokenInfo[];
  /** When more follow: pass it as `after`. */
  next?: string;
}

export interface Contact {
  id: string;
  number: string;
  kind: IdentityKind;
  displayName: string;
  publicKey?: string;
  /** The direct room the two contacts share. */
  roomId: string;
  since: string;
}

export interface JobList {
  /** Newest dead letter first. */
  jobs: JobView[];
  /** When more follow: pass it as `after`. */
  next?: string;
}

export interface ContactList {
  /** In the order the pairs first became contacts. */
  contacts: Contact[];
  /** When more follow: pass it as `after`. */
  next?: string;
}

export interface ContactRequestView {
  id: string;
  direction: 'incoming' | 'outgoing';
  /** The other party. */
  number: string;
  kind: IdentityKind;
  displayName: string;
  state: 'pending' | 'accepted' | 'declined' | 'withdrawn';
  createdAt: string;
}

export interface ContactRequests {
  /** All pending incoming requests (not only this page's). */
  count: number;
  incoming: ContactRequestView[];
  outgoing: ContactRequestView[];
  /** On one page (`after`/`limit` given) when more follow: pass it as `after`. */
  next?: string;
}

/** A runtime policy; absent fields take the server's defaults. */
export interface Policy {
  triggers?: ('questions' | 'messages')[];
  /** Identity numbers; empty: anyone who can reach the agent. */
  allowedSenders?: string[];
  /** Room ids; empty: every room the token can see. */
  allowedRooms?: string[];
  maxAttempts?: number;
  maxCallsPerHour?: number;
  concurrency?: number;
  /** Daily UTC windows "HH:MM-HH:MM"; empty: around the clock. */
  activeHoursUTC?: string[];
}

export interface JobCounts {
  pending: number;
  claimed: number;
  handled: number;
  skipped: number;
  dead: number;
}

export interface Runtime {
  id: string;
  name: string;
  agentNumber: string;
  from: 'now' | 'beginning';
  policy: Required<Policy>;
  /**
   * Set for a room-restricted token when `policy.allowedRooms` names rooms
   * beyond the token's, which are left out (an empty list then does not mean every room).
   */
  allowedRoomsHidden?: boolean;
  /** Configuration version: 1 at registration, +1 per configure. */
  version: number;
  createdAt: string;
  updatedAt: string;
  jobs: JobCounts;
  activeLeases: number;
  /** Only in the answer to `register`: what a starting worker will consider. */
  backlog?: { rooms: number; unscannedMessages: number };
}

/** What a handler reported about its model use. Absent means unknown, never zero. */
export interface Usage {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
}

export interface NoteInput {
  key: string;
  text: string;
  /** 0 creates; an update names the current version. */
  version: number;
  /** Real messages of the same room, at most 8. */
  sourceMessageIds?: string[];
}

export interface Note {
  key: string;
  conversationId: string;
  text: string;
  version: number;
  sourceMessageIds: string[];
  createdAt: string;
  updatedAt: string;
}

export interface ClaimedJob {
  jobId: string;
  /** Stable per (runtime, message): the idempotency key for external work. */
  jobKey: string;
  attempt: number;
  owner: string;
  version: string;
  leaseMs: number;
  handlerTimeoutMs: number;
  message: MessageEnvelope;
}

export interface ClaimResponse {
  jobs: ClaimedJob[];
  retryAt?: string;
  leaseMs: number;
  /** Claimable work was left pending: claim again at once. */
  morePending?: boolean;
  /** Work this claim did not grant is waiting: claim again when a job ends (absent from an older server: true). */
  workLeft?: boolean;
}

export interface Lease {
  owner: string;
  version: string;
}

export interface JobResult {
  reply?: string;
  skip?: string;
  note?: NoteInput;
  usage?: Usage;
  error?: string;
}

export interface FinishResponse {
  outcome: 'replied' | 'skipped' | 'handled' | 'failed' | 'dead_letter';
  replyMessageId?: string;
  retryAt?: string;
}

export interface JobView {
  jobId: string;
  jobKey: string;
  conversationId: string;
  messageId: string;
  state: string;
  attempts: number;
  reason?: string;
  updatedAt: string;
}

export interface LogRecord {
  id: number;
  at: string;
  kind: string;
  jobKey?: string;
  conversationId?: string;
  messageId?: string;
  detail: unknown;
}

export interface RuntimeStats {
  claims: number;
  attempts: number;
  finishedAttempts: number;
  unfinishedAttempts: number;
  unreportedAttempts: number;
  reported: Usage;
  jobs: JobCounts;
  /** Budget units granted in the rolling hour, of the policy's maxCallsPerHour. */
  budgetUsedLastHour: number;
}

// ---------------------------------------------------------------- errors

/** Every error the SDK raises; `code` is the server's error code or the SDK's own. */
export class RelaygerError extends Error {
  constructor(code: string, message: string, extra?: { status?: number; details?: unknown; cause?: unknown });
  readonly code: string;
  /** The HTTP status, for an error the server returned. */
  readonly status?: number;
  readonly details?: unknown;
  /** Set on the error runWorker rejects with. */
  runtimeId?: string | null;
  /** Set on `handler_did_not_stop`: the stuck job. */
  jobKey?: string;
}

/** A sealed message this identity cannot open. */
export class SealedOpenError extends RelaygerError {
  readonly reason:
    | 'unsupported_version'
    | 'unsupported_suite'
    | 'not_a_recipient'
    | 'malformed'
    | 'cannot_open'
    | 'sender_key_unavailable'
    | 'not_sealed';
}

// ---------------------------------------------------------------- client

/** `{ ok: true }`: what a change without a richer answer returns. */
export interface Done {
  ok: boolean;
}

export interface ClientOptions {
  /** The server's base URL. */
  server: string;
  /** A bearer token. */
  token: string;
  /** The identity's id; needed to seal and open. */
  identityId?: string;
  /** Base64 X25519 secret key; needed to seal and open. */
  secretKey?: string;
  /** Base64 X25519 public key; checked against `secretKey`. */
  publicKey?: string;
  number?: string;
  kind?: IdentityKind;
  displayName?: string;
  /** Per HTTP request; default 30000. */
  requestTimeoutMs?: number;
  /**
   * Send the token over plain http:// to a host that is not this machine.
   * Default: refused (`invalid_argument`), unless `RELAYGER_ALLOW_INSECURE_HTTP=1`.
   */
  allowInsecureHttp?: boolean;
}

export interface FromProfileOptions {
  /** Default: `$RELAYGER_PROFILE`, else `default`. */
  profile?: string;
  /** The profile directory; default `$RELAYGER_HOME`, else the user config dir + `/relayger`. */
  home?: string;
  requestTimeoutMs?: number;
  allowInsecureHttp?: boolean;
}

export interface SaveProfileOptions {
  /** Save the new identity (or token) as this profile; refused when the name is taken. */
  saveAs?: string;
  /** The profile directory; default `$RELAYGER_HOME`, else the user config dir + `/relayger`. */
  home?: string;
}

export interface RegisterOptions extends RequestOptions, SaveProfileOptions {
  /** The server's base URL. */
  server: string;
  /** The display name. */
  name: string;
  /** An agent rather than a person. */
  agent?: boolean;
  /** An invite code, needed when the server's registration is closed. */
  invite?: string;
  requestTimeoutMs?: number;
  allowInsecureHttp?: boolean;
}

/** A new identity: a client acting as it, and what a profile keeps. */
export interface Registration {
  client: Relayger;
  identity: Identity;
  /** Its first token; `token.secret` is shown only here. */
  token: CreatedToken;
  /** Base64 of the X25519 secret key, generated here; it exists nowhere else. */
  secretKey: string;
  /** The profile file written, with `saveAs`. */
  profilePath?: string;
}

export interface SendOptions extends RequestOptions {
  /** A contact's number (their direct room) … */
  to?: string | number;
  /** … or a room id: exactly one of the two. */
  conversationId?: string;
  text: string;
  ask?: boolean;
  /** Only with `ask`: a Date or an RFC 3339 UTC time with `Z`. */
  deadline?: Date | string;
  replyTo?: string;
  /** A client-chosen UUID (resending the same id and content is idempotent). */
  messageId?: string;
  /** Only with `ask`: resolve with what became of the question (an `AskOutcome`), not the envelope. */
  wait?: boolean | WaitOptions;
}

export interface WaitOptions {
  /** How long to wait for a reply or an unanswered end, 1–600000 ms (default 60000). */
  timeoutMs?: number;
}

/**
 * What `send` / `sendSealed` with `ask` and `wait` resolve with: the question
 * as stored and, as soon as one is known, its earliest reply (`reply`), or
 * `reply: null` once every recipient ended without one (`delivery.state`
 * `failed`, `rejected` or `canceled`: see each recipient's `state` and
 * `reason`). No answer within the wait rejects with a RelaygerError
 * `timeout` whose `details` are `{question, delivery}`; the question stays sent.
 */
export interface AskOutcome {
  question: MessageEnvelope;
  /** A sealed reply is returned sealed: `client.open(reply)`. */
  reply: MessageEnvelope | null;
  /** The delivery as last read. */
  delivery: Delivery;
}

export interface SendSealedOptions extends RequestOptions {
  to?: string | number;
  conversationId?: string;
  /** `{text}` or `{schema, data, text?}`; or give `text` / `schema` + `data` directly. */
  content?: SealedContent;
  text?: string;
  schema?: string;
  data?: unknown;
  ask?: boolean;
  deadline?: Date | string;
  replyTo?: string;
  /** Default: a new UUID v7 (it is bound into the ciphertext). */
  messageId?: string;
  /** Only with `ask`: resolve with an `AskOutcome`, as with `send`. */
  wait?: boolean | WaitOptions;
}

export interface ThreadOptions extends RequestOptions {
  /** At most this many messages (server cap 100). */
  limit?: number;
  /** JSON byte budget of the response, 512–65536 (default 8192). */
  maxBytes?: number;
  /** Only messages after this room seq (the previous page's `next`). */
  after?: number;
}

export interface ContactsApi {
  /** Every contact, following each page's `next`. */
  list(options?: RequestOptions): Promise<Contact[]>;
  /** One page: at most `limit` contacts (default 100, at most 500) after `after` (a previous page's `next`). */
  listPage(options?: RequestOptions & { after?: string; limit?: number }): Promise<ContactList>;
  /** Every pending request (all pages); with `after` or `limit`, one page (at most 500). */
  requests(options?: RequestOptions & { as?: string; after?: string; limit?: number }): Promise<ContactRequests>;
  request(number: string | number, options?: RequestOptions): Promise<ContactRequestView>;
  /** Accepts `number`'s request (`as`: an owner answering for its agent). */
  accept(number: string | number, options?: RequestOptions & { as?: string }): Promise<Contact>;
  decline(number: string | number, options?: RequestOptions & { as?: string }): Promise<ContactRequestView>;
  /** Withdraws this identity's own pending request to `number`. */
  withdraw(number: string | number, options?: RequestOptions): Promise<ContactRequestView>;
  /** No requests, no messages, no shared direct room with `number`. */
  block(number: string | number, options?: RequestOptions): Promise<Done>;
  unblock(number: string | number, options?: RequestOptions): Promise<Done>;
  /** Removes a contact; both lose access to the direct room. */
  remove(number: string | number, options?: RequestOptions): Promise<Done>;
}

export interface AgentsApi {
  /** A new agent owned by this person (its own key pair and token), on the same server. */
  create(options: RequestOptions & SaveProfileOptions & { name: string }): Promise<Registration>;
}

export interface TokensApi {
  /**
   * A new token of this identity, never more than the one creating it. With
   * `saveAs`, a copy of this identity's profile holding it (needs the key pair).
   */
  create(
    options: RequestOptions & SaveProfileOptions & { scopes: Scope[]; roomIds?: string[]; label?: string },
  ): Promise<CreatedToken>;
  /** Every token (newest first), following each page's `next`. */
  list(options?: RequestOptions): Promise<TokenInfo[]>;
  /** One page of tokens (at most `limit`) after `after` (a previous page's `next`). */
  listPage(options?: RequestOptions & { after?: string; limit?: number }): Promise<TokenList>;
  /** Revokes a token; it stops working on its next request. */
  revoke(tokenId: string, options?: RequestOptions): Promise<TokenInfo>;
}

/**
 * Every `runtimeId` below may also be the runtime's name or a unique start
 * of its id (at least 4 characters); a name costs one `list` call. None or
 * several matching rejects with `not_found` or `invalid_argument` (listing
 * the candidates).
 */
export interface RuntimesApi {
  list(options?: RequestOptions): Promise<Runtime[]>;
  /** The id of the runtime a name, an id or the start of an id names. */
  resolve(runtime: string, options?: RequestOptions): Promise<string>;
  get(runtimeId: string, options?: RequestOptions): Promise<Runtime>;
  register(body: { name: string; from?: 'now' | 'beginning'; policy?: Policy }, options?: RequestOptions): Promise<Runtime>;
  delete(runtimeId: string, options?: RequestOptions): Promise<{ ok: boolean }>;
  configure(runtimeId: string, body: { version: number; policy: Policy }, options?: RequestOptions): Promise<Runtime>;
  claim(runtimeId: string, body?: { maxJobs?: number; handlerTimeoutMs?: number }, options?: RequestOptions): Promise<ClaimResponse>;
  heartbeat(runtimeId: string, jobId: string, lease: Lease, options?: RequestOptions): Promise<{ leaseMs: number; expiresAt: string }>;
  finish(runtimeId: string, jobId: string, body: Lease & { result: JobResult }, options?: RequestOptions): Promise<FinishResponse>;
  release(runtimeId: string, jobId: string, lease: Lease, options?: RequestOptions): Promise<{ ok: boolean }>;
  /** A dead letter back to pending; `job` is its jobId, its message id or its jobKey. */
  retry(runtimeId: string, job: string, options?: RequestOptions): Promise<JobView>;
  /** Every dead letter, newest first (following each page's `next`). */
  deadLetters(runtimeId: string, options?: RequestOptions): Promise<JobView[]>;
  /** One page of dead letters: after `after` (a page's `next`), at most `limit` (default 100, at most 500). */
  deadLettersPage(runtimeId: string, options?: RequestOptions & { after?: string; limit?: number }): Promise<JobList>;
  log(runtimeId: string, options?: RequestOptions & { limit?: number }): Promise<LogRecord[]>;
  stats(runtimeId: string, options?: RequestOptions): Promise<RuntimeStats>;
  /** The runtime's notes for one room (at most 20 a page). */
  getNotes(runtimeId: string, conversationId: string, options?: RequestOptions & { limit?: number; after?: string }): Promise<Note[]>;
  /** One page of the room's notes, newest first; `next` is the key to pass as `after` when more follow. */
  getNotesPage(
    runtimeId: string,
    conversationId: string,
    options?: RequestOptions & { limit?: number; after?: string },
  ): Promise<{ notes: Note[]; next?: string }>;
  /** Creates (version 0) or updates (the current version) a note. */
  putNote(
    runtimeId: string,
    conversationId: string,
    key: string,
    note: { text: string; version: number; sourceMessageIds?: string[] },
    options?: RequestOptions,
  ): Promise<Note>;
}

export class Relayger {
  constructor(options: ClientOptions);
  /** A client for a local profile file (the same files the `relayger` CLI writes). */
  static fromProfile(options?: FromProfileOptions): Promise<Relayger>;
  /** Registers a new identity; the key pair is generated here, only its public half is sent. */
  static register(options: RegisterOptions): Promise<Registration>;

  readonly server: string;
  readonly identityId?: string;
  readonly number?: string;
  readonly kind?: IdentityKind;
  readonly displayName?: string;
  readonly publicKey?: string;
  /** The profile's name, when made from one. */
  readonly profile?: string;
  /** Whether `disconnect()` was called. */
  readonly closed: boolean;

  readonly contacts: ContactsApi;
  readonly runtimes: RuntimesApi;
  readonly agents: AgentsApi;
  readonly tokens: TokensApi;

  me(options?: RequestOptions): Promise<Identity>;
  identity(number: string | number, options?: RequestOptions): Promise<Identity>;
  /** Every room, following each page's `next`. */
  listRooms(options?: RequestOptions): Promise<Room[]>;
  /** One page of rooms (at most `limit`, default 50, at most 100) after `after`. */
  listRoomsPage(options?: RequestOptions & { after?: string; limit?: number }): Promise<{ rooms: Room[]; next?: string }>;
  getRoom(conversationId: string, options?: RequestOptions): Promise<Room>;
  /** A group room with this identity and some of its contacts. */
  createRoom(options: RequestOptions & { name: string; members?: (string | number)[] }): Promise<Room>;
  /** Adds one of this identity's contacts to a room; resolves with the room. */
  addMember(conversationId: string, number: string | number, options?: RequestOptions): Promise<Room>;
  leaveRoom(conversationId: string, options?: RequestOptions): Promise<Done>;
  getMessage(conversationId: string, messageId: string, options?: RequestOptions): Promise<MessageEnvelope>;
  getThread(conversationId: string, messageId: string, options?: ThreadOptions): Promise<ThreadPage>;
  /** One page of a room's history (the newest page without `before`/`after`). */
  getHistory(conversationId: string, options?: HistoryOptions): Promise<HistoryPage>;
  inbox(options?: RequestOptions & { after?: string; limit?: number }): Promise<InboxResponse>;
  ack(conversationId: string, seq: number, options?: RequestOptions): Promise<{ roomId: string; ackedSeq: number }>;
  /** A question with `wait`: resolves once it is answered or every recipient ended without an answer. */
  send(options: SendOptions & { ask: true; wait: true | WaitOptions }): Promise<AskOutcome>;
  send(options: SendOptions & { wait?: false }): Promise<MessageEnvelope>;
  send(options: SendOptions): Promise<MessageEnvelope | AskOutcome>;
  /** Seals for every current member of the room (this identity included) and sends. */
  sendSealed(options: SendSealedOptions & { ask: true; wait: true | WaitOptions }): Promise<AskOutcome>;
  sendSealed(options: SendSealedOptions & { wait?: false }): Promise<MessageEnvelope>;
  sendSealed(options: SendSealedOptions): Promise<MessageEnvelope | AskOutcome>;
  /** What became of a question, for every other member of its room (readable by its members). */
  delivery(conversationId: string, messageId: string, options?: RequestOptions): Promise<Delivery>;
  /**
   * The sender cancels its question: jobs not yet taken end `canceled`; a
   * worker holding one aborts its handler at its next heartbeat or finish and
   * writes no reply. Idempotent. Not the sender: `forbidden`; not a question:
   * `unprocessable_entity`.
   */
  cancel(conversationId: string, messageId: string, options?: RequestOptions): Promise<Delivery>;
  /** Opens this identity's copy of a sealed envelope; rejects with SealedOpenError. */
  open(envelope: MessageEnvelope, options?: RequestOptions): Promise<SealedContent>;
  /** Ends every request and socket of this client; later calls reject with `client_closed`. */
  disconnect(): void;
}

// ---------------------------------------------------------------- worker

export interface HandlerInput {
  message: MessageEnvelope;
  /** The opened content of a sealed message this identity's key opens. */
  opened?: SealedContent;
  /** Why a sealed message could not be opened (a SealedOpenError reason). */
  openError?: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** The idempotency key for external work: the same across attempts. */
  jobKey: string;
  runtimeId: string;
  /**
   * Aborts on handler timeout (reason: a `TimeoutError` DOMException), on
   * lease loss, worker shutdown or the asker's cancel of the question (an
   * `AbortError`). After it aborts the callback has at most one second to
   * settle.
   */
  signal: AbortSignal;
}

export type HandlerResult =
  | { reply?: string; skip?: string; note?: NoteInput; usage?: Usage }
  | { error: string; usage?: Usage };

/** The events runWorker reports, shaped like the lines of `relayger --json worker run`. */
export type WorkerEvent =
  | {
      event: 'started';
      runtimeId: string;
      name: string;
      agentNumber: string;
      version: number;
      from: 'now' | 'beginning';
      concurrency: number;
      socket: 'connected' | 'unavailable';
      /** The rooms the agent is in. */
      rooms?: number;
      /** Messages in them past the runtime's checkpoints (the whole history on a first `from: 'beginning'`). */
      unscannedMessages?: number;
      /** Jobs already waiting. */
      pendingJobs: number;
      /** The policy in effect (defaults filled in). */
      policy: Policy;
    }
  | {
      event: 'claimed';
      jobId: string;
      jobKey: string;
      conversationId: string;
      messageId: string;
      attempt: number;
      handlerTimeoutMs: number;
    }
  | { event: 'replied'; jobKey: string; messageId: string; replyMessageId?: string }
  | { event: 'skipped'; jobKey: string; messageId: string; reason: string }
  | { event: 'handled'; jobKey: string; messageId: string }
  | { event: 'failed'; jobKey: string; messageId: string; error: string; retryAt?: string }
  | { event: 'dead_letter'; jobKey: string; messageId: string; error: string }
  | { event: 'released'; jobKey: string; messageId: string }
  /** The asker canceled the question while this worker held it: the signal aborted, nothing is written or retried. */
  | { event: 'canceled'; jobKey: string; messageId: string }
  | { event: 'contact_requests'; count: number }
  | { event: 'contact_accepted'; number: string }
  | { event: 'contact_error'; number?: string; code: string; message?: string }
  | { event: 'socket_connected' }
  | { event: 'socket_disconnected'; error: string }
  | { event: 'unavailable'; during: 'register' | 'claim'; error: string; retryInMs: number }
  | { event: 'stopped'; reason: 'interrupted' | 'handler_did_not_stop' | 'error'; jobKey?: string; code?: string; message?: string };

export interface WorkerOptions {
  /** The runtime's name: persistent per identity + name. */
  name: string;
  /** Where a new runtime starts; default 'beginning'. Later starts must give the same. */
  from?: 'now' | 'beginning';
  /** Later starts must give the same policy (else runtime_configuration_conflict). */
  policy?: Policy;
  /** Aborting it releases in-flight jobs and resolves runWorker. */
  signal?: AbortSignal;
  /** Accept every incoming contact request without waiting. */
  acceptContacts?: boolean;
  handler: (input: HandlerInput) => HandlerResult | void | Promise<HandlerResult | void>;
  /** Requested handler timeout, 1–120000 ms (server default 20000; an earlier question deadline wins). */
  handlerTimeoutMs?: number;
  /** Called with every event (the CLI's NDJSON shapes). */
  onEvent?: (event: WorkerEvent) => void;
  /** The fallback poll when no socket signal arrives; default 30000 (plus up to 20% jitter). */
  fallbackPollMs?: number;
}

/**
 * Runs a persistent listener until `signal` aborts (resolves
 * `{reason: 'interrupted', runtimeId}`), or rejects: with `handler_did_not_stop`
 * when a callback ignores its aborted signal for more than one second, or
 * with a fatal API error.
 */
export function runWorker(client: Relayger, options: WorkerOptions): Promise<{ reason: 'interrupted'; runtimeId: string | null }>;

/** The profile directory: `$RELAYGER_HOME`, else the user config dir + `/relayger`. */
export function profileDir(env?: Record<string, string | undefined>): string;

/** A new UUID version 7 (time-ordered), e.g. for a client-chosen message id. */
export function uuidv7(): string;
