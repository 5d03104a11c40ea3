// `send({ask: true, wait})`: after the question is sent, wait for what
// becomes of it: a reply, or every recipient ending without one (the
// delivery's state `failed`, `rejected` or `canceled`). The delivery is read
// again on every `delivery_changed` and `inbox_changed` frame of the
// identity socket, which is open before the question is sent; a slow poll
// covers a socket that is down or a lost frame.

import { RelaygerError, abortError, isTransient } from './errors.js';
import { Wakeup, anySignal, monotonicMs } from './util.js';
import { WakeSocket } from './wake-socket.js';

/** How long `wait: true` waits for a reply. */
const DEFAULT_WAIT_MS = 60_000;
/** The longest wait one call may ask for (as the MCP tool `ask_and_wait`). */
const MAX_WAIT_MS = 600_000;
/** Without a frame for this long, the delivery is read anyway. */
const FALLBACK_MS = { socketOpen: 30_000, socketDown: 5_000 };

/**
 * The delivery states in which no recipient will answer any more
 * (relayger_core's `DeliveryState::is_unanswered_end`): the summed-up state
 * is one of them only when every recipient's is.
 */
const UNANSWERED_ENDS = Object.freeze(['failed', 'rejected', 'canceled']);

/**
 * How long a `send`'s `wait` option waits, in ms: `true` for the default,
 * `{timeoutMs}` for another; undefined for no wait. Refuses a wait for a
 * message that is not a question, which nobody answers.
 */
export function waitTimeoutMs(wait, ask) {
  if (wait === undefined || wait === false) return undefined;
  if (!ask) throw new RelaygerError('invalid_argument', '`wait` needs `ask: true`: only a question is answered');
  if (wait === true) return DEFAULT_WAIT_MS;
  const timeoutMs = wait?.timeoutMs ?? DEFAULT_WAIT_MS;
  if (!(Number.isSafeInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= MAX_WAIT_MS)) {
    throw new RelaygerError('invalid_argument', `\`wait.timeoutMs\` must be an integer from 1 to ${MAX_WAIT_MS}`);
  }
  return timeoutMs;
}

/**
 * Sends a question with `sendQuestion()` and waits up to `timeoutMs` for
 * its answer: resolves `{question, reply, delivery}` with the reply
 * envelope (the earliest of the recipients' replies), or with `reply: null`
 * once the delivery's state is an unanswered end. Rejects with a
 * RelaygerError `timeout` (`details: {question, delivery}`) when neither
 * came in time; the question stays sent. `signal` (the caller's) and
 * `shutdown` (the client's disconnect) end the wait.
 */
export async function sendAndWait(client, sendQuestion, { timeoutMs, signal, shutdown }) {
  const stop = anySignal([signal, shutdown]);
  if (stop.signal.aborted) throw abortError(stop.signal);
  const waiter = new AnswerWaiter(client, stop.signal);
  try {
    // Listening before the question exists: no change of it goes unsignalled.
    await waiter.listen();
    const question = await sendQuestion();
    return await waiter.wait(question, timeoutMs);
  } finally {
    waiter.close();
    stop.dispose();
  }
}

class AnswerWaiter {
  constructor(client, signal) {
    this.client = client;
    this.signal = signal;
    this.socketOpen = false;
    this.wakeup = new Wakeup();
    this.onAbort = () => this.wakeup.wake();
    signal.addEventListener('abort', this.onAbort, { once: true });
    this.socket = new WakeSocket(client, '/v1/socket', {
      wakeOn: ['delivery_changed', 'inbox_changed'],
      onWake: () => this.wakeup.wake(),
      onEvent: ({ event }) => {
        this.socketOpen = event === 'socket_connected';
      },
    });
  }

  async listen() {
    this.socketOpen = await this.socket.connect(this.signal);
    if (this.signal.aborted) throw abortError(this.signal);
  }

  async wait(question, timeoutMs) {
    const { conversationId, messageId } = question;
    const deadline = monotonicMs() + timeoutMs;
    const opts = { signal: this.signal };
    let delivery = null;
    for (;;) {
      // A frame from here on means another look.
      this.wakeup.pending = false;
      try {
        delivery = await this.client.delivery(conversationId, messageId, opts);
        const reply = await this.earliestReply(delivery, opts);
        if (reply) return { question, reply, delivery };
        if (UNANSWERED_ENDS.includes(delivery.state)) return { question, reply: null, delivery };
      } catch (error) {
        if (this.signal.aborted) throw abortError(this.signal);
        // A server restarting while we wait: look again later.
        if (!isTransient(error)) throw error;
      }
      const left = deadline - monotonicMs();
      if (left <= 0) {
        throw new RelaygerError(
          'timeout',
          `no reply to ${messageId} within ${timeoutMs} ms (the question was sent)`,
          { details: { question, delivery } },
        );
      }
      await this.wakeup.sleep(Math.min(left, this.socketOpen ? FALLBACK_MS.socketOpen : FALLBACK_MS.socketDown));
      if (this.signal.aborted) throw abortError(this.signal);
    }
  }

  /** The first reply in the room's order among the recipients' replies, or null. */
  async earliestReply(delivery, opts) {
    const ids = delivery.recipients.map((r) => r.replyMessageId).filter(Boolean);
    if (ids.length === 0) return null;
    const replies = await Promise.all(ids.map((id) => this.client.getMessage(delivery.conversationId, id, opts)));
    return replies.reduce((first, reply) => (reply.seq < first.seq ? reply : first));
  }

  close() {
    this.signal.removeEventListener('abort', this.onAbort);
    this.socket.close();
  }
}
