/**
 * HrTime -> `2026-01-02T03:04:05.123456Z` (SPEC §2: UTC, `Z`, microseconds).
 *
 * Written with integer arithmetic rather than through `Date`: a `Date` holds milliseconds only,
 * so the microseconds would have to be patched in anyway, and building one per timestamp costs
 * more than the arithmetic below (a span needs two, plus one per event).
 */
import type { HrTime } from './span-input.js';

const SECONDS_PER_DAY = 86_400;
const NANOS_PER_SECOND = 1_000_000_000;

const TWO_DIGITS: readonly string[] = Array.from({ length: 100 }, (_, n) => (n < 10 ? `0${n}` : `${n}`));

// Spans of one process mostly share a day: keep the last `YYYY-MM-DDT` prefix.
let cachedDay = Number.NaN;
let cachedDayPrefix = '';

/** First second of year 1 and of year 10000 (UTC): the service's timestamps are years 0001-9999. */
const MIN_SECONDS = -62_135_596_800;
const END_SECONDS = 253_402_300_800;

/**
 * Formats a span time as ISO 8601 UTC with exactly six fraction digits. Sub-microsecond digits are
 * cut, not rounded, so a time never moves past the next microsecond. Throws a `RangeError` for a
 * time that is not a finite number pair, or falls outside years 0001-9999, which the service
 * refuses (a start time given in microseconds where the SDK takes milliseconds lands in year
 * 57974); the mapping catches it and notes it.
 *
 * @example
 * hrTimeToIso([1767323045, 123456789]); // '2026-01-02T03:04:05.123456Z'
 */
export function hrTimeToIso(time: HrTime): string {
  let seconds = time[0];
  let nanos = time[1];
  if (!Number.isFinite(seconds) || !Number.isFinite(nanos)) {
    throw new RangeError(`span time is not a finite [seconds, nanoseconds] pair: [${String(seconds)}, ${String(nanos)}]`);
  }
  if (!Number.isInteger(seconds)) {
    const whole = Math.floor(seconds);
    nanos += (seconds - whole) * NANOS_PER_SECOND;
    seconds = whole;
  }
  if (nanos >= NANOS_PER_SECOND || nanos < 0) {
    const carry = Math.floor(nanos / NANOS_PER_SECOND);
    seconds += carry;
    nanos -= carry * NANOS_PER_SECOND;
  }
  if (seconds < MIN_SECONDS || seconds >= END_SECONDS) {
    throw new RangeError(`span time [${String(time[0])}, ${String(time[1])}] is outside years 0001-9999`);
  }
  const day = Math.floor(seconds / SECONDS_PER_DAY);
  let secondOfDay = seconds - day * SECONDS_PER_DAY;
  const hour = Math.floor(secondOfDay / 3600);
  secondOfDay -= hour * 3600;
  const minute = Math.floor(secondOfDay / 60);
  const second = secondOfDay - minute * 60;
  const micros = Math.floor(nanos / 1000);
  return (
    datePrefix(day) +
    TWO_DIGITS[hour] +
    ':' +
    TWO_DIGITS[minute] +
    ':' +
    TWO_DIGITS[second] +
    '.' +
    sixDigits(micros) +
    'Z'
  );
}

function sixDigits(value: number): string {
  const text = String(value);
  return text.length === 6 ? text : '000000'.slice(text.length) + text;
}

/** `YYYY-MM-DDT` for a count of days since 1970-01-01 (proleptic Gregorian calendar). */
function datePrefix(day: number): string {
  if (day === cachedDay) return cachedDayPrefix;
  // Days -> civil date, after Howard Hinnant's `civil_from_days` (eras of 400 years from 0000-03-01).
  const shifted = day + 719_468;
  const era = Math.floor(shifted / 146_097);
  const dayOfEra = shifted - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153);
  const dayOfMonth = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1;
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  cachedDayPrefix = `${String(year).padStart(4, '0')}-${TWO_DIGITS[month]}-${TWO_DIGITS[dayOfMonth]}T`;
  cachedDay = day;
  return cachedDayPrefix;
}

const NANOS_PER_SECOND_BIG = 1_000_000_000n;

/**
 * An OTLP `*_unix_nano` time (a 64-bit integer: bigint, decimal text, or a number, as decoders
 * give it) as an HrTime. Unreadable input gives `[NaN, NaN]`, which the mapping reports as a
 * mapping error on that call rather than throwing.
 *
 * @example
 * hrTimeFromUnixNanos('1767323045123456789'); // [1767323045, 123456789]
 */
export function hrTimeFromUnixNanos(nanos: bigint | string | number): HrTime {
  if (typeof nanos === 'number') {
    if (!Number.isFinite(nanos)) return [Number.NaN, Number.NaN];
    const seconds = Math.floor(nanos / NANOS_PER_SECOND);
    return [seconds, nanos - seconds * NANOS_PER_SECOND];
  }
  let big: bigint;
  try {
    big = typeof nanos === 'bigint' ? nanos : BigInt(nanos);
  } catch {
    return [Number.NaN, Number.NaN];
  }
  const seconds = big / NANOS_PER_SECOND_BIG;
  return [Number(seconds), Number(big - seconds * NANOS_PER_SECOND_BIG)];
}
