/**
 * A span's call items written as JSON bytes (SPEC §3, §4.2): what the exporter sends. The JSON is
 * that of {@link toUpsertItems}'s items, written straight into the batch's bytes without building
 * the items as objects first. What this saves, measured with the benchmark's spans (Node 20, this
 * project's 2-core VM): JSON.stringify of the items, then measuring and encoding the text, cost
 * ~8 µs a span, and the mapping that builds the objects ~3.5 µs more.
 *
 * Where the time goes instead:
 * - The fixed parts (the item envelopes, field names, `otel_dump`'s skeleton) are constants.
 * - `otel_dump.attributes` is written from the key list's cached layout (`attribute-layout.ts`):
 *   member names encoded once per layout, values in place.
 * - A call holds most attribute values twice (in `otel_dump.attributes`, and in `inputs`,
 *   `output` or `attributes`): the second time, the bytes are copied from the first.
 * - An attribute value that was JSON text (OpenInference's `input.value`, say) is written as that
 *   text, not re-serialised from its parsed value. It parses to the same value; the bytes can
 *   differ from `JSON.stringify`'s (the instrumentation's spacing is kept, and so are the digits
 *   of a number past what a double holds).
 * - The resource, the same for every span of a provider, is encoded once.
 *
 * Every other byte is the text `JSON.stringify` gives for the items: a span that does not fit the
 * fast path (mapping notes, values of unusual types, more than `MAX_LAYOUT_KEYS` attributes) is
 * mapped with {@link toCallParts} and written from those objects. Tests compare both ways.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { encodeConstant, MIN_REPEATED_STRING, WrittenValues, type JsonWriter } from '../wire/json-writer.js';
import { buildTree, layOut, type LaidOutAttributes } from './attribute-layout.js';
import type { AttributeTree } from './unflatten.js';
import { extractCallContent, type CallContent } from './content.js';
import { toOpName } from './names.js';
import { dumpEvent, dumpLink, dumpResource, exceptionText, scopeVersion } from './otel-dump.js';
import { fromReadableSpan, isReadableSpan, withLowercaseIds, type SpanInput } from './span-input.js';
import { hrTimeToIso } from './timestamps.js';
import { toCallParts, toCompletedCall } from './to-call.js';

const START_ITEM_OPEN = encodeConstant('{"mode":"start","req":{"start":');
const END_ITEM_OPEN = encodeConstant('{"mode":"end","req":{"end":');
const ITEM_CLOSE = encodeConstant('}}');
const OBJECT_OPEN = 0x7b;
const OBJECT_CLOSE = 0x7d;
const LIST_OPEN = 0x5b;
const LIST_CLOSE = 0x5d;
const EMPTY_LIST = encodeConstant('[]');

/** Pre-encoded pieces of the fast path, in the order the items carry them. */
const PIECES = {
  startOpen: encodeConstant('{"mode":"start","req":{"start":{"project_id":'),
  projectIdMember: encodeConstant('"project_id":'),
  id: encodeConstant(',"id":'),
  traceId: encodeConstant(',"trace_id":'),
  parentId: encodeConstant(',"parent_id":'),
  opName: encodeConstant(',"op_name":'),
  startedAt: encodeConstant(',"started_at":'),
  attributes: encodeConstant(',"attributes":'),
  inputs: encodeConstant(',"inputs":'),
  dumpName: encodeConstant(',"otel_dump":{"name":'),
  dumpTraceId: encodeConstant(',"context":{"trace_id":'),
  dumpSpanId: encodeConstant(',"span_id":'),
  dumpTraceState: encodeConstant(',"trace_state":'),
  dumpKind: encodeConstant('},"kind":'),
  dumpParentId: encodeConstant(',"parent_id":'),
  dumpStartTime: encodeConstant(',"start_time":'),
  dumpEndTime: encodeConstant(',"end_time":'),
  dumpStatusCode: encodeConstant(',"status":{"code":'),
  dumpStatusMessage: encodeConstant(',"message":'),
  dumpAttributes: encodeConstant('},"attributes":'),
  dumpEvents: encodeConstant(',"events":'),
  dumpLinks: encodeConstant(',"links":'),
  dumpResource: encodeConstant(',"resource":'),
  dumpScopeName: encodeConstant(',"scope":{"name":'),
  dumpScopeVersion: encodeConstant(',"version":'),
  dumpClose: encodeConstant('}}'),
  displayName: encodeConstant(',"display_name":'),
  threadId: encodeConstant(',"thread_id":'),
  turnId: encodeConstant(',"turn_id":'),
  wbRunId: encodeConstant(',"wb_run_id":'),
  wbRunStep: encodeConstant(',"wb_run_step":'),
  itemClose: encodeConstant('}}}'),
  endOpen: encodeConstant('{"mode":"end","req":{"end":{"project_id":'),
  endedAt: encodeConstant(',"ended_at":'),
  output: encodeConstant(',"output":'),
  summary: encodeConstant(',"summary":'),
  usage: encodeConstant('{"usage":'),
  exception: encodeConstant(',"exception":'),
  wbRunStepEnd: encodeConstant(',"wb_run_step_end":'),
} as const;

/** `otel_dump.resource` as bytes, by the (per provider) resource dump object. */
const resourceBytes = new WeakMap<object, Uint8Array>();

/**
 * Writes a span's two `call/upsert_batch` items into `out`, from its position: the start item, a
 * comma, the end item (see the module comment for how). Throws what `JSON.stringify` of the
 * items would throw (a value it cannot write); what it wrote of this span is then left in `out`
 * for the caller to discard.
 *
 * @example
 * const out = new JsonWriter();
 * out.begin();
 * writeUpsertItems(readableSpan, 'acme/demo', out);
 * JSON.parse(`[${Buffer.from(out.end())}]`)[0].mode; // 'start'
 */
export function writeUpsertItems(span: SpanInput | ReadableSpan, projectId: string, out: JsonWriter): void {
  const from = out.recordLength;
  if (tryFastPath(span, projectId, out, writeUpsertFast)) return;
  out.rewind(from);
  // The object path, as JSON.stringify writes it (which also takes nesting the writer refuses).
  const { start, end } = toCallParts(span, projectId);
  out.constant(START_ITEM_OPEN);
  out.jsonText(JSON.stringify(start));
  out.constant(ITEM_CLOSE);
  out.comma();
  out.constant(END_ITEM_OPEN);
  out.jsonText(JSON.stringify(end));
  out.constant(ITEM_CLOSE);
}

/**
 * Writes a span as one entry of `/v2/{entity}/{project}/calls/complete` (complete-mode projects):
 * the JSON of {@link toCompletedCall}, written the way {@link writeUpsertItems} writes items.
 *
 * @example
 * writeCompletedCall(readableSpan, 'acme/demo', out);
 */
export function writeCompletedCall(span: SpanInput | ReadableSpan, projectId: string, out: JsonWriter): void {
  const from = out.recordLength;
  if (tryFastPath(span, projectId, out, writeCompletedFast)) return;
  out.rewind(from);
  out.jsonText(JSON.stringify(toCompletedCall(span, projectId)));
}

/** What the fast path has read and mapped of a span before writing it. */
interface FastCall {
  readonly input: SpanInput;
  readonly projectId: string;
  readonly tree: TreeWriter;
  readonly content: CallContent;
  readonly startedAt: string;
  readonly endedAt: string;
  readonly opName: string;
  readonly exception: string | undefined;
}

/** Runs the fast path; false when the span is not for it or it failed (the caller rewinds). */
function tryFastPath(
  span: SpanInput | ReadableSpan,
  projectId: string,
  out: JsonWriter,
  write: (call: FastCall, out: JsonWriter) => void,
): boolean {
  try {
    const input = withLowercaseIds(isReadableSpan(span) ? fromReadableSpan(span) : span);
    if (!hasPlainFields(input)) return false;
    const laidOut = layOut(input.attributes);
    if (laidOut === undefined) return false;
    const tree = new TreeWriter(laidOut, out);
    write(
      {
        input,
        projectId,
        tree,
        content: extractCallContent(tree.tree, projectId, tree.madeFromIndexedObjects),
        startedAt: hrTimeToIso(input.startTime),
        endedAt: hrTimeToIso(input.endTime),
        opName: toOpName(input.name),
        exception: exceptionText(input),
      },
      out,
    );
    return true;
  } catch {
    // Whatever failed, the object path maps the span with its notes (or throws itself).
    return false;
  }
}

function writeUpsertFast(call: FastCall, out: JsonWriter): void {
  out.constant(PIECES.startOpen);
  writeStartMembers(call, out);
  out.constant(PIECES.itemClose);
  out.comma();
  writeStringMember(PIECES.endOpen, call.projectId, out);
  writeStringMember(PIECES.id, call.input.spanId, out);
  writeEndMembers(call, out);
  out.constant(PIECES.itemClose);
}

function writeCompletedFast(call: FastCall, out: JsonWriter): void {
  out.byte(OBJECT_OPEN);
  out.constant(PIECES.projectIdMember);
  writeStartMembers(call, out);
  writeEndMembers(call, out);
  out.byte(OBJECT_CLOSE);
}

/**
 * The start part's members, from `project_id`'s value on (the caller writes the opening), in the
 * order toCallParts builds them (tests compare the bytes).
 */
function writeStartMembers(call: FastCall, out: JsonWriter): void {
  const { input, tree, content } = call;
  out.string(call.projectId);
  writeStringMember(PIECES.id, input.spanId, out);
  writeStringMember(PIECES.traceId, input.traceId, out);
  out.constant(PIECES.parentId);
  writeNullable(input.parentSpanId || undefined, out);
  writeStringMember(PIECES.opName, call.opName, out);
  out.constant(PIECES.startedAt);
  out.quotedAscii(call.startedAt);
  out.constant(PIECES.attributes);
  tree.writeContent(content.attributes);
  out.constant(PIECES.inputs);
  tree.writeContent(content.inputs);
  writeOtelDump(call, out);
  writeStartOptionals(content, input.spanId, out);
}

/** The end part's members after its `id`: `ended_at` on. */
function writeEndMembers(call: FastCall, out: JsonWriter): void {
  const { content } = call;
  out.constant(PIECES.endedAt);
  out.quotedAscii(call.endedAt);
  out.constant(PIECES.output);
  call.tree.writeContent(content.output);
  out.constant(PIECES.summary);
  if (content.usage === undefined) {
    out.ascii('{}');
  } else {
    out.constant(PIECES.usage);
    out.value(content.usage);
    out.byte(OBJECT_CLOSE);
  }
  writeOptionalMember(PIECES.exception, call.exception, out);
  writeOptionalMember(PIECES.wbRunStepEnd, content.wbRunStepEnd, out);
}

/**
 * The span fields the fast path writes without the object path's conversions: text where the
 * mapping expects text, and no notes from reading the span. Anything else takes the object path,
 * which handles (and notes) it.
 */
function hasPlainFields(input: SpanInput): boolean {
  return (
    (input.readNotes === undefined || input.readNotes.length === 0) &&
    typeof input.name === 'string' &&
    typeof input.traceId === 'string' &&
    typeof input.spanId === 'string' &&
    isOptionalText(input.parentSpanId) &&
    isOptionalText(input.traceState) &&
    typeof input.kind === 'string' &&
    typeof input.status?.code === 'string' &&
    isOptionalText(input.status.message) &&
    typeof input.scope?.name === 'string' &&
    isOptionalText(input.scope.version) &&
    Array.isArray(input.events) &&
    Array.isArray(input.links) &&
    typeof input.resource?.attributes === 'object'
  );
}

function isOptionalText(value: unknown): boolean {
  return value === undefined || typeof value === 'string';
}

function writeNullable(text: string | null | undefined, out: JsonWriter): void {
  if (text === undefined || text === null) out.ascii('null');
  else out.string(text);
}

function writeOtelDump({ input, tree, startedAt, endedAt }: FastCall, out: JsonWriter): void {
  writeStringMember(PIECES.dumpName, input.name, out);
  writeStringMember(PIECES.dumpTraceId, input.traceId, out);
  writeStringMember(PIECES.dumpSpanId, input.spanId, out);
  writeStringMember(PIECES.dumpTraceState, input.traceState ?? '', out);
  writeStringMember(PIECES.dumpKind, input.kind, out);
  out.constant(PIECES.dumpParentId);
  // buildOtelDump writes the parent as the span has it (`?? null`), even an empty string.
  writeNullable(input.parentSpanId, out);
  out.constant(PIECES.dumpStartTime);
  out.quotedAscii(startedAt);
  out.constant(PIECES.dumpEndTime);
  out.quotedAscii(endedAt);
  writeStringMember(PIECES.dumpStatusCode, input.status.code, out);
  writeStringMember(PIECES.dumpStatusMessage, input.status.message ?? '', out);
  out.constant(PIECES.dumpAttributes);
  tree.writeRoot();
  out.constant(PIECES.dumpEvents);
  if (input.events.length === 0) out.constant(EMPTY_LIST);
  else out.value(input.events.map(dumpEvent));
  out.constant(PIECES.dumpLinks);
  if (input.links.length === 0) out.constant(EMPTY_LIST);
  else out.value(input.links.map(dumpLink));
  out.constant(PIECES.dumpResource);
  const resource = dumpResource(input.resource);
  let bytes = resourceBytes.get(resource);
  if (bytes === undefined) {
    bytes = encodeConstant(JSON.stringify(resource));
    resourceBytes.set(resource, bytes);
  }
  out.constant(bytes);
  writeStringMember(PIECES.dumpScopeName, input.scope.name, out);
  out.constant(PIECES.dumpScopeVersion);
  writeNullable(scopeVersion(input.scope), out);
  out.constant(PIECES.dumpClose);
}

function writeStartOptionals(content: CallContent, spanId: string, out: JsonWriter): void {
  writeOptionalMember(PIECES.displayName, content.displayName, out);
  writeOptionalMember(PIECES.threadId, content.threadId, out);
  if (content.threadId !== undefined && content.isTurn) writeOptionalMember(PIECES.turnId, spanId, out);
  writeOptionalMember(PIECES.wbRunId, content.wbRunId, out);
  writeOptionalMember(PIECES.wbRunStep, content.wbRunStep, out);
}

/** A member whose value is text: `piece` (`,"name":`) and the JSON string. */
function writeStringMember(piece: Uint8Array, text: string, out: JsonWriter): void {
  out.constant(piece);
  out.string(text);
}

/** `,"name":value` for a member the mapping sets only when it has a value (`piece` is `,"name":`). */
function writeOptionalMember(piece: Uint8Array, value: string | number | undefined, out: JsonWriter): void {
  if (value === undefined) return;
  out.constant(piece);
  if (typeof value === 'number') out.number(value);
  else out.string(value);
}

/**
 * One span's unflattened attributes, written so that each part of the tree is serialised once:
 * the first time a leaf value or a branch is written (in `attributes`/`inputs`, or in
 * `otel_dump.attributes`), where its bytes went is noted; later it is copied from there.
 */
class TreeWriter {
  readonly tree: AttributeTree;
  /** The lists and objects the content holds in place of indexed objects (`extractCallContent`'s `made`). */
  readonly madeFromIndexedObjects: object[] = [];
  readonly #objects: object[];
  readonly #laidOut: LaidOutAttributes;
  readonly #out: JsonWriter;
  readonly #written = new WrittenValues();

  constructor(laidOut: LaidOutAttributes, out: JsonWriter) {
    const { tree, objects } = buildTree(laidOut);
    this.tree = tree;
    this.#objects = objects;
    this.#laidOut = laidOut;
    this.#out = out;
  }

  /** `otel_dump.attributes`. */
  writeRoot(): void {
    this.#writeNode(0);
  }

  /**
   * A call field made of tree parts (`attributes`, `inputs`, `output`): a tree part itself, or an
   * object of the mapping's own whose members are tree parts (`{"input.value": <leaf>}`), or lists
   * made from indexed objects (`{"gen_ai.prompt": [<branch>, <branch>]}`).
   */
  writeContent(value: unknown): void {
    if (isOwnObject(value) && !this.#objects.includes(value) && !this.#laidOut.values.includes(value)) {
      this.#writeMembers(value);
    } else {
      this.#writeContentPart(value);
    }
  }

  /**
   * A value the content holds: a branch, a leaf value, a list or object made from indexed objects
   * (`indexed-lists.ts`), or a value of the mapping's own.
   */
  #writeContentPart(value: unknown): void {
    const isObject = typeof value === 'object' && value !== null;
    if (isObject) {
      const node = this.#objects.indexOf(value);
      if (node >= 0) {
        this.#writeNode(node);
        return;
      }
    }
    const leaf = isRepeatable(value) ? this.#laidOut.values.indexOf(value) : -1;
    if (leaf >= 0) {
      this.#writeLeaf(leaf);
    } else if (isObject && this.madeFromIndexedObjects.includes(value)) {
      // A list made from `gen_ai.prompt.N.*` holds the tree's message branches: written part by
      // part, they are noted, and otel_dump.attributes copies their bytes instead of writing them.
      if (Array.isArray(value)) this.#writeElements(value);
      else this.#writeMembers(value);
    } else {
      this.#out.value(value, this.#written);
    }
  }

  /** An object of the mapping's own, member by member as JSON.stringify lists them. */
  #writeMembers(object: object): void {
    const out = this.#out;
    out.byte(OBJECT_OPEN);
    let first = true;
    for (const key in object) {
      if (!Object.hasOwn(object, key)) continue;
      const member = (object as Record<string, unknown>)[key];
      if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
      if (!first) out.comma();
      first = false;
      out.key(key);
      this.#writeContentPart(member);
    }
    out.byte(OBJECT_CLOSE);
  }

  /** A list of the mapping's own (its elements are JSON values, never skipped). */
  #writeElements(list: readonly unknown[]): void {
    const out = this.#out;
    out.byte(LIST_OPEN);
    for (let i = 0; i < list.length; i++) {
      if (i > 0) out.comma();
      this.#writeContentPart(list[i]);
    }
    out.byte(LIST_CLOSE);
  }

  #writeNode(index: number): void {
    const out = this.#out;
    const object = this.#objects[index]!;
    if (out.copyIfWritten(object, this.#written)) return;
    const from = out.recordLength;
    const { children, prefixes } = this.#laidOut.layout.nodes[index]!;
    if (children.length === 0) {
      out.ascii('{}');
    } else {
      for (let i = 0; i < children.length; i++) {
        out.constant(prefixes[i]!);
        const child = children[i]!;
        if (child >= 0) this.#writeNode(child);
        else this.#writeLeaf(~child);
      }
      out.byte(OBJECT_CLOSE);
    }
    this.#written.note(object, from, out.recordLength);
  }

  /** The value of the attribute at `position`: its JSON text if it was one, copied if written before. */
  #writeLeaf(position: number): void {
    const out = this.#out;
    const value = this.#laidOut.values[position];
    const repeatable = isRepeatable(value);
    if (repeatable && out.copyIfWritten(value, this.#written)) return;
    const from = out.recordLength;
    const jsonText = this.#laidOut.jsonTexts[position];
    if (jsonText !== undefined) out.jsonText(jsonText);
    else out.value(value);
    if (repeatable) this.#written.note(value, from, out.recordLength);
  }
}

/** Values worth noting where they were written: objects, and strings long enough to copy. */
function isRepeatable(value: unknown): boolean {
  return (typeof value === 'object' && value !== null) || (typeof value === 'string' && value.length >= MIN_REPEATED_STRING);
}

/** A plain object (not a list) that JSON.stringify writes member by member. */
function isOwnObject(value: unknown): value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return (prototype === Object.prototype || prototype === null) && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}
