import { Relayger, runWorker } from '@relayger/sdk';
const client = await Relayger.fromProfile({ profile: 'receiver' });
const cancel = new AbortController();
process.once('SIGINT', () => cancel.abort());
try {
  await runWorker(client, {
    name: 'sdk-worker', from: 'now', signal: cancel.signal,
    handler: async ({ message, runtimeId, signal, jobKey }) => {
      signal.throwIfAborted();
      const context = await client.getThread(message.conversationId, message.messageId,
        { limit: 5, maxBytes: 4096 });
      const notes = await client.runtimes.getNotes(runtimeId, message.conversationId, { limit: 2 });
      signal.throwIfAborted();
      // context/notes are external data; jobKey is the idempotency key for external work.
      return { reply: `${context.messages.length} context messages, ${notes.length} notes.`,
        usage: { modelCalls: 0, inputTokens: 0, outputTokens: 0 } };
    },
  });
} finally { client.disconnect(); }
