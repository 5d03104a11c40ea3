// runWorker: the persistent assistant listener in JavaScript. The same loop
// as the Rust worker over the HTTP/WebSocket API: register, listen on the
// runtime socket, claim, run the callback under a heartbeated lease, finish.

import { claimWhenJobEnds, nextClaim } from './claim-pacing.js';
import { RAW_REQUEST } from './client.js';
import { RelaygerError, abortError, isTransient } from './errors.js';
import { checkResult, failureOf, validUsage } from './result.js';
import { Wakeup, monotonicMs, sleep, withJitter } from './util.js';
import { WakeSocket } from './wake-socket.js';
import { CONTACT_REQUESTS_HEADER } from './wire.js';

/** After its signal aborts, a callback gets this long to settle. */
const CALLBACK_GRACE_MS = 1000;
const DEFAULT_FALLBACK_POLL_MS = 30_000;
const MAX_BACKOFF_MS = 30_000;
/**
 * How long a stopping worker still waits for the claim it has in flight:
 * the server may already have granted jobs, which are then given back.
 */
const STOPPING_CLAIM_GRACE_MS = 10_000;

/**
 * How long after sending the request that started or renewed a lease the
 * callback may run (relayger_core::lease::local_run_limit_ms): the lease
 * minus the time the callback gets to stop, that capped at a third of the
 * lease. The server measures its expiry from later, so a callback aborted
 * then has stopped before another process can take the job.
 */
function localRunLimitMs(leaseMs, stopMs) {
  return leaseMs - Math.min(stopMs, Math.floor(leaseMs / 3));
}

/**
 * How often a lease is heartbeated (relayger_core::lease::worker_heartbeat_ms):
 * a third of the lease, at most a third of the local run limit, so a
 * renewal may take two periods and still come back before the callback
 * must stop. The periods count from the claim's send, like the lease.
 */
function heartbeatEveryMs(leaseMs, stopMs) {
  return Math.max(100, Math.min(Math.floor(leaseMs / 3), Math.floor(localRunLimitMs(leaseMs, stopMs) / 3)));
}

/**
 * At most this many heartbeats of one job in flight: over a slow link the
 * next goes out before the last answered; on a dead one they stop piling up.
 */
const MAX_BEATS_IN_FLIGHT = 3;

const STUCK = Symbol('stuck');

function backoffMs(failures) {
  return withJitter(Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(failures, 10)));
}

function normalizeOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new RelaygerError('invalid_argument', 'runWorker needs options {name, handler, …}');
  }
  const { name, handler } = options;
  if (typeof name !== 'string' || name === '') throw new RelaygerError('invalid_argument', '`name` is required');
  if (typeof handler !== 'function') throw new RelaygerError('invalid_argument', '`handler` must be a function');
  const from = options.from ?? 'beginning';
  if (from !== 'now' && from !== 'beginning') {
    throw new RelaygerError('invalid_argument', '`from` must be "now" or "beginning"');
  }
  const timeout = options.handlerTimeoutMs;
  if (timeout !== undefined && !(Number.isSafeInteger(timeout) && timeout >= 1 && timeout <= 120_000)) {
    throw new RelaygerError('invalid_argument', '`handlerTimeoutMs` must be an integer from 1 to 120000');
  }
  const poll = options.fallbackPollMs ?? DEFAULT_FALLBACK_POLL_MS;
  if (!(Number.isFinite(poll) && poll >= 100)) {
    throw new RelaygerError('invalid_argument', '`fallbackPollMs` must be at least 100');
  }
  if (options.onEvent !== undefined && typeof options.onEvent !== 'function') {
    throw new RelaygerError('invalid_argument', '`onEvent` must be a function');
  }
  return {
    name,
    from,
    policy: options.policy,
    signal: options.signal,
    acceptContacts: Boolean(options.acceptContacts),
    handler,
    handlerTimeoutMs: timeout,
    onEvent: options.onEvent,
    fallbackPollMs: poll,
  };
}

/**
 * Runs a persistent listener for `options.name` until `options.signal`
 * aborts (then in-flight jobs are released and the promise resolves with
 * `{ reason: 'interrupted', runtimeId }`) or a callback ignores its own
 * signal for more than a second after it aborted (then the promise rejects
 * with a RelaygerError `handler_did_not_stop`). Fatal API errors reject with
 * that error. Every step is reported to `options.onEvent` as an object
 * shaped like the CLI's NDJSON events.
 */
export async function runWorker(client, options) {
  const config = normalizeOptions(options);
  if (typeof client?.[RAW_REQUEST] !== 'function') {
    throw new RelaygerError('invalid_argument', 'runWorker needs a Relayger client');
  }
  return new WorkerLoop(client, config).run();
}

class WorkerLoop {
  constructor(client, config) {
    this.client = client;
    this.config = config;
    this.runtimeId = null;
    this.concurrency = 1;
    this.jobs = new Map();
    this.stopping = false;
    this.stopError = null;
    this.cancelled = false;
    this.wakeup = new Wakeup();
    // A socket signal arrived since the loop last looked.
    this.signalled = false;
    // For every job that ended since the loop last looked: whether the
    // server recorded an end it does not come back from.
    this.ended = [];
    this.contactCount = 0;
    this.contactFailures = new Set();
    this.socket = null;
    this.stopController = new AbortController();
  }

  emit(event) {
    try {
      this.config.onEvent?.(event);
    } catch {
      // A throwing listener must not break the loop.
    }
  }

  wake() {
    this.wakeup.wake();
  }

  /** Waits for a wake-up (socket, finished job, stop) or `ms`; true if woken. */
  async waitForWake(ms) {
    if (this.stopping) return true;
    return this.wakeup.sleep(ms);
  }

  /** Stop taking work: `error` null for a cancel, else why. */
  stop(error) {
    if (error && !this.stopError) this.stopError = error;
    if (this.stopping) return;
    this.stopping = true;
    this.stopController.abort();
    this.wake();
  }

  async run() {
    const { signal } = this.config;
    if (signal?.aborted) {
      // No runtime record is created for a worker that is already cancelled.
      this.emit({ event: 'stopped', reason: 'interrupted' });
      return { reason: 'interrupted', runtimeId: null };
    }
    const onAbort = () => {
      this.cancelled = true;
      for (const run of this.jobs.values()) this.abortJob(run, 'cancelled');
      this.stop(null);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const runtime = await this.register();
      if (runtime) {
        this.runtimeId = runtime.id;
        this.concurrency = Math.max(1, runtime.policy?.concurrency ?? 1);
        this.socket = new WakeSocket(this.client, `/v1/runtimes/${runtime.id}/socket`, {
          onWake: () => {
            this.signalled = true;
            this.wake();
          },
          onEvent: (event) => this.emit(event),
        });
        const connected = await this.socket.connect(this.stopController.signal);
        if (!this.stopping) {
          this.emit({
            event: 'started',
            runtimeId: runtime.id,
            name: runtime.name,
            agentNumber: runtime.agentNumber,
            version: runtime.version,
            from: runtime.from,
            concurrency: this.concurrency,
            socket: connected ? 'connected' : 'unavailable',
            // What it will consider, as `relayger worker run` says it.
            ...(runtime.backlog
              ? { rooms: runtime.backlog.rooms, unscannedMessages: runtime.backlog.unscannedMessages }
              : {}),
            pendingJobs: runtime.jobs?.pending ?? 0,
            policy: runtime.policy,
          });
          await this.loop();
        }
      }
    } catch (error) {
      // Fatal (refused registration, revoked token, …): hand back what is in flight.
      this.stop(error);
      for (const run of this.jobs.values()) this.abortJob(run, 'cancelled');
    }
    try {
      // Every job ends: finished, released, or given up as stuck.
      await Promise.all([...this.jobs.values()].map((run) => run.done));
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.socket?.close();
    }
    return this.finish();
  }

  finish() {
    const error = this.stopError;
    const runtimeId = this.runtimeId;
    if (error) {
      if (error.code === 'handler_did_not_stop') {
        this.emit({ event: 'stopped', reason: 'handler_did_not_stop', jobKey: error.jobKey });
      } else {
        const code = typeof error.code === 'string' ? error.code : 'internal';
        this.emit({ event: 'stopped', reason: 'error', code, message: error.message });
      }
      if (error.runtimeId === undefined) error.runtimeId = runtimeId;
      throw error;
    }
    this.emit({ event: 'stopped', reason: 'interrupted' });
    return { reason: 'interrupted', runtimeId };
  }

  /** Registers (or re-attaches) the runtime; null when cancelled meanwhile. */
  async register() {
    const { name, from, policy } = this.config;
    for (let failures = 0; ; failures++) {
      try {
        const response = await this.client[RAW_REQUEST]('POST', '/v1/runtimes', {
          body: { name, from, policy },
          signal: this.stopController.signal,
        });
        return this.stopping ? null : response.body;
      } catch (error) {
        if (this.stopping) return null;
        if (!isTransient(error)) throw error;
        await this.backoff('register', error, failures);
        if (this.stopping) return null;
      }
    }
  }

  async backoff(operation, error, failures) {
    const delayMs = backoffMs(failures);
    this.emit({ event: 'unavailable', during: operation, error: `${error.code}: ${error.message}`, retryInMs: delayMs });
    try {
      await sleep(delayMs, this.stopController.signal);
    } catch {
      // Stopped while waiting.
    }
  }

  /**
   * Claims, runs what was granted, and waits for a reason to claim again,
   * paced by core's rule (claim-pacing.js): at once while more is pending,
   * at a `retryAt` (an idle answer's, or a granting one's: another lease's
   * expiry), on a socket signal, on a job's end that may matter, or at the
   * fallback poll.
   */
  async loop() {
    const { handlerTimeoutMs, fallbackPollMs } = this.config;
    const claimPath = `/v1/runtimes/${this.runtimeId}/claim`;
    let failures = 0;
    let claimNow = true;
    // The last claim left claimable work behind (`morePending` or
    // `workLeft`): a job's end is then a reason to claim again.
    let workLeft = true;
    // On the monotonic clock.
    let retryAt = null;
    let fallbackAt = monotonicMs() + withJitter(fallbackPollMs, 0.1);
    // Idle claims in a row that only a `retryAt` timer woke.
    let retryStreak = 0;
    // The due `retryAt` the last claim was sent at once for.
    let previousDue = null;
    // A socket signal arrived since the last claim.
    let signalled = false;
    while (!this.stopping) {
      this.wakeup.pending = false;
      for (const final of this.ended.splice(0)) {
        if (claimWhenJobEnds(workLeft, final)) claimNow = true;
      }
      if (this.signalled) {
        this.signalled = false;
        signalled = true;
        claimNow = true;
        retryStreak = 0;
      }
      const now = monotonicMs();
      if (retryAt !== null && now >= retryAt) {
        retryAt = null;
        retryStreak++;
        claimNow = true;
      }
      if (now >= fallbackAt) {
        fallbackAt = now + withJitter(fallbackPollMs, 0.1);
        claimNow = true;
      }
      const free = this.concurrency - this.jobs.size;
      // A callback whose signal aborted may be about to prove stuck: start
      // nothing next to it until it settles.
      const inGrace = [...this.jobs.values()].some((run) => run.abortReason && !run.settled);
      // A signal while every slot is busy still claims once (for one job:
      // the server counts the leases, so it grants one only if a slot is
      // free there): the answer carries the contact-request count and moves
      // the scan on, as with the Rust worker.
      const probe = signalled && free <= 0;
      if (!claimNow || (free <= 0 && !probe) || inGrace) {
        const until = claimNow ? Infinity : Math.min(retryAt ?? Infinity, fallbackAt);
        await this.waitForWake(until - monotonicMs());
        continue;
      }
      claimNow = false;
      signalled = false;
      const sentAt = monotonicMs();
      let response;
      try {
        response = await this.claim(claimPath, { maxJobs: Math.max(free, 1), handlerTimeoutMs });
        failures = 0;
      } catch (error) {
        if (this.stopping) break;
        if (!isTransient(error)) throw error;
        await this.backoff('claim', error, failures++);
        claimNow = true;
        continue;
      }
      fallbackAt = monotonicMs() + withJitter(fallbackPollMs, 0.1);
      const body = response.body ?? {};
      const jobs = body.jobs ?? [];
      if (this.stopping) {
        // Granted as the worker stopped: hand the jobs straight back, so no
        // attempt is spent on a job no callback ran.
        await Promise.all(jobs.map((job) => this.release(job)));
        break;
      }
      const serverDate = Date.parse(response.headers.get('date') ?? '');
      const retryAtMs = body.retryAt ? Date.parse(body.retryAt) : Number.NaN;
      const next = nextClaim(
        {
          granted: jobs.length,
          morePending: Boolean(body.morePending),
          retryAt: Number.isNaN(retryAtMs) ? null : retryAtMs,
          serverDate: Number.isNaN(serverDate) ? null : serverDate,
        },
        { localNow: Date.now(), retryStreak, previousDue, fallbackMs: fallbackPollMs },
      );
      if (jobs.length > 0) retryStreak = 0;
      // Absent (an older server): any job's end is a reason to claim.
      workLeft = Boolean(body.morePending) || (body.workLeft ?? true);
      retryAt = null;
      previousDue = null;
      if (next.now) {
        claimNow = true;
        previousDue = next.due;
      } else if (next.afterMs !== undefined) {
        retryAt = monotonicMs() + next.afterMs;
      }
      for (const job of jobs) this.startJob(job, sentAt);
      await this.onContactCount(response.headers);
    }
  }

  /**
   * One claim request. Stopping does not abort it at once: the server may
   * already have granted jobs, which the loop then releases. A claim still
   * unanswered some seconds into the stop is abandoned (its jobs run out
   * their leases).
   */
  async claim(path, body) {
    const abandon = new AbortController();
    let timer;
    const onStop = () => {
      timer = setTimeout(() => abandon.abort(), STOPPING_CLAIM_GRACE_MS);
    };
    const stopping = this.stopController.signal;
    stopping.addEventListener('abort', onStop, { once: true });
    try {
      return await this.client[RAW_REQUEST]('POST', path, { body, signal: abandon.signal });
    } finally {
      stopping.removeEventListener('abort', onStop);
      clearTimeout(timer);
    }
  }

  /** Every claim's answer: report the contact-request count and accept if asked to. */
  async onContactCount(headers) {
    const header = headers.get(CONTACT_REQUESTS_HEADER);
    if (header === null) return;
    const count = Number.parseInt(header, 10);
    if (!Number.isSafeInteger(count) || count < 0) return;
    if (count !== this.contactCount) {
      this.contactCount = count;
      this.emit({ event: 'contact_requests', count });
    }
    if (this.config.acceptContacts && count > 0) await this.acceptContacts();
  }

  async acceptContacts() {
    let requests;
    try {
      requests = await this.client.contacts.requests({ signal: this.stopController.signal });
    } catch (error) {
      if (!this.stopping) this.emit({ event: 'contact_error', code: error.code ?? 'internal', message: error.message });
      return;
    }
    for (const request of requests.incoming ?? []) {
      if (this.stopping) return;
      if (request.state !== 'pending' || this.contactFailures.has(request.id)) continue;
      try {
        await this.client.contacts.accept(request.number, { signal: this.stopController.signal });
        this.emit({ event: 'contact_accepted', number: request.number });
      } catch (error) {
        if (this.stopping) return;
        // Withdrawn or blocked meanwhile: report it, remember it, keep running.
        if (!isTransient(error)) this.contactFailures.add(request.id);
        this.emit({ event: 'contact_error', number: request.number, code: error.code ?? 'internal' });
      }
    }
  }

  startJob(job, claimSentAt) {
    const run = {
      job,
      controller: new AbortController(),
      abortReason: null,
      // The lease began no earlier than the claim request left.
      leaseValidUntil: claimSentAt + job.leaseMs,
      claimSentAt,
      // When the callback must stop unless a heartbeat renews the lease.
      leaseDeadline: 0,
      heartbeatTimer: null,
      timeoutTimer: null,
      // Aborts the callback unless a heartbeat renews the lease first.
      leaseTimer: null,
      beatsInFlight: 0,
      leaseLost: false,
      // The asker canceled the question: the server answered `job_canceled`.
      canceled: false,
      // Not renewed in time: the callback was aborted before the server's expiry.
      leaseExpired: false,
      settled: false,
      finished: false,
      done: null,
    };
    this.jobs.set(job.jobId, run);
    this.armLeaseDeadline(run, claimSentAt, job.leaseMs);
    run.done = this.runJob(run)
      .catch((error) => {
        this.stop(error);
        return false;
      })
      .then((final) => this.ended.push(final === true))
      .finally(() => {
        this.stopTimers(run);
        this.jobs.delete(job.jobId);
        this.wake();
      });
  }

  /**
   * The callback must stop before the lease the request sent at `sentAt`
   * (monotonic) granted for `leaseMs` can expire on the server.
   */
  armLeaseDeadline(run, sentAt, leaseMs) {
    // Renewals may answer out of order: a later-sent one renewed further.
    if (sentAt + leaseMs <= run.leaseValidUntil && run.leaseTimer !== null) return;
    clearTimeout(run.leaseTimer);
    run.leaseValidUntil = sentAt + leaseMs;
    run.leaseDeadline = sentAt + localRunLimitMs(leaseMs, CALLBACK_GRACE_MS);
    run.leaseTimer = setTimeout(() => this.leaseRanOut(run), Math.max(0, run.leaseDeadline - monotonicMs()));
  }

  /** No heartbeat renewed the lease in time: stop renewing, abort the callback. */
  leaseRanOut(run) {
    if (run.settled || run.finished || run.leaseLost || run.leaseExpired || run.canceled) return;
    run.leaseExpired = true;
    clearTimeout(run.heartbeatTimer);
    clearInterval(run.heartbeatTimer);
    run.heartbeatTimer = null;
    this.abortJob(run, 'lease_expired');
  }

  stopTimers(run) {
    clearTimeout(run.heartbeatTimer);
    clearInterval(run.heartbeatTimer);
    clearTimeout(run.timeoutTimer);
    clearTimeout(run.leaseTimer);
    run.heartbeatTimer = null;
  }

  abortJob(run, reason) {
    if (run.abortReason || run.finished) return;
    run.abortReason = reason;
    const message = {
      timeout: `the handler timeout of ${run.job.handlerTimeoutMs} ms passed`,
      lease_lost: 'the lease on this job was lost',
      lease_expired: 'the lease on this job could not be renewed in time',
      question_canceled: 'the asker canceled the question',
      cancelled: 'the worker is stopping',
    }[reason];
    run.controller.abort(new DOMException(message, reason === 'timeout' ? 'TimeoutError' : 'AbortError'));
  }

  jobEvent(run, event, extra = {}) {
    const { job } = run;
    this.emit({ event, jobKey: job.jobKey, messageId: job.message.messageId, ...extra });
  }

  async runJob(run) {
    const { job } = run;
    this.emit({
      event: 'claimed',
      jobId: job.jobId,
      jobKey: job.jobKey,
      conversationId: job.message.conversationId,
      messageId: job.message.messageId,
      attempt: job.attempt,
      handlerTimeoutMs: job.handlerTimeoutMs,
    });
    // Counted from the claim's send, like the lease: over a slow link the
    // claim's answer took a good part of the run limit already, and a first
    // heartbeat a whole period after it came back too late.
    const every = heartbeatEveryMs(job.leaseMs, CALLBACK_GRACE_MS);
    const beat = () => this.heartbeat(run).catch(() => {});
    run.heartbeatTimer = setTimeout(() => {
      if (run.heartbeatTimer === null) return;
      beat();
      run.heartbeatTimer = setInterval(beat, every);
    }, Math.max(0, run.claimSentAt + every - monotonicMs()));
    run.timeoutTimer = setTimeout(() => this.abortJob(run, 'timeout'), job.handlerTimeoutMs);
    if (this.cancelled) this.abortJob(run, 'cancelled');

    const settled = await this.callHandler(run);
    run.settled = settled !== STUCK;
    // The lease deadline guards the callback only.
    clearTimeout(run.leaseTimer);
    this.wake();
    if (settled === STUCK) {
      // Its heartbeats stop, so the lease expires and another process may
      // take the job; this worker takes no new work.
      this.stopTimers(run);
      const error = new RelaygerError(
        'handler_did_not_stop',
        `the callback for job ${job.jobKey} did not stop within ${CALLBACK_GRACE_MS} ms after its signal aborted (${run.abortReason})`,
      );
      error.jobKey = job.jobKey;
      this.jobEvent(run, 'failed', { error: 'handler_did_not_stop' });
      this.stop(error);
      return false;
    }
    if (run.canceled) {
      this.jobEvent(run, 'canceled');
      return true;
    }
    if (run.leaseLost) {
      this.jobEvent(run, 'failed', { error: 'lease_lost' });
      return false;
    }
    if (run.leaseExpired) {
      return this.afterExpiry(run);
    }
    let result;
    if (settled.ok) {
      const checked = checkResult(settled.value);
      if (checked.invalid) {
        const error = `invalid_handler_result: ${checked.invalid}`;
        result = checked.usage ? { error, usage: checked.usage } : { error };
      } else {
        result = checked.result;
      }
    } else if (run.abortReason === 'cancelled') {
      return this.release(job, run);
    } else if (run.abortReason === 'timeout') {
      const usage = validUsage(settled.error?.usage) ? { usage: { ...settled.error.usage } } : {};
      result = { error: 'handler_timeout', ...usage };
    } else {
      result = failureOf(settled.error);
    }
    return this.finishJob(run, result);
  }

  /**
   * Runs the callback; resolves `{ok, value}` / `{ok: false, error}` when it
   * settles, or STUCK when it is still running a second after its signal
   * aborted.
   */
  async callHandler(run) {
    const { job } = run;
    const signal = run.controller.signal;
    const input = {
      message: job.message,
      attempt: job.attempt,
      jobKey: job.jobKey,
      runtimeId: this.runtimeId,
      signal,
    };
    const outcome = (async () => {
      if (job.message.sealed) {
        try {
          input.opened = await this.client.open(job.message, { signal });
        } catch (error) {
          if (signal.aborted) throw abortError(signal);
          input.openError = error.reason ?? error.code ?? 'cannot_open';
        }
      }
      signal.throwIfAborted();
      return this.config.handler(input);
    })().then(
      (value) => ({ ok: true, value }),
      (error) => ({ ok: false, error }),
    );
    let graceTimer;
    let onAbort;
    const stuck = new Promise((resolve) => {
      onAbort = () => {
        graceTimer = setTimeout(() => resolve(STUCK), CALLBACK_GRACE_MS);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([outcome, stuck]);
    } finally {
      clearTimeout(graceTimer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * One heartbeat request: `{ leaseMs }` renewed, else its error thrown.
   * It may take `timeoutMs` (default: a third of the lease, at least 1 s).
   */
  async renew(job, timeoutMs = Math.max(1000, Math.floor(job.leaseMs / 3))) {
    const response = await this.client[RAW_REQUEST](
      'POST',
      `/v1/runtimes/${this.runtimeId}/jobs/${job.jobId}/heartbeat`,
      { body: { owner: job.owner, version: job.version }, timeoutMs },
    );
    return { leaseMs: response.body?.leaseMs ?? job.leaseMs };
  }

  async heartbeat(run) {
    if (run.beatsInFlight >= MAX_BEATS_IN_FLIGHT || run.finished || run.leaseLost || run.leaseExpired || run.canceled) {
      return;
    }
    run.beatsInFlight++;
    const sentAt = monotonicMs();
    try {
      // It may take until the deadline as it is now (a later answer renews
      // less than that allows) and is not given up earlier: an aborted
      // request closes its connection, and the next beat pays for a new one.
      const { leaseMs } = await this.renew(run.job, Math.max(100, Math.ceil(run.leaseDeadline - sentAt)));
      // A renewal that comes back after the deadline changes nothing: the
      // callback was already told to stop.
      if (!run.settled && !run.leaseExpired && !run.leaseLost && !run.canceled) this.armLeaseDeadline(run, sentAt, leaseMs);
      else run.leaseValidUntil = Math.max(run.leaseValidUntil, sentAt + leaseMs);
    } catch (error) {
      if (run.finished) return;
      if (error.code === 'job_canceled') {
        // Nothing of the job may be written now: stop the callback.
        this.stopTimers(run);
        run.canceled = true;
        this.abortJob(run, 'question_canceled');
      } else if (!isTransient(error)) {
        // 409 lease_lost: another owner may have the job now.
        this.stopTimers(run);
        run.leaseLost = true;
        this.abortJob(run, 'lease_lost');
      }
      // Unreachable: the next beat tries again; the lease deadline decides.
    } finally {
      run.beatsInFlight--;
    }
  }

  /**
   * The callback was aborted because its lease was not renewed in time:
   * one more heartbeat learns the truth. Renewed after all: the job is
   * given back; refused: the lease is lost (or the question canceled); no
   * answer: the lease runs out on the server, which retries the job. True
   * when the job ended for good (canceled).
   */
  async afterExpiry(run) {
    const { job } = run;
    try {
      await this.renew(job);
    } catch (error) {
      if (error.code === 'job_canceled') {
        this.jobEvent(run, 'canceled');
        return true;
      }
      this.jobEvent(run, 'failed', { error: isTransient(error) ? 'lease_expired' : 'lease_lost' });
      return false;
    }
    return this.release(job, run);
  }

  /** Sends the result; true when the server recorded an end the job does not come back from. */
  async finishJob(run, result) {
    const { job } = run;
    const path = `/v1/runtimes/${this.runtimeId}/jobs/${job.jobId}/finish`;
    let body = { owner: job.owner, version: job.version, result };
    for (let failures = 0; ; ) {
      if (run.leaseLost) {
        this.jobEvent(run, 'failed', { error: 'lease_lost' });
        return false;
      }
      let response;
      try {
        response = await this.client[RAW_REQUEST]('POST', path, { body });
      } catch (error) {
        if (error.code === 'job_canceled') {
          // The asker canceled the question: no reply is written, nothing is retried.
          this.jobEvent(run, 'canceled');
          return true;
        }
        if (error.code === 'lease_lost' || error.code === 'fingerprint_mismatch') {
          this.jobEvent(run, 'failed', { error: error.code });
          return false;
        }
        if (isTransient(error) && monotonicMs() < run.leaseValidUntil) {
          // The same body again: a finish is idempotent by its fingerprint.
          await sleep(Math.min(backoffMs(failures++), Math.max(0, run.leaseValidUntil - monotonicMs())));
          continue;
        }
        if (!isTransient(error) && body.result.error === undefined && error.code !== 'client_closed') {
          // The commit rolled back (stale note version, lost permission, …):
          // report it as a failed attempt, retried with backoff by the server.
          body = { ...body, result: result.usage ? { error: error.code, usage: result.usage } : { error: error.code } };
          continue;
        }
        this.jobEvent(run, 'failed', { error: error.code });
        return false;
      } finally {
        run.finished = run.finished || response !== undefined;
      }
      return this.reportOutcome(run, body.result, response.body);
    }
  }

  /** The event for the server's outcome; true when it ends the job for good. */
  reportOutcome(run, result, outcome) {
    switch (outcome?.outcome) {
      case 'replied':
        this.jobEvent(run, 'replied', outcome.replyMessageId ? { replyMessageId: outcome.replyMessageId } : {});
        break;
      case 'skipped':
        this.jobEvent(run, 'skipped', { reason: result.skip });
        break;
      case 'handled':
        this.jobEvent(run, 'handled');
        break;
      case 'dead_letter':
        this.jobEvent(run, 'dead_letter', { error: result.error });
        break;
      default:
        this.jobEvent(run, 'failed', { error: result.error, ...(outcome?.retryAt ? { retryAt: outcome.retryAt } : {}) });
        return false;
    }
    return true;
  }

  /**
   * Hands a job back at once (the worker is stopping). True when the job
   * ended for good instead: the asker canceled the question meanwhile.
   */
  async release(job, run) {
    if (run) run.finished = true;
    const about = { jobKey: job.jobKey, messageId: job.message.messageId };
    try {
      await this.client[RAW_REQUEST]('POST', `/v1/runtimes/${this.runtimeId}/jobs/${job.jobId}/release`, {
        body: { owner: job.owner, version: job.version },
      });
      this.emit({ event: 'released', ...about });
    } catch (error) {
      if (error.code === 'job_canceled') {
        this.emit({ event: 'canceled', ...about });
        return true;
      }
      // Not handed back: its lease simply expires.
      this.emit({ event: 'failed', ...about, error: error.code ?? 'internal' });
    }
    return false;
  }
}
