/**
 * The text of a JSON request body, one rule for every route (the app's JSON parser and OTLP/JSON
 * ingest): the bytes must be valid UTF-8 (RFC 8259 §8.1), and a leading byte order mark is dropped.
 * A lenient decode would store a stray byte as U+FFFD and acknowledge it with a 200: data changed
 * without a word.
 */
import { isUtf8 } from 'node:buffer';

/** The reason a body that is not valid UTF-8 is refused with (a 400). */
export const NOT_UTF8_REASON = 'not valid UTF-8';

const BYTE_ORDER_MARK = 0xfeff;

/**
 * Whether a JSON body's bytes are valid UTF-8. Validating (simdutf, 0.04 ms per 1 MB batch) and
 * then decoding (0.65 ms) costs less than a fatal TextDecoder (0.66-1.4 ms, measured), with the
 * same verdict: both follow the WHATWG definition of valid UTF-8.
 */
export function isUtf8Body(bytes: Uint8Array): boolean {
  return isUtf8(bytes);
}

/**
 * The text of bytes {@link isUtf8Body} accepted, without a leading byte order mark (as a
 * TextDecoder drops it).
 *
 * @example
 * if (!isUtf8Body(bytes)) throw new BadRequestError(`Malformed JSON body: ${NOT_UTF8_REASON}`);
 * JSON.parse(utf8BodyText(bytes));
 */
export function utf8BodyText(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return text.charCodeAt(0) === BYTE_ORDER_MARK ? text.slice(1) : text;
}
