/**
 * What a call shows, read from a span's unflattened attributes (SPEC §3): inputs, output, the
 * curated attributes, token usage, and the W&B fields (display name, thread, turn, run).
 */
import {
  ATTRIBUTE_PATHS,
  BARE_INPUT_KEYS,
  BARE_OUTPUT_KEYS,
  INPUT_PATHS,
  OUTPUT_PATHS,
  USAGE_PATHS,
  WANDB_PATHS,
} from './keys.js';
import { convertIndexedObjects } from './indexed-lists.js';
import { toDisplayName } from './names.js';
import { setOwn } from './json-values.js';
import { AttributeReader, isJsonObject, type AttributePath, type AttributeTree } from './unflatten.js';

/** The call fields that come from span attributes. */
export interface CallContent {
  inputs: Record<string, unknown>;
  /** null when no output attribute was found. */
  output: unknown;
  attributes: Record<string, unknown>;
  /** `summary.usage` (`{<model or "usage">: counts}`), or undefined when the span has no counts. */
  usage: Record<string, Record<string, unknown>> | undefined;
  displayName: string | undefined;
  threadId: string | undefined;
  isTurn: boolean;
  wbRunId: string | undefined;
  wbRunStep: number | undefined;
  wbRunStepEnd: number | undefined;
}

/**
 * Reads the call content from unflattened span attributes. `projectId` qualifies `wandb.wb_run_id`.
 * Every value taken into `inputs`, `output`, `attributes` and `summary.usage` has its indexed
 * objects turned into lists (`indexed-lists.ts`), as the hosted service has them; `tree` itself is
 * not changed, and the fallback (`attributes` = the whole tree) keeps it as it is, as there.
 * `made`, when given, receives the lists and objects made so (the JSON writer tells them by it).
 *
 * @example
 * const tree = unflattenAttributes({ 'input.value': 'hi', 'llm.model_name': 'gpt-4o' });
 * extractCallContent(tree, 'acme/demo').inputs; // { 'input.value': 'hi' }
 */
export function extractCallContent(tree: AttributeTree, projectId: string, made?: object[]): CallContent {
  const reader = new ContentReader(tree, made);
  const inputs = findInputs(reader);
  const output = findOutput(reader);
  let attributes = findAttributes(reader);
  const usage = findUsage(reader, attributes);
  const foundAny = inputs !== undefined || output !== undefined || attributes !== undefined || usage !== undefined;

  if (foundAny) {
    const custom = reader.get(WANDB_PATHS.attributes);
    if (isJsonObject(custom) && isNonEmpty(custom)) {
      attributes ??= {};
      // Member by member: the hosted service converts `wandb.attributes` whole, so one whose own
      // keys are 0..n-1 becomes a list that its `dict.update` cannot merge; here they stay keys.
      for (const key of Object.keys(custom)) setOwn(attributes, key, reader.taken(custom[key]));
    }
  } else {
    // Spans of no known convention keep everything they carry (`wandb.attributes` included, still
    // nested): nothing is hidden from the user. The hosted service does the same, and as it
    // extracts nothing here it converts nothing: indexed objects stay objects.
    attributes = tree.root;
  }

  const displayName = textOf(reader.get(WANDB_PATHS.displayName));
  const threadId = firstText(reader, WANDB_PATHS.threadId);
  return {
    inputs: inputs ?? {},
    output: output ?? null,
    attributes: attributes ?? {},
    usage,
    displayName: displayName === undefined ? undefined : toDisplayName(displayName),
    threadId,
    isTurn: threadId !== undefined && isNonEmpty(reader.get(WANDB_PATHS.isTurn)),
    wbRunId: qualifiedRunId(reader.get(WANDB_PATHS.runId), projectId),
    wbRunStep: integerOf(reader.get(WANDB_PATHS.runStep)),
    wbRunStepEnd: integerOf(reader.get(WANDB_PATHS.runStepEnd)),
  };
}

/** An attribute reader that also hands out values as a call takes them. */
class ContentReader extends AttributeReader {
  readonly #made: object[] | undefined;

  constructor(tree: AttributeTree, made: object[] | undefined) {
    super(tree);
    this.#made = made;
  }

  /** `value` as a call field holds it: its indexed objects as lists. */
  taken(value: unknown): unknown {
    return convertIndexedObjects(value, this.#made);
  }
}

function findInputs(reader: ContentReader): Record<string, unknown> | undefined {
  for (const path of INPUT_PATHS) {
    const found = reader.get(path);
    if (!isNonEmpty(found)) continue;
    // Converted before `input`/`inputs` is unwrapped, as there: an indexed `input` stays keyed.
    const value = reader.taken(found);
    if (BARE_INPUT_KEYS.has(path.key) && isJsonObject(value)) return value;
    return keyed(path.key, value);
  }
  return undefined;
}

function findOutput(reader: ContentReader): unknown {
  for (const path of OUTPUT_PATHS) {
    const found = reader.get(path);
    if (!isNonEmpty(found)) continue;
    const value = reader.taken(found);
    return BARE_OUTPUT_KEYS.has(path.key) ? value : keyed(path.key, value);
  }
  return undefined;
}

// Written field by field rather than in a loop over names: each store site then sees one or two
// object shapes instead of every name going through one megamorphic store (it showed in profiles).
function findAttributes(reader: ContentReader): Record<string, unknown> | undefined {
  const system = firstNonEmpty(reader, ATTRIBUTE_PATHS.system);
  const kind = firstNonEmpty(reader, ATTRIBUTE_PATHS.kind);
  const model = firstNonEmpty(reader, ATTRIBUTE_PATHS.model);
  const provider = firstNonEmpty(reader, ATTRIBUTE_PATHS.provider);
  const modelParameters = firstNonEmpty(reader, ATTRIBUTE_PATHS.model_parameters);
  const agent = firstNonEmpty(reader, ATTRIBUTE_PATHS.agent);
  const tools = firstNonEmpty(reader, ATTRIBUTE_PATHS.tools);
  const operation = firstNonEmpty(reader, ATTRIBUTE_PATHS.operation);
  if (
    system === undefined &&
    kind === undefined &&
    model === undefined &&
    provider === undefined &&
    modelParameters === undefined &&
    agent === undefined &&
    tools === undefined &&
    operation === undefined
  ) {
    return undefined;
  }
  const attributes: Record<string, unknown> = {};
  if (system !== undefined) attributes.system = system;
  if (kind !== undefined) attributes.kind = kind;
  if (model !== undefined) attributes.model = model;
  if (provider !== undefined) attributes.provider = provider;
  if (modelParameters !== undefined) attributes.model_parameters = modelParameters;
  if (agent !== undefined) attributes.agent = agent;
  if (tools !== undefined) attributes.tools = tools;
  if (operation !== undefined) attributes.operation = operation;
  return attributes;
}

/** `{<model or "usage">: counts}`; the model is the one the curated attributes name. */
function findUsage(
  reader: ContentReader,
  attributes: Record<string, unknown> | undefined,
): Record<string, Record<string, unknown>> | undefined {
  const input = firstNonEmpty(reader, USAGE_PATHS.input_tokens);
  const output = firstNonEmpty(reader, USAGE_PATHS.output_tokens);
  const prompt = firstNonEmpty(reader, USAGE_PATHS.prompt_tokens);
  const completion = firstNonEmpty(reader, USAGE_PATHS.completion_tokens);
  const total = firstNonEmpty(reader, USAGE_PATHS.total_tokens);
  if (input === undefined && output === undefined && prompt === undefined && completion === undefined && total === undefined) {
    return undefined;
  }
  const counts: Record<string, unknown> = {};
  if (input !== undefined) counts.input_tokens = parseIntegerLoosely(input);
  if (output !== undefined) counts.output_tokens = parseIntegerLoosely(output);
  if (prompt !== undefined) counts.prompt_tokens = parseIntegerLoosely(prompt);
  if (completion !== undefined) counts.completion_tokens = parseIntegerLoosely(completion);
  if (total !== undefined) {
    counts.total_tokens = parseIntegerLoosely(total);
  } else {
    const sum =
      sumOfIntegers(counts.prompt_tokens, counts.completion_tokens) ??
      sumOfIntegers(counts.input_tokens, counts.output_tokens);
    if (sum !== undefined) counts.total_tokens = sum;
  }
  return keyed(usageKey(attributes), counts) as Record<string, Record<string, unknown>>;
}

function usageKey(attributes: Record<string, unknown> | undefined): string {
  let model = attributes?.model;
  if (!isNonEmpty(model)) {
    const parameters = attributes?.model_parameters;
    model = isJsonObject(parameters) ? parameters.model : undefined;
  }
  return textOf(model) ?? 'usage';
}

function sumOfIntegers(a: unknown, b: unknown): number | undefined {
  return Number.isSafeInteger(a) && Number.isSafeInteger(b) ? (a as number) + (b as number) : undefined;
}

/** The first non-empty value, as extracted (indexed objects as lists): curated attributes, counts. */
function firstNonEmpty(reader: ContentReader, paths: readonly AttributePath[]): unknown {
  for (const path of paths) {
    const value = reader.get(path);
    if (isNonEmpty(value)) return reader.taken(value);
  }
  return undefined;
}

/** The first source holding text or a number (ids are text on the wire). */
function firstText(reader: AttributeReader, paths: readonly AttributePath[]): string | undefined {
  for (const path of paths) {
    const text = textOf(reader.get(path));
    if (text !== undefined) return text;
  }
  return undefined;
}

/**
 * "Non-empty" as the hosted service reads it (Python truthiness): not null, false, 0, '', [] or {}.
 * So a count of 0 or `wandb.wb_run_step` 0 counts as absent there, and here too.
 */
export function isNonEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0 || value === '') return false;
  if (typeof value !== 'object') return true;
  if (Array.isArray(value)) return value.length > 0;
  for (const key in value) if (Object.hasOwn(value, key)) return true;
  return false;
}

/** Non-empty text, or a finite number as text; anything else is not a usable name or id. */
function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number' && Number.isFinite(value) && value !== 0) return String(value);
  return undefined;
}

const INTEGER_TEXT = /^\s*[+-]?\d+(?:_\d+)*\s*$/;

/**
 * Counts the way the hosted service reads them (Python `int(value)` when that works): numbers are
 * truncated, booleans are 0/1, integer text is parsed; anything else is kept as it came.
 */
export function parseIntegerLoosely(value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? Math.trunc(value) : value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'string' && INTEGER_TEXT.test(value)) {
    const parsed = Number(value.replaceAll('_', '').trim());
    return Number.isSafeInteger(parsed) ? parsed : value;
  }
  return value;
}

function integerOf(value: unknown): number | undefined {
  if (!isNonEmpty(value)) return undefined;
  const parsed = parseIntegerLoosely(value);
  return Number.isSafeInteger(parsed) ? (parsed as number) : undefined;
}

/**
 * `"<project_id>:<run>"` for a plain run name. A value that already names this project's run is
 * kept; other values with `/` or `:` are malformed and dropped, as the hosted service drops them.
 */
function qualifiedRunId(value: unknown, projectId: string): string | undefined {
  const run = textOf(value);
  if (run === undefined) return undefined;
  if (!run.includes('/') && !run.includes(':')) return `${projectId}:${run}`;
  return run.startsWith(`${projectId}:`) && run.length > projectId.length + 1 ? run : undefined;
}

function keyed(key: string, value: unknown): Record<string, unknown> {
  const object: Record<string, unknown> = {};
  setOwn(object, key, value);
  return object;
}
