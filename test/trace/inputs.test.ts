import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { capture, DEFAULT_MAX_VALUE_BYTES, type CapturePolicy } from '../../src/trace/capture.js';
import { compileInputs } from '../../src/trace/inputs.js';
import { namedInputs, parseParams, type ParamSpec } from '../../src/trace/params.js';
import { compileRedactor, type RedactOption } from '../../src/trace/redact.js';

const policy = (redact?: RedactOption, maxValueBytes = DEFAULT_MAX_VALUE_BYTES): CapturePolicy => ({
  maxValueBytes,
  redactor: compileRedactor(redact),
});
const inputsOf = (source: string, args: unknown[], over: CapturePolicy = policy()) =>
  compileInputs(parseParams(source), over)(args);

describe('compileInputs', () => {
  it('writes scalar arguments by parameter name', () => {
    expect(inputsOf('function f(a, b) {}', [1, 'two'])).toBe('{"a":1,"b":"two"}');
    expect(inputsOf('function f(a, b, c) {}', [true, null, -0])).toBe('{"a":true,"b":null,"c":0}');
    expect(inputsOf('(question) => 1', ['say "hi"\n\u2028'])).toBe('{"question":"say \\"hi\\"\\n\u2028"}');
    expect(inputsOf('function f() {}', [])).toBe('{}');
  });

  it('leaves out undefined arguments, names extra and destructured ones by position', () => {
    expect(inputsOf('function f(a, b) {}', [undefined, 2])).toBe('{"b":2}');
    expect(inputsOf('function f(a) {}', [1, 'x'])).toBe('{"a":1,"arg1":"x"}');
    expect(inputsOf('function f({ a }, b) {}', [3, 4])).toBe('{"arg0":3,"b":4}');
    expect(compileInputs(null, policy())(['x', 1])).toBe('{"arg0":"x","arg1":1}');
  });

  it('masks secret-looking parameters whatever their value', () => {
    expect(inputsOf('function f(prompt, apiKey) {}', ['hi', 'sk-123'])).toBe('{"prompt":"hi","apiKey":"[REDACTED]"}');
    expect(inputsOf('function f(password) {}', [{ nested: 1 }])).toBe('{"password":"[REDACTED]"}');
    expect(inputsOf('function f(a) {}', [1, 'extra'], policy(['arg1']))).toBe('{"a":1,"arg1":"[REDACTED]"}');
    expect(inputsOf('function f(password) {}', ['x'], policy(false))).toBe('{"password":"x"}');
  });

  it('takes the general way for values that are not plain scalars, with the same result', () => {
    expect(inputsOf('function f(a, b) {}', [{ x: [1] }, 2n])).toBe('{"a":{"x":[1]},"b":"2"}');
    expect(inputsOf('function f(a) {}', [Number.NaN])).toBe('{"a":"NaN"}');
    expect(inputsOf('function f(a, ...rest) {}', [1, 2, 3])).toBe('{"a":1,"rest":[2,3]}');
    expect(inputsOf('function f(a, ...rest) {}', [1])).toBe('{"a":1}');
    expect(inputsOf('function f(a) {}', ['x'], policy((key, value) => (key === 'a' ? 'changed' : value)))).toBe('{"a":"changed"}');
  });

  it('keeps the size cap: text over maxValueBytes is shrunk by capture()', () => {
    const long = 'é'.repeat(200);
    const json = inputsOf('function f(text) {}', [long], policy(undefined, 256));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(256);
    expect(JSON.parse(json).text).toMatch(/…\[truncated \d+ chars\]$/);
  });

  it('never copies a string far over the cap, and keeps capture()\'s member limit', () => {
    const huge = '"'.repeat(3_000_000); // 6 MB of escaped JSON were it written whole
    const json = inputsOf('function f(a) {}', [huge], policy(undefined, 1024));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(1024);
    expect(json).toMatch(/truncated/);
    const many: unknown[] = Array.from({ length: 10_001 }, () => 1);
    many[5] = undefined;
    for (const source of ['function f(a) {}', 'function f(password) {}']) {
      const params = parseParams(source);
      expect(compileInputs(params, policy())(many)).toBe(capture(namedInputs(params, many), policy()).json);
    }
    expect(JSON.parse(compileInputs(parseParams('function f(a) {}'), policy())(many))['…']).toBe('[1 more keys]');
  });

  it('gives the object way\'s text for parameter names that could collide or are special', () => {
    for (const source of ['function f(a, a) {}', 'function f(arg1, b) {}', 'function f(__proto__, b) {}']) {
      const params = parseParams(source);
      const args = [1, 2, 3];
      expect(compileInputs(params, policy())(args)).toBe(capture(namedInputs(params, args), policy()).json);
    }
  });

  it('matches capture(namedInputs(...)).json for arbitrary parameters, arguments and policies', () => {
    const name = fc.oneof(
      fc.constantFrom('a', 'b', 'question', 'password', 'api_key', 'max_tokens', 'arg0', 'arg2', '__proto__', 'é', '$x'),
      fc.constant(null),
    );
    const param = fc.record({ name, rest: fc.boolean() });
    const params = fc.oneof(
      fc.constant(null),
      fc.array(param, { maxLength: 5 }).map((list): ParamSpec[] =>
        // Only the last parameter can be a rest parameter.
        list.map((spec, i) => ({ name: spec.rest && spec.name === null ? 'rest' : spec.name, rest: spec.rest && i === list.length - 1 })),
      ),
    );
    const arg = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.double(),
      fc.integer(),
      fc.boolean(),
      fc.constantFrom(null, undefined, -0, 2n ** 70n),
      fc.dictionary(fc.string({ maxLength: 4 }), fc.integer(), { maxKeys: 2 }),
    );
    const redact = fc.constantFrom<RedactOption | undefined>(undefined, false, ['B', 'arg1'], (key, value) =>
      key === 'a' ? 'masked' : value,
    );
    fc.assert(
      fc.property(params, fc.array(arg, { maxLength: 7 }), redact, fc.integer({ min: 64, max: 400 }), (specs, args, option, max) => {
        const over = policy(option, max);
        expect(compileInputs(specs, over)(args)).toBe(capture(namedInputs(specs, args), over).json);
      }),
      { numRuns: 2000 },
    );
  });
});
