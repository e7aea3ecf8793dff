/**
 * Schema errors in the hosted service's shape: FastAPI answers a body that does not match its
 * pydantic model with 422 `{"detail": [{type, loc, msg, input}]}`. This module turns the JSON
 * schema validator's (ajv's) errors into those entries, so clients can read one format.
 */
import type { ValidationIssue } from './errors.js';
import { clip, quote } from './quote.js';
import { isRecord } from '../wire/common.js';

/** The fields of an ajv `ErrorObject` we read (kept structural: ajv is fastify's dependency). */
export interface SchemaErrorLike {
  readonly keyword: string;
  readonly instancePath: string;
  readonly params: Record<string, unknown>;
  readonly message?: string;
}

/** More entries than this say nothing more to a reader and only grow the response. */
const MAX_ISSUES = 50;

const TYPE_NAMES: Readonly<Record<string, [type: string, msg: string]>> = {
  string: ['string_type', 'Input should be a valid string'],
  integer: ['int_type', 'Input should be a valid integer'],
  number: ['float_type', 'Input should be a valid number'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  object: ['dict_type', 'Input should be a valid dictionary'],
  array: ['list_type', 'Input should be a valid list'],
  null: ['none_required', 'Input should be None'],
};

/**
 * Convert ajv errors for `body` into pydantic-style issues with `loc` starting at `root`
 * (`"body"`, `"querystring"`, ...). Alternatives of one union (`anyOf`) collapse into one entry,
 * as pydantic reports them: the literals a value may take are listed in one message
 * (`Input should be 'asc' or 'desc'`), and the `null` branch of an optional field says nothing
 * when another branch has said what is wrong.
 */
export function schemaErrorsToIssues(
  errors: readonly SchemaErrorLike[],
  body: unknown,
  root: string,
): ValidationIssue[] {
  const unionPaths = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath));
  const branchErrors = errors.filter((e) => e.keyword !== 'anyOf');
  const relevant = branchErrors.filter((e) => !isRedundantNullBranch(e, branchErrors, unionPaths));
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  for (const error of relevant) {
    const key = unionPaths.has(error.instancePath) ? `${error.instancePath}|union` : null;
    if (key !== null) {
      if (seen.has(key)) continue;
      seen.add(key);
    }
    const literals = key !== null && isLiteralError(error) ? literalsAt(error.instancePath, relevant) : null;
    issues.push(boundInput(toIssue(error, body, root, literals)));
    if (issues.length >= MAX_ISSUES) break;
  }
  if (issues.length === 0 && errors[0] !== undefined) issues.push(boundInput(toIssue(errors[0], body, root, null)));
  return issues;
}

/** The `null` branch of a union whose other branches reported errors at or below its path. */
function isRedundantNullBranch(error: SchemaErrorLike, errors: readonly SchemaErrorLike[], unionPaths: ReadonlySet<string>): boolean {
  if (error.keyword !== 'type' || error.params.type !== 'null' || !unionPaths.has(error.instancePath)) return false;
  const path = error.instancePath;
  return errors.some((other) => other !== error && (other.instancePath === path || other.instancePath.startsWith(`${path}/`)));
}

function isLiteralError(error: SchemaErrorLike): boolean {
  return error.keyword === 'const' || error.keyword === 'enum';
}

/** Every literal the `const`/`enum` alternatives at `path` allow, in order. */
function literalsAt(path: string, errors: readonly SchemaErrorLike[]): unknown[] {
  return errors.filter((e) => e.instancePath === path && isLiteralError(e)).flatMap(allowedValues);
}

function allowedValues(error: SchemaErrorLike): unknown[] {
  return error.keyword === 'const' ? [error.params.allowedValue] : ((error.params.allowedValues as unknown[] | undefined) ?? []);
}

/** `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`: values as Python prints them, as pydantic lists them. */
function listAlternatives(values: readonly unknown[]): string {
  const printed = values.map(pythonRepr);
  const last = printed.pop() ?? '';
  return printed.length === 0 ? last : `${printed.join(', ')} or ${last}`;
}

function pythonRepr(value: unknown): string {
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (value === null) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  return JSON.stringify(value);
}

/** Echoed inputs larger than this are cut to text, so a huge hostile body is never sent back. */
const MAX_ECHO_CHARS = 2048;

/**
 * An issue whose echoes of the request are bounded: `input` cut to text when large or unprintable
 * (too deep to serialise), and the client's keys in `loc` (an extra field, an unknown `$expr`
 * operator) and `msg` (which names such an operator) cut when long. Applied to every 422 the server
 * sends, whoever raised it: a hostile 2 MB literal or key, or a 20 000-deep array, must not be
 * echoed back, nor break the serialisation of the answer.
 */
export function boundInput(issue: ValidationIssue): ValidationIssue {
  const bounded = boundLocAndMsg(issue);
  if (typeof bounded.input !== 'object' && typeof bounded.input !== 'string') return bounded;
  let text: string;
  try {
    text = JSON.stringify(bounded.input) ?? '';
  } catch {
    return { ...bounded, input: '[unprintable]' };
  }
  return text.length > MAX_ECHO_CHARS ? { ...bounded, input: quote(bounded.input, MAX_ECHO_CHARS) } : bounded;
}

/** Longest key of `loc` sent back whole; schema field names are far shorter. */
const MAX_ECHOED_KEY_CHARS = 200;

function boundLocAndMsg(issue: ValidationIssue): ValidationIssue {
  const longKey = issue.loc.some((part) => typeof part === 'string' && part.length > MAX_ECHOED_KEY_CHARS);
  if (!longKey && issue.msg.length <= MAX_ECHO_CHARS) return issue;
  return {
    ...issue,
    loc: issue.loc.map((part) => (typeof part === 'string' ? clip(part, MAX_ECHOED_KEY_CHARS) : part)),
    msg: clip(issue.msg, MAX_ECHO_CHARS),
  };
}

/** One issue; `literals` are every literal a union at this path allows (null: this error's own). */
function toIssue(error: SchemaErrorLike, body: unknown, root: string, literals: unknown[] | null): ValidationIssue {
  const { loc, value } = resolvePointer(body, error.instancePath, root);
  const params = error.params;
  switch (error.keyword) {
    case 'required': {
      const field = String(params.missingProperty);
      return { type: 'missing', loc: [...loc, field], msg: 'Field required', input: value ?? null };
    }
    case 'additionalProperties': {
      const field = String(params.additionalProperty);
      const extra = isRecord(value) ? value[field] : undefined;
      return { type: 'extra_forbidden', loc: [...loc, field], msg: 'Extra inputs are not permitted', input: extra ?? null };
    }
    case 'type': {
      const expected = String(Array.isArray(params.type) ? params.type[0] : params.type);
      const [type, msg] = TYPE_NAMES[expected] ?? ['type_error', `Input should be of type ${expected}`];
      return { type, loc, msg, input: value ?? null };
    }
    case 'const':
    case 'enum': {
      const msg = `Input should be ${listAlternatives(literals ?? allowedValues(error))}`;
      return { type: 'literal_error', loc, msg, input: value ?? null };
    }
    case 'minimum':
      return { type: 'greater_than_equal', loc, msg: `Input should be greater than or equal to ${String(params.limit)}`, input: value ?? null };
    case 'exclusiveMinimum':
      return { type: 'greater_than', loc, msg: `Input should be greater than ${String(params.limit)}`, input: value ?? null };
    case 'maximum':
      return { type: 'less_than_equal', loc, msg: `Input should be less than or equal to ${String(params.limit)}`, input: value ?? null };
    case 'exclusiveMaximum':
      return { type: 'less_than', loc, msg: `Input should be less than ${String(params.limit)}`, input: value ?? null };
    case 'minItems':
    case 'minLength':
      return { type: 'too_short', loc, msg: `Value ${error.message ?? 'is too short'}`, input: value ?? null };
    case 'maxItems':
    case 'maxLength':
      return { type: 'too_long', loc, msg: `Value ${error.message ?? 'is too long'}`, input: value ?? null };
    default:
      return { type: 'value_error', loc, msg: error.message ?? 'Invalid value', input: value ?? null };
  }
}

/** Walk a JSON pointer (`/batch/0/req`) through `body`, naming list positions as numbers. */
function resolvePointer(body: unknown, pointer: string, root: string): { loc: Array<string | number>; value: unknown } {
  const loc: Array<string | number> = [root];
  let value: unknown = body;
  if (pointer === '') return { loc, value };
  for (const raw of pointer.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(value)) {
      const index = Number(part);
      loc.push(index);
      value = value[index];
    } else {
      loc.push(part);
      value = isRecord(value) ? value[part] : undefined;
    }
  }
  return { loc, value };
}
