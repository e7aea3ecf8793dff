/**
 * The traced function and what `new` returns look and behave like the original.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { trace } from '../../src/trace/index.js';
import { installProvider, jsonAttribute } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const ended = (name: string) => tracing.spans().some((span) => span.name === name);

describe('the traced function is the same kind of function', () => {
  it('an async function stays an AsyncFunction (fastify and others check constructor.name / the tag)', () => {
    const fn = async function fetchUser(id: string) {
      return id;
    };
    const traced = trace(fn);
    expect(Object.prototype.toString.call(traced)).toBe('[object AsyncFunction]');
    expect(traced.constructor.name).toBe('AsyncFunction');
    expect(Object.getPrototypeOf(traced)).toBe(Object.getPrototypeOf(fn));
  });

  it('a generator function stays a GeneratorFunction (koa/co style isGeneratorFunction checks)', () => {
    const fn = function* tokens() {
      yield 1;
    };
    const traced = trace(fn);
    expect(traced.constructor.name).toBe('GeneratorFunction');
  });

  it('an arrow or async function gets no prototype it did not have (class-vs-factory checks)', () => {
    const arrow = (x: number) => x;
    expect(Object.hasOwn(trace(arrow), 'prototype')).toBe(Object.hasOwn(arrow, 'prototype'));
  });

  it('is a constructor only when the function is one', () => {
    const asyncFn = async () => 1;
    expect(() => new (trace(asyncFn) as unknown as new () => unknown)()).toThrow(TypeError);
    class Point {
      constructor(readonly x = 1) {}
    }
    const TracedPoint = trace(Point as unknown as (...args: unknown[]) => unknown) as unknown as typeof Point;
    expect(new TracedPoint(2)).toEqual(new Point(2));
    expect(new TracedPoint()).toBeInstanceOf(Point);
    expect(ended('Point')).toBe(true);
  });

  it("a traced derived class keeps the static members it inherits from its base", () => {
    class Model {
      static create(): Model {
        return new this();
      }
    }
    class User extends Model {}
    const TracedUser = trace(User as unknown as (...args: unknown[]) => unknown) as unknown as typeof User;
    expect(typeof TracedUser.create).toBe('function');
  });
});

describe('new on a traced class', () => {
  it('returns the very instance the constructor made, even when it is thenable', () => {
    let self: unknown;
    class LazyQuery {
      constructor() {
        self = this;
      }
      then(resolve: (rows: unknown[]) => void) {
        resolve([]);
      }
    }
    const Traced = trace(LazyQuery as unknown as (...args: unknown[]) => unknown) as unknown as typeof LazyQuery;
    const query = new Traced();
    expect(query).toBe(self);
  });

  it('ends the constructor call when the constructor returns, even when the instance is async-iterable', () => {
    class Channel {
      constructor(readonly topic: string) {}
      async *[Symbol.asyncIterator]() {
        yield this.topic;
      }
    }
    const Traced = trace(Channel as unknown as (...args: unknown[]) => unknown) as unknown as typeof Channel;
    const channel = new Traced('news');
    expect(channel).toBeInstanceOf(Channel);
    expect(ended('Channel')).toBe(true);
    expect(jsonAttribute(tracing.span('Channel'), 'inputs')).toEqual({ topic: 'news' });
  });
});

describe('a returned promise subclass whose then throws', () => {
  it('is returned as is (untraced, only awaiting it fails), and the call still ends', async () => {
    class Cancelled<T> extends Promise<T> {
      // A cancelled request: every then throws (as a subclass whose species cannot be constructed does).
      override then(): never {
        throw new Error('request was cancelled');
      }
    }
    const made = new Cancelled<number>((resolve) => resolve(1));
    const traced = trace(function request() {
      return made;
    });
    let returned: unknown;
    expect(() => {
      returned = traced();
    }).not.toThrow();
    expect(returned).toBe(made);
    await new Promise((resolve) => setTimeout(resolve, 1));
    expect(ended('request')).toBe(true);
  });
});
