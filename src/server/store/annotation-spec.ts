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
 * Ajv treats a schema like code it was given: a spec is written by someone with write access to
 * the project, and its `pattern` regexes run as written, so a catastrophic pattern slows that
 * project's own annotation writes. Specs are bounded like every object (size and depth).
 */
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { BadRequestError } from '../errors.js';
import { isRecord } from '../../wire/common.js';
import { quote } from '../quote.js';

/** Compiled schemas kept; past this the oldest is dropped (a project rarely has more specs). */
const MAX_COMPILED_SPECS = 256;

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
  const detail = error === undefined ? '' : `: ${error.instancePath || 'value'} ${error.message ?? 'is invalid'}`;
  throw new BadRequestError(`Feedback payload does not match annotation spec${detail}`);
}

/**
 * `validate(value)`, with a stack overflow answered as the spec's fault: a schema that recurses
 * without end (`{"allOf": [{"$ref": "#"}]}`, or a `$dynamicRef` Ajv resolves to itself) makes Ajv's
 * validation recurse too, where Python's `jsonschema` would stop; and Ajv's code for a schema of
 * about 2000 alternatives or properties in one object may nest too deeply for V8 to run (see
 * `compile`). The two cannot be told apart from the error, so the reason names both.
 */
function validates(validate: ValidateFunction, value: unknown): boolean {
  try {
    return validate(value);
  } catch (error) {
    if (error instanceof RangeError) {
      throw new BadRequestError(
        "The annotation spec's field_schema could not be checked: validating a value overflowed the stack " +
          '(a schema that recurses without end, or one with some 2000 or more alternatives or properties in one object)',
      );
    }
    throw error;
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
    return new BadRequestError(`The annotation spec's field_schema is not a valid JSON Schema: ${reason}`);
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
