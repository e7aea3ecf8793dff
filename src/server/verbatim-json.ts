/**
 * JSON values the server can store as they arrived, without parsing them into JavaScript values
 * and writing them out again (SPEC §6, ingest: for a `call/upsert_batch` body, `JSON.parse` of
 * the body and `JSON.stringify` of the stored fields took ~40 % of the server's time).
 *
 * A value qualifies only when its bytes are exactly what `JSON.stringify(JSON.parse(bytes))`
 * would write, so storing the bytes stores the same text the parsed path stores. That rules out
 * whitespace, number spellings other than JavaScript's shortest one (`1.0`, `1e2`, `-0`),
 * escapes `JSON.stringify` would not write (`\/`, `\u0041`, escaped surrogates), keys V8 would
 * reorder (array indexes) or a parse would collapse (duplicates), and `__proto__`/`constructor`
 * keys (rare; see verbatim-body.ts). Anything else is answered "not canonical" and
 * the caller takes the parsed path, which keeps every rule and error of its own. So this module
 * decides only *whether* bytes may be kept, never what a value means.
 *
 * The caller must have checked that the bytes are valid UTF-8 (app.ts does, for every body):
 * bytes from 0x80 up are taken as the raw characters `JSON.stringify` writes.
 */

/** JSON text of one value, read verbatim from a request body (already canonical; see above). */
export class VerbatimJson {
  constructor(readonly text: string) {}
}

/**
 * Containers nested deeper than this are left to the parsed path. Far below MAX_JSON_DEPTH
 * (500), whose 400 the parsed path gives, and it bounds this module's recursion.
 */
export const MAX_VERBATIM_NESTING = 64;

/**
 * An object with more keys than this is left to the parsed path: the duplicate check compares
 * each key's hash with the object's earlier ones, so its cost grows with the square of this.
 * (The exporter's objects have at most 12.)
 */
export const MAX_VERBATIM_KEYS = 32;

/** Bytes of JSON's structure (verbatim-body.ts reads the envelope around values with them). */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
const MINUS = 0x2d;
const DIGIT_0 = 0x30;
const DIGIT_1 = 0x31;
const DIGIT_9 = 0x39;
const LOWER_U = 0x75;

/** Int32 slots per key in `keySpans`: start, end, hash. */
const KEY_SLOTS = 3;

/** `NOT_CANONICAL` is what every scanning function answers for bytes the parsed path must take. */
export const NOT_CANONICAL = -1;

/**
 * The keys of the objects being scanned: `[start, end, hash]` per key, one region per nesting
 * level. Shared by every call (JavaScript runs one scan at a time), so scanning allocates nothing.
 */
const keySpans = new Int32Array(MAX_VERBATIM_NESTING * MAX_VERBATIM_KEYS * KEY_SLOTS);

/**
 * The index just past the canonical JSON value starting at `start`, or NOT_CANONICAL.
 *
 * @example
 * endOfCanonicalJson(Buffer.from('{"a":[1,"x"]}'), 0); // 13
 * endOfCanonicalJson(Buffer.from('{"a": 1}'), 0);      // -1 (whitespace)
 */
export function endOfCanonicalJson(bytes: Uint8Array, start: number): number {
  return endOfValue(bytes, start, 0, 0);
}

function endOfValue(bytes: Uint8Array, at: number, depth: number, keysTop: number): number {
  const first = bytes[at];
  if (first === QUOTE) return endOfCanonicalString(bytes, at);
  if (first === OPEN_BRACE) return depth < MAX_VERBATIM_NESTING ? endOfObject(bytes, at, depth + 1, keysTop) : NOT_CANONICAL;
  if (first === OPEN_BRACKET) return depth < MAX_VERBATIM_NESTING ? endOfArray(bytes, at, depth + 1, keysTop) : NOT_CANONICAL;
  if (first === undefined) return NOT_CANONICAL;
  if (first >= DIGIT_0 && first <= DIGIT_9) return endOfCanonicalNumber(bytes, at);
  if (first === MINUS) return endOfCanonicalNumber(bytes, at);
  return endOfLiteral(bytes, at);
}

function endOfObject(bytes: Uint8Array, open: number, depth: number, keysTop: number): number {
  let at = open + 1;
  if (bytes[at] === CLOSE_BRACE) return at + 1;
  const keysBase = keysTop;
  for (;;) {
    const keyStart = at;
    const keyEnd = bytes[at] === QUOTE ? endOfCanonicalString(bytes, at) : NOT_CANONICAL;
    if (keyEnd === NOT_CANONICAL || !isPlainKey(bytes, keyStart, keyEnd)) return NOT_CANONICAL;
    if (keysTop - keysBase >= MAX_VERBATIM_KEYS * KEY_SLOTS) return NOT_CANONICAL;
    const hash = hashOf(bytes, keyStart, keyEnd);
    if (isEarlierKey(bytes, keyStart, keyEnd, hash, keysBase, keysTop)) return NOT_CANONICAL;
    keySpans[keysTop] = keyStart;
    keySpans[keysTop + 1] = keyEnd;
    keySpans[keysTop + 2] = hash;
    keysTop += KEY_SLOTS;
    if (bytes[keyEnd] !== COLON) return NOT_CANONICAL;
    at = endOfValue(bytes, keyEnd + 1, depth, keysTop);
    if (at === NOT_CANONICAL) return NOT_CANONICAL;
    const next = bytes[at];
    if (next === CLOSE_BRACE) return at + 1;
    if (next !== COMMA) return NOT_CANONICAL;
    at += 1;
  }
}

function endOfArray(bytes: Uint8Array, open: number, depth: number, keysTop: number): number {
  let at = open + 1;
  if (bytes[at] === CLOSE_BRACKET) return at + 1;
  for (;;) {
    at = endOfValue(bytes, at, depth, keysTop);
    if (at === NOT_CANONICAL) return NOT_CANONICAL;
    const next = bytes[at];
    if (next === CLOSE_BRACKET) return at + 1;
    if (next !== COMMA) return NOT_CANONICAL;
    at += 1;
  }
}

/**
 * The index just past the string token starting at `open` (a quote), or NOT_CANONICAL when the
 * token is not how `JSON.stringify` writes its string: the only escapes it writes are `\"`, `\\`,
 * the short ones (`\b \f \n \r \t`) and `\u00xx` (lowercase) for the other control characters;
 * it writes every other character raw. (It also escapes lone surrogates, which take the parsed
 * path: whether an escaped surrogate is lone depends on its neighbours.)
 */
export function endOfCanonicalString(bytes: Uint8Array, open: number): number {
  let at = open + 1;
  for (;;) {
    let byte = bytes[at];
    // The hot loop: ordinary characters. `undefined` (past the end) fails every comparison.
    while ((byte as number) >= 0x20 && byte !== QUOTE && byte !== BACKSLASH) byte = bytes[++at];
    if (byte === QUOTE) return at + 1;
    if (byte !== BACKSLASH) return NOT_CANONICAL; // a raw control character, or the end
    const escaped = bytes[at + 1] as number;
    if (SHORT_ESCAPES[escaped] === 1) at += 2;
    else if (escaped === LOWER_U && isCanonicalControlEscape(bytes, at + 2)) at += 6;
    else return NOT_CANONICAL;
  }
}

/** 1 for the bytes after a backslash that `JSON.stringify` writes as two-character escapes. */
const SHORT_ESCAPES = new Uint8Array(256);
for (const char of '"\\bfnrt') SHORT_ESCAPES[char.charCodeAt(0)] = 1;

/** Control characters `JSON.stringify` writes as `\b \f \n \r \t` rather than as `\u00xx`. */
const HAS_SHORT_ESCAPE = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

/** Whether the 4 bytes at `at` are the lowercase hex `JSON.stringify` writes after `\u`. */
function isCanonicalControlEscape(bytes: Uint8Array, at: number): boolean {
  if (bytes[at] !== DIGIT_0 || bytes[at + 1] !== DIGIT_0) return false;
  const high = bytes[at + 2];
  if (high !== DIGIT_0 && high !== DIGIT_1) return false;
  const low = lowerHexValue(bytes[at + 3]);
  return low !== null && !HAS_SHORT_ESCAPE.has((high - DIGIT_0) * 16 + low);
}

function lowerHexValue(byte: number | undefined): number | null {
  if (byte === undefined) return null;
  if (byte >= DIGIT_0 && byte <= DIGIT_9) return byte - DIGIT_0;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x61 + 10;
  return null;
}

/**
 * Keys whose object `JSON.parse` + `JSON.stringify` would not write back byte for byte, or that
 * this module leaves to the parsed path: a key starting with a digit may be an array index (V8 lists those
 * first, in numeric order), and `__proto__`/`constructor` are left to the parsed path (see
 * verbatim-body.ts).
 */
function isPlainKey(bytes: Uint8Array, start: number, end: number): boolean {
  const first = bytes[start + 1] as number;
  if (first >= DIGIT_0 && first <= DIGIT_9) return false;
  const length = end - start - 2;
  if (length === PROTO.length && sameAsciiAt(bytes, start + 1, PROTO)) return false;
  if (length === CONSTRUCTOR.length && sameAsciiAt(bytes, start + 1, CONSTRUCTOR)) return false;
  return true;
}

const PROTO = '__proto__';
const CONSTRUCTOR = 'constructor';

function sameAsciiAt(bytes: Uint8Array, at: number, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text.charCodeAt(i)) return false;
  return true;
}

/**
 * Whether the key token `[start, end)` equals one in `keySpans[from, to)`. Canonical tokens are
 * equal exactly when the keys they stand for are (the encoding is one-to-one). Hashes are
 * compared first: keys of one length sharing a long prefix would otherwise make each comparison
 * as long as the keys (measured: 39 ns per body byte against JSON.parse's 1-5).
 */
function isEarlierKey(bytes: Uint8Array, start: number, end: number, hash: number, from: number, to: number): boolean {
  const length = end - start;
  for (let k = from; k < to; k += KEY_SLOTS) {
    if (keySpans[k + 2] !== hash) continue;
    const earlier = keySpans[k] as number;
    if ((keySpans[k + 1] as number) - earlier !== length) continue;
    let i = 1; // both start with a quote
    while (i < length && bytes[start + i] === bytes[earlier + i]) i++;
    if (i === length) return true;
  }
  return false;
}

/** FNV-1a of the bytes `[start, end)`, as an int32. */
function hashOf(bytes: Uint8Array, start: number, end: number): number {
  let hash = 0x811c9dc5 | 0;
  for (let i = start; i < end; i++) hash = Math.imul(hash ^ (bytes[i] as number), 0x01000193);
  return hash;
}

/** Integers of at most this many digits are exact doubles that print as written. */
const SAFE_INTEGER_DIGITS = 15;

/**
 * The index past the number token at `start`, or NOT_CANONICAL unless the token is how
 * JavaScript prints its value (`String(n)`, which is what `JSON.stringify` writes for a finite
 * number): that excludes `-0`, `1.0`, `1e2`, `1E+21`, leading zeros and out-of-range values.
 */
export function endOfCanonicalNumber(bytes: Uint8Array, start: number): number {
  let at = start;
  let byte = bytes[at] as number;
  // The common cases, a count or a zero: digits without a leading zero, or `0` alone.
  if (byte >= DIGIT_1 && byte <= DIGIT_9) {
    do byte = bytes[++at] as number;
    while (byte >= DIGIT_0 && byte <= DIGIT_9);
    if (!isNumberChar(byte) && at - start <= SAFE_INTEGER_DIGITS) return at;
  } else if (byte === DIGIT_0 && !isNumberChar(bytes[at + 1])) {
    return at + 1;
  }
  while (isNumberChar(bytes[at])) at++;
  if (at === start) return NOT_CANONICAL;
  let token = '';
  for (let i = start; i < at; i++) token += String.fromCharCode(bytes[i] as number);
  return String(Number(token)) === token ? at : NOT_CANONICAL;
}

function isNumberChar(byte: number | undefined): boolean {
  return byte !== undefined && NUMBER_CHARS[byte] === 1;
}

/** Bytes a JSON number token is made of. */
const NUMBER_CHARS = new Uint8Array(256);
for (const char of '0123456789-+.eE') NUMBER_CHARS[char.charCodeAt(0)] = 1;

function endOfLiteral(bytes: Uint8Array, at: number): number {
  for (const literal of LITERALS) {
    if (bytes[at] === literal.charCodeAt(0) && sameAsciiAt(bytes, at, literal)) return at + literal.length;
  }
  return NOT_CANONICAL;
}

const LITERALS = ['true', 'false', 'null'];
