/**
 * How request bodies are checked against their route's schema: every error at once, as the
 * hosted service's pydantic reports them (a 422 lists each missing or wrong field), but never at
 * a cost that grows with a hostile body.
 *
 * Ajv's `allErrors` builds one error object per failing node: a 31 MiB body of a million wrong
 * list items (31 KB gzipped) took the server past 4 GB and aborted it, as Fastify's own default
 * options warn (`allErrors: false`, "When set to true, a DoS attack is possible"). So a body is
 * first checked to its first error; only an invalid body of at most MAX_NODES_FOR_EVERY_ERROR
 * values is checked again for every error (at most a few MB of error objects). A larger invalid
 * body gets its first error, which is all a reader needs to fix it (validation.ts keeps 50).
 */
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';

/**
 * As Fastify's defaults, except: no type coercion and no stripping of unknown keys (closed
 * objects must reject them, as the service's BaseModelStrict does).
 */
const AJV_OPTIONS: Options = { coerceTypes: false, useDefaults: true, removeAdditional: false, addUsedSchema: false };

/** Values (objects, lists and scalars) an invalid body may hold and still get every error listed. */
export const MAX_NODES_FOR_EVERY_ERROR = 20_000;

/** The validator compiler for Fastify's `setValidatorCompiler`. */
export function createBodyValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const firstError = new Ajv({ ...AJV_OPTIONS, allErrors: false });
  const everyError = new Ajv({ ...AJV_OPTIONS, allErrors: true });
  return ({ schema }) => {
    const quick = firstError.compile(schema as object);
    // Compiled when first needed: most routes never see an invalid body.
    let thorough: ValidateFunction | undefined;
    const validate = (data: unknown): boolean => {
      if (quick(data)) return true;
      if (holdsAtMost(data, MAX_NODES_FOR_EVERY_ERROR)) {
        thorough ??= everyError.compile(schema as object);
        thorough(data);
        validate.errors = thorough.errors ?? quick.errors;
      } else {
        validate.errors = quick.errors;
      }
      return false;
    };
    validate.errors = null as ValidateFunction['errors'];
    return validate;
  };
}

/** Whether `value` holds at most `limit` values in all, itself included; stops counting past it. */
function holdsAtMost(value: unknown, limit: number): boolean {
  let counted = 1;
  const containers: object[] = typeof value === 'object' && value !== null ? [value] : [];
  while (containers.length > 0) {
    const container = containers.pop()!;
    const children: unknown[] = Array.isArray(container) ? container : Object.values(container);
    // Counted when seen, so that a list of a million objects stops the count at `limit`.
    counted += children.length;
    if (counted > limit) return false;
    for (const child of children) if (typeof child === 'object' && child !== null) containers.push(child);
  }
  return counted <= limit;
}
