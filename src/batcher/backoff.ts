/**
 * Retry timing of the batcher (SPEC §4.5): exponential backoff with full jitter, never sooner than
 * the server's `Retry-After`. Kept pure so the policy is tested on its own.
 */

/** Ceiling of the first retry's delay. */
export const INITIAL_BACKOFF_MS = 500;
/** Each further retry doubles the ceiling... */
export const BACKOFF_FACTOR = 2;
/** ...up to this cap. */
export const MAX_BACKOFF_MS = 30_000;

/**
 * Delay before retry number `attempt` (1 for the first retry): the larger of the server's
 * `Retry-After` (`retryAfterMs`, already converted to milliseconds by the transport) and the
 * backoff of {@link jitteredBackoff}.
 *
 * `Retry-After` is the earliest the server wants the request again, a floor and not a licence to
 * skip the backoff: a service that answers `Retry-After: 0` (or an HTTP date in the past) to every
 * request would otherwise be sent each batch again at once, in a loop of hundreds of requests a
 * second, for the whole of `maxRetryMs`.
 *
 * @example nextDelay(3, undefined, () => 0.5) // 1000: half of the 2000 ms ceiling of retry 3
 * @example nextDelay(3, 0, () => 0.5) // 1000 as well: Retry-After 0 does not cut the backoff
 * @example nextDelay(1, 7000, () => 0.5) // 7000: the server asked for longer than the backoff
 */
export function nextDelay(attempt: number, retryAfterMs: number | undefined, random: () => number = Math.random): number {
  const backoff = jitteredBackoff(attempt, random);
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs)) return backoff;
  return Math.max(Math.ceil(retryAfterMs), backoff);
}

/**
 * "Full jitter": a uniform draw in `[0, min(MAX_BACKOFF_MS, INITIAL_BACKOFF_MS *
 * BACKOFF_FACTOR^(attempt-1)))`, which spreads the retries of many clients recovering from the
 * same outage instead of synchronising them.
 */
function jitteredBackoff(attempt: number, random: () => number): number {
  const exponent = Math.max(0, Math.floor(attempt) - 1);
  // Compare in the exponent domain first: BACKOFF_FACTOR ** 1000 is Infinity, which is fine, but
  // capping early keeps the arithmetic obviously finite.
  const ceiling = exponent >= 32 ? MAX_BACKOFF_MS : Math.min(MAX_BACKOFF_MS, INITIAL_BACKOFF_MS * BACKOFF_FACTOR ** exponent);
  const draw = random();
  const unit = Number.isFinite(draw) ? Math.min(Math.max(draw, 0), 1) : 0;
  // A random source that returns 1 (Math.random never does) still stays below the ceiling.
  return Math.min(Math.floor(unit * ceiling), ceiling - 1);
}
