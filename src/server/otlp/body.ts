/**
 * The body of an OTLP/HTTP request before decoding: which encoding it is in (Content-Type) and
 * its bytes after Content-Encoding is undone.
 */
import { gunzip } from 'node:zlib';
import { BadRequestError, HttpError } from '../errors.js';

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

/**
 * The coding a `Content-Encoding` names (none means `identity`); 415 for codings other than gzip.
 *
 * @example
 * contentCodingOf('gzip'); // 'gzip'
 */
export function contentCodingOf(contentEncoding: string | undefined): 'identity' | 'gzip' {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') return 'identity';
  if (encoding === 'gzip' || encoding === 'x-gzip') return 'gzip';
  throw new HttpError(415, `Unsupported Content-Encoding ${JSON.stringify(encoding.slice(0, 100))}: send gzip or no encoding`);
}

/**
 * The body with its `Content-Encoding` undone: as it is for none or `identity`, gunzipped for
 * `gzip`; 415 for other encodings.
 *
 * Decompression stops once the output passes `maxBytes` (413), so a small gzip bomb cannot expand
 * into more memory than an uncompressed body could take; it runs on libuv's thread pool, not the
 * event loop.
 *
 * @example
 * const bytes = await decodeContentEncoding(body, request.headers['content-encoding'], 32 * 1024 * 1024);
 */
export async function decodeContentEncoding(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Promise<Buffer> {
  if (contentCodingOf(contentEncoding) === 'identity') return body;
  return new Promise((resolve, reject) => {
    gunzip(body, { maxOutputLength: maxBytes }, (error, result) => {
      if (error === null) resolve(result);
      else if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') reject(new HttpError(413, 'Request too large'));
      else reject(new BadRequestError('Malformed gzip body'));
    });
  });
}
