// When the worker claims again: the rule of relayger_core::claim_pacing,
// held to the same cases (relayger-core/fixtures/claim-pacing.json) so the
// JavaScript and the Rust worker pace their claims alike. Times are
// milliseconds since the epoch; `retryAt` is on the database clock.

/** The shortest wait before a claim woken only by a future `retryAt`. */
export const MIN_RETRY_DELAY_MS = 100;
/** The largest that floor grows (it doubles with each such idle claim). */
export const MAX_RETRY_FLOOR_MS = 5000;
/** Clocks closer than this agree: the local clock measures `retryAt`. */
const CLOCK_AGREEMENT_MS = 2000;
/** The `Date` header's resolution: closer than this is due now. */
const DATE_RESOLUTION_MS = 1000;

/**
 * @param {{ granted: number, morePending: boolean, retryAt: number | null, serverDate: number | null }} answer
 *   what a claim answered (`retryAt`: an idle answer's, or a granting
 *   one's — another lease's expiry, when its job may be taken over)
 * @param {{ localNow: number, retryStreak: number, previousDue: number | null, fallbackMs: number }} pacing
 *   the local clock when the answer arrived, idle claims in a row only a
 *   `retryAt` timer woke, the due `retryAt` the last claim was sent at once
 *   for, the fallback poll's interval
 * @returns {{ now: true, due: number | null } | { afterMs: number } | { onSignal: true }}
 *   claim at once (`due`: the `retryAt` this answers, the next `previousDue`),
 *   after `afterMs` unless a signal comes first, or on a signal, a job's end
 *   or the fallback poll
 */
export function nextClaim(answer, pacing) {
  if (answer.morePending) return { now: true, due: null };
  const at = answer.retryAt;
  if (at === null || at === undefined) return { onSignal: true };
  const date = answer.serverDate;
  const reference =
    date !== null && date !== undefined && Math.abs(pacing.localNow - date) >= CLOCK_AGREEMENT_MS
      ? date
      : pacing.localNow;
  if (at < reference + DATE_RESOLUTION_MS && pacing.previousDue !== at) return { now: true, due: at };
  const ahead = Math.max(0, at - reference);
  const floor = Math.min(MIN_RETRY_DELAY_MS * 2 ** Math.min(pacing.retryStreak, 6), MAX_RETRY_FLOOR_MS);
  return { afterMs: Math.min(Math.max(ahead, floor), pacing.fallbackMs) };
}

/**
 * Whether a job's end is a reason to claim again: when the last claim left
 * claimable work behind, or when the job may come back (it failed, was
 * released or lost its lease: only a claim learns its retry time).
 */
export function claimWhenJobEnds(lastClaimLeftWork, jobWasFinal) {
  return lastClaimLeftWork || !jobWasFinal;
}
