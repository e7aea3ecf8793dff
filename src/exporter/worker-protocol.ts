/**
 * The messages between the exporter (on the application's thread) and its delivery worker. Both
 * sides are built from this one declaration, so they cannot drift apart within a build; the
 * worker script is always the one shipped next to the bundle that starts it.
 *
 * Order matters and is guaranteed by the message port: a `flush` is handled after every `spans`
 * message posted before it, which is how `forceFlush()` covers the spans in transit.
 */
import type { MessagePort } from 'node:worker_threads';
import type { DeliveryStats } from '../batcher/index.js';
import type { ResolvedExporterOptions } from '../options.js';
import type { SpanTransfer } from './span-transfer.js';

/** What the worker is started with (`workerData`). */
export interface DeliveryWorkerData {
  readonly options: ResolvedExporterOptions;
  /** How often the worker reports its counters while they change. */
  readonly statsIntervalMs: number;
  /**
   * Where the worker posts every `FromWorker` message. A channel of its own, not the worker's
   * `parentPort`, so the application's thread can also read it synchronously
   * (`receiveMessageOnPort`) when its event loop does not turn.
   */
  readonly reports: MessagePort;
  /**
   * A counter (one `Int32` on a `SharedArrayBuffer`) the worker increments and notifies after
   * every report, so that the application's thread can sleep until the next one
   * (`Atomics.wait`) when it waits for room (`backpressureMs`).
   */
  readonly reported: Int32Array;
}

/** Application thread -> worker. */
export type ToWorker =
  /** Spans to deliver; `seq` numbers the message so the worker can acknowledge it. */
  | { readonly type: 'spans'; readonly seq: number; readonly spans: readonly SpanTransfer[] }
  /**
   * Answer `done` once every span sent before this message is delivered or dropped. With
   * `reportDrops` (the exit flush), first report the drops not yet reported: the next interval
   * never comes.
   */
  | { readonly type: 'flush'; readonly id: number; readonly reportDrops?: boolean }
  /** Flush for at most `timeoutMs`, drop the rest as `shutdown`, close the pool; then `done`. */
  | { readonly type: 'shutdown'; readonly id: number; readonly timeoutMs: number }
  /**
   * Drop every span held now as `shutdown` and report the drops (`Batcher.dropHeld`: the exit
   * flush's deadline passed), then `done`; spans sent after this are delivered as before.
   */
  | { readonly type: 'dropHeld'; readonly id: number };

/** Where the worker's counters stand; `ackSeq` is the last `spans` message it has queued. */
export interface WorkerStatsReport {
  readonly ackSeq: number;
  readonly stats: DeliveryStats;
  /** The worker's batcher is retrying (`Batcher.isRetrying`): waiting for room would not help. */
  readonly retrying: boolean;
  /** The worker's batcher is delivering (`onDeliveringChanged`): not idle, not only in backoffs. */
  readonly delivering: boolean;
  /** Bytes the worker's batcher holds that are not yet in a request (`Batcher.waitingBytes`). */
  readonly waitingBytes: number;
  /** What the size guesses are scaled by (`Batcher.sizeCorrection`), for the application thread's charges too. */
  readonly sizeCorrection: number;
}

/** Worker -> application thread. */
export type FromWorker =
  /** The worker has loaded and listens: spans are posted from now on. Sent once, first. */
  | { readonly type: 'ready' }
  | ({ readonly type: 'stats' } & WorkerStatsReport)
  /** The request `id` (flush or shutdown) is complete; the counters as they stand then. */
  | ({ readonly type: 'done'; readonly id: number } & WorkerStatsReport)
  /** A `diag` line of the worker, to be logged through the application's `diag` logger. */
  | { readonly type: 'diag'; readonly level: DiagLevel; readonly message: string };

export type DiagLevel = 'error' | 'warn' | 'info' | 'debug' | 'verbose';
