// What a callback returns, checked before it goes to the server: a bad
// result becomes a failed attempt instead of a request the server refuses.

const RESULT_KEYS = new Set(['reply', 'skip', 'note', 'usage', 'error']);
const USAGE_KEYS = ['modelCalls', 'inputTokens', 'outputTokens'];
const CODE = /^[a-z][a-z0-9_]*$/;

export function validUsage(usage) {
  return (
    usage !== null &&
    typeof usage === 'object' &&
    !Array.isArray(usage) &&
    Object.keys(usage).every((key) => USAGE_KEYS.includes(key)) &&
    USAGE_KEYS.every((key) => Number.isSafeInteger(usage[key]) && usage[key] >= 0)
  );
}

/**
 * Checks a callback's return value. Returns `{ result }` ready for finish,
 * or `{ invalid: why, code, usage? }` (`code` as the shared fixtures name it).
 */
export function checkResult(value) {
  if (value === undefined || value === null) return { result: {} };
  if (typeof value !== 'object' || Array.isArray(value)) {
    return {
      invalid: 'the callback must return an object {reply?, skip?, note?, usage?} or {error, usage?}',
      code: 'not_an_object',
    };
  }
  const unknown = Object.keys(value).filter((key) => !RESULT_KEYS.has(key) && value[key] !== undefined);
  const usageOk = value.usage === undefined || validUsage(value.usage);
  const usage = usageOk && value.usage !== undefined ? { ...value.usage } : undefined;
  const invalid = (code, why) => ({ invalid: why, code, usage });
  if (unknown.length > 0) return invalid('unknown_field', `unknown result field \`${unknown[0]}\``);
  if (!usageOk) return invalid('invalid_field', 'usage must be {modelCalls, inputTokens, outputTokens} of non-negative integers');
  for (const key of ['reply', 'skip', 'error']) {
    if (value[key] !== undefined && typeof value[key] !== 'string') {
      return invalid('invalid_field', `\`${key}\` must be a non-empty string`);
    }
    if (value[key] === '') return invalid('empty_field', `\`${key}\` must be a non-empty string`);
  }
  if (value.reply !== undefined && value.skip !== undefined) return invalid('reply_and_skip', 'a result has `reply` or `skip`, not both');
  if (value.error !== undefined) {
    if (value.reply !== undefined || value.skip !== undefined || value.note !== undefined) {
      return invalid('error_with_others', 'a failed result has only `error` and `usage`');
    }
    return { result: usage ? { error: value.error, usage } : { error: value.error } };
  }
  const result = {};
  for (const key of ['reply', 'skip', 'note']) if (value[key] !== undefined) result[key] = value[key];
  if (usage) result.usage = usage;
  return { result };
}

/** The `error` a thrown exception becomes, and the usage it carried, if any. */
export function failureOf(error) {
  const code = typeof error?.code === 'string' && CODE.test(error.code) ? error.code : 'handler_error';
  const message = typeof error?.message === 'string' && error.message !== '' ? error.message : String(error);
  const text = `${code}: ${message}`.slice(0, 500);
  return validUsage(error?.usage) ? { error: text, usage: { ...error.usage } } : { error: text };
}
