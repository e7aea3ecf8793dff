/**
 * The wrapper at its edges: returned promises with members of their own, the wrapped function's
 * own properties, errors whose message cannot be read, nested `withThread`, wrapping a traced
 * function again, and `setCallAttributes` under the call's own `redact`.
 */
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { toCallParts } from '../../src/mapping/index.js';
import { setCallAttributes, trace, withThread } from '../../src/trace/index.js';
import { installProvider, jsonAttribute } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

describe('the caller gets what the function returned', () => {
  it("keeps the own members of a returned native promise (ky's ResponsePromise: ky.get(url).json())", async () => {
    // ky (source/core/Ky.ts, Ky.create) returns the promise of an async function with `json`,
    // `text`, `blob`... assigned onto it as own properties.
    type ResponsePromise = Promise<{ status: number }> & { json(): Promise<unknown> };
    function kyGet(url: string): ResponsePromise {
      const result = (async () => ({ status: 200 }))() as ResponsePromise;
      result.json = async () => ({ url, answer: 42 });
      return result;
    }
    const fetchAnswer = trace(function fetchAnswer(url: string) {
      return kyGet(url);
    });
    const returned = fetchAnswer('https://api.example.com/answer');
    // Not `promise.then(...)`, a new promise without `json`.
    expect(typeof returned.json).toBe('function');
    expect(await returned.json()).toEqual({ url: 'https://api.example.com/answer', answer: 42 });
    expect(await returned).toEqual({ status: 200 });
  });

  it('reports no unhandled rejection for a rejected promise the caller awaits in try/catch, with or without own members', async () => {
    // `await` of a native promise never reads its `then`: the wrapper must not observe it there.
    // Under NodeTracerProvider every promise also carries AsyncLocalStorage's own symbol key.
    type ResponsePromise = Promise<never> & { json(): Promise<unknown> };
    const failingGet = trace(function failingGet() {
      const result = (async () => {
        throw new Error('HTTP 500');
      })() as ResponsePromise;
      result.json = async () => ({ failed: true });
      return result;
    });
    const failingCall = trace(async function failingCall() {
      await Promise.resolve();
      throw new Error('timeout');
    });
    const seen: unknown[] = [];
    const listener = (reason: unknown) => seen.push(reason);
    process.on('unhandledRejection', listener);
    try {
      for (const call of [failingGet, failingCall]) {
        try {
          await call();
        } catch {
          // handled
        }
      }
      const returned = failingGet();
      expect(await returned.json()).toEqual({ failed: true });
      await returned.catch(() => undefined);
      // ky's own json() awaits the original promise: a caller handling only its outcome handles all.
      const kyLike = trace(function kyGet() {
        const result = (async () => {
          throw new Error('HTTP 503');
        })() as ResponsePromise;
        result.json = async () => await result;
        return result;
      });
      await expect(kyLike().json()).rejects.toThrow('HTTP 503');
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      process.off('unhandledRejection', listener);
    }
    expect(seen).toEqual([]);
    expect(tracing.spans().map((span) => span.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.ERROR]);
  });

  it('keeps the own properties of the wrapped function (its type, F, says they are there)', () => {
    const search = Object.assign(
      function search(query: string) {
        return [query];
      },
      { description: 'Search the web', schema: { type: 'object' } },
    );
    const tool = trace(search);
    // trace() returns F, which says they are there.
    expect(tool.description).toBe('Search the web');
    expect(tool.schema).toEqual({ type: 'object' });
  });
});

describe('errors are always recorded', () => {
  it('records an Error whose message getter throws as a failure (status ERROR), not as a success', () => {
    class LazyError extends Error {
      override get message(): string {
        throw new Error('message not loaded');
      }
    }
    const thrown = new LazyError();
    const fail = trace(function fail() {
      throw thrown;
    });
    expect(() => fail()).toThrow(thrown);
    // recordException() throws on the message; the status must say ERROR regardless.
    const span = tracing.span('fail');
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(toCallParts(span, 'acme/hunt').end.exception).toBeTypeOf('string');
  });
});

describe('withThread', () => {
  it('a call nested inside a turn is never a turn itself, even under a nested withThread (ThreadOptions.turn doc)', () => {
    const lookup = trace(function lookup() {
      return 1;
    });
    // A helper or library used inside the turn also scopes its work to the conversation.
    const reply = trace(function reply() {
      return withThread('conv-1', () => lookup());
    });
    withThread('conv-1', () => reply());
    expect(tracing.span('reply').attributes['wandb.is_turn']).toBe(true);
    // One message, one turn.
    expect(tracing.span('lookup').attributes['wandb.is_turn']).toBe(false);
    expect(toCallParts(tracing.span('lookup'), 'acme/hunt').start.turn_id ?? null).toBeNull();
  });
  it('a conversation started inside a turn of another (a sub-agent) has turns of its own', () => {
    const note = trace(function note() {
      return 0;
    });
    const ask = trace(function ask() {
      return withThread('conv-1', () => note()); // back in the user's conversation: no second turn
    });
    const reply = trace(function reply() {
      return withThread('sub-agent', () => ask());
    });
    withThread('conv-1', () => reply());
    expect(tracing.span('reply').attributes).toMatchObject({ 'wandb.thread_id': 'conv-1', 'wandb.is_turn': true });
    expect(tracing.span('ask').attributes).toMatchObject({ 'wandb.thread_id': 'sub-agent', 'wandb.is_turn': true });
    expect(tracing.span('note').attributes).toMatchObject({ 'wandb.thread_id': 'conv-1', 'wandb.is_turn': false });
  });
});

describe('parameter names', () => {
  it('a traced function wrapped again (trace(trace(f)), @traced on a traced method) keeps parameter names', () => {
    const add = trace(function add(a: number, b: number) {
      return a + b;
    });
    const timed = trace(add, { name: 'timedAdd' });
    expect(timed(1, 2)).toBe(3);
    expect(jsonAttribute(tracing.span('add'), 'inputs')).toEqual({ a: 1, b: 2 });
    // Not {"args":[1,2]}, read from the wrapper's own `(...args)`.
    expect(jsonAttribute(tracing.span('timedAdd'), 'inputs')).toEqual({ a: 1, b: 2 });
  });
});

describe("setCallAttributes and the call's redact option", () => {
  it("masks the keys the call's redact list adds", () => {
    const handle = trace(
      function handle(userEmail: string) {
        setCallAttributes({ userEmail, plan: 'pro' });
        return 'ok';
      },
      { redact: ['userEmail'] },
    );
    handle('ann@example.com');
    const span = tracing.span('handle');
    expect(jsonAttribute(span, 'inputs')).toEqual({ userEmail: '[REDACTED]' });
    expect(jsonAttribute(span, 'wandb.attributes')).toEqual({ userEmail: '[REDACTED]', plan: 'pro' });
  });

  it("applies the call's redact function", () => {
    const handle = trace(
      function handle(ip: string) {
        setCallAttributes({ clientIp: ip });
        return 'ok';
      },
      { redact: (key, value) => (/ip$/i.test(key) ? 'x.x.x.x' : value) },
    );
    handle('10.1.2.3');
    const span = tracing.span('handle');
    expect(jsonAttribute(span, 'inputs')).toEqual({ ip: 'x.x.x.x' });
    expect(jsonAttribute(span, 'wandb.attributes')).toEqual({ clientIp: 'x.x.x.x' });
  });
});

describe('a global setTimeout that returns a number (jsdom, some fake timers)', () => {
  it('changes nothing for an async traced call, and throws from no timer', async () => {
    const realSetTimeout = globalThis.setTimeout;
    const thrown: unknown[] = [];
    // jsdom's window.setTimeout: a number, and no unref().
    vi.stubGlobal('setTimeout', (fn: () => void, ms?: number) =>
      Number(
        realSetTimeout(() => {
          try {
            fn();
          } catch (error) {
            thrown.push(error);
          }
        }, ms),
      ),
    );
    try {
      // A fresh copy of the wrapper: its timer for pending calls is not running yet.
      vi.resetModules();
      const fresh = await import('../../src/trace/index.js');
      const answer = fresh.trace(async function answer(question: string) {
        await new Promise((resolve) => realSetTimeout(resolve, 5));
        return `ok ${question}`;
      });
      expect(await answer('x')).toBe('ok x');
      // Past the pending calls' timer, which runs through the stubbed setTimeout.
      await new Promise((resolve) => realSetTimeout(resolve, 1200));
      expect(await fresh.trace(async function later() {
        return 2;
      })()).toBe(2);
    } finally {
      vi.unstubAllGlobals();
    }
    expect(thrown).toEqual([]);
    const span = tracing.span('answer');
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
    expect(span.attributes.output).toBe('ok x');
    expect(tracing.span('later').attributes.output).toBe(2);
  });
});
