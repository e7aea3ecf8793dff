/**
 * Reading a JSON request body straight from its bytes, guided by the route's schema: the fields
 * the schema names become ordinary values, and the free-form JSON values it holds (`{}` and
 * `Record<string, unknown>` schemas: a call's `attributes`, `inputs`, `output`, `summary`...)
 * stay as the text that arrived (`VerbatimJson`), to be stored without a parse and a stringify.
 *
 * It reads only what it can read exactly like the parsed path: a body that satisfies the schema,
 * whose free-form values are canonical (verbatim-json.ts), and that holds no key the body parser
 * would refuse. For anything else (a schema error, a duplicate field, whitespace inside a stored
 * value, a `"1.0"`...) it answers null and the body takes the parsed path, where the schema, the
 * route and the error handler give their usual answers. A body it reads therefore passes the
 * route's schema, and the route sees the same values either way, apart from the free-form ones,
 * which it hands on as VerbatimJson or as parsed values (calls-rows.ts takes both).
 *
 * Supported schemas are the subset the call routes use (objects with properties, free-form
 * objects, arrays, strings, numbers, integers, booleans, null, `anyOf` of distinct JSON types,
 * `{}`); building a reader for anything else throws, so a schema that grows a constraint cannot
 * be read past it silently.
 */
import { isAscii } from 'node:buffer';
import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  endOfCanonicalJson,
  endOfCanonicalNumber,
  endOfCanonicalString,
  NOT_CANONICAL,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  VerbatimJson,
} from './verbatim-json.js';

/** A reader for one route's bodies: the body's value, or null when the parsed path must read it. */
export type VerbatimBodyReader = (bytes: Buffer) => object | null;

/** The JSON-schema subset a reader is built from (TypeBox schemas are plain JSON schema). */
interface Schema {
  readonly type?: string;
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean;
  readonly patternProperties?: Readonly<Record<string, Schema>>;
  readonly items?: Schema;
  readonly anyOf?: readonly Schema[];
}

/**
 * Build the reader for bodies of `schema` (an object schema).
 *
 * @example
 * const read = createVerbatimBodyReader(CallUpsertBatchReqSchema);
 * read(Buffer.from('{"batch":[]}')); // { batch: [] }
 * read(Buffer.from('{"batch": 1}')); // null: the schema's 422 comes from the parsed path
 */
export function createVerbatimBodyReader(schema: object): VerbatimBodyReader {
  const root = schema as Schema;
  if (root.type !== 'object' || root.properties === undefined) {
    throw new TypeError('createVerbatimBodyReader: the body schema must be an object with properties');
  }
  const readRoot = compile(root, 'body');
  return (bytes) => {
    const cursor = new Cursor(bytes);
    try {
      const value = readRoot(cursor);
      cursor.skipWhitespace();
      if (cursor.at !== bytes.length) return null;
      return value as object;
    } catch (error) {
      if (error === TAKE_PARSED_PATH) return null;
      throw error;
    }
  };
}

/** Thrown (and caught above) wherever the bytes leave what this reader reads exactly. */
const TAKE_PARSED_PATH = new Error('not read verbatim');

type ValueReader = (cursor: Cursor) => unknown;

/** JSON types by the first byte of a value. */
type JsonType = 'string' | 'number' | 'boolean' | 'null' | 'object' | 'array';

/** Keywords a schema may carry; any other (a pattern, a length, a const...) is refused. */
const KNOWN_KEYWORDS = new Set(['type', 'properties', 'required', 'additionalProperties', 'patternProperties', 'items', 'anyOf']);

function compile(schema: Schema, where: string): ValueReader {
  for (const keyword of Object.keys(schema)) {
    if (!KNOWN_KEYWORDS.has(keyword)) throw new TypeError(`createVerbatimBodyReader: unsupported keyword "${keyword}" at ${where}`);
  }
  if (schema.anyOf !== undefined) return compileUnion(schema.anyOf, where);
  switch (schema.type) {
    case undefined:
      // Only `{}` takes any value; `properties` and the like without a type are not read here.
      if (Object.keys(schema).length > 0) throw new TypeError(`createVerbatimBodyReader: keywords without a type at ${where}`);
      return readAnyVerbatim;
    case 'object':
      return isFreeForm(schema) ? readObjectVerbatim : compileObject(schema, where);
    case 'array':
      if (schema.items === undefined) throw new TypeError(`createVerbatimBodyReader: array without items at ${where}`);
      return compileArray(compile(schema.items, `${where}[]`));
    case 'string':
      return readString;
    case 'number':
      return readNumber;
    case 'integer':
      return readInteger;
    case 'boolean':
      return readBoolean;
    case 'null':
      return readNull;
    default:
      throw new TypeError(`createVerbatimBodyReader: unsupported type "${schema.type}" at ${where}`);
  }
}

/** `Record<string, unknown>` (`patternProperties: {"^.*$": {}}`) or a bare `{type: "object"}`. */
function isFreeForm(schema: Schema): boolean {
  if (schema.properties !== undefined) return false;
  const patterns = schema.patternProperties;
  if (patterns === undefined) return true;
  const entries = Object.entries(patterns);
  return entries.length === 1 && entries[0]?.[0] === '^.*$' && Object.keys(entries[0][1]).length === 0;
}

/** A field an object schema names, matched by the bytes of its key token. */
interface NamedField {
  readonly name: string;
  /** The key as it appears in a body: `"name"` (field names need no escapes). */
  readonly token: Buffer;
  /** This field's bit in the masks of fields seen and required. */
  readonly bit: number;
  readonly read: ValueReader;
}

/** Fields one object schema may name: one bit each in a 32-bit mask. */
const MAX_NAMED_FIELDS = 31;

function compileObject(schema: Schema, where: string): ValueReader {
  if (schema.patternProperties !== undefined) throw new TypeError(`createVerbatimBodyReader: patternProperties beside properties at ${where}`);
  const entries = Object.entries(schema.properties ?? {});
  if (entries.length > MAX_NAMED_FIELDS) throw new TypeError(`createVerbatimBodyReader: more than ${MAX_NAMED_FIELDS} properties at ${where}`);
  const fields = entries.map(([name, property], index): NamedField => {
    const token = Buffer.from(JSON.stringify(name), 'utf8');
    if (token.length !== name.length + 2) throw new TypeError(`createVerbatimBodyReader: property name ${token.toString()} needs escapes at ${where}`);
    return { name, token, bit: 1 << index, read: compile(property, `${where}.${name}`) };
  });
  // Keys are looked up by their token's length, then compared byte by byte: no key is decoded.
  const byTokenLength: NamedField[][] = [];
  for (const field of fields) (byTokenLength[field.token.length] ??= []).push(field);
  const required = fields.filter((field) => schema.required?.includes(field.name)).reduce((mask, field) => mask | field.bit, 0);
  const closed = schema.additionalProperties === false;
  return (cursor) => {
    const object: Record<string, unknown> = {};
    let seen = 0;
    cursor.open(OPEN_BRACE);
    if (!cursor.closes(CLOSE_BRACE)) {
      do {
        const field = cursor.readKey(byTokenLength);
        if (field === null) {
          // Fields the schema leaves open are not the route's business: checked, not kept.
          if (closed) throw TAKE_PARSED_PATH;
          cursor.skipCanonicalValue();
        } else {
          // A repeated field: JSON.parse keeps the last, which this reader does not try to match.
          if ((seen & field.bit) !== 0) throw TAKE_PARSED_PATH;
          seen |= field.bit;
          object[field.name] = field.read(cursor);
        }
      } while (cursor.continues(CLOSE_BRACE));
    }
    if ((seen & required) !== required) throw TAKE_PARSED_PATH;
    return object;
  };
}

function compileArray(readItem: ValueReader): ValueReader {
  return (cursor) => {
    const items: unknown[] = [];
    cursor.open(OPEN_BRACKET);
    if (!cursor.closes(CLOSE_BRACKET)) {
      do items.push(readItem(cursor));
      while (cursor.continues(CLOSE_BRACKET));
    }
    return items;
  };
}

/** `anyOf` whose branches take distinct JSON types: the value's first byte picks the branch. */
function compileUnion(branches: readonly Schema[], where: string): ValueReader {
  const byType = new Map<JsonType, ValueReader>();
  for (const [index, branch] of branches.entries()) {
    const types: JsonType[] =
      branch.type === 'integer' ? ['number'] : branch.type !== undefined ? [branch.type as JsonType] : [];
    if (types.length === 0 || branch.anyOf !== undefined) throw new TypeError(`createVerbatimBodyReader: unsupported anyOf branch at ${where}`);
    for (const type of types) {
      if (byType.has(type)) throw new TypeError(`createVerbatimBodyReader: two anyOf branches take ${type} at ${where}`);
      byType.set(type, compile(branch, `${where}|${index}`));
    }
  }
  return (cursor) => {
    const read = byType.get(cursor.peekType());
    if (read === undefined) throw TAKE_PARSED_PATH;
    return read(cursor);
  };
}

/** Any JSON value (`{}`): null as null (as parsed), anything else as its verbatim text. */
function readAnyVerbatim(cursor: Cursor): unknown {
  return cursor.peekType() === 'null' ? readNull(cursor) : cursor.readVerbatim();
}

function readObjectVerbatim(cursor: Cursor): unknown {
  if (cursor.peekType() !== 'object') throw TAKE_PARSED_PATH;
  return cursor.readVerbatim();
}

function readString(cursor: Cursor): string {
  if (cursor.peekType() !== 'string') throw TAKE_PARSED_PATH;
  return cursor.readString();
}

function readNumber(cursor: Cursor): number {
  if (cursor.peekType() !== 'number') throw TAKE_PARSED_PATH;
  return cursor.readNumber();
}

function readInteger(cursor: Cursor): number {
  const value = readNumber(cursor);
  if (!Number.isInteger(value)) throw TAKE_PARSED_PATH;
  return value;
}

function readBoolean(cursor: Cursor): boolean {
  cursor.skipWhitespace();
  if (cursor.skipLiteral('true')) return true;
  if (cursor.skipLiteral('false')) return false;
  throw TAKE_PARSED_PATH;
}

function readNull(cursor: Cursor): null {
  cursor.skipWhitespace();
  if (!cursor.skipLiteral('null')) throw TAKE_PARSED_PATH;
  return null;
}

/**
 * Keys left to the parsed path, which keeps them as own properties: rare in calls, and no object
 * this reader builds can then be handed a key that would set its prototype.
 */
const POISONING_KEYS = ['"__proto__"', '"constructor"'].map((token) => Buffer.from(token));

/** JSON's insignificant whitespace: space, tab, line feed, carriage return. */
const WHITESPACE = new Uint8Array(256);
for (const char of ' \t\n\r') WHITESPACE[char.charCodeAt(0)] = 1;

/** The JSON type of a value by its first byte (anything else: the value is not JSON). */
const TYPE_BY_FIRST_BYTE = new Map<number, JsonType>([
  [QUOTE, 'string'],
  [OPEN_BRACE, 'object'],
  [OPEN_BRACKET, 'array'],
  [0x74, 'boolean'],
  [0x66, 'boolean'],
  [0x6e, 'null'],
  [0x2d, 'number'],
  ...Array.from({ length: 10 }, (_, digit): [number, JsonType] => [0x30 + digit, 'number']),
]);

/** A position in the body, with the token readers the schema readers use. */
class Cursor {
  at = 0;
  /** ASCII bodies are decoded byte for byte (~4x faster than UTF-8 decoding, same text). */
  readonly #encoding: 'latin1' | 'utf8';

  constructor(readonly bytes: Buffer) {
    this.#encoding = isAscii(bytes) ? 'latin1' : 'utf8';
  }

  skipWhitespace(): void {
    while (WHITESPACE[this.bytes[this.at] as number] === 1) this.at++;
  }

  peekType(): JsonType {
    this.skipWhitespace();
    const type = TYPE_BY_FIRST_BYTE.get(this.bytes[this.at] as number);
    if (type === undefined) throw TAKE_PARSED_PATH;
    return type;
  }

  /** Step over `open` (`{` or `[`). */
  open(open: number): void {
    this.skipWhitespace();
    if (this.bytes[this.at] !== open) throw TAKE_PARSED_PATH;
    this.at++;
  }

  /** Step over `close` if it comes next (an empty container). */
  closes(close: number): boolean {
    this.skipWhitespace();
    if (this.bytes[this.at] !== close) return false;
    this.at++;
    return true;
  }

  /** After a member: true past a comma (another follows), false past `close`. */
  continues(close: number): boolean {
    this.skipWhitespace();
    const byte = this.bytes[this.at];
    this.at++;
    if (byte === COMMA) return true;
    if (byte === close) return false;
    throw TAKE_PARSED_PATH;
  }

  /**
   * A member's key and the colon after it: the named field it is, or null for another key.
   * `__proto__` and `constructor` are left to the parsed path (their tokens need no escapes).
   */
  readKey(fieldsByTokenLength: ReadonlyArray<readonly NamedField[] | undefined>): NamedField | null {
    this.skipWhitespace();
    const start = this.at;
    if (this.bytes[start] !== QUOTE) throw TAKE_PARSED_PATH;
    const end = this.#endOf(endOfCanonicalString(this.bytes, start));
    const field = this.#fieldAt(start, fieldsByTokenLength[end - start]);
    if (field === null && this.#isPoisoningKeyAt(start, end)) throw TAKE_PARSED_PATH;
    this.skipWhitespace();
    if (this.bytes[this.at] !== COLON) throw TAKE_PARSED_PATH;
    this.at++;
    return field;
  }

  readString(): string {
    const start = this.at;
    const end = this.#endOf(endOfCanonicalString(this.bytes, start));
    const raw = this.bytes.toString(this.#encoding, start + 1, end - 1);
    // Escapes are rare in the fields a schema names (ids, names, times): decode those the slow way.
    return raw.includes('\\') ? (JSON.parse(this.bytes.toString(this.#encoding, start, end)) as string) : raw;
  }

  readNumber(): number {
    const start = this.at;
    const end = this.#endOf(endOfCanonicalNumber(this.bytes, start));
    return Number(this.bytes.toString('latin1', start, end));
  }

  skipLiteral(literal: string): boolean {
    for (let i = 0; i < literal.length; i++) {
      if (this.bytes[this.at + i] !== literal.charCodeAt(i)) return false;
    }
    this.at += literal.length;
    return true;
  }

  skipCanonicalValue(): void {
    this.skipWhitespace();
    this.#endOf(endOfCanonicalJson(this.bytes, this.at));
  }

  readVerbatim(): VerbatimJson {
    this.skipWhitespace();
    const start = this.at;
    const end = this.#endOf(endOfCanonicalJson(this.bytes, start));
    return new VerbatimJson(this.bytes.toString(this.#encoding, start, end));
  }

  #fieldAt(start: number, candidates: readonly NamedField[] | undefined): NamedField | null {
    if (candidates === undefined) return null;
    for (const candidate of candidates) if (this.#holdsAt(start, candidate.token)) return candidate;
    return null;
  }

  #isPoisoningKeyAt(start: number, end: number): boolean {
    for (const token of POISONING_KEYS) if (token.length === end - start && this.#holdsAt(start, token)) return true;
    return false;
  }

  /** Whether the body holds `token` at `start`. */
  #holdsAt(start: number, token: Uint8Array): boolean {
    for (let i = 0; i < token.length; i++) if (this.bytes[start + i] !== token[i]) return false;
    return true;
  }

  /** Move to `end` (a scan's answer), or leave for the parsed path. */
  #endOf(end: number): number {
    if (end === NOT_CANONICAL) throw TAKE_PARSED_PATH;
    this.at = end;
    return end;
  }
}
