/**
 * No tracer provider registered (this file runs in its own worker and never registers one):
 * the wrapper must do no capture work at all and behave exactly like the bare function.
 */
import { context, trace as otelTrace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { setCallAttributes, trace, withThread } from '../../src/trace/index.js';

describe('without a provider', () => {
  it('never reads the arguments, the result, or the function source', async () => {
    let reads = 0;
    const watched = {
      get value() {
        reads++;
        return 1;
      },
    };
    const fn = function identity<T>(value: T) {
      return value;
    };
    const source = fn.toString;
    fn.toString = (): string => {
      reads++;
      return source.call(fn);
    };
    expect(trace(fn)(watched)).toBe(watched);
    expect(await trace(async () => watched)()).toBe(watched);
    expect(reads).toBe(0);
  });

  it('returns the same promise object and the same errors', async () => {
    const promise = Promise.resolve(3);
    expect(trace(() => promise)()).toBe(promise);
    const error = new Error('x');
    expect(() =>
      trace(() => {
        throw error;
      })(),
    ).toThrow(error);
  });

  it('leaves generators untouched', () => {
    const generator = trace(function* numbers() {
      yield 1;
    })();
    expect(Object.prototype.hasOwnProperty.call(generator, 'next')).toBe(false);
    expect([...generator]).toEqual([1]);
  });

  it('keeps helpers harmless', () => {
    expect(withThread('t', () => 'ok')).toBe('ok');
    expect(() => setCallAttributes({ a: 1 })).not.toThrow();
    expect(otelTrace.getSpan(context.active())).toBeUndefined();
  });
});
