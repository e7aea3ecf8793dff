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
  // The line being read, in the pieces it arrived in. Only new text is searched for '\n' and the
  // pieces are joined once per line: searching and extending one growing string instead made a
  // line that arrives in many chunks cost time quadratic in its length.
  let pieces: string[] = [];
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
  const takeLine = (lastPiece: string): string => {
    if (pieces.length === 0) return lastPiece;
    pieces.push(lastPiece);
    const line = pieces.join('');
    pieces = [];
    return line;
  };
  for await (const chunk of chunks) {
    const text = decode(chunk);
    let start = 0;
    for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', start)) {
      const parsed = parseLine(takeLine(text.slice(start, newline)));
      start = newline + 1;
      if (parsed !== undefined) yield parsed.value;
    }
    if (start < text.length) pieces.push(start === 0 ? text : text.slice(start));
  }
  const parsed = parseLine(takeLine(decode()));
  if (parsed !== undefined) yield parsed.value;
}
