/**
 * Dotted attribute keys -> nested objects, and lookups that read either form (SPEC §3).
 *
 * Collision rule: a key whose path runs into a value already placed (`a.b` = 1 and `a.b.c` = 2),
 * or whose slot already holds deeper keys, is kept under its full dotted key at the top level
 * rather than dropped. The result does not depend on attribute order: in both orders of the
 * example above the tree is `{a: {b: 1}, 'a.b.c': 2}`, and {@link AttributeReader} finds either key.
 */
import { isPlainObject, setOwn, toJsonValue } from './json-values.js';
import { parseJsonText, TooDeepJsonText } from './json-text.js';

/** Unflattened attributes. `hasFlatKeys` says whether any dotted key was kept flat (collisions). */
export interface AttributeTree {
  readonly root: Record<string, unknown>;
  readonly hasFlatKeys: boolean;
  /**
   * What could not be mapped as the rule says (JSON text kept as text, a key of too many segments
   * kept flat), for the call's note.
   */
  readonly notes?: readonly string[] | undefined;
}

/**
 * Most dot-separated segments a key is unflattened into: each is a level of nesting, and a stored
 * call nests at most MAX_JSON_DEPTH (500) levels (the server refuses deeper values, and
 * `JSON.stringify` overflows the stack on thousands). 256, with the 3 levels above attributes in
 * `otel_dump` and the 64 of an attribute's own nested lists, stays well within it. A longer key
 * is kept flat, under its whole dotted text, and noted.
 */
export const MAX_KEY_SEGMENTS = 256;

/**
 * Unflattens one attribute set. Values are converted to JSON first ({@link toJsonValue}); a string
 * that starts with `{` or `[` and parses as JSON is replaced by the parsed value, unless it would
 * nest too deep to store (`json-text.ts`: it stays text, and `notes` says so).
 *
 * @example
 * unflattenAttributes({ 'llm.token_count.prompt': 3, 'input.value': '{"q":1}' }).root;
 * // { llm: { token_count: { prompt: 3 } }, input: { value: { q: 1 } } }
 */
export function unflattenAttributes(attributes: Readonly<Record<string, unknown>> | undefined): AttributeTree {
  const builder = new TreeBuilder();
  let notes: string[] | undefined;
  if (attributes !== undefined && attributes !== null) {
    for (const key in attributes) {
      const raw = attributes[key];
      if (raw === undefined) continue;
      let value = parseJsonText(toJsonValue(raw), key);
      if (value instanceof TooDeepJsonText) {
        (notes ??= []).push(value.note);
        value = value.text;
      }
      if (!builder.insert(key, value)) {
        (notes ??= []).push(`${quoteKey(key)}: a key of more than ${MAX_KEY_SEGMENTS} dot-separated parts, kept flat`);
      }
    }
  }
  return { root: builder.root, hasFlatKeys: builder.hasFlatKeys, notes };
}

/** A key as a note quotes it: long ones cut. */
function quoteKey(key: string): string {
  return key.length <= 80 ? key : `${key.slice(0, 80)}... (${key.length} characters)`;
}

// Spans of one instrumentation repeat the same keys. Splitting a key once and reusing its
// segment strings saves the slicing and, more, the hashing of fresh strings on every property
// access: measured at about half the cost of unflattening 10 attributes. Bounded, so hostile or
// high-cardinality keys cannot grow it without limit.
const MAX_CACHED_KEYS = 4096;
const segmentCache = new Map<string, readonly string[]>();
const NO_DOT: readonly string[] = [];

/** A key's dot-separated segments, or undefined for a key without a dot. */
function keySegments(key: string): readonly string[] | undefined {
  let segments = segmentCache.get(key);
  if (segments === undefined) {
    segments = key.indexOf('.') === -1 ? NO_DOT : key.split('.');
    if (segmentCache.size >= MAX_CACHED_KEYS) segmentCache.clear();
    segmentCache.set(key, segments);
  }
  return segments === NO_DOT ? undefined : segments;
}

class TreeBuilder {
  readonly root: Record<string, unknown> = {};
  hasFlatKeys = false;
  // Objects this builder made for key paths. Only these are descended into: an object that came
  // from JSON text is a value, so `a` = '{"x":1}' and `a.y` = 2 collide whatever their order.
  // A Set: OTLP ingest puts no limit on attributes, and a list made unflattening quadratic (80 k
  // dotted keys took over half a second).
  private readonly branches = new Set<object>();

  /** Place one attribute; false when its key has too many segments and was kept flat. */
  insert(key: string, value: unknown): boolean {
    const segments = keySegments(key);
    if (segments === undefined) {
      this.place(this.root, key, key, value);
      return true;
    }
    if (segments.length > MAX_KEY_SEGMENTS) {
      this.keepFlat(key, value);
      return false;
    }
    let node = this.root;
    const lastIndex = segments.length - 1;
    // Below a branch made by this insert everything is new: no reads needed to place the value.
    let fresh = false;
    for (let i = 0; i < lastIndex; i++) {
      const segment = segments[i]!;
      let child = fresh ? undefined : node[segment];
      if (child !== undefined && !this.isBranch(child)) {
        if (Object.hasOwn(node, segment)) {
          // The path runs into a value placed by a shorter key.
          this.keepFlat(key, value);
          return true;
        }
        child = undefined; // inherited (`constructor`, `toString`): not an attribute
      }
      if (child === undefined) {
        const branch = {};
        this.branches.add(branch);
        setOwn(node, segment, branch);
        child = branch;
        fresh = true;
      }
      node = child as Record<string, unknown>;
    }
    if (fresh) setOwn(node, segments[lastIndex]!, value);
    else this.place(node, segments[lastIndex]!, key, value);
    return true;
  }

  private place(node: Record<string, unknown>, name: string, key: string, value: unknown): void {
    const existing = node[name];
    if (existing !== undefined && this.isBranch(existing)) {
      // Deeper keys got here first: they move out to flat keys, this value takes the slot.
      this.spill(key, existing as Record<string, unknown>);
    }
    setOwn(node, name, value);
  }

  private isBranch(value: unknown): boolean {
    return typeof value === 'object' && value !== null && this.branches.has(value as object);
  }

  private keepFlat(key: string, value: unknown): void {
    this.hasFlatKeys = true;
    setOwn(this.root, key, value);
  }

  private spill(prefix: string, branch: Record<string, unknown>): void {
    for (const key of Object.keys(branch)) {
      const child = branch[key];
      const flatKey = `${prefix}.${key}`;
      if (this.isBranch(child)) this.spill(flatKey, child as Record<string, unknown>);
      else this.keepFlat(flatKey, child);
    }
  }
}

/** A dotted attribute key prepared for {@link AttributeReader.get}: split once, when the module loads. */
export interface AttributePath {
  readonly key: string;
  readonly segments: readonly string[];
  /** Bit of the key's first segment in the reader's presence mask; 0 when it has none. */
  readonly rootBit: number;
  /** Some segment names a member of Object.prototype, so reads must check own properties. */
  readonly needsOwnCheck: boolean;
}

// First segments of all prepared paths (`gen_ai`, `llm`, `input`, ...), one bit each.
const rootBits = new Map<string, number>();
const MAX_ROOT_BITS = 30;

/** Prepares a dotted key for {@link AttributeReader.get}. */
export function attributePath(key: string): AttributePath {
  const segments = key.split('.');
  const first = segments[0]!;
  let rootBit = rootBits.get(first);
  if (rootBit === undefined && rootBits.size < MAX_ROOT_BITS) {
    rootBit = 1 << rootBits.size;
    rootBits.set(first, rootBit);
  }
  return {
    key,
    segments,
    rootBit: rootBit ?? 0,
    needsOwnCheck: segments.some((segment) => segment in Object.prototype),
  };
}

/**
 * Reads dotted keys from an unflattened tree: the flat key if it was kept flat, else the nested
 * path (numeric segments also index arrays, so `gen_ai.prompt.0` reads a parsed JSON list).
 *
 * The mapping makes some sixty reads per span, most for conventions the span does not use. The
 * reader first notes which first segments the tree has at all (a flat key kept by a collision
 * always has its first segment present too, and is itself a top-level key: its bit is unknown,
 * so flat keys are checked whenever `hasFlatKeys`), so a read for an absent convention costs one
 * bit test instead of a property miss on a megamorphic load.
 */
export class AttributeReader {
  private readonly presentRoots: number;

  constructor(private readonly tree: AttributeTree) {
    let present = 0;
    // A span has a handful of top-level keys; the table has a few dozen first segments.
    for (const key in tree.root) present |= rootBits.get(key) ?? 0;
    this.presentRoots = present;
  }

  /** The value at `path`, or undefined when absent. */
  get(path: AttributePath): unknown {
    if (path.rootBit !== 0 && (this.presentRoots & path.rootBit) === 0) return undefined;
    const root = this.tree.root;
    if (this.tree.hasFlatKeys && Object.hasOwn(root, path.key)) return root[path.key];
    let current: unknown = root;
    const segments = path.segments;
    for (let i = 0; i < segments.length; i++) {
      if (typeof current !== 'object' || current === null) return undefined;
      const segment = segments[i]!;
      if (Array.isArray(current)) {
        if (!isIndex(segment)) return undefined;
        current = current[Number(segment)];
      } else {
        if (path.needsOwnCheck && !Object.hasOwn(current, segment)) return undefined;
        current = (current as Record<string, unknown>)[segment];
      }
    }
    return current;
  }
}

function isIndex(segment: string): boolean {
  if (segment.length === 0 || segment.length > 9) return false;
  for (let i = 0; i < segment.length; i++) {
    const code = segment.charCodeAt(i);
    if (code < 48 || code > 57) return false;
  }
  return true;
}

/** True when a value is a non-array plain object (what `inputs` and `attributes` merges accept). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && isPlainObject(value);
}
