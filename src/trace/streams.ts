/**
 * Streamed results (SPEC §5): a traced call that returns a generator, an async generator or an
 * async iterable stays open until the consumer finishes, breaks off (`return()`) or the iterator
 * throws; its output is `reduce(chunks)` (default: the chunks, capped).
 *
 * Generators are instrumented in place: `next`/`return`/`throw` become own properties of the
 * same object, so the caller gets back exactly the object the function returned (identity, other
 * methods and `instanceof` unchanged). Other async iterables (an SDK's `Stream` class with extra
 * methods) get their `[Symbol.asyncIterator]` patched on the instance; the first iterator taken
 * from it is the one observed (one that is its own iterator has its steps observed in place, as
 * it may be read by calling `next()`). Every step runs inside the call's context, so spans started in the
 * generator body are children of the call. Web `ReadableStream`s are read through other methods
 * than iteration; web-streams.ts observes them.
 */
import { context } from '@opentelemetry/api';
import type { Context } from '@opentelemetry/api';
import type { CallEnd, EarlyEnd } from './call-end.js';
import { messageOf } from './capture.js';
import { instrumentWebStream, isWebReadableStream, UNOBSERVABLE_STREAM } from './web-streams.js';

/** Default cap on chunks kept for the default output; later chunks are counted, not kept. */
export const MAX_KEPT_CHUNKS = 1000;

export type StreamShape = 'generator' | 'asyncGenerator' | 'asyncIterable' | 'webStream';

type Step = 'next' | 'return' | 'throw';
type IteratorMethod = (...args: unknown[]) => unknown;

/** What a traced call keeps of its stream's chunks. */
export interface ChunkPolicy {
  /** The user's `reduce`: it is given every chunk. */
  readonly reduce: ((chunks: unknown[]) => unknown) | undefined;
  /**
   * Without `reduce`, text and bytes kept stop at this many (the capture's `maxValueBytes`, past
   * which it would cut them anyway), so a long download is not held in memory. 0 keeps nothing
   * (the output is not captured).
   */
  readonly maxKeptBytes: number;
}

/**
 * Which kind of stream `value` is, if any. A web `ReadableStream` is one (web-streams.ts); a Node
 * `Readable` is not: it is piped more often than iterated, and reading it to observe it would
 * change when its data flows.
 */
export function streamShape(value: object): StreamShape | undefined {
  const tag = Object.prototype.toString.call(value);
  if (tag === '[object Generator]') return 'generator';
  if (tag === '[object AsyncGenerator]') return 'asyncGenerator';
  if (isWebReadableStream(value)) return 'webStream';
  const candidate = value as { [Symbol.asyncIterator]?: unknown; pipe?: unknown; getReader?: unknown };
  if (typeof candidate[Symbol.asyncIterator] !== 'function') return undefined;
  if (typeof candidate.pipe === 'function' || typeof candidate.getReader === 'function') return undefined;
  return 'asyncIterable';
}

/** The chunks of one streamed call and how its output is built from them. */
export class StreamRun {
  private readonly chunks: unknown[] = [];
  private keptBytes = 0;
  private skipped = 0;

  constructor(
    readonly end: CallEnd,
    readonly ctx: Context,
    private readonly policy: ChunkPolicy,
  ) {}

  push(chunk: unknown): void {
    if (this.policy.maxKeptBytes === 0) return;
    if (this.policy.reduce === undefined) {
      // Without a reducer, keep a bounded prefix: by count, and by size for text and bytes.
      const size = typeof chunk === 'string' ? chunk.length : ArrayBuffer.isView(chunk) ? chunk.byteLength : 0;
      // The chunk that crosses the size bound is still kept: one long answer stays visible, cut by the capture.
      if (this.chunks.length >= MAX_KEPT_CHUNKS || this.keptBytes >= this.policy.maxKeptBytes) {
        this.skipped++;
        return;
      }
      this.keptBytes += size;
    }
    // Bytes are copied: the consumer may reuse its buffer, or a byte stream transfer it away.
    this.chunks.push(ArrayBuffer.isView(chunk) ? copyOfView(chunk) : chunk);
  }

  output(): unknown {
    const { reduce } = this.policy;
    if (reduce !== undefined) {
      try {
        return reduce(this.chunks.slice());
      } catch (error) {
        return `[reduce threw: ${messageOf(error)}]`;
      }
    }
    return this.skipped === 0 ? this.chunks.slice() : [...this.chunks, `[${this.skipped} more chunks]`];
  }

  /** End the call with the output so far, and let go of the chunks (the stream may live on). */
  finish(early?: EarlyEnd): void {
    if (this.end.done) return;
    const output = this.output();
    this.release();
    this.end.succeed(output, early);
  }

  /**
   * End the call with `error`, and the output of the chunks read before it (a model's answer cut
   * off by a dropped connection still shows how far it got).
   */
  fail(error: unknown): void {
    if (this.end.done) return;
    // A stream that failed before its first chunk has no output, not an empty one.
    const output = this.chunks.length === 0 && this.skipped === 0 ? undefined : this.output();
    this.release();
    this.end.fail(error, output);
  }

  /** Account for one iterator result; ends the call when the iterator reports done. */
  observe(result: unknown, step: Step): void {
    let done: unknown;
    let value: unknown;
    try {
      done = (result as IteratorResult<unknown>).done;
      value = (result as IteratorResult<unknown>).value;
    } catch (error) {
      this.fail(error);
      return;
    }
    if (done) this.finish(step === 'return' ? 'cancelled' : undefined);
    else if (!this.end.done) this.push(value);
  }

  private release(): void {
    this.chunks.length = 0;
    this.keptBytes = 0;
  }
}

function copyOfView(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength).slice();
}

/**
 * Make `value` (a stream of `shape`) end `end` when consumed, and return what the caller gets:
 * the same object whenever it can be patched.
 */
export function instrumentStream<T extends object>(
  value: T,
  shape: StreamShape,
  end: CallEnd,
  ctx: Context,
  chunks: ChunkPolicy,
): T {
  const run = new StreamRun(end, ctx, chunks);
  end.watch(value, () => run.output());
  if (shape === 'webStream') return instrumentWebStream(value as T & ReadableStream, run);
  if (shape === 'asyncIterable') {
    patchAsyncIterable(value, run);
    return value;
  }
  const isAsync = shape === 'asyncGenerator';
  if (!Object.isExtensible(value)) return wrapIterator(value as unknown as Iterator<unknown>, run, isAsync) as T;
  patchSteps(value, run, isAsync);
  return value;
}

/** Whether `next`/`return`/`throw` can all become own properties of `iterator`. Never throws. */
function canPatchSteps(iterator: object): boolean {
  try {
    if (!Object.isExtensible(iterator)) return false;
    return (['next', 'return', 'throw'] as const).every((step) => Object.getOwnPropertyDescriptor(iterator, step)?.configurable ?? true);
  } catch {
    return false; // a Proxy's trap threw
  }
}

/** `[Symbol.asyncIterator]` of the async iterators the platform makes (`events.on`'s): it answers `this`. */
const INTRINSIC_ASYNC_ITERATOR: unknown = (
  Object.getPrototypeOf(Object.getPrototypeOf((async function* () {})())) as { [Symbol.asyncIterator]: unknown }
)[Symbol.asyncIterator];

/** A method whose whole body is `return this` (the usual hand-written self-iterator). */
const RETURNS_THIS = /^[^{]*\{\s*return\s+this\s*;?\s*\}$/;

/**
 * Whether `iterable` is its own async iterator with a `next` step: its `[Symbol.asyncIterator]`
 * is the platform's (which answers `this`) or a method whose body is `return this`, read from
 * its source without calling it. Never throws.
 */
function isOwnAsyncIterator(iterable: object, asyncIterator: unknown): boolean {
  try {
    if (typeof (iterable as { next?: unknown }).next !== 'function') return false;
    if (asyncIterator === INTRINSIC_ASYNC_ITERATOR) return true;
    return typeof asyncIterator === 'function' && RETURNS_THIS.test(Function.prototype.toString.call(asyncIterator));
  } catch {
    return false; // a throwing `next` getter, a Proxy
  }
}

/** `next`/`return`/`throw` (those it has) observed in place, as own properties of `iterator`. */
function patchSteps(iterator: object, run: StreamRun, isAsync: boolean): void {
  for (const step of ['next', 'return', 'throw'] as const) {
    const original = (iterator as Partial<Record<Step, IteratorMethod>>)[step];
    if (typeof original !== 'function') continue;
    Object.defineProperty(iterator, step, {
      value: observedStep(run, original, step, isAsync, undefined),
      writable: true,
      configurable: true,
      enumerable: false,
    });
  }
}

/**
 * Make `iterator`, the first one taken from `owner` (a thenable that is also async-iterable),
 * end the call as a stream. Returns the iterator to hand to the consumer.
 */
export function observeIteration(
  iterator: AsyncIterator<unknown>,
  owner: object,
  end: CallEnd,
  ctx: Context,
  chunks: ChunkPolicy,
): AsyncIterator<unknown> {
  return heldBy(wrapIterator(iterator, new StreamRun(end, ctx, chunks), true), owner) as AsyncIterator<unknown>;
}

/**
 * Iterators being read, each keeping alive the object it was taken from. The call watches that
 * object (`CallEnd.watch`) to end as `abandoned` when it is collected unread; a consumer in the
 * middle of `for await` holds only the iterator, which for many iterables (`{ [Symbol.asyncIterator]:
 * () => generator }`) holds no reference back, so the call would be ended while still being read.
 */
const readFrom = new WeakMap<object, object>();

function heldBy(iterator: object, owner: object): object {
  readFrom.set(iterator, owner);
  return iterator;
}

/**
 * Observe an async iterable through the first iterator taken from it. One that is its own
 * iterator (`events.on`, a hand-written `{ next, [Symbol.asyncIterator]() { return this } }`) may
 * be read by calling its `next()` without `for await`: its steps are observed in place (with a
 * `return` added when it has none, so that breaking out of `for await` still ends the call).
 * Only an iterable whose `[Symbol.asyncIterator]` is known to answer the object itself counts:
 * a `next()` of another kind (a MongoDB cursor's resolves a document or null) is no step.
 */
function patchAsyncIterable(iterable: object, run: StreamRun): void {
  const original = (iterable as { [Symbol.asyncIterator]: IteratorMethod })[Symbol.asyncIterator];
  const selfIterating = isOwnAsyncIterator(iterable, original) && canPatchSteps(iterable);
  if (selfIterating) {
    patchSteps(iterable, run, true);
    if (typeof (iterable as { return?: unknown }).return !== 'function') {
      const stop = async (value?: unknown): Promise<IteratorResult<unknown>> => ({ done: true, value });
      Object.defineProperty(iterable, 'return', { value: observedStep(run, stop, 'return', true, undefined), writable: true, configurable: true });
    }
  }
  let claimed = false;
  const patched = function (this: unknown): unknown {
    const iterator = context.with(run.ctx, original, this) as AsyncIterator<unknown>;
    if (selfIterating && iterator === iterable) return iterator;
    if (claimed || run.end.done) return iterator;
    claimed = true;
    return heldBy(wrapIterator(iterator, run, true), iterable);
  };
  try {
    Object.defineProperty(iterable, Symbol.asyncIterator, { value: patched, writable: true, configurable: true });
  } catch {
    // A frozen iterable cannot be observed; end the call now rather than never.
    run.end.succeed(UNOBSERVABLE_STREAM);
  }
}

/**
 * A new iterator around `iterator`. It always has `return()`, so that a consumer breaking out of
 * `for await` ends the call even when the underlying iterator has no `return` of its own.
 */
function wrapIterator(iterator: Iterator<unknown> | AsyncIterator<unknown>, run: StreamRun, isAsync: boolean): object {
  const source = iterator as unknown as Partial<Record<Step, IteratorMethod>>;
  const finish = (value?: unknown): unknown => (isAsync ? Promise.resolve({ done: true, value }) : { done: true, value });
  const wrapper: Record<string | symbol, unknown> = {
    next: observedStep(run, source.next!, 'next', isAsync, iterator),
    return: observedStep(run, source.return ?? finish, 'return', isAsync, iterator),
  };
  if (source.throw !== undefined) wrapper.throw = observedStep(run, source.throw, 'throw', isAsync, iterator);
  wrapper[isAsync ? Symbol.asyncIterator : Symbol.iterator] = function (this: unknown) {
    return this;
  };
  return wrapper;
}

/** `original` (a `next`/`return`/`throw`), run in the call's context and observed. */
function observedStep(
  run: StreamRun,
  original: IteratorMethod,
  step: Step,
  isAsync: boolean,
  receiver: object | undefined,
): IteratorMethod {
  return function (this: unknown, ...args: unknown[]): unknown {
    const self = receiver ?? this;
    if (run.end.done) return Reflect.apply(original, self, args);
    let result: unknown;
    try {
      result = context.with(run.ctx, original, self, ...args);
    } catch (error) {
      run.fail(error);
      throw error;
    }
    if (!isAsync) {
      run.observe(result, step);
      return result;
    }
    return Promise.resolve(result).then(
      (settled) => {
        run.observe(settled, step);
        return settled;
      },
      (error: unknown) => {
        run.fail(error);
        throw error;
      },
    );
  };
}
