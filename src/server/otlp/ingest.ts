/**
 * A decoded OTLP export -> the call parts to write, and the spans that could not be converted
 * (SPEC §2.7). Each span goes through the exporter's own mapping (`toCallParts`) and the calls
 * store's own row checks (`toStartRow`/`toEndRow`), so nothing here decides what a call looks like.
 */
import { toCallParts } from '../../mapping/index.js';
import { BadRequestError, HttpError } from '../errors.js';
import type { CallPart } from '../store/calls.js';
import { toEndRow, toStartRow } from '../store/calls-rows.js';
import { PROJECT_HEADER, projectForResource } from './project.js';
import { describeSpan, toResourceInput, toSpanInput } from './spans.js';
import type { OtlpTraceRequest, PartialSuccess } from './types.js';

/** Reasons listed in `error_message`; the count covers every rejected span (as the hosted service does). */
const MAX_LISTED_REJECTIONS = 20;

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
        try {
          const startRow = toStartRow(start, target.username, loc);
          const endRow = toEndRow(end, target.username, loc);
          parts.push({ kind: 'start', row: startRow }, { kind: 'end', row: endRow });
        } catch (error) {
          // The store's checks (a display name too long, a value nested too deep): this span only.
          if (!(error instanceof HttpError)) throw error;
          reject(`Rejected span (${describeSpan(span)}): ${error.reason}`);
        }
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
