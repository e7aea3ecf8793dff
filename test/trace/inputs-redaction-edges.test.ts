/**
 * Inputs by parameter name, and redaction of captured values: edge cases.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capture, DEFAULT_MAX_VALUE_BYTES } from '../../src/trace/capture.js';
import { trace } from '../../src/trace/index.js';
import { parseParams } from '../../src/trace/params.js';
import { compileRedactor } from '../../src/trace/redact.js';
import { installProvider, jsonAttribute } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const policy = { maxValueBytes: DEFAULT_MAX_VALUE_BYTES, redactor: compileRedactor(undefined) };
const names = (source: string) => parseParams(source)?.map((spec) => spec.name);

describe('inputs', () => {
  it('keeps every argument when a declared parameter is named like a positional one (arg1)', () => {
    const plain = trace(function pick(arg1: string) {
      return arg1;
    } as (...args: string[]) => string);
    plain('first', 'second');
    // Both arguments must be in the inputs: the extra one is named arg1 too, and overwrites.
    expect(Object.values(jsonAttribute(tracing.span('pick'), 'inputs') as object)).toEqual(expect.arrayContaining(['first', 'second']));
  });

  it('keeps a parameter named __proto__', () => {
    // eslint-disable-next-line no-new-func
    const fn = new Function('__proto__', 'return 1') as (x: unknown) => number;
    const traced = trace(fn, { name: 'protoParam' });
    traced({ q: 1 });
    expect(jsonAttribute(tracing.span('protoParam'), 'inputs')).toEqual({ ['__proto__']: { q: 1 } });
  });
});

describe('parameter names', () => {
  it('reads a method named class (an API client: client.class(id))', () => {
    expect(names('class(id, options) { return id; }')).toEqual(['id', 'options']);
  });

  it('reads defaults whose increment is followed by a division', () => {
    expect(names('function f(n = i++ / 2, m = j / 3) {}')).toEqual(['n', 'm']);
  });
});

describe('redaction', () => {
  it('masks numbered secret keys (password2 of a sign-up form, apiKey2, token1)', () => {
    const { value } = capture({ password: 'a', password2: 'b', apiKey2: 'c', token1: 'd', authToken2: 'e', refresh_token_2: 'f', max_tokens_2: 3 }, policy);
    expect(value).toEqual({
      password: '[REDACTED]',
      password2: '[REDACTED]',
      apiKey2: '[REDACTED]',
      token1: '[REDACTED]',
      authToken2: '[REDACTED]',
      refresh_token_2: '[REDACTED]',
      max_tokens_2: 3,
    });
  });

  it("masks header values given as a list of pairs (fetch's HeadersInit), as it does for Headers and Maps", () => {
    const { value } = capture({ headers: [['Authorization', 'Bearer sk-live-123'], ['accept', 'json']] }, policy);
    expect(JSON.stringify(value)).not.toContain('sk-live-123');
  });
});
