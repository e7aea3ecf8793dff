import { describe, expect, it, vi } from 'vitest';
import { JsonLinesError, parseJsonLines } from '../../src/client/jsonl.js';

async function collect(chunks: Array<string | Uint8Array>): Promise<unknown[]> {
  async function* source(): AsyncGenerator<Uint8Array> {
    for (const chunk of chunks) yield typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk;
  }
  const values: unknown[] = [];
  for await (const value of parseJsonLines(source())) values.push(value);
  return values;
}

describe('parseJsonLines', () => {
  it('yields one value per line, across chunk boundaries', async () => {
    expect(await collect(['{"a":1}\n{"b"', ':2}\n', '{"c":3}\n'])).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
  });

  it('accepts a last line without newline, CRLF endings and blank lines', async () => {
    expect(await collect(['1\r\n\n  \n2\r\n3'])).toEqual([1, 2, 3]);
  });

  it('an empty stream yields nothing', async () => {
    expect(await collect([])).toEqual([]);
    expect(await collect(['\n\n'])).toEqual([]);
  });

  it('joins a UTF-8 character split between chunks', async () => {
    const bytes = new TextEncoder().encode('{"s":"😀é"}\n');
    const parts = [bytes.subarray(0, 8), bytes.subarray(8, 9), bytes.subarray(9)];
    expect(await collect(parts)).toEqual([{ s: '😀é' }]);
  });

  it('a long line in many small chunks: read correctly, each character searched for a newline once', async () => {
    const long = { text: 'é😀x'.repeat(50_000), list: Array.from({ length: 2000 }, (_v, index) => index) };
    const text = `${JSON.stringify({ first: true })}\n${JSON.stringify(long)}\n${JSON.stringify({ last: true })}`;
    const bytes = new TextEncoder().encode(text);
    // 97-byte chunks: multi-byte characters land across chunk boundaries all along the line.
    const chunks: Uint8Array[] = [];
    for (let offset = 0; offset < bytes.length; offset += 97) chunks.push(bytes.subarray(offset, offset + 97));
    // Characters scanned by newline searches (what a search that restarts at the line's start
    // each chunk makes quadratic: here about 2500 chunks into a line of 400 k characters).
    let scanned = 0;
    const indexOf = String.prototype.indexOf;
    const spy = vi.spyOn(String.prototype, 'indexOf').mockImplementation(function (this: string, search: string, from?: number) {
      if (search === '\n') scanned += this.length - (from ?? 0);
      return indexOf.call(this, search, from);
    });
    let values: unknown[];
    try {
      values = await collect(chunks);
    } finally {
      spy.mockRestore();
    }
    expect(values).toEqual([{ first: true }, long, { last: true }]);
    expect(scanned).toBeLessThanOrEqual(text.length * 2);
  });

  it('many lines in one chunk', async () => {
    const text = Array.from({ length: 5000 }, (_v, index) => JSON.stringify({ index })).join('\n');
    const values = await collect([text]);
    expect(values).toHaveLength(5000);
    expect(values[4999]).toEqual({ index: 4999 });
  });

  it('a line that is not JSON throws a JsonLinesError naming the line, after the good lines', async () => {
    const seen: unknown[] = [];
    async function* source(): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode('1\n\n{nope}\n3\n');
    }
    const error = await (async () => {
      for await (const value of parseJsonLines(source())) seen.push(value);
    })().catch((caught: unknown) => caught);
    expect(seen).toEqual([1]);
    expect(error).toBeInstanceOf(JsonLinesError);
    expect((error as JsonLinesError).line).toBe(3);
  });

  it('bytes that are not UTF-8 throw a JsonLinesError', async () => {
    await expect(collect([Uint8Array.of(0x22, 0xff, 0xfe, 0x22, 0x0a)])).rejects.toBeInstanceOf(JsonLinesError);
  });

  it('a truncated last line throws', async () => {
    await expect(collect(['{"a":1}\n{"b":'])).rejects.toBeInstanceOf(JsonLinesError);
  });
});
