/**
 * Safe copies of user values for span attributes (SPEC §5: "capture never changes behaviour and
 * never throws").
 *
 * One walk over the user's value runs user code (getters, `toJSON`, the redact function) exactly
 * once and yields plain JSON data; if its JSON text is over `maxValueBytes`, that plain data (never
 * the user's value again) is shrunk in passes with tighter string/item/depth caps. Every cut leaves
 * a visible marker (`…[truncated N chars]`, `[N more items]`, `[Truncated: too deep]`).
 *
 * The walk's work is bounded too. A reference shared by several paths is copied again on each:
 * right for a config object passed twice, exponential for an object graph (a DAG, people whose
 * `friends` list each other). Past the first {@link MAX_CAPTURED_ITEMS} values, an object reached
 * again whose copy was large is written `"[Truncated: repeated reference]"` (small ones are
 * still copied whole), and past a few times the values that could fit `maxValueBytes` every further
 * object is `"[Truncated: too many values]"` (getters that make a new object on every read).
 *
 * How non-JSON values are written:
 * cycles -> `"[Circular]"` (a reference to an ancestor; other shared references are copied again,
 * up to the bound above);
 * a getter that throws -> `"[Getter threw: message]"`; class instances -> their own enumerable
 * properties, or `"[ClassName]"` when they have none (a web `ReadableStream` too); fetch's
 * `Headers` -> an object, `Response` and `Request` -> status, URL and headers; `toJSON()` is
 * honoured (a throwing one gives `"[toJSON threw: message]"`);
 * Map -> an object when every key is a string, else a list of `[key, value]` pairs; Set -> a list;
 * Date -> ISO text; bytes (Buffer, Uint8Array, ArrayBuffer) -> base64 text, or `"[Buffer N bytes]"`
 * when longer than the string cap or past the text budget; other typed arrays -> lists of numbers;
 * bigint -> decimal text; NaN/Infinity -> text; functions -> `"[Function name]"`; symbols ->
 * `"Symbol(description)"`; errors -> `{name, message, stack, cause?, errors?, ...own properties}`
 * (`errors`: an `AggregateError`'s list); promises, weak collections ->
 * `"[Promise]"`, `"[WeakMap]"`...; Node streams (an HTTP request or response too) -> their class
 * name, `"[Readable]"`, `"[ServerResponse]"` (their properties are internal state, buffered data
 * and raw headers); `undefined` object members are left out, as JSON does.
 */
import { Stream } from 'node:stream';
import { types } from 'node:util';
import type { Redactor } from './redact.js';
import { maskUrlSecrets, REDACTED } from './redact.js';

/** Default cap on one captured value (the inputs of a call, or its output): 256 KiB of JSON. */
export const DEFAULT_MAX_VALUE_BYTES = 256 * 1024;

/** How one `trace()` captures values; compiled once per traced function. */
export interface CapturePolicy {
  readonly maxValueBytes: number;
  readonly redactor: Redactor;
}

/** A captured value: plain JSON data and its JSON text (at most `maxValueBytes` UTF-8 bytes). */
export interface Captured {
  readonly value: unknown;
  readonly json: string;
}

interface Limits {
  readonly strings: number;
  readonly items: number;
  readonly depth: number;
}

/**
 * Most items of a list, or members of an object, a capture keeps (before any shrinking pass).
 * Generous: embeddings (1536-3072 numbers) must survive whole; maxValueBytes bounds the size.
 */
export const MAX_CAPTURED_ITEMS = 10_000;
const FIRST_DEPTH = 24;
/**
 * Passes before giving up on a value: each cuts items by the square root of what is left over,
 * so even a value a thousand times over its budget converges in well under this many.
 */
const SHRINK_PASSES = 12;
/** The tightest caps the passes go to: a value still over at these is replaced by a marker. */
const MIN_STRING_CAP = 32;
const MIN_ITEM_CAP = 4;
const MIN_DEPTH_CAP = 3;
/**
 * Characters of text the first copy keeps at full length, as a multiple of `maxValueBytes`;
 * past it every further string keeps only {@link SHORT_PREFIX} characters. The first copy is
 * serialised whole before the shrink passes size it down, so without this bound a value holding
 * many long strings (3000 of 200 KB) cost seconds, or failed outright past the longest string
 * V8 can make. Far above what fits the budget, so values the passes can share out fairly are
 * never cut here.
 */
const TEXT_BUDGET_FACTOR = 16;
const SHORT_PREFIX = 32;
/**
 * The walk's work is counted in values copied (each object, list item and member once). Shared
 * references were copied again on every path that reaches them, with no bound: a 21-level DAG
 * referencing each level twice read 2 097 150 getters (1.5 s), ten people whose `friends` list
 * each other 986 000 (1.7 s), and a complete graph of 12 objects exhausted the heap. Up to this
 * many values (about a millisecond of copying) nothing is recorded, so ordinary values pay nothing; past
 * it each object whose copy was large ({@link SMALL_COPY_VALUES}) is recorded, and is a marker when
 * reached again.
 */
const RECORD_COPIES_AFTER = MAX_CAPTURED_ITEMS;
/**
 * A copy of at most this many values is small: made again wherever its object is reached (a shared
 * message or config object stays whole everywhere). Re-copying large subtrees is what grows
 * exponentially; recording only those keeps the record to a few thousand objects at most.
 */
const SMALL_COPY_VALUES = 256;
/**
 * Past this many times the values that could fit `maxValueBytes` (JSON takes at least 2 bytes a
 * value, `0,`), every further object is a marker: only getters that make a new object on every
 * read get there, or a value many times over its budget, whose tail the passes would cut anyway
 * (a 2000 x 1536 matrix of numbers took 560 ms to copy whole, 120 ms now).
 */
const VALUE_BUDGET_FACTOR = 4;

const CIRCULAR = '[Circular]';
const TOO_DEEP = '[Truncated: too deep]';
const REPEATED = '[Truncated: repeated reference]';
const TOO_MANY = '[Truncated: too many values]';
const MORE_KEYS = '…';

/**
 * Copy `value` into JSON-safe data within `policy.maxValueBytes`. Never throws.
 *
 * @example
 * const a: any = { n: 1n }; a.self = a;
 * capture(a, policy).json // '{"n":"1","self":"[Circular]"}'
 */
export function capture(value: unknown, policy: CapturePolicy): Captured {
  try {
    const max = policy.maxValueBytes;
    let limits: Limits = { strings: max, items: MAX_CAPTURED_ITEMS, depth: FIRST_DEPTH };
    const cuts: Cuts = { strings: new Map(), containers: new WeakMap() };
    const text = { remaining: max * TEXT_BUDGET_FACTOR };
    const fitting = Math.max(MAX_CAPTURED_ITEMS, Math.floor(max / 2));
    const work: Work = { values: 0, maxValues: fitting * VALUE_BUDGET_FACTOR, copiedLarge: undefined };
    let data = copyValue(value, { redactor: policy.redactor, limits, ancestors: [], path: [], cuts, text, work }, 0);
    for (let pass = 0; pass < SHRINK_PASSES; pass++) {
      const json = JSON.stringify(data) ?? 'null';
      const bytes = utf8Length(json, max);
      if (bytes <= max) return { value: data ?? null, json };
      limits = tighterLimits(data, limits, bytes, max, cuts);
      data = shrink(data, limits, 0, cuts);
    }
    // Fits any budget trace() accepts (at least 64 bytes), and is still an object like inputs.
    const marker = { [MORE_KEYS]: '[truncated: over maxValueBytes]' };
    return { value: marker, json: JSON.stringify(marker) };
  } catch (error) {
    // Only reachable through a bug or exhausted memory; capture must still not throw.
    const marker = `[Capture failed: ${messageOf(error)}]`;
    return { value: marker, json: JSON.stringify(marker) };
  }
}

/**
 * The caps of the next shrinking pass for data whose JSON is `bytes` long, over `max`. Strings
 * are cut first; lists and objects keep fewer items only when cutting strings cannot make up the
 * overshoot; depth is cut only when neither can do anything more.
 */
function tighterLimits(data: unknown, limits: Limits, bytes: number, max: number, cuts: Cuts): Limits {
  // Strings by the overshoot (and a margin for markers and escapes), from the longest string
  // there is (a cap above it would cut nothing): one long string over the budget keeps nearly the
  // whole budget rather than a fraction of it.
  const overshoot = (bytes / max) * 1.05;
  const strings = Math.max(MIN_STRING_CAP, Math.floor(Math.min(limits.strings, max, longestString(data, 0)) / overshoot));
  const { saved, widest } = measureCuts(data, strings, cuts, 0);
  if (saved >= bytes - max) return { ...limits, strings };
  // Items by the overshoot the string cuts leave, by its square root: the cap applies at every
  // level, so a list of lists shrinks by its square (the next pass finishes a flat list's cut).
  const left = (Math.max(max, bytes - saved) / max) * 1.05;
  const items = Math.max(MIN_ITEM_CAP, Math.min(limits.items, Math.floor(widest / Math.sqrt(left))));
  if (items < widest || saved > 0) return { strings, items, depth: limits.depth };
  return { strings, items, depth: Math.max(MIN_DEPTH_CAP, limits.depth - 4) };
}

/**
 * What cutting strings to `stringCap` characters would save (in characters, markers counted, which
 * is bytes for ASCII), and the most items any list or object holds (not counting cut markers).
 */
function measureCuts(data: unknown, stringCap: number, cuts: Cuts, depth: number): { saved: number; widest: number } {
  let saved = 0;
  let widest = 0;
  const visit = (node: unknown, level: number): void => {
    if (typeof node === 'string') {
      const removed = cuts.strings.get(node);
      const kept = removed === undefined ? node.length : node.length - markerFor(removed).length;
      if (kept > stringCap) saved += kept - stringCap - markerFor((removed ?? 0) + kept - stringCap).length;
      return;
    }
    if (node === null || typeof node !== 'object' || level > FIRST_DEPTH) return;
    const children = Array.isArray(node) ? node : Object.values(node);
    widest = Math.max(widest, children.length - (cuts.containers.has(node) ? 1 : 0));
    for (const child of children) visit(child, level + 1);
  };
  visit(data, depth);
  return { saved: Math.max(0, saved), widest };
}

/** Bytes kept free for the marker a cut adds (`…[truncated 9007199254740991 chars]` is 39). */
const MARKER_BYTES = 40;

/** Cut a string to at most `maxBytes` UTF-8 bytes, with a marker when cut. Never throws. */
export function captureText(text: string, maxBytes: number): string {
  if (utf8Length(text, maxBytes) <= maxBytes) return text;
  const room = Math.max(16, maxBytes - MARKER_BYTES);
  // The longest prefix within `room` bytes: each UTF-16 unit is 1 to 3 bytes, so start at `room`
  // units and scale down by the overshoot until it fits (one round for ASCII, a few otherwise).
  let keep = Math.min(text.length, room);
  for (let bytes = Buffer.byteLength(text.slice(0, keep)); bytes > room; bytes = Buffer.byteLength(text.slice(0, keep))) {
    keep = Math.max(0, Math.floor((keep * room) / bytes) - 1);
  }
  return cutString(text, keep, { strings: new Map(), containers: new WeakMap() });
}

/** Byte length of `text`, computed only when the cheap bounds cannot decide against `max`. */
export function utf8Length(text: string, max: number): number {
  if (text.length * 3 <= max) return text.length;
  if (text.length > max) return text.length; // every unit is at least one byte: already over
  return Buffer.byteLength(text, 'utf8');
}

interface Walk {
  readonly redactor: Redactor;
  readonly limits: Limits;
  /** The objects on the path from the root: a cycle is a reference to one of them. An array, not a Set: it is never deeper than the depth cap, and scanning a few entries beats hashing. */
  readonly ancestors: object[];
  readonly path: Array<string | number>;
  readonly cuts: Cuts;
  /** Characters the first copy may still keep at full length (see TEXT_BUDGET_FACTOR). */
  readonly text: { remaining: number };
  readonly work: Work;
}

/** The work of one walk (see RECORD_COPIES_AFTER). */
interface Work {
  /** Values copied so far: objects, list items and members. */
  values: number;
  /** Past this many values, every object is written {@link TOO_MANY} (see VALUE_BUDGET_FACTOR). */
  readonly maxValues: number;
  /** The objects whose copy, made past RECORD_COPIES_AFTER values, took more than SMALL_COPY_VALUES. */
  copiedLarge: Set<object> | undefined;
}

/**
 * What a capture has cut, so that a later pass cutting again still counts from the user's value:
 * each cut string with how many characters its original had beyond the kept prefix, and each cut
 * list or object (whose last item, or `…` member, is the marker) with how many items it lost.
 */
interface Cuts {
  readonly strings: Map<string, number>;
  readonly containers: WeakMap<object, number>;
}

function copyValue(value: unknown, walk: Walk, depth: number): unknown {
  switch (typeof value) {
    case 'string': {
      const keep = walk.text.remaining > 0 ? walk.limits.strings : SHORT_PREFIX;
      const text = walk.redactor.masksUrls ? maskUrlSecrets(value, walk.redactor.isSecret) : value;
      const copied = text.length > keep ? cutString(text, keep, walk.cuts) : text;
      walk.text.remaining -= copied.length;
      return copied;
    }
    case 'number':
      return copyNumber(value);
    case 'boolean':
    case 'undefined':
      return value;
    case 'bigint':
      return value.toString();
    case 'symbol':
      return value.toString();
    case 'function':
      return `[Function ${functionName(value)}]`;
    default:
      return value === null ? null : copyObject(value as object, walk, depth);
  }
}

function copyNumber(value: number): number | string {
  if (!Number.isFinite(value)) return String(value);
  return Object.is(value, -0) ? 0 : value;
}

function copyObject(obj: object, walk: Walk, depth: number): unknown {
  if (walk.ancestors.includes(obj)) return CIRCULAR;
  if (depth >= walk.limits.depth) return TOO_DEEP;
  if (walk.work.values >= RECORD_COPIES_AFTER) return copyRecorded(obj, walk, depth);
  walk.work.values++;
  return copyInside(obj, walk, depth);
}

/** Past RECORD_COPIES_AFTER values: the budget checked, large copies recorded and not made again. */
function copyRecorded(obj: object, walk: Walk, depth: number): unknown {
  const work = walk.work;
  if (work.values >= work.maxValues) return TOO_MANY;
  const copiedLarge = (work.copiedLarge ??= new Set());
  if (copiedLarge.has(obj)) return REPEATED;
  const start = work.values++;
  const copied = copyInside(obj, walk, depth);
  // Judged by this copy, not the first: one made near the depth cap is small, one higher up not.
  if (work.values - start > SMALL_COPY_VALUES) copiedLarge.add(obj);
  return copied;
}

function copyInside(obj: object, walk: Walk, depth: number): unknown {
  walk.ancestors.push(obj);
  try {
    return copyByKind(obj, walk, depth);
  } catch (error) {
    // Revoked proxies, hostile `ownKeys` traps, exotic host objects.
    return `[Unreadable: ${messageOf(error)}]`;
  } finally {
    walk.ancestors.pop();
  }
}

function copyByKind(obj: object, walk: Walk, depth: number): unknown {
  if (Array.isArray(obj)) return copyList(obj, walk, depth, obj.length, (item) => copyListItem(item, walk, depth));
  // Plain objects are most of what gets captured: skip the dozen type probes below for them.
  const proto: unknown = Object.getPrototypeOf(obj);
  if (proto === Object.prototype || proto === null) return copyPlain(obj, walk, depth);
  if (types.isDate(obj)) return Number.isNaN(obj.getTime()) ? 'Invalid Date' : obj.toISOString();
  if (types.isNativeError(obj) || obj instanceof Error) return copyError(obj as Error, walk, depth);
  if (types.isArrayBufferView(obj)) return copyView(obj, walk, depth);
  if (types.isAnyArrayBuffer(obj)) return copyBytes(new Uint8Array(obj), 'ArrayBuffer', walk);
  if (types.isMap(obj)) return copyMap(obj as Map<unknown, unknown>, walk, depth);
  if (types.isSet(obj)) {
    const set = obj as Set<unknown>;
    return copyList(head(set, walk.limits.items), walk, depth, set.size);
  }
  if (types.isRegExp(obj)) return String(obj);
  if (types.isBoxedPrimitive(obj)) return copyValue(obj.valueOf(), walk, depth);
  if (types.isPromise(obj)) return '[Promise]';
  if (types.isWeakMap(obj)) return '[WeakMap]';
  if (types.isWeakSet(obj)) return '[WeakSet]';
  const fetched = fetchTypeData(obj);
  if (fetched !== undefined) return copyFetchType(obj, fetched, walk, depth);
  // A Node stream's own properties are its internal state: buffered chunks (as base64), and for
  // an HTTP request or response its raw header text, which no key-based redaction sees.
  if (obj instanceof Stream) return `[${className(obj) ?? 'Stream'}]`;
  return copyInstance(obj, walk, depth);
}

/** `fetched` (see fetchTypeData), with the object's own properties, if someone added any. */
function copyFetchType(obj: object, fetched: object, walk: Walk, depth: number): unknown {
  const copied = copyPlain(fetched, walk, depth) as Record<string, unknown>;
  const own = Object.keys(obj);
  return own.length === 0 ? copied : { ...copied, ...copyProperties(obj, own, walk, depth) };
}

/**
 * fetch's `Headers`, `Request` and `Response` keep their data in private fields (their own
 * properties are none, which would read `{}`): what they say, without touching a body. Header
 * names go through redaction like any key (`authorization`, `set-cookie`). Known by their tag, so
 * that those of the `undici` package (or another realm) are read too, not only Node's globals. An
 * object that carries the tag but cannot be read so (a test double with plain fields, say) is
 * copied as any other instance (undefined here).
 */
function fetchTypeData(obj: object): object | undefined {
  try {
    switch (Object.prototype.toString.call(obj)) {
      case '[object Headers]':
        return headerFields(obj);
      case '[object Response]': {
        const response = obj as Response;
        return { status: response.status, statusText: response.statusText, url: response.url, headers: headerFields(response.headers) };
      }
      case '[object Request]': {
        const request = obj as Request;
        return { method: request.method, url: request.url, headers: headerFields(request.headers) };
      }
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}

/**
 * Header pairs as an object, read up to the capture's item cap (a look-alike's iterator may not
 * end); anything but a pair of strings means the value is not a `Headers`, and throws.
 */
function headerFields(headers: unknown): Record<string, string> {
  // No prototype: a header may be named `__proto__`.
  const fields = Object.create(null) as Record<string, string>;
  let count = 0;
  for (const pair of headers as Iterable<unknown>) {
    if (!Array.isArray(pair) || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') throw new TypeError('not a header pair');
    if (++count > MAX_CAPTURED_ITEMS) break;
    fields[pair[0]] = pair[1];
  }
  return fields;
}

/**
 * A class instance by its own enumerable properties (or `toJSON()`); one with none (its state in
 * private fields or on its prototype) by its class name, `"[Name]"`, which says more than `{}`.
 */
function copyInstance(obj: object, walk: Walk, depth: number): unknown {
  if (typeof (obj as { toJSON?: unknown }).toJSON !== 'function' && Object.keys(obj).length === 0) {
    const name = className(obj);
    if (name !== undefined) return `[${name}]`;
  }
  return copyPlain(obj, walk, depth);
}

/** The name of the class `obj` was made by, when it has a telling one. */
function className(obj: object): string | undefined {
  const name = (obj.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? name : undefined;
}

/** An object by its own enumerable properties, or by its `toJSON()` when it has one. */
function copyPlain(obj: object, walk: Walk, depth: number): unknown {
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    let json: unknown;
    try {
      json = toJSON.call(obj, '');
    } catch (error) {
      return `[toJSON threw: ${messageOf(error)}]`;
    }
    if (json !== obj) return copyValue(json, walk, depth);
  }
  return copyProperties(obj, Object.keys(obj), walk, depth);
}

/**
 * The first `limits.items` items of `list`, each copied by `copyItem`, then a marker counting the
 * rest of `total`. Reads only those items: a typed array or the head of a Set is never copied
 * whole first.
 */
function copyList(
  list: ArrayLike<unknown>,
  walk: Walk,
  depth: number,
  total: number = list.length,
  copyItem: (item: unknown) => unknown = (item) => copyValue(item, walk, depth + 1),
): unknown[] {
  const count = Math.min(list.length, walk.limits.items);
  walk.work.values += count;
  const out: unknown[] = new Array(count);
  for (let i = 0; i < count; i++) {
    walk.path.push(i);
    let item: unknown;
    try {
      item = copyItem(list[i]);
    } catch (error) {
      item = `[Getter threw: ${messageOf(error)}]`;
    }
    walk.path.pop();
    out[i] = item === undefined ? null : item;
  }
  if (total > count) markListCut(out, total - count, walk.cuts);
  return out;
}

/**
 * One item of a list. A `[name, value]` pair whose name looks secret has its value masked: a
 * list of pairs holds headers (fetch's `HeadersInit`: `[['Authorization', 'Bearer ...']]`) and
 * entries as an object holds members, and those are masked in a `Headers`, a Map or an object.
 */
function copyListItem(item: unknown, walk: Walk, depth: number): unknown {
  const name = secretPairName(item, walk);
  return name === undefined ? copyValue(item, walk, depth + 1) : [copyValue(name, walk, depth + 2), REDACTED];
}

/** The name of a `[name, value]` pair whose name looks secret, else undefined. Never throws. */
function secretPairName(item: unknown, walk: Walk): string | undefined {
  try {
    if (!Array.isArray(item) || item.length !== 2) return undefined;
    const name: unknown = item[0];
    return typeof name === 'string' && walk.redactor.isSecret(name) ? name : undefined;
  } catch {
    return undefined; // a revoked proxy, a throwing getter: copyValue says so
  }
}

/** The first `count` values of `iterable`, without reading the rest. */
function head<T>(iterable: Iterable<T>, count: number): T[] {
  const out: T[] = [];
  if (count <= 0) return out;
  for (const item of iterable) {
    out.push(item);
    if (out.length >= count) break;
  }
  return out;
}

function copyProperties(obj: object, keys: readonly string[], walk: Walk, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const count = Math.min(keys.length, walk.limits.items);
  walk.work.values += count;
  for (let i = 0; i < count; i++) {
    const key = keys[i]!;
    let raw: unknown;
    try {
      raw = (obj as Record<string, unknown>)[key];
    } catch (error) {
      setMember(out, key, `[Getter threw: ${messageOf(error)}]`);
      continue;
    }
    setMember(out, key, copyMember(key, raw, walk, depth));
  }
  if (keys.length > count) markObjectCut(out, keys.length - count, walk.cuts);
  return out;
}

/** One object member, through redaction: the default rule, then the user's function. */
function copyMember(key: string, raw: unknown, walk: Walk, depth: number): unknown {
  if (walk.redactor.isSecret(key)) return REDACTED;
  walk.path.push(key);
  try {
    let value = raw;
    const transform = walk.redactor.transform;
    if (transform !== undefined) {
      try {
        value = transform(key, raw, walk.path.slice());
      } catch {
        return REDACTED; // fail closed: a broken redactor must not leak what it meant to hide
      }
    }
    return copyValue(value, walk, depth + 1);
  } finally {
    walk.path.pop();
  }
}

function setMember(out: Record<string, unknown>, key: string, value: unknown): void {
  if (value === undefined) return;
  if (key === '__proto__') Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  else out[key] = value;
}

function copyError(error: Error, walk: Walk, depth: number): Record<string, unknown> {
  const out = copyProperties(error, Object.keys(error), walk, depth);
  const read = (key: 'name' | 'message' | 'stack' | 'errors'): unknown => {
    try {
      return (error as Error & { errors?: unknown })[key];
    } catch {
      return undefined;
    }
  };
  const name = read('name');
  const message = read('message');
  const stack = read('stack');
  const cause = 'cause' in error ? copyMember('cause', error.cause, walk, depth) : undefined;
  const errors = hasHiddenErrors(error) ? copyMember('errors', read('errors'), walk, depth) : undefined;
  return {
    name: typeof name === 'string' ? name : 'Error',
    message: typeof message === 'string' ? copyValue(message, walk, depth + 1) : String(message),
    ...(typeof stack === 'string' ? { stack: copyValue(stack, walk, depth + 1) } : {}),
    ...(cause !== undefined ? { cause } : {}),
    ...(errors !== undefined ? { errors } : {}),
    ...out,
  };
}

/** Whether `error` has an own `errors` that Object.keys misses: an AggregateError's list is not enumerable. */
function hasHiddenErrors(error: Error): boolean {
  try {
    const own = Object.getOwnPropertyDescriptor(error, 'errors');
    return own !== undefined && !own.enumerable;
  } catch {
    return false; // a proxy's trap: the rest of the error is still read
  }
}

function copyView(view: ArrayBufferView, walk: Walk, depth: number): unknown {
  if (view instanceof Uint8Array || view instanceof Uint8ClampedArray) {
    return copyBytes(view, Buffer.isBuffer(view) ? 'Buffer' : view.constructor.name, walk);
  }
  if (types.isDataView(view)) return `[DataView ${view.byteLength} bytes]`;
  // Float32Array and friends are usually embeddings: keep them as numbers, capped like lists.
  return copyList(view as unknown as ArrayLike<number | bigint>, walk, depth);
}

function copyBytes(bytes: Uint8Array | Uint8ClampedArray, label: string, walk: Walk): string {
  // Base64 is text like any string, under the same text budget: 3000 references to one 150 KB
  // Buffer made 600 MB of it, and the capture failed (past the longest string V8 can make).
  const length = Math.ceil(bytes.byteLength / 3) * 4;
  if (length > walk.limits.strings || walk.text.remaining <= 0) return `[${label} ${bytes.byteLength} bytes]`;
  walk.text.remaining -= length;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function copyMap(map: Map<unknown, unknown>, walk: Walk, depth: number): unknown {
  // Only the entries that can be kept are read; the rest are counted.
  const entries = head(map, walk.limits.items);
  const total = map.size;
  if (entries.every(([key]) => typeof key === 'string')) {
    const out: Record<string, unknown> = {};
    const count = entries.length;
    walk.work.values += count;
    for (let i = 0; i < count; i++) {
      const [key, value] = entries[i] as [string, unknown];
      setMember(out, key, copyMember(key, value, walk, depth));
    }
    if (total > count) markObjectCut(out, total - count, walk.cuts);
    return out;
  }
  // Keys of several types: a list of [key, value] pairs, each value under the same redaction
  // as an object member when its key is a string (a headers Map keyed by strings and symbols).
  return copyList(entries, walk, depth, total, (entry) => {
    const [key, value] = entry as [unknown, unknown];
    const copiedKey = copyValue(key, walk, depth + 2);
    return [copiedKey, typeof key === 'string' ? copyMember(key, value, walk, depth + 1) : copyValue(value, walk, depth + 2)];
  });
}

/** Tighten already-plain JSON data to `limits` (runs no user code). */
function shrink(data: unknown, limits: Limits, depth: number, cuts: Cuts): unknown {
  if (typeof data === 'string') return shrinkString(data, limits.strings, cuts);
  if (data === null || typeof data !== 'object') return data;
  if (depth >= limits.depth) return TOO_DEEP;
  // A list or object an earlier cut left ends with its marker: cut again, the marker counts on.
  const removedBefore = cuts.containers.get(data) ?? 0;
  if (Array.isArray(data)) {
    const items = removedBefore > 0 ? data.length - 1 : data.length;
    const keep = Math.min(items, limits.items);
    const kept: unknown[] = new Array(keep);
    for (let i = 0; i < keep; i++) kept[i] = shrink(data[i], limits, depth + 1, cuts);
    if (removedBefore + items - keep > 0) markListCut(kept, removedBefore + items - keep, cuts);
    return kept;
  }
  const out: Record<string, unknown> = {};
  let keys = Object.keys(data);
  if (removedBefore > 0) keys = keys.filter((key) => key !== MORE_KEYS);
  const keep = Math.min(keys.length, limits.items);
  for (let i = 0; i < keep; i++) {
    const key = keys[i]!;
    setMember(out, key, shrink((data as Record<string, unknown>)[key], limits, depth + 1, cuts));
  }
  if (removedBefore + keys.length - keep > 0) markObjectCut(out, removedBefore + keys.length - keep, cuts);
  return out;
}

/** Ends a cut list with its marker, and notes the cut for later passes. */
function markListCut(list: unknown[], removed: number, cuts: Cuts): void {
  list.push(`[${removed} more items]`);
  cuts.containers.set(list, removed);
}

/** Ends a cut object with its `…` member, and notes the cut for later passes. */
function markObjectCut(object: Record<string, unknown>, removed: number, cuts: Cuts): void {
  setMember(object, MORE_KEYS, `[${removed} more keys]`);
  cuts.containers.set(object, removed);
}

/** Length of the longest string value in plain JSON data (keys are never cut, so not counted). */
function longestString(data: unknown, depth: number): number {
  if (typeof data === 'string') return data.length;
  if (data === null || typeof data !== 'object' || depth > FIRST_DEPTH) return 0;
  let longest = 0;
  if (Array.isArray(data)) {
    for (const item of data) longest = Math.max(longest, longestString(item, depth + 1));
    return longest;
  }
  for (const key of Object.keys(data)) {
    longest = Math.max(longest, longestString((data as Record<string, unknown>)[key], depth + 1));
  }
  return longest;
}

/** `text` within `keep` characters; a string an earlier pass cut is cut again from its kept prefix. */
function shrinkString(text: string, keep: number, cuts: Cuts): string {
  const removed = cuts.strings.get(text);
  if (removed === undefined) return text.length > keep ? cutString(text, keep, cuts) : text;
  const prefix = text.slice(0, text.length - markerFor(removed).length);
  return prefix.length > keep ? cutString(prefix, keep, cuts, removed) : text;
}

/** The first `keep` characters of `text` and a marker counting what was cut (plus `removedBefore`). */
function cutString(text: string, keep: number, cuts: Cuts, removedBefore = 0): string {
  let end = Math.max(0, keep);
  // Never split a surrogate pair: half a character is not valid text.
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  const removed = removedBefore + text.length - end;
  const cut = `${text.slice(0, end)}${markerFor(removed)}`;
  cuts.strings.set(cut, removed);
  return cut;
}

function markerFor(removed: number): string {
  return `…[truncated ${removed} chars]`;
}

function functionName(fn: Function): string {
  try {
    return typeof fn.name === 'string' && fn.name !== '' ? fn.name : 'anonymous';
  } catch {
    return 'anonymous';
  }
}

/** The message of a thrown value, without ever throwing itself. */
export function messageOf(error: unknown): string {
  try {
    if (error instanceof Error) return error.message;
    return String(error);
  } catch {
    return 'unknown error';
  }
}
