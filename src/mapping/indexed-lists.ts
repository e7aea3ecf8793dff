/**
 * Indexed objects -> lists, as the hosted service converts the values it extracts (SPEC §3 asks for
 * its mapping; this rule of it the specification does not spell out).
 *
 * Instrumentations flatten message lists into indexed keys (OpenLLMetry's `gen_ai.prompt.0.role`,
 * `gen_ai.prompt.1.content`), which unflatten to `{"0": {...}, "1": {...}}`. The hosted service
 * (`convert_numeric_keys_to_list`, applied by `parse_weave_values` to each value it extracts:
 * inputs, output, the curated attributes, usage, the `wandb.*` keys) turns such objects into
 * lists, so its call shows `{"gen_ai.prompt": [{...}, {...}]}`. The rule, read from that code:
 *
 * - An object whose keys are exactly `"0"`, `"1"`, ... `String(n - 1)`, in any order, becomes the
 *   list of its values in index order. `"01"`, `"-1"`, `" 1"`, a gap (`0, 2`) or any other key
 *   keeps it an object. (Python accepts any `str.isdigit()` keys whose `int()` values are 0..n-1,
 *   but then reads `obj[str(i)]`: for `"00"` or `"01"` that raises, aborting the conversion
 *   part-way. Here such an object stays an object and the rest is converted.)
 * - Innermost first, and only through objects: the members of an object are converted before the
 *   object itself, while a list (a JSON array, or one made here) is never looked into, so
 *   `[{"0": "a"}]` stays as it is.
 * - An empty object met inside an extracted value becomes `[]` (its keys are trivially 0..-1; the
 *   hosted code converts it so). An extracted value itself is never empty: empty values are not
 *   extracted at all.
 *
 * Values are never changed in place: the tree they come from is also `otel_dump.attributes`, which
 * stays the span's attributes as received. (The hosted service converts in place, `obj[key] = ...`
 * inside the dict it was handed, so its own dump shows the objects *inside* each extracted value as
 * lists while the extracted value itself, `gen_ai.prompt`, stays an object: what changes there
 * depends on which values a span happened to have extracted. A dump that is the span as sent is
 * what SPEC §3 asks for, and what a reader of it can rely on.)
 *
 * A value with nothing to convert is returned as it is (the same object), so the exporter's JSON
 * writer still recognises it as part of the attribute tree (`call-json.ts`); the lists and objects
 * made here are pushed onto `made` when the caller asks, so the writer can tell them from values
 * the span carried. (A WeakSet would spare the caller the list, but cost ~150 ns an entry, mostly
 * in GC, measured.)
 *
 * Cost (Node 20, measured, bench/results/scratch/numeric-lists): one pass over each object of a
 * taken value and none over its lists or text, ~40 ns for a chat message, ~70 ns for a 5-key chat
 * request; objects keyed by indexes cost more, as V8 enumerates element keys slowly (~180 ns for
 * `{0: message}`, ~400 ns for 5 messages).
 */
import { isJsonObject } from './unflatten.js';
import { setOwn } from './json-values.js';

/** {@link convertObject}'s highest index once an object has a key that is not an index. */
const NOT_INDEXED = -2;

/**
 * `value` with its indexed objects turned into lists (see the module comment for the rule); the
 * lists and objects it makes are pushed onto `made` when given.
 *
 * @example
 * convertIndexedObjects({ 0: { role: 'user' }, 1: { role: 'assistant' } }); // [{ role: 'user' }, { role: 'assistant' }]
 * convertIndexedObjects({ 0: 'a', 2: 'b' });                                 // { 0: 'a', 2: 'b' } (a gap)
 * convertIndexedObjects([{ 0: 'a' }]);                                       // [{ 0: 'a' }] (lists are not looked into)
 */
export function convertIndexedObjects(value: unknown, made?: object[]): unknown {
  return isJsonObject(value) ? convertObject(value, made) : value;
}

function convertObject(object: Record<string, unknown>, made: object[] | undefined): Record<string, unknown> | unknown[] {
  let copy: Record<string, unknown> | undefined;
  let highestIndex = -1;
  const keys = Object.keys(object);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (highestIndex !== NOT_INDEXED) {
      const index = indexNamedBy(key);
      highestIndex = index === NOT_INDEXED ? NOT_INDEXED : Math.max(highestIndex, index);
    }
    const member = object[key];
    if (!isJsonObject(member)) continue;
    const converted = convertObject(member, made);
    if (converted === member) continue;
    if (copy === undefined) {
      // Spread defines own properties, so a `__proto__` key is copied as a key.
      copy = { ...object };
      made?.push(copy);
    }
    setOwn(copy, key, converted);
  }
  // Distinct canonical indexes, as many as there are keys, the highest of them keys.length - 1:
  // they can only be 0..keys.length-1.
  if (highestIndex !== keys.length - 1) return copy ?? object;
  return listOf(copy ?? object, keys.length, made);
}

/** The number a key names when it is `"0"` or digits without a leading zero; else NOT_INDEXED. */
function indexNamedBy(key: string): number {
  const length = key.length;
  if (length === 0 || length > 9 || (length > 1 && key.charCodeAt(0) === 48)) return NOT_INDEXED;
  let index = 0;
  for (let i = 0; i < length; i++) {
    const digit = key.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return NOT_INDEXED;
    index = index * 10 + digit;
  }
  return index;
}

function listOf(object: Record<string, unknown>, length: number, made: object[] | undefined): unknown[] {
  const list: unknown[] = [];
  // A number reads the element directly: `String(i)` cost a conversion and a lookup per member.
  for (let i = 0; i < length; i++) list.push(object[i]);
  made?.push(list);
  return list;
}
