/**
 * `POST /otel/v1/traces` (SPEC §2.7): OTLP/HTTP trace export into calls.
 *
 * The route lives in its own scope whose only body parser reads raw bytes: OTLP bodies are
 * protobuf or JSON, possibly gzipped, and must reach the decoders as bytes. Every other route
 * keeps the app's JSON-only parsing. Fastify's body limit still bounds the bytes read; the
 * decompressed size is bounded by the same limit for OTLP/JSON and by PROTOBUF_INFLATION times it
 * for protobuf; what those bytes decode to is bounded by the decoders' budget (`otlp/types.ts`).
 */
import type { RouteModule, ServerContext } from '../context.js';
import { BadRequestError, HttpError } from '../errors.js';
import { checkBeforeBody } from '../before-body.js';
import { decodeContentEncoding } from '../content-encoding.js';
import {
  decodeTraceRequestJson,
  decodeTraceRequestProtobuf,
  encodeTraceResponseJson,
  encodeTraceResponseProtobuf,
  formatOf,
  ingestTraceRequest,
  MalformedOtlpError,
  OtlpTooLargeError,
  PROJECT_HEADER,
  projectHeader,
  RESPONSE_CONTENT_TYPES,
  type OtlpTraceRequest,
} from '../otlp/index.js';
import { createCallsStore } from '../store/calls.js';
import { projectAuthorizer } from './project-authorizer.js';

export const OTLP_TRACES_PATH = '/otel/v1/traces';

/**
 * How many times the body limit a gzipped protobuf body may inflate to. A collector sends its
 * default batch (8192 spans) as one gzipped request and drops it when refused: with the few dozen
 * attributes LLM instrumentations flatten messages into, that is about 40 MiB of protobuf (80
 * short attributes: 39 MiB), past the 32 MiB default limit. The decoders' budget, not the byte
 * count, bounds what such a body costs; JSON text stays at the limit, since it is parsed whole
 * before any budget is charged.
 */
export const PROTOBUF_INFLATION = 4;

export const otlpRoutes: RouteModule = (app, ctx) => {
  const store = createCallsStore(ctx.db, { readers: ctx.readers });
  const maxBodyBytes = app.initialConfig.bodyLimit ?? 1024 * 1024;

  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // Any content type is read as bytes; the preParsing hooks have already answered 415 for the
    // types OTLP does not use (below) and for codings no route reads (app.ts), after
    // authentication and before the body is read.
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => {
      done(null, body);
    });

    const preParsing = checkBeforeBody((request) => formatOf(request.headers['content-type']));

    scope.post(OTLP_TRACES_PATH, { preParsing }, async (request, reply) => {
      const format = formatOf(request.headers['content-type']);
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const maxInflatedBytes = format === 'protobuf' ? PROTOBUF_INFLATION * maxBodyBytes : maxBodyBytes;
      const bytes = await decodeContentEncoding(raw, request.headers['content-encoding'], maxInflatedBytes);
      const decoded = decode(format === 'protobuf' ? decodeTraceRequestProtobuf : decodeTraceRequestJson, bytes, format);
      const { parts, partialSuccess } = ingestTraceRequest(
        decoded,
        projectHeader(request.headers[PROJECT_HEADER]),
        projectAuthorizer(ctx, request),
      );
      store.writeParts(parts);
      const body = format === 'protobuf' ? encodeTraceResponseProtobuf(partialSuccess) : encodeTraceResponseJson(partialSuccess);
      return reply.type(RESPONSE_CONTENT_TYPES[format]).send(body);
    });
  });
};

function decode(decoder: (bytes: Uint8Array) => OtlpTraceRequest, bytes: Buffer, format: string): OtlpTraceRequest {
  try {
    return decoder(bytes);
  } catch (error) {
    if (error instanceof MalformedOtlpError) throw new BadRequestError(`Malformed OTLP/${format} body: ${error.message}`);
    if (error instanceof OtlpTooLargeError) throw new HttpError(413, `Request too large: ${error.message}`);
    throw error;
  }
}

