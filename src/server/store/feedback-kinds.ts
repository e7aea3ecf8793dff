/**
 * The hosted service's rules for the two feedback kinds that point at something besides
 * `weave_ref`, and for the refs only they may carry:
 * - `wandb.annotation.<name>`: a human annotation. `annotation_ref` names the version of the
 *   annotation spec `<name>` (`weave:///<entity>/<project>/object/<name>:<digest>`), the payload is
 *   `{"value": ...}`, and the value must match the spec's JSON Schema (`annotation-spec.ts`).
 * - `wandb.runnable.<name>`: the result of running a scorer. `runnable_ref` names the op or
 *   object `<name>`; on an op, `call_ref` names the call that ran it; the payload is `{"output": ...}`.
 * - Other feedback may carry none of `annotation_ref`, `runnable_ref`, `call_ref`, `trigger_ref`.
 * The checks run in the service's order, so the same request gets the same first complaint.
 * Every ref has already been parsed and held to the request's project (`weave-refs.ts`).
 */
import { BadRequestError, NotFoundError } from '../errors.js';
import { clip, quote } from '../quote.js';
import type { FeedbackCreateReq } from '../../wire/feedback.js';
import { checkAnnotationValue } from './annotation-spec.js';
import { expectRefKind, versionRef, type WeaveRef } from './weave-refs.js';

export const ANNOTATION_FEEDBACK_PREFIX = 'wandb.annotation';
export const RUNNABLE_FEEDBACK_PREFIX = 'wandb.runnable';

/** The refs of a request besides `weave_ref`, parsed; absent ones are undefined. */
export interface FeedbackRefs {
  readonly annotation_ref?: WeaveRef | undefined;
  readonly runnable_ref?: WeaveRef | undefined;
  readonly call_ref?: WeaveRef | undefined;
  readonly trigger_ref?: WeaveRef | undefined;
}

/** A stored object version's value and digest (`latest` and `v<N>` resolve to the digest). */
export type ReadObjectVersion = (projectId: string, name: string, version: string) => { val: unknown; digest: string };

/**
 * @throws BadRequestError with the service's reason when `request` breaks a rule above.
 */
export function checkFeedbackKind(request: FeedbackCreateReq, refs: FeedbackRefs, readObject: ReadObjectVersion): void {
  const type = request.feedback_type;
  if (type.startsWith(ANNOTATION_FEEDBACK_PREFIX)) {
    checkAnnotation(request, refs.annotation_ref, readObject);
  } else if (refs.annotation_ref !== undefined) {
    throw new BadRequestError('annotation_ref is not allowed for non-annotation feedback');
  } else if (type.startsWith(RUNNABLE_FEEDBACK_PREFIX)) {
    checkRunnable(request, refs);
  } else {
    for (const field of ['runnable_ref', 'call_ref', 'trigger_ref'] as const) {
      if (refs[field] !== undefined) throw new BadRequestError(`${field} is not allowed for non-runnable feedback`);
    }
  }
  if (refs.call_ref !== undefined) expectRefKind('call_ref', refs.call_ref, 'call');
  if (refs.trigger_ref !== undefined) expectRefKind('trigger_ref', refs.trigger_ref, 'object');
}

function checkAnnotation(request: FeedbackCreateReq, ref: WeaveRef | undefined, readObject: ReadObjectVersion): void {
  const name = subtypeName(request.feedback_type, ANNOTATION_FEEDBACK_PREFIX, 'annotation');
  if (ref === undefined) throw new BadRequestError('annotation_ref is required for annotation feedback');
  const spec = versionRef('annotation_ref', ref, ['object']);
  if (spec.name !== name) throw new BadRequestError(`annotation_ref must point to an object with name ${clip(name)}`);
  if (spec.extra.length > 0) {
    throw new BadRequestError('annotation_ref must name an annotation spec version, not a path inside one');
  }
  requirePayloadKey(request, 'value');
  let stored: { val: unknown; digest: string };
  try {
    stored = readObject(request.project_id, spec.name, spec.version);
  } catch (error) {
    if (error instanceof NotFoundError) throw new BadRequestError(`Annotation ref ${quote(request.annotation_ref)} not found`);
    throw error;
  }
  checkAnnotationValue(stored.val, `${request.project_id}\u0000${spec.name}\u0000${stored.digest}`, request.payload.value);
}

function checkRunnable(request: FeedbackCreateReq, refs: FeedbackRefs): void {
  const name = subtypeName(request.feedback_type, RUNNABLE_FEEDBACK_PREFIX, 'runnable');
  if (refs.runnable_ref === undefined) throw new BadRequestError('runnable_ref is required for runnable feedback');
  const runnable = versionRef('runnable_ref', refs.runnable_ref, ['op', 'object']);
  if (runnable.name !== name) throw new BadRequestError(`runnable_ref must point to an object with name ${clip(name)}`);
  if (runnable.kind === 'op' && refs.call_ref === undefined) {
    throw new BadRequestError('call_ref is required for runnable feedback on ops');
  }
  requirePayloadKey(request, 'output');
}

/** `<name>` of `<prefix>.<name>`; a type that only starts like the prefix is refused. */
function subtypeName(type: string, prefix: string, kind: string): string {
  if (!type.startsWith(`${prefix}.`)) throw new BadRequestError(`Invalid ${kind} feedback type: ${quote(type)}`);
  return type.slice(prefix.length + 1);
}

function requirePayloadKey(request: FeedbackCreateReq, key: string): void {
  if (!Object.hasOwn(request.payload, key)) {
    throw new BadRequestError(`Invalid payload for feedback_type ${quote(request.feedback_type)}: it must hold "${key}"`);
  }
}
