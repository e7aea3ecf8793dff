/**
 * Last resort for one record that is too large to send (SPEC §4.6): cut its largest string values,
 * each ending with `…[truncated N bytes]`, until its JSON fits a byte budget.
 */

/** Strings are never cut below this many characters: a cut value should still say what it was. */
const MIN_KEPT_CHARS = 64;
/** Rounds of cutting before giving up (each round re-measures the real JSON size). */
const MAX_ROUNDS = 3;

interface StringSlot {
  readonly holder: Record<string, unknown> | unknown[];
  readonly key: string | number;
  readonly value: string;
  readonly bytes: number;
}

/**
 * Return a copy of `value` (plain JSON data, as `JSON.parse` gives) whose JSON text is at most
 * `maxBytes` UTF-8 bytes, obtained by cutting its largest strings; `undefined` when cutting every
 * string down to `MIN_KEPT_CHARS` is still not enough. With `bestEffort`, that case gives the
 * copy cut as far as the strings allow instead (`undefined` only when no string could be cut).
 * The input is not modified.
 *
 * @example truncateLargestStrings({ a: 'x'.repeat(10_000) }, 1000) // { a: 'xxx…[truncated 9xxx bytes]' }
 */
export function truncateLargestStrings<T>(value: T, maxBytes: number, options: { bestEffort?: boolean } = {}): T | undefined {
  const copy = JSON.parse(JSON.stringify(value)) as T;
  let cutEver = false;
  // JSON escaping makes the byte saving of a cut an estimate, so measure again after each round.
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    let excess = Buffer.byteLength(JSON.stringify(copy)) - maxBytes;
    if (excess <= 0) return copy;
    const slots = collectStrings(copy).sort((a, b) => b.bytes - a.bytes);
    let cutAny = false;
    for (const slot of slots) {
      if (excess <= 0) break;
      const cut = cutString(slot.value, slot.bytes, excess);
      if (cut === undefined) continue;
      (slot.holder as Record<string | number, unknown>)[slot.key] = cut.text;
      excess -= cut.saved;
      cutAny = true;
    }
    cutEver ||= cutAny;
    if (!cutAny) break;
  }
  if (Buffer.byteLength(JSON.stringify(copy)) <= maxBytes) return copy;
  return options.bestEffort === true && cutEver ? copy : undefined;
}

function collectStrings(root: unknown): StringSlot[] {
  const slots: StringSlot[] = [];
  const visit = (holder: Record<string, unknown> | unknown[], key: string | number, child: unknown): void => {
    if (typeof child === 'string') {
      if (child.length > MIN_KEPT_CHARS) slots.push({ holder, key, value: child, bytes: Buffer.byteLength(child) });
    } else if (Array.isArray(child)) {
      child.forEach((element, index) => visit(child, index, element));
    } else if (child !== null && typeof child === 'object') {
      for (const [name, nested] of Object.entries(child)) visit(child as Record<string, unknown>, name, nested);
    }
  };
  visit({ root }, 'root', root);
  return slots;
}

/** Cut `text` so it saves about `wanted` bytes (but keeps at least MIN_KEPT_CHARS characters). */
function cutString(text: string, bytes: number, wanted: number): { text: string; saved: number } | undefined {
  // Room for the marker itself, whose digit count we do not know yet: 32 bytes is ample.
  const keepBytes = Math.max(0, bytes - wanted - 32);
  let keepChars = Math.max(MIN_KEPT_CHARS, Math.floor((text.length * keepBytes) / bytes));
  if (keepChars >= text.length) return undefined;
  // Never leave half of a surrogate pair at the cut.
  const last = text.charCodeAt(keepChars - 1);
  if (last >= 0xd800 && last <= 0xdbff) keepChars -= 1;
  const kept = text.slice(0, keepChars);
  const removed = bytes - Buffer.byteLength(kept);
  const result = `${kept}…[truncated ${removed} bytes]`;
  const saved = bytes - Buffer.byteLength(result);
  return saved > 0 ? { text: result, saved } : undefined;
}
