/**
 * Content digests of the service (SPEC §2.2): SHA-256 of a canonical text, base64url without
 * padding, with `-` -> `X` and `_` -> `Y` (43 characters of `[A-Za-z0-9]`).
 *
 * The canonical text of a JSON value is what Python's `json.dumps(val, sort_keys=True)` prints,
 * because that is what the hosted service hashes; a digest computed here must equal the one the
 * service computes for the same value. Decisions where JavaScript and Python differ:
 *
 * - JS numbers carry no int/float distinction (`JSON.parse('1.0') === 1`). A value with no
 *   fraction and magnitude below 1e16 prints as an integer (`1`, not `1.0`). From 1e16 up a value
 *   prints as Python prints a float (`1e+16`, `1.5e+16`): such integers are beyond 2^53 and only
 *   reach us through floats, and that is the form the spec names.
 * - `-0` prints as `0`: `JSON.stringify(-0)` stores `0`, so the digest must match the stored value.
 * - NaN and ±Infinity are rejected (`TypeError`): they cannot arrive in JSON, and the JSON we store
 *   could not hold them.
 * - Keys sort by Unicode code point, as Python sorts `str` (JS's default sort compares UTF-16
 *   code units, which puts astral characters before U+E000..U+FFFF).
 * - Lone surrogates (possible in JS strings and in JSON text via `\ud800`) print as `\udXXX`,
 *   as Python prints them.
 *
 * Only node:crypto is imported: the module is pure.
 */
import { createHash } from 'node:crypto';

/**
 * Nesting deeper than this is refused. Python's encoder would hit its recursion limit (1000)
 * first; SQLite's JSON functions stop at 1000 too; and a bound keeps this recursion off the
 * edge of the JS stack for hostile bodies.
 */
export const MAX_JSON_DEPTH = 500;

/**
 * Whether the container `value` holds more than `levels` levels of nested containers, itself
 * included (`nestsDeeperThan(value, MAX_JSON_DEPTH)`: a container sits at depth MAX_JSON_DEPTH).
 * Recursive, but never past `levels` frames; members that are not containers are skipped without
 * a call (a chat message is mostly text). Shared by the server's depth bound and the mapping's.
 */
export function nestsDeeperThan(value: object, levels: number): boolean {
  if (levels <= 0) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === 'object' && item !== null && nestsDeeperThan(item, levels - 1)) return true;
    }
    return false;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) {
    const item = record[key];
    if (typeof item === 'object' && item !== null && nestsDeeperThan(item, levels - 1)) return true;
  }
  return false;
}

/** A value that cannot be put in canonical form (not JSON, NaN/Infinity, or nested too deeply). */
export class CanonicalJsonError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = 'CanonicalJsonError';
  }
}

/**
 * The text Python's `json.dumps(value, sort_keys=True)` prints for a JSON value.
 *
 * @example canonicalJson({ b: [1, 2.5], a: 'é' }) // '{"a": "\\u00e9", "b": [1, 2.5]}'
 * @throws CanonicalJsonError for non-JSON values, NaN/Infinity, or nesting over MAX_JSON_DEPTH.
 */
export function canonicalJson(value: unknown): string {
  return pythonJson(value, { sortKeys: true });
}

/**
 * The text Python's `json.dumps(value, sort_keys=...)` prints for a JSON value: `canonicalJson`
 * with the keys sorted; without, in the value's own order (what the service stores of a value it
 * does not digest, such as a feedback payload).
 *
 * @example pythonJson({ b: 1, a: 'é' }, { sortKeys: false }) // '{"b": 1, "a": "\\u00e9"}'
 * @throws CanonicalJsonError as canonicalJson does.
 */
export function pythonJson(value: unknown, { sortKeys }: { readonly sortKeys: boolean }): string {
  const parts: string[] = [];
  write(value, parts, 0, sortKeys);
  return parts.join('');
}

/**
 * The digest of a JSON value: SHA-256 of its canonical text, in the service's alphabet.
 *
 * @example digestOf({ a: 1 }) // 43 characters of [A-Za-z0-9]
 */
export function digestOf(value: unknown): string {
  return digestOfText(canonicalJson(value));
}

/** The digest of raw bytes (file contents, SPEC §2.6). */
export function digestOfBytes(bytes: Uint8Array): string {
  return toServiceAlphabet(createHash('sha256').update(bytes).digest('base64url'));
}

/** The digest of a text hashed as UTF-8 (canonical JSON is ASCII, so UTF-8 = ASCII there). */
export function digestOfText(text: string): string {
  return toServiceAlphabet(createHash('sha256').update(text, 'utf8').digest('base64url'));
}

/** Digests are 43 characters of [A-Za-z0-9]. */
export function isDigest(value: string): boolean {
  return DIGEST_SHAPE.test(value);
}

const DIGEST_SHAPE = /^[A-Za-z0-9]{43}$/;

function toServiceAlphabet(base64url: string): string {
  // Node's base64url output has no padding already.
  return base64url.replace(/-/g, 'X').replace(/_/g, 'Y');
}

function write(value: unknown, out: string[], depth: number, sortKeys: boolean): void {
  if (value === null) {
    out.push('null');
    return;
  }
  switch (typeof value) {
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'number':
      out.push(pythonNumber(value));
      return;
    case 'string':
      out.push(pythonString(value));
      return;
    case 'object':
      break;
    default:
      throw new CanonicalJsonError(`Not a JSON value: ${typeof value}`);
  }
  if (depth >= MAX_JSON_DEPTH) {
    throw new CanonicalJsonError(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (Array.isArray(value)) {
    out.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.push(', ');
      write(value[i], out, depth + 1, sortKeys);
    }
    out.push(']');
    return;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    throw new CanonicalJsonError('Not a JSON value: a non-plain object');
  }
  const record = value as Record<string, unknown>;
  const keys = sortKeys ? Object.keys(record).sort(compareCodePoints) : Object.keys(record);
  out.push('{');
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    if (i > 0) out.push(', ');
    out.push(pythonString(key), ': ');
    write(record[key], out, depth + 1, sortKeys);
  }
  out.push('}');
}

/**
 * Order two strings by Unicode code point, as Python compares `str`. Equal prefixes are skipped
 * by code unit; at the first difference the code points starting there are compared, stepping
 * back one unit when the difference is inside a surrogate pair.
 */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  let i = 0;
  while (i < length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === length) return a.length - b.length;
  // Below the surrogate range code units order like code points.
  const unitA = a.charCodeAt(i);
  const unitB = b.charCodeAt(i);
  if (unitA < 0xd800 && unitB < 0xd800) return unitA - unitB;
  let start = i;
  if (i > 0 && isHighSurrogate(a.charCodeAt(i - 1)) && (isLowSurrogate(unitA) || isLowSurrogate(unitB))) {
    start = i - 1;
  }
  // codePointAt past the end is undefined: the shorter string sorts first.
  return (a.codePointAt(start) ?? -1) - (b.codePointAt(start) ?? -1);
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

const SHORT_ESCAPES: Readonly<Record<number, string>> = {
  0x22: '\\"',
  0x5c: '\\\\',
  0x08: '\\b',
  0x0c: '\\f',
  0x0a: '\\n',
  0x0d: '\\r',
  0x09: '\\t',
};

/** Python's `ensure_ascii` string form: printable ASCII as is, everything else escaped. */
function pythonString(text: string): string {
  let out = '"';
  let runStart = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // Python escapes anything outside ' '..'~' (so DEL too), plus '"' and '\'.
    if (unit >= 0x20 && unit <= 0x7e && unit !== 0x22 && unit !== 0x5c) continue;
    out += text.slice(runStart, i);
    // UTF-16 code units are exactly Python's escapes: astral characters become surrogate pairs.
    out += SHORT_ESCAPES[unit] ?? `\\u${unit.toString(16).padStart(4, '0')}`;
    runStart = i + 1;
  }
  return out + text.slice(runStart) + '"';
}

/** Python's threshold for `repr(float)`: exponent form when the decimal point is outside this. */
const FLOAT_REPR_MIN_DECPT = -4;
const FLOAT_REPR_MAX_DECPT = 16;

/** A number as Python prints it: integers plainly, others as `repr(float)`. */
function pythonNumber(value: number): string {
  if (!Number.isFinite(value)) {
    throw new CanonicalJsonError(`Not a JSON number: ${value}`);
  }
  if (Number.isInteger(value) && Math.abs(value) < 1e16) {
    // `String` prints integers below 1e21 without an exponent; `-0` prints as `0`.
    return String(value);
  }
  return pythonFloatRepr(value);
}

/**
 * `repr(float)` of Python: the shortest digits that round-trip (the same digits JS's
 * `toExponential()` gives), written with a decimal point when the point falls within
 * (-4, 16] digits of the start, else in exponent form with a sign and at least two exponent
 * digits (`1e-05`, `1.5e+16`).
 */
export function pythonFloatRepr(value: number): string {
  if (!Number.isFinite(value)) throw new CanonicalJsonError(`Not a JSON number: ${value}`);
  const sign = value < 0 || Object.is(value, -0) ? '-' : '';
  const [mantissa = '0', exponentText = '0'] = Math.abs(value).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exponent = Number(exponentText);
  // Python's `decpt`: the value is 0.<digits> x 10^decpt.
  const decpt = exponent + 1;
  if (decpt <= FLOAT_REPR_MIN_DECPT || decpt > FLOAT_REPR_MAX_DECPT) {
    const exponentSign = exponent < 0 ? '-' : '+';
    return `${sign}${mantissa}e${exponentSign}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}
