/**
 * `refs/read_batch`: the values `weave:///` refs name, as the hosted service resolves them
 * (`_refs_read_batch_within_project`).
 *
 * A ref names an object or op version, `weave:///<entity>/<project>/object/<name>:<digest>`,
 * and may go on into its value in pairs: `attr/<name>` and `key/<name>` (a member), `index/<n>` (a
 * list item; negative counts from the end, as Python's), and `id/<row digest>` (a row of the
 * table a value refers to: a Dataset's rows are `/attr/rows/id/<row digest>`). Name and path
 * parts are percent-decoded (`+` is a space), as the service's `unquote_plus`. A walk that meets a
 * ref string goes on in what it names, within the ref's own project only (a ref into another
 * project reads as null, as on the service).
 *
 * Answers, as the service's: a missing object is a 404 for the whole request and a deleted one
 * reads as null; a path that is not in the value reads as null; `latest` versions are refused
 * (400); so are table refs without a row, and call refs. Decisions where the service fails or is
 * silent: a table-row ref (`weave:///e/p/table/<digest>/id/<row>`) is read (the service refuses
 * every table ref); a row a table does not list is a 404 (the service's answer is a 500); after
 * a ref met inside a value the rest of the path is still walked (the service drops it).
 *
 * Refs are resolved in rounds, so that each round reads the objects and table rows every ref
 * needs at once; objects (parsed) and rows (as text, row-text.ts) are cached for the request and
 * bounded by MAX_REFS_LOADED_BYTES.
 */
import type { SqliteDatabase } from './sqlite.js';
import { BadRequestError, HttpError, NotFoundError } from '../errors.js';
import { quote } from '../quote.js';
import { isRecord } from '../../wire/common.js';
import { MAX_REFS_PER_READ } from '../../wire/tables.js';
import type { TableStore } from './tables.js';
import { RowText } from './row-text.js';
import { versionRef } from './weave-refs.js';

const REF_PREFIX = 'weave:///';

/**
 * Path parts one ref may carry (250 steps): far past any value's nesting, and bounds the parse. A
 * walk that meets a ref inside a value goes on with that ref's path before the rest of its own;
 * what it has left to walk is held to this bound too, so a chain of stored refs whose paths add
 * up cannot make each hop copy more (1000 refs through 40 such hops took 14 s before).
 */
export const MAX_REF_PATH_PARTS = 500;
/** Refs followed one inside another (each a round of reads) before the chain is refused. */
export const MAX_REF_HOPS = 100;
/** Stored text one request may load (objects and rows, each once): 413 past it. */
export const MAX_REFS_LOADED_BYTES = 256 * 1024 * 1024;
/** Characters of one answer: 413 past it, so a client reads fewer refs at a time. */
export const MAX_REFS_ANSWER_CHARS = 64 * 1024 * 1024;

const EDGE_NAMES = new Set(['key', 'attr', 'index', 'id']);
const INDEX_VALUE = /^[+-]?[0-9]+$/;

type ParsedRef =
  | { readonly kind: 'object'; readonly projectId: string; readonly name: string; readonly version: string; readonly extra: string[] }
  | { readonly kind: 'table'; readonly projectId: string; readonly digest: string; readonly extra: string[] };

/** What a walk waits for before it can go on. */
type Pending =
  | { readonly kind: 'object'; readonly name: string; readonly version: string; readonly path: readonly string[] }
  | { readonly kind: 'row'; readonly tableDigest: string; readonly rowDigest: string };

interface Walk {
  /** The project of the request's ref: walks never leave it. */
  readonly projectId: string;
  val: unknown;
  /**
   * Where the walk's value is in a table row's stored text, while the walk is inside a row (`val`
   * is then not read): the answer is that exact text, whose numbers a parse into JavaScript would
   * change (`1.0`, integers past 2^53). Values of objects are answered from their parsed form.
   */
  inRow: { readonly row: RowText; readonly start: number } | undefined;
  path: readonly string[];
  /** Index of the next edge name in `path`. */
  at: number;
  pending: Pending | null;
}

export interface RefReader {
  /**
   * The JSON text of `{"vals": [...]}` for `refs`, after `authorize(projectId)` accepted each
   * ref's project (it throws otherwise).
   * @throws BadRequestError for malformed refs or too many; NotFoundError for a missing object,
   *   table or row; HttpError 413 for an answer past MAX_REFS_ANSWER_CHARS.
   */
  readBatch(refs: readonly string[], authorize: (projectId: string) => unknown): string;
}

/**
 * @example
 * const refs = createRefReader(db, tables);
 * refs.readBatch(['weave:///acme/demo/object/cfg:<digest>/key/model'], (p) => ctx.authorizeProject(request, p));
 */
export function createRefReader(db: SqliteDatabase, tables: TableStore): RefReader {
  const readObject = db.prepare<[string, string, string], { val: string; deleted_at: string | null; size_bytes: number }>(
    'SELECT val, deleted_at, size_bytes FROM objects WHERE project_id = ? AND object_id = ? AND digest = ?',
  );

  return {
    readBatch(refs, authorize) {
      if (refs.length > MAX_REFS_PER_READ) {
        throw new BadRequestError(`Too many refs: ${refs.length} (read at most ${MAX_REFS_PER_READ} per request)`);
      }
      const walks = refs.map((ref, index) => startWalk(parseRequestRef(ref, `refs[${index}]`)));
      for (const projectId of new Set(walks.map((walk) => walk.projectId))) authorize(projectId);

      let loadedBytes = 0;
      const charge = (bytes: number): void => {
        loadedBytes += bytes;
        if (loadedBytes > MAX_REFS_LOADED_BYTES) {
          throw new HttpError(413, `These refs read more than ${MAX_REFS_LOADED_BYTES} bytes of stored values: read fewer at a time`);
        }
      };
      const roots = new Map<string, { val: unknown } | null>();
      const rows = new Map<string, RowText>();
      const storedRefs = new Map<string, ParsedRef | null>();

      for (let round = 0; walks.some((walk) => walk.pending !== null); round++) {
        if (round > MAX_REF_HOPS) throw new BadRequestError(`A ref leads through more than ${MAX_REF_HOPS} refs`);
        for (const walk of walks) {
          if (walk.pending?.kind !== 'object') continue;
          const { name, version, path } = walk.pending;
          const key = JSON.stringify([walk.projectId, name, version]);
          let root = roots.get(key);
          if (root === undefined) {
            const row = readObject.get(walk.projectId, name, version);
            if (row === undefined) throw new NotFoundError(`Object ${quote(`${name}:${version}`)} not found in project ${quote(walk.projectId)}`);
            charge(row.size_bytes);
            root = row.deleted_at === null ? { val: JSON.parse(row.val) as unknown } : null;
            roots.set(key, root);
          }
          // A deleted version reads as null, whatever the path.
          walk.val = root === null ? null : root.val;
          walk.inRow = undefined;
          walk.path = root === null ? [] : path;
          walk.at = 0;
          walk.pending = null;
        }
        readRows(walks, rows, tables, charge);
        for (const walk of walks) if (walk.pending === null) advance(walk, storedRefs);
      }

      let answer = '{"vals":[';
      walks.forEach((walk, index) => {
        const text = walk.inRow === undefined ? JSON.stringify(walk.val) : walk.inRow.row.valueAt(walk.inRow.start);
        answer += (index === 0 ? '' : ',') + (text ?? 'null');
        if (answer.length > MAX_REFS_ANSWER_CHARS) {
          throw new HttpError(413, `The values of these refs exceed ${MAX_REFS_ANSWER_CHARS} characters: read fewer at a time`);
        }
      });
      return `${answer}]}`;
    },
  };
}

/** Read the table rows walks wait for: one query per table. */
function readRows(
  walks: readonly Walk[],
  cache: Map<string, RowText>,
  tables: TableStore,
  charge: (bytes: number) => void,
): void {
  const byTable = new Map<string, Walk[]>();
  for (const walk of walks) {
    if (walk.pending?.kind !== 'row') continue;
    const key = JSON.stringify([walk.projectId, walk.pending.tableDigest]);
    const waiting = byTable.get(key);
    if (waiting === undefined) byTable.set(key, [walk]);
    else waiting.push(walk);
  }
  for (const waiting of byTable.values()) {
    const { projectId } = waiting[0] as Walk;
    const tableDigest = ((waiting[0] as Walk).pending as { tableDigest: string }).tableDigest;
    const wanted = [...new Set(waiting.map((walk) => (walk.pending as { rowDigest: string }).rowDigest))];
    const texts = tables.rowsOf(projectId, tableDigest, wanted);
    if (texts === null) throw new NotFoundError(`Table ${quote(tableDigest)} not found in project ${quote(projectId)}`);
    for (const walk of waiting) {
      const rowDigest = (walk.pending as { rowDigest: string }).rowDigest;
      // Checked for every ref, also when another ref of the batch read the row through another
      // table: one ref's answer never depends on the others.
      const text = texts.get(rowDigest);
      if (text === undefined) throw new NotFoundError(`Row ${quote(rowDigest)} not found in table ${quote(tableDigest)}`);
      const key = JSON.stringify([projectId, rowDigest]);
      if (!cache.has(key)) {
        charge(text.length);
        cache.set(key, new RowText(text));
      }
      const row = cache.get(key) as RowText;
      // Walked on its text alone (`val` is not read while `inRow` is set).
      walk.val = undefined;
      walk.inRow = { row, start: row.start };
      // Past the `id/<row digest>` pair the row was read for.
      walk.at += 2;
      walk.pending = null;
    }
  }
}

function startWalk(ref: ParsedRef): Walk {
  if (ref.kind === 'object') {
    return { projectId: ref.projectId, val: null, inRow: undefined, path: [], at: 0, pending: { kind: 'object', name: ref.name, version: ref.version, path: ref.extra } };
  }
  return {
    projectId: ref.projectId,
    val: null,
    inRow: undefined,
    path: ref.extra,
    at: 0,
    pending: { kind: 'row', tableDigest: ref.digest, rowDigest: ref.extra[1] as string },
  };
}

/**
 * Walk on until the path ends or a ref in the value must be read first. `storedRefs` caches the
 * parse of each ref text met in values, for the request.
 */
function advance(walk: Walk, storedRefs: Map<string, ParsedRef | null>): void {
  while (walk.at < walk.path.length) {
    const edge = walk.path[walk.at] as string;
    const arg = walk.path[walk.at + 1] as string;
    const current = walk.inRow === undefined ? walk.val : walk.inRow.row.refAt(walk.inRow.start);
    if (typeof current === 'string' && current.startsWith(REF_PREFIX)) {
      let inner = storedRefs.get(current);
      if (inner === undefined) {
        inner = parseStoredRef(current);
        storedRefs.set(current, inner);
      }
      if (inner !== null) {
        if (inner.projectId !== walk.projectId) {
          walk.val = null;
          walk.inRow = undefined;
        } else if (inner.kind === 'object') {
          const left = walk.path.length - walk.at;
          if (inner.extra.length + left > MAX_REF_PATH_PARTS) {
            throw new BadRequestError(
              `A ref leads through a stored ref whose path and the rest of its own add up to more than ${MAX_REF_PATH_PARTS} parts`,
            );
          }
          walk.pending = { kind: 'object', name: inner.name, version: inner.version, path: [...inner.extra, ...walk.path.slice(walk.at)] };
          return;
        } else if (edge === 'id') {
          walk.pending = { kind: 'row', tableDigest: inner.digest, rowDigest: arg };
          return;
        }
      }
    }
    if (walk.inRow === undefined) {
      walk.val = step(walk.val, edge, arg);
    } else {
      walk.inRow = stepInRow(walk.inRow, edge, arg);
      // Off the row's text: what is not there reads as null.
      if (walk.inRow === undefined) walk.val = null;
    }
    walk.at += 2;
  }
}

/** The same edge as `step`, in a row's text: where the value it leads to starts, if it is there. */
function stepInRow(inRow: { readonly row: RowText; readonly start: number }, edge: string, arg: string): typeof inRow | undefined {
  const start =
    edge === 'key' || edge === 'attr' ? inRow.row.member(inRow.start, arg) : edge === 'index' ? inRow.row.item(inRow.start, Number(arg)) : undefined;
  return start === undefined ? undefined : { row: inRow.row, start };
}

/** One edge into a value; null where the value has no such member or item. */
function step(val: unknown, edge: string, arg: string): unknown {
  if (edge === 'key' || edge === 'attr') return isRecord(val) && Object.hasOwn(val, arg) ? val[arg] : null;
  if (edge === 'index' && Array.isArray(val)) {
    const index = Number(arg) < 0 ? Number(arg) + val.length : Number(arg);
    return index >= 0 && index < val.length ? (val[index] as unknown) : null;
  }
  // `id` on a value that is not a table ref, or `index` on a value that is not a list.
  return null;
}

/** A request's ref: parsed, and only of the forms this endpoint reads. */
function parseRequestRef(ref: string, field: string): ParsedRef {
  const parsed = parseRef(ref, field);
  if (parsed.kind === 'object' && parsed.version === 'latest') {
    throw new BadRequestError(`${field}: reading refs with \`latest\` is not supported; name a digest`);
  }
  if (parsed.kind === 'table' && parsed.extra[0] !== 'id') {
    throw new BadRequestError(
      `${field}: a table ref is read one row at a time (.../table/<digest>/id/<row digest>); read whole tables with table/query`,
    );
  }
  return parsed;
}

/**
 * A ref string met inside a stored value, or null when it is not one this endpoint can follow:
 * malformed, or naming a version by `latest` or `v<N>` (a request's ref may not; met in a value,
 * it reads as null rather than failing the whole request as a missing digest).
 */
function parseStoredRef(text: string): ParsedRef | null {
  let parsed: ParsedRef;
  try {
    parsed = parseRef(text, 'ref');
  } catch (error) {
    if (error instanceof BadRequestError) return null;
    throw error;
  }
  return parsed.kind === 'object' && VERSION_ALIAS.test(parsed.version) ? null : parsed;
}

const VERSION_ALIAS = /^(?:latest|v[0-9]+)$/;

/** @throws BadRequestError naming `field` when `ref` is malformed or not an object, op or table ref. */
function parseRef(ref: string, field: string): ParsedRef {
  if (!ref.startsWith(REF_PREFIX)) throw new BadRequestError(`${field} must be a weave:/// ref, got ${quote(ref)}`);
  const [entity, project, kind, ...rest] = ref.slice(REF_PREFIX.length).split('/');
  if (!entity || !project || !kind || rest.length === 0 || rest[0] === '') {
    throw new BadRequestError(`${field} must be weave:///<entity>/<project>/<kind>/<name>..., got ${quote(ref)}`);
  }
  const projectId = `${entity}/${project}`;
  if (kind === 'object' || kind === 'op') {
    const version = versionRef(field, { kind, path: rest }, [kind]);
    return { kind: 'object', projectId, name: unquotePlus(version.name, field), version: version.version, extra: pathOf(version.extra, field) };
  }
  if (kind === 'table') return { kind: 'table', projectId, digest: rest[0] as string, extra: pathOf(rest.slice(1), field) };
  throw new BadRequestError(`${field}: ${quote(kind)} refs are not read by refs/read_batch (object, op and table-row refs are)`);
}

/** The decoded path pairs after a version, checked as the service's `validate_extra`. */
function pathOf(parts: readonly string[], field: string): string[] {
  // A trailing slash adds one empty part, which the service drops.
  const raw = parts.length === 1 && parts[0] === '' ? [] : parts;
  if (raw.length > MAX_REF_PATH_PARTS) throw new BadRequestError(`${field} has a path of ${raw.length} parts (at most ${MAX_REF_PATH_PARTS})`);
  if (raw.length % 2 !== 0) throw new BadRequestError(`${field}: the path after the version must be pairs of <edge>/<value>`);
  const path = raw.map((part) => unquotePlus(part, field));
  for (let i = 0; i < path.length; i += 2) {
    const edge = path[i] as string;
    if (!EDGE_NAMES.has(edge)) throw new BadRequestError(`${field}: unknown path edge ${quote(edge)} (key, attr, index or id)`);
    if (edge === 'index' && !INDEX_VALUE.test(path[i + 1] as string)) {
      throw new BadRequestError(`${field}: index ${quote(path[i + 1])} is not an integer`);
    }
  }
  return path;
}

/** Python's `urllib.parse.unquote_plus`, for the service's quoting of names and path parts. */
function unquotePlus(text: string, field: string): string {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    throw new BadRequestError(`${field}: malformed percent-escape in ${quote(text)}`);
  }
}
