/**
 * The shape of a span's unflattened attributes (SPEC §3), worked out once per attribute key list.
 *
 * Unflattening (`unflatten.ts`) depends on the keys only, never on the values: a value is never
 * descended into, so which keys nest, which collide and stay flat, and in what order every object
 * lists its keys follow from the key list alone. Spans of one instrumentation repeat a handful of
 * key lists, so the exporter keeps each one's shape (a tree of nodes whose leaves are attribute
 * positions) and, per span, only fills in the values: the tree objects are made without splitting
 * keys or probing for collisions, and `otel_dump.attributes` can be written from the shape with
 * each member's name encoded once (`call-json.ts`).
 *
 * The shape is found by unflattening the key list itself, with a stand-in object per value, so it
 * is by construction the tree `unflattenAttributes` makes; tests compare the two on arbitrary keys.
 */
import { encodeConstant } from '../wire/json-writer.js';
import { unflattenAttributes, type AttributeTree } from './unflatten.js';
import { setOwn, toJsonValue } from './json-values.js';
import { parseJsonText, TooDeepJsonText } from './json-text.js';

/** One object of the tree: its members in key order. */
export interface LayoutNode {
  readonly names: readonly string[];
  /** Per member: a node index (>= 0), or `~leaf` (< 0) for the attribute at position `leaf`. */
  readonly children: readonly number[];
  /** Per member: `{"name":` for the first, `,"name":` for the others, as UTF-8. */
  readonly prefixes: readonly Uint8Array[];
}

/** The shape of one attribute key list. Node 0 is the root; a node's children come after it. */
export interface AttributeLayout {
  readonly keyCount: number;
  readonly nodes: readonly LayoutNode[];
  /** Some dotted key was kept flat (a collision), as `AttributeTree.hasFlatKeys`. */
  readonly hasFlatKeys: boolean;
  /** Unflattening these keys notes something (a key of too many segments): the object path writes the note. */
  readonly hasNotes: boolean;
}

/** A span's attributes in a layout: the shape, and the values by attribute position. */
export interface LaidOutAttributes {
  readonly layout: AttributeLayout;
  /** JSON values, as unflattening places them (converted, JSON text parsed). */
  readonly values: unknown[];
  /**
   * Per position, the JSON text a value was parsed from, when it was (and the text is well formed,
   * so it encodes as UTF-8 the way `JSON.stringify` would escape it); else undefined.
   */
  readonly jsonTexts: Array<string | undefined>;
}

/**
 * Key lists with more attributes are unflattened the ordinary way: a layout costs memory per key,
 * and such spans are rare (the SDK's default limit is 128 attributes).
 */
export const MAX_LAYOUT_KEYS = 128;
/**
 * Bound on what the cache holds, counted in keys (trie nodes plus the members of cached layouts,
 * a few dozen bytes each): past it the cache starts over. Reached only by key lists of high
 * cardinality (keys that embed ids), which then cost a compile per span but never more memory.
 */
const MAX_CACHED_KEYS = 65_536;

/** Cached layouts, by key list: a trie keyed one attribute key per level. */
class KeyTrie {
  readonly next = new Map<string, KeyTrie>();
  layout: AttributeLayout | undefined;
}

let trieRoot = new KeyTrie();
let cachedKeys = 0;

/**
 * The span's attributes laid out, or undefined when there are too many of them for a layout, or
 * a JSON text nested too deep to parse or a key of too many segments (rare: `unflattenAttributes`
 * keeps those as text or flat and notes it, which the object path writes). Values are converted
 * exactly as `unflattenAttributes` converts them.
 *
 * @example
 * const laidOut = layOut({ 'gen_ai.system': 'openai', 'input.value': '[1]' });
 * buildTree(laidOut).root; // { gen_ai: { system: 'openai' }, input: { value: [1] } }
 */
export function layOut(attributes: Readonly<Record<string, unknown>> | undefined): LaidOutAttributes | undefined {
  const values: unknown[] = [];
  const jsonTexts: Array<string | undefined> = [];
  let node: KeyTrie | undefined = trieRoot;
  if (attributes !== undefined && attributes !== null) {
    // for-in, as unflattenAttributes iterates: the same keys in the same order.
    for (const key in attributes) {
      const raw = attributes[key];
      if (raw === undefined) continue;
      if (values.length === MAX_LAYOUT_KEYS) return undefined;
      const value = toJsonValue(raw);
      const parsed = parseJsonText(value, key);
      if (parsed instanceof TooDeepJsonText) return undefined;
      values.push(parsed);
      jsonTexts.push(parsed !== value && isWellFormed(value as string) ? (value as string) : undefined);
      node = node?.next.get(key);
    }
  }
  const layout = node?.layout ?? remember(attributes);
  if (layout.hasNotes) return undefined;
  return { layout, values, jsonTexts };
}

/**
 * The tree objects for laid-out values: the same tree `unflattenAttributes` makes of the same
 * attributes. `objects[n]` is node `n`'s object (node 0 the root).
 */
export function buildTree({ layout, values }: LaidOutAttributes): { tree: AttributeTree; objects: object[] } {
  const { nodes } = layout;
  const objects = new Array<Record<string, unknown>>(nodes.length);
  // Children come after their parent: build from the last node back to the root.
  for (let n = nodes.length - 1; n >= 0; n--) {
    const { names, children } = nodes[n]!;
    const object: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) {
      const child = children[i]!;
      setOwn(object, names[i]!, child >= 0 ? objects[child] : values[~child]);
    }
    objects[n] = object;
  }
  return { tree: { root: objects[0]!, hasFlatKeys: layout.hasFlatKeys }, objects };
}

/** Compiles and caches the layout of `attributes`' key list. */
function remember(attributes: Readonly<Record<string, unknown>> | undefined): AttributeLayout {
  const keys: string[] = [];
  if (attributes !== undefined && attributes !== null) {
    for (const key in attributes) if (attributes[key] !== undefined) keys.push(key);
  }
  const layout = compileLayout(keys);
  // At most one new trie node per key, and the layout's members: its cost in the bound.
  if (cachedKeys + 2 * keys.length > MAX_CACHED_KEYS) {
    trieRoot = new KeyTrie();
    cachedKeys = 0;
  }
  let node = trieRoot;
  for (const key of keys) {
    let next = node.next.get(key);
    if (next === undefined) {
      next = new KeyTrie();
      node.next.set(key, next);
      cachedKeys += 1;
    }
    node = next;
  }
  if (node.layout === undefined) cachedKeys += keys.length;
  node.layout = layout;
  return layout;
}

/** The layout of a key list: unflatten it with one stand-in object per key, then read the tree. */
export function compileLayout(keys: readonly string[]): AttributeLayout {
  const standIns = new Map<object, number>();
  const attributes: Record<string, unknown> = {};
  keys.forEach((key, position) => {
    // A frozen empty object: converted and placed as it is, never descended into.
    const standIn = Object.freeze({});
    standIns.set(standIn, position);
    setOwn(attributes, key, standIn);
  });
  const tree = unflattenAttributes(attributes);
  const nodes: LayoutNode[] = [];
  const addNode = (object: Record<string, unknown>): number => {
    const index = nodes.length;
    const names = Object.keys(object);
    const node = { names, children: new Array<number>(names.length), prefixes: names.map(memberPrefix) };
    nodes.push(node);
    names.forEach((name, i) => {
      const member = object[name] as Record<string, unknown>;
      const position = standIns.get(member);
      node.children[i] = position === undefined ? addNode(member) : ~position;
    });
    return index;
  };
  addNode(tree.root);
  return { keyCount: keys.length, nodes, hasFlatKeys: tree.hasFlatKeys, hasNotes: tree.notes !== undefined };
}

function memberPrefix(name: string, index: number): Uint8Array {
  return encodeConstant(`${index === 0 ? '{' : ','}${JSON.stringify(name)}:`);
}

/** `String.prototype.isWellFormed` (ES2024, in Node 20; not in this project's TypeScript lib). */
function isWellFormed(text: string): boolean {
  return (text as unknown as { isWellFormed(): boolean }).isWellFormed();
}
