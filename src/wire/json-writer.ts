/**
 * JSON written straight into UTF-8 bytes, for request bodies built on the hot path (SPEC §4.2:
 * JSON built once per batch). The text is what `JSON.stringify` gives for the same JSON value;
 * what differs is the cost.
 *
 * Why not `JSON.stringify`: V8 11 (Node 20) stringifies at about 3 ns per byte here, and its
 * result is a string that must then be measured (`Buffer.byteLength`) and encoded into the body:
 * for the ~2 KB of call items one benchmark span makes, 9.3 µs in all (Node 20, this project's
 * 2-core VM). This writer does the three at once, and lets callers skip work `JSON.stringify`
 * cannot skip: text that is already JSON is copied as it is ({@link JsonWriter.jsonText}), a
 * shared part is encoded once and copied after that ({@link JsonWriter.constant}), and ids and
 * timestamps known to need no escaping are copied without the escape check
 * ({@link JsonWriter.ascii}). Measured on the same spans: 5.7 µs. Why not building the text with
 * `+`: the ropes cost more to build and flatten than `JSON.stringify` costs (8.8 µs).
 *
 * Records and slabs: a caller writes one record (a span's items) between {@link JsonWriter.begin}
 * and {@link JsonWriter.end}, which returns the record's bytes as a view into the current slab:
 * no copy. Slabs are never reused, so a view stays valid for as long as it is held; a slab is
 * freed by the garbage collector once no view into it is left.
 */

/** Bytes per slab: room for ~128 spans of a typical LLM instrumentation (~2 KB each). */
const SLAB_BYTES = 256 * 1024;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;

// What JSON.stringify writes for the characters it escapes with a short form.
const SHORT_ESCAPES: Readonly<Record<number, number>> = { 0x08: 0x62, 0x09: 0x74, 0x0a: 0x6e, 0x0c: 0x66, 0x0d: 0x72 };
const HEX_DIGITS = '0123456789abcdef';

/**
 * Shortest string {@link JsonWriter.value} looks up among the values already written: below it,
 * writing is about as cheap as comparing.
 */
export const MIN_REPEATED_STRING = 24;

/** Deeper than any value the mapping makes; stops a cyclic hand-built value from exhausting the stack. */
const MAX_DEPTH = 512;

/** Byte form of `"key":`, per key: spans of one instrumentation repeat the same keys. */
const KEY_CACHE_LIMIT = 4096;
const keyBytes = new Map<string, Uint8Array>();

/**
 * Writes JSON values as UTF-8 into slabs; see the module comment.
 *
 * @example
 * const out = new JsonWriter();
 * out.begin();
 * out.value({ a: [1, 'é'] });
 * Buffer.from(out.end()).toString(); // '{"a":[1,"é"]}'
 */
export class JsonWriter {
  #bytes: Buffer = Buffer.allocUnsafeSlow(0);
  #length = 0;
  #recordStart = 0;

  /** Starts a record at the current position. */
  begin(): void {
    this.#recordStart = this.#length;
  }

  /**
   * The bytes written since {@link begin}, as a view into the slab (valid for as long as it is
   * held). The next record starts after them.
   */
  end(): Uint8Array {
    const record = this.#bytes.subarray(this.#recordStart, this.#length);
    this.#recordStart = this.#length;
    return record;
  }

  /** Forgets what was written since {@link begin} (a record that failed half way). */
  discard(): void {
    this.rewind(0);
  }

  /** Forgets what was written since `position` of this record (see {@link recordLength}). */
  rewind(position: number): void {
    this.#length = this.#recordStart + position;
  }

  /** Bytes written since {@link begin}: a position in the record, for {@link repeat}. */
  get recordLength(): number {
    return this.#length - this.#recordStart;
  }

  /**
   * Copies bytes already written in this record (positions from {@link recordLength}) to its end:
   * a value the record holds twice is written once.
   */
  repeat(from: number, to: number): void {
    const count = to - from;
    this.#reserve(count);
    // After #reserve: the record may have moved to a new slab; positions are record-relative.
    const start = this.#recordStart;
    this.#bytes.copyWithin(this.#length, start + from, start + to);
    this.#length += count;
  }

  /** Pre-encoded bytes, copied as they are (see {@link encodeConstant}). */
  constant(bytes: Uint8Array): void {
    const count = bytes.length;
    this.#reserve(count);
    const out = this.#bytes;
    let at = this.#length;
    if (count > 32) {
      out.set(bytes, at);
      at += count;
    } else {
      for (let i = 0; i < count; i++) out[at++] = bytes[i]!;
    }
    this.#length = at;
  }

  /** One byte of punctuation (`,`, `:`, brackets). */
  byte(code: number): void {
    this.#reserve(1);
    this.#bytes[this.#length++] = code;
  }

  /** An object member's name and its colon: `"name":` (the bytes cached per name). */
  key(name: string): void {
    this.constant(keyBytesOf(name));
  }

  /** A comma between array items or object members. */
  comma(): void {
    this.byte(COMMA);
  }

  /**
   * Text the caller knows to be printable ASCII with nothing JSON escapes (hex ids, timestamps,
   * number text), copied without the escape check. Not checked: the caller's promise.
   */
  ascii(text: string): void {
    const count = text.length;
    this.#reserve(count);
    const out = this.#bytes;
    let at = this.#length;
    for (let i = 0; i < count; i++) out[at++] = text.charCodeAt(i);
    this.#length = at;
  }

  /** {@link ascii} in double quotes: a JSON string of text that needs no escaping (a timestamp). */
  quotedAscii(text: string): void {
    this.byte(QUOTE);
    this.ascii(text);
    this.byte(QUOTE);
  }

  /** Text that is already JSON (a whole value), copied as it is. Not checked: the caller's promise. */
  jsonText(text: string): void {
    this.#reserve(3 * text.length);
    this.#length += this.#bytes.write(text, this.#length, 'utf8');
  }

  /** A JSON string: the same text as `JSON.stringify(text)`, lone surrogates escaped as `\udxxx`. */
  string(text: string): void {
    const count = text.length;
    // UTF-8 takes at most 3 bytes per UTF-16 unit (4 per surrogate pair); escapes reserve their own.
    this.#reserve(3 * count + 2);
    let out = this.#bytes;
    let at = this.#length;
    out[at++] = QUOTE;
    for (let i = 0; i < count; i++) {
      const code = text.charCodeAt(i);
      if (code >= 0x20 && code < 0x80 && code !== QUOTE && code !== BACKSLASH) {
        out[at++] = code;
        continue;
      }
      this.#length = at;
      i = this.#special(text, i, code);
      // An escape can take 6 bytes for one unit: restore room for the rest at 3 bytes a unit.
      this.#reserve(3 * (count - 1 - i) + 1);
      out = this.#bytes;
      at = this.#length;
    }
    out[at++] = QUOTE;
    this.#length = at;
  }

  /** A number: its JSON text, `null` when not finite (as `JSON.stringify`). */
  number(value: number): void {
    this.ascii(Number.isFinite(value) ? String(value) : 'null');
  }

  /**
   * Any value, as `JSON.stringify(value)` writes it (for `undefined`, a function or a symbol,
   * which `JSON.stringify` writes nothing for, `null`). Throws what `JSON.stringify` throws:
   * `TypeError` for a bigint or a cycle.
   *
   * `written` lists values this record already holds, and where: an object listed there (by
   * identity), or a string of at least {@link MIN_REPEATED_STRING} characters equal to one
   * listed, is copied from there.
   */
  value(value: unknown, written?: WrittenValues): void {
    this.#value(value, written, 0);
  }

  #value(value: unknown, written: WrittenValues | undefined, depth: number): void {
    switch (typeof value) {
      case 'string':
        if (written !== undefined && value.length >= MIN_REPEATED_STRING && this.copyIfWritten(value, written)) return;
        this.string(value);
        return;
      case 'number':
        this.number(value);
        return;
      case 'boolean':
        this.ascii(value ? 'true' : 'false');
        return;
      case 'object':
        if (value === null) {
          this.ascii('null');
          return;
        }
        if (written !== undefined && this.copyIfWritten(value, written)) return;
        if (depth >= MAX_DEPTH) throw new TypeError('value is nested too deeply (or cyclic) for JSON');
        if (Array.isArray(value)) {
          this.#array(value, written, depth);
          return;
        }
        if (isPlainData(value)) {
          this.#object(value as Record<string, unknown>, written, depth);
          return;
        }
        this.#stringified(value);
        return;
      case 'bigint':
        throw new TypeError('Do not know how to serialize a BigInt');
      default:
        this.ascii('null');
    }
  }

  /** Copies `value` from where `written` says this record holds it; false when it is not listed. */
  copyIfWritten(value: unknown, written: WrittenValues): boolean {
    const at = written.find(value);
    if (at < 0) return false;
    this.repeat(written.fromAt(at), written.toAt(at));
    return true;
  }

  #array(array: readonly unknown[], written: WrittenValues | undefined, depth: number): void {
    this.byte(0x5b);
    for (let i = 0; i < array.length; i++) {
      if (i > 0) this.byte(COMMA);
      this.#value(array[i], written, depth + 1);
    }
    this.byte(0x5d);
  }

  #object(object: Record<string, unknown>, written: WrittenValues | undefined, depth: number): void {
    this.byte(0x7b);
    let first = true;
    for (const key in object) {
      // JSON.stringify writes own enumerable keys only (for-in also lists inherited ones).
      if (!Object.hasOwn(object, key)) continue;
      const member = object[key];
      if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
      if (!first) this.byte(COMMA);
      first = false;
      this.key(key);
      this.#value(member, written, depth + 1);
    }
    this.byte(0x7d);
  }

  /** Anything else (a Date, a class instance, an object with `toJSON`): whatever JSON.stringify makes of it. */
  #stringified(value: object): void {
    const text = JSON.stringify(value) as string | undefined;
    if (text === undefined) this.ascii('null');
    else this.jsonText(text);
  }

  /**
   * Writes the character at `index` that the fast loop left: an escape, a multi-byte UTF-8
   * sequence, or a surrogate pair. Returns the index of the last UTF-16 unit consumed.
   */
  #special(text: string, index: number, code: number): number {
    if (code < 0x20 || code === QUOTE || code === BACKSLASH) {
      const short = code === QUOTE || code === BACKSLASH ? code : SHORT_ESCAPES[code];
      if (short !== undefined) {
        this.#reserve(2);
        this.#bytes[this.#length++] = BACKSLASH;
        this.#bytes[this.#length++] = short;
      } else {
        this.#unicodeEscape(code);
      }
      return index;
    }
    if (code < 0x800) {
      this.#put(0xc0 | (code >> 6));
      this.#put(0x80 | (code & 0x3f));
      return index;
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      const next = text.charCodeAt(index + 1);
      if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        const point = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00);
        this.#put(0xf0 | (point >> 18));
        this.#put(0x80 | ((point >> 12) & 0x3f));
        this.#put(0x80 | ((point >> 6) & 0x3f));
        this.#put(0x80 | (point & 0x3f));
        return index + 1;
      }
      // A lone surrogate has no UTF-8 form: well-formed JSON.stringify escapes it.
      this.#unicodeEscape(code);
      return index;
    }
    this.#put(0xe0 | (code >> 12));
    this.#put(0x80 | ((code >> 6) & 0x3f));
    this.#put(0x80 | (code & 0x3f));
    return index;
  }

  /** One byte of a UTF-8 sequence; room was reserved by `string()`. */
  #put(byte: number): void {
    this.#bytes[this.#length++] = byte;
  }

  #unicodeEscape(code: number): void {
    this.#reserve(6);
    this.ascii(
      `\\u${HEX_DIGITS[(code >> 12) & 15]}${HEX_DIGITS[(code >> 8) & 15]}${HEX_DIGITS[(code >> 4) & 15]}${HEX_DIGITS[code & 15]}`,
    );
  }

  /**
   * Makes room for `count` more bytes. When the slab is full the record in progress moves to a new
   * slab (views of earlier records keep the old one alive until they are dropped).
   */
  #reserve(count: number): void {
    if (this.#length + count <= this.#bytes.length) return;
    const inProgress = this.#length - this.#recordStart;
    const size = Math.max(SLAB_BYTES, 2 * (inProgress + count));
    const slab = Buffer.allocUnsafeSlow(size);
    this.#bytes.copy(slab, 0, this.#recordStart, this.#length);
    this.#bytes = slab;
    this.#recordStart = 0;
    this.#length = inProgress;
  }
}

/** UTF-8 bytes of a fixed piece of JSON text, for {@link JsonWriter.constant}. */
export function encodeConstant(text: string): Uint8Array {
  return Buffer.from(text, 'utf8');
}

/** `"key":` as bytes, from a bounded cache. */
function keyBytesOf(key: string): Uint8Array {
  let bytes = keyBytes.get(key);
  if (bytes === undefined) {
    bytes = Buffer.from(`${JSON.stringify(key)}:`, 'utf8');
    if (keyBytes.size >= KEY_CACHE_LIMIT) keyBytes.clear();
    keyBytes.set(key, bytes);
  }
  return bytes;
}

/**
 * Objects JSON.stringify writes as their own enumerable keys, with no `toJSON` to call: what
 * `JSON.parse` and object literals make.
 */
function isPlainData(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  return typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}

/**
 * Values a record already holds, and where (positions from {@link JsonWriter.recordLength}), for
 * {@link JsonWriter.value} to copy instead of writing again. Objects match by identity, strings by
 * value. A list while short (a span notes a dozen), a map past that, so a span with a hundred
 * attributes does not look each one up in a long list.
 */
export class WrittenValues {
  readonly #entries: unknown[] = [];
  #index: Map<unknown, number> | undefined;

  /** Notes that `value` is written at `from`..`to` of the record (the first note of a value wins). */
  note(value: unknown, from: number, to: number): void {
    if (this.find(value) >= 0) return;
    const at = this.#entries.length;
    this.#entries.push(value, from, to);
    if (this.#index !== undefined) this.#index.set(value, at);
    else if (at >= SHORT_LIST_ENTRIES * 3) this.#index = new Map(this.#listed());
  }

  /** Where `value` is noted (for {@link fromAt} / {@link toAt}), or -1. */
  find(value: unknown): number {
    if (this.#index !== undefined) return this.#index.get(value) ?? -1;
    const entries = this.#entries;
    for (let i = 0; i < entries.length; i += 3) if (entries[i] === value) return i;
    return -1;
  }

  fromAt(at: number): number {
    return this.#entries[at + 1] as number;
  }

  toAt(at: number): number {
    return this.#entries[at + 2] as number;
  }

  *#listed(): Iterable<[unknown, number]> {
    for (let i = 0; i < this.#entries.length; i += 3) yield [this.#entries[i], i];
  }
}

/** Entries {@link WrittenValues} scans as a list before it builds a map. */
const SHORT_LIST_ENTRIES = 16;
