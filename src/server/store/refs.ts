/**
 * `refs/read_batch`: the values `weave:///` refs name, as the hosted service resolves them
 * (`_refs_read_batch_within_project`).
 *
 * A ref names an object or op version, `weave:///<entity>/<project>/object/<name>:<digest>`,
 * and may go on into its value in pairs: `attr/<name>` and `key/<name>` (a member), `index/<n>` (a
 * list item; negative counts from the end, as Python's), and `id/<row digest>` (a row of the
 * table a value refers to: a Dataset's rows are `/attr/rows/id/<row digest>`). Name and path
 * parts are percent-decoded (`+` is a space) as the service's `unquote_plus` decodes them: a `%`
 * that starts no escape is itself, and bytes that are no UTF-8 read as U+FFFD. A walk that meets a
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
 * needs at once; both are walked on their stored text (stored-text.ts) and answered by it, as
 * `obj/read` answers an object (`1.0` stays a float, integers past 2^53 exact, as the service's
 * Python reads them), cached for the request and bounded by MAX_REFS_LOADED_BYTES.
 */
import type { SqliteDatabase } from './sqlite.js';
import { BadRequestError, HttpError, NotFoundError } from '../errors.js';
import { quote } from '../quote.js';
import { MAX_REFS_PER_READ } from '../../wire/tables.js';
import type { TableStore } from './tables.js';
import { StoredText } from './stored-text.js';
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

/** Where a value starts in the stored text of an object's value or a table row. */
interface ValueAt {
  readonly text: StoredText;
  readonly start: number;
}

interface Walk {
  /** The project of the request's ref: walks never leave it. */
  readonly projectId: string;
  /** Where the walk's value is (its answer is that exact text), or undefined for null. */
  value: ValueAt | undefined;
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
      const roots = new Map<string, StoredText | null>();
      const rows = new Map<string, StoredText>();
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
            root = row.deleted_at === null ? new StoredText(row.val) : null;
            roots.set(key, root);
          }
          // A deleted version reads as null, whatever the path.
          walk.value = root === null ? undefined : { text: root, start: root.start };
          walk.path = root === null ? [] : path;
          walk.at = 0;
          walk.pending = null;
        }
        readRows(walks, rows, tables, charge);
        for (const walk of walks) if (walk.pending === null) advance(walk, storedRefs);
      }

      let answer = '{"vals":[';
      walks.forEach((walk, index) => {
        answer += (index === 0 ? '' : ',') + (walk.value === undefined ? 'null' : walk.value.text.valueAt(walk.value.start));
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
  cache: Map<string, StoredText>,
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
        cache.set(key, new StoredText(text));
      }
      const row = cache.get(key) as StoredText;
      walk.value = { text: row, start: row.start };
      // Past the `id/<row digest>` pair the row was read for.
      walk.at += 2;
      walk.pending = null;
    }
  }
}

function startWalk(ref: ParsedRef): Walk {
  if (ref.kind === 'object') {
    return { projectId: ref.projectId, value: undefined, path: [], at: 0, pending: { kind: 'object', name: ref.name, version: ref.version, path: ref.extra } };
  }
  return {
    projectId: ref.projectId,
    value: undefined,
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
    // Off the stored text: null, whatever the rest of the path.
    if (walk.value === undefined) {
      walk.at = walk.path.length;
      return;
    }
    const edge = walk.path[walk.at] as string;
    const arg = walk.path[walk.at + 1] as string;
    const current = walk.value.text.refAt(walk.value.start);
    if (current !== undefined) {
      let inner = storedRefs.get(current);
      if (inner === undefined) {
        inner = parseStoredRef(current);
        storedRefs.set(current, inner);
      }
      if (inner !== null) {
        if (inner.projectId !== walk.projectId) {
          // Another project's value reads as null, whatever the rest of the path.
          walk.value = undefined;
          walk.at = walk.path.length;
          return;
        }
        if (inner.kind === 'object') {
          const left = walk.path.length - walk.at;
          if (inner.extra.length + left > MAX_REF_PATH_PARTS) {
            throw new BadRequestError(
              `A ref leads through a stored ref whose path and the rest of its own add up to more than ${MAX_REF_PATH_PARTS} parts`,
            );
          }
          walk.pending = { kind: 'object', name: inner.name, version: inner.version, path: [...inner.extra, ...walk.path.slice(walk.at)] };
          return;
        }
        if (edge === 'id') {
          walk.pending = { kind: 'row', tableDigest: inner.digest, rowDigest: arg };
          return;
        }
      }
    }
    walk.value = step(walk.value, edge, arg);
    walk.at += 2;
  }
}

/**
 * One edge into a value: where the value it leads to starts, or undefined (null) where the value
 * has no such member or item, and for `id` on a value that is not a table ref.
 */
function step(value: ValueAt, edge: string, arg: string): ValueAt | undefined {
  const start =
    edge === 'key' || edge === 'attr' ? value.text.member(value.start, arg) : edge === 'index' ? value.text.item(value.start, Number(arg)) : undefined;
  return start === undefined ? undefined : { text: value.text, start };
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
    return { kind: 'object', projectId, name: unquotePlus(version.name), version: version.version, extra: pathOf(version.extra, field) };
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
  const path = raw.map(unquotePlus);
  for (let i = 0; i < path.length; i += 2) {
    const edge = path[i] as string;
    if (!EDGE_NAMES.has(edge)) throw new BadRequestError(`${field}: unknown path edge ${quote(edge)} (key, attr, index or id)`);
    if (edge === 'index' && !INDEX_VALUE.test(path[i + 1] as string)) {
      throw new BadRequestError(`${field}: index ${quote(path[i + 1])} is not an integer`);
    }
  }
  return path;
}

/**
 * Python's `urllib.parse.unquote_plus`, for the service's quoting of names and path parts: `+` is
 * a space; in each run of ASCII characters the `%XX` escapes are bytes, a `%` that starts none is
 * itself, and the run's bytes are read as UTF-8 with U+FFFD for what is no UTF-8 (Python's
 * `errors="replace"`). It never refuses a part, as the service does not.
 */
function unquotePlus(text: string): string {
  const spaced = text.replace(/\+/g, ' ');
  if (!spaced.includes('%')) return spaced;
  return spaced.replace(ASCII_RUN, (run) => (run.includes('%') ? LENIENT_UTF8.decode(escapedBytes(run)) : run));
}

const ASCII_RUN = /[\u0000-\u007f]+/g;
const ESCAPE = /^[0-9A-Fa-f]{2}$/;
/** Python keeps a byte order mark a decode meets (`ignoreBOM: true` keeps it here). */
const LENIENT_UTF8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** The bytes of a run of ASCII characters, each `%XX` one byte. */
function escapedBytes(run: string): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < run.length; i++) {
    const escape = run.slice(i + 1, i + 3);
    if (run[i] === '%' && ESCAPE.test(escape)) {
      bytes.push(Number.parseInt(escape, 16));
      i += 2;
    } else {
      bytes.push(run.charCodeAt(i));
    }
  }
  return Uint8Array.from(bytes);
}
