/**
 * The text Python's `json.dumps(value, sort_keys=True)` prints for a JSON value that `json.loads`
 * read from a request body: what the hosted service hashes for a table row (`compute_row_digest`
 * in `weave/shared/digest.py`; its older servers did not sort the keys), and, keys unsorted, what
 * it stores of a feedback payload and measures for its size limit. It is computed from the
 * body's own text because a parse into JavaScript loses the number spelling: Python reads `1.0`
 * and `1e2` as floats and prints `1.0` and `100.0`, `1` as an int, and keeps integers past 2^53
 * exact; JavaScript has one number type for all of them. A repeated key takes its last value, in
 * both. Separators are `", "` and `": "`, keys sort by code point, non-ASCII is escaped
 * (`ensure_ascii`), floats print as `repr(float)`: strings and floats are written by digest.ts,
 * whose canonical form is Python's.
 */
import { canonicalJson, CanonicalJsonError, compareCodePoints, MAX_JSON_DEPTH, pythonFloatRepr } from '../wire/digest.js';

/**
 * `json.dumps(..., sort_keys=True)` of the JSON value starting at `start` in `source` (valid JSON
 * text, e.g. a body `JSON.parse` accepted); with `sortKeys: false`, `json.dumps` keeping each
 * object's keys in the order the text gives them (a repeated key where it first appears).
 *
 * @example pythonDumpsAt('{"b": 1.0, "2": "é"}', 0) // '{"2": "\\u00e9", "b": 1.0}'
 * @throws CanonicalJsonError for nesting past MAX_JSON_DEPTH or a number past the float range
 *   (`1e400`: Python would print `Infinity`, which no JSON reader takes back).
 */
export function pythonDumpsAt(source: string, start: number, { sortKeys = true }: { readonly sortKeys?: boolean } = {}): string {
  return new PythonDumper(source, start, sortKeys).value(0);
}

const INTEGER_TOKEN = /^-?[0-9]+$/;
const NUMBER_TOKEN = /-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class PythonDumper {
  constructor(
    private readonly source: string,
    private at: number,
    private readonly sortKeys: boolean,
  ) {}

  value(depth: number): string {
    this.skipWhitespace();
    const char = this.source[this.at];
    if (char === '{' || char === '[') {
      if (depth >= MAX_JSON_DEPTH) throw new CanonicalJsonError(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
      return char === '{' ? this.object(depth) : this.array(depth);
    }
    if (char === '"') return canonicalJson(this.string());
    for (const literal of ['true', 'false', 'null']) {
      if (this.source.startsWith(literal, this.at)) {
        this.at += literal.length;
        return literal;
      }
    }
    return this.number();
  }

  private object(depth: number): string {
    this.at += 1;
    // A repeated key takes its last value, as in Python's dict.
    const members = new Map<string, string>();
    this.skipWhitespace();
    if (this.source[this.at] === '}') {
      this.at += 1;
      return '{}';
    }
    for (;;) {
      this.skipWhitespace();
      const key = this.string();
      this.skipWhitespace();
      this.expect(':');
      members.set(key, this.value(depth + 1));
      if (this.endOfList('}')) break;
    }
    const keys = this.sortKeys ? [...members.keys()].sort(compareCodePoints) : [...members.keys()];
    return `{${keys.map((key) => `${canonicalJson(key)}: ${members.get(key) as string}`).join(', ')}}`;
  }

  private array(depth: number): string {
    this.at += 1;
    this.skipWhitespace();
    if (this.source[this.at] === ']') {
      this.at += 1;
      return '[]';
    }
    const items: string[] = [];
    for (;;) {
      items.push(this.value(depth + 1));
      if (this.endOfList(']')) break;
    }
    return `[${items.join(', ')}]`;
  }

  /** After a member or item: true at the closing `close`, false after a comma. */
  private endOfList(close: string): boolean {
    this.skipWhitespace();
    const char = this.source[this.at];
    this.at += 1;
    if (char === close) return true;
    if (char === ',') return false;
    throw new SyntaxError(`Malformed JSON at ${this.at - 1}`);
  }

  /** The string token at the cursor, decoded. */
  private string(): string {
    const end = endOfString(this.source, this.at);
    const token = this.source.slice(this.at, end);
    this.at = end;
    return token.includes('\\') ? (JSON.parse(token) as string) : token.slice(1, -1);
  }

  private number(): string {
    NUMBER_TOKEN.lastIndex = this.at;
    const match = NUMBER_TOKEN.exec(this.source);
    if (match === null) throw new SyntaxError(`Malformed JSON at ${this.at}`);
    const token = match[0];
    this.at += token.length;
    // An integer literal is a Python int, printed as written (exact past 2^53); JSON allows no
    // leading zeros, so only `-0` needs writing otherwise.
    if (INTEGER_TOKEN.test(token)) return token === '-0' ? '0' : token;
    const float = Number(token);
    if (!Number.isFinite(float)) throw new CanonicalJsonError(`Number out of range: ${token.slice(0, 40)}`);
    return pythonFloatRepr(float);
  }

  private expect(char: string): void {
    if (this.source[this.at] !== char) throw new SyntaxError(`Malformed JSON at ${this.at}`);
    this.at += 1;
  }

  private skipWhitespace(): void {
    this.at = skipWhitespace(this.source, this.at);
  }
}

/** The index past JSON whitespace from `at`. */
export function skipWhitespace(source: string, at: number): number {
  let index = at;
  for (;;) {
    const code = source.charCodeAt(index);
    if (code !== 0x20 && code !== 0x0a && code !== 0x0d && code !== 0x09) return index;
    index += 1;
  }
}

/** The index past the string token starting at `at` (its opening quote). */
export function endOfString(source: string, at: number): number {
  let index = at + 1;
  for (;;) {
    const code = source.charCodeAt(index);
    if (Number.isNaN(code)) throw new SyntaxError('Unterminated JSON string');
    if (code === 0x5c) index += 2;
    else if (code === 0x22) return index + 1;
    else index += 1;
  }
}

/** The index past the number or literal (`true`, `null`...) starting at `at`: the next delimiter. */
export function endOfLiteral(source: string, at: number): number {
  let index = at;
  while (index < source.length && !',}] \t\n\r'.includes(source[index] as string)) index += 1;
  return index;
}

/**
 * The index past the JSON value starting at `at` (after whitespace). Containers are skipped by
 * counting brackets outside strings, without recursion, so no nesting overflows the stack.
 */
export function endOfValue(source: string, at: number): number {
  let index = skipWhitespace(source, at);
  let open = 0;
  do {
    const code = source.charCodeAt(index);
    if (code === 0x22) {
      index = endOfString(source, index);
    } else if (code === 0x7b || code === 0x5b) {
      open += 1;
      index += 1;
    } else if (code === 0x7d || code === 0x5d) {
      open -= 1;
      index += 1;
    } else if (open > 0) {
      index += 1;
    } else {
      index = endOfLiteral(source, index);
    }
    if (Number.isNaN(code)) throw new SyntaxError('Unexpected end of JSON');
  } while (open > 0);
  return index;
}

/**
 * Where the value of member `key` of the object at `at` starts: its last occurrence, the one
 * `JSON.parse` keeps. Undefined when the value at `at` is not an object or has no such member.
 */
export function memberStart(source: string, at: number, key: string): number | undefined {
  let index = skipWhitespace(source, at);
  if (source[index] !== '{') return undefined;
  let found: number | undefined;
  index = skipWhitespace(source, index + 1);
  if (source[index] === '}') return undefined;
  for (;;) {
    index = skipWhitespace(source, index);
    const keyEnd = endOfString(source, index);
    const token = source.slice(index, keyEnd);
    const name = token.includes('\\') ? (JSON.parse(token) as string) : token.slice(1, -1);
    index = skipWhitespace(source, keyEnd) + 1; // past ':'
    const valueStart = skipWhitespace(source, index);
    if (name === key) found = valueStart;
    index = skipWhitespace(source, endOfValue(source, valueStart));
    if (source[index] !== ',') return found;
    index += 1;
  }
}

/** Where each item of the array at `at` starts; undefined when the value there is not an array. */
export function itemStarts(source: string, at: number): number[] | undefined {
  let index = skipWhitespace(source, at);
  if (source[index] !== '[') return undefined;
  const starts: number[] = [];
  index = skipWhitespace(source, index + 1);
  if (source[index] === ']') return starts;
  for (;;) {
    const itemStart = skipWhitespace(source, index);
    starts.push(itemStart);
    index = skipWhitespace(source, endOfValue(source, itemStart));
    if (source[index] !== ',') return starts;
    index += 1;
  }
}
