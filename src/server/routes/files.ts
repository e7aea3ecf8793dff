/**
 * `/file/create` (multipart/form-data: field `project_id`, file part `file`) and `/file/content`
 * (SPEC §2.6).
 *
 * The multipart parser is registered in a child scope holding only `/file/create`, so no other
 * route accepts multipart bodies. It reads the request stream itself, so Fastify's `bodyLimit` does
 * not bound it, and its own limits bound parts, not bytes: a preamble, a part without a name or the
 * rest of an over-long field are read through whatever their length. So the body as a whole is
 * held to the server's body limit here ({@link limitBodyBytes}): 413, as on every other route.
 */
import type { IncomingMessage } from 'node:http';
import multipart, { type Multipart } from '@fastify/multipart';
import { contentCodingOf } from '../content-encoding.js';
import type { FastifyRequest } from 'fastify';
import type { RouteModule, ServerContext } from '../context.js';
import { BadRequestError, HttpError, ValidationError } from '../errors.js';
import { quote } from '../quote.js';
import { createFileStore } from '../store/files.js';
import {
  FILE_CREATE_FILE_FIELD,
  FILE_CREATE_PROJECT_FIELD,
  FileContentReqSchema,
  type FileContentReq,
  type FileCreateRes,
} from '../../wire/files.js';

/** Longest `project_id` form field; project ids are short, anything longer is refused. */
const MAX_FIELD_BYTES = 4096;
/** One `project_id` field and one `file` part, with room for a few fields clients add. */
const MAX_FIELDS = 8;
const MAX_PARTS = MAX_FIELDS + 1;

/** What a body over the server's limit gets, as on every route (SPEC §2.5). */
const tooLarge = (): HttpError => new HttpError(413, 'Request too large');

/** The parser's limit errors, by code, with what we answer. */
const MULTIPART_LIMIT_ERRORS: Readonly<Record<string, () => HttpError>> = {
  FST_REQ_FILE_TOO_LARGE: () => tooLarge(),
  FST_FILES_LIMIT: () => new BadRequestError(`Send exactly one file part, named "${FILE_CREATE_FILE_FIELD}"`),
  FST_PARTS_LIMIT: () => new BadRequestError(`Too many parts: send a "${FILE_CREATE_PROJECT_FIELD}" field and one file part`),
  FST_FIELDS_LIMIT: () => new BadRequestError(`Too many fields: send a "${FILE_CREATE_PROJECT_FIELD}" field and one file part`),
  FST_PROTO_VIOLATION: () => new BadRequestError('Prototype property names are not allowed as multipart field names'),
};

export const filesRoutes: RouteModule = (app, ctx) => {
  const files = createFileStore(ctx.db);
  const maxBodyBytes = app.initialConfig.bodyLimit ?? 1024 * 1024;

  app.register(async (scope) => {
    await scope.register(multipart, {
      limits: {
        fileSize: maxBodyBytes,
        files: 1,
        fields: MAX_FIELDS,
        parts: MAX_PARTS,
        fieldSize: MAX_FIELD_BYTES,
        fieldNameSize: 100,
        headerPairs: 100,
      },
      throwFileSizeLimit: true,
    });

    scope.post('/file/create', async (request, reply): Promise<FileCreateRes> => {
      if (!request.isMultipart()) {
        throw new HttpError(
          415,
          `Unsupported content type: send multipart/form-data with "${FILE_CREATE_PROJECT_FIELD}" and "${FILE_CREATE_FILE_FIELD}"`,
        );
      }
      if (contentCodingOf(request.headers['content-encoding']) !== 'identity') {
        // The multipart parser reads the raw stream; the form's parts would be read as garbage.
        throw new HttpError(415, 'Unsupported Content-Encoding for multipart/form-data: send the form uncompressed');
      }
      let upload: Upload;
      try {
        upload = await readUpload(request, ctx, maxBodyBytes);
      } catch (error) {
        // Refused before the body's end. Node reads (and discards) what is left of a request it
        // answered, so the client, still sending, gets its answer; closing instead makes a client
        // still writing see a reset (EPIPE) rather than the 400 or 413 (seen on Node 24). Only a
        // body far past the limit (or of no declared length) is cut off: reading it would cost the
        // server an upload of any length, for at most requestTimeoutMs.
        if (!request.raw.complete && isCutOff(error, request, maxBodyBytes)) reply.header('Connection', 'close');
        throw error;
      }
      return { digest: files.create(upload.projectId, upload.content, upload.wbUserId) };
    });
  });

  app.post<{ Body: FileContentReq }>(
    '/file/content',
    { schema: { body: FileContentReqSchema } },
    async (request, reply) => {
      ctx.authorizeProject(request, request.body.project_id);
      const content = files.content(request.body.project_id, request.body.digest);
      return reply.type('application/octet-stream').send(content);
    },
  );
};

interface Upload {
  readonly projectId: string;
  readonly wbUserId: string;
  readonly content: Buffer;
}

/**
 * Read the parts of `/file/create`. The project is authorized as soon as its field arrives, so a
 * client that sends `project_id` first is refused before its file is read.
 */
async function readUpload(request: FastifyRequest, ctx: ServerContext, maxBodyBytes: number): Promise<Upload> {
  if (Number(request.headers['content-length']) > maxBodyBytes) throw tooLarge();
  let projectId: string | undefined;
  let wbUserId: string | undefined;
  let content: Buffer | undefined;
  const stopLimiting = limitBodyBytes(request.raw, maxBodyBytes);
  try {
    for await (const part of request.parts()) {
      if (part.type === 'field') {
        if (part.fieldname !== FILE_CREATE_PROJECT_FIELD) continue;
        projectId = fieldText(part);
        wbUserId = ctx.authorizeProject(request, projectId);
      } else if (part.fieldname === FILE_CREATE_FILE_FIELD) {
        content = await part.toBuffer();
      } else {
        part.file.resume();
        throw new BadRequestError(`Unexpected file part ${quote(part.fieldname)}: send the file as "${FILE_CREATE_FILE_FIELD}"`);
      }
    }
  } catch (error) {
    throw asClientError(error);
  } finally {
    stopLimiting();
  }
  const missing = [
    ...(projectId === undefined ? [FILE_CREATE_PROJECT_FIELD] : []),
    ...(content === undefined ? [FILE_CREATE_FILE_FIELD] : []),
  ];
  if (projectId === undefined || wbUserId === undefined || content === undefined) {
    // FastAPI answers a missing form field with 422 and its `loc`; so does the hosted service.
    throw new ValidationError(
      missing.map((field) => ({ type: 'missing', loc: ['body', field], msg: 'Field required', input: null })),
    );
  }
  return { projectId, wbUserId, content };
}

/**
 * Whether a refused upload's connection is closed rather than its rest read: a 413 for a body of
 * no declared length (chunked), or of more than twice the limit. A body a little over the limit
 * is read to its end, so that its client sees the 413.
 */
function isCutOff(error: unknown, request: FastifyRequest, maxBodyBytes: number): boolean {
  if (!(error instanceof HttpError) || error.status !== 413) return false;
  const declared = Number(request.headers['content-length']);
  return !(declared > 0 && declared <= 2 * maxBodyBytes);
}

/**
 * Counts the bytes of `body` as the multipart parser reads them and, past `maxBytes`, stops it with
 * a 413: unpiped and failed through the `error` event it listens to on the request, which ends the
 * part being read and the iteration of parts with that error. Must be called in the same tick as
 * `request.parts()` starts, before the body flows, so that no chunk passes uncounted. Returns the
 * function that stops counting.
 */
function limitBodyBytes(body: IncomingMessage, maxBytes: number): () => void {
  let received = 0;
  const count = (chunk: Buffer): void => {
    received += chunk.length;
    if (received <= maxBytes) return;
    body.off('data', count);
    // The parser listens from the moment parts are asked for; without a listener, emitting would throw.
    if (body.listenerCount('error') === 0) return void body.destroy();
    body.emit('error', tooLarge());
    // Nothing reads the stream any more: pausing leaves the rest of the body unread until the
    // connection is closed after the 413.
    body.pause();
  };
  body.on('data', count);
  return () => body.off('data', count);
}

function fieldText(part: Multipart & { type: 'field' }): string {
  if (part.valueTruncated) {
    throw new BadRequestError(`Field "${FILE_CREATE_PROJECT_FIELD}" is longer than ${MAX_FIELD_BYTES} bytes`);
  }
  if (typeof part.value !== 'string') throw new BadRequestError(`Field "${FILE_CREATE_PROJECT_FIELD}" must be text`);
  return part.value;
}

/**
 * Errors while reading parts are the client's: our own HTTP errors pass through, the parser's
 * limit errors get our answers, and anything else the parser throws (a missing boundary, a
 * truncated body, bad part headers) is a malformed body.
 */
function asClientError(error: unknown): unknown {
  if (error instanceof HttpError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const known = typeof code === 'string' && Object.hasOwn(MULTIPART_LIMIT_ERRORS, code) ? MULTIPART_LIMIT_ERRORS[code] : undefined;
  if (known !== undefined) return known();
  return new BadRequestError('Malformed multipart/form-data body');
}
