/**
 * Web `ReadableStream`s returned by a traced call (an AI SDK's text stream, LangChain's
 * `IterableReadableStream`, a `fetch` body): the call stays open until the stream is read to its
 * end, is cancelled or errors, and its output is built from the chunks, as for the async
 * iterables of streams.ts (SPEC §5).
 *
 * Patching `[Symbol.asyncIterator]` as streams.ts does would miss most readers: a web stream is
 * read through `getReader()`, `pipeTo()`, `pipeThrough()`, `tee()` or a `Response`, and the
 * platform's versions of those reach the stream through internal slots no patch can see. So the
 * caller keeps the very object the function returned, but at the first use its reading methods are
 * routed to a second stream, the observing one, which reads the original one chunk per read
 * request (highWaterMark 0: never ahead of the consumer), notes the chunk and passes it on:
 * - it is a byte stream when the original is one, so BYOB readers and byte `tee()` still work;
 * - it closes or errors as soon as the original does, read pending or not (`reader.closed`);
 * - cancelling it cancels the original with the same reason.
 *
 * A stream passed on by several traced calls (an agent returning its model call's stream) is the
 * output of each: the calls after the first join the first's observing stream.
 *
 * A method a subclass overrides is left alone: such overrides (LangChain's `next()`, the AI SDK's
 * own `[Symbol.asyncIterator]`) read through `this.getReader()`, which is routed. What is not
 * observed: an override that calls `super.getReader()` (the call then ends when the stream is
 * collected, as `abandoned`), and a transfer (`postMessage`, `structuredClone`), which reads the
 * original through its internal slots; after a reader was taken and released, such a transfer
 * sees a stream locked by the observing one.
 */
import { context } from '@opentelemetry/api';
import type { Context } from '@opentelemetry/api';
import type { EarlyEnd } from './call-end.js';
import type { StreamRun } from './streams.js';

/** Output of a call whose stream is read in a way that cannot be observed. */
export const UNOBSERVABLE_STREAM = '[unobservable stream]';

type Method = (...args: unknown[]) => unknown;
type Prototype = Record<PropertyKey, Method>;
type LockedGetter = (this: ReadableStream) => boolean;

const ROUTED_METHODS: readonly PropertyKey[] = ['getReader', 'pipeTo', 'pipeThrough', 'tee', 'values', 'cancel', Symbol.asyncIterator];

/** A web ReadableStream of this realm (a polyfill's streams are not: the platform's methods refuse them). */
export function isWebReadableStream(value: object): value is ReadableStream {
  return typeof ReadableStream === 'function' && value instanceof ReadableStream;
}

/**
 * The calls one stream is the output of, the innermost first: every chunk and the end reach each.
 * A call that joins after the stream ended is ended the same way at once.
 */
class StreamRuns {
  private readonly runs: StreamRun[];
  private ended: ((run: StreamRun) => void) | undefined;

  constructor(first: StreamRun) {
    this.runs = [first];
  }

  /** The innermost call's context: the original's reads run in it, as before it was passed on. */
  get ctx(): Context {
    return this.runs[0]!.ctx;
  }

  add(run: StreamRun): void {
    if (this.ended !== undefined) this.ended(run);
    else this.runs.push(run);
  }

  observe(result: IteratorResult<unknown>): void {
    for (const run of this.runs) run.observe(result, 'next');
    if (result.done) this.endAll((run) => run.finish());
  }

  finish(early?: EarlyEnd): void {
    this.endAll((run) => run.finish(early));
  }

  fail(error: unknown): void {
    this.endAll((run) => run.fail(error));
  }

  unobservable(): void {
    this.endAll((run) => run.end.succeed(UNOBSERVABLE_STREAM));
  }

  private endAll(end: (run: StreamRun) => void): void {
    this.ended ??= end;
    for (const run of this.runs) end(run);
  }
}

const instrumented = new WeakMap<ReadableStream, StreamRuns>();

/** Route `stream`'s reading methods through an observing stream (see the module comment). */
export function instrumentWebStream<T extends ReadableStream>(stream: T, run: StreamRun): T {
  const joined = instrumented.get(stream);
  if (joined !== undefined) {
    joined.add(run);
    return stream;
  }
  const runs = new StreamRuns(run);
  const proto = ReadableStream.prototype as unknown as Prototype;
  const isLocked = Object.getOwnPropertyDescriptor(proto, 'locked')!.get! as LockedGetter;
  const own = stream as unknown as Record<PropertyKey, unknown>;
  const methods = ROUTED_METHODS.filter((name) => proto[name] !== undefined && own[name] === proto[name]);
  const routeLocked = lockedGetterOf(stream) === isLocked;
  if (!canDefine(stream, routeLocked ? [...methods, 'locked'] : methods)) {
    run.end.succeed(UNOBSERVABLE_STREAM);
    return stream;
  }
  instrumented.set(stream, runs);

  let observing: ReadableStream | undefined;
  const target = (): ReadableStream => {
    if (observing !== undefined) return observing;
    if (isLocked.call(stream)) {
      // Read already through the prototype's own methods: what it gives is out of our sight.
      runs.unobservable();
      return stream;
    }
    observing = observingStream(stream, runs, proto);
    return observing;
  };
  for (const name of methods) {
    const original = proto[name]!;
    Object.defineProperty(stream, name, {
      value: function routed(...args: unknown[]): unknown {
        return Reflect.apply(original, target(), args);
      },
      writable: true,
      configurable: true,
    });
  }
  if (routeLocked) Object.defineProperty(stream, 'locked', { get: () => isLocked.call(observing ?? stream), configurable: true });
  return stream;
}

/** The `locked` getter `stream` uses (a subclass may have its own). */
function lockedGetterOf(stream: object): unknown {
  for (let object: object | null = stream; object !== null; object = Object.getPrototypeOf(object) as object | null) {
    const descriptor = Object.getOwnPropertyDescriptor(object, 'locked');
    if (descriptor !== undefined) return descriptor.get;
  }
  return undefined;
}

/** Whether every one of `names` can become an own property of `object` (all or none is patched). */
function canDefine(object: object, names: readonly PropertyKey[]): boolean {
  if (!Object.isExtensible(object)) return false;
  return names.every((name) => Object.getOwnPropertyDescriptor(object, name)?.configurable ?? true);
}

/** Whether `stream` (unlocked) is a byte stream: only those give a BYOB reader. */
function isByteStream(stream: ReadableStream, proto: Prototype): boolean {
  try {
    (proto.getReader!.call(stream, { mode: 'byob' }) as ReadableStreamBYOBReader).releaseLock();
    return true;
  } catch {
    return false;
  }
}

/**
 * A stream that reads `source` one chunk per read request, in the call's context, noting each
 * chunk, and ends when `source` does.
 */
function observingStream(source: ReadableStream, run: StreamRuns, proto: Prototype): ReadableStream {
  const bytes = isByteStream(source, proto);
  const reader = proto.getReader!.call(source) as ReadableStreamDefaultReader<unknown>;
  // The read in progress: a close of the source is passed on only after the chunk it carried.
  let reading: Promise<void> = Promise.resolve();
  // Set by a cancel, which ends the call itself (the source's close that follows is its doing).
  let cancelled = false;

  const pull = async (controller: Controller): Promise<void> => {
    let result: Awaited<ReturnType<typeof reader.read>>;
    try {
      // The original's pull runs inside read(): spans it starts are children of the call.
      result = await context.with(run.ctx, () => reader.read());
    } catch (error) {
      run.fail(error);
      throw error; // errors the observing stream with the original's error
    }
    // A cancel while this read was pending answers it with `done`: the cancel ends the call.
    if (cancelled) return;
    run.observe(result);
    if (result.done) closeQuietly(controller);
    // A byte stream's controller fills a pending BYOB read from the chunk and queues the rest.
    else controller.enqueue(result.value as ArrayBufferView & string);
  };

  const hooks = {
    start(controller: Controller): void {
      // The source may close or error while no read is pending (a consumer that stops after the
      // last chunk and waits on `reader.closed`): pass it on at once.
      reader.closed.then(
        () =>
          void reading.then(() => {
            if (cancelled) return;
            run.finish();
            closeQuietly(controller);
          }),
        (error: unknown) => {
          run.fail(error);
          try {
            controller.error(error);
          } catch {
            // Already closed, errored or cancelled.
          }
        },
      );
    },
    pull(controller: Controller): Promise<void> {
      const pulled = pull(controller);
      reading = pulled.catch(() => {});
      return pulled;
    },
    cancel(reason: unknown): Promise<void> {
      cancelled = true;
      const cancelling = reader.cancel(reason);
      // An errored source rejects the cancel with its error: the call failed, it was not cancelled.
      void cancelling.then(
        () => run.finish('cancelled'),
        (error: unknown) => run.fail(error),
      );
      return cancelling;
    },
  };
  return bytes
    ? new ReadableStream({ type: 'bytes', ...hooks }, { highWaterMark: 0 })
    : new ReadableStream<unknown>(hooks, { highWaterMark: 0 });
}

type Controller = ReadableStreamDefaultController<unknown> | ReadableByteStreamController;

function closeQuietly(controller: Controller): void {
  try {
    controller.close();
    // A BYOB read pending at the close is answered with no bytes.
    (controller as ReadableByteStreamController).byobRequest?.respond(0);
  } catch {
    // Already closed, errored or cancelled.
  }
}
