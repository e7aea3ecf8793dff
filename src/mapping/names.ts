/**
 * `op_name` and `display_name` within the service's limits (SPEC §2.1: 128 and 1024 characters).
 *
 * Over-long names are shortened the way the hosted service shortens them: at a delimiter where
 * one falls near the limit, so a name stays readable, and an op name ends with `:` plus the first
 * 4 hex characters of SHA-256 of the full name, so two long names that share a prefix stay apart.
 * Lengths are counted in UTF-16 units (what the local server checks) and a cut never splits a
 * surrogate pair; for names without astral characters this equals the hosted service's count.
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
  if (spanName.length <= MAX_OP_NAME_LENGTH) return spanName;
  const digest = createHash('sha256').update(spanName, 'utf8').digest('hex');
  return shortenName(spanName, MAX_OP_NAME_LENGTH, `:${digest.slice(0, 4)}`, false);
}

/** The `display_name` for a `wandb.display_name` value: shortened with `...` past 1024 characters. */
export function toDisplayName(name: string): string {
  return shortenName(name, MAX_DISPLAY_NAME_LENGTH, '...', true);
}

const DELIMITERS = new Set([',', ';', '|', ' ', '/', '?', '.']);

/**
 * Shortens `name` to at most `maxLength` characters ending with `suffix`, cutting after the last
 * whole word that fits (words are separated by `, ; | space / ? .`). With `delimiterBeforeSuffix`
 * the delimiter that followed the last kept word is kept before the suffix (`hello/...`).
 */
export function shortenName(name: string, maxLength: number, suffix: string, delimiterBeforeSuffix: boolean): string {
  if (name.length <= maxLength) return name;
  const room = maxLength - suffix.length;
  const parts = splitKeepingDelimiters(name);
  if (parts.length <= 1) return cutAt(name, room) + suffix;

  let shortened = parts[0]!;
  if (shortened.length > room) return cutAt(shortened, room) + suffix;
  let i = 1;
  while (i < parts.length) {
    let delimiters = '';
    while (i < parts.length && DELIMITERS.has(parts[i]!)) delimiters += parts[i++]!;
    // A name ending in delimiters has no word after them: they are the last part.
    const nextPart = delimiters + (parts[i] ?? '');
    const ending =
      suffix.length === 0 ? '' : suffix.startsWith(delimiters) || !delimiterBeforeSuffix ? suffix : delimiters + suffix;
    if (shortened.length + nextPart.length >= maxLength - ending.length) {
      shortened += ending;
      break;
    }
    shortened += nextPart;
    i++;
  }
  // A long run of delimiters before the suffix can overshoot; the limit is a hard one.
  return shortened.length <= maxLength ? shortened : cutAt(name, room) + suffix;
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

/** The first `length` UTF-16 units of `text`, one fewer if the cut would split a surrogate pair. */
function cutAt(text: string, length: number): string {
  if (length <= 0) return '';
  const last = text.charCodeAt(length - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? length - 1 : length;
  return text.slice(0, end);
}
