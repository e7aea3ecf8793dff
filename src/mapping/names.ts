/**
 * `op_name` and `display_name` within the service's limits (SPEC §2.1: 128 and 1024 characters).
 *
 * Over-long names are shortened the way the hosted service shortens them: at a delimiter where
 * one falls near the limit, so a name stays readable, and an op name ends with `:` plus the first
 * 4 hex characters of SHA-256 of the full name, so two long names that share a prefix stay apart.
 * Lengths are counted in characters (code points), as SPEC §3, the local server's check
 * (`checkNameLength`) and the hosted service's Python count them, so a cut never splits a
 * surrogate pair. A name with astral characters (emoji) is cut only past 128 of them, not past
 * 128 UTF-16 units.
 */
import { createHash } from 'node:crypto';

/** Longest `op_name` the service accepts. */
export const MAX_OP_NAME_LENGTH = 128;
/** Longest `display_name` the service accepts. */
export const MAX_DISPLAY_NAME_LENGTH = 1024;

/**
 * The `op_name` for a span name: the name itself, or for a name over 128 characters a shortened
 * name ending with `:` + 4 hex characters of its SHA-256.
 *
 * @example
 * toOpName('chat'); // 'chat'
 * toOpName('x'.repeat(200)); // 'xxx…x:' + 4 hex characters, 128 characters in all
 */
export function toOpName(spanName: string): string {
  if (!isLongerThan(spanName, MAX_OP_NAME_LENGTH)) return spanName;
  const digest = createHash('sha256').update(spanName, 'utf8').digest('hex');
  return shortenName(spanName, MAX_OP_NAME_LENGTH, `:${digest.slice(0, 4)}`, false);
}

/** The `display_name` for a `wandb.display_name` value: shortened with `...` past 1024 characters. */
export function toDisplayName(name: string): string {
  return shortenName(name, MAX_DISPLAY_NAME_LENGTH, '...', true);
}

const DELIMITERS = new Set([',', ';', '|', ' ', '/', '?', '.']);

/**
 * Shortens `name` to at most `maxLength` characters (code points) ending with `suffix`, cutting
 * after the last whole word that fits (words are separated by `, ; | space / ? .`). With
 * `delimiterBeforeSuffix` the delimiter that followed the last kept word is kept before the
 * suffix (`hello/...`).
 */
export function shortenName(name: string, maxLength: number, suffix: string, delimiterBeforeSuffix: boolean): string {
  if (!isLongerThan(name, maxLength)) return name;
  const room = maxLength - codePointCount(suffix);
  const parts = splitKeepingDelimiters(name);
  if (parts.length <= 1) return firstCodePoints(name, room) + suffix;

  let shortened = parts[0]!;
  let shortenedLength = codePointCount(shortened);
  if (shortenedLength > room) return firstCodePoints(shortened, room) + suffix;
  let i = 1;
  while (i < parts.length) {
    let delimiters = '';
    while (i < parts.length && DELIMITERS.has(parts[i]!)) delimiters += parts[i++]!;
    // A name ending in delimiters has no word after them: they are the last part.
    const nextPart = delimiters + (parts[i] ?? '');
    const nextLength = codePointCount(nextPart);
    const ending =
      suffix.length === 0 ? '' : suffix.startsWith(delimiters) || !delimiterBeforeSuffix ? suffix : delimiters + suffix;
    const endingLength = codePointCount(ending);
    if (shortenedLength + nextLength >= maxLength - endingLength) {
      shortened += ending;
      shortenedLength += endingLength;
      break;
    }
    shortened += nextPart;
    shortenedLength += nextLength;
    i++;
  }
  // A long run of delimiters before the suffix can overshoot; the limit is a hard one.
  return shortenedLength <= maxLength ? shortened : firstCodePoints(name, room) + suffix;
}

/** Words and single delimiter characters, in order, without empty strings. */
function splitKeepingDelimiters(name: string): string[] {
  const parts: string[] = [];
  let wordStart = 0;
  for (let i = 0; i < name.length; i++) {
    const char = name[i]!;
    if (!DELIMITERS.has(char)) continue;
    if (i > wordStart) parts.push(name.slice(wordStart, i));
    parts.push(char);
    wordStart = i + 1;
  }
  if (wordStart < name.length) parts.push(name.slice(wordStart));
  return parts;
}

/**
 * Whether `text` has more than `limit` code points. A string has at least as many UTF-16 units as
 * code points, so the short names of nearly every span are answered without counting.
 */
function isLongerThan(text: string, limit: number): boolean {
  return text.length > limit && codePointCount(text) > limit;
}

/** Code points in `text`: a surrogate pair counts once, a lone surrogate once (as `[...text]`). */
function codePointCount(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    if (isSurrogatePairAt(text, i)) {
      count--;
      i++;
    }
  }
  return count;
}

/** The first `count` code points of `text`; never ends inside a surrogate pair. */
function firstCodePoints(text: string, count: number): string {
  let end = 0;
  for (let taken = 0; taken < count && end < text.length; taken++) end += isSurrogatePairAt(text, end) ? 2 : 1;
  return text.slice(0, end);
}

function isSurrogatePairAt(text: string, index: number): boolean {
  const high = text.charCodeAt(index);
  if (high < 0xd800 || high > 0xdbff) return false;
  const low = text.charCodeAt(index + 1);
  return low >= 0xdc00 && low <= 0xdfff;
}
