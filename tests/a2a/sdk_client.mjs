// Drives a Relayger server's A2A agents with the official JavaScript client
// (@a2a-js/sdk), for tests/tests/a2a_server.rs. Prints one JSON object with
// what each scenario saw. The environment is sdk_client.py's.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';

const BASE = process.env.RELAYGER_URL.replace(/\/+$/, '');

/** A fetch that sends the Relayger token as the bearer. */
function bearerFetch(token) {
  return (url, init = {}) =>
    fetch(url, { ...init, headers: { ...(init.headers ?? {}), Authorization: `Bearer ${token}` } });
}

/** A client for agent `number`, from its card. */
async function clientFor(token, number, clientConfig = {}) {
  const fetchImpl = bearerFetch(token);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      clientConfig,
    }),
  );
  // The card path is resolved relative to this URL: keep the trailing slash.
  return factory.createFromUrl(`${BASE}/a2a/${number}/`);
}

const question = (text) => ({
  message: {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text } }],
  },
});
const textOf = (message) =>
  (message?.parts ?? []).map((part) => part.content?.value ?? '').join('\n');
const stateName = (state) => TaskState[state];

function statusOf(event) {
  const payload = event.payload;
  if (payload?.$case === 'task') return payload.value.status;
  if (payload?.$case === 'statusUpdate') return payload.value.status;
  return undefined;
}

const seen = {};
const asker = process.env.ASKER_TOKEN;
const upper = process.env.UPPERCASE_NUMBER;

const blocking = await clientFor(asker, upper);
const card = await blocking.getAgentCard();
seen.card = {
  name: card.name,
  url: card.supportedInterfaces[0].url,
  binding: card.supportedInterfaces[0].protocolBinding,
  streaming: card.capabilities?.streaming,
};

// Send, blocking: the task comes back completed with the reply.
const task = await blocking.sendMessage(question('hello from javascript'));
seen.send = {
  taskId: task.id,
  state: stateName(task.status.state),
  reply: textOf(task.status.message),
  artifact: task.artifacts.length ? textOf(task.artifacts[0]) : null,
};
seen.get = stateName((await blocking.getTask({ id: task.id })).status.state);

// Streaming: the task, then its states to the end.
const states = [];
let reply = '';
for await (const event of blocking.sendMessageStream(question('stream from javascript'))) {
  const status = statusOf(event);
  if (!status) continue;
  states.push(stateName(status.state));
  if (status.message?.parts?.length) reply = textOf(status.message);
}
seen.stream = { states, reply };

// A handler that throws: FAILED with the reason code.
const failing = await clientFor(asker, process.env.FAILING_NUMBER);
const failed = await failing.sendMessage(question('boom please'));
seen.failing = { state: stateName(failed.status.state), reason: textOf(failed.status.message) };

// Cancel while the handler works: subscribe, wait for WORKING, cancel.
const patient = await clientFor(asker, process.env.PATIENT_NUMBER, { polling: true });
const submitted = await patient.sendMessage(question('take your time'));
const watched = [];
let canceled;
for await (const event of patient.resubscribeTask({ id: submitted.id })) {
  const status = statusOf(event);
  if (!status) continue;
  watched.push(stateName(status.state));
  if (status.state === TaskState.TASK_STATE_WORKING && !canceled) {
    canceled = await patient.cancelTask({ id: submitted.id });
  }
}
seen.cancel = {
  taskId: submitted.id,
  answer: canceled ? stateName(canceled.status.state) : null,
  watched,
};

// Someone who is not the agent's contact is refused.
const stranger = await clientFor(process.env.STRANGER_TOKEN, upper);
try {
  await stranger.sendMessage(question('let me in'));
  seen.stranger = 'answered';
} catch (error) {
  seen.stranger = `${error.name}: ${error.message}`;
}

console.log(JSON.stringify(seen));
