/**
 * Web `ReadableStream`s returned by a traced call (an AI SDK's text stream, LangChain's
 * `IterableReadableStream`, a `fetch` body): the call stays open until the stream is read to its
 * end, is cancelled or errors, and its output is `reduce(chunks)`, as for the async iterables of
 * streams.ts (SPEC §5).
 *
 * Patching `[Symbol.asyncIterator]` as streams.ts does would miss most readers: a web stream is
 * read through `getReader()`, `pipeTo()`, `pipeThrough()`, `tee()` or a `Response`, and the
 * platform's versions of those reach the stream through internal slots no patch can see. So the
 * caller keeps the very object the function returned, but at the first use its reading methods are
 * routed to a second stream, the observing one, which pulls from the original one chunk per read
 * request (highWaterMark 0: never ahead of the consumer), notes the chunk and passes it on.
 * Cancelling the observing stream cancels the original with the same reason; an error of the
 * original reaches the consumer unchanged.
 *
 * A method a subclass overrides is left alone: such overrides (LangChain's `next()`, the AI SDK's
 * own `[Symbol.asyncIterator]`) read through `this.getReader()`, which is routed.
 */
import { context } from '@opentelemetry/api';
import type { StreamRun } from './streams.js';

/** Output of a call whose stream is read in a way that cannot be observed. */
export const UNOBSERVABLE_STREAM = '[unobservable stream]';

type Method = (...args: unknown[]) => unknown;

// Read lazily: `ReadableStream` is a global from Node 18 on, but a test or a bundle may remove it.
const prototypeOf = (): Record<PropertyKey, Method> => ReadableStream.prototype as unknown as Record<PropertyKey, Method>;
const ROUTED_METHODS: readonly PropertyKey[] = ['getReader', 'pipeTo', 'pipeThrough', 'tee', 'values', 'cancel', Symbol.asyncIterator];

/** A web ReadableStream of this realm (a polyfill's streams are not: the platform's methods refuse them). */
export function isWebReadableStream(value: object): value is ReadableStream {
  return typeof ReadableStream === 'function' && value instanceof ReadableStream;
}

/** Route `stream`'s reading methods through an observing stream (see the module comment). */
export function instrumentWebStream<T extends ReadableStream>(stream: T, run: StreamRun): T {
  const proto = prototypeOf();
  const isLocked = Object.getOwnPropertyDescriptor(proto, 'locked')!.get! as (this: ReadableStream) => boolean;
  let observing: ReadableStream | undefined;

  /** The stream a routed call goes to: the observing one, made at the first call. */
  const target = (args: unknown[], method: PropertyKey): ReadableStream => {
    if (observing !== undefined) return observing;
    // Locked already (a subclass read it through the prototype's methods) or asked for a BYOB
    // reader (which only a byte stream gives, and the observing stream is not one): the caller
    // gets the original's own behaviour, and the call cannot see what is read.
    if (isLocked.call(stream) || (method === 'getReader' && isByobRequest(args[0]))) {
      run.end.succeed(UNOBSERVABLE_STREAM);
      return stream;
    }
    observing = observingStream(stream, run, proto);
    return observing;
  };

  try {
    for (const name of ROUTED_METHODS) {
      const original = proto[name];
      if (original === undefined || (stream as unknown as Record<PropertyKey, unknown>)[name] !== original) continue;
      Object.defineProperty(stream, name, {
        value: function routed(...args: unknown[]): unknown {
          return Reflect.apply(original, target(args, name), args);
        },
        writable: true,
        configurable: true,
      });
    }
    Object.defineProperty(stream, 'locked', {
      get: () => isLocked.call(observing ?? stream),
      configurable: true,
    });
  } catch {
    // A frozen stream, or one with fixed own properties of these names.
    run.end.succeed(UNOBSERVABLE_STREAM);
  }
  return stream;
}

function isByobRequest(options: unknown): boolean {
  try {
    return typeof options === 'object' && options !== null && (options as { mode?: unknown }).mode === 'byob';
  } catch {
    return false;
  }
}

/** A stream that reads `source` one chunk per read request, in the call's context, noting each chunk. */
function observingStream(source: ReadableStream, run: StreamRun, proto: Record<PropertyKey, Method>): ReadableStream {
  const reader = proto.getReader!.call(source) as ReadableStreamDefaultReader<unknown>;
  return new ReadableStream<unknown>(
    {
      async pull(controller) {
        let result: Awaited<ReturnType<typeof reader.read>>;
        try {
          // The original's pull runs inside read(): spans it starts are children of the call.
          result = await context.with(run.ctx, () => reader.read());
        } catch (error) {
          run.end.fail(error);
          throw error; // errors the observing stream with the original's error
        }
        run.observe(result, 'next');
        if (result.done) controller.close();
        else controller.enqueue(result.value);
      },
      cancel(reason) {
        run.end.succeed(run.output(), 'cancelled');
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
