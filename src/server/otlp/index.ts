/**
 * OTLP/HTTP trace ingest for the local server (SPEC §2.7): decoding, project choice, span -> call
 * parts. The route is `routes/otlp.ts`.
 *
 * Decisions where SPEC §2.7 is silent:
 * - Encodings: `application/x-protobuf` (also `application/protobuf`) and `application/json`
 *   (OTLP/JSON; snake_case names, enum names or numbers as text and base64 ids accepted besides the
 *   canonical forms);
 *   `Content-Encoding` none, `identity` or `gzip` (`../content-encoding.ts`, as on every route).
 *   Other types or encodings: 415.
 * - The project: resource attributes `wandb.entity` + `wandb.project` (both non-empty text) win
 *   over the `project_id` header, per `ResourceSpans`; a request may write several projects. Every
 *   project is authorized before anything is written: one 403 and nothing is written.
 * - A body whose spans, events, links and attributes would take more memory than
 *   `MAX_DECODED_BYTES_PER_REQUEST` (`types.ts`: 40 000 bare spans) is a 413 naming the limit,
 *   decided while decoding and before anything is written: the byte limit alone lets 31 KB of
 *   gzip decode to gigabytes. 413 rather than 400 because nothing in it is invalid, only more
 *   than this server takes at once: as for a body over the byte limit (SPEC §2.5), and OTLP/HTTP
 *   leaves such statuses to HTTP's meaning (neither is retried; a batching client can split).
 * - A malformed body (bad protobuf, JSON of the wrong shape) is a 400 for the whole request: the
 *   decoder cannot know which spans it belongs to. A well-formed span that cannot be a call (trace
 *   id not 16 bytes or all zeros, span id not 8 bytes or all zeros, parent id set but not 8 bytes)
 *   is left out and counted in `partial_success`, whose message lists the first 20 reasons, as the
 *   hosted service does; the other spans are written, in one transaction. A parent id of 8 zero
 *   bytes (OTel's invalid span id, which some exporters send for "no parent") makes a root span
 *   (`parent_id` null), as in the hosted service, rather than a rejected one.
 * - The answer is an `ExportTraceServiceResponse` in the request's encoding; its JSON form writes
 *   `rejectedSpans` as decimal text (the protobuf JSON mapping of int64). Errors (4xx) keep the
 *   server's `{"reason"}` JSON bodies, which OTLP clients read by status code only.
 * - Complete mode (`--complete-mode`) does not apply: it concerns the v1 call-write endpoints, and
 *   OTLP ingest writes whole calls (start and end together) anyway.
 */
export { formatOf, RESPONSE_CONTENT_TYPES } from './body.js';
export type { OtlpFormat } from './body.js';
export { ingestTraceRequest } from './ingest.js';
export type { IngestResult } from './ingest.js';
export { decodeTraceRequestJson, encodeTraceResponseJson } from './json.js';
export { projectHeader, PROJECT_HEADER } from './project.js';
export { decodeTraceRequestProtobuf, encodeTraceResponseProtobuf } from './protobuf.js';
export { toSpanInput, toResourceInput } from './spans.js';
export { DECODED_BYTES, MalformedOtlpError, MAX_DECODED_BYTES_PER_REQUEST, OtlpTooLargeError } from './types.js';
export type { OtlpTraceRequest, PartialSuccess } from './types.js';
