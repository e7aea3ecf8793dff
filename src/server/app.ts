/**
 * The server's Fastify instance: authentication on every route but `GET /health`, JSON bodies,
 * the route modules of `routes/index.ts`, and the one error handler that turns every failure into
 * a body of SPEC §2.5. Nothing else lives here: routes are in `routes/`, storage in `store/`.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { SqliteDatabase } from './store/sqlite.js';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { authorizeUserForProject, createAuthenticator } from './auth.js';
import { checkBeforeBody } from './before-body.js';
import { createBodyValidatorCompiler } from './body-validation.js';
import { contentCodingOf, decodeContentEncoding } from './content-encoding.js';
import type { ServerContext, ServerUser } from './context.js';
import { BadRequestError, HttpError, ObjectDeletedError, ServiceUnavailableError, ValidationError } from './errors.js';
import { isUtf8Body, MAX_JSON_CONTAINERS, NOT_UTF8_REASON, opensTooManyContainers, utf8BodyText } from './json-body-text.js';
import { ROUTE_MODULES } from './routes/index.js';
import { createReaderPool } from './store/readers.js';
import { boundInput, schemaErrorsToIssues, type SchemaErrorLike } from './validation.js';
import type { VerbatimBodyReader } from './verbatim-body.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated user; set by the auth hook before any handler runs. */
    callbridgeUser: ServerUser | null;
  }
  interface FastifyContextConfig {
    /** Route answers without credentials (only `GET /health`). */
    public?: boolean;
    /**
     * Read this route's JSON bodies from their bytes first (verbatim-body.ts), keeping their
     * free-form values as text; a body it cannot read exactly takes the parsed path.
     */
    readBodyVerbatim?: VerbatimBodyReader;
  }
}

export interface AppOptions {
  readonly db: SqliteDatabase;
  readonly users: readonly ServerUser[];
  readonly completeMode: boolean;
  /** Largest request body accepted; larger ones get 413. */
  readonly maxBodyBytes: number;
  /** Fastify's (pino) request logging; internal errors are logged through it. */
  readonly logger: boolean;
  /** Most `calls/stream_query` answers being streamed at once (each holds a read connection). */
  readonly maxConcurrentStreams: number;
  /**
   * Longest a connection may go without a byte moving (the socket's timeout): a client that stops
   * reading a `calls/stream_query` answer loses it, which frees its stream slot and the WAL
   * snapshot its reader holds (store/readers.ts).
   */
  readonly idleTimeoutMs: number;
  /** Longest a request may take to arrive, headers and body (Node's `requestTimeout`). */
  readonly requestTimeoutMs: number;
}

const WWW_AUTHENTICATE = 'Basic realm="callbridge"';

/**
 * Build the server's Fastify instance (not yet listening).
 *
 * @example
 * const app = buildApp({ db, users, completeMode: false, maxBodyBytes: 32 * 1024 * 1024, logger: false, maxConcurrentStreams: 16,
 *   idleTimeoutMs: 60_000, requestTimeoutMs: 120_000 });
 * await app.listen({ port: 0, host: '127.0.0.1' });
 */
export function buildApp(options: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: options.logger,
    bodyLimit: options.maxBodyBytes,
    // Fastify turns Node's own request timeout off, which leaves a client that trickles or stalls
    // a body (with or without credentials) holding its connection for good; hundreds of them ran
    // the server out of file descriptors. Fastify's docs ask for these without a proxy in front.
    requestTimeout: options.requestTimeoutMs,
    connectionTimeout: options.idleTimeoutMs,
    http: {
      // Given to Node's server at creation too: Fastify sets `requestTimeout` on the server
      // after creating it, which Node 20 does not apply (a trickled body was read for 30 s
      // against a 1 s timeout; measured). Node looks for requests past their time every
      // `connectionsCheckingInterval` (30 s by default), which would stretch a short one by as much.
      requestTimeout: options.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(options.requestTimeoutMs / 4))),
    },
    // Errors Fastify raises while routing (a URL that does not decode, a path parameter longer
    // than maxParamLength) skip setErrorHandler; without this they get Fastify's own body, which
    // has no `reason` and echoes the whole path back.
    frameworkErrors: (error, _request, reply) => {
      const reason = FRAMEWORK_ERROR_REASONS[error.code] ?? 'Bad request';
      // The generic reply type of this hook cannot name a status or body; it is an ordinary reply.
      void (reply as FastifyReply).code(400).type('application/json; charset=utf-8').send({ reason });
    },
    clientErrorHandler: answerClientError,
  });
  // The service answers bodies that break a schema with 422, not by silently fixing them (no
  // coercion, no stripping of unknown keys), listing every error of an ordinary body and the
  // first of a huge one (body-validation.ts).
  app.setValidatorCompiler(createBodyValidatorCompiler());
  const authenticate = createAuthenticator(options.users);

  // Bodies are JSON only (plus multipart, whose parser the files routes register themselves).
  app.removeContentTypeParser('text/plain');
  replaceJsonParserWithStrictUtf8(app, options.maxBodyBytes);
  // A body in a coding the server cannot undo (content-encoding.ts) is refused before it is read.
  app.addHook('preParsing', checkBeforeBody((request) => contentCodingOf(request.headers['content-encoding'])));
  app.decorateRequest('callbridgeUser', null);

  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (request.routeOptions.config.public === true) return;
    // Node keeps the first of repeated Authorization headers: which one a proxy in front checked
    // is then anyone's guess, so such a request is refused.
    if (request.headers.authorization !== undefined && repeatsHeader(request.raw.rawHeaders, 'authorization')) {
      throw new BadRequestError('More than one Authorization header');
    }
    const user = authenticate(request.headers.authorization);
    if (user === null) throw new HttpError(401, 'Unauthorized');
    request.callbridgeUser = user;
  });

  answerExpectContinue(app, authenticate, options.maxBodyBytes);

  app.setErrorHandler((raised: FastifyError, request, reply) => {
    const error = busyDatabaseError(raised) ?? raised;
    const { status, body } = toErrorResponse(error, request);
    if (status >= 500) request.log.error({ err: error }, 'internal error');
    if (status === 401) {
      reply.header('WWW-Authenticate', WWW_AUTHENTICATE);
      // The body was never read. Node reads what is left of a request it answered, so a client still
      // sending gets its 401 (closing would show it a reset instead, which an exporter would retry
      // as a network error); a body declared past the limit, or of no declared length, would cost
      // the server a stranger's upload of any length, and the connection is closed instead.
      if (!hasBodyWithinLimit(request, options.maxBodyBytes)) reply.header('Connection', 'close');
    }
    if (error instanceof ServiceUnavailableError) reply.header('Retry-After', String(error.retryAfterSeconds));
    void reply.code(status).type('application/json; charset=utf-8').send(body);
  });

  app.setNotFoundHandler((request, reply) => {
    // The path quoted, but never at any length (a client may send a path of many KB).
    const path = request.url.split('?')[0] as string;
    const shown = path.length <= MAX_QUOTED_PATH ? path : `${path.slice(0, MAX_QUOTED_PATH)}... (${path.length} characters)`;
    void reply.code(404).send({ reason: `Not found: ${request.method} ${shown}` });
  });

  // One pool for every streamed answer, so maxConcurrentStreams bounds them all. Closing it
  // closes idle connections now and busy ones as their streams end.
  const readers = createReaderPool(options.db, options.maxConcurrentStreams);
  app.addHook('onClose', async () => readers.close());
  const ctx: ServerContext = {
    db: options.db,
    completeMode: options.completeMode,
    readers,
    authorizeProject(request, projectId) {
      const user = request.callbridgeUser;
      if (user === null) throw new HttpError(401, 'Unauthorized');
      authorizeUserForProject(user, projectId);
      return user.username;
    },
  };
  for (const register of ROUTE_MODULES) register(app, ctx);
  return app;
}

/**
 * JSON bodies (gzipped or not) must be valid UTF-8 (RFC 8259 §8.1). Fastify's own parser decodes leniently, so a
 * stray byte inside a string would be stored as U+FFFD and acknowledged with a 200: data changed
 * without a word. Decode strictly first, then hand the text to Fastify's parser (its error codes
 * are mapped below). A route may read its bodies verbatim first (`readBodyVerbatim`), after the
 * same UTF-8 check.
 *
 * `__proto__` and `constructor` keys are data like any other, as on the hosted service: an LLM
 * input about JavaScript may hold them, and refusing them lost such calls (the exporter counted
 * them as rejected). `JSON.parse` makes them own properties, never a prototype; the server copies
 * values only by spreading or stringifying, which keep them as own keys. A closed request schema
 * still answers an unknown `__proto__` key with a 422 naming it.
 */
function replaceJsonParserWithStrictUtf8(app: FastifyInstance, maxBodyBytes: number): void {
  const parseJsonText = app.getDefaultJsonParser('ignore', 'ignore');
  const parseBytes = (request: FastifyRequest, bytes: Buffer, done: BodyParsed): void => {
    if (!isUtf8Body(bytes)) {
      done(new BadRequestError(`Malformed JSON body: ${NOT_UTF8_REASON}`), undefined);
      return;
    }
    if (opensTooManyContainers(bytes)) {
      done(new HttpError(413, `Request too large: more than ${MAX_JSON_CONTAINERS} objects and lists in one body`), undefined);
      return;
    }
    const readVerbatim = request.routeOptions.config.readBodyVerbatim;
    if (readVerbatim !== undefined) {
      const read = readVerbatim(bytes);
      if (read !== null) {
        done(null, read);
        return;
      }
    }
    const text = utf8BodyText(bytes);
    // One leading byte order mark is ignored (RFC 8259 §8.1); Fastify's parser would drop a second.
    if (text.charCodeAt(0) === BYTE_ORDER_MARK) {
      done(new BadRequestError('Malformed JSON body: more than one byte order mark'), undefined);
      return;
    }
    parseJsonText(request, text, done);
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const contentEncoding = request.headers['content-encoding'];
    if (contentCodingOf(contentEncoding) === 'identity') {
      parseBytes(request, body as Buffer, done);
      return;
    }
    // Fastify's body limit bounded the compressed bytes; the same limit bounds what they inflate to.
    decodeContentEncoding(body as Buffer, contentEncoding, maxBodyBytes).then(
      (bytes) => parseBytes(request, bytes, done),
      (error: unknown) => done(error as Error, undefined),
    );
  });
}

/** Whether the request declares a body length (0 included) within `maxBodyBytes`. */
function hasBodyWithinLimit(request: FastifyRequest, maxBodyBytes: number): boolean {
  const declared = request.headers['content-length'];
  if (declared === undefined) return request.headers['transfer-encoding'] === undefined;
  const length = Number(declared);
  return Number.isInteger(length) && length <= maxBodyBytes;
}

/** A content-type parser's callback (Fastify does not export its type). */
type BodyParsed = (error: Error | null, body?: unknown) => void;

/** Routing errors (`frameworkErrors`), answered as 400 with these reasons. */
const FRAMEWORK_ERROR_REASONS: Readonly<Record<string, string>> = {
  FST_ERR_BAD_URL: 'Malformed URL: a path segment does not decode',
  FST_ERR_MAX_PARAM_LENGTH: 'A path segment is too long',
};

/** Fastify's own error codes that are the client's fault, with the status SPEC §2.5 gives them. */
const CLIENT_ERROR_CODES: Readonly<Record<string, [status: number, reason: string | null]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'Request too large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'Unsupported content type: send application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'Content-Length does not match the body'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'Empty JSON body'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'Malformed JSON body'],
  FST_ERR_CTP_INVALID_TYPE: [415, 'Invalid Content-Type header'],
};

/**
 * Errors Node's HTTP parser raises before a request exists (a body that stalls past
 * `requestTimeout`, a malformed request line or chunked framing, headers past Node's size limit):
 * answered with a SPEC §2.5 body, `{"reason": ...}`, as every other error (Fastify's own has none),
 * then the connection closed, as Node does.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response already under way on this connection (a pipelined request's) is not interrupted
  // with another one: the connection is only closed, as Node does.
  if ((socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true) {
    socket.destroy(error);
    return;
  }
  const [status, reason] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request timeout: the request did not arrive whole in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request header fields too large']
        : [400, 'Malformed HTTP request'];
  const body = JSON.stringify({ reason });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/**
 * A request with `Expect: 100-continue` (curl's, for larger uploads) waits for `100 Continue`
 * before it sends its body. Node answers it before any hook runs, so a client without valid
 * credentials, or declaring a body past `maxBodyBytes`, was invited to upload what would be
 * refused: it gets its 401 or 413 at once instead, the connection closed; anyone else is invited
 * and the request goes on as usual.
 */
function answerExpectContinue(app: FastifyInstance, authenticate: (header: string | undefined) => ServerUser | null, maxBodyBytes: number): void {
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    const declared = Number(request.headers['content-length']);
    // The routes without credentials (`GET /health`) take no body: a GET or HEAD goes on as usual.
    const mayBePublic = request.method === 'GET' || request.method === 'HEAD';
    const refusal: [number, string] | undefined =
      Number.isFinite(declared) && declared > maxBodyBytes
        ? [413, 'Request too large']
        : !mayBePublic && authenticate(request.headers.authorization) === null
          ? [401, 'Unauthorized']
          : undefined;
    if (refusal === undefined) {
      response.writeContinue();
      app.server.emit('request', request, response);
      return;
    }
    const [status, reason] = refusal;
    const body = JSON.stringify({ reason });
    response.writeHead(status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      Connection: 'close',
      ...(status === 401 ? { 'WWW-Authenticate': WWW_AUTHENTICATE } : {}),
    });
    response.end(body);
  });
}

const BYTE_ORDER_MARK = 0xfeff;

/** Whether `name` (lower case) appears more than once among raw headers (name, value, name, ...). */
function repeatsHeader(rawHeaders: readonly string[], name: string): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === name && ++seen > 1) return true;
  }
  return false;
}

/** Longest part of an unknown path a 404 quotes. */
const MAX_QUOTED_PATH = 200;

/** SQLite's result codes for a database another connection holds (SQLITE_BUSY, SQLITE_LOCKED). */
const BUSY_RESULT_CODES: ReadonlySet<number> = new Set([5, 6]);

/**
 * A 503 for a write that could not get the database within the driver's busy timeout (another
 * process writes the same file: a second server, a long table import): the database frees by
 * itself, so the client retries after a second, instead of a 500 that reads as a bug.
 * better-sqlite3 names it by `code` (`SQLITE_BUSY`, `SQLITE_BUSY_SNAPSHOT`...), node:sqlite by
 * its numeric `errcode` (the primary code in the low byte).
 */
function busyDatabaseError(error: unknown): ServiceUnavailableError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, errcode } = error as { code?: unknown; errcode?: unknown };
  const busy =
    (typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))) ||
    (code === 'ERR_SQLITE_ERROR' && typeof errcode === 'number' && BUSY_RESULT_CODES.has(errcode & 0xff));
  return busy ? new ServiceUnavailableError('The database is busy with another writer; retry shortly', 1) : undefined;
}

/**
 * Map any error to its status and body. Known errors carry their own reason; anything else is a
 * bug and gets a fixed 500 body, so stack traces, SQL and paths never reach a client.
 */
function toErrorResponse(error: unknown, request: FastifyRequest): { status: number; body: object } {
  if (error instanceof ValidationError) return { status: 422, body: { detail: error.detail.map(boundInput) } };
  if (error instanceof HttpError) {
    const body: Record<string, string> = { reason: error.reason };
    if (error.errorCode !== undefined) body.error_code = error.errorCode;
    if (error instanceof ObjectDeletedError) body.deleted_at = error.deletedAt;
    return { status: error.status, body };
  }
  const fastifyError = error as Partial<FastifyError> & { validation?: SchemaErrorLike[] };
  if (Array.isArray(fastifyError.validation)) {
    const root = fastifyError.validationContext ?? 'body';
    const input = root === 'body' ? request.body : root === 'params' ? request.params : request.query;
    return { status: 422, body: { detail: schemaErrorsToIssues(fastifyError.validation, input, root) } };
  }
  const known = fastifyError.code !== undefined ? CLIENT_ERROR_CODES[fastifyError.code] : undefined;
  if (known !== undefined) return { status: known[0], body: { reason: known[1] } };
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && typeof fastifyError.code === 'string' && fastifyError.code.startsWith('FST_')) {
    // Fastify's own client errors (bad URL, bad headers): their messages are fixed text.
    return { status, body: { reason: fastifyError.message ?? 'Bad request' } };
  }
  return { status: 500, body: { reason: 'Internal server error' } };
}
