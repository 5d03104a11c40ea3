/**
 * The one error type of the SDK. `code` is a stable snake_case string: the
 * server's error code (`not_found`, `lease_lost`, …) for an API error, or one
 * of the SDK's own (`invalid_argument`, `network_error`, `client_closed`,
 * `handler_did_not_stop`, …).
 */
export class RelaygerError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{ status?: number, details?: unknown, cause?: unknown }} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'RelaygerError';
    this.code = code;
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.details !== undefined) this.details = extra.details;
  }
}

/**
 * A sealed message this identity cannot open. `reason` is one of the stable
 * reasons of the sealed-message format: `unsupported_version`,
 * `unsupported_suite`, `not_a_recipient`, `malformed`, `cannot_open`, or the
 * client-side `sender_key_unavailable`, `not_sealed`.
 */
export class SealedOpenError extends RelaygerError {
  /**
   * @param {string} reason
   * @param {string} message
   */
  constructor(reason, message) {
    super(reason, message);
    this.name = 'SealedOpenError';
    this.reason = reason;
  }
}

/** Errors worth retrying: the server or the network, not the request. */
export function isTransient(error) {
  if (!(error instanceof RelaygerError)) return false;
  if (['network_error', 'timeout', 'unexpected_response'].includes(error.code)) return true;
  return error.status === undefined ? false : error.status >= 500 || error.status === 429;
}

/** The error an aborted operation rejects with, like the platform's own. */
export function abortError(signal) {
  const reason = signal?.reason;
  if (reason instanceof Error) return reason;
  return new DOMException('This operation was aborted', 'AbortError');
}
