/**
 * The OTel `SpanExporter` of callbridge (SPEC §1, §4). `export()` only queues the ended spans in
 * the batcher (O(1) per span) and answers SUCCESS at once: mapping, JSON and HTTP happen in later
 * macrotasks, started from `setImmediate` once a send slot is free and built in time slices, so
 * neither `span.end()` nor the span processor ever waits on mapping, JSON or the network.
 */
import type { ExportResult } from '@opentelemetry/core';
import { ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { createBatcher, type Batcher, type DeliveryStats } from '../batcher/index.js';
import { createTransport } from '../client/transport.js';
import { InvalidOptionError } from '../errors.js';
import { endOpenCalls } from '../trace/call-end.js';
import { createLog, type Log } from '../log.js';
import { resolveExporterOptions, type ExporterOptions, type ResolvedExporterOptions } from '../options.js';
import { flushWhenNew, watchExit, type ExitParticipant } from './exit-watch.js';
import { globalProcessorsHoldingSpansFor } from './global-processors.js';
import { createSpanCodec } from './span-codec.js';
import { WorkerDelivery } from './worker-delivery.js';
import { usableCores } from './usable-cores.js';
import { findWorkerScript } from './worker-script.js';

/** How many spans `exporter` was given through `export()`; for `register()`'s exit warning. */
// Assigned by CallbridgeExporter's static block, as flushBeforeExit below.
export let exportedSpans: (exporter: CallbridgeExporter) => number;

/**
 * The flush run on `beforeExit`, by `register()` and by an exporter of the application's own
 * provider (exit-watch.ts): `flush()` (which ends by flushing `exporter`), bounded by
 * `shutdownTimeoutMs`. The batcher's backoff timers are unref'd, so that they never keep a running
 * app alive; during a long retry of an exiting process nothing else would then keep it alive, and
 * it would exit with the spans neither delivered nor counted. So this holds a ref'd timer for
 * `shutdownTimeoutMs` while the flush runs; when it fires, whatever is still unsettled is dropped
 * as `shutdown` at once (counted in `stats()`, reported through `diag`), and the process may exit.
 * The exporter stays open, for a process that a `beforeExit` listener keeps going. `flush` may end
 * before the spans are settled (the SDK ends a provider's flush at its own timeout), so the
 * batcher's own flush is awaited too, under the same deadline. Never rejects when `flush` does not.
 * Assigned by CallbridgeExporter's static block, which can reach its private fields.
 */
export let flushBeforeExit: (exporter: CallbridgeExporter, flush: () => Promise<void>) => Promise<void>;

/**
 * Whether `exporter`'s service is down for now: a request failed with a retryable error, none has
 * succeeded since, and none is on the wire (a retry being answered slowly is not "down"). For
 * `register()`'s `forceFlush`, which stops waiting for such a service but not for a slow one.
 * Assigned by the static block, as above.
 */
export let isServiceDown: (exporter: CallbridgeExporter) => boolean;

/**
 * `register()`'s `forceFlush` stopped waiting for `exporter`'s service, which is down: the flushes
 * that follow (`shutdown()`, the exit flush) do not wait for the same outage again. Assigned by
 * the static block, as above.
 */
export let noteGaveUpWhileDown: (exporter: CallbridgeExporter) => void;

/**
 * Delivers finished spans as calls through `call/upsert_batch` (or `calls/complete` for
 * complete-mode projects), batched, retried and bounded in memory. Works behind
 * `BatchSpanProcessor` and `SimpleSpanProcessor` alike.
 *
 * @example
 * const exporter = new CallbridgeExporter({ baseUrl: 'http://127.0.0.1:6345', projectId: 'acme/demo',
 *   username: 'dev', password: 'pw' });
 * const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
 * // ...
 * await provider.shutdown(); // flushes and closes the exporter
 * console.log(exporter.stats().delivered);
 *
 * @throws InvalidOptionError at construction when an option is invalid (never later).
 */
export class CallbridgeExporter implements SpanExporter {
  readonly #batcher: Batcher<ReadableSpan>;
  readonly #shutdownTimeoutMs: number;
  readonly #log: Log;
  readonly #flushOnExit: boolean;
  readonly #unwatchExit: () => void;
  /** Spans given to `export()`: an exit flush runs when more arrived since the last one began. */
  #exported = 0;
  readonly #exitFlush = flushWhenNew(
    () => this.#exported,
    // The batcher's own flush is what flushBeforeExit awaits; there is no processor to flush here.
    () => flushBeforeExit(this, () => Promise.resolve()),
  );
  #shutDown = false;
  #shutdownDone: Promise<void> | undefined;
  /** Watches the end of the process again once spans came after shutdown (see `export()`). */
  #lateDropsWatched = false;
  /** `#exported` at the last exit flush (-1: none): when a processor's buffer cannot be read, it is flushed again only after more spans came. */
  #exportedAtProcessorFlush = -1;
  /** `delivered` when a flush last gave up on a service that was down (see `#flushWaitMs`). */
  #deliveredAtGiveUp: number | undefined;

  static {
    exportedSpans = (exporter) => exporter.#exported;
    isServiceDown = (exporter) => exporter.#batcher.isRetrying() && !exporter.#batcher.isDelivering();
    noteGaveUpWhileDown = (exporter) => {
      exporter.#deliveredAtGiveUp = exporter.#batcher.stats().delivered;
    };
    // The exit flushes (register()'s, and this exporter's own) need the batcher and the timeout;
    // they are not public API.
    flushBeforeExit = async (exporter, flush) => {
      const batcher = exporter.#batcher;
      let deadline: ReturnType<typeof setTimeout> | undefined;
      // Ref'd on purpose, unlike every other timer here: see flushBeforeExit's comment.
      const outOfTime = new Promise<false>((resolve) => {
        deadline = setTimeout(() => resolve(false), exporter.#flushWaitMs());
      });
      try {
        batcher.settleForExit?.();
        // `flush()` (the exporter's own, or register()'s processor-then-exporter flush) may end
        // before the spans are settled: a BatchSpanProcessor bounds its export by a timeout of
        // its own. So the batcher's own flush follows, and the deadline bounds both.
        const settled = await Promise.race([flush().then(() => batcher.forceFlush()).then(() => true), outOfTime]);
        if (settled) {
          // A flush reports drops at most once per interval; at exit the next interval never comes.
          batcher.reportPendingDrops();
        } else {
          // Not a shutdown: a `beforeExit` listener may keep the process going (Node allows it),
          // and the spans it makes must still be delivered. What is held is counted before the
          // process ends (the worker's answer is awaited).
          await batcher.dropHeld();
        }
      } finally {
        clearTimeout(deadline);
        // Usually the process now exits; one that a beforeExit listener revived goes on as before.
        batcher.exitFlushDone?.();
      }
    };
  }

  constructor(options: ExporterOptions = {}) {
    const resolved = resolveExporterOptions(options);
    this.#shutdownTimeoutMs = resolved.shutdownTimeoutMs;
    this.#log = createLog(resolved.logLevel);
    this.#flushOnExit = resolved.flushOnExit;
    this.#batcher = createDelivery(resolved);
    const exitParticipant: ExitParticipant = {
      flushBeforeExit: () => this.#flushBeforeExit(),
      reportLostAtExit: () => this.#reportLostAtExit(),
    };
    this.#unwatchExit = watchExit(exitParticipant);
  }

  /**
   * Queue `spans` for delivery and call back at once: SUCCESS (delivery, retries and drops are the
   * batcher's, visible in `stats()`), or FAILED after `shutdown()` (the spans count as `shutdown`).
   */
  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    let result: ExportResult;
    try {
      this.#exported += spans.length;
      for (const span of spans) this.#batcher.add(span);
      if (this.#shutDown) this.#watchLateDrops();
      result = this.#shutDown
        ? { code: ExportResultCode.FAILED, error: new Error('callbridge: the exporter was shut down') }
        : { code: ExportResultCode.SUCCESS };
    } catch (error) {
      // Unreachable by design (add() never throws); if it happens, the processor hears FAILED.
      result = { code: ExportResultCode.FAILED, error: error instanceof Error ? error : new Error(String(error)) };
    }
    try {
      resultCallback(result);
    } catch (error) {
      this.#log.error(`callbridge: the span processor's export callback threw: ${String(error)}`);
    }
  }

  /** Resolves when every span exported before the call is delivered or dropped. Never rejects. */
  forceFlush(): Promise<void> {
    return this.#batcher.forceFlush();
  }

  /**
   * Flush (at most `shutdownTimeoutMs`), drop what is left as `shutdown`, close the connection
   * pool. Idempotent; later `export()` calls answer FAILED.
   */
  shutdown(): Promise<void> {
    this.#shutDown = true;
    // Watched until it is done: a shutdown not awaited before process.exit() can still lose spans.
    this.#shutdownDone ??= this.#batcher.shutdown(this.#flushWaitMs()).finally(this.#unwatchExit);
    return this.#shutdownDone;
  }

  /** Delivery counters (SPEC §4.1): queued, in flight, delivered, retried, dropped by reason. */
  stats(): DeliveryStats {
    return this.#batcher.stats();
  }

  /**
   * How long a final flush (shutdown, exit) may wait: `shutdownTimeoutMs`, or nothing when a flush
   * already gave up on this outage (the service still down, nothing delivered since). A script
   * whose `forceFlush()` waited out a service that is down would otherwise wait as long again at
   * its end, for the same service.
   */
  #flushWaitMs(): number {
    const sameOutage =
      this.#deliveredAtGiveUp !== undefined && isServiceDown(this) && this.#batcher.stats().delivered === this.#deliveredAtGiveUp;
    return sameOutage ? 0 : this.#shutdownTimeoutMs;
  }

  /**
   * Spans given after shutdown are counted as `shutdown` drops, whose report waits for the next
   * interval on an unref'd timer: a process that ends first (a stop handler's `await shutdown()`
   * with requests still ending their spans, then `process.exit()`) would never say so, and the
   * exit watch let go of this exporter when its shutdown was done. So the end of the process is
   * watched again, only to report those drops.
   */
  #watchLateDrops(): void {
    if (this.#lateDropsWatched) return;
    this.#lateDropsWatched = true;
    const report = (): void => this.#batcher.reportPendingDrops();
    watchExit({ flushBeforeExit: report, reportLostAtExit: report });
  }

  /**
   * `beforeExit`: deliver what was exported since the last exit flush began (see exit-watch.ts),
   * and what the processors of the application's global provider still buffer for it.
   */
  #flushBeforeExit(): void {
    if (!this.#flushOnExit || this.#shutDown) return;
    // As register()'s exit flush does: nothing is left to run, so a traced stream still unread
    // never will be. Its call ends now (`unfinished`) and, behind a SimpleSpanProcessor (exported
    // inside `span.end()`), goes with this flush instead of never ending, unseen.
    endOpenCalls();
    // What this exporter holds now: the flush's ref'd deadline keeps the process alive meanwhile.
    this.#exitFlush();
    // A BatchSpanProcessor (NodeSDK's default) hands its buffer over only every 5 s on an
    // unref'd timer, so a script that simply ends lost up to 5 s of spans, unseen. The global
    // provider's processors that export here are flushed (not the provider: its other exporters
    // are the application's) when they hold spans: what they hand over is flushed at once when
    // no flush runs, else by the next `beforeExit`, which follows that flush. An empty buffer
    // flushes nothing, so an idle process is not kept looping by it.
    const unknownBufferDue = this.#exported !== this.#exportedAtProcessorFlush;
    this.#exportedAtProcessorFlush = this.#exported;
    const processors = globalProcessorsHoldingSpansFor(this, unknownBufferDue);
    if (processors.length === 0) return;
    Promise.all(processors.map((processor) => Promise.resolve().then(() => processor.forceFlush()))).then(
      () => this.#exitFlush(),
      () => this.#exitFlush(),
    );
  }

  /**
   * `exit` (once per process): nothing can be sent any more; what is still held is lost, and is
   * said to be. Spans in a request may have reached the service: those are possibly lost.
   */
  #reportLostAtExit(): void {
    const { queued, inFlight } = this.#batcher.statsAtExit?.() ?? this.#batcher.stats();
    const count = queued + inFlight;
    if (count === 0) return;
    const [held, they] = count === 1 ? ['1 span', 'it'] : [`${count} spans`, 'they'];
    const what =
      inFlight === 0
        ? `${held} not yet delivered; ${they} ${count === 1 ? 'is' : 'are'} lost`
        : `${held} not confirmed delivered (${inFlight} in requests still in flight); ${they} may be lost`;
    this.#log.warn(`callbridge: the process exited with ${what} (await forceFlush() or shutdown() before the process ends)`);
  }
}


/**
 * The batcher on the thread `deliveryThread` asks for (see its JSDoc in options.ts).
 * @throws InvalidOptionError for `'worker'` when the worker script is not where it should be.
 */
function createDelivery(options: ResolvedExporterOptions): Batcher<ReadableSpan> {
  const onMainThread = (): Batcher<ReadableSpan> =>
    createBatcher({ ...options, transport: createTransport(options), codec: createSpanCodec(options.projectId) });
  if (options.deliveryThread === 'main') return onMainThread();
  const workerScript = findWorkerScript();
  if (workerScript === undefined) {
    if (options.deliveryThread === 'worker') {
      throw new InvalidOptionError(
        'deliveryThread',
        "'main' or 'auto' here: export-worker.js is not beside callbridge's bundle (a bundler may have left it out)",
        options.deliveryThread,
      );
    }
    return onMainThread();
  }
  if (options.deliveryThread === 'auto' && usableCores() < 2) return onMainThread();
  return new WorkerDelivery({ options, workerScript, createFallback: onMainThread });
}
