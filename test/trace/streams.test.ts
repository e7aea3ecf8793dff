import { Readable } from 'node:stream';
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toCallParts } from '../../src/mapping/index.js';
import { PENDING_WATCHED_AFTER_MS } from '../../src/trace/call-end.js';
import { setCallAttributes, trace } from '../../src/trace/index.js';
import { collectGarbageUntil, installProvider, jsonAttribute, parentOf } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const child = trace(function child(n: number) {
  return n * 10;
});

describe('async generators', () => {
  const stream = trace(async function* stream(count: number) {
    for (let i = 0; i < count; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      yield child(i);
    }
    return 'finished';
  });

  it('stays open until the consumer finishes; output is the chunks', async () => {
    const iterator = stream(3);
    const seen: number[] = [];
    for await (const chunk of iterator) {
      seen.push(chunk);
      expect(tracing.spans().some((span) => span.name === 'stream')).toBe(false);
    }
    expect(seen).toEqual([0, 10, 20]);
    const span = tracing.span('stream');
    expect(jsonAttribute(span, 'output')).toEqual([0, 10, 20]);
    expect(jsonAttribute(span, 'inputs')).toEqual({ count: 3 });
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
  });

  it('returns the very same generator object', () => {
    const generator = stream(1);
    expect(Object.prototype.toString.call(generator)).toBe('[object AsyncGenerator]');
    expect(generator[Symbol.asyncIterator]()).toBe(generator);
    return generator.return('early');
  });

  it('runs the generator body in the call context: spans inside are children', async () => {
    for await (const _ of stream(2)) {
      // consume
    }
    const parentId = tracing.span('stream').spanContext().spanId;
    const children = tracing.spans().filter((span) => span.name === 'child');
    expect(children).toHaveLength(2);
    for (const span of children) expect(parentOf(span)).toBe(parentId);
  });

  it('ends as cancelled when the consumer breaks', async () => {
    for await (const chunk of stream(5)) {
      if (chunk === 10) break;
    }
    const span = tracing.span('stream');
    expect(jsonAttribute(span, 'output')).toEqual([0, 10]);
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("shows how a stream ended among the call's attributes, merged with the function's own", async () => {
    const tagged = trace(async function* tagged() {
      setCallAttributes({ source: 'cache', callbridge: { mine: 1 } });
      yield 'a';
      yield 'b';
    });
    for await (const chunk of tagged()) {
      if (chunk === 'a') break;
    }
    const { start } = toCallParts(tracing.span('tagged'), 'acme/streams');
    // The span attribute alone reaches only otel_dump, which the service does not show.
    expect(start.attributes).toEqual({ source: 'cache', callbridge: { mine: 1, stream: { end: 'cancelled' } } });
    for await (const _chunk of tagged()) {
      // read to its end: no marker
    }
    expect(toCallParts(tracing.spans().at(-1)!, 'acme/streams').start.attributes).toEqual({ source: 'cache', callbridge: { mine: 1 } });
  });

  it('records an error thrown by the generator and passes it on unchanged', async () => {
    const error = new Error('stream broke');
    const failing = trace(async function* failing() {
      yield 1;
      throw error;
    });
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const chunk of failing()) seen.push(chunk);
      })(),
    ).rejects.toBe(error);
    expect(seen).toEqual([1]);
    expect(tracing.span('failing').status).toEqual({ code: SpanStatusCode.ERROR, message: 'stream broke' });
  });

  it('keeps the chunks read before an error as the failed call\'s output (reduced when asked)', async () => {
    const cutOff = (reduce?: (chunks: string[]) => unknown) =>
      trace(
        async function* cutOff() {
          yield 'The answer';
          yield ' is';
          throw new Error('connection reset');
        },
        { reduce: reduce as ((chunks: unknown[]) => unknown) | undefined },
      );
    for (const reduce of [undefined, (chunks: string[]) => chunks.join('')]) {
      tracing.reset();
      await expect(
        (async () => {
          for await (const _chunk of cutOff(reduce)()) {
            // read until it fails
          }
        })(),
      ).rejects.toThrow('connection reset');
      const span = tracing.span('cutOff');
      expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'connection reset' });
      const { end } = toCallParts(span, 'acme/streams');
      expect(end).toMatchObject({ exception: 'connection reset', output: reduce === undefined ? ['The answer', ' is'] : 'The answer is' });
    }
  });

  it('writes no output for a stream that fails before its first chunk', async () => {
    const refused = trace(async function* refused() {
      throw new Error('401 from the model');
    });
    await expect(refused().next()).rejects.toThrow('401 from the model');
    const span = tracing.span('refused');
    expect(span.attributes.output).toBeUndefined();
    expect(toCallParts(span, 'acme/streams').end).toMatchObject({ exception: '401 from the model', output: null });
  });

  it('forwards throw() into the generator (caught inside: stream continues)', async () => {
    const resilient = trace(async function* resilient() {
      try {
        yield 'first';
      } catch {
        yield 'recovered';
      }
    });
    const iterator = resilient();
    expect(await iterator.next()).toEqual({ value: 'first', done: false });
    expect(await iterator.throw(new Error('injected'))).toEqual({ value: 'recovered', done: false });
    expect(await iterator.next()).toEqual({ value: undefined, done: true });
    expect(jsonAttribute(tracing.span('resilient'), 'output')).toEqual(['first', 'recovered']);
  });

  it('builds the output with reduce', async () => {
    const tokens = trace(
      async function* tokens() {
        yield 'Hel';
        yield 'lo';
      },
      { reduce: (chunks) => (chunks as string[]).join('') },
    );
    for await (const _ of tokens()) {
      // consume
    }
    expect(tracing.span('tokens').attributes.output).toBe('Hello');
  });

  it('marks a reduce that throws instead of failing the call', async () => {
    const tokens = trace(
      async function* reduced() {
        yield 1;
      },
      {
        reduce: () => {
          throw new Error('bad reducer');
        },
      },
    );
    for await (const _ of tokens()) {
      // consume
    }
    expect(tracing.span('reduced').attributes.output).toBe('[reduce threw: bad reducer]');
  });

  it('caps the default output at 1000 chunks', async () => {
    const many = trace(async function* many() {
      for (let i = 0; i < 1500; i++) yield i;
    });
    let count = 0;
    for await (const _ of many()) count++;
    expect(count).toBe(1500);
    const output = jsonAttribute(tracing.span('many'), 'output') as unknown[];
    expect(output).toHaveLength(1001);
    expect(output[1000]).toBe('[500 more chunks]');
  });

  it('handles a promise that resolves to a stream (await client.create({stream: true}))', async () => {
    const source = trace(async function* source() {
      yield 'a';
      yield 'b';
    });
    const create = trace(async function create() {
      await Promise.resolve();
      return source();
    });
    const streamed = await create();
    expect(tracing.spans().some((span) => span.name === 'create')).toBe(false);
    const chunks: string[] = [];
    for await (const chunk of streamed) chunks.push(chunk);
    expect(chunks).toEqual(['a', 'b']);
    expect(jsonAttribute(tracing.span('create'), 'output')).toEqual(['a', 'b']);
  });
});

describe('sync generators', () => {
  const numbers = trace(function* numbers(limit: number) {
    for (let i = 0; i < limit; i++) yield child(i);
  });

  it('completes, keeps identity, nests spans', () => {
    const generator = numbers(3);
    expect(generator[Symbol.iterator]()).toBe(generator);
    expect([...generator]).toEqual([0, 10, 20]);
    const span = tracing.span('numbers');
    expect(jsonAttribute(span, 'output')).toEqual([0, 10, 20]);
    for (const c of tracing.spans().filter((s) => s.name === 'child')) expect(parentOf(c)).toBe(span.spanContext().spanId);
  });

  it('ends as cancelled on break, and works with yield*', () => {
    for (const value of numbers(10)) if (value === 10) break;
    expect(tracing.span('numbers').attributes['callbridge.stream.end']).toBe('cancelled');
    tracing.reset();
    function* outer() {
      yield* numbers(2);
    }
    expect([...outer()]).toEqual([0, 10]);
    expect(jsonAttribute(tracing.span('numbers'), 'output')).toEqual([0, 10]);
  });

  it('records a throw from the body', () => {
    const error = new Error('sync broke');
    const broken = trace(function* broken() {
      yield 1;
      throw error;
    });
    const iterator = broken();
    iterator.next();
    expect(() => iterator.next()).toThrow(error);
    expect(tracing.span('broken').status.code).toBe(SpanStatusCode.ERROR);
  });

  it('leaves arrays and other sync iterables alone (plain values)', () => {
    const list = [1, 2];
    expect(trace(() => list)()).toBe(list);
    expect(tracing.spans()).toHaveLength(1);
  });
});

describe('async iterables that are not generators', () => {
  class SdkStream {
    readonly controller = 'abort-controller';
    constructor(private readonly items: string[]) {}
    async *[Symbol.asyncIterator]() {
      for (const item of this.items) yield item;
    }
    toText() {
      return this.items.join('');
    }
  }

  it('patches the instance: same object, extra members intact, span ends when iterated', async () => {
    const original = new SdkStream(['x', 'y']);
    const open = trace(function open() {
      return original;
    });
    const returned = open();
    expect(returned).toBe(original);
    expect(returned.toText()).toBe('xy');
    expect(returned.controller).toBe('abort-controller');
    expect(tracing.spans()).toHaveLength(0);
    const seen: string[] = [];
    for await (const item of returned) seen.push(item);
    expect(seen).toEqual(['x', 'y']);
    expect(jsonAttribute(tracing.span('open'), 'output')).toEqual(['x', 'y']);
  });

  it('ends on break even when the iterator has no return()', async () => {
    let index = 0;
    const bare = {
      [Symbol.asyncIterator]() {
        return { next: async () => ({ done: false, value: index++ }) };
      },
    };
    const endless = trace(function endless() {
      return bare;
    });
    for await (const value of endless()) if (value === 2) break;
    const span = tracing.span('endless');
    expect(jsonAttribute(span, 'output')).toEqual([0, 1, 2]);
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
  });

  it('treats a Node Readable (piped more often than iterated) as a plain value', () => {
    const readable = Readable.from(['a']);
    const open = trace(function openBody() {
      return readable;
    });
    expect(open()).toBe(readable);
    expect(tracing.spans().map((span) => span.name)).toEqual(['openBody']);
  });
});

describe('abandoned streams', () => {
  it('end as abandoned when the stream is garbage collected unread', async () => {
    await (async () => {
      trace(async function* dropped() {
        yield 1;
      })();
    })();
    await collectGarbageUntil(() => tracing.spans().length > 0);
    const span = tracing.span('dropped');
    expect(span.attributes['callbridge.stream.end']).toBe('abandoned');
    expect(toCallParts(span, 'acme/streams').start.attributes).toMatchObject({ callbridge: { stream: { end: 'abandoned' } } });
  });

  it('do not end a call when the thenable it returned is collected while the stream it resolved to is read', async () => {
    const lazy = trace(function lazy() {
      // A lazy thenable (a query builder) whose result is a stream of rows.
      return {
        then(resolve: (rows: AsyncGenerator<string>) => void) {
          resolve(
            (async function* () {
              yield 'row 1';
              yield 'row 2';
            })(),
          );
        },
      };
    });
    const rows = await (async () => (await lazy()) as unknown as AsyncGenerator<string>)();
    const iterator = rows[Symbol.asyncIterator]();
    expect(await iterator.next()).toEqual({ done: false, value: 'row 1' });
    await collectGarbageUntil(() => tracing.spans().length > 0, 50);
    expect(tracing.spans()).toHaveLength(0);
    expect(await iterator.next()).toEqual({ done: false, value: 'row 2' });
    expect((await iterator.next()).done).toBe(true);
    const span = tracing.span('lazy');
    expect(jsonAttribute(span, 'output')).toEqual(['row 1', 'row 2']);
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
  });
});

describe('async calls whose promise stays pending', () => {
  // A pending promise is watched only once it has waited this long (call-end.ts says why).
  const watchedBy = 2 * PENDING_WATCHED_AFTER_MS + 200;

  it('end as abandoned once the promise is collected: nothing can settle it any more', async () => {
    const stuck = trace(async function stuck(question: string) {
      // Awaits what nothing will ever resolve (a lost callback, a dropped connection's promise).
      await new Promise(() => {});
      return question;
    });
    void stuck('hello?');
    await collectGarbageUntil(() => tracing.spans().length > 0, watchedBy + 2000);
    const span = tracing.span('stuck');
    expect(span.attributes['callbridge.stream.end']).toBe('abandoned');
    const { start, end } = toCallParts(span, 'acme/streams');
    expect(start).toMatchObject({ inputs: { question: 'hello?' }, attributes: { callbridge: { stream: { end: 'abandoned' } } } });
    expect(end.output).toBeNull();
  });

  it('stay open while something can still settle the promise, then follow the stream it resolves to', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const later = trace(async function later() {
      await gate;
      return (async function* () {
        yield 'a';
        yield 'b';
      })();
    });
    // Only the gate, not the promise the caller holds, keeps the function's own promise alive:
    // it is watched meanwhile, and must not be taken for one that can never settle.
    const pending = later();
    await collectGarbageUntil(() => tracing.spans().length > 0, watchedBy);
    expect(tracing.spans()).toHaveLength(0);
    release();
    const stream = await pending;
    // The promise is settled and may go; the stream now holds the call.
    await collectGarbageUntil(() => tracing.spans().length > 0, 50);
    expect(tracing.spans()).toHaveLength(0);
    const chunks: string[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks).toEqual(['a', 'b']);
    const span = tracing.span('later');
    expect(jsonAttribute(span, 'output')).toEqual(['a', 'b']);
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
  });

  it('end each once, with its output, in a burst of more calls than are held before the timer', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const waitForGate = trace(async function waitForGate(index: number) {
      await gate;
      return index;
    });
    const settledAtOnce = trace(async function settledAtOnce(index: number) {
      return index;
    });
    const waiting = Array.from({ length: 3000 }, (_, index) => waitForGate(index));
    // As many again, each settled before the next starts (no timer runs in between).
    for (let index = 0; index < 3000; index++) expect(await settledAtOnce(index)).toBe(index);
    release();
    expect(await Promise.all(waiting)).toEqual(Array.from({ length: 3000 }, (_, index) => index));
    const spans = tracing.spans();
    expect(spans).toHaveLength(6000);
    expect(spans.every((span) => span.attributes['callbridge.stream.end'] === undefined)).toBe(true);
    expect(spans.filter((span) => span.name === 'waitForGate').map((span) => span.attributes.output)).toEqual(
      Array.from({ length: 3000 }, (_, index) => index),
    );
  });

  it('keep a promise subclass whose then() chains on a promise of its own open while its request runs (an SDK\'s APIPromise)', async () => {
    // The shape of openai-node v4's and the Anthropic SDK's APIPromise: resolved at once, its
    // `then` chains on the response promise, so the caller's `await` holds nothing of it.
    class ApiPromise<T> extends Promise<T> {
      #parsed: Promise<T> | undefined;
      constructor(private readonly response: Promise<T>) {
        super((resolve) => resolve(null as T));
      }
      override then<A = T, B = never>(onFulfilled?: ((value: T) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
        this.#parsed ??= this.response.then((value) => value);
        return this.#parsed.then(onFulfilled, onRejected);
      }
    }
    const chat = trace(function chat(question: string) {
      return new ApiPromise(new Promise<{ answer: string }>((resolve) => setTimeout(() => resolve({ answer: `re: ${question}` }), watchedBy + 300)));
    });
    let answered = false;
    const answer = chat('hi').then((value) => {
      answered = true;
      return value;
    });
    await collectGarbageUntil(() => answered, watchedBy + 1000);
    expect(await answer).toEqual({ answer: 're: hi' });
    const span = tracing.span('chat');
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
    expect(jsonAttribute(span, 'output')).toEqual({ answer: 're: hi' });
  });

  it('end at once when they settle soon, as before', async () => {
    const quick = trace(async function quick() {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return 'done';
    });
    expect(await quick()).toBe('done');
    expect(tracing.span('quick').attributes.output).toBe('done');
    expect(tracing.span('quick').attributes['callbridge.stream.end']).toBeUndefined();
  });
});
