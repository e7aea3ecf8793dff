/**
 * Request bodies sent with a `Content-Encoding` (SPEC §2.5 is silent): none, `identity` and `gzip`
 * are read on the JSON routes and OTLP ingest (OTLP exporters can gzip; any HTTP client may);
 * anything else is a 415 naming the coding, rather than a body read as if it were plain JSON.
 * (`/file/create`'s multipart form is read uncompressed only.)
 */
import { gunzip } from 'node:zlib';
import { BadRequestError, HttpError } from './errors.js';

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
