import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_OP_NAME_LENGTH, toCallParts, toOpName } from '../../src/mapping/index.js';
import { shortenName, toDisplayName } from '../../src/mapping/names.js';
import { createTracing, PROJECT } from './fixtures.js';

/** The rule of SPEC §3: `:` + the first 4 hex characters of SHA-256 of the full name. */
function tag(name: string): string {
  return `:${createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 4)}`;
}

describe('toOpName', () => {
  it('keeps names of up to 128 characters as they are', () => {
    expect(toOpName('chat')).toBe('chat');
    expect(toOpName('x'.repeat(128))).toBe('x'.repeat(128));
    expect(toOpName('')).toBe('');
  });

  it('cuts a name without delimiters to 123 characters plus the hash tag', () => {
    const name = 'a'.repeat(200);
    expect(toOpName(name)).toBe(`${'a'.repeat(123)}${tag(name)}`);
    expect(toOpName(name)).toHaveLength(MAX_OP_NAME_LENGTH);
  });

  it('cuts after the last whole word that fits', () => {
    // 'word' + 23 x ' word' = 119 characters; one more word would leave no room for the tag.
    const name = `word${' word'.repeat(39)}`;
    expect(toOpName(name)).toBe(`word${' word'.repeat(23)}${tag(name)}`);
  });

  it('cuts a first word longer than the limit', () => {
    const name = `${'b'.repeat(130)}.rest`;
    expect(toOpName(name)).toBe(`${'b'.repeat(123)}${tag(name)}`);
  });

  it('tells apart long names that share their first 128 characters', () => {
    const prefix = 'c'.repeat(130);
    expect(toOpName(`${prefix}1`)).not.toBe(toOpName(`${prefix}2`));
  });

  it('survives names ending in a run of delimiters and never splits a surrogate pair', () => {
    const trailing = `${'x'.repeat(120)}${'.'.repeat(20)}`;
    expect(toOpName(trailing)).toBe(`${'x'.repeat(120)}${tag(trailing)}`);
    const emoji = '😀'.repeat(200);
    const cut = toOpName(emoji);
    expect([...cut]).toHaveLength(MAX_OP_NAME_LENGTH);
    expect(cut).toBe(`${'😀'.repeat(123)}${tag(emoji)}`);
    expect(cut).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/); // no lone high surrogate
  });

  it('counts characters (code points), not UTF-16 units, as SPEC §3 and the server do', () => {
    // 91 characters, 171 UTF-16 units: within the limit.
    const robots = `model call ${'🤖'.repeat(80)}`;
    expect(toOpName(robots)).toBe(robots);
    expect(toOpName('😀'.repeat(128))).toBe('😀'.repeat(128));
    // Cut to 128 characters: 123 of the name (a lone 'a' and 122 emoji) and the tag.
    const over = `a${'😀'.repeat(200)}`;
    expect(toOpName(over)).toBe(`a${'😀'.repeat(122)}${tag(over)}`);
    // Words are counted the same way: 'x' + 40 x ' 🤖🤖' is 121 characters; one more word does not fit.
    const words = `x${' 🤖🤖'.repeat(60)}`;
    expect(toOpName(words)).toBe(`x${' 🤖🤖'.repeat(40)}${tag(words)}`);
  });

  it('is what the call gets for a long span name', () => {
    const tracing = createTracing();
    const name = `pipeline/${'stage/'.repeat(30)}final`;
    const { span } = tracing.finish({ name });
    const { start } = toCallParts(span, PROJECT);
    expect(start.op_name).toBe(`pipeline${'/stage'.repeat(19)}${tag(name)}`);
    expect(start.otel_dump?.name).toBe(name);
    return tracing.shutdown();
  });
});

describe('shortenName', () => {
  it('keeps the delimiter before the suffix when asked', () => {
    expect(shortenName('hello/world.txt', 10, '...', true)).toBe('hello/...');
    expect(shortenName('hello/world.txt', 10, '...', false)).toBe('hello...');
    expect(shortenName('verylongword', 8, '...', true)).toBe('veryl...');
    expect(shortenName('hello/world.txt', 20, '...', true)).toBe('hello/world.txt');
  });

  it('counts display names in characters: 900 of them (1200 UTF-16 units) stay whole', () => {
    const name = '日本😀'.repeat(300);
    expect(toDisplayName(name)).toBe(name);
    const long = '日本😀'.repeat(400);
    expect(toDisplayName(long)).toBe(`${'日本😀'.repeat(340)}日...`);
  });

  it('never exceeds the limit, even with a run of delimiters before the suffix', () => {
    const name = `${'w '.repeat(3)}${' '.repeat(10)}${'z'.repeat(20)}`;
    expect(shortenName(name, 16, '...', true).length).toBeLessThanOrEqual(16);
  });
});
