/**
 * Delivery on a worker thread (`deliveryThread: 'worker'`): the application's thread keeps only
 * the admission check of SPEC §4.3 and one copy of each span (`span-transfer.ts`); mapping, JSON
 * and HTTP run on the worker (`delivery-worker.ts`), on another core.
 *
 * How the guarantees of SPEC §4 carry over:
 * - Bounded memory: `add()` admits a span only while the worker's held bytes (as last reported)
 *   plus the bytes in transit stay under `maxQueueBytes`; the worker's own batcher enforces the
 *   same bound again with exact sizes.
 * - Nothing lost: a span stays ours until the worker acknowledges the message that carried it.
 *   If the worker stops unexpectedly, the spans it had not acknowledged are delivered on this
 *   thread instead (see `#fallBack`), and the ones it held are counted as `shutdown` drops.
 * - No stall in `span.end()`: `add()` only measures and queues; the copy is made later (from a
 *   timer or `setImmediate`), one short message at a time (`MAX_SPANS_PER_MESSAGE`). Only when
 *   the event loop has not turned for `STARVED_LOOP_MS` does `add()` post a message itself, after
 *   reading the worker's reports synchronously from their own channel (`#postFromStarvedLoop`).
 * - Back-pressure (`backpressureMs`): when spans come faster than the worker delivers them, a
 *   posting slice sleeps until the worker makes room, for at most `backpressureMs` per slice
 *   (`#waitForRoom`), instead of letting the queue reach `maxQueueBytes` and drop. The producer
 *   is slowed to the rate of delivery, as `BatchSpanProcessor` slows it by serialising inside
 *   `span.end()`, but in the event loop's own turns, never inside `span.end()`.
 * - Start-up: the worker starts with the first span and takes ~110 ms to load in a fresh process
 *   on an idle core here (first span delivered 139-151 ms after `register()`, against 33-35 ms on
 *   the main thread, and 192-212 ms before the worker was one self-contained file), longer while
 *   the application keeps the cores busy; spans wait here until it reports `ready` (a flush
 *   meanwhile waits for it). The exit flush (`settleForExit`) and a shutdown do not wait: they
 *   deliver what waits on this thread, so a short script ends as soon as on the main thread
 *   instead of ~240 ms later. A worker never ready counts as one that cannot start.
 * - `forceFlush()`: the message port keeps order, so a flush posted after the spans covers them.
 * - Exit: the worker is unref'd and only ref'd while a flush or a shutdown waits for it (a flush
 *   for `shutdownTimeoutMs`, and after that while the worker delivers rather than only waits out
 *   backoffs), so it keeps the process alive about as long as main-thread delivery would, whose
 *   requests and batch building hold the process and whose backoffs do not (`#refWhileWaited`).
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { diag } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { admissionBytes, settleWithin, underBackpressure, type Batcher } from '../batcher/batcher.js';
import { scaleCharge } from '../batcher/size-correction.js';
import { DROP_REASONS, DeliveryReporter, zeroDrops, type DeliveryStats, type DropReason } from '../batcher/stats.js';
import { createLog, type Log } from '../log.js';
import type { ResolvedExporterOptions } from '../options.js';
import { estimateSpanBytes } from './span-codec.js';
import { encodeSpan, toCloneable, type SpanTransfer } from './span-transfer.js';
import type { DeliveryWorkerData, FromWorker, ToWorker, WorkerStatsReport } from './worker-protocol.js';
import { inheritedStartOptions, startWorker, type InheritedStartOptions } from './worker-start-options.js';

/**
 * Spans per message. A message is copied in one piece (the structured clone), so its size is how
 * long a request arriving meanwhile waits: copying a span costs 1.3-2 µs here, and 128-span
 * messages (~200 µs each) put the traced-request p99 of the stall benchmark at 0.45-0.79 ms,
 * against 0.31-0.58 ms with 32-span messages (10 runs alternated, 2026-11-24; no exporter
 * 0.30-0.37 ms). Smaller still costs CPU: 16-span messages added 5-8 µs per span in total (the
 * port's per-message cost, ~20 µs, and the counters the worker reports back per message); 32
 * added no more than the noise (+1 µs on average over 8 alternated runs).
 */
const MAX_SPANS_PER_MESSAGE = 32;
/**
 * Longest run of copying before the application's event loop gets a turn: about one message, so
 * a burst of admitted spans goes out as a series of short copies rather than one long one.
 */
const POST_SLICE_BUDGET_MS = 0.05;
/**
 * How long admitted spans may wait for more before a message goes that is not full. Each message
 * costs both threads tens of µs (the port, the event, the counters the worker reports back), so
 * at 20 k spans/s messages of ~100 spans every 5 ms cost far less than one per event-loop turn;
 * the wait is nothing next to the batch interval (`flushIntervalMs`).
 */
const POST_DELAY_MS = 5;
/**
 * How long a posting slice may wait for the event loop before `span.end()` posts by itself. A
 * producer that never lets the loop turn (a loop of awaits that do no I/O: an evaluation over a
 * dataset with a CPU-bound scorer) would otherwise fill `maxQueueBytes` here with nothing posted
 * and no acknowledgement read, and drop the rest. Far above a turn of a loop that does turn (the
 * burst benchmark yields every 100 spans, ~1 ms), so only a starved loop pays for posting inside
 * `span.end()`: once per `MAX_SPANS_PER_MESSAGE` spans, up to `STARVED_POST_MESSAGES` messages.
 */
const STARVED_LOOP_MS = 20;
/**
 * Under back-pressure, how long the worker may settle nothing before the application stops
 * waiting for it (`#waitForRoom`): longer than a batch's round trip to a distant service (a few
 * hundred ms), short enough that a service that never answers stalls the application once, not
 * until its requests time out (`requestTimeoutMs`, then retries: no waits while retrying).
 */
export const DELIVERY_STALLED_MS = 1000;
/** Messages posted at most per look from a starved loop (see `#postFromStarvedLoop`). */
const STARVED_POST_MESSAGES = 4;
/** How often the worker reports its counters while they change (`stats()` lags by at most this). */
export const WORKER_STATS_INTERVAL_MS = 25;
/**
 * How long the worker may take to answer a shutdown past the shutdown's own timeout (then it is
 * stopped), or a `dropHeld`.
 */
const WORKER_SHUTDOWN_GRACE_MS = 2000;
/** A worker not ready this long after it was started is given up, like one that cannot start. */
const WORKER_READY_TIMEOUT_MS = 10_000;
/**
 * The worker's young generation. V8's default gives it 32 MB of semi-spaces from the start,
 * although what lives there is short-lived (a span's decoded copy until its batch is written).
 * Measured in the 200 k burst (4 runs alternated, 2026-11-24): peak RSS 262-278 MB against
 * 281-307 MB with the default, and the same process CPU at 20 k spans/s (28.3-33.0 against
 * 28.5-33.0 µs/span, run by run). A 64 MB one cost CPU; 4 MB saved no more.
 */
const WORKER_YOUNG_GENERATION_MB = 8;

export interface WorkerDeliveryOptions {
  readonly options: ResolvedExporterOptions;
  /** The built `export-worker.js` (see `worker-script.ts`). */
  readonly workerScript: URL;
  /** Main-thread delivery, taken over if the worker stops unexpectedly. */
  readonly createFallback: () => Batcher<ReadableSpan>;
  /** How long the worker may take to report `ready`. @default WORKER_READY_TIMEOUT_MS */
  readonly readyTimeoutMs?: number;
}

/** Spans handed to the worker in one message and not yet acknowledged by it. */
interface InTransit {
  readonly seq: number;
  readonly spans: readonly ReadableSpan[];
  readonly bytes: number;
}

const NOTHING_YET: DeliveryStats = {
  queued: 0,
  queuedBytes: 0,
  inFlight: 0,
  delivered: 0,
  retried: 0,
  batchesSent: 0,
  dropped: zeroDrops(),
};

export class WorkerDelivery implements Batcher<ReadableSpan> {
  readonly #options: ResolvedExporterOptions;
  readonly #workerScript: URL;
  readonly #createFallback: () => Batcher<ReadableSpan>;
  readonly #readyTimeoutMs: number;
  readonly #log: Log;
  readonly #reporter: DeliveryReporter;

  #worker: Worker | undefined;
  /** The worker has loaded and listens: spans are posted to it only from then on. */
  #workerReady = false;
  /** Flushes waiting for the worker to be ready (or for delivery to move to this thread). */
  #readyWaiters: Array<() => void> = [];
  #workerError: unknown;
  /** We are stopping the worker ourselves: its exit is not a failure. */
  #terminating = false;
  /**
   * Delivery on this thread (made when first needed): for what the exit flush or a shutdown found
   * waiting while the worker was still loading, and for everything once the worker has failed.
   */
  #here: Batcher<ReadableSpan> | undefined;
  /** The worker failed: every span goes to `#here` from now on. */
  #fellBack = false;
  /**
   * An exit flush runs (`settleForExit` to `exitFlushDone`): flushes no longer wait for a loading
   * worker, the worker reports its drops at the end of a flush, and nothing waits for room.
   */
  #exiting = false;

  // Admitted spans not yet posted, read from #outboxHead (cleared slots behind it).
  #outbox: Array<ReadableSpan | undefined> = [];
  #outboxBytes: number[] = [];
  #outboxHead = 0;
  #outboxTotalBytes = 0;
  #postScheduled = false;
  /** When the pending posting slice was scheduled (`performance.now()`), and spans added since. */
  #postScheduledAt = 0;
  #addsWhileScheduled = 0;
  #postTimer: ReturnType<typeof setTimeout> | undefined;
  /** The worker's reports (`DeliveryWorkerData.reports`), this thread's end. */
  #reports: MessagePort | undefined;
  /** Counts the worker's reports (`DeliveryWorkerData.reported`): what a wait for room sleeps on. */
  #reported: Int32Array | undefined;
  /**
   * Spans the worker had settled (delivered or dropped) when last looked at, and since when
   * (`performance.now()`) that number, or the absence of pressure, has held: see `#waitForRoom`.
   */
  #settledSeen = 0;
  #movingSince = 0;

  readonly #inTransit: InTransit[] = [];
  #inTransitBytes = 0;
  #inTransitCount = 0;
  #seq = 0;

  /** The worker's counters as last reported. */
  #remote: DeliveryStats = NOTHING_YET;
  /** Whether the worker's batcher was retrying when it last reported. */
  #remoteRetrying = false;
  /** Whether the worker was delivering (its batcher's `onDeliveringChanged`) when it last reported. */
  #remoteDelivering = false;
  /** The worker's `waitingBytes` as last reported. */
  #remoteWaitingBytes = 0;
  /** The worker's `sizeCorrection`, which scales the charges made here too. */
  #remoteSizeCorrection = 1;
  /** Drops decided on this thread: admission (`queue_full`), after shutdown, lost with a worker. */
  readonly #localDrops = zeroDrops();

  readonly #requests = new Map<number, () => void>();
  /**
   * The requests (by id) that keep the process alive while they wait (see `#refWhileWaited`),
   * each with the timer that ends a flush's hold.
   */
  readonly #holding = new Map<number, ReturnType<typeof setTimeout> | undefined>();
  /**
   * Flushes still waiting after their `shutdownTimeoutMs` hold ended: they keep the process alive
   * only while the worker delivers, not while it only waits out backoffs (see `#refWhileWaited`).
   */
  readonly #lapsed = new Set<number>();
  #nextRequestId = 0;
  #closing = false;
  #shutdownPromise: Promise<void> | undefined;

  constructor({ options, workerScript, createFallback, readyTimeoutMs = WORKER_READY_TIMEOUT_MS }: WorkerDeliveryOptions) {
    this.#options = options;
    this.#workerScript = workerScript;
    this.#createFallback = createFallback;
    this.#readyTimeoutMs = readyTimeoutMs;
    this.#log = createLog(options.logLevel);
    this.#reporter = new DeliveryReporter(this.#log);
  }

  add(span: ReadableSpan): boolean {
    if (this.#fellBack) return this.#here!.add(span);
    if (this.#closing) {
      this.#dropLocally('shutdown', 1, 'the exporter was shut down');
      return false;
    }
    const { maxBatchBytes } = this.#options;
    const bytes = scaleCharge(admissionBytes(estimateSpanBytes, span, maxBatchBytes), this.#remoteSizeCorrection, maxBatchBytes);
    // Once per message's worth of spans while a slice is due, a look at whether it ever ran.
    if (this.#postScheduled && ++this.#addsWhileScheduled % MAX_SPANS_PER_MESSAGE === 0) {
      if (performance.now() - this.#postScheduledAt > STARVED_LOOP_MS) this.#postFromStarvedLoop();
    }
    const held = this.#heldBytes() + bytes;
    if (held > this.#options.maxQueueBytes) {
      this.#dropLocally('queue_full', 1, `more than maxQueueBytes (${this.#options.maxQueueBytes}) held`);
      // The next turn waits for room all the same: a full queue is when back-pressure matters most,
      // and with everything posted no slice would otherwise run until room freed by itself.
      if (!this.#postScheduled && this.#options.backpressureMs > 0) this.#postSoon();
      return false;
    }
    this.#outbox.push(span);
    this.#outboxBytes.push(bytes);
    this.#outboxTotalBytes += bytes;
    if (this.#postScheduled) return true;
    // Under back-pressure the next turn gets its slice (and its wait), however few spans wait:
    // a producer of a few spans per turn would otherwise fill the bound before the timer's slice.
    const pressed = underBackpressure(this.#waitingBytes(), held, this.#options.maxQueueBytes);
    if (this.#outboxCount() >= MAX_SPANS_PER_MESSAGE || pressed) {
      this.#postSoon();
    } else if (this.#postTimer === undefined) {
      this.#postTimer = setTimeout(this.#postSlice, POST_DELAY_MS);
      this.#postTimer.unref();
    }
    return true;
  }

  forceFlush(): Promise<void> {
    // The worker reports its own drops when its flush is done; these are the ones decided here.
    return this.#flush().then(() => this.#reporter.reportIfDue());
  }

  #flush(): Promise<void> {
    // After shutdown everything is settled (or being settled) by it; no worker starts again.
    if (this.#closing) return this.#shutdownPromise ?? Promise.resolve();
    if (this.#exiting && !this.#workerReady) this.#deliverOutboxHere();
    const here = this.#here?.forceFlush();
    if (this.#fellBack) return here!;
    // Before `ready` nothing has been posted: with nothing waiting either, the worker holds nothing.
    if (!this.#workerReady && this.#outboxCount() === 0) return here ?? Promise.resolve();
    if (!this.#ensureWorker()) return this.forceFlush();
    const inWorker = this.#workerReady ? this.#flushWorker() : this.#untilReady().then(() => this.forceFlush());
    return Promise.all([here, inWorker]).then(() => {});
  }

  settleForExit(): void {
    this.#exiting = true;
    if (this.#fellBack || this.#workerReady) return;
    this.#deliverOutboxHere();
    // Flushes already waiting for the worker to load go on here instead (they no longer wait).
    this.#settleReadyWaiters();
  }

  exitFlushDone(): void {
    this.#exiting = false;
  }

  statsAtExit(): DeliveryStats {
    // The worker's last reports wait on their channel: the event loop will not turn to read them.
    this.#readReports();
    return this.stats();
  }

  async dropHeld(): Promise<void> {
    // A shutdown under way gives up on what it holds by itself, at its own deadline.
    if (this.#closing) return;
    const unposted = this.#takeOutbox().length;
    if (unposted > 0) this.#dropLocally('shutdown', unposted, 'the shutdown timeout passed');
    const here = this.#here?.dropHeld();
    // Nothing is posted before `ready`. The port keeps order: spans in transit are dropped too.
    const inWorker =
      this.#workerReady && this.#worker !== undefined && !this.#fellBack
        ? settleWithin(this.#request({ type: 'dropHeld', id: 0 }, WORKER_SHUTDOWN_GRACE_MS), WORKER_SHUTDOWN_GRACE_MS)
        : undefined;
    await Promise.all([here, inWorker]);
    this.#reporter.report();
  }

  shutdown(timeoutMs: number = this.#options.shutdownTimeoutMs): Promise<void> {
    this.#shutdownPromise ??= this.#close(timeoutMs).catch((error: unknown) => {
      this.#log.error(`callbridge: shutdown failed: ${describeError(error)}`);
    });
    return this.#shutdownPromise;
  }

  stats(): DeliveryStats {
    const remote = this.#remote;
    const local = this.#here?.stats() ?? NOTHING_YET;
    const dropped = zeroDrops();
    for (const reason of DROP_REASONS) {
      dropped[reason] = remote.dropped[reason] + local.dropped[reason] + this.#localDrops[reason];
    }
    return {
      queued: remote.queued + local.queued + this.#outboxCount() + this.#inTransitCount,
      queuedBytes: remote.queuedBytes + local.queuedBytes + this.#outboxTotalBytes + this.#inTransitBytes,
      inFlight: remote.inFlight + local.inFlight,
      delivered: remote.delivered + local.delivered,
      retried: remote.retried + local.retried,
      batchesSent: remote.batchesSent + local.batchesSent,
      dropped,
    };
  }

  isRetrying(): boolean {
    return this.#remoteRetrying || (this.#here?.isRetrying() ?? false);
  }

  /** As the worker last reported it (`onDeliveringChanged`), or the fallback's own. */
  isDelivering(): boolean {
    return this.#remoteDelivering || (this.#here?.isDelivering() ?? false);
  }

  waitingBytes(): number {
    return this.#waitingBytes();
  }

  sizeCorrection(): number {
    return this.#here?.sizeCorrection() ?? this.#remoteSizeCorrection;
  }

  /**
   * The drops decided on this thread (admission, mostly `queue_full` in a burst) and by delivery
   * here. The worker reports its own at the end of the exit flush (`reportDrops`), and otherwise
   * when a flush is done, at most once per interval.
   */
  reportPendingDrops(): void {
    this.#reporter.report();
    this.#here?.reportPendingDrops();
  }

  // ---- the application's side of the port ---------------------------------------------------

  #heldBytes(): number {
    const here = this.#here?.stats().queuedBytes ?? 0;
    return this.#remote.queuedBytes + this.#inTransitBytes + this.#outboxTotalBytes + here;
  }

  /**
   * Bytes of spans not yet in a request: here, in transit, and waiting in the worker's queue (as
   * last reported). What back-pressure measures: requests in flight are delivery under way.
   */
  #waitingBytes(): number {
    const here = this.#here?.waitingBytes() ?? 0;
    return this.#remoteWaitingBytes + this.#inTransitBytes + this.#outboxTotalBytes + here;
  }

  #underBackpressure(): boolean {
    return underBackpressure(this.#waitingBytes(), this.#heldBytes(), this.#options.maxQueueBytes);
  }

  #outboxCount(): number {
    return this.#outbox.length - this.#outboxHead;
  }

  readonly #postSlice = (): void => {
    this.#postScheduled = false;
    clearTimeout(this.#postTimer);
    this.#postTimer = undefined;
    // With nothing to post, a slice still waits for room when a span was just dropped (see `add`).
    if (this.#outboxCount() > 0 ? !this.#ensureWorker() : this.#worker === undefined) return;
    if (this.#workerReady) this.#postFor(performance.now() + POST_SLICE_BUDGET_MS);
    this.#waitForRoom();
    // Before `ready` the worker's `ready` report schedules the next slice.
    if (this.#workerReady && this.#outboxCount() > 0) this.#postSoon();
  };

  /**
   * Back-pressure: while `underBackpressure` (spans wait to be sent past a share of the bound, or
   * the bound is nearly full) and the worker is delivering, sleep until its reports free enough
   * room, for at most `backpressureMs`. What waits here is posted meanwhile. A retrying worker is
   * not waited for; nor is one that has settled nothing for `DELIVERY_STALLED_MS` while under
   * pressure (a service that takes requests and does not answer), so such a service costs the
   * application that long once, not until the requests time out.
   */
  #waitForRoom(): void {
    const reported = this.#reported;
    const { backpressureMs } = this.#options;
    if (reported === undefined || backpressureMs === 0 || !this.#mayWaitForRoom()) return;
    const started = performance.now();
    const deadline = started + backpressureMs;
    for (;;) {
      const seen = Atomics.load(reported, 0);
      this.#readReports();
      // What waits is posted meanwhile, within the same deadline: a large outbox (a worker that
      // was loading, a producer of many spans per turn) is posted over several turns.
      if (this.#workerReady && this.#worker !== undefined && !this.#fellBack) this.#postFor(deadline);
      if (!this.#mayWaitForRoom()) break;
      const left = deadline - performance.now();
      if (left <= 0) break;
      Atomics.wait(reported, 0, seen, left);
    }
    this.#reporter.recordBackpressure(performance.now() - started);
  }

  #mayWaitForRoom(): boolean {
    // A worker still loading is waited for too: in a burst the producer would otherwise fill the
    // bound in the ~150 ms the worker takes to load, and drop the rest.
    if (this.#worker === undefined || this.#fellBack || this.#closing || this.#exiting || this.isRetrying()) return false;
    const now = performance.now();
    if (!this.#underBackpressure()) {
      this.#movingSince = now;
      return false;
    }
    const settled = settledCount(this.#remote);
    if (settled !== this.#settledSeen) {
      this.#settledSeen = settled;
      this.#movingSince = now;
    }
    return now - this.#movingSince < DELIVERY_STALLED_MS;
  }

  /** Post messages of spans until the outbox is empty or `deadline` (`performance.now()`) has passed. */
  #postFor(deadline: number): void {
    while (this.#outboxCount() > 0 && performance.now() < deadline) this.#postMessageOfSpans();
  }

  /** Post everything admitted so far (a flush or shutdown asked for it: no slicing). */
  #postAll(): void {
    clearTimeout(this.#postTimer);
    this.#postTimer = undefined;
    while (this.#outboxCount() > 0 && this.#worker !== undefined) this.#postMessageOfSpans();
  }

  #postMessageOfSpans(): void {
    const worker = this.#worker!;
    const end = Math.min(this.#outbox.length, this.#outboxHead + MAX_SPANS_PER_MESSAGE);
    const spans: ReadableSpan[] = [];
    let bytes = 0;
    for (let i = this.#outboxHead; i < end; i++) {
      spans.push(this.#outbox[i]!);
      bytes += this.#outboxBytes[i]!;
      this.#outbox[i] = undefined;
    }
    this.#outboxHead = end;
    this.#outboxTotalBytes -= bytes;
    if (this.#outboxHead === this.#outbox.length) {
      this.#outbox = [];
      this.#outboxBytes = [];
      this.#outboxHead = 0;
    }

    const seq = ++this.#seq;
    const copies = spans.map(encodeSpan);
    try {
      worker.postMessage({ type: 'spans', seq, spans: copies } satisfies ToWorker);
    } catch {
      // A value the structured clone cannot copy: send the message again with the spans that hold
      // one as text. Only those: the text form changes other values too (NaN becomes "NaN", where
      // the mapping writes "nan"), and a span must make the same call whatever its neighbours.
      worker.postMessage({ type: 'spans', seq, spans: copies.map(cloneableCopy) } satisfies ToWorker);
    }
    this.#inTransit.push({ seq, spans, bytes });
    this.#inTransitBytes += bytes;
    this.#inTransitCount += spans.length;
  }

  /** A slice of posting on the next turn of the event loop, unless one is already due. */
  #postSoon(): void {
    if (this.#postScheduled) return;
    this.#postScheduled = true;
    this.#postScheduledAt = performance.now();
    this.#addsWhileScheduled = 0;
    setImmediate(this.#postSlice);
  }

  /**
   * The event loop has not turned for `STARVED_LOOP_MS`: start the worker if need be, read what
   * it reported (`ready`; acknowledgements, which free room under `maxQueueBytes`) and post up to
   * `STARVED_POST_MESSAGES` messages from here.
   */
  #postFromStarvedLoop(): void {
    // The slice that would have started the worker has not run either; its `ready` comes as a report.
    if (!this.#ensureWorker()) return;
    this.#readReports();
    // More than the 32 spans added since the last look, so that a backlog (spans that waited for
    // the worker to load) drains: ~50-70 µs a message.
    for (let messages = 0; messages < STARVED_POST_MESSAGES && this.#outboxCount() > 0; messages++) {
      if (!this.#workerReady || this.#worker === undefined || this.#fellBack) return;
      this.#postMessageOfSpans();
    }
  }

  /** Handle the worker's reports waiting on the channel now, without waiting for the event loop. */
  #readReports(): void {
    const reports = this.#reports;
    if (reports === undefined) return;
    for (let report = receiveMessageOnPort(reports); report !== undefined; report = receiveMessageOnPort(reports)) {
      this.#onMessage(report.message as FromWorker);
    }
  }

  #flushWorker(): Promise<void> {
    this.#postAll();
    return this.#request({ type: 'flush', id: 0, reportDrops: this.#exiting }, this.#options.shutdownTimeoutMs);
  }

  /** Resolves when the worker is ready, or delivery has moved to this thread. */
  #untilReady(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#readyWaiters.push(resolve);
      this.#refWhileWaited();
    });
  }

  #settleReadyWaiters(): void {
    const waiters = this.#readyWaiters;
    this.#readyWaiters = [];
    this.#refWhileWaited();
    for (const resolve of waiters) resolve();
  }

  /** The spans waiting for a worker that is not ready go to delivery on this thread. */
  #deliverOutboxHere(): void {
    if (this.#outboxCount() === 0) return;
    const here = (this.#here ??= this.#createFallback());
    for (const span of this.#takeOutbox()) here.add(span);
  }

  /** Every admitted span not yet posted, in order; the outbox is left empty. */
  #takeOutbox(): ReadableSpan[] {
    const spans = this.#outbox.slice(this.#outboxHead) as ReadableSpan[];
    clearTimeout(this.#postTimer);
    this.#postTimer = undefined;
    this.#outbox = [];
    this.#outboxBytes = [];
    this.#outboxHead = 0;
    this.#outboxTotalBytes = 0;
    return spans;
  }

  /**
   * Post `message`; resolves when the worker answers it. The process is kept alive meanwhile for
   * `holdMs`, then only while the worker delivers (see `#refWhileWaited`): a flush waits as long as
   * the retries do. Without `holdMs` (a shutdown, which its own timeout bounds), until the answer.
   */
  #request(message: Extract<ToWorker, { type: 'flush' | 'shutdown' | 'dropHeld' }>, holdMs?: number): Promise<void> {
    const id = ++this.#nextRequestId;
    return new Promise<void>((resolve) => {
      this.#requests.set(id, resolve);
      const letGo =
        holdMs === undefined
          ? undefined
          : setTimeout(() => {
              this.#holding.delete(id);
              this.#lapsed.add(id);
              // Whether the worker delivers, as of now: a report may wait in the channel.
              this.#readReports();
              this.#refWhileWaited();
            }, holdMs).unref();
      this.#holding.set(id, letGo);
      this.#refWhileWaited();
      this.#worker!.postMessage({ ...message, id } satisfies ToWorker);
    });
  }

  #releaseAll(): void {
    for (const letGo of this.#holding.values()) clearTimeout(letGo);
    this.#holding.clear();
    this.#lapsed.clear();
  }

  /**
   * Keep the process alive while a flush or shutdown waits for the worker; otherwise never. On
   * this thread a request on the wire, and the building of the next batch, keep the process alive
   * and a backoff does not; the worker's cannot, so the wait stands in for them. A flush holds for
   * `shutdownTimeoutMs`, and after that only while the worker reports that it delivers (builds,
   * sends or awaits the answer to a batch) rather than only waits out backoffs. So a service that
   * stays down does not hold the process for the retries' whole `maxRetryMs` (the exit flush then
   * counts what is left when the process ends), and a slow one is not cut off in the middle of a
   * flush, which would leave the exit flush to drop what it was delivering.
   */
  #refWhileWaited(): void {
    if (this.#worker === undefined) return;
    const waited = this.#holding.size > 0 || this.#readyWaiters.length > 0 || (this.#lapsed.size > 0 && this.#remoteDelivering);
    if (waited) this.#worker.ref();
    else this.#worker.unref();
  }

  #onMessage(message: FromWorker): void {
    switch (message.type) {
      case 'ready':
        this.#workerReady = true;
        this.#settleReadyWaiters();
        if (this.#outboxCount() > 0) this.#postSoon();
        break;
      case 'stats':
        this.#applyReport(message);
        break;
      case 'done': {
        this.#applyReport(message);
        const resolve = this.#requests.get(message.id);
        this.#requests.delete(message.id);
        clearTimeout(this.#holding.get(message.id));
        this.#holding.delete(message.id);
        this.#lapsed.delete(message.id);
        this.#refWhileWaited();
        resolve?.();
        break;
      }
      case 'diag':
        // The worker's own messages: printed here too when the application has no diag logger.
        if (message.level === 'debug' || message.level === 'verbose') {
          try {
            diag[message.level](message.message);
          } catch {
            // The application's logger threw: its problem must not escape this listener as an
            // uncaught exception (SPEC §4.12), as createLog guards the other levels.
          }
        } else {
          this.#log[message.level](message.message);
        }
        break;
    }
  }

  #applyReport(report: WorkerStatsReport): void {
    this.#remote = report.stats;
    this.#remoteRetrying = report.retrying;
    this.#remoteWaitingBytes = report.waitingBytes;
    this.#remoteSizeCorrection = report.sizeCorrection;
    if (this.#remoteDelivering !== report.delivering) {
      this.#remoteDelivering = report.delivering;
      if (this.#lapsed.size > 0) this.#refWhileWaited();
    }
    while (this.#inTransit.length > 0 && this.#inTransit[0]!.seq <= report.ackSeq) {
      const acknowledged = this.#inTransit.shift()!;
      this.#inTransitBytes -= acknowledged.bytes;
      this.#inTransitCount -= acknowledged.spans.length;
    }
  }

  #dropLocally(reason: DropReason, count: number, detail: string): void {
    this.#localDrops[reason] += count;
    this.#reporter.record(reason, count, detail);
  }

  // ---- the worker's life ------------------------------------------------------------------

  /** Start the worker if needed; false when delivery has moved to this thread. */
  #ensureWorker(): boolean {
    if (this.#worker !== undefined) return true;
    if (this.#fellBack) return false;
    let worker: Worker;
    const { port1: reports, port2: workerEnd } = new MessageChannel();
    const reported = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
    try {
      const workerData: DeliveryWorkerData = {
        options: this.#options,
        statsIntervalMs: WORKER_STATS_INTERVAL_MS,
        reports: workerEnd,
        reported,
      };
      const start = (inherited: InheritedStartOptions): Worker =>
        new Worker(this.#workerScript, {
          workerData,
          transferList: [workerEnd],
          ...inherited,
          resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
        });
      worker = startWorker(start, inheritedStartOptions(process.execArgv, process.env));
    } catch (error) {
      reports.close();
      this.#fallBack(`could not start: ${describeError(error)}`);
      return false;
    }
    reports.on('message', (message: FromWorker) => this.#onMessage(message));
    // After the listener (which refs it): the worker's own ref, not its channel's, keeps the process.
    reports.unref();
    this.#reports = reports;
    this.#reported = reported;
    // Pressure from the first spans (a bound smaller than a few messages) may be waited on too.
    this.#movingSince = performance.now();
    worker.on('error', (error) => {
      this.#workerError = error;
    });
    worker.on('exit', (code) => {
      // What it reported before it stopped comes first (the channel is not ordered with 'exit').
      if (this.#reports === reports) {
        this.#readReports();
        this.#reports = undefined;
      }
      reports.close();
      if (this.#terminating) return;
      const cause = this.#workerError === undefined ? `exit code ${code}` : describeError(this.#workerError);
      this.#fallBack(`stopped: ${cause}`);
    });
    worker.unref();
    this.#worker = worker;
    setTimeout(() => {
      if (this.#worker !== worker || this.#workerReady) return;
      this.#terminating = true;
      void worker.terminate();
      this.#fallBack(`was not ready within ${this.#readyTimeoutMs} ms`);
    }, this.#readyTimeoutMs).unref();
    return true;
  }

  /**
   * The worker is gone (or never started): deliver on this thread from now on. Spans it never
   * acknowledged are still here and go to main-thread delivery in their order; the ones it had
   * queued or in flight are lost with it and counted as `shutdown` drops.
   */
  #fallBack(reason: string): void {
    this.#worker = undefined;
    const lost = this.#remote.queued + this.#remote.inFlight;
    this.#remote = { ...this.#remote, queued: 0, queuedBytes: 0, inFlight: 0 };
    this.#remoteRetrying = false;
    this.#remoteDelivering = false;
    this.#remoteWaitingBytes = 0;
    if (lost > 0) this.#dropLocally('shutdown', lost, 'the delivery worker stopped');
    this.#log.error(
      `callbridge: the delivery worker ${reason}; delivering on the application's thread from now on` +
        (lost > 0 ? ` (${lost} spans it held are dropped as shutdown)` : ''),
    );
    const fallback = (this.#here ??= this.#createFallback());
    this.#fellBack = true;
    for (const message of this.#inTransit.splice(0)) for (const span of message.spans) fallback.add(span);
    for (const span of this.#takeOutbox()) fallback.add(span);
    this.#inTransitBytes = 0;
    this.#inTransitCount = 0;
    // Whoever waits for the worker now waits for the spans that moved here.
    const waiting = [...this.#requests.values()];
    this.#requests.clear();
    this.#releaseAll();
    void fallback.forceFlush().then(() => {
      for (const resolve of waiting) resolve();
    });
    // Flushes waiting for the worker to load go on with delivery here.
    this.#settleReadyWaiters();
  }

  /** Count everything the worker holds or has not acknowledged as `shutdown`: it is being stopped. */
  #abandonWorker(detail: string): void {
    this.#dropLocally('shutdown', this.#remote.queued + this.#remote.inFlight + this.#inTransitCount, detail);
    this.#remote = { ...this.#remote, queued: 0, queuedBytes: 0, inFlight: 0 };
    this.#remoteRetrying = false;
    this.#remoteDelivering = false;
    this.#remoteWaitingBytes = 0;
    this.#inTransit.length = 0;
    this.#inTransitBytes = 0;
    this.#inTransitCount = 0;
  }

  async #close(timeoutMs: number): Promise<void> {
    this.#closing = true;
    if (!this.#fellBack && !this.#workerReady) {
      // Nothing was ever posted to it: what waits is delivered here, and a worker still loading
      // is stopped without waiting for it.
      this.#deliverOutboxHere();
      const loading = this.#worker;
      if (loading !== undefined) {
        this.#terminating = true;
        this.#worker = undefined;
        this.#settleReadyWaiters();
        await loading.terminate();
      }
    } else if ((this.#worker !== undefined || this.#outboxCount() > 0) && this.#ensureWorker()) {
      this.#postAll();
      const answered = await settleWithin(this.#request({ type: 'shutdown', id: 0, timeoutMs }), timeoutMs + WORKER_SHUTDOWN_GRACE_MS);
      const worker = this.#worker;
      if (worker !== undefined) {
        if (!answered) this.#abandonWorker('the delivery worker did not stop in time');
        this.#terminating = true;
        this.#worker = undefined;
        // Flushes still waiting for its answer end with it: what it held is counted above.
        const waiting = [...this.#requests.values()];
        this.#requests.clear();
        this.#releaseAll();
        for (const resolve of waiting) resolve();
        await worker.terminate();
      }
    }
    await this.#here?.shutdown(timeoutMs);
    this.#reporter.report();
  }
}

/**
 * `transfer` as it is when the structured clone can copy it, else its text form (`toCloneable`).
 * Tried by cloning it once on its own: this runs only for a message the clone already refused.
 */
function cloneableCopy(transfer: SpanTransfer): SpanTransfer {
  try {
    structuredClone(transfer);
    return transfer;
  } catch {
    return toCloneable(transfer);
  }
}

/** Spans the worker has delivered or dropped, by its counters. */
function settledCount(stats: DeliveryStats): number {
  let settled = stats.delivered;
  for (const reason of DROP_REASONS) settled += stats.dropped[reason];
  return settled;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
