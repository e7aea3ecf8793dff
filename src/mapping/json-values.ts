/**
 * Attribute values -> JSON values (SPEC §3: "Values that are not JSON become JSON").
 *
 * Arrays and objects that are already JSON are returned as they are, not copied: the SDK's
 * attribute arrays are almost always plain strings or numbers, and copying them per span would be
 * the largest allocation of the mapping.
 */

// Deeper than any real attribute value; stops a cyclic object from exhausting the stack.
const MAX_DEPTH = 64;

/**
 * Converts one attribute value to JSON: strings, finite numbers, booleans and null as they are;
 * byte arrays -> base64 text; NaN and ±Infinity -> `"nan"`, `"inf"`, `"-inf"` (the text the hosted
 * service writes for them); bigint -> decimal text; undefined -> null; arrays and plain objects
 * converted element by element; anything else -> its string form. Never throws.
 *
 * @example
 * toJsonValue(new Uint8Array([1, 2])); // 'AQI='
 * toJsonValue([1, Number.NaN]);        // [1, 'nan']
 */
export function toJsonValue(value: unknown): unknown {
  return convert(value, 0);
}

function convert(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : nonFiniteText(value);
    case 'bigint':
      return value.toString();
    case 'undefined':
      return null;
    case 'object':
      if (value === null) return null;
      if (depth < MAX_DEPTH) {
        if (Array.isArray(value)) return convertArray(value, depth);
        if (value instanceof Uint8Array) return bytesToBase64(value);
        if (isPlainObject(value)) return convertObject(value, depth);
      }
      return safeString(value);
    default:
      return safeString(value);
  }
}

function convertArray(array: readonly unknown[], depth: number): unknown[] {
  let copy: unknown[] | undefined;
  for (let i = 0; i < array.length; i++) {
    const item = array[i];
    const converted = isJsonScalar(item) ? item : convert(item, depth + 1);
    if (copy === undefined) {
      if (converted === item) continue;
      copy = array.slice(0, i);
    }
    copy.push(converted);
  }
  return copy ?? (array as unknown[]);
}

function convertObject(object: object, depth: number): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  const keys = Object.keys(object);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const item = (object as Record<string, unknown>)[key];
    const converted = isJsonScalar(item) ? item : convert(item, depth + 1);
    if (copy === undefined) {
      if (converted === item) continue;
      copy = {};
      for (let j = 0; j < i; j++) setOwn(copy, keys[j]!, (object as Record<string, unknown>)[keys[j]!]);
    }
    setOwn(copy, key, converted);
  }
  return copy ?? (object as Record<string, unknown>);
}

/** Strings, booleans, null and finite numbers need no conversion. */
function isJsonScalar(value: unknown): boolean {
  const type = typeof value;
  return type === 'string' || type === 'boolean' || value === null || (type === 'number' && Number.isFinite(value));
}

/** Objects made by `{}` / `JSON.parse` / OTLP decoders (not class instances such as Date or Map). */
export function isPlainObject(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * `target[key] = value`, except that a key `__proto__` (hostile or not) becomes an own property
 * instead of replacing the object's prototype.
 */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

function nonFiniteText(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  return value > 0 ? 'inf' : '-inf';
}

function bytesToBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    // An object whose toString/Symbol.toPrimitive throws, or has no prototype to find one on.
    return Object.prototype.toString.call(value);
  }
}
