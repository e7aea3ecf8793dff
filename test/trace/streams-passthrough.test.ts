/**
 * Streamed results at their edges (nested pass-through, cancel with a read pending,
 * async iterators read by next(), thenables).
 */
import { trace as otelTrace } from '@opentelemetry/api';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { trace } from '../../src/trace/index.js';
import { installProvider, jsonAttribute, parentOf } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const ended = (name: string) => tracing.spans().some((span) => span.name === name);

function words(list: string[]): ReadableStream<string> {
  let i = 0;
  return new ReadableStream<string>(
    {
      pull(controller) {
        if (i < list.length) controller.enqueue(list[i++]!);
        else controller.close();
      },
    },
    { highWaterMark: 0 },
  );
}

describe('nested traced calls that pass a stream through', () => {
  it('web ReadableStream: the outer call ends too, with the chunks, when the stream is read', async () => {
    const inner = trace(function innerStream() {
      return words(['a', 'b']);
    });
    const outer = trace(async function outerStream() {
      return inner();
    });
    const stream = await outer();
    const seen: string[] = [];
    for await (const chunk of stream as unknown as AsyncIterable<string>) seen.push(chunk);
    expect(seen).toEqual(['a', 'b']);
    expect(jsonAttribute(tracing.span('innerStream'), 'output')).toEqual(['a', 'b']);
    expect(ended('outerStream')).toBe(true);
    expect(jsonAttribute(tracing.span('outerStream'), 'output')).toEqual(['a', 'b']);
  });

  it('async generator: both calls end with the chunks', async () => {
    const inner = trace(async function* innerGen() {
      yield 1;
      yield 2;
    });
    const outer = trace(function outerGen() {
      return inner();
    });
    const seen: number[] = [];
    for await (const n of outer()) seen.push(n);
    expect(seen).toEqual([1, 2]);
    expect(jsonAttribute(tracing.span('innerGen'), 'output')).toEqual([1, 2]);
    expect(jsonAttribute(tracing.span('outerGen'), 'output')).toEqual([1, 2]);
  });
});

/**
 * A model's stream: `'first'`, then a pull that waits until `release` is called (the next token
 * does not come in time). Read one chunk per request (highWaterMark 0).
 */
function firstThenStall(): { stream: ReadableStream<string>; release: () => void } {
  let sent = false;
  let release: () => void = () => {};
  const stream = new ReadableStream<string>(
    {
      async pull(controller) {
        if (!sent) {
          sent = true;
          controller.enqueue('first');
          return;
        }
        await new Promise<void>((resolve) => (release = resolve));
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, release: () => release() };
}

describe('web ReadableStream cancelled while a read is pending', () => {
  it('ends the call as cancelled (not as read to its end)', async () => {
    let release!: () => void;
    const traced = trace(function slow() {
      const source = firstThenStall();
      release = source.release;
      return source.stream;
    });
    const reader = traced().getReader();
    expect(await reader.read()).toEqual({ done: false, value: 'first' });
    const pending = reader.read();
    await new Promise((resolve) => setTimeout(resolve, 5));
    await reader.cancel('user stopped');
    expect(await pending).toEqual({ done: true, value: undefined });
    await new Promise((resolve) => setTimeout(resolve, 5));
    release?.();
    const span = tracing.span('slow');
    expect(jsonAttribute(span, 'output')).toEqual(['first']);
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
  });

  it('ends the call as cancelled when pipeTo is aborted (AbortSignal) while the source is waiting', async () => {
    const traced = trace(function slowPiped() {
      return firstThenStall().stream; // never released: the model stalls
    });
    const abort = new AbortController();
    const sink = new WritableStream<string>({ write: () => void setTimeout(() => abort.abort('user stopped'), 5) });
    await expect(traced().pipeTo(sink, { signal: abort.signal })).rejects.toBe('user stopped');
    await new Promise((resolve) => setTimeout(resolve, 5));
    const span = tracing.span('slowPiped');
    expect(jsonAttribute(span, 'output')).toEqual(['first']);
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
  });
});

describe('an async iterator that is its own iterable (events.on, timers/promises setInterval style)', () => {
  function ownIterator(values: number[]) {
    let i = 0;
    return {
      next: async () => (i < values.length ? { done: false, value: values[i++]! } : { done: true, value: undefined }),
      return: async () => ({ done: true, value: undefined }),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  it('ends the call when read to its end by calling next() directly', async () => {
    const traced = trace(function ticks() {
      return ownIterator([1, 2]);
    });
    const it = traced();
    const seen: number[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) seen.push(r.value as number);
    expect(seen).toEqual([1, 2]);
    expect(ended('ticks')).toBe(true);
    expect(jsonAttribute(tracing.span('ticks'), 'output')).toEqual([1, 2]);
  });
});

describe('async iterables with a next() that is not an iterator step', () => {
  it("a MongoDB-style cursor (next() resolves a document or null) read with for await ends the call with its documents", async () => {
    class Cursor {
      constructor(private readonly docs: Array<{ n: number }>) {}
      async next(): Promise<{ n: number } | null> {
        return this.docs.shift() ?? null;
      }
      async *[Symbol.asyncIterator](): AsyncGenerator<{ n: number }> {
        for (;;) {
          const doc = await this.next();
          if (doc === null) return;
          yield doc;
        }
      }
    }
    const find = trace(function find() {
      return new Cursor([{ n: 1 }, { n: 2 }]);
    });
    const seen: number[] = [];
    for await (const doc of find()) seen.push(doc.n);
    expect(seen).toEqual([1, 2]);
    const span = tracing.span('find');
    expect(span.status.code).not.toBe(2);
    expect(jsonAttribute(span, 'output')).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('a self-iterator without return() ends its call as cancelled when for await breaks off', async () => {
    const traced = trace(function counter() {
      let i = 0;
      return {
        next: async () => ({ done: false, value: i++ }),
        [Symbol.asyncIterator]() {
          return this;
        },
      };
    });
    for await (const n of traced()) if (n >= 1) break;
    const span = tracing.span('counter');
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
    expect(jsonAttribute(span, 'output')).toEqual([0, 1]);
  });
});

describe('thenables', () => {
  it('runs the work a lazy thenable does in its then inside the call: spans it starts are children', async () => {
    const child = trace(function runQuery() {
      return 42;
    });
    const query = trace(function query() {
      return {
        then(resolve: (v: number) => void) {
          resolve(child()); // a query builder runs its query when awaited
        },
      };
    });
    expect(await query()).toBe(42);
    expect(parentOf(tracing.span('runQuery'))).toBe(tracing.span('query').spanContext().spanId);
  });

  it("runs the caller's own then callbacks in the caller's context, not the call's", async () => {
    const query = trace(function eagerQuery() {
      return {
        then(resolve: (v: number) => void) {
          resolve(1); // settles inside its then, so the callback runs right there
        },
      };
    });
    let activeInCallback: unknown = 'unset';
    await new Promise<void>((done) => {
      query().then(() => {
        activeInCallback = otelTrace.getActiveSpan();
        done();
      });
    });
    expect(activeInCallback).toBeUndefined();
  });

  it('a thenable with then defined by Object.defineProperty (defaults: non-writable) still resolves', async () => {
    const traced = trace(function definedThen() {
      const lazy = {};
      Object.defineProperty(lazy, 'then', {
        value(resolve: (v: string) => void) {
          resolve('ok');
        },
      });
      return lazy as PromiseLike<string>;
    });
    await expect((async () => await traced())()).resolves.toBe('ok');
    // Object.freeze(thenable) fails the same way.
    const frozen = trace(function frozenThenable() {
      return Object.freeze({ then: (resolve: (v: string) => void) => resolve('done') });
    });
    await expect((async () => await frozen())()).resolves.toBe('done');
  });
});
