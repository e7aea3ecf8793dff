/**
 * Attribute values that are JSON text (SPEC §3): a string that starts with `{` or `[` and parses
 * as JSON is replaced by the parsed value, unless the value would nest too deep to store.
 *
 * The server refuses a call with a value nested deeper than MAX_JSON_DEPTH (500) levels
 * (`src/server/json-depth.ts`: SQLite's JSON functions fail past 1000), so a span with one such
 * text would be lost whole, on both paths. Such a text stays text, and the call says so in
 * `_callbridge_mapping_error` (SPEC §3: a span that cannot be mapped whole is still sent, with a
 * note).
 *
 * Cost: only a text long enough to nest that deep (about 1 KB) is walked: its parsed value's
 * containers, stopping at the bound, allocating nothing. The walk costs about a tenth of the
 * text's `JSON.parse` (measured, Node 20: ~0.28 µs for 1.8 KB of chat messages, which take
 * ~2.9 µs to parse; bench/results/scratch/mapping-fix).
 */
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../wire/digest.js';

/**
 * How deep an attribute's value can sit in a stored call, above its key's own segments. Deepest:
 * in `otel_dump.events[i].attributes` (otel_dump at depth 0, `events` 1, the event 2, its
 * `attributes` 3) an attribute of key `a.b` has its value at depth 3 + 2, and so in a link's
 * attributes. Elsewhere it sits higher: `otel_dump.attributes` 1 + segments,
 * `otel_dump.resource.attributes` 2 + segments, `inputs`, `output` and `attributes` at most at
 * its segments.
 */
const DEEPEST_ATTRIBUTES_DEPTH = 3;

const OPEN_BRACE = 123; // '{'
const OPEN_BRACKET = 91; // '['

/** A JSON text left as text: its value would nest deeper than the server stores. */
export class TooDeepJsonText {
  constructor(
    readonly text: string,
    /** For the call's `_callbridge_mapping_error`. */
    readonly note: string,
  ) {}
}

/**
 * A string starting with `{` or `[` that parses as JSON -> the parsed value; a {@link TooDeepJsonText}
 * when that value, stored under `key`, would hold more than MAX_JSON_DEPTH - 3 - (segments of
 * `key`) levels of containers (495 for `input.value`; see {@link DEEPEST_ATTRIBUTES_DEPTH}), so
 * that wherever the mapping puts it the call stays within MAX_JSON_DEPTH; anything else as is.
 *
 * @example
 * parseJsonText('{"q":1}', 'input.value');            // { q: 1 }
 * parseJsonText('['.repeat(600) + ']'.repeat(600), 'input.value'); // TooDeepJsonText
 * parseJsonText('plain', 'input.value');              // 'plain'
 */
export function parseJsonText(value: unknown, key: string): unknown {
  if (typeof value !== 'string' || value.length < 2) return value;
  const first = value.charCodeAt(0);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) return value;
  let parsed: object;
  try {
    parsed = JSON.parse(value) as object;
  } catch {
    return value;
  }
  // A text nests at most half its length deep (a container takes two characters), and a key has
  // at most key.length + 1 segments: a text that fits even so needs neither counting nor a walk.
  if ((value.length >> 1) <= MAX_JSON_DEPTH - DEEPEST_ATTRIBUTES_DEPTH - (key.length + 1)) return parsed;
  return parsedIfShallowEnough(value, parsed, key);
}

/** `parsed`, or a {@link TooDeepJsonText} when it nests too deep for `key` (the walk, for long texts). */
function parsedIfShallowEnough(text: string, parsed: object, key: string): unknown {
  const levels = MAX_JSON_DEPTH - DEEPEST_ATTRIBUTES_DEPTH - segmentCount(key);
  if (!nestsDeeperThan(parsed, levels)) return parsed;
  return new TooDeepJsonText(text, `${key}: JSON text nested deeper than ${levels} levels, kept as text`);
}

/** Dot-separated segments of an attribute key (where unflattening nests its value). */
function segmentCount(key: string): number {
  let count = 1;
  for (let at = key.indexOf('.'); at !== -1; at = key.indexOf('.', at + 1)) count++;
  return count;
}
