/**
 * Incremental `application/jsonl` reading for `calls/stream_query`: one JSON value per line,
 * yielded as the bytes arrive, so a query over many calls never holds the whole answer.
 */

/** A line of the stream that is not JSON. `line` counts from 1. */
export class JsonLinesError extends SyntaxError {
  readonly line: number;

  constructor(line: number, message: string) {
    super(`line ${line} of the JSON lines response: ${message}`);
    this.name = 'JsonLinesError';
    this.line = line;
  }
}

/**
 * Yield the JSON value of every non-blank line of `chunks`. UTF-8 characters split across chunks
 * are joined before parsing; `\r\n` line ends are accepted.
 *
 * @example
 * for await (const call of parseJsonLines(response.body)) console.log(call);
 */
export async function* parseJsonLines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<unknown, void, undefined> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let pending = '';
  let lineNumber = 0;
  const parseLine = (line: string): { value: unknown } | undefined => {
    lineNumber += 1;
    if (line.trim() === '') return undefined;
    try {
      return { value: JSON.parse(line) as unknown };
    } catch (error) {
      throw new JsonLinesError(lineNumber, (error as Error).message);
    }
  };
  const decode = (chunk?: Uint8Array): string => {
    try {
      return chunk === undefined ? decoder.decode() : decoder.decode(chunk, { stream: true });
    } catch (error) {
      throw new JsonLinesError(lineNumber + 1, (error as Error).message);
    }
  };
  for await (const chunk of chunks) {
    pending += decode(chunk);
    let start = 0;
    for (let newline = pending.indexOf('\n'); newline !== -1; newline = pending.indexOf('\n', start)) {
      const parsed = parseLine(pending.slice(start, newline));
      start = newline + 1;
      if (parsed !== undefined) yield parsed.value;
    }
    pending = pending.slice(start);
  }
  const parsed = parseLine(pending + decode());
  if (parsed !== undefined) yield parsed.value;
}
