/**
 * Annotation feedback values checked against their annotation spec, as the hosted service does:
 * an `AnnotationSpec` object holds a JSON Schema in `field_schema` (`{}`, any value, when absent),
 * and a `wandb.annotation.<name>` record's `payload.value` must validate against it.
 *
 * The schema is validated by Ajv, the JSON Schema library fastify itself runs on. Like Python's
 * `jsonschema.validate`, which the service calls, the dialect is the schema's `$schema` (2020-12
 * when it has none); `format` is an annotation only (Python's default); keywords a dialect does not
 * know are ignored; a schema that is itself invalid is refused. Ajv compiles each schema to a
 * function once: the outcome (function or refusal) is kept per spec version (a version's value
 * never changes). Each compile gets an Ajv instance of its own (~14 ms, once per version): Ajv
 * registers every schema it compiles by its `$id` and keeps it, so a shared instance would let one
 * project's spec `$ref` another project's, refuse a second spec with the same `$id`, and grow
 * without bound.
 *
 * Ajv treats a schema like code it was given, and runs it on the event loop that serves every
 * project: a spec is written by anyone with write access to one project, yet one value checked
 * against `{"pattern": "^(a+)+$"}` would freeze every request of every user for as long as the
 * regex backtracks (9 s for 29 characters, twice that per added one). So a spec whose `pattern`
 * or `patternProperties` key repeats without bound a part that is one piece of variable length
 * (the shape that backtracks exponentially; see backtracksExponentially) is refused with a 400
 * naming the pattern, before any value is checked; and because other slow shapes pass that check
 * (`[a-z]+@` scans a 1 MiB value for minutes, `(a|a)*` is exponential too) as does `uniqueItems`
 * over a long list, checking one value is also stopped after {@link MAX_VALIDATION_MS} (a 400). Specs are bounded like every object (size and depth).
 */
import { createContext, Script } from 'node:vm';
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { BadRequestError } from '../errors.js';
import { isRecord } from '../../wire/common.js';
import { clip, quote } from '../quote.js';

/** Compiled schemas kept; past this the oldest is dropped (a project rarely has more specs). */
const MAX_COMPILED_SPECS = 256;

/** Longest detail from Ajv sent back in a reason. */
const MAX_DETAIL_CHARS = 300;

/**
 * Longest the check of one value may hold the event loop. A value within the payload limit (1 MiB)
 * checks in a few milliseconds against any schema that is not pathological.
 */
export const MAX_VALIDATION_MS = 250;

/**
 * Runs `validate(value)` under a time limit: V8 stops a script run with `timeout` from a watchdog
 * thread, even inside a regex match, which nothing in the same thread could do. The context's two
 * globals are set for each run; the cost is about 0.1 ms per check.
 */
const validationScope = createContext({ validate: undefined as unknown, value: undefined as unknown });
const validationScript = new Script('validate(value)');

// `logger: false`: Ajv logs the whole generated function when it fails to compile one (megabytes
// on the server's stderr for a hostile spec); the failure reaches the client as a 400 instead.
const AJV_OPTIONS: Options = { strict: false, validateFormats: false, allErrors: false, logger: false };

type Dialect = '2020-12' | '2019-09' | 'draft-07';

/** `$schema` URIs by dialect, with and without the trailing `#`, over http and https. */
const DIALECTS: ReadonlyMap<string, Dialect> = new Map(
  (
    [
      ['json-schema.org/draft/2020-12/schema', '2020-12'],
      ['json-schema.org/draft/2019-09/schema', '2019-09'],
      ['json-schema.org/draft-07/schema', 'draft-07'],
    ] as const
  ).flatMap(([path, dialect]) =>
    ['http://', 'https://'].flatMap((scheme) => [
      [`${scheme}${path}`, dialect],
      [`${scheme}${path}#`, dialect],
    ]),
  ),
);

/** Per spec version: its compiled schema, or why it cannot be compiled (asked again, answered the same). */
const compiled = new Map<string, ValidateFunction | BadRequestError>();

/**
 * Check `value` against the `field_schema` of `spec` (the stored value of the annotation spec
 * that `specKey` names: project, name and digest).
 * @throws BadRequestError when the spec is not an annotation spec, its schema is invalid, or
 *   `value` does not match it.
 */
export function checkAnnotationValue(spec: unknown, specKey: string, value: unknown): void {
  const validate = compiledSchema(spec, specKey);
  if (validates(validate, value)) return;
  const error = validate.errors?.[0];
  // Cut: the path holds the value's own keys and the message may quote the spec's pattern.
  const detail = error === undefined ? '' : `: ${clip(`${error.instancePath || 'value'} ${error.message ?? 'is invalid'}`, MAX_DETAIL_CHARS)}`;
  throw new BadRequestError(`Feedback payload does not match annotation spec${detail}`);
}

/**
 * `validate(value)`, stopped after {@link MAX_VALIDATION_MS}, with a stack overflow answered as the
 * spec's fault: a schema that recurses without end (`{"allOf": [{"$ref": "#"}]}`, or a
 * `$dynamicRef` Ajv resolves to itself) makes Ajv's validation recurse too, where Python's
 * `jsonschema` would stop; and Ajv's code for a schema of about 2000 alternatives or properties in
 * one object may nest too deeply for V8 to run (see `compile`). The two cannot be told apart from
 * the error, so the reason names both.
 */
function validates(validate: ValidateFunction, value: unknown): boolean {
  validationScope.validate = validate;
  validationScope.value = value;
  try {
    return validationScript.runInContext(validationScope, { timeout: MAX_VALIDATION_MS }) === true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException | undefined)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
      throw new BadRequestError(
        `The annotation spec's field_schema took more than ${MAX_VALIDATION_MS} ms to check this value ` +
          '(a pattern that backtracks on it, or uniqueItems over a long list); the value was not stored',
      );
    }
    if (error instanceof RangeError) {
      throw new BadRequestError(
        "The annotation spec's field_schema could not be checked: validating a value overflowed the stack " +
          '(a schema that recurses without end, or one with some 2000 or more alternatives or properties in one object)',
      );
    }
    throw error;
  } finally {
    validationScope.validate = undefined;
    validationScope.value = undefined;
  }
}

function compiledSchema(spec: unknown, specKey: string): ValidateFunction {
  let outcome = compiled.get(specKey);
  if (outcome === undefined) {
    outcome = compile(spec);
    if (compiled.size >= MAX_COMPILED_SPECS) compiled.delete(compiled.keys().next().value!);
    compiled.set(specKey, outcome);
  }
  if (outcome instanceof BadRequestError) throw outcome;
  return outcome;
}

function compile(spec: unknown): ValidateFunction | BadRequestError {
  // Absent: any value. Null is no schema (the service's AnnotationSpec refuses it too).
  const schema = isRecord(spec) ? (spec.field_schema === undefined ? {} : spec.field_schema) : undefined;
  if (!isRecord(schema)) {
    return new BadRequestError('annotation_ref must point to an annotation spec: an object whose field_schema is a JSON Schema object');
  }
  const declared = schema.$schema;
  const dialect = declared === undefined ? '2020-12' : DIALECTS.get(String(declared));
  if (dialect === undefined) {
    return new BadRequestError(
      `The annotation spec's field_schema declares $schema ${quote(declared)}; this server validates JSON Schema 2020-12, 2019-09 and draft-07`,
    );
  }
  const backtracking = findBacktrackingPattern(schema);
  if (backtracking !== undefined) {
    return new BadRequestError(
      `The annotation spec's field_schema has the pattern ${quote(backtracking)}, which can take exponential time: ` +
        'it repeats, without bound, a part that is one piece of variable length, but for optional ones (as in "(a+)+")',
    );
  }
  try {
    return newValidator(dialect).compile(schema);
  } catch (error) {
    // Ajv compiles recursively, and V8 parses the code it makes recursively: a schema nested
    // hundreds deep, or one with thousands of alternatives or properties side by side (Ajv nests
    // the code of each in the one before), overflows the stack.
    if (error instanceof RangeError) {
      return new BadRequestError(
        "The annotation spec's field_schema could not be compiled: compiling it overflowed the stack " +
          '(a schema nested hundreds of levels deep, or one with some 2000 or more alternatives or properties in one object)',
      );
    }
    const reason = error instanceof Error ? error.message : String(error);
    return new BadRequestError(`The annotation spec's field_schema is not a valid JSON Schema: ${clip(reason, MAX_DETAIL_CHARS)}`);
  }
}

function newValidator(dialect: Dialect): Ajv {
  switch (dialect) {
    case '2020-12':
      return new Ajv2020(AJV_OPTIONS);
    case '2019-09':
      return new Ajv2019(AJV_OPTIONS);
    case 'draft-07':
      return new Ajv(AJV_OPTIONS);
  }
}

/**
 * The first regex in `schema` that {@link backtracksExponentially}: `pattern` values and
 * `patternProperties` keys, the two places Ajv compiles a regex (`format` is not checked here).
 * Every object in the schema is searched, data (`const`, `enum`, `default`) included: a
 * "pattern" there is refused too, which costs nothing real and spares knowing every keyword that
 * holds a schema in each dialect.
 */
function findBacktrackingPattern(schema: Record<string, unknown>): string | undefined {
  const pending: unknown[] = [schema];
  while (pending.length > 0) {
    const node = pending.pop();
    if (typeof node !== 'object' || node === null) continue;
    for (const [key, child] of Object.entries(node)) {
      if (key === 'pattern' && typeof child === 'string' && backtracksExponentially(child)) return child;
      if (key === 'patternProperties' && isRecord(child)) {
        const found = Object.keys(child).find(backtracksExponentially);
        if (found !== undefined) return found;
      }
      pending.push(child);
    }
  }
  return undefined;
}

/** What opens a group: `(`, `(?:`, a lookaround `(?=` `(?!` `(?<=` `(?<!`, or a named `(?<name>`. */
const GROUP_OPENING = /^\((?:\?(?:[:=!]|<[=!]|<[^>]*>))?/;
/** A quantifier (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`) with its lazy `?`, if any. */
const QUANTIFIER = /^(?:([*+?])|\{(\d+)(,(\d*))?\})\??/;
/** An escape whose braces belong to it, not to a quantifier: `\p{L}`, `\u{1F600}`. */
const BRACED_ESCAPE = /^\\[pPu]\{[^}]*\}/;

/** One atom of a pattern as the check sees it: whether it must match, whether its length varies. */
interface PatternAtom {
  required: boolean;
  varies: boolean;
  /** A group's atoms. */
  readonly body?: readonly PatternAtom[];
}

/**
 * Whether a regex repeats without bound (`*`, `+`, `{n,}`) a group that can split one input many
 * ways: a group that is, but for optional atoms, a single atom of variable length (`(a+)+`,
 * `(\w+\s?)*`, `(a{1,2})*`, `((a+))*`), or one whose atoms are all optional and some of variable
 * length (`(a?b?)*`). Shapes where a required atom of fixed length delimits each repetition
 * (`(-[a-z0-9]+)*`, `(\.\d+)*`, `([a-z]+\.)+`) are linear and pass, as do bounded repetitions
 * (`(\d{1,3}\.){3}`). Overlapping alternatives (`(a|a)*`), `(.*,)*`, backreferences and
 * polynomial shapes (`[a-z]+@`) are not caught here; the time limit on each check stops those.
 * Reads ECMAScript syntax as Ajv compiles it (flag `u`); for text that is no regex the answer
 * does not matter, since Ajv refuses it.
 */
function backtracksExponentially(pattern: string): boolean {
  /** The atoms of each open group, the whole pattern first. */
  const groups: PatternAtom[][] = [[]];
  /** The atom just read, which a quantifier applies to. */
  let last: PatternAtom | undefined;
  const read = (atom: PatternAtom): void => {
    groups[groups.length - 1]!.push(atom);
    last = atom;
  };
  let index = 0;
  while (index < pattern.length) {
    const rest = pattern.slice(index, index + 64);
    const char = pattern[index]!;
    let quantifier: RegExpExecArray | null = null;
    if (char === '\\') {
      index += BRACED_ESCAPE.exec(rest)?.[0].length ?? 2;
      read({ required: true, varies: false });
    } else if (char === '[') {
      index += 1;
      while (index < pattern.length && pattern[index] !== ']') index += pattern[index] === '\\' ? 2 : 1;
      index += 1;
      read({ required: true, varies: false });
    } else if (char === '(') {
      groups.push([]);
      last = undefined;
      index += GROUP_OPENING.exec(rest)![0].length;
    } else if (char === ')') {
      const body = groups.length > 1 ? groups.pop()! : [];
      read({ required: true, varies: body.some((atom) => atom.varies), body });
      index += 1;
    } else if (char === '|') {
      // Alternatives may differ in length: the group varies, and no branch's atoms are required.
      for (const atom of groups[groups.length - 1]!) atom.required = false;
      read({ required: false, varies: true });
      last = undefined;
      index += 1;
    } else if ((quantifier = QUANTIFIER.exec(rest)) !== null) {
      const [text, symbol, min, comma, max] = quantifier;
      const unbounded = symbol === '*' || symbol === '+' || max === '';
      if (unbounded && last?.body !== undefined && splitsManyWays(last.body)) return true;
      const fixedCount = min !== undefined && (comma === undefined || max === min);
      if (last !== undefined) {
        if (!fixedCount) last.varies = true;
        if (symbol === '*' || symbol === '?' || min === '0') last.required = false;
      }
      last = undefined;
      index += text.length;
    } else {
      read({ required: true, varies: false });
      index += 1;
    }
  }
  return false;
}

/** Whether repeating a group of these atoms can split one input many ways (see backtracksExponentially). */
function splitsManyWays(body: readonly PatternAtom[]): boolean {
  const required = body.filter((atom) => atom.required);
  return required.length === 0 ? body.some((atom) => atom.varies) : required.length === 1 && required[0]!.varies;
}
