/**
 * A decoded OTLP export -> the call parts to write, and the spans that could not be converted
 * (SPEC §2.7). Each span goes through the exporter's own mapping (`toCallParts`) and the calls
 * store's own row checks (`toStartRow`/`toEndRow`), so nothing here decides what a call looks like.
 */
import { toCallParts } from '../../mapping/index.js';
import { BadRequestError, HttpError } from '../errors.js';
import type { CallPart } from '../store/calls.js';
import { toEndRow, toStartRow, type EndRow, type StartRow } from '../store/calls-rows.js';
import { PROJECT_HEADER, projectForResource } from './project.js';
import { describeSpan, toResourceInput, toSpanInput } from './spans.js';
import type { OtlpTraceRequest, PartialSuccess } from './types.js';

/** Reasons listed in `error_message`; the count covers every rejected span (as the hosted service does). */
const MAX_LISTED_REJECTIONS = 20;

/**
 * Bytes (UTF-8) of call text one request may write (every span's attributes, inputs,
 * `otel_dump`, output, summary and exception). The decode budget counts what a body decodes to,
 * but a resource is decoded once and written into the `otel_dump` of each of its spans: an 8 KB
 * gzipped body of one 8 MB resource string over 100 spans wrote 1.7 GB (11 s, 1.6 GB RSS). A
 * collector's default batch of LLM spans (8192 spans, 80 short attributes each) writes about
 * 66 MB; a batch of 8192 spans each carrying a resource of more than ~30 KB is refused whole.
 */
export const MAX_STORED_BYTES_PER_REQUEST = 256 * 1024 * 1024;

export interface IngestResult {
  readonly parts: CallPart[];
  /** Undefined when every span was converted. */
  readonly partialSuccess: PartialSuccess | undefined;
}

/**
 * Maps every span of a decoded export to its start and end parts.
 *
 * `authorize(projectId)` returns the username to write as, or throws (400 malformed id, 403 not
 * granted); every project is authorized before any span is mapped, so a request that names a
 * forbidden project writes nothing. A `ResourceSpans` with spans but no project (neither resource
 * attributes nor header) is a 400.
 *
 * @example
 * const { parts, partialSuccess } = ingestTraceRequest(decoded, request.headers.project_id, authorize);
 * store.writeParts(parts);
 */
export function ingestTraceRequest(
  request: OtlpTraceRequest,
  headerProjectId: string | undefined,
  authorize: (projectId: string) => string,
): IngestResult {
  const targets = request.resourceSpans.map((resourceSpans) => {
    if (!resourceSpans.scopeSpans.some((scopeSpans) => scopeSpans.spans.length > 0)) return undefined;
    const projectId = projectForResource(resourceSpans.resource, headerProjectId);
    if (projectId === undefined) {
      throw new BadRequestError(
        `No project for these spans: set the resource attributes "wandb.entity" and "wandb.project", ` +
          `or send the header "${PROJECT_HEADER}: entity/project"`,
      );
    }
    return { projectId, username: authorize(projectId) };
  });

  const parts: CallPart[] = [];
  let storedBytes = 0;
  const reasons: string[] = [];
  let rejectedSpans = 0;
  const reject = (reason: string): void => {
    rejectedSpans += 1;
    if (reasons.length < MAX_LISTED_REJECTIONS) reasons.push(reason);
  };

  request.resourceSpans.forEach((resourceSpans, resourceIndex) => {
    const target = targets[resourceIndex];
    if (target === undefined) return;
    const resource = toResourceInput(resourceSpans.resource);
    resourceSpans.scopeSpans.forEach((scopeSpans, scopeIndex) => {
      scopeSpans.spans.forEach((span, spanIndex) => {
        const converted = toSpanInput(span, resource, scopeSpans.scope);
        if (!converted.ok) {
          reject(`Rejected span (${describeSpan(span)}): ${converted.reason}`);
          return;
        }
        const loc = ['body', 'resourceSpans', resourceIndex, 'scopeSpans', scopeIndex, 'spans', spanIndex];
        const { start, end } = toCallParts(converted.span, target.projectId);
        let rows: [StartRow, EndRow];
        try {
          rows = [toStartRow(start, target.username, loc), toEndRow(end, target.username, loc)];
        } catch (error) {
          // The store's checks (a display name too long, a value nested too deep): this span only.
          if (!(error instanceof HttpError)) throw error;
          reject(`Rejected span (${describeSpan(span)}): ${error.reason}`);
          return;
        }
        // Checked as rows are made, so what a refused request holds stays near the bound.
        storedBytes += storedBytesOf(...rows);
        if (storedBytes > MAX_STORED_BYTES_PER_REQUEST) {
          throw new HttpError(
            413,
            `Request too large: its spans would store more than ${MAX_STORED_BYTES_PER_REQUEST} bytes of call text ` +
              "(each span carries its resource's attributes); send fewer spans per request",
          );
        }
        parts.push({ kind: 'start', row: rows[0] }, { kind: 'end', row: rows[1] });
      });
    });
  });

  if (rejectedSpans === 0) return { parts, partialSuccess: undefined };
  const listed = reasons.join('; ');
  return {
    parts,
    partialSuccess: { rejectedSpans, errorMessage: rejectedSpans > reasons.length ? `${listed}; ...` : listed },
  };
}

/** The UTF-8 bytes of text a call's two rows store (their sizes, measured already, and the rest). */
function storedBytesOf(start: StartRow, end: EndRow): number {
  const [, , , , , , , , , , , , otelDump, , , , startBytes] = start;
  const [, , , , , , exception, , endBytes] = end;
  return startBytes + endBytes + (otelDump === null ? 0 : Buffer.byteLength(otelDump)) + (exception === null ? 0 : Buffer.byteLength(exception));
}
