/**
 * Which project an OTLP export writes to (SPEC §2.7): the resource attributes `wandb.entity` and
 * `wandb.project` when both are set, else the request's `project_id: entity/project` header, as
 * the hosted service's `/otel/v1/traces` reads them.
 */
import type { OtlpResource } from './types.js';

export const ENTITY_ATTRIBUTE = 'wandb.entity';
export const PROJECT_ATTRIBUTE = 'wandb.project';
export const PROJECT_HEADER = 'project_id';

/**
 * The `entity/project` for one resource's spans, or undefined when neither the resource nor the
 * header names one. The id is not checked here: authorization rejects a malformed one with 400.
 *
 * @example
 * projectForResource({ attributes: { 'wandb.entity': 'acme', 'wandb.project': 'demo' }, droppedAttributesCount: 0 }, undefined);
 * // 'acme/demo'
 */
export function projectForResource(resource: OtlpResource, headerProjectId: string | undefined): string | undefined {
  const entity = resource.attributes[ENTITY_ATTRIBUTE];
  const project = resource.attributes[PROJECT_ATTRIBUTE];
  if (typeof entity === 'string' && entity !== '' && typeof project === 'string' && project !== '') {
    return `${entity}/${project}`;
  }
  return headerProjectId;
}

/** The `project_id` header as one string (a repeated header is not a project id: undefined). */
export function projectHeader(value: string | string[] | undefined): string | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}
