/**
 * `register()`: the one-call setup of SPEC §1. A `NodeTracerProvider` (AsyncLocalStorage context)
 * with a `CallbridgeExporter` behind a span processor, flushed on `beforeExit` (SPEC §4.11).
 *
 * Which processor, by default: neither of the SDK's. Our exporter already batches, bounds memory
 * and sends in the background, and its `export()` is O(1). Read in sdk-trace 2.12:
 * - `BatchSpanProcessor` buffers a second time (at most 2048 spans, then drops them silently to
 *   us: the loss SPEC §6 measures for the OTLP exporter), holds spans up to 5 s, and exports 512 at
 *   a time in one synchronous loop;
 * - `SimpleSpanProcessor` exports each span at once but pays, per span, an async function and a
 *   `new Promise` (two promises and two microtask hops), a `suppressTracing` context copy plus an
 *   AsyncLocalStorage `run`, a `Set` insert/delete of the pending export, and a metrics `add` with
 *   an attribute object.
 * The `direct` processor below does only what is needed: one sampled-flag check and
 * `exporter.export([span])`. Suppression of the exporter's own HTTP spans (SPEC §4.12) is done by
 * the batcher where it sends, so it is not repeated per span here. `'simple'` and `'batch'` remain
 * available for users who want the SDK's processors.
 */
import { context, createContextKey, propagation, ROOT_CONTEXT, trace as otelTrace, TraceFlags } from '@opentelemetry/api';
import type { Context, ProxyTracerProvider } from '@opentelemetry/api';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-node';
import { InvalidOptionError } from '../errors.js';
import { endOpenCalls } from '../trace/call-end.js';
import { createLog, type Log } from '../log.js';
import { resolveDelivery, resolveLogLevel, type ExporterOptions } from '../options.js';
import { flushWhenNew, watchExit } from './exit-watch.js';
import { CallbridgeExporter, exportedSpans, flushBeforeExit, isServiceDown, noteGaveUpWhileDown } from './exporter.js';

/** Options of `register()`: the exporter's options plus how the provider is set up. */
export interface RegisterOptions extends ExporterOptions {
  /**
   * Register the provider globally: tracer provider, AsyncLocalStorage context manager and W3C
   * propagators, so `trace()`, `@traced()` and other instrumentations use it. With `false` the
   * provider is only returned (use `provider.getTracer()` directly).
   * @default true
   */
  readonly global?: boolean;
  /**
   * The span processor in front of the exporter: `'direct'` (hands each ended span straight to
   * the exporter, which batches; cheapest), or the SDK's `'simple'` or `'batch'`.
   * @default 'direct'
   */
  readonly spanProcessor?: 'direct' | 'simple' | 'batch';
  /**
   * Flush on the process's `beforeExit`, so a short script that simply ends loses nothing: the
   * provider (a `'batch'` processor's buffer), then the exporter.
   * @default true
   */
  readonly flushOnExit?: boolean;
}

/** What `register()` returns. */
export interface Tracing {
  readonly provider: NodeTracerProvider;
  readonly exporter: CallbridgeExporter;
  /**
   * Resolves when every span ended before the call is delivered or dropped, or after
   * `shutdownTimeoutMs` with a warning saying how many are still waiting (they stay queued and
   * are retried until `maxRetryMs`; `exporter.stats()` tells). After such a warning, `shutdown()`
   * and the exit flush do not wait again while that outage lasts. Never rejects.
   */
  forceFlush(): Promise<void>;
  /** Flush, close the exporter, remove the exit hook and the global registration. Idempotent; never rejects. */
  shutdown(): Promise<void>;
}

/** A span processor that also counts the spans it handed on (to tell whether a flush is due). */
interface CountingProcessor extends SpanProcessor {
  readonly endedSpans: number;
}

/**
 * Set up tracing into the service: a provider, the exporter and an exit flush.
 *
 * @example
 * const tracing = register({ baseUrl: server.url, projectId: 'acme/demo', username: 'dev', password: 'pw' });
 * const answer = trace(async function answer(q: string) { ... });
 * await answer('hi');
 * await tracing.shutdown(); // optional in a script: beforeExit flushes anyway
 *
 * @throws InvalidOptionError when an option is invalid (at this call, never later).
 */
export function register(options: RegisterOptions = {}): Tracing {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', 'an object', options);
  }
  const { global = true, spanProcessor = 'direct', flushOnExit = true, ...exporterOptions } = options;
  if (typeof global !== 'boolean') throw new InvalidOptionError('global', 'a boolean', global);
  if (typeof flushOnExit !== 'boolean') throw new InvalidOptionError('flushOnExit', 'a boolean', flushOnExit);
  if (spanProcessor !== 'direct' && spanProcessor !== 'simple' && spanProcessor !== 'batch') {
    throw new InvalidOptionError('spanProcessor', "'direct', 'simple' or 'batch'", spanProcessor);
  }
  // The exit flush below covers the exporter too: it flushes the provider first.
  const exporter = new CallbridgeExporter({ ...exporterOptions, flushOnExit: false });
  const log = createLog(resolveLogLevel(exporterOptions.logLevel));
  const processor = createProcessor(spanProcessor, exporter, log);
  const { shutdownTimeoutMs } = resolveDelivery(exporterOptions);
  const provider = new NodeTracerProvider({ spanProcessors: [processor] });
  const installed = global ? registerGlobally(provider, log) : NOTHING_INSTALLED;
  const ownsGlobal = installed.tracerProvider;

  // The processor (the provider's only one), then the exporter: BatchSpanProcessor's forceFlush
  // hands its buffer over but does not flush the exporter. Not `provider.forceFlush()`: the SDK
  // bounds that by a timer of its own (30 s), which ends it with its own words ("Span processor
  // did not completed within timeout period") even while a slow service is still answering, and
  // holds the process until then. Unbounded here; `forceFlush` and the exit flush bound it.
  const flushAll = async (): Promise<void> => {
    await processor.forceFlush();
    await exporter.forceFlush();
  };
  const reportFlushError = (error: unknown): void => log.error(`callbridge: flush failed: ${String(error)}`);

  const forceFlush = async (): Promise<void> => {
    const givingUp = whenDownFor(exporter, shutdownTimeoutMs);
    let gaveUp = false;
    // Once given up on, the flush's own end (delivered or dropped later) says nothing more.
    const flushed = flushAll().then(
      () => true,
      (error: unknown) => {
        if (!gaveUp) reportFlushError(error);
        return true;
      },
    );
    if (!(await Promise.race([flushed, givingUp.reached]))) {
      gaveUp = true;
      noteGaveUpWhileDown(exporter);
      warnStillWaiting(exporter, shutdownTimeoutMs, log);
    }
    givingUp.cancel();
  };

  let shuttingDown: Promise<void> | undefined;
  // The exit flush (exit-watch.ts): on `beforeExit`, the provider then the exporter, when spans
  // ended since the last one began; bounded by `shutdownTimeoutMs` (see flushBeforeExit).
  const flushIfNew = flushWhenNew(() => processor.endedSpans, () => flushBeforeExit(exporter, () => flushAll().catch(reportFlushError)));
  const unwatchExit = watchExit({
    flushBeforeExit: () => {
      if (!flushOnExit || shuttingDown !== undefined) return;
      // Nothing is left to run: a traced stream still unread never will be. Its call ends now
      // (`unfinished`) and goes with this flush, instead of never ending.
      endOpenCalls();
      flushIfNew();
    },
    // A 'batch' processor's buffer (and its own drops) never reached the exporter, whose own exit
    // warning cannot see them.
    reportLostAtExit: () => {
      const unexported = processor.endedSpans - exportedSpans(exporter);
      if (spanProcessor !== 'batch' || unexported <= 0) return;
      log.warn(
        `callbridge: the process exited with ${unexported} ended ${unexported === 1 ? 'span' : 'spans'} that never reached the exporter ` +
          "(in the BatchSpanProcessor's buffer, or dropped by it when full); lost (await forceFlush() or shutdown() before the process ends)",
      );
    },
  });

  const shutdown = (): Promise<void> => {
    shuttingDown ??= (async () => {
      // Traced streams still open (unread, or read halfway) end now as `unfinished`, so that the
      // final flush carries their calls; a span ended after shutdown could only be counted.
      // Only while this provider is the global one: `trace()` makes its spans through the global
      // provider, so otherwise the open calls are another tracing's (a `register()` that took the
      // globals), still being read, and ending them would cut their output short.
      if (currentGlobalProvider() === provider) endOpenCalls();
      try {
        await provider.shutdown();
      } catch (error) {
        log.error(`callbridge: shutdown failed: ${String(error)}`);
      }
      // Watched until here: a process that exits during an unawaited shutdown is still told.
      unwatchExit();
      if (ownsGlobal && currentGlobalProvider() === provider) otelTrace.disable();
      // Only what register() installed (also when another provider kept the global slot): a
      // context manager or propagator the application had registered before it is the
      // application's, and still in use after this shutdown.
      if (installed.contextManager) context.disable();
      if (installed.propagator) propagation.disable();
    })();
    return shuttingDown;
  };

  return { provider, exporter, forceFlush, shutdown };
}

/** How often a flush past its bound looks again at whether the service is taking batches. */
const DOWN_CHECK_MS = 100;

/**
 * Reached once `afterMs` have passed and `exporter`'s service is down (retrying, with no request
 * on the wire): a flush stops waiting for a service that is down, not for one that is slow but
 * answering, a first attempt or a retry (its spans arrive when it answers, and cutting the flush
 * short would leave them in flight).
 * Its timers are not unref'd: the caller awaits this flush, and is owed its end.
 */
function whenDownFor(exporter: CallbridgeExporter, afterMs: number): { reached: Promise<false>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const reached = new Promise<false>((resolve) => {
    const check = (): void => {
      if (isServiceDown(exporter)) resolve(false);
      else timer = setTimeout(check, DOWN_CHECK_MS);
    };
    timer = setTimeout(check, afterMs);
  });
  return { reached, cancel: () => clearTimeout(timer) };
}

/**
 * `forceFlush()` stopped waiting with spans not yet delivered (a service down or refusing them):
 * says how many and what happens to them, rather than resolving as if they were delivered.
 */
function warnStillWaiting(exporter: CallbridgeExporter, waitedMs: number, log: Log): void {
  const { queued, inFlight } = exporter.stats();
  const waiting = queued + inFlight;
  if (waiting === 0) return;
  log.warn(
    `callbridge: forceFlush() stopped waiting after ${waitedMs} ms (shutdownTimeoutMs) with ${waiting} ${waiting === 1 ? 'span' : 'spans'} ` +
      'not yet delivered; they stay queued and are retried until maxRetryMs (the messages above say why they were not taken)',
  );
}

function createProcessor(kind: 'direct' | 'simple' | 'batch', exporter: SpanExporter, log: Log): CountingProcessor {
  if (kind === 'direct') return new DirectSpanProcessor(exporter, log);
  const inner = kind === 'simple' ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter);
  return new CountedProcessor(inner, exporter, log);
}

function ignoreResult(): void {
  // The exporter counts its own drops (stats(), diag once per interval); nothing to do per span.
}

function isSampled(span: ReadableSpan): boolean {
  return (span.spanContext().traceFlags & TraceFlags.SAMPLED) !== 0;
}

/**
 * Hand one ended span to the exporter, from inside the user's `span.end()`. Also after shutdown:
 * the exporter then answers FAILED and counts the span as a `shutdown` drop, so a span still open
 * at shutdown is counted when it ends instead of vanishing (SPEC §4.1: nothing lost silently).
 */
function exportEnded(exporter: SpanExporter, span: ReadableSpan, log: Log): void {
  try {
    exporter.export([span], ignoreResult);
  } catch (error) {
    // Nothing may escape into the user's code (SPEC §4.12).
    log.error(`callbridge: export failed: ${String(error)}`);
  }
}

/** Hands each ended, sampled span to the exporter synchronously. See the module comment. */
class DirectSpanProcessor implements CountingProcessor {
  endedSpans = 0;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly log: Log,
  ) {}

  onStart(_span: Span, _parentContext: Context): void {}

  onEnd(span: ReadableSpan): void {
    if (!isSampled(span)) return;
    this.endedSpans++;
    exportEnded(this.exporter, span, this.log);
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }
}

/**
 * One of the SDK's processors, with the count of spans it was given. Once shut down, the SDK's
 * processors ignore the spans that end (the ones still open at shutdown): those go to the exporter
 * directly, to be counted there (see `exportEnded`).
 */
class CountedProcessor implements CountingProcessor {
  endedSpans = 0;
  #shutDown = false;

  constructor(
    private readonly inner: SpanProcessor,
    private readonly exporter: SpanExporter,
    private readonly log: Log,
  ) {}

  onStart(span: Span, parentContext: Context): void {
    this.inner.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    this.endedSpans++;
    if (!this.#shutDown) this.inner.onEnd(span);
    else if (isSampled(span)) exportEnded(this.exporter, span, this.log);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    this.#shutDown = true;
    return this.inner.shutdown();
  }
}

/** Which of the OTel globals `register()` installed (and so removes at shutdown). */
interface InstalledGlobals {
  readonly tracerProvider: boolean;
  readonly contextManager: boolean;
  readonly propagator: boolean;
}

const NOTHING_INSTALLED: InstalledGlobals = { tracerProvider: false, contextManager: false, propagator: false };

/**
 * Register `provider` as the global one (false, with a warning, when another already is), with
 * the SDK's context manager and propagators where the application has none of its own. One it
 * registered itself is left to it (`null` skips it): the API would refuse ours anyway, with a
 * `diag` error per global, and shutdown would then remove the application's.
 */
function registerGlobally(provider: NodeTracerProvider, log: Log): InstalledGlobals {
  const hadContextManager = contextManagerRegistered();
  const hadPropagator = propagation.fields().length > 0;
  provider.register({
    ...(hadContextManager ? { contextManager: null } : {}),
    ...(hadPropagator ? { propagator: null } : {}),
  });
  const installed = { tracerProvider: true, contextManager: !hadContextManager, propagator: !hadPropagator };
  if (currentGlobalProvider() === provider) return installed;
  log.warn('callbridge: another tracer provider is already registered globally; register() did not replace it');
  return { ...installed, tracerProvider: false };
}

/** Whether a context manager is registered: the API's no-op one never makes a context active. */
function contextManagerRegistered(): boolean {
  const probe = createContextKey('callbridge: context manager probe');
  return context.with(ROOT_CONTEXT.setValue(probe, true), () => context.active().getValue(probe) === true);
}

function currentGlobalProvider(): unknown {
  const global = otelTrace.getTracerProvider() as Partial<ProxyTracerProvider>;
  return typeof global.getDelegate === 'function' ? global.getDelegate() : global;
}
