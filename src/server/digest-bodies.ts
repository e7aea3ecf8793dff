/**
 * Bodies of `/table/create`, `/table/update` and `/obj/create`, read so that each table row and
 * object value keeps the text it arrived as: their digests are over Python's `json.dumps` of the
 * value as the hosted service parsed it (python-json.ts), which the number spelling decides
 * (`1.0` is a float there, an integer past 2^53 stays exact), and that is gone once the body is a
 * JavaScript value. The Python SDK computes an object's digest itself, the same way, and refers
 * to the object by it. Feedback payloads (`/feedback/create`, `/feedback/replace`,
 * `/feedback/batch/create`) are read the same way: the service stores `json.dumps(payload)` (keys
 * in their order), answers the payload from it and measures it for its 1 MiB limit.
 *
 * The readers plug into the app's JSON parser (`readBodyVerbatim`): they parse the body as the
 * parsed path does (`JSON.parse`), then note where each value's text starts, keyed by the parsed
 * object that holds it (a row itself; an object's `obj`). Schema validation and the route then
 * run as for any body; `rowText` and `objectValueText` turn a value into its Python text, from
 * the noted source when there is one. A body `JSON.parse` refuses is answered null and takes the
 * parsed path, which gives its usual 400.
 */
import { utf8BodyText } from './json-body-text.js';
import { BadRequestError } from './errors.js';
import { itemStarts, memberStart, pythonDumpsAt, skipWhitespace } from './python-json.js';
import { CanonicalJsonError, pythonJson } from '../wire/digest.js';
import { isRecord } from '../wire/common.js';

interface ValueSource {
  readonly source: string;
  readonly start: number;
}

/** Where each value of a body read here came from, by its holder; entries go with the body they belong to. */
const valueSources = new WeakMap<object, ValueSource>();

/** Reader of `/table/create` bodies: `{"table": {"rows": [row, ...]}}`. */
export function readTableCreateBody(bytes: Buffer): object | null {
  return readNotingValues(bytes, (source, body, note) => {
    const table = memberStart(source, skipWhitespace(source, 0), 'table');
    const starts = table === undefined ? undefined : rowStartsOf(source, table);
    const rows = isRecord(body) && isRecord(body.table) ? body.table.rows : undefined;
    if (starts !== undefined && Array.isArray(rows)) note(rows, starts);
  });
}

/** Reader of `/obj/create` bodies: `{"obj": {..., "val": value}}` (the source is noted on `obj`). */
export function readObjCreateBody(bytes: Buffer): object | null {
  return readNotingValues(bytes, (source, body, note) => {
    const objAt = memberStart(source, skipWhitespace(source, 0), 'obj');
    const valAt = objAt === undefined ? undefined : memberStart(source, objAt, 'val');
    if (valAt !== undefined && isRecord(body) && isRecord(body.obj)) note([body.obj], [valAt]);
  });
}

/** Reader of `/table/update` bodies: `{"updates": [{"append": {"row": row}}, {"insert": {"index", "row"}}, ...]}`. */
export function readTableUpdateBody(bytes: Buffer): object | null {
  return readNotingValues(bytes, (source, body, note) => {
    const updatesAt = memberStart(source, skipWhitespace(source, 0), 'updates');
    const starts = updatesAt === undefined ? undefined : itemStarts(source, updatesAt);
    const updates = isRecord(body) ? body.updates : undefined;
    if (starts === undefined || !Array.isArray(updates) || starts.length !== updates.length) return;
    updates.forEach((update: unknown, index) => {
      if (!isRecord(update)) return;
      for (const operation of ['append', 'insert']) {
        const payload = update[operation];
        const payloadAt = memberStart(source, starts[index] as number, operation);
        const rowAt = payloadAt === undefined ? undefined : memberStart(source, payloadAt, 'row');
        if (isRecord(payload) && rowAt !== undefined) note([payload.row], [rowAt]);
      }
    });
  });
}

/**
 * Reader of `/feedback/create` and `/feedback/replace` bodies: `{..., "payload": {...}}` (the
 * source is noted on the payload itself).
 */
export function readFeedbackBody(bytes: Buffer): object | null {
  return readNotingValues(bytes, (source, body, note) => {
    const payloadAt = memberStart(source, skipWhitespace(source, 0), 'payload');
    if (payloadAt !== undefined && isRecord(body)) note([body.payload], [payloadAt]);
  });
}

/** Reader of `/feedback/batch/create` bodies: `{"batch": [{..., "payload": {...}}, ...]}`. */
export function readFeedbackBatchBody(bytes: Buffer): object | null {
  return readNotingValues(bytes, (source, body, note) => {
    const batchAt = memberStart(source, skipWhitespace(source, 0), 'batch');
    const starts = batchAt === undefined ? undefined : itemStarts(source, batchAt);
    const batch = isRecord(body) ? body.batch : undefined;
    if (starts === undefined || !Array.isArray(batch) || starts.length !== batch.length) return;
    batch.forEach((item: unknown, index) => {
      const payloadAt = memberStart(source, starts[index] as number, 'payload');
      if (isRecord(item) && payloadAt !== undefined) note([item.payload], [payloadAt]);
    });
  });
}

/**
 * The Python `json.dumps` text of a row of a body read here (from its source text), or of any
 * other row (from its JavaScript value).
 * @throws BadRequestError naming `where` for a row nested too deeply or holding a number past the float range.
 */
export function rowText(row: Record<string, unknown>, where: string): string {
  return pythonText(row, row, `Invalid row at ${where}`);
}

/**
 * The Python `json.dumps` text of `obj.val` of an `/obj/create` body read here (from its source
 * text), or of any other (from its JavaScript value).
 * @throws BadRequestError for a value nested too deeply or holding a number past the float range.
 */
export function objectValueText(obj: { readonly val: unknown }): string {
  return pythonText(obj, obj.val, 'Invalid object value');
}

/**
 * The Python `json.dumps` text (keys in their order) of a feedback payload of a body read here
 * (from its source text), or of any other (from its JavaScript value).
 * @throws BadRequestError for a payload nested too deeply or holding a number past the float range.
 */
export function feedbackPayloadText(payload: Record<string, unknown>): string {
  return pythonText(payload, payload, 'Invalid feedback payload', false);
}

/** Python text of `value`, from the source noted on `holder` when there is one. */
function pythonText(holder: object, value: unknown, invalid: string, sortKeys = true): string {
  const noted = valueSources.get(holder);
  try {
    return noted === undefined ? pythonJson(value, { sortKeys }) : pythonDumpsAt(noted.source, noted.start, { sortKeys });
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new BadRequestError(`${invalid}: ${error.message}`);
    throw error;
  }
}

/** Notes where the value each of `holders` holds starts in the body's text (a row itself; an object's `obj`, its `val`). */
type Note = (holders: readonly unknown[], starts: readonly number[]) => void;

function readNotingValues(bytes: Buffer, locate: (source: string, body: unknown, note: Note) => void): object | null {
  const source = utf8BodyText(bytes);
  let body: unknown;
  try {
    body = JSON.parse(source);
  } catch {
    return null;
  }
  if (typeof body !== 'object' || body === null) return null;
  const note: Note = (holders, starts) => {
    if (holders.length !== starts.length) return;
    holders.forEach((holder, index) => {
      if (typeof holder === 'object' && holder !== null) valueSources.set(holder, { source, start: starts[index] as number });
    });
  };
  // The body parsed, so its text is valid JSON and locating cannot fail; were it to, the values
  // would still be read, from their parsed form.
  try {
    locate(source, body, note);
  } catch {
    // Values without a noted source are written from their parsed form (pythonJson).
  }
  return body;
}

function rowStartsOf(source: string, tableAt: number): number[] | undefined {
  const rowsAt = memberStart(source, tableAt, 'rows');
  return rowsAt === undefined ? undefined : itemStarts(source, rowsAt);
}
