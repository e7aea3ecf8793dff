/**
 * The body of an OTLP/HTTP request before decoding: which encoding it is in (Content-Type). Its
 * Content-Encoding is undone as for every other route (`../content-encoding.ts`).
 */
import { HttpError } from '../errors.js';

/** The two OTLP/HTTP encodings. */
export type OtlpFormat = 'protobuf' | 'json';

const MEDIA_TYPES: Readonly<Record<string, OtlpFormat>> = {
  'application/x-protobuf': 'protobuf',
  'application/protobuf': 'protobuf',
  'application/json': 'json',
};

/** The `Content-Type` each format answers with. */
export const RESPONSE_CONTENT_TYPES: Readonly<Record<OtlpFormat, string>> = {
  protobuf: 'application/x-protobuf',
  json: 'application/json; charset=utf-8',
};

/**
 * The encoding a `Content-Type` names; 415 for anything else.
 *
 * @example
 * formatOf('application/json; charset=utf-8'); // 'json'
 */
export function formatOf(contentType: string | undefined): OtlpFormat {
  const mediaType = (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
  const format = Object.hasOwn(MEDIA_TYPES, mediaType) ? MEDIA_TYPES[mediaType] : undefined;
  if (format === undefined) {
    const named = mediaType === '' ? 'no content type' : `content type ${JSON.stringify(mediaType.slice(0, 100))}`;
    throw new HttpError(415, `Unsupported ${named}: send application/x-protobuf or application/json`);
  }
  return format;
}
