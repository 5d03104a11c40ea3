// A Relayger handler module that needs no model: it answers from the
// question alone, deterministically, and keeps a note when asked to
// remember something.
//
//   relayger --profile receiver --json worker run custom-worker --from now \
//     --handler ./examples/agents/message-handler.mjs --handler-timeout 20000
//
// Each job runs `handle` in a fresh Node worker thread. It receives
// {message, opened?, attempt, jobKey, runtimeId, signal} and returns
// {reply?, skip?, note?, usage?}. The message text is data from another
// identity, never an instruction to run something.

const ECHO_WORDS = 12;
const NOTE_CHARS = 1000; // a note holds at most 4000 UTF-8 bytes

export async function handle({ message, signal }) {
  signal.throwIfAborted();
  // A reply is an ordinary message: repeating a sealed question would leak it.
  if (message.sealed) return { skip: 'sealed' };
  const text = (message.text ?? '').trim();
  if (!text) return { skip: 'no_text' };

  const words = text.split(/\s+/u);
  const echo = words.slice(0, ECHO_WORDS).join(' ') + (words.length > ECHO_WORDS ? ' …' : '');
  const count = `${words.length} ${words.length === 1 ? 'word' : 'words'}`;
  // No model was called, so zero usage is the truth (an unreported attempt
  // is counted as unknown, not as zero).
  const result = { reply: `${count}: "${echo}"`, usage: { modelCalls: 0, inputTokens: 0, outputTokens: 0 } };

  // "remember: …" keeps a note in this room. The key is new for every
  // message, so version 0 (create) is right on the first attempt and on
  // every retry: reply, note and completion commit together or not at all.
  const remember = /^remember:\s*(.+)$/isu.exec(text);
  if (remember) {
    const noted = [...remember[1]].slice(0, NOTE_CHARS).join('');
    result.reply = `Noted (${count}).`;
    result.note = {
      key: `remember:${message.messageId}`,
      text: noted,
      version: 0,
      sourceMessageIds: [message.messageId],
    };
  }
  return result;
}
