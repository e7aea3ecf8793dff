/**
 * The delivery engine of SPEC §4: a bounded queue of records (ended spans), turned into
 * `call/upsert_batch` requests only when a send slot frees, with retries, splitting and complete
 * mode. Records stay unmapped and unserialised until their batch is built: `add()` is O(1), does
 * no JSON work and never starts a send itself (STYLE "data should travel the shortest way").
 *
 * Event-loop stalls (SPEC §6: under 1 ms while exporting 20 k spans/s): a send is only ever started
 * from a `setImmediate` callback, never inside `add()` (p-queue runs a job synchronously in `add()`
 * when a slot is free), and a batch is mapped and serialised in time slices of `SLICE_BUDGET_MS`
 * with a `setImmediate` between slices. Mapping + serialising one typical span measured 15-40 µs
 * here, so a 500-span batch built in one go stalled the loop for 20-57 ms.
 *
 * One record is one call: a start item and an end item (upsert mode) or one completed call
 * (complete mode). A record's items always travel together (SPEC §3: start and end in the same
 * batch), which is why `maxBatchItems` is at least 2.
 */
import { context } from '@opentelemetry/api';
import PQueue from 'p-queue';
import type { SendOutcome, Transport } from '../client/transport.js';
import type { ResolvedDelivery } from '../options.js';
import { createLog, type Log } from '../log.js';
import { MAX_TIMER_MS } from '../timers.js';
import { JsonWriter } from '../wire/json-writer.js';
import { nextDelay } from './backoff.js';
import { DROP_REPORT_INTERVAL_MS, DeliveryReporter, zeroDrops, type DeliveryStats, type DropReason } from './stats.js';
import { suppressTracing } from './suppress-tracing.js';
import { SizeCorrection } from './size-correction.js';
import { truncateLargestStrings } from './truncate.js';

/** How the batcher turns a record into wire items. Supplied by the exporter (mapping lives there). */
export interface RecordCodec<T> {
  /**
   * A cheap guess of the record's JSON size in bytes, taken at `add()` time for queue bounding
   * (`maxQueueBytes`). It is replaced by the exact size when the record is serialised.
   */
  estimateBytes(record: T): number;
  /** The record as `call/upsert_batch` items (start first, then end). */
  toUpsertItems(record: T): readonly unknown[];
  /**
   * Writes the same items as JSON into `out`, separated by a comma, when the codec can do that for
   * less than `JSON.stringify` of `toUpsertItems` costs: two items whose JSON parses to those
   * items. Used instead of `toUpsertItems` when present. May throw half way; what it wrote is
   * then discarded.
   */
  writeUpsertItems?(record: T, out: JsonWriter): void;
  /** The record as one `calls/complete` entry (complete-mode projects). */
  toCompletedCall(record: T): unknown;
  /** Writes that entry's JSON into `out`, as `writeUpsertItems` does for the items. */
  writeCompletedCall?(record: T, out: JsonWriter): void;
}

export interface BatcherOptions<T> extends ResolvedDelivery {
  /** `entity/project`: names the complete-mode endpoint. */
  readonly projectId: string;
  /** Where requests go (named in the one error about refused credentials). */
  readonly baseUrl: string;
  readonly username: string;
  readonly transport: Transport;
  readonly codec: RecordCodec<T>;
  /** Source of jitter; tests pass a fixed one. @default Math.random */
  readonly random?: () => number;
  /** How often drops are reported through `diag`. @default DROP_REPORT_INTERVAL_MS */
  readonly dropReportIntervalMs?: number;
  /**
   * Called after a batch's records are settled (delivered or dropped), once their bytes no longer
   * count against `maxQueueBytes`. The delivery worker reports its counters from here, so that
   * the application's thread, waiting for room (`backpressureMs`), learns of it at once.
   */
  readonly onBatchSettled?: () => void;
  /**
   * Called when delivery starts or stops: a batch is being built, sent or answered, as opposed to
   * idle or only waiting out backoffs (a batch in its backoff is in flight, `stats().inFlight`, but
   * not being delivered). A stop is told a turn late (see `#noteDelivering`). The delivery worker
   * reports what this says: a flush that waits holds the application's process while the worker
   * delivers, not while it waits out a backoff.
   */
  readonly onDeliveringChanged?: (delivering: boolean) => void;
}

/** The batcher as the exporter sees it. */
export interface Batcher<T> {
  /** Queue one record; `false` when it was dropped (queue full, or after shutdown). Never throws. */
  add(record: T): boolean;
  /**
   * Resolve once every record added before this call is delivered or dropped, and the drops not
   * yet reported are reported (`diag.warn`, see log.ts; at most once per interval). Never rejects.
   */
  forceFlush(): Promise<void>;
  /**
   * Flush (bounded by `timeoutMs`), drop what is left as `shutdown`, close the pool. Idempotent:
   * later calls return the first call's promise.
   * @param timeoutMs how long the flush may take; `0` gives up on everything unsettled at once.
   * @default options.shutdownTimeoutMs
   */
  shutdown(timeoutMs?: number): Promise<void>;
  stats(): DeliveryStats;
  /**
   * A request failed with a retryable error and none has succeeded since: the service is not
   * taking batches now, so waiting for room (`backpressureMs`) would only stall the application.
   */
  isRetrying(): boolean;
  /**
   * A request is on the wire (not only waiting out a backoff): the service, slow or not, has work
   * it may still answer. With `isRetrying()`, it tells a service that is down (retrying, nothing
   * on the wire) from one answering a retry slowly.
   */
  isDelivering(): boolean;
  /**
   * Bytes of records not yet in a request (queued, not in flight): what back-pressure measures
   * against `BACKPRESSURE_SHARE` of `maxQueueBytes`. Requests in flight are delivery under way.
   */
  waitingBytes(): number;
  /**
   * What the records' size guesses are scaled by when charged against `maxQueueBytes`: 1, or more
   * where records weigh more when serialised than their guesses said (see size-correction.ts).
   */
  sizeCorrection(): number;
  /**
   * The process is about to exit: records waiting for a delivery thread that is still loading go
   * out on this thread instead (waiting for it to load costs more than their delivery). A flush
   * after this covers them. Optional: a batcher without such a thread has nothing to do.
   */
  settleForExit?(): void;
  /** The exit flush that `settleForExit` began is over (optional, as that is). */
  exitFlushDone?(): void;
  /**
   * Give up on every record held now (queued, in a request, waiting out a backoff): each is
   * counted as `shutdown` and the drops are reported at once. Not a shutdown: records added later
   * are delivered as before. For the exit flush at its deadline, when the process is expected to
   * end, though a `beforeExit` listener may keep it going. Never rejects.
   */
  dropHeld(): Promise<void>;
  /**
   * `stats()` as they stand at the process's `exit`, when the event loop will not turn again to
   * bring reports from another thread. Optional: a batcher on this thread has nothing to add.
   */
  statsAtExit?(): DeliveryStats;
  /**
   * Report the drops not reported yet now, whatever the interval: the process is about to exit,
   * and the interval's report would never come (the exit flush calls this).
   */
  reportPendingDrops(): void;
}

/** The service's answer that asks for `/v2/{entity}/{project}/calls/complete` (SPEC §2.1). */
export const COMPLETE_MODE_REQUIRED = 'CALLS_COMPLETE_MODE_REQUIRED';

/** Answers that may reject some items of a batch, not the request as such (SPEC §4.7). */
const ITEM_REJECTION_STATUSES: ReadonlySet<number> = new Set([400, 422]);

/** `{"batch":[` + `]}`: the bytes every request body carries besides its items. */
const BODY_START = '{"batch":[';
const BODY_END = ']}';
const ENVELOPE_BYTES = BODY_START.length + BODY_END.length;

/**
 * After a single record still gets a 413, its strings are cut so the record shrinks to this
 * fraction of its size before the one last attempt: the server's limit is unknown, so aim well
 * under what it refused rather than creep towards it one request at a time.
 */
const SHRINK_AFTER_413 = 0.25;

/**
 * How many times in a row a batch's upload may be cut by the peer (`cutDuringUpload`) before the
 * batch is treated as refused for its size (SPEC §4.6). A server that answers 413 on seeing
 * Content-Length and then closes the socket without reading the body makes the kernel reset the
 * connection; when the reset overtakes the answer, all the client sees is `write ECONNRESET`. Once
 * may be a network blip (it is retried as one); twice in a row for the same body is the early 413
 * whose answer was lost, or an outage that resets connections mid-body (a restarting backend
 * behind a TCP proxy). Splitting a batch loses nothing either way; cutting a single record's
 * strings does, so that is done only when a request with no records (`{"batch":[]}`) gets an
 * answer: the server is up, and it is the size it refuses. Measured: with the client on its own
 * thread (the delivery worker) a fault proxy answering with an early 413 lost the answer to the
 * reset in about half the runs, and the batches then retried the same body until `maxRetryMs`.
 */
const UPLOAD_CUTS_BEFORE_SPLIT = 2;
const EMPTY_BODY = Buffer.from(`${BODY_START}${BODY_END}`, 'latin1');

/** After the shutdown timeout aborts requests, how long to wait for them to unwind. */
const ABORT_GRACE_MS = 1000;

/**
 * Longest run of mapping + serialising before the batch builder yields to the event loop. A time
 * budget rather than a record count, since records range from a few hundred bytes to megabytes
 * (one record is never cut: a single huge span costs what its own mapping costs). 0.25 ms: a
 * typical span maps and serialises in 5-15 µs, so a slice can overshoot by that much, and a
 * traced request arriving meanwhile waits at most about a quarter of a millisecond.
 */
export const SLICE_BUDGET_MS = 0.25;

/**
 * The share of `maxQueueBytes` waiting to be sent (queued, not yet in a request) from which
 * back-pressure applies (`backpressureMs`). Low enough that a burst is slowed long before anything
 * is dropped, and far above what steady delivery keeps waiting: at 20 k spans/s of the benchmark's
 * spans (~2.5 KB each) a quarter of the default 64 MiB is ~0.3 s of spans, where a healthy queue
 * waits for at most a batch (~25 ms of them). Requests in flight do not count: they are delivery
 * under way, and waiting for them alone would slow steady traffic with a small bound.
 * Measured in the 200 k-span burst (2026-11-24, with the mark then on all bytes held): with a
 * quarter, half or 0.8 of the bound, 0 spans lost each time and the same spans/s; the peak RSS is
 * lower with a quarter (230-235 MB against 256-309 MB).
 */
export const BACKPRESSURE_SHARE = 0.25;

/**
 * The share of `maxQueueBytes` held in all (requests in flight included) from which back-pressure
 * applies whatever waits: with a small bound, requests in flight alone can fill it, and the next
 * turn's spans would not fit.
 */
export const NEAR_FULL_SHARE = 0.75;

/**
 * A batch goes early, whether full or not, once this share of the back-pressure mark waits: below
 * the mark, so that traffic the service keeps up with never reaches it.
 */
const EARLY_BATCH_SHARE_OF_MARK = 0.5;

/**
 * Whether back-pressure applies: more than `BACKPRESSURE_SHARE` of `maxQueueBytes` waits to be
 * sent, or more than `NEAR_FULL_SHARE` of it is held in all.
 */
export function underBackpressure(waitingBytes: number, heldBytes: number, maxQueueBytes: number): boolean {
  return waitingBytes >= maxQueueBytes * BACKPRESSURE_SHARE || heldBytes >= maxQueueBytes * NEAR_FULL_SHARE;
}

/**
 * What a record is charged against `maxQueueBytes` when it is admitted: `estimate(record)` rounded
 * up to a whole byte, at least 1 and at most `maxBatchBytes` (the function and the record apart:
 * no closure per span on the application's thread). A record the guess cannot measure (it throws,
 * or answers NaN or Infinity) is charged as a full batch (`maxBatchBytes`): bounded, never
 * unbounded. A NaN charge would make the held bytes NaN for good, every comparison with
 * `maxQueueBytes` false, and so lift the bound for every record after it.
 */
export function admissionBytes<T>(estimate: (record: T) => number, record: T, maxBatchBytes: number): number {
  let bytes: number;
  try {
    bytes = estimate(record);
  } catch {
    return maxBatchBytes;
  }
  // At most a batch: a record larger than that is cut to fit one when it is serialised (or dropped
  // as too_large), so charging its whole guess would refuse it as queue_full on an empty queue.
  return Number.isFinite(bytes) ? Math.min(maxBatchBytes, Math.max(1, Math.ceil(bytes))) : maxBatchBytes;
}

type Mode = 'upsert' | 'complete';

/**
 * What a settled entry holds in place of its record. A marker of its own, not `undefined`: an
 * application may export `undefined` (`export([undefined])` from plain JavaScript), and that record
 * must be settled like any other, not skipped as one already released (which left flushes waiting
 * for it forever and its bytes held against `maxQueueBytes`).
 */
const RELEASED: unique symbol = Symbol('released record');

interface Entry<T> {
  /** `RELEASED` once the entry is settled, so a delivered span is not kept alive by the batcher. */
  record: T | typeof RELEASED;
  /** Order of arrival: what `forceFlush` waits for is "every seq up to now". */
  readonly seq: number;
  state: 'queued' | 'inFlight' | 'settled';
  /**
   * Bytes this record holds against `maxQueueBytes`: estimated, then, once serialised, the size of
   * `json`.
   */
  bytes: number;
  /** The size guess taken at admission, unscaled: what the size correction learns from. */
  readonly guess: number;
  /**
   * The record's items as UTF-8 JSON separated by commas (what the body carries for it), built
   * once, in `mode`: a view into the batcher's `JsonWriter` slabs, copied into the body.
   */
  json: Uint8Array | undefined;
  /** How many items `json` holds (2 in upsert mode, 1 in complete mode). */
  items: number;
  mode: Mode | undefined;
  /** Whether its strings were already cut after a 413 (only one more attempt is allowed). */
  shrunkAfter413: boolean;
  /**
   * The body bytes its strings were last cut to (to fit `maxBatchBytes`, or after a 413), so that
   * re-serialising it after the switch to complete mode cuts it again rather than sending it whole.
   */
  cutTo: number | undefined;
}

interface FlushWaiter {
  readonly lastSeq: number;
  remaining: number;
  readonly resolve: () => void;
}

/**
 * Build the batcher for one project. See SPEC §4 for the guarantees; each is tested in
 * `test/batcher/`.
 *
 * @example
 * const batcher = createBatcher({ ...resolveDelivery(), projectId: 'acme/demo', baseUrl, username,
 *   transport: createTransport(connection), codec });
 * batcher.add(span);
 * await batcher.forceFlush();
 */
export function createBatcher<T>(options: BatcherOptions<T>): Batcher<T> {
  return new QueueBatcher(options);
}

class QueueBatcher<T> implements Batcher<T> {
  readonly #options: BatcherOptions<T>;
  /** The codec's size guess, bound once (it is a method of the codec, and runs for every record). */
  readonly #estimateBytes = (record: T): number => this.#options.codec.estimateBytes(record);
  readonly #random: () => number;
  readonly #completePath: string;
  readonly #sendSlots: PQueue;
  readonly #reporter: DeliveryReporter;
  readonly #log: Log;
  /** Aborts the requests and backoffs under way, at shutdown or `dropHeld` (which makes a new one). */
  #abort = new AbortController();
  /** Scales the size guesses to what records weigh when serialised (see size-correction.ts). */
  readonly #sizeCorrection: SizeCorrection;

  /**
   * FIFO of queued records: an array read from `#head`, compacted now and then (amortised O(1)).
   * Slots before `#head` are cleared as records leave, so nothing taken stays referenced here.
   */
  #pending: Array<Entry<T> | undefined> = [];
  #head = 0;
  #pendingBytes = 0;
  #heldBytes = 0;
  #inFlight = 0;
  readonly #inFlightBatches = new Set<Array<Entry<T>>>();
  /** Batches of `#inFlightBatches` waiting out a backoff. */
  #backingOff = 0;
  /** What `onDeliveringChanged` was last told; how many times delivery stopped since (see `#noteDelivering`). */
  #toldDelivering = false;
  #deliveryStops = 0;

  #seq = 0;
  #mode: Mode = 'upsert';
  /**
   * The smallest request body the service refused for its size while it carried several records
   * (bytes; Infinity until then). Batches are built to half of it from then on: see `#batchBytes`.
   */
  #refusedBodyBytes = Number.POSITIVE_INFINITY;
  /** Where records are serialised: one writer, so their bytes share slabs. */
  readonly #writer = new JsonWriter();
  #waitingTasks = 0;
  /** A `setImmediate` that will start a send task is pending. */
  #pumpScheduled = false;
  /** A send task is taking a batch off the queue (across time slices): one at a time. */
  #building = false;
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  #timerDue = false;
  #waiters: FlushWaiter[] = [];
  /** Largest `lastSeq` of the waiting `forceFlush` calls (0 when none waits). */
  #flushUpTo = 0;
  #closing = false;
  #shutdownPromise: Promise<void> | undefined;
  #authReported = false;
  #requestRejectionReported = false;
  /** Why the last request was retried, while no request has succeeded since (else undefined). */
  #lastRetryReason: string | undefined;
  /** When a failing service was last reported (`performance.now()`). */
  #outageReportedAt: number | undefined;

  #delivered = 0;
  #retried = 0;
  #batchesSent = 0;
  readonly #dropped = zeroDrops();

  constructor(options: BatcherOptions<T>) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
    const [entity = '', project = ''] = options.projectId.split('/');
    this.#completePath = `/v2/${encodeURIComponent(entity)}/${encodeURIComponent(project)}/calls/complete`;
    this.#sendSlots = new PQueue({ concurrency: options.concurrency });
    this.#log = createLog(options.logLevel);
    this.#reporter = new DeliveryReporter(this.#log, options.dropReportIntervalMs);
    this.#sizeCorrection = new SizeCorrection(options.maxBatchBytes);
  }

  add(record: T): boolean {
    if (this.#closing) {
      this.#countDrop('shutdown', 1, 'the exporter was shut down');
      return false;
    }
    const guess = admissionBytes(this.#estimateBytes, record, this.#options.maxBatchBytes);
    const estimate = this.#sizeCorrection.charge(guess);
    if (this.#heldBytes + estimate > this.#options.maxQueueBytes) {
      this.#countDrop('queue_full', 1, `more than maxQueueBytes (${this.#options.maxQueueBytes}) held`);
      return false;
    }
    this.#seq += 1;
    this.#pending.push({
      record,
      seq: this.#seq,
      state: 'queued',
      bytes: estimate,
      guess,
      json: undefined,
      items: 0,
      mode: undefined,
      shrunkAfter413: false,
      cutTo: undefined,
    });
    this.#pendingBytes += estimate;
    this.#heldBytes += estimate;
    if (this.#flushTimer === undefined && !this.#timerDue) this.#startFlushTimer();
    this.#pump();
    return true;
  }

  forceFlush(): Promise<void> {
    const unsettled = this.#pendingCount() + this.#inFlight;
    // Drops waiting for the next interval's report are reported once the flush is done (unless one
    // went out less than an interval ago): a flush often comes last (a script's end, a serverless
    // handler's), when that interval never comes.
    if (unsettled === 0) {
      this.#reporter.reportIfDue();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.#waiters.push({ lastSeq: this.#seq, remaining: unsettled, resolve });
      this.#flushUpTo = this.#seq;
      this.#pump();
    }).then(() => this.#reporter.reportIfDue());
  }

  shutdown(timeoutMs = this.#options.shutdownTimeoutMs): Promise<void> {
    this.#shutdownPromise ??= this.#close(timeoutMs).catch((error: unknown) => {
      this.#log.error(`callbridge: shutdown failed: ${describeError(error)}`);
    });
    return this.#shutdownPromise;
  }

  dropHeld(): Promise<void> {
    // A shutdown under way gives up on what it holds by itself, at its own deadline.
    if (this.#closing) return Promise.resolve();
    const detail = this.#shutdownDetail();
    // Each delivery stops on the signal it started with; later batches get a new one.
    const underWay = this.#abort;
    this.#abort = new AbortController();
    this.#dropQueued('shutdown', detail);
    for (const batch of this.#inFlightBatches) this.#settle(batch, 'shutdown', detail);
    underWay.abort();
    this.#reporter.report();
    return Promise.resolve();
  }

  stats(): DeliveryStats {
    return {
      queued: this.#pendingCount(),
      queuedBytes: this.#heldBytes,
      inFlight: this.#inFlight,
      delivered: this.#delivered,
      retried: this.#retried,
      batchesSent: this.#batchesSent,
      dropped: { ...this.#dropped },
    };
  }

  isRetrying(): boolean {
    return this.#lastRetryReason !== undefined;
  }

  isDelivering(): boolean {
    return this.#inFlightBatches.size > this.#backingOff;
  }

  /**
   * Tell `onDeliveringChanged` when `#isDelivering()` changed. A stop is told a turn later, and only
   * if delivery has not restarted and stopped again since: between one batch's answer and the next
   * batch (its send task already scheduled) lies a turn at most, and a report of "not delivering"
   * from that gap would let a waiting application's process go in the middle of a flush.
   */
  #noteDelivering(): void {
    if (this.#options.onDeliveringChanged === undefined) return;
    if (this.isDelivering()) {
      if (!this.#toldDelivering) this.#tellDelivering(true);
    } else if (this.#toldDelivering) {
      const stop = ++this.#deliveryStops;
      setImmediate(() => {
        if (stop === this.#deliveryStops && !this.isDelivering()) this.#tellDelivering(false);
      });
    }
  }

  #tellDelivering(delivering: boolean): void {
    this.#toldDelivering = delivering;
    this.#options.onDeliveringChanged?.(delivering);
  }

  waitingBytes(): number {
    return this.#pendingBytes;
  }

  sizeCorrection(): number {
    return this.#sizeCorrection.factor;
  }

  reportPendingDrops(): void {
    this.#reporter.report();
  }

  // ---- scheduling -------------------------------------------------------------------------

  #pendingCount(): number {
    return this.#pending.length - this.#head;
  }

  #itemsPerRecord(): number {
    return this.#mode === 'upsert' ? 2 : 1;
  }

  /**
   * A batch should go now: full by count or bytes, its first record's interval passed, a flush
   * waits for the record at the head of the queue, or half the back-pressure mark waits. Records
   * added after every waiting flush began batch as usual: a flush held up by a slow batch must not
   * turn each new span into a request.
   */
  #isDue(): boolean {
    const count = this.#pendingCount();
    if (count === 0) return false;
    return (
      this.#timerDue ||
      this.#closing ||
      (this.#waiters.length > 0 && (this.#pending[this.#head] as Entry<T>).seq <= this.#flushUpTo) ||
      count * this.#itemsPerRecord() >= this.#options.maxBatchItems ||
      this.#pendingBytes >= this.#batchBytes() ||
      // Half-way to the back-pressure mark: with a small maxQueueBytes (a quarter of it below what
      // fills a batch) steady traffic must not sit waiting for the interval, and the producer with it.
      this.#pendingBytes >= this.#options.maxQueueBytes * BACKPRESSURE_SHARE * EARLY_BATCH_SHARE_OF_MARK
    );
  }

  /**
   * Keep at most one send task waiting for a slot. The batch is built when the task starts (a
   * slot is free), not when it is queued, so a burst never turns into a pile of pre-built bodies;
   * each task calls `#pump` again once its batch is taken, so up to `concurrency` batches run side
   * by side. The task is queued from a `setImmediate`, never here: `#pump` runs inside `add()`, that
   * is inside the application's `span.end()`, and p-queue would start the task right away.
   */
  #pump(): void {
    if (this.#pumpScheduled || this.#waitingTasks > 0 || this.#building || !this.#isDue()) return;
    this.#pumpScheduled = true;
    setImmediate(this.#startSendTask);
  }

  readonly #startSendTask = (): void => {
    this.#pumpScheduled = false;
    if (this.#waitingTasks > 0 || this.#building || !this.#isDue()) return;
    this.#queueSendTask(new TimeSlicer(this.#sliceBudgetMs, this.#onBackpressure));
  };

  /** Queue a send task that builds its batch in `slicer`'s slices (p-queue starts it when a slot is free). */
  #queueSendTask(slicer: TimeSlicer): void {
    this.#waitingTasks += 1;
    this.#sendSlots.add(() => this.#runSendTask(slicer)).catch((error: unknown) => {
      this.#log.error(`callbridge: internal error in a send task: ${describeError(error)}`);
    });
  }

  /**
   * After a batch is taken, the next one: from the next turn of the event loop (`#pump`), or under
   * back-pressure, when a send slot is free and the slice has time left, now, in the same slice.
   * One batch per turn would otherwise cap what a turn drains at `maxBatchItems` records, however
   * long the slice may be. (p-queue starts a task inside `add()` when a slot is free: this runs
   * from a send task, never from the application's `span.end()`.)
   */
  #takeNextBatch(slicer: TimeSlicer): void {
    const sameSlice =
      !slicer.spent() &&
      slicer.pressed &&
      !this.#pumpScheduled &&
      this.#waitingTasks === 0 &&
      this.#sendSlots.pending < this.#options.concurrency &&
      this.#isDue();
    if (sameSlice) this.#queueSendTask(slicer);
    else this.#pump();
  }

  #startFlushTimer(): void {
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      this.#timerDue = true;
      this.#pump();
    }, this.#options.flushIntervalMs);
    this.#flushTimer.unref?.();
  }

  async #runSendTask(slicer: TimeSlicer): Promise<void> {
    this.#waitingTasks -= 1;
    // Another task may have taken what made this one due; then wait for the timer or the next add.
    if (!this.#isDue()) return;
    // Registered before it fills: a shutdown timeout during the build settles what was taken.
    const batch: Array<Entry<T>> = [];
    this.#inFlightBatches.add(batch);
    this.#noteDelivering();
    try {
      this.#building = true;
      try {
        await this.#takeBatch(batch, slicer);
      } finally {
        this.#building = false;
        this.#takeNextBatch(slicer);
      }
      if (batch.length > 0) await this.#deliver(batch, Date.now());
    } catch (error) {
      // A rejected promise here is a bug of ours; the records must still be accounted for.
      this.#log.error(`callbridge: internal error while delivering a batch: ${describeError(error)}`);
      this.#settle(batch, 'rejected', `internal error: ${describeError(error)}`);
    } finally {
      this.#inFlightBatches.delete(batch);
      this.#noteDelivering();
    }
  }

  /**
   * Move the next batch off the queue into `batch`: as many records as fit `maxBatchItems` and
   * `maxBatchBytes`, each mapped and serialised on the way, yielding to the event loop between
   * time slices. Records added meanwhile join the tail of the queue; a shutdown timeout meanwhile
   * empties the queue, which ends the loop.
   */
  async #takeBatch(batch: Array<Entry<T>>, slicer: TimeSlicer): Promise<void> {
    const { maxBatchItems, maxBatchBytes } = this.#options;
    const batchBytes = this.#batchBytes();
    let items = 0;
    let bytes = ENVELOPE_BYTES;
    while (this.#pendingCount() > 0) {
      if (slicer.spent()) await slicer.yield();
      if (this.#pendingCount() === 0) break;
      const entry = this.#pending[this.#head] as Entry<T>;
      if (!this.#serialise(entry)) {
        this.#shift();
        continue;
      }
      if (batch.length === 0 && ENVELOPE_BYTES + this.#wireBytes(entry) > maxBatchBytes) {
        // One record larger than a whole batch: cut it to fit, or give it up; never let it block the queue.
        if (!this.#shrink(entry, maxBatchBytes - ENVELOPE_BYTES)) {
          this.#shift();
          this.#finish(entry, 'too_large', `one span is over maxBatchBytes (${maxBatchBytes}) even with its strings cut`);
          continue;
        }
      }
      const entryBytes = this.#wireBytes(entry);
      if (batch.length > 0 && (items + entry.items > maxBatchItems || bytes + entryBytes > batchBytes)) break;
      this.#shift();
      entry.state = 'inFlight';
      this.#pendingBytes -= entry.bytes;
      this.#inFlight += 1;
      batch.push(entry);
      items += entry.items;
      bytes += entryBytes;
    }
    if (slicer.pressed) this.#serialiseAhead(slicer);
    slicer.reportOvertime();
    if (this.#pendingCount() === 0) {
      // Everything queued is on its way: the interval starts again with the next record.
      this.#timerDue = false;
      if (this.#flushTimer !== undefined) clearTimeout(this.#flushTimer);
      this.#flushTimer = undefined;
    }
  }

  /** Time a slice ran past `SLICE_BUDGET_MS` under back-pressure, for the periodic report. */
  readonly #onBackpressure = (ms: number): void => this.#reporter.recordBackpressure(ms);

  /**
   * How long a slice of batch building may run: `SLICE_BUDGET_MS`, or under back-pressure (spans
   * come faster than they are delivered while the service takes them) `backpressureMs`, so that
   * on the application's thread the producer gets fewer turns and the queue drains instead of
   * overflowing. Asked at every check: the pressure ends as soon as the queue falls below the mark.
   */
  readonly #sliceBudgetMs = (): number => {
    const { backpressureMs, maxQueueBytes } = this.#options;
    const pressed = !this.#closing && !this.isRetrying() && underBackpressure(this.#pendingBytes, this.#heldBytes, maxQueueBytes);
    return pressed ? Math.max(SLICE_BUDGET_MS, backpressureMs) : SLICE_BUDGET_MS;
  };

  /**
   * Under back-pressure, once the batch is full: serialise the records that follow it while the
   * slice lasts. They keep their place in the queue and are serialised once, as always (their
   * batch then takes them as they are); what a turn of the event loop drains is then bounded by
   * `backpressureMs`, not by the batch size: with small batches (`maxBatchItems`) or a producer
   * that makes more spans per turn than a batch holds, the queue would otherwise still grow.
   */
  #serialiseAhead(slicer: TimeSlicer): void {
    for (let index = this.#head; index < this.#pending.length && !slicer.spent(); index++) {
      // A record that cannot be written stays as it is, for its batch to drop (and count) in order:
      // settled here, in the middle of the queue, it would be missed by a flush already waiting.
      if (this.#write(this.#pending[index] as Entry<T>) !== undefined) break;
    }
  }

  #shift(): void {
    this.#pending[this.#head] = undefined;
    this.#head += 1;
    if (this.#head === this.#pending.length) {
      this.#pending = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#pending.length) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
  }

  // ---- serialising ------------------------------------------------------------------------

  /** Bytes of the record's items in a body, with the comma that separates it from the next record. */
  #wireBytes(entry: Entry<T>): number {
    return (entry.json?.length ?? 0) + 1;
  }

  /**
   * How many bytes of body a batch is built up to: `maxBatchBytes`, or half the smallest body the
   * service refused for its size. A proxy in front of the service often takes less than
   * `maxBatchBytes` (nginx's default `client_max_body_size` is 1 MiB, against 10 MiB here): each
   * refused batch costs a request and two halves (more when the halves are refused too), and
   * without this every later batch would pay it again. Half of what was refused is what its halves
   * carried; it is never raised again, as a proxy's limit does not change while a process runs.
   */
  #batchBytes(): number {
    return Math.min(this.#options.maxBatchBytes, Math.floor(this.#refusedBodyBytes / 2));
  }

  /**
   * Note that a body of several records was answered 413. Only an answer: an upload cut twice
   * (`UPLOAD_CUTS_BEFORE_SPLIT`) is split all the same, but may be an outage resetting connections
   * mid-body, and learning from it would shrink every later batch for good after each outage.
   */
  #noteRefusedBody(batch: ReadonlyArray<Entry<T>>, reason: string): void {
    const refused = this.#bodyLength(batch);
    if (refused >= this.#refusedBodyBytes) return;
    this.#refusedBodyBytes = refused;
    // Once per halving (a handful at most), so the cause can be fixed where it is.
    this.#log.warn(
      `callbridge: the service refused a request of ${refused} bytes for its size (${reason}); requests are built to ${this.#batchBytes()} bytes from now on (maxBatchBytes ${this.#options.maxBatchBytes}). A proxy's body limit below maxBatchBytes is the usual cause: raise it, or set maxBatchBytes under it.`,
    );
  }

  /**
   * Map and serialise the record for the current mode, once (again only after a mode switch).
   * A record that cannot be serialised is dropped as `rejected`; false then.
   */
  #serialise(entry: Entry<T>): boolean {
    if (entry.state === 'settled') return false;
    const error = this.#write(entry);
    if (error === undefined) return true;
    this.#finish(entry, 'rejected', `a span could not be serialised: ${describeError(error)}`);
    return false;
  }

  /**
   * Write the record's items for the current mode (once; again only after a mode switch). What
   * the codec threw when it could not, else undefined.
   */
  #write(entry: Entry<T>): unknown {
    if (entry.json !== undefined && entry.mode === this.#mode) return undefined;
    const record = entry.record;
    if (record === RELEASED) return new Error('the record was released');
    const mode = this.#mode;
    const { codec } = this.#options;
    const out = this.#writer;
    out.begin();
    try {
      if (mode === 'upsert' && codec.writeUpsertItems !== undefined) {
        codec.writeUpsertItems(record, out);
        this.#setJson(entry, out.end(), 2, mode);
      } else if (mode === 'complete' && codec.writeCompletedCall !== undefined) {
        codec.writeCompletedCall(record, out);
        this.#setJson(entry, out.end(), 1, mode);
      } else {
        const items = mode === 'upsert' ? codec.toUpsertItems(record) : [codec.toCompletedCall(record)];
        this.#setJson(entry, writeItems(items, out), items.length, mode);
      }
      return undefined;
    } catch (error) {
      out.discard();
      return error;
    }
  }

  #setJson(entry: Entry<T>, json: Uint8Array, items: number, mode: Mode): void {
    // The first serialisation weighs what the guess charged; later ones (a cut, a mode switch)
    // replace a weight, not a guess.
    if (entry.json === undefined) this.#sizeCorrection.observe(entry.guess, json.length);
    const change = json.length - entry.bytes;
    this.#heldBytes += change;
    if (entry.state === 'queued') this.#pendingBytes += change;
    entry.bytes = json.length;
    entry.json = json;
    entry.items = items;
    entry.mode = mode;
  }

  /**
   * Cut the record's largest strings so its items fit `maxBytes` of body; false if impossible
   * (with `bestEffort`: only if no string could be cut, else it is cut as far as it goes).
   */
  #shrink(entry: Entry<T>, maxBytes: number, options: { bestEffort?: boolean } = {}): boolean {
    const json = entry.json;
    if (json === undefined || entry.mode === undefined) return false;
    const items = JSON.parse(`[${Buffer.from(json.buffer, json.byteOffset, json.length).toString('utf8')}]`) as unknown[];
    // The array's brackets and commas are the same bytes the body spends on this record.
    const cut = truncateLargestStrings(items, maxBytes, options);
    if (cut === undefined) return false;
    const out = this.#writer;
    out.begin();
    this.#setJson(entry, writeItems(cut, out), cut.length, entry.mode);
    entry.cutTo = maxBytes;
    return true;
  }

  /**
   * `{"batch":[item,item,...]}`: each record's bytes copied into one buffer of the exact size, at
   * memory speed (a full 1000-item batch of typical spans is about 1 MB).
   */
  #body(batch: ReadonlyArray<Entry<T>>): Buffer {
    const length = this.#bodyLength(batch);
    const body = Buffer.allocUnsafe(length);
    let offset = body.write(BODY_START, 0, 'latin1');
    let first = true;
    for (const entry of batch) {
      const json = entry.json as Uint8Array;
      if (!first) body[offset++] = COMMA;
      first = false;
      body.set(json, offset);
      offset += json.length;
    }
    offset += body.write(BODY_END, offset, 'latin1');
    return offset === length ? body : body.subarray(0, offset);
  }

  /** The bytes of `batch`'s request body: the envelope, and each record with its comma. */
  #bodyLength(batch: ReadonlyArray<Entry<T>>): number {
    let length = ENVELOPE_BYTES - 1;
    for (const entry of batch) length += this.#wireBytes(entry);
    return Math.max(length, ENVELOPE_BYTES);
  }

  // ---- sending ----------------------------------------------------------------------------

  /**
   * Deliver one batch to the end: sent, split, retried, switched to complete mode, or dropped with
   * a reason. Holds its send slot throughout, including backoff, so an outage makes batches wait
   * in the queue (bounded by `maxQueueBytes`) instead of multiplying requests.
   */
  async #deliver(initial: Array<Entry<T>>, startedAt: number): Promise<void> {
    let batch = initial;
    let attempt = 0;
    let uploadCuts = 0;
    /** The wait before the attempt just made was cut to end at the deadline: it was the last. */
    let attemptedAtDeadline = false;
    /** A retryable failure was waited out: the next request sent is a retry. */
    let resending = false;
    // This delivery's own: `dropHeld` gives up on the batches under way, not on later ones.
    const { signal } = this.#abort;
    for (;;) {
      if (signal.aborted) return this.#settle(batch, 'shutdown', this.#shutdownDetail());
      // The mode may have changed while this batch waited: re-serialise what was built for the other.
      batch = await this.#reserialise(batch);
      const mode = this.#mode;
      if (batch.length === 0) return;
      if (batch.some((entry) => entry.mode !== mode)) continue;
      // Counted as the request goes out again (a shutdown during the wait sends nothing).
      if (resending) {
        this.#retried += 1;
        resending = false;
      }
      const outcome = await this.#post(mode, this.#body(batch), signal);
      if (outcome.kind !== 'ok' && signal.aborted) {
        return this.#settle(batch, 'shutdown', this.#shutdownDetail());
      }
      switch (outcome.kind) {
        case 'ok':
          this.#batchesSent += 1;
          this.#lastRetryReason = undefined;
          return this.#settle(batch, 'delivered');
        case 'retry': {
          this.#reportOutage(outcome.status === undefined ? outcome.reason : `HTTP ${outcome.status}: ${outcome.reason}`);
          uploadCuts = outcome.cutDuringUpload === true ? uploadCuts + 1 : 0;
          if (uploadCuts >= UPLOAD_CUTS_BEFORE_SPLIT && (batch.length > 1 || (await this.#answersSmallRequests(mode, signal)))) {
            uploadCuts = 0;
            const reason = `the server closed the connection during the upload ${UPLOAD_CUTS_BEFORE_SPLIT} times in a row (an early 413 whose answer was lost): ${outcome.reason}`;
            // Not learnt from (see `#noteRefusedBody`): resets mid-upload may be an outage.
            const split = this.#splitForSize(batch, startedAt, reason, false);
            if (split !== 'retry') return split;
            continue;
          }
          const left = startedAt + this.#options.maxRetryMs - Date.now();
          if (attemptedAtDeadline || left <= 0) return this.#settle(batch, 'retries_exhausted', outcome.reason);
          attempt += 1;
          const delay = nextDelay(attempt, outcome.afterMs, this.#random);
          // SPEC §4.5: a batch gives up *after* maxRetryMs. A wait that would end past the deadline
          // is cut to end at it, for one last attempt there, instead of giving up now: with a
          // Retry-After longer than maxRetryMs, that would be after a single request.
          attemptedAtDeadline = delay >= left;
          await this.#backOff(Math.min(delay, left), signal);
          resending = true;
          continue;
        }
        case 'split': {
          const split = this.#splitForSize(batch, startedAt, outcome.reason, true);
          if (split !== 'retry') return split;
          continue;
        }
        case 'auth':
          this.#reportAuthOnce(outcome);
          return this.#settle(batch, 'auth', outcome.reason);
        case 'reject':
          if (outcome.errorCode === COMPLETE_MODE_REQUIRED && mode === 'upsert') {
            this.#switchToCompleteMode();
            continue;
          }
          // Another 4xx is about the request (a wrong path answers 404 to every half): the batch
          // goes as one. 400/422 may be about some items: halves find them (SPEC §4.7).
          if (!ITEM_REJECTION_STATUSES.has(outcome.status)) {
            this.#reportRequestRejectedOnce(mode, outcome);
          } else if (batch.length > 1) {
            return this.#deliverHalves(batch, startedAt);
          }
          return this.#settle(batch, 'rejected', outcome.reason);
      }
    }
  }

  /**
   * Whether the service answers a request with no records (any answer but a retryable one): then
   * uploads cut mid-body are about their size, not an outage.
   */
  async #answersSmallRequests(mode: Mode, signal: AbortSignal): Promise<boolean> {
    const outcome = await this.#post(mode, EMPTY_BODY, signal);
    return outcome.kind !== 'retry';
  }

  /**
   * What a 413 does (SPEC §4.6): several records are sent as two halves; a single record has its
   * largest strings cut once (`'retry'`: send it again), and after that is dropped as `too_large`.
   * `answered413`: the service said so, rather than cutting the upload (see `#noteRefusedBody`).
   */
  #splitForSize(batch: Array<Entry<T>>, startedAt: number, reason: string, answered413: boolean): Promise<void> | 'retry' {
    if (batch.length > 1) {
      if (answered413) this.#noteRefusedBody(batch, reason);
      return this.#deliverHalves(batch, startedAt);
    }
    const [entry] = batch as [Entry<T>];
    if (!entry.shrunkAfter413) {
      entry.shrunkAfter413 = true;
      const before = this.#wireBytes(entry);
      // Aim at a quarter, or under the size batches are built to when a 413 taught one (a body
      // of half that size was refused); when the strings are too small a part of the record for
      // that, send it cut as far as they allow: the server's limit may still be met.
      const target = Math.min(Math.floor(before * SHRINK_AFTER_413), this.#batchBytes() - ENVELOPE_BYTES);
      if (this.#shrink(entry, target, { bestEffort: true })) {
        // Not a drop, but the call will not hold all its text: say so (rare: one span at a time).
        this.#log.warn(
          `callbridge: the service refused a span of ${before} bytes for its size (${reason}); its largest strings were cut to ${this.#wireBytes(entry)} bytes and it is sent once more`,
        );
        return 'retry';
      }
    }
    this.#settle(batch, 'too_large', reason);
    return Promise.resolve();
  }

  /**
   * 413 or 400/422 on several records: each half on its own finds the records at fault. The halves
   * keep the batch's `startedAt`: one deadline (`maxRetryMs`) bounds a batch and all its parts.
   */
  async #deliverHalves(batch: Array<Entry<T>>, startedAt: number): Promise<void> {
    const middle = Math.ceil(batch.length / 2);
    await this.#deliver(batch.slice(0, middle), startedAt);
    await this.#deliver(batch.slice(middle), startedAt);
  }

  /** The batch's records that are serialised in the current mode (time-sliced like the build). */
  async #reserialise(batch: Array<Entry<T>>): Promise<Array<Entry<T>>> {
    const mode = this.#mode;
    if (batch.every((entry) => entry.json !== undefined && entry.mode === mode)) return batch;
    const slicer = new TimeSlicer(this.#sliceBudgetMs, this.#onBackpressure);
    const kept: Array<Entry<T>> = [];
    for (const entry of batch) {
      if (slicer.spent()) await slicer.yield();
      if (!this.#serialise(entry)) continue;
      // Written again whole from the span: cut it as it was cut before, as far as its strings
      // allow, so a 413's cut stays made and a span cut to fit maxBatchBytes still fits (its
      // completed form is smaller than the two upsert items that were cut to fit).
      if (entry.cutTo !== undefined && this.#wireBytes(entry) > entry.cutTo) {
        this.#shrink(entry, entry.cutTo, { bestEffort: true });
      }
      kept.push(entry);
    }
    slicer.reportOvertime();
    return kept;
  }

  #pathOf(mode: Mode): string {
    return mode === 'upsert' ? '/call/upsert_batch' : this.#completePath;
  }

  async #post(mode: Mode, body: Uint8Array, signal: AbortSignal): Promise<SendOutcome> {
    const path = this.#pathOf(mode);
    try {
      // Our own requests must not become spans (SPEC §4.12), e.g. under an undici/http instrumentation.
      return await context.with(suppressTracing(context.active()), () =>
        // The reply to upsert_batch (one entry per item) is not used: read it, do not parse it.
        this.#options.transport.post(path, body, { signal, discardBody: true }),
      );
    } catch (error) {
      // The transport promises never to throw; if it does anyway, treat it like a network error.
      return { kind: 'retry', reason: `transport error: ${describeError(error)}` };
    }
  }

  #switchToCompleteMode(): void {
    if (this.#mode === 'complete') return;
    this.#mode = 'complete';
    this.#log.info(`callbridge: project ${this.#options.projectId} requires complete mode; sending to ${this.#completePath}`);
  }

  #reportAuthOnce(outcome: Extract<SendOutcome, { kind: 'auth' }>): void {
    if (this.#authReported) return;
    this.#authReported = true;
    const { baseUrl, username, projectId } = this.#options;
    if (username === '') {
      this.#log.error(
        `callbridge: ${baseUrl} needs credentials and no username is set (HTTP ${outcome.status}): set the username/password or apiKey ` +
          'options, or CALLBRIDGE_USERNAME/CALLBRIDGE_PASSWORD or CALLBRIDGE_API_KEY (WANDB_API_KEY); spans are dropped as auth until then',
      );
    } else if (outcome.status === 403) {
      this.#log.error(
        `callbridge: ${baseUrl} denied user "${username}" access to project ${projectId} (HTTP 403); ` +
          "spans are dropped as auth until the user is granted the project's entity",
      );
    } else {
      this.#log.error(
        `callbridge: ${baseUrl} refused the credentials of user "${username}" (HTTP ${outcome.status}); ` +
          'spans are dropped as auth until the username/password (or API key) are fixed',
      );
    }
  }

  /**
   * A 4xx that refuses the request itself (404 for a `baseUrl` with a wrong path, 405, 415...) is
   * a setup error: said once, at once, with the URL (the drop report alone would come later and
   * only name the reason). Its spans are dropped as `rejected`.
   */
  #reportRequestRejectedOnce(mode: Mode, outcome: Extract<SendOutcome, { kind: 'reject' }>): void {
    if (this.#requestRejectionReported) return;
    this.#requestRejectionReported = true;
    const url = `${this.#options.baseUrl}${this.#pathOf(mode)}`;
    // Status 0: no HTTP answer at all (a TLS certificate the client refuses, say).
    const what = outcome.status === 0 ? `failed (${outcome.reason})` : `answered HTTP ${outcome.status} (${outcome.reason})`;
    const hint = outcome.status === 404 ? ': is baseUrl the root URL of the service (no path after it)?' : '';
    this.#log.error(`callbridge: POST ${url} ${what}${hint}; its spans are dropped as rejected`);
  }

  /**
   * A retryable failure is logged at once, so an unreachable or failing service shows up when it
   * happens, not only when spans are given up minutes later (`maxRetryMs`); then at most once per
   * drop-report interval, however the failures and successes alternate.
   */
  #reportOutage(reason: string): void {
    this.#lastRetryReason = reason;
    const now = performance.now();
    const interval = this.#options.dropReportIntervalMs ?? DROP_REPORT_INTERVAL_MS;
    if (this.#outageReportedAt !== undefined && now - this.#outageReportedAt < interval) return;
    this.#outageReportedAt = now;
    const { baseUrl, maxRetryMs } = this.#options;
    this.#log.warn(`callbridge: ${baseUrl} did not take a batch (${reason}); retrying with backoff, each batch for up to ${maxRetryMs} ms`);
  }

  /** Why records still held are given up at shutdown, with the failure that held them when there is one. */
  #shutdownDetail(): string {
    const reason = this.#lastRetryReason;
    return reason === undefined ? 'the shutdown timeout passed' : `the shutdown timeout passed while retrying (last failure: ${reason})`;
  }

  /** Wait out one batch's backoff, counted in `#backingOff`. */
  async #backOff(ms: number, signal: AbortSignal): Promise<void> {
    this.#backingOff += 1;
    this.#noteDelivering();
    try {
      await this.#sleep(ms, signal);
    } finally {
      this.#backingOff -= 1;
      this.#noteDelivering();
    }
  }

  /** Wait `ms`, or less when `signal` aborts; the timer never keeps the process alive. */
  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
      timer.unref?.();
      signal.addEventListener('abort', done, { once: true });
    });
  }

  // ---- accounting -------------------------------------------------------------------------

  #settle(batch: ReadonlyArray<Entry<T>>, result: 'delivered' | DropReason, detail?: string): void {
    let dropped = 0;
    for (const entry of batch) {
      if (entry.state === 'settled') continue;
      this.#finish(entry, result, undefined);
      if (result !== 'delivered') dropped += 1;
    }
    if (result !== 'delivered') this.#reporter.record(result, dropped, detail);
    this.#options.onBatchSettled?.();
  }

  /** Account one record as delivered or dropped; `detail` given means report this drop now. */
  #finish(entry: Entry<T>, result: 'delivered' | DropReason, detail: string | undefined): void {
    if (entry.state === 'settled') return;
    if (entry.state === 'inFlight') this.#inFlight -= 1;
    else this.#pendingBytes -= entry.bytes;
    entry.state = 'settled';
    this.#heldBytes -= entry.bytes;
    // Settled entries may outlive this call (a batch being split holds them): keep nothing big.
    entry.json = undefined;
    entry.record = RELEASED;
    if (result === 'delivered') this.#delivered += 1;
    else {
      this.#dropped[result] += 1;
      if (detail !== undefined) this.#reporter.record(result, 1, detail);
    }
    if (this.#waiters.length > 0) this.#notifyWaiters(entry.seq);
  }

  #countDrop(reason: DropReason, count: number, detail: string): void {
    this.#dropped[reason] += count;
    this.#reporter.record(reason, count, detail);
  }

  #notifyWaiters(seq: number): void {
    let anyDone = false;
    for (const waiter of this.#waiters) {
      if (seq > waiter.lastSeq) continue;
      waiter.remaining -= 1;
      if (waiter.remaining === 0) {
        anyDone = true;
        waiter.resolve();
      }
    }
    if (anyDone) {
      this.#waiters = this.#waiters.filter((waiter) => waiter.remaining > 0);
      this.#flushUpTo = 0;
      for (const waiter of this.#waiters) this.#flushUpTo = Math.max(this.#flushUpTo, waiter.lastSeq);
    }
  }

  // ---- shutdown ---------------------------------------------------------------------------

  async #close(timeoutMs: number): Promise<void> {
    this.#closing = true;
    if (this.#flushTimer !== undefined) clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    // Held for the bounded wait: the backoff timers are unref'd, so a process whose code awaits
    // this shutdown would otherwise end during a backoff, with the shutdown neither done nor counted.
    const flushed = await settleWithin(this.forceFlush(), timeoutMs, true);
    if (!flushed) {
      // Out of time: stop backoffs and requests, and give up on everything still held.
      this.#abort.abort();
      this.#dropQueued('shutdown', 'the shutdown timeout passed');
      await settleWithin(this.#sendSlots.onIdle(), ABORT_GRACE_MS, true);
      for (const batch of this.#inFlightBatches) this.#settle(batch, 'shutdown', this.#shutdownDetail());
    }
    this.#reporter.report();
    try {
      await this.#options.transport.close();
    } catch (error) {
      this.#log.warn(`callbridge: closing the connection pool failed: ${describeError(error)}`);
    }
  }

  #dropQueued(reason: DropReason, detail: string): void {
    const queued = this.#pending.slice(this.#head) as Array<Entry<T>>;
    this.#pending = [];
    this.#head = 0;
    for (const entry of queued) this.#finish(entry, reason, undefined);
    this.#reporter.record(reason, queued.length, detail);
  }
}

/**
 * Cooperative time slicing: work until the budget is spent, then let the event loop run. A slice
 * given more than `SLICE_BUDGET_MS` (back-pressure) reports how long it ran past that.
 */
class TimeSlicer {
  readonly #budgetMs: () => number;
  readonly #onOvertime: (ms: number) => void;
  #sliceStart = performance.now();
  /** Up to when the slice's time past `SLICE_BUDGET_MS` has been reported. */
  #reportedTo = this.#sliceStart + SLICE_BUDGET_MS;
  /** The budget of the slice in progress, when last asked, was over `SLICE_BUDGET_MS`. */
  #pressed = false;

  /**
   * @param budgetMs the length of a slice, asked again at every check
   * @param onOvertime receives how long a slice with a longer budget ran past `SLICE_BUDGET_MS`
   */
  constructor(budgetMs: () => number, onOvertime: (ms: number) => void) {
    this.#budgetMs = budgetMs;
    this.#onOvertime = onOvertime;
  }

  /** Whether the slice in progress was given more than `SLICE_BUDGET_MS` when last asked. */
  get pressed(): boolean {
    return this.#pressed;
  }

  spent(): boolean {
    const budget = this.#budgetMs();
    this.#pressed = budget > SLICE_BUDGET_MS;
    return performance.now() - this.#sliceStart >= budget;
  }

  /** Continue in a later macrotask (after pending I/O and timers), with a fresh budget. */
  async yield(): Promise<void> {
    this.reportOvertime();
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.#sliceStart = performance.now();
    this.#reportedTo = this.#sliceStart + SLICE_BUDGET_MS;
  }

  /** Report the time a pressed slice has run past `SLICE_BUDGET_MS` so far (the rest is reported later). */
  reportOvertime(): void {
    const now = performance.now();
    if (!this.#pressed || now <= this.#reportedTo) return;
    this.#onOvertime(now - this.#reportedTo);
    this.#reportedTo = now;
  }
}

/**
 * Resolve true when `promise` settles within `ms`, false otherwise. The timer is unref'd unless
 * `holdProcess`: then it keeps the process alive for at most `ms`. A wait past the longest timer
 * Node keeps (2^31 - 1 ms, about 24.8 days) is that long: Node would fire a longer one at once.
 */
export function settleWithin(promise: Promise<unknown>, ms: number, holdProcess = false): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.min(ms, MAX_TIMER_MS));
    if (!holdProcess) timer.unref?.();
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

const COMMA = 0x2c;

/** Items (objects) as one record's JSON: written with `JSON.stringify`'s text, comma-separated. */
function writeItems(items: readonly unknown[], out: JsonWriter): Uint8Array {
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out.comma();
    const text = JSON.stringify(items[i]) as string | undefined;
    if (typeof text !== 'string') throw new TypeError('an item is not JSON');
    out.jsonText(text);
  }
  return out.end();
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
