/**
 * The stored text of a table row or an object's value, navigated by refs that read values inside
 * it. The text is the value as its digest hashes it (Python's `json.dumps`, `digest-bodies.ts`;
 * objects stored by older versions, and those given a `builtin_object_class`, hold
 * `JSON.stringify`'s text), so a value answered from it keeps its number spelling (`1.0`,
 * integers past 2^53), which a parse into JavaScript changes; and the value is never parsed whole.
 *
 * Where every object and list ends is found in one pass over the text, when a ref first steps
 * into it; each container a request steps into is then read once for where its members or items
 * start, skipping nested containers by their recorded ends. A path of any depth costs one pass
 * over the text, not one per step (a scan per step cost 6.5 s for 240 levels over a 20 MB string,
 * and a scan per ref and step 11 s for 1000 refs into one 8 MB row).
 */
import { canonicalJson } from '../../wire/digest.js';
import { endOfLiteral, endOfString, skipWhitespace } from '../python-json.js';
import { CLOSE_BRACE, CLOSE_BRACKET, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE } from '../verbatim-json.js';

/** What a ref string met in a value starts with, as either writer spells it (neither escapes `/`). */
const REF_TEXT_PREFIX = '"weave:///';

export class StoredText {
  /** Starts of every object and list, in text order, and where each ends (past its closing bracket). */
  #containerStarts: number[] | undefined;
  #containerEnds: number[] = [];
  readonly #members = new Map<number, Map<string, number> | undefined>();
  /** Objects looked into once, by a scan for one key. */
  readonly #scanned = new Set<number>();
  readonly #items = new Map<number, number[] | undefined>();

  constructor(readonly text: string) {}

  /** Where the value starts. */
  get start(): number {
    return skipWhitespace(this.text, 0);
  }

  /**
   * Where member `key` of the object starting at `start` starts; undefined when it has none. The
   * first lookup in an object scans it for that key alone; a second one indexes all its members
   * (an object of millions of keys read once is not indexed in memory).
   */
  member(start: number, key: string): number | undefined {
    const starts = this.#members.get(start);
    if (starts !== undefined || this.#members.has(start)) return starts?.get(key);
    if (!this.#scanned.has(start)) {
      this.#scanned.add(start);
      return this.#scanForMember(start, key);
    }
    const indexed = this.#memberStarts(start);
    this.#members.set(start, indexed);
    return indexed?.get(key);
  }

  /**
   * Where item `index` of the array starting at `start` starts (a negative index counts from the
   * end, as Python's); undefined when there is no such item.
   */
  item(start: number, index: number): number | undefined {
    let starts = this.#items.get(start);
    if (starts === undefined && !this.#items.has(start)) {
      starts = this.#itemStarts(start);
      this.#items.set(start, starts);
    }
    if (starts === undefined) return undefined;
    return starts[index < 0 ? index + starts.length : index];
  }

  /** The string starting at `start` when it is a ref (`weave:///...`), else undefined. */
  refAt(start: number): string | undefined {
    if (!this.text.startsWith(REF_TEXT_PREFIX, start)) return undefined;
    return JSON.parse(this.text.slice(start, endOfString(this.text, start))) as string;
  }

  /** The JSON text of the value starting at `start`. */
  valueAt(start: number): string {
    return this.text.slice(start, this.#endOf(start));
  }

  /** Member starts of the object at `start`, by key (a repeated key: its last one, as JSON.parse keeps). */
  #memberStarts(start: number): Map<string, number> | undefined {
    const text = this.text;
    if (text.charCodeAt(start) !== OPEN_BRACE) return undefined;
    const starts = new Map<string, number>();
    let at = skipWhitespace(text, start + 1);
    if (text.charCodeAt(at) === CLOSE_BRACE) return starts;
    for (;;) {
      const keyEnd = endOfString(text, at);
      const token = text.slice(at, keyEnd);
      const key = token.includes('\\') ? (JSON.parse(token) as string) : token.slice(1, -1);
      const valueStart = skipWhitespace(text, skipWhitespace(text, keyEnd) + 1); // past ':'
      starts.set(key, valueStart);
      at = skipWhitespace(text, this.#endOf(valueStart));
      if (text.charCodeAt(at) !== COMMA) return starts;
      at = skipWhitespace(text, at + 1);
    }
  }

  /**
   * Where member `key` of the object at `start` starts, by a scan comparing each key as the text
   * spells it (`json.dumps` writes a key one way only, and so does `JSON.stringify`), keeping the
   * last, as JSON.parse does.
   */
  #scanForMember(start: number, key: string): number | undefined {
    const text = this.text;
    if (text.charCodeAt(start) !== OPEN_BRACE) return undefined;
    const python = canonicalJson(key);
    const javascript = JSON.stringify(key);
    const spelledAt = (at: number, length: number): boolean =>
      (length === python.length && text.startsWith(python, at)) || (length === javascript.length && text.startsWith(javascript, at));
    let found: number | undefined;
    let at = skipWhitespace(text, start + 1);
    if (text.charCodeAt(at) === CLOSE_BRACE) return undefined;
    for (;;) {
      const keyEnd = endOfString(text, at);
      const valueStart = skipWhitespace(text, skipWhitespace(text, keyEnd) + 1); // past ':'
      if (spelledAt(at, keyEnd - at)) found = valueStart;
      at = skipWhitespace(text, this.#endOf(valueStart));
      if (text.charCodeAt(at) !== COMMA) return found;
      at = skipWhitespace(text, at + 1);
    }
  }

  /** Item starts of the array at `start`. */
  #itemStarts(start: number): number[] | undefined {
    const text = this.text;
    if (text.charCodeAt(start) !== OPEN_BRACKET) return undefined;
    const starts: number[] = [];
    let at = skipWhitespace(text, start + 1);
    if (text.charCodeAt(at) === CLOSE_BRACKET) return starts;
    for (;;) {
      starts.push(at);
      at = skipWhitespace(text, this.#endOf(at));
      if (text.charCodeAt(at) !== COMMA) return starts;
      at = skipWhitespace(text, at + 1);
    }
  }

  /** Where the value starting at `start` ends: a container by its recorded end, a string or literal by a scan of itself. */
  #endOf(start: number): number {
    const text = this.text;
    const code = text.charCodeAt(start);
    if (code === OPEN_BRACE || code === OPEN_BRACKET) return this.#containerEnd(start);
    if (code === QUOTE) return endOfString(text, start);
    return endOfLiteral(text, start);
  }

  #containerEnd(start: number): number {
    const starts = (this.#containerStarts ??= this.#findContainers());
    let low = 0;
    let high = starts.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const found = starts[middle] as number;
      if (found === start) return this.#containerEnds[middle] as number;
      if (found < start) low = middle + 1;
      else high = middle - 1;
    }
    throw new Error(`No object or list starts at ${start} of the stored text`);
  }

  /** One pass over the text: where each object and list starts and ends (strings skipped whole). */
  #findContainers(): number[] {
    const text = this.text;
    const starts: number[] = [];
    const ends = this.#containerEnds;
    const open: number[] = [];
    for (let at = 0; at < text.length; at++) {
      const code = text.charCodeAt(at);
      if (code === QUOTE) {
        at = endOfString(text, at) - 1;
      } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
        open.push(starts.length);
        starts.push(at);
        ends.push(-1);
      } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
        ends[open.pop() as number] = at + 1;
      }
    }
    return starts;
  }
}
