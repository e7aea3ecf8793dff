/**
 * What the batcher counts (SPEC §4.1) and how drops reach the operator: through the OTel `diag`
 * logger, summed over an interval, never once per span (a flood of log lines about a flood of
 * spans would harm the host twice).
 */
import { diag } from '@opentelemetry/api';

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

/** How often accumulated drops are reported through `diag.warn`. */
export const DROP_REPORT_INTERVAL_MS = 10_000;

/**
 * Sums drops by reason and reports them through `diag.warn` at most once per interval. The timer
 * exists only while there is something to report, and is `unref()`ed.
 */
export class DropReporter {
  readonly #pending = new Map<DropReason, number>();
  readonly #lastReason = new Map<DropReason, string>();
  readonly #intervalMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When drops were last reported (`performance.now()`). */
  #reportedAt: number | undefined;

  constructor(intervalMs: number = DROP_REPORT_INTERVAL_MS) {
    this.#intervalMs = intervalMs;
  }

  /** Note `count` records dropped for `reason`; `detail` (a server's reason) is kept for the report. */
  record(reason: DropReason, count: number, detail?: string): void {
    if (count <= 0) return;
    this.#pending.set(reason, (this.#pending.get(reason) ?? 0) + count);
    if (detail !== undefined) this.#lastReason.set(reason, detail);
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.report(), this.#intervalMs);
      this.#timer.unref?.();
    }
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
    if (this.#pending.size === 0) return;
    this.#reportedAt = performance.now();
    const parts: string[] = [];
    for (const reason of DROP_REASONS) {
      const count = this.#pending.get(reason);
      if (count === undefined) continue;
      const detail = this.#lastReason.get(reason);
      parts.push(detail === undefined ? `${reason}=${count}` : `${reason}=${count} (last: ${detail})`);
    }
    this.#pending.clear();
    this.#lastReason.clear();
    diag.warn(`callbridge: dropped spans: ${parts.join(', ')}`);
  }
}
