import { SpanStatusCode, context, trace as otelTrace } from '@opentelemetry/api';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toCallParts } from '../../src/mapping/index.js';
import { trace, withThread } from '../../src/trace/index.js';
import { installProvider, jsonAttribute, parentOf } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
// Ending a span twice, or writing to an ended one, makes the SDK warn: no test may cause that.
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

describe('trace(): one span per call', () => {
  it('names the span after options.name, then fn.name, then anonymous', () => {
    trace(function named() {})();
    trace(function other() {}, { name: 'renamed' })();
    trace((() => () => 1)())();
    expect(tracing.spans().map((span) => span.name)).toEqual(['named', 'renamed', 'anonymous']);
  });

  it('keeps name and length of the wrapped function', () => {
    const wrapped = trace(function add(a: number, b: number) {
      return a + b;
    });
    expect(wrapped.name).toBe('add');
    expect(wrapped.length).toBe(2);
  });

  it('writes inputs by parameter name and output as the value itself or JSON text', () => {
    trace(function add(a: number, b: number) {
      return a + b;
    })(2, 3);
    trace(function greet(name: string) {
      return `hi ${name}`;
    })('ada');
    trace(function pair(x: number) {
      return { x, list: [x] };
    })(1);
    expect(jsonAttribute(tracing.span('add'), 'inputs')).toEqual({ a: 2, b: 3 });
    expect(tracing.span('add').attributes.output).toBe(5);
    expect(tracing.span('greet').attributes.output).toBe('hi ada');
    expect(jsonAttribute(tracing.span('pair'), 'output')).toEqual({ x: 1, list: [1] });
  });

  it('masks secret parameters and sizes down big inputs (scalar fast path included)', () => {
    trace(function login(user: string, password: string) {
      return user.length + password.length;
    })('ada', 'hunter2');
    expect(jsonAttribute(tracing.span('login'), 'inputs')).toEqual({ user: 'ada', password: '[REDACTED]' });
    trace(function big(text: string) {
      return text.length;
    }, { maxValueBytes: 1024 })('\u0001'.repeat(1000));
    const inputs = tracing.span('big').attributes.inputs as string;
    expect(Buffer.byteLength(inputs)).toBeLessThanOrEqual(1024);
    expect(inputs).toContain('[truncated');
  });

  it('a returned string that is JSON text of an object or list becomes that value in the call (documented)', () => {
    // The mapping (SPEC §3, shared with the hosted service) parses every attribute string that
    // starts with { or [ and is JSON, and only `output`/`outputs` give a bare output: no attribute
    // value can carry such a string through. The caller still gets the string, unchanged.
    const jsonMode = trace(function jsonMode() {
      return '{"answer": 42}';
    });
    const listy = trace(function listy() {
      return '[1, 2]';
    });
    const broken = trace(function broken() {
      return '{"answer": 4';
    });
    const quoted = trace(function quoted() {
      return '"just text"';
    });
    expect(jsonMode()).toBe('{"answer": 42}');
    expect(listy()).toBe('[1, 2]');
    broken();
    quoted();
    const outputOf = (name: string) => toCallParts(tracing.span(name), 'acme/demo').end.output;
    expect(tracing.span('jsonMode').attributes.output).toBe('{"answer": 42}');
    expect(outputOf('jsonMode')).toEqual({ answer: 42 });
    expect(outputOf('listy')).toEqual([1, 2]);
    expect(outputOf('broken')).toBe('{"answer": 4');
    expect(outputOf('quoted')).toBe('"just text"');
  });

  it('a result with a value member reads back whole: written as outputs, which no lookup reaches into', () => {
    // The mapping looks up `output.value` before `output`, and reaches into `output`'s JSON.
    trace(function score() {
      return { value: 0.9, reason: 'good' };
    })();
    trace(function emptyValue() {
      return { value: 0, reason: 'none' };
    })();
    const outputOf = (name: string) => toCallParts(tracing.span(name), 'acme/demo').end.output;
    expect(outputOf('score')).toEqual({ value: 0.9, reason: 'good' });
    expect(outputOf('emptyValue')).toEqual({ value: 0, reason: 'none' });
    expect(tracing.span('score').attributes.output).toBeUndefined();
    expect(jsonAttribute(tracing.span('score'), 'outputs')).toEqual({ value: 0.9, reason: 'good' });
    // A list, or an object without that member, stays in `output`.
    trace(function values() {
      return [{ value: 1 }];
    })();
    expect(outputOf('values')).toEqual([{ value: 1 }]);
    expect(jsonAttribute(tracing.span('values'), 'output')).toEqual([{ value: 1 }]);
    // JSON text of such an object reads back parsed, as any JSON text of an object does: whole.
    trace(function jsonScore() {
      return '{"value": 1, "reason": "x"}';
    })();
    trace(function boxedScore() {
      return new String('{"value": 7, "reason": "y"}');
    })();
    expect(outputOf('jsonScore')).toEqual({ value: 1, reason: 'x' });
    expect(outputOf('boxedScore')).toEqual({ value: 7, reason: 'y' });
  });

  it('a result that captures as a string reads back as that string, without JSON quotes', () => {
    class Opaque {}
    const results: Record<string, unknown> = {
      big: 10n,
      date: new Date(0),
      bytes: Buffer.from('hi'),
      opaque: new Opaque(),
    };
    for (const [name, result] of Object.entries(results)) trace(() => result, { name })();
    const outputOf = (name: string) => toCallParts(tracing.span(name), 'acme/demo').end.output;
    expect(outputOf('big')).toBe('10');
    expect(outputOf('date')).toBe('1970-01-01T00:00:00.000Z');
    expect(outputOf('bytes')).toBe('aGk=');
    expect(outputOf('opaque')).toBe('[Opaque]');
  });

  it('results the mapping reads as empty (0, false, empty text or list) give the call no output (documented)', () => {
    // SPEC §3 takes the first non-empty value, as the hosted service does; the span still has it.
    const empties: Record<string, unknown> = { zero: 0, no: false, blank: '', none: [] };
    for (const [name, result] of Object.entries(empties)) trace(() => result, { name })();
    for (const name of Object.keys(empties)) {
      expect(toCallParts(tracing.span(name), 'acme/demo').end.output, name).toBeNull();
    }
    expect(tracing.span('zero').attributes.output).toBe(0);
    expect(tracing.span('no').attributes.output).toBe(false);
  });

  it('writes no output attribute for undefined or null results', () => {
    trace(function nothing() {})();
    trace(function empty() {
      return null;
    })();
    expect(tracing.span('nothing').attributes.output).toBeUndefined();
    expect(tracing.span('empty').attributes.output).toBeUndefined();
  });

  it('sets weave.span.kind and wandb.display_name from options', () => {
    trace(function tool() {}, { kind: 'tool', displayName: 'The tool' })();
    const span = tracing.span('tool');
    expect(span.attributes['weave.span.kind']).toBe('tool');
    expect(span.attributes['wandb.display_name']).toBe('The tool');
  });

  it('honours captureInputs/captureOutput false', () => {
    trace(
      function secretive(x: string) {
        return x;
      },
      { captureInputs: false, captureOutput: false },
    )('private');
    const span = tracing.span('secretive');
    expect(span.attributes.inputs).toBeUndefined();
    expect(span.attributes.output).toBeUndefined();
  });

  it('rejects bad options at wrap time, naming the option', () => {
    expect(() => trace(42 as unknown as () => void)).toThrow(/`fn`/);
    expect(() => trace(() => 1, { maxValueBytes: 0 })).toThrow(/`maxValueBytes`/);
    expect(() => trace(() => 1, { name: 5 as unknown as string })).toThrow(/`name`/);
    expect(() => trace(() => 1, { reduce: 'x' as unknown as () => void })).toThrow(/`reduce`/);
    expect(() => trace(() => 1, { redact: 3 as unknown as false })).toThrow(/`redact`/);
  });

  it('refuses capture switches that are not booleans (a truthy "no" would capture)', () => {
    expect(() => trace(() => 1, { captureInputs: 'no' as unknown as boolean })).toThrow(/`captureInputs` to be a boolean, got "no"$/);
    expect(() => trace(() => 1, { captureOutput: 0 as unknown as boolean })).toThrow(/`captureOutput` to be a boolean, got 0$/);
    expect(() => trace(() => 1, null as unknown as undefined)).toThrow(/`options` to be an object, got null$/);
  });
});

describe('trace(): the wrapped function behaves exactly as before', () => {
  it('passes this and arguments through and returns the same value', () => {
    const target = {
      factor: 3,
      scale: trace(function scale(this: { factor: number }, n: number) {
        return this.factor * n;
      }),
    };
    expect(target.scale(2)).toBe(6);
    const same = { id: 1 };
    expect(trace(() => same)()).toBe(same);
  });

  it('rethrows the very same error object and records it', () => {
    const error = new TypeError('boom');
    const failing = trace(function failing() {
      throw error;
    });
    let caught: unknown;
    try {
      failing();
    } catch (thrown) {
      caught = thrown;
    }
    expect(caught).toBe(error);
    const span = tracing.span('failing');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'boom' });
    expect(span.events.map((event) => event.name)).toEqual(['exception']);
    expect(span.events[0]?.attributes?.['exception.type']).toBe('TypeError');
  });

  it('rethrows non-Error values unchanged (strings, objects, undefined)', () => {
    for (const thrown of ['text', { code: 7 }, undefined, 42]) {
      let caught: unknown = Symbol('not thrown');
      try {
        trace(function thrower() {
          throw thrown;
        })();
      } catch (error) {
        caught = error;
      }
      expect(caught).toBe(thrown);
    }
    expect(tracing.spans().every((span) => span.status.code === SpanStatusCode.ERROR)).toBe(true);
  });

  it('refuses unknown options of trace() and withThread(), naming the one most likely meant', () => {
    expect(() => trace(() => 1, { captureInput: false } as never)).toThrow(/Unknown option `captureInput` \(did you mean `captureInputs`\?\)/);
    expect(() => trace(() => 1, { display_name: 'x' } as never)).toThrow(/did you mean `displayName`/);
    expect(() => withThread('t', () => 1, { turns: false } as never)).toThrow(/Unknown option `turns` \(did you mean `turn`\?\)/);
  });

  it('records what a thrown non-Error says: its message, else its JSON (redacted), never "[object Object]"', () => {
    const cases: Array<[unknown, string]> = [
      [{ code: 42 }, '{"code":42}'],
      [{ message: 'quota exceeded', status: 429 }, 'quota exceeded'],
      [{ code: 'E_AUTH', apiKey: 'sk-live-123' }, '{"code":"E_AUTH","apiKey":"[REDACTED]"}'],
      [['a', 1], '["a",1]'],
      [42, '42'],
      ['text', 'text'],
    ];
    for (const [thrown, expected] of cases) {
      tracing.reset();
      expect(() =>
        trace(function thrower() {
          throw thrown;
        })(),
      ).toThrow();
      const [span] = tracing.spans();
      expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: expected });
      expect(span?.events[0]?.attributes?.['exception.message']).toBe(expected);
    }
  });

  it('handles a resolved promise: same value, span ends when it settles', async () => {
    let release!: (value: string) => void;
    const slow = trace(function slow() {
      return new Promise<string>((resolve) => (release = resolve));
    });
    const pending = slow();
    expect(tracing.spans()).toHaveLength(0);
    release('done');
    await expect(pending).resolves.toBe('done');
    expect(tracing.span('slow').attributes.output).toBe('done');
  });

  it('handles a rejected promise: the same error object, span status ERROR', async () => {
    const error = new Error('nope');
    const rejecting = trace(async function rejecting() {
      throw error;
    });
    await expect(rejecting()).rejects.toBe(error);
    expect(tracing.span('rejecting').status).toEqual({ code: SpanStatusCode.ERROR, message: 'nope' });
  });

  it('keeps an unhandled rejection unhandled (the caller sees what it would have seen)', async () => {
    const seen: unknown[] = [];
    const listener = (reason: unknown) => seen.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const error = new Error('unhandled');
      void trace(async function ignored() {
        throw error;
      })();
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(seen).toEqual([error]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  it('returns a Promise subclass itself (extra methods survive) and observes it', async () => {
    class ApiPromise<T> extends Promise<T> {
      withResponse() {
        return 'response';
      }
    }
    const call = trace(function apiCall() {
      return new ApiPromise<number>((resolve) => resolve(7));
    });
    const result = call();
    expect(result).toBeInstanceOf(ApiPromise);
    expect(result.withResponse()).toBe('response');
    expect(await result).toBe(7);
    await new Promise((resolve) => setImmediate(resolve));
    expect(tracing.span('apiCall').attributes.output).toBe(7);
  });

  describe('a rejected Promise subclass behaves like a native promise', () => {
    class ApiPromise<T> extends Promise<T> {
      withResponse() {
        return 'response';
      }
    }

    async function unhandledDuring(run: () => Promise<void> | void): Promise<unknown[]> {
      const seen: unknown[] = [];
      const listener = (reason: unknown) => seen.push(reason);
      process.on('unhandledRejection', listener);
      try {
        await run();
        await new Promise((resolve) => setTimeout(resolve, 20));
      } finally {
        process.off('unhandledRejection', listener);
      }
      return seen;
    }

    it('left unhandled, it is reported unhandled once, with the same reason', async () => {
      const error = new Error('unhandled subclass');
      const seen = await unhandledDuring(() => {
        const returned = trace(function ignoredApiCall() {
          return new ApiPromise<number>((_resolve, reject) => reject(error));
        })();
        expect(returned).toBeInstanceOf(ApiPromise);
      });
      expect(seen).toEqual([error]);
      expect(tracing.span('ignoredApiCall').status).toEqual({ code: SpanStatusCode.ERROR, message: 'unhandled subclass' });
    });

    it('handled by await, catch or then, nothing is reported and the caller gets the error', async () => {
      const make = (name: string, error: Error) =>
        trace(
          function apiCall() {
            return new ApiPromise<number>((_resolve, reject) => setImmediate(() => reject(error)));
          },
          { name },
        )();
      const errors = [new Error('awaited'), new Error('caught'), new Error('then')];
      const received: unknown[] = [];
      const seen = await unhandledDuring(async () => {
        const awaited = make('awaited', errors[0]!);
        expect(awaited.withResponse()).toBe('response');
        try {
          await awaited;
        } catch (error) {
          received.push(error);
        }
        received.push(await make('caught', errors[1]!).catch((error: unknown) => error));
        received.push(await make('then', errors[2]!).then(undefined, (error: unknown) => error));
      });
      expect(seen).toEqual([]);
      expect(received).toEqual(errors);
      expect(tracing.spans().map((span) => span.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.ERROR]);
    });
  });

  it('runs a lazy thenable once, when the caller awaits it', async () => {
    let runs = 0;
    const lazy = {
      table: 'users',
      then(onFulfilled: (value: string) => unknown, onRejected?: (reason: unknown) => unknown) {
        runs++;
        return Promise.resolve('rows').then(onFulfilled, onRejected);
      },
    };
    const query = trace(function query() {
      return lazy;
    });
    const returned = query();
    expect(runs).toBe(0);
    expect(returned.table).toBe('users');
    expect(await returned).toBe('rows');
    expect(runs).toBe(1);
    expect(tracing.span('query').attributes.output).toBe('rows');
  });

  it("ends the span with the error of a thenable whose then throws at once", async () => {
    const broken = trace(function broken() {
      return {
        then() {
          throw new Error('then boom');
        },
      };
    });
    await expect(Promise.resolve().then(() => broken())).rejects.toThrow('then boom');
    const span = tracing.span('broken');
    expect(span.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'then boom' });
    expect(span.events.map((event) => event.name)).toEqual(['exception']);

    // A then that settles at once runs the caller's callback inside it: that callback's throw is
    // the caller's, not the call's (here a stream, whose call is still open when it throws).
    async function* chunks() {
      yield 'a';
      yield 'b';
    }
    const eager = trace(function eager() {
      return {
        then(onFulfilled: (value: AsyncGenerator<string>) => unknown) {
          return onFulfilled(chunks());
        },
      };
    });
    let stream: AsyncGenerator<string> | undefined;
    expect(() =>
      eager().then((value) => {
        stream = value;
        throw new Error('caller bug');
      }),
    ).toThrow('caller bug');
    const read: string[] = [];
    for await (const chunk of stream!) read.push(chunk);
    expect(read).toEqual(['a', 'b']);
    expect(tracing.span('eager').status.code).toBe(SpanStatusCode.UNSET);
    expect(jsonAttribute(tracing.span('eager'), 'output')).toEqual(['a', 'b']);
  });

  it('observes a query builder through its chain: the awaited then ends the call', async () => {
    class Query {
      readonly filters: string[] = [];
      where(filter: string): this {
        this.filters.push(filter);
        return this;
      }
      then(onFulfilled: (rows: string[]) => unknown, onRejected?: (reason: unknown) => unknown) {
        const rows = this.filters.includes('bad') ? Promise.reject(new Error('query failed')) : Promise.resolve(this.filters);
        return rows.then(onFulfilled, onRejected);
      }
    }
    const findUsers = trace(function findUsers() {
      return new Query();
    });
    expect(await findUsers().where('active').where('admin')).toEqual(['active', 'admin']);
    await expect(findUsers().where('bad')).rejects.toThrow('query failed');
    const [ok, failed] = tracing.spans().filter((span) => span.name === 'findUsers');
    expect(jsonAttribute(ok!, 'output')).toEqual(['active', 'admin']);
    expect(failed!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'query failed' });
  });

  it('ends the span exactly once on each path', async () => {
    const ends: string[] = [];
    await trace(async function once() {
      return 1;
    })();
    trace(function syncOnce() {
      return 2;
    })();
    await trace(async function rejectOnce() {
      throw new Error('x');
    })().catch(() => undefined);
    expect(() =>
      trace(function throwOnce() {
        throw new Error('y');
      })(),
    ).toThrow('y');
    for (const span of tracing.spans()) ends.push(span.name);
    expect(ends).toEqual(['once', 'syncOnce', 'rejectOnce', 'throwOnce']);
  });

  it('(the afterEach guard sees a double end)', () => {
    const span = otelTrace.getTracer('guard').startSpan('twice');
    span.end();
    span.end();
    expect(tracing.warnings.some((message) => /end\(\) on a span once/.test(message))).toBe(true);
    tracing.warnings.length = 0;
  });

  it('works with new (a traced constructor)', () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    const TracedPoint = trace(Point as unknown as (x: number, y: number) => Point) as unknown as typeof Point;
    const point = new TracedPoint(1, 2);
    expect(point).toBeInstanceOf(Point);
    expect(point.x + point.y).toBe(3);
    expect(jsonAttribute(tracing.span('Point'), 'inputs')).toEqual({ x: 1, y: 2 });
  });
});

describe('trace(): nesting', () => {
  it('makes the span active inside the call and a child of the active span', () => {
    let inside: string | undefined;
    const inner = trace(function inner() {
      inside = otelTrace.getActiveSpan()?.spanContext().spanId;
    });
    const outer = trace(function outer() {
      inner();
    });
    outer();
    expect(parentOf(tracing.span('inner'))).toBe(tracing.span('outer').spanContext().spanId);
    expect(inside).toBe(tracing.span('inner').spanContext().spanId);
    expect(parentOf(tracing.span('outer'))).toBeUndefined();
  });

  it('keeps the tree across await and timers', async () => {
    const leaf = trace(async function leaf(n: number) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return n;
    });
    const timed = trace(function timed() {
      return new Promise<number>((resolve) => setTimeout(() => resolve(leaf(2)), 1));
    });
    const root = trace(async function root() {
      await Promise.resolve();
      const a = await leaf(1);
      const b = await timed();
      const [c, d] = await Promise.all([leaf(3), leaf(4)]);
      return a + b + c + d;
    });
    expect(await root()).toBe(10);
    const rootId = tracing.span('root').spanContext().spanId;
    const timedId = tracing.span('timed').spanContext().spanId;
    const leaves = tracing.spans().filter((span) => span.name === 'leaf');
    expect(leaves).toHaveLength(4);
    const byInput = new Map(leaves.map((span) => [(jsonAttribute(span, 'inputs') as { n: number }).n, parentOf(span)]));
    expect(byInput.get(1)).toBe(rootId);
    expect(byInput.get(2)).toBe(timedId);
    expect(byInput.get(3)).toBe(rootId);
    expect(byInput.get(4)).toBe(rootId);
    expect(parentOf(tracing.span('timed'))).toBe(rootId);
    expect(new Set(tracing.spans().map((span) => span.spanContext().traceId)).size).toBe(1);
  });

  it('leaves the caller context untouched after the call', () => {
    const before = context.active();
    trace(function noop() {})();
    expect(context.active()).toBe(before);
  });
});
