/**
 * A stored table row's text, navigated by refs that read values inside the row. The text is the
 * row as its digest hashes it (Python's `json.dumps`, `table-bodies.ts`), so a value answered from
 * it keeps its number spelling (`1.0`, integers past 2^53), which a parse into JavaScript changes.
 * Each container a request steps into is scanned once for where its members or items start: a
 * scan per ref and step cost 11 s for 1000 refs into one 8 MB row.
 */
import { endOfValue, itemStarts, memberStarts } from '../python-json.js';

export class RowText {
  readonly #members = new Map<number, Map<string, number> | undefined>();
  readonly #items = new Map<number, number[] | undefined>();

  constructor(readonly text: string) {}

  /** Where member `key` of the object starting at `start` starts; undefined when it has none. */
  member(start: number, key: string): number | undefined {
    let starts = this.#members.get(start);
    if (starts === undefined && !this.#members.has(start)) {
      starts = memberStarts(this.text, start);
      this.#members.set(start, starts);
    }
    return starts?.get(key);
  }

  /**
   * Where item `index` of the array starting at `start` starts (a negative index counts from the
   * end, as Python's); undefined when there is no such item.
   */
  item(start: number, index: number): number | undefined {
    let starts = this.#items.get(start);
    if (starts === undefined && !this.#items.has(start)) {
      starts = itemStarts(this.text, start);
      this.#items.set(start, starts);
    }
    if (starts === undefined) return undefined;
    return starts[index < 0 ? index + starts.length : index];
  }

  /** The JSON text of the value starting at `start` (0: the whole row). */
  valueAt(start: number): string {
    return start === 0 ? this.text : this.text.slice(start, endOfValue(this.text, start));
  }
}
