import { describe, expect, it } from 'vitest';
import { namedInputs, parseParams, readParams } from '../../src/trace/params.js';

const names = (source: string) => parseParams(source)?.map((spec) => (spec.rest ? `...${spec.name}` : spec.name));

describe('parseParams', () => {
  it('reads plain, async, generator and arrow functions', () => {
    expect(names('function f(a, b) { return a + b }')).toEqual(['a', 'b']);
    expect(names('async function f(question) {}')).toEqual(['question']);
    expect(names('function* gen(n) {}')).toEqual(['n']);
    expect(names('async function* stream(prompt, opts) {}')).toEqual(['prompt', 'opts']);
    expect(names('(a, b) => a')).toEqual(['a', 'b']);
    expect(names('x => x')).toEqual(['x']);
    expect(names('async x => x')).toEqual(['x']);
    expect(names('async (x, y) => x')).toEqual(['x', 'y']);
    expect(names('async => 1')).toEqual(['async']);
    expect(names('() => 1')).toEqual([]);
    expect(names('function () {}')).toEqual([]);
  });

  it('reads methods, including computed, quoted, private, accessor and generator forms', () => {
    expect(names('plan(goal, budget) {}')).toEqual(['goal', 'budget']);
    expect(names('async plan(goal) {}')).toEqual(['goal']);
    expect(names('*items(limit) {}')).toEqual(['limit']);
    expect(names('async *[Symbol.asyncIterator](signal) {}')).toEqual(['signal']);
    expect(names("['odd(name'](a) {}")).toEqual(['a']);
    expect(names("'quoted, name'(a, b) {}")).toEqual(['a', 'b']);
    expect(names('#secret(a) {}')).toEqual(['a']);
    expect(names('set value(v) {}')).toEqual(['v']);
  });

  it('handles defaults with nested brackets, strings, templates and arrows', () => {
    expect(names('function f(a = g(1, 2), b = "x,y)", c = `t${h(1, 2)},`, d = (u, v) => u, e = { k: [1, 2] }) {}')).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
    ]);
    expect(names("function f(a = '\\'', b) {}")).toEqual(['a', 'b']);
  });

  it('skips regular expressions in defaults, and tells them from divisions', () => {
    expect(names('function split(sep = /,/, text, limit) {}')).toEqual(['sep', 'text', 'limit']);
    expect(names('function f(a = /[/,)]\\//gu, b = [/,/], c) {}')).toEqual(['a', 'b', 'c']);
    expect(names('function f(half = total / 2, b = (x) / 2, c) {}')).toEqual(['half', 'b', 'c']);
    expect(names('(a = !/,/.test(s), b) => a')).toEqual(['a', 'b']);
    // After a keyword a / begins a regular expression; a wrong guess (no closing / on the line)
    // reads the / as code, as before there was any guessing.
    expect(names('function f(ok = (s) => { return /a+/.test(s) }, b) {}')).toEqual(['ok', 'b']);
    expect(names('function f(i, n = i++ / 2, m) {}')).toEqual(['i', 'n', 'm']);
    expect(names('class Parser { static isNumber(s) { return /\\d+/.test(s); } constructor(text, options) {} }')).toEqual(['text', 'options']);
    expect(names('class A { x = typeof /a?/; constructor(p, q) {} }')).toEqual(['p', 'q']);
    expect(names('class B { m(s) { return/\\d+/.test(s) } constructor(p) {} }')).toEqual(['p']);
  });

  it('marks destructured parameters as unnamed and reads rest parameters', () => {
    expect(names('function f({ a, b }, [c, d], ...rest) {}')).toEqual([null, null, '...rest']);
    expect(names('function f(a, ...[b, c]) {}')).toEqual(['a', '...null']);
    expect(names('({ a } = {}, b) => 1')).toEqual([null, 'b']);
  });

  it('skips comments anywhere in the list, and trailing commas', () => {
    expect(names('function f(/* first */ a, // line (with paren\n b /* , c */,) {}')).toEqual(['a', 'b']);
    expect(names('function /* (x) */ f(a) {}')).toEqual(['a']);
  });

  it('reads class constructors, not other methods', () => {
    expect(names('class A { method(x) {} constructor(a, b) { this.s = "constructor(z)" } }')).toEqual(['a', 'b']);
    expect(names('class A extends (mix({ constructor(q) {} })) { constructor(a) {} }')).toEqual(['a']);
    expect(parseParams('class A { method(x) {} }')).toBeNull();
  });

  it('gives up (null) on native code and on garbage, without throwing', () => {
    expect(parseParams('function push() { [native code] }')).toBeNull();
    // parseParams throws on unreadable text; readParams (what trace() uses) turns that into null.
    expect(() => parseParams('function f(a, "unterminated')).toThrow(SyntaxError);
    expect(readParams(Math.max)).toBeNull();
    expect(readParams(function (this: unknown, a: number) {}.bind(null))).toBeNull();
  });

  it('readParams reads real functions, including compiled TypeScript', () => {
    expect(readParams(function f(a: number, b = 2) {})?.map((spec) => spec.name)).toEqual(['a', 'b']);
    class Agent {
      constructor(readonly model: string) {}
      async plan(goal: string, ...steps: string[]) {
        return [goal, ...steps, this.model];
      }
    }
    expect(readParams(Agent.prototype.plan)).toEqual([
      { name: 'goal', rest: false },
      { name: 'steps', rest: true },
    ]);
    expect(readParams(Agent)?.map((spec) => spec.name)).toEqual(['model']);
  });

  it('readParams caches per function', () => {
    const fn = (a: number) => a;
    expect(readParams(fn)).toBe(readParams(fn));
  });
});

describe('namedInputs', () => {
  it('maps arguments to names, rest to a list, unnamed and extra to arg<index>', () => {
    const params = parseParams('function f(a, { b }, ...rest) {}');
    expect(namedInputs(params, [1, { b: 2 }, 3, 4])).toEqual({ a: 1, arg1: { b: 2 }, rest: [3, 4] });
    expect(namedInputs(parseParams('function f(a) {}'), [1, 2])).toEqual({ a: 1, arg1: 2 });
    expect(namedInputs(parseParams('function f(a, b) {}'), [1])).toEqual({ a: 1 });
    expect(namedInputs(null, ['x', 'y'])).toEqual({ arg0: 'x', arg1: 'y' });
  });
});
