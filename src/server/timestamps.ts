/**
 * Timestamps as the service takes and gives them (SPEC §2): ISO 8601 in, with `Z`, an offset or
 * nothing (naive = UTC); out always UTC with microseconds (`2026-01-02T03:04:05.123456Z`).
 * JavaScript's Date stops at milliseconds, so the parser keeps the microseconds itself.
 */

/** A parsed instant: canonical text (fixed width, so text order is time order) and µs since epoch. */
export interface Instant {
  readonly text: string;
  readonly micros: number;
}

const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,12}))?)?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

/**
 * Parse an ISO 8601 date-time (or date) into an `Instant`; null when the text is not one, or
 * names a day or time that does not exist, or falls outside years 0001-9999 in UTC.
 * Digits past the microsecond are dropped (truncated, as Python's `datetime` does).
 *
 * @example
 * parseTimestamp('2026-01-02T05:04:05.1234567+02:00')?.text; // '2026-01-02T03:04:05.123456Z'
 */
export function parseTimestamp(value: string): Instant | null {
  const match = ISO_8601.exec(value);
  if (match === null) return null;
  const [, y, mo, d, h = '0', mi = '0', s = '0', fraction = '', , sign, offH, offM] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  if (day > daysInMonth(year, month)) return null; // 31 April, 29 February of a common year
  // Whole seconds and the microseconds within them, both exact: µs since the epoch are not (past
  // 2^53, about year 2255, a double steps by more than 1 µs), so the range check and the text
  // are worked out from these, and `micros` is the nearest double.
  let seconds = utcMillis(year, month, day, hour, minute, second) / 1000;
  const subMicros = Number(fraction.slice(0, 6).padEnd(6, '0'));
  if (sign !== undefined) {
    const offsetHours = Number(offH);
    const offsetMinutes = Number(offM);
    if (offsetHours > 23 || offsetMinutes > 59) return null;
    const offset = (offsetHours * 60 + offsetMinutes) * 60;
    seconds += sign === '+' ? -offset : offset;
  }
  if (seconds < MIN_SECONDS || seconds >= END_SECONDS) return null;
  const micros = seconds * 1_000_000 + subMicros;
  // Clients (our exporter among them) mostly send the canonical form already: keep the text.
  return { text: isCanonical(value, fraction, sign) ? value : formatSeconds(seconds, subMicros), micros };
}

/** Canonical text of `seconds` since the epoch (whole, years 0001-9999) and `subMicros` (0-999999). */
function formatSeconds(seconds: number, subMicros: number): string {
  const iso = new Date(seconds * 1000).toISOString(); // YYYY-MM-DDTHH:MM:SS.000Z
  return `${iso.slice(0, 20)}${String(subMicros).padStart(6, '0')}Z`;
}

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ` exactly (the regex has checked the digits' places). */
function isCanonical(value: string, fraction: string, sign: string | undefined): boolean {
  return (
    value.length === 27 &&
    fraction.length === 6 &&
    sign === undefined &&
    value.charCodeAt(10) === 84 && // 'T'
    value.charCodeAt(19) === 46 && // '.'
    value.charCodeAt(26) === 90 // 'Z'
  );
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return month === 2 && leap ? 29 : (DAYS_IN_MONTH[month - 1] as number);
}

/**
 * Milliseconds since the epoch of a valid UTC date and time. Date.UTC (no Date object: this runs
 * twice per call written) except for years 0-99, which Date.UTC would read as 1900-1999.
 */
function utcMillis(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  if (year >= 100) return Date.UTC(year, month - 1, day, hour, minute, second);
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime();
}

/** First second of year 1 and of year 10000 (UTC): canonical text has four year digits. */
const MIN_SECONDS = utcYearStart(1) / 1000;
const END_SECONDS = utcYearStart(10000) / 1000;
/** The same in µs, for instants given as a number (instantFromSeconds). */
const MIN_MICROS = MIN_SECONDS * 1_000_000;
const END_MICROS = END_SECONDS * 1_000_000;

function utcYearStart(year: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, 0, 1);
  return date.getTime();
}

/**
 * Canonical text of an instant given in µs since the epoch: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
 *
 * @example
 * formatMicros(1767323045123456); // '2026-01-02T03:04:05.123456Z'
 */
export function formatMicros(micros: number): string {
  let millis = Math.floor(micros / 1000);
  let subMillis = Math.round(micros - millis * 1000);
  // Past 2^53 µs (about year 2255) doubles step by more than 1 µs and the product can round past
  // `micros`: keep the digits within 000-999 (the text stays canonical; those µs are lost anyway).
  if (subMillis < 0) {
    millis -= 1;
    subMillis += 1000;
  } else if (subMillis > 999) {
    millis += 1;
    subMillis -= 1000;
  }
  const iso = new Date(millis).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ for years 0-9999
  return `${iso.slice(0, -1)}${String(subMillis).padStart(3, '0')}Z`;
}

/**
 * The instant `seconds` after the epoch (Unix time; a fraction counts to the microsecond, rounded),
 * or null when it is not finite or falls outside years 0001-9999 in UTC.
 *
 * @example
 * instantFromSeconds(1767225600.25)?.text; // '2026-01-01T00:00:00.250000Z'
 */
export function instantFromSeconds(seconds: number): Instant | null {
  if (!Number.isFinite(seconds)) return null;
  const micros = Math.round(seconds * 1_000_000);
  if (micros < MIN_MICROS || micros >= END_MICROS) return null;
  return { text: formatMicros(micros), micros };
}

/** The current instant, at the microsecond resolution of `performance.timeOrigin + now()`. */
export function nowInstant(): Instant {
  const micros = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  return { text: formatMicros(micros), micros };
}
