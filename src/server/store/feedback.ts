/**
 * Feedback records on SQLite (SPEC §2.3): create (one, a batch, or in place of another) with the
 * service's checks (the payload here, the refs in `weave-refs.ts` and `feedback-kinds.ts`), query
 * with `fields`/`$expr`/`sort_by`/`limit`/`offset`, purge by id. A payload is stored as the
 * service stores it, Python's `json.dumps` of the payload as sent (`digest-bodies.ts`): `1.0`
 * stays a float and an integer past 2^53 exact, and answers carry that text as it is, which is
 * why they are JSON text rather than values. Every request is one transaction
 * or one statement: a batch is stored whole or not at all, and a replace never deletes the old
 * record without storing the new one (the service purges first and then checks the new record, so
 * a new record that breaks a rule loses the old one there).
 */
import type { Query } from '../../wire/common.js';
import type { SqliteDatabase } from './sqlite.js';
import { BadRequestError, HttpError } from '../errors.js';
import type { FieldTable } from '../query/fields.js';
import { compileFieldJsonRef } from '../query/index.js';
import { quote } from '../quote.js';
import { purgeIds } from '../query/purge-ids.js';
import {
  FEEDBACK_RECORD_FIELDS,
  type Feedback,
  type FeedbackCreateReq,
  type FeedbackQueryReq,
} from '../../wire/feedback.js';
import { uuidv7 } from '../ids.js';
import { nowInstant } from '../timestamps.js';
import { listQueryTail } from './content-common.js';
import { StatementCache } from './statement-cache.js';
import { assertJsonDepth } from '../json-depth.js';
import { feedbackPayloadText } from '../digest-bodies.js';
import { pythonDumpsAt } from '../python-json.js';
import { checkFeedbackKind, type ReadObjectVersion } from './feedback-kinds.js';
import { createObjectStore, type ObjectStore } from './objects.js';
import { parseProjectRef, type WeaveRef } from './weave-refs.js';

/**
 * Largest payload, in characters of Python's `json.dumps` of it (ASCII: non-ASCII characters
 * written as `\uXXXX` escapes), as the hosted service measures it.
 */
export const MAX_PAYLOAD_BYTES = 1 << 20;
/** Longest client-chosen feedback id. */
export const MAX_FEEDBACK_ID_LENGTH = 128;
/**
 * Longest the checks of one `feedback/batch/create` may take together: each record's annotation
 * check may take up to MAX_VALIDATION_MS on the event loop every project shares, and a batch holds
 * up to MAX_FEEDBACK_BATCH records. Ordinary records take microseconds each.
 */
export const MAX_BATCH_CHECK_MS = 1000;
/** The reaction feedback type, whose payload is `{"emoji": <one emoji>}`. */
export const REACTION_FEEDBACK_TYPE = 'wandb.reaction.1';
/** The note feedback type, whose payload holds `note`: text of 1 to {@link MAX_NOTE_CHARS} characters. */
export const NOTE_FEEDBACK_TYPE = 'wandb.note.1';
/** The hosted service's bounds on a note, in characters (code points, as Python counts them). */
const MAX_NOTE_CHARS = 1024;
const PURGE_SHAPE = 'Purge query must select feedback by id: {"$eq": [{"$getField": "id"}, {"$literal": "<id>"}]} or an "$or" of those';

/** What `$expr`, `sort_by` and `fields` may name. Column names only: never user text. */
export const FEEDBACK_FIELDS: FieldTable = {
  id: { sql: 'id', type: 'text' },
  project_id: { sql: 'project_id', type: 'text' },
  weave_ref: { sql: 'weave_ref', type: 'text' },
  feedback_type: { sql: 'feedback_type', type: 'text' },
  payload: { sql: 'payload', type: 'json' },
  creator: { sql: 'creator', type: 'text' },
  created_at: { sql: 'created_at', type: 'datetime' },
  wb_user_id: { sql: 'wb_user_id', type: 'text' },
  annotation_ref: { sql: 'annotation_ref', type: 'text' },
  runnable_ref: { sql: 'runnable_ref', type: 'text' },
  call_ref: { sql: 'call_ref', type: 'text' },
  trigger_ref: { sql: 'trigger_ref', type: 'text' },
};

export interface FeedbackStore {
  /**
   * Store one record for user `wbUserId`; re-sending the same id with the same content is a no-op.
   * Answers the `FeedbackCreateRes` as JSON text, the payload as stored.
   */
  create(request: FeedbackCreateReq, wbUserId: string): string;
  /**
   * Store every record of a batch as `create` does, all or none: the first record that breaks a
   * rule fails the batch with a 400 naming its index.
   */
  createBatch(requests: readonly FeedbackCreateReq[], wbUserId: string): string[];
  /**
   * Delete record `feedbackId` of the request's project (when there is one) and store the new
   * record in its place, in one transaction: when the new record is refused, the old one stays.
   */
  replace(feedbackId: string, request: FeedbackCreateReq, wbUserId: string): string;
  /**
   * Records of a project, each as JSON text: whole (a `Feedback`), or one object keyed by each
   * `fields` entry; payload values as stored.
   */
  query(request: FeedbackQueryReq): string[];
  /** Delete the records whose ids `query` names; answers how many went. */
  purge(projectId: string, query: Query): number;
}

/** A record as read from SQL: `payload` as JSON text. */
type FeedbackRow = Omit<Feedback, 'payload'> & { payload: string };

/** Every record field, with the stored JSONB payload turned back into JSON text. */
const RECORD_COLUMNS = FEEDBACK_RECORD_FIELDS.map((field) => (field === 'payload' ? 'json(payload) AS payload' : field)).join(', ');

const REF_FIELDS = ['annotation_ref', 'runnable_ref', 'call_ref', 'trigger_ref'] as const;

/**
 * Build the feedback store on an open database whose migrations are applied.
 *
 * @example
 * const feedback = createFeedbackStore(db);
 * feedback.create({ project_id: 'acme/demo', weave_ref: 'weave:///acme/demo/call/0123456789abcdef',
 *   feedback_type: 'note', payload: { note: 'good' } }, 'dev');
 */
export function createFeedbackStore(db: SqliteDatabase, objects: Pick<ObjectStore, 'read'> = createObjectStore(db)): FeedbackStore {
  const readObject: ReadObjectVersion = (projectId, name, version) => objects.read(projectId, name, version, false);
  const findById = db.prepare<[string, string], FeedbackRow>(`SELECT ${RECORD_COLUMNS} FROM feedback WHERE project_id = ? AND id = ?`);
  const insert = db.prepare(
    `INSERT INTO feedback (id, project_id, weave_ref, feedback_type, payload, creator, created_at, wb_user_id,
       annotation_ref, runnable_ref, call_ref, trigger_ref)
     VALUES (@id, @project_id, @weave_ref, @feedback_type, jsonb(@payload), @creator, @created_at, @wb_user_id,
       @annotation_ref, @runnable_ref, @call_ref, @trigger_ref)`,
  );
  const deleteByIds = db.prepare<[string, string]>(
    'DELETE FROM feedback WHERE project_id = ? AND id IN (SELECT value FROM json_each(?))',
  );
  const queries = new StatementCache(db);

  /** Insert `row` unless a record of its id is stored; answers the stored record. Inside a transaction. */
  const insertOnce = (row: FeedbackRow): FeedbackRow => {
    const existing = findById.get(row.project_id, row.id);
    if (existing === undefined) {
      insert.run(row);
      return row;
    }
    // A retried create (same id, same content) answers the stored record, so clients may retry
    // after a lost response; the same id for other content is a conflict.
    if (sameContent(existing, row)) return existing;
    throw new BadRequestError(`Feedback id ${quote(row.id)} already exists with other content`);
  };
  // Each begins IMMEDIATE when run: it reads (an existing record of an id) before it writes.
  const insertOne = db.transaction(insertOnce);
  const insertAll = db.transaction((rows: readonly FeedbackRow[]) =>
    rows.map((row, index) => atBatchIndex(index, () => insertOnce(row))),
  );
  const insertInPlaceOf = db.transaction((feedbackId: string, row: FeedbackRow) => {
    deleteByIds.run(row.project_id, JSON.stringify([feedbackId]));
    return insertOnce(row);
  });

  return {
    create(request, wbUserId) {
      return createdJson(insertOne.immediate(validatedRow(request, wbUserId, readObject)));
    },

    createBatch(requests, wbUserId) {
      const started = performance.now();
      const rows = requests.map((request, index) => {
        if (performance.now() - started > MAX_BATCH_CHECK_MS) {
          throw new HttpError(413, `Checking this feedback batch took over ${MAX_BATCH_CHECK_MS} ms (stopped at batch[${index}]); send fewer records at a time`);
        }
        return atBatchIndex(index, () => validatedRow(request, wbUserId, readObject));
      });
      return insertAll.immediate(rows).map(createdJson);
    },

    replace(feedbackId, request, wbUserId) {
      return createdJson(insertInPlaceOf.immediate(feedbackId, validatedRow(request, wbUserId, readObject)));
    },

    query(request) {
      const params: unknown[] = [];
      // `fields` entries are read in SQL as JSON text (a number stays a number as stored, an
      // object an object); unknown entries are a 400 from the field resolver, before anything runs.
      const fields = request.fields ?? null;
      let columns = RECORD_COLUMNS;
      if (fields !== null) {
        const selected = fields.map((field, index) => {
          const ref = compileFieldJsonRef(field, FEEDBACK_FIELDS);
          params.push(...ref.params);
          return `${ref.sql} AS f${index}`;
        });
        columns = selected.length > 0 ? selected.join(', ') : 'NULL AS none';
      }
      const sql = `SELECT ${columns} FROM feedback ${listQueryTail(request, FEEDBACK_FIELDS, params)}`;
      const rows = queries.get(sql).all(...params) as Array<Record<string, unknown>>;
      if (fields === null) return rows.map((row) => recordJson(row as FeedbackRow));
      // A field named twice is one member, where it is first named (as in an object built by assignment).
      const firstIndexes: number[] = [];
      const named = new Set<string>();
      fields.forEach((field, index) => {
        if (named.has(field)) return;
        named.add(field);
        firstIndexes.push(index);
      });
      return rows.map((row) =>
        jsonObjectOf(firstIndexes.map((index) => [fields[index] as string, (row[`f${index}`] as string | null) ?? 'null'])),
      );
    },

    purge(projectId, query) {
      const ids = purgeIds(query, PURGE_SHAPE, { idList: false });
      return deleteByIds.run(projectId, JSON.stringify(ids)).changes;
    },
  };
}

function validatedRow(request: FeedbackCreateReq, wbUserId: string, readObject: ReadObjectVersion): FeedbackRow {
  const projectId = request.project_id;
  parseProjectRef('weave_ref', request.weave_ref, projectId);
  const refs: Partial<Record<(typeof REF_FIELDS)[number], WeaveRef>> = {};
  for (const field of REF_FIELDS) {
    const ref = request[field];
    if (ref !== undefined && ref !== null) refs[field] = parseProjectRef(field, ref, projectId);
  }
  assertJsonDepth(request.payload, 'Feedback payload');
  // What the service stores, and measures: ASCII, so its length is its size in bytes.
  const payload = feedbackPayloadText(request.payload);
  if (payload.length > MAX_PAYLOAD_BYTES) {
    throw new BadRequestError(`Feedback payload is larger than ${MAX_PAYLOAD_BYTES} characters of JSON (as Python's json.dumps writes it)`);
  }
  if (request.feedback_type === REACTION_FEEDBACK_TYPE) checkReaction(request.payload);
  if (request.feedback_type === NOTE_FEEDBACK_TYPE) checkNote(request.payload);
  checkFeedbackKind(request, refs, readObject);
  const id = request.id ?? uuidv7();
  if (id.length === 0 || id.length > MAX_FEEDBACK_ID_LENGTH) {
    throw new BadRequestError(`Feedback id must have 1 to ${MAX_FEEDBACK_ID_LENGTH} characters`);
  }
  return {
    id,
    project_id: projectId,
    weave_ref: request.weave_ref,
    feedback_type: request.feedback_type,
    payload,
    creator: request.creator ?? null,
    created_at: nowInstant().text,
    wb_user_id: wbUserId,
    annotation_ref: request.annotation_ref ?? null,
    runnable_ref: request.runnable_ref ?? null,
    call_ref: request.call_ref ?? null,
    trigger_ref: request.trigger_ref ?? null,
  };
}

/** `step()`, with a rule it breaks named as the batch record's: `batch[3]: <reason>`. */
function atBatchIndex<T>(index: number, step: () => T): T {
  try {
    return step();
  } catch (error) {
    if (error instanceof BadRequestError) throw new BadRequestError(`batch[${index}]: ${error.reason}`, error.errorCode);
    throw error;
  }
}

/** What a create answers of the stored record. */
function createdJson(stored: FeedbackRow): string {
  return jsonObjectOf([
    ['id', JSON.stringify(stored.id)],
    ['created_at', JSON.stringify(stored.created_at)],
    ['wb_user_id', JSON.stringify(stored.wb_user_id)],
    ['payload', stored.payload],
  ]);
}

/** A stored row as the record of SPEC §2.3: every field, the payload's text as stored. */
function recordJson(row: FeedbackRow): string {
  return jsonObjectOf(FEEDBACK_RECORD_FIELDS.map((field) => [field, field === 'payload' ? row.payload : JSON.stringify(row[field])]));
}

/** `{"key":<text>,...}` of members whose values are JSON text already. */
function jsonObjectOf(members: ReadonlyArray<readonly [key: string, text: string]>): string {
  return `{${members.map(([key, text]) => `${JSON.stringify(key)}:${text}`).join(',')}}`;
}

/**
 * Whether a create for a stored id carries the stored record's content. Payloads are compared as
 * Python's `json.dumps(..., sort_keys=True)` of their text: key order does not matter, numbers
 * are compared as written (an integer past 2^53 is not equal to its neighbour, as it would be
 * once parsed into doubles), and `1` differs from `1.0` (a retry sends the same text).
 */
function sameContent(a: FeedbackRow, b: FeedbackRow): boolean {
  return (
    a.weave_ref === b.weave_ref &&
    a.feedback_type === b.feedback_type &&
    pythonDumpsAt(a.payload, 0) === pythonDumpsAt(b.payload, 0) &&
    a.creator === b.creator &&
    REF_FIELDS.every((field) => a[field] === b[field])
  );
}

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** The longest RGI emoji sequences are under 40 UTF-16 units; anything far longer is not one. */
const MAX_EMOJI_UNITS = 64;

/**
 * One emoji as a grapheme cluster: a flag (two regional indicators), a keycap (`1️⃣`), or a
 * pictograph with an optional presentation selector or one skin-tone modifier, then tag
 * characters (subdivision flags), joined by ZWJ to further pictographs (families, professions,
 * 🏳️‍🌈). A pictograph is an assigned emoji character: Extended_Pictographic also reserves
 * unassigned code points (U+1FC00..U+1FFFD among them), and the service's `emoji.emoji_count()` finds no
 * emoji there, and two in a thumb with two skin tones. (A skin tone alone is refused here as a
 * piece of an emoji; the service counts it as one.)
 */
const EMOJI_CLUSTER =
  /^(?:\p{Regional_Indicator}{2}|[0-9#*]\uFE0F?\u20E3|(?=\p{Emoji})\p{Extended_Pictographic}[\uFE0F\p{Emoji_Modifier}]?[\u{E0020}-\u{E007F}]*(?:\u200D(?=\p{Emoji})\p{Extended_Pictographic}[\uFE0F\p{Emoji_Modifier}]?)*)$/u;

/** Whether `text` is exactly one emoji (one grapheme cluster that is an emoji). */
export function isSingleEmoji(text: string): boolean {
  if (text.length === 0 || text.length > MAX_EMOJI_UNITS) return false;
  const clusters = graphemes.segment(text)[Symbol.iterator]();
  const first = clusters.next();
  if (first.done === true || !clusters.next().done) return false;
  return EMOJI_CLUSTER.test(first.value.segment);
}

function checkReaction(payload: Record<string, unknown>): void {
  const keys = Object.keys(payload);
  const emoji = payload.emoji;
  if (keys.length !== 1 || typeof emoji !== 'string') {
    throw new BadRequestError(`${REACTION_FEEDBACK_TYPE} payload must be {"emoji": <one emoji>}`);
  }
  if (!isSingleEmoji(emoji)) {
    throw new BadRequestError(`${REACTION_FEEDBACK_TYPE} emoji must be exactly one emoji, got ${quote(emoji)}`);
  }
}

/**
 * A note is what the hosted service takes: `note` text of 1 to 1024 characters (other members
 * are kept, as there).
 */
function checkNote(payload: Record<string, unknown>): void {
  const note = payload.note;
  if (typeof note !== 'string') {
    throw new BadRequestError(`${NOTE_FEEDBACK_TYPE} payload must hold "note": text of 1 to ${MAX_NOTE_CHARS} characters`);
  }
  const chars = codePointCount(note);
  if (chars < 1 || chars > MAX_NOTE_CHARS) {
    throw new BadRequestError(`${NOTE_FEEDBACK_TYPE} note must have 1 to ${MAX_NOTE_CHARS} characters, got ${chars}`);
  }
}

function codePointCount(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // A surrogate pair is one character; a lone surrogate counts as one, as Python counts it.
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

