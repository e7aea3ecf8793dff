/**
 * What the batcher counts (SPEC §4.1) and how drops, and the time back-pressure took, reach the
 * operator: through the OTel `diag` logger, summed over an interval, never once per span (a flood
 * of log lines about a flood of spans would harm the host twice).
 */
import type { Log } from '../log.js';

/** Why a record was given up. Every record ends delivered or dropped for exactly one of these. */
export type DropReason = 'queue_full' | 'rejected' | 'auth' | 'retries_exhausted' | 'too_large' | 'shutdown';

export const DROP_REASONS: readonly DropReason[] = [
  'queue_full',
  'rejected',
  'auth',
  'retries_exhausted',
  'too_large',
  'shutdown',
];

/** A fresh set of drop counters, every reason at 0. */
export function zeroDrops(): Record<DropReason, number> {
  return Object.fromEntries(DROP_REASONS.map((reason) => [reason, 0])) as Record<DropReason, number>;
}

/**
 * A snapshot of the batcher's counters. Counts are of records (one record = one span = one call,
 * sent as a start and an end item, or as one completed call); byte figures are UTF-8 bytes of
 * JSON, estimated until a record is serialised and exact afterwards.
 */
export interface DeliveryStats {
  /** Records waiting for a batch. */
  readonly queued: number;
  /** Bytes held by the batcher: queued plus in-flight records (the figure `maxQueueBytes` bounds). */
  readonly queuedBytes: number;
  /** Records in a batch being sent, split, or waiting in backoff. */
  readonly inFlight: number;
  /** Records the service acknowledged. */
  readonly delivered: number;
  /** Requests sent again after a retryable failure. */
  readonly retried: number;
  /** Requests the service acknowledged with a 2xx. */
  readonly batchesSent: number;
  /** Records given up, by reason. */
  readonly dropped: Readonly<Record<DropReason, number>>;
}

/** How often accumulated drops (and back-pressure) are reported through `diag`. */
export const DROP_REPORT_INTERVAL_MS = 10_000;

/**
 * Sums drops by reason and reports them as a warning at most once per interval (to `diag`, and to
 * stderr while `diag` has no logger: see log.ts); in the same report, as `info`, how long
 * back-pressure held the application's event loop (`backpressureMs`), so that a producer slowed
 * down by delivery can tell why. The timer exists only while there is something to report, and
 * is `unref()`ed.
 */
export class DeliveryReporter {
  readonly #pending = new Map<DropReason, number>();
  readonly #lastReason = new Map<DropReason, string>();
  #backpressureMs = 0;
  #backpressureSince: number | undefined;
  readonly #intervalMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When drops were last reported (`performance.now()`). */
  #reportedAt: number | undefined;

  readonly #log: Log;

  constructor(log: Log, intervalMs: number = DROP_REPORT_INTERVAL_MS) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  /** Note `count` records dropped for `reason`; `detail` (a server's reason) is kept for the report. */
  record(reason: DropReason, count: number, detail?: string): void {
    if (count <= 0) return;
    this.#pending.set(reason, (this.#pending.get(reason) ?? 0) + count);
    if (detail !== undefined) this.#lastReason.set(reason, detail);
    this.#startTimer();
  }

  /** Note `ms` of the application's event loop given to delivery by back-pressure. */
  recordBackpressure(ms: number): void {
    if (!(ms > 0)) return;
    this.#backpressureSince ??= performance.now();
    this.#backpressureMs += ms;
    this.#startTimer();
  }

  #startTimer(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => this.report(), this.#intervalMs);
    this.#timer.unref?.();
  }

  /**
   * Report now what accumulated, unless drops were reported less than an interval ago (then the
   * timer will). For the end of a flush: a script that ends after it never reaches the timer,
   * and an app that flushes often still gets at most one report per interval.
   */
  reportIfDue(): void {
    if (this.#reportedAt !== undefined && performance.now() - this.#reportedAt < this.#intervalMs) return;
    this.report();
  }

  /** Report now whatever accumulated (used by the timer and by shutdown). */
  report(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.size === 0 && this.#backpressureSince === undefined) return;
    this.#reportedAt = performance.now();
    this.#reportBackpressure();
    if (this.#pending.size === 0) return;
    const parts: string[] = [];
    for (const reason of DROP_REASONS) {
      const count = this.#pending.get(reason);
      if (count === undefined) continue;
      const detail = this.#lastReason.get(reason);
      parts.push(detail === undefined ? `${reason}=${count}` : `${reason}=${count} (last: ${detail})`);
    }
    this.#pending.clear();
    this.#lastReason.clear();
    this.#log.warn(`callbridge: dropped spans: ${parts.join(', ')}`);
  }

  #reportBackpressure(): void {
    const since = this.#backpressureSince;
    if (since === undefined) return;
    const waited = Math.round(this.#backpressureMs);
    const over = Math.max(1, Math.round((performance.now() - since) / 1000));
    this.#backpressureMs = 0;
    this.#backpressureSince = undefined;
    this.#log.info(
      `callbridge: spans were made faster than they could be delivered; the application's event loop ` +
        `gave ${waited} ms to delivery over the last ${over} s to keep up (backpressureMs)`,
    );
  }
}
