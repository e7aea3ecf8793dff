/**
 * Versioned objects on SQLite (SPEC §2.2). A version is identified by the digest of its value;
 * `version_index` counts distinct digests per `(project_id, object_id)` in order of first
 * appearance, and `is_latest` marks the highest that is not deleted. Every write is one
 * transaction.
 *
 * Deletion is soft, as on the hosted service: `deleted_at` is set, queries leave the version out,
 * a read of it is a 404 carrying `deleted_at`, and its index is never reused. Creating a deleted
 * version's value again restores it at its index (the hosted service re-inserts it as its newest
 * version, renumbering the others; here an index keeps meaning one value).
 */
import type { SqliteDatabase, SqliteStatement } from './sqlite.js';
import { BadRequestError, NotFoundError, ObjectDeletedError } from '../errors.js';
import { quote } from '../quote.js';
import { CanonicalJsonError, canonicalJson, digestOfText } from '../../wire/digest.js';
import { MAX_DELETE_DIGESTS, type ObjCreateRes, type ObjQueryReq, type ObjSchema } from '../../wire/objects.js';
import { nowInstant } from '../timestamps.js';
import { sqlCount, utf8Length } from './content-common.js';
import { StatementCache } from './statement-cache.js';
import { isRecord } from '../../wire/common.js';

export interface ObjectInsert {
  readonly projectId: string;
  readonly objectId: string;
  readonly val: unknown;
  /**
   * Python's `json.dumps` of `val` as the body spelled it (digest-bodies.ts), which the digest is
   * over and the store keeps: `1.0` stays a float, a big integer exact. Without it (or with a
   * `builtinObjectClass`, which adds members), the text is written from `val`.
   */
  readonly valText?: string | undefined;
  readonly builtinObjectClass?: string | null | undefined;
  /** The username that writes it. */
  readonly wbUserId: string;
}

export interface ObjectStore {
  /** Store a version (a no-op answering the same digest when that value exists already). */
  create(insert: ObjectInsert): ObjCreateRes;
  /**
   * One version by digest, `latest` or `v<N>`.
   * @throws NotFoundError when there is no such version (ObjectDeletedError when it was deleted).
   */
  read(projectId: string, objectId: string, digest: string, metadataOnly: boolean): ObjSchema;
  /** `read`, as the JSON text of the `ObjSchema`, with `val` as stored (see toObjectJson). */
  readJson(projectId: string, objectId: string, digest: string, metadataOnly: boolean): string;
  /** Versions matching the filter, `created_at` ascending unless `sort_by` says otherwise; never deleted ones. */
  query(request: ObjQueryReq): ObjSchema[];
  /** `query`, each version as the JSON text of its `ObjSchema`, with `val` as stored. */
  queryJson(request: ObjQueryReq): string[];
  /**
   * Soft-delete the versions `digests` names (digests, `latest`, `v<N>`; null or empty: every
   * version), all or none; answers how many.
   * @throws NotFoundError when a named version is missing or deleted already, or none is left.
   * @throws BadRequestError for more than MAX_DELETE_DIGESTS digests.
   */
  delete(projectId: string, objectId: string, digests: readonly string[] | null): number;
}

interface ObjectRow {
  project_id: string;
  object_id: string;
  digest: string;
  version_index: number;
  is_latest: number;
  kind: string;
  base_object_class: string | null;
  leaf_object_class: string | null;
  val: string | null;
  size_bytes: number;
  wb_user_id: string | null;
  created_at: string;
  deleted_at: string | null;
}

/** Prepared reads of one version: by digest, the latest, by index. */
interface VersionReads {
  readonly byDigest: SqliteStatement<[string, string, string], ObjectRow>;
  readonly latest: SqliteStatement<[string, string], ObjectRow>;
  readonly byIndex: SqliteStatement<[string, string, number], ObjectRow>;
}

/** Columns `sort_by` may name, each with its SQL (never user text). */
const SORTABLE_COLUMNS: Readonly<Record<string, string>> = {
  object_id: 'object_id',
  digest: 'digest',
  created_at: 'created_at',
  version_index: 'version_index',
  is_latest: 'is_latest',
  kind: 'kind',
  base_object_class: 'base_object_class',
  leaf_object_class: 'leaf_object_class',
  size_bytes: 'size_bytes',
  wb_user_id: 'wb_user_id',
};

const METADATA_COLUMNS =
  'project_id, object_id, digest, version_index, is_latest, kind, base_object_class, leaf_object_class, size_bytes, wb_user_id, created_at, deleted_at';

/**
 * `digest` in a read may name a version by index: `v` and its number, leading zeros allowed as
 * the service's `int()` allows them (`v01` is `v1`). Fifteen digits at most: a safe integer, and
 * never a 43-character digest.
 */
const VERSION_ALIAS = /^v([0-9]{1,15})$/;

/**
 * Build the object store on an open database whose migrations are applied.
 *
 * @example
 * const objects = createObjectStore(db);
 * const { digest } = objects.create({ projectId: 'acme/demo', objectId: 'cfg', val: { a: 1 }, wbUserId: 'dev' });
 */
export function createObjectStore(db: SqliteDatabase): ObjectStore {
  const findByDigest = db.prepare<[string, string, string], { digest: string; deleted_at: string | null }>(
    'SELECT digest, deleted_at FROM objects WHERE project_id = ? AND object_id = ? AND digest = ?',
  );
  const restore = db.prepare<[string, string, string]>(
    'UPDATE objects SET deleted_at = NULL WHERE project_id = ? AND object_id = ? AND digest = ?',
  );
  const markLatest = db.prepare<[string, string]>(
    `UPDATE objects SET is_latest = 1 WHERE rowid = (SELECT rowid FROM objects WHERE project_id = ? AND object_id = ?
       ORDER BY deleted_at IS NULL DESC, version_index DESC LIMIT 1)`,
  );
  const liveVersions = db.prepare<[string, string], { digest: string }>(
    'SELECT digest FROM objects WHERE project_id = ? AND object_id = ? AND deleted_at IS NULL',
  );
  const markDeleted = db.prepare<[string, string, string, string]>(
    `UPDATE objects SET deleted_at = ? WHERE project_id = ? AND object_id = ? AND digest IN (SELECT value FROM json_each(?))`,
  );
  const nextVersionIndex = db.prepare<[string, string], { next: number }>(
    'SELECT COALESCE(MAX(version_index) + 1, 0) AS next FROM objects WHERE project_id = ? AND object_id = ?',
  );
  const clearLatest = db.prepare<[string, string]>(
    'UPDATE objects SET is_latest = 0 WHERE project_id = ? AND object_id = ? AND is_latest = 1',
  );
  const insertVersion = db.prepare(
    `INSERT INTO objects (project_id, object_id, digest, version_index, is_latest, kind, base_object_class,
       leaf_object_class, val, size_bytes, wb_user_id, created_at)
     VALUES (@project_id, @object_id, @digest, @version_index, 1, @kind, @base_object_class,
       @leaf_object_class, @val, @size_bytes, @wb_user_id, @created_at)`,
  );
  const readStatements = (columns: string): VersionReads => ({
    byDigest: db.prepare<[string, string, string], ObjectRow>(
      `SELECT ${columns} FROM objects WHERE project_id = ? AND object_id = ? AND digest = ?`,
    ),
    latest: db.prepare<[string, string], ObjectRow>(
      `SELECT ${columns} FROM objects WHERE project_id = ? AND object_id = ? AND is_latest = 1`,
    ),
    byIndex: db.prepare<[string, string, number], ObjectRow>(
      `SELECT ${columns} FROM objects WHERE project_id = ? AND object_id = ? AND version_index = ?`,
    ),
  });
  const fullReads = readStatements(`${METADATA_COLUMNS}, val`);
  const metadataReads = readStatements(`${METADATA_COLUMNS}, NULL AS val`);
  const queries = new StatementCache(db);

  /** `is_latest` on the highest version not deleted (on the highest of all when every one is). */
  const updateLatest = (projectId: string, objectId: string): void => {
    clearLatest.run(projectId, objectId);
    markLatest.run(projectId, objectId);
  };

  const storeVersion = db.transaction((row: Omit<ObjectRow, 'version_index' | 'is_latest' | 'deleted_at'>) => {
    const existing = findByDigest.get(row.project_id, row.object_id, row.digest);
    if (existing !== undefined) {
      if (existing.deleted_at === null) return;
      restore.run(row.project_id, row.object_id, row.digest);
      updateLatest(row.project_id, row.object_id);
      return;
    }
    const { next } = nextVersionIndex.get(row.project_id, row.object_id) as { next: number };
    clearLatest.run(row.project_id, row.object_id);
    insertVersion.run({ ...row, version_index: next });
  });

  const deleteVersions = db.transaction((projectId: string, objectId: string, digests: readonly string[] | null): number => {
    let found: string[];
    if (digests === null || digests.length === 0) {
      found = liveVersions.all(projectId, objectId).map((row) => row.digest);
      if (found.length === 0) throw new NotFoundError(`Object ${quote(objectId)} not found when deleting`);
    } else {
      const live = new Set<string>();
      const missing: string[] = [];
      for (const name of new Set(digests)) {
        const row = findVersion(metadataReads, projectId, objectId, name);
        if (row !== undefined && row.deleted_at === null) live.add(row.digest);
        else missing.push(name);
      }
      if (missing.length > 0) {
        // All or none, as the hosted service checks before it deletes anything. (Two names of one
        // version, `latest` and its digest, delete it once; the service answers 404 for them.)
        throw new NotFoundError(`Object ${quote(objectId)} has no version ${quote(missing)} to delete (not found, or deleted already)`);
      }
      found = [...live];
    }
    markDeleted.run(nowInstant().text, projectId, objectId, JSON.stringify(found));
    updateLatest(projectId, objectId);
    return found.length;
  });

  function readRow(projectId: string, objectId: string, digest: string, metadataOnly: boolean): ObjectRow {
    const row = findVersion(metadataOnly ? metadataReads : fullReads, projectId, objectId, digest);
    if (row === undefined) {
      throw new NotFoundError(`Object ${quote(objectId)} version ${quote(digest)} not found`);
    }
    if (row.deleted_at !== null) {
      throw new ObjectDeletedError(`${objectId}:v${row.version_index} was deleted at ${row.deleted_at}`, row.deleted_at);
    }
    return row;
  }

  function queryRows(request: ObjQueryReq): ObjectRow[] {
    const { sql, params } = buildQuery(request);
    return queries.get(sql).all(...params) as ObjectRow[];
  }

  return {
    create(insert) {
      const val = withBuiltinClass(insert.val, insert.builtinObjectClass);
      const sourceText = val === insert.val ? insert.valText : undefined;
      const canonical = sourceText ?? canonicalText(val);
      const digest = digestOfText(canonical);
      const stored = sourceText ?? JSON.stringify(val);
      const classes = classify(val);
      // Immediate: it reads (the digest, the next version) before it writes.
      storeVersion.immediate({
        project_id: insert.projectId,
        object_id: insert.objectId,
        digest,
        kind: classes.kind,
        base_object_class: classes.baseObjectClass,
        leaf_object_class: classes.leafObjectClass,
        val: stored,
        size_bytes: utf8Length(stored),
        wb_user_id: insert.wbUserId,
        created_at: nowInstant().text,
      });
      return { digest, object_id: insert.objectId };
    },

    read(projectId, objectId, digest, metadataOnly) {
      return toObject(readRow(projectId, objectId, digest, metadataOnly));
    },

    readJson(projectId, objectId, digest, metadataOnly) {
      return toObjectJson(readRow(projectId, objectId, digest, metadataOnly));
    },

    query(request) {
      return queryRows(request).map(toObject);
    },

    queryJson(request) {
      return queryRows(request).map(toObjectJson);
    },

    delete(projectId, objectId, digests) {
      if (digests !== null && digests.length > MAX_DELETE_DIGESTS) {
        throw new BadRequestError(
          `Object delete request names ${digests.length} versions: delete ${MAX_DELETE_DIGESTS} or fewer at a time`,
        );
      }
      // Immediate: it reads the versions before it writes.
      return deleteVersions.immediate(projectId, objectId, digests);
    },
  };
}

/** The version `digest` names: a digest, `latest` or `v<N>`, deleted or not. */
function findVersion(reads: VersionReads, projectId: string, objectId: string, digest: string): ObjectRow | undefined {
  const alias = VERSION_ALIAS.exec(digest);
  if (digest === 'latest') return reads.latest.get(projectId, objectId);
  if (alias !== null) return reads.byIndex.get(projectId, objectId, Number(alias[1]));
  return reads.byDigest.get(projectId, objectId, digest);
}

function canonicalText(val: unknown): string {
  try {
    return canonicalJson(val);
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new BadRequestError(`Invalid object value: ${error.message}`);
    throw error;
  }
}

/**
 * The hosted service validates a `builtin_object_class` value against its registry and stores
 * it with the class's `_type`, `_class_name` and `_bases`. We hold no registry, so we keep the
 * part that matters for reading it back: the class markers, which make `base_object_class` and
 * `leaf_object_class` come out as the class. A value naming another class is a 400.
 */
function withBuiltinClass(val: unknown, builtinObjectClass: string | null | undefined): unknown {
  if (builtinObjectClass === undefined || builtinObjectClass === null) return val;
  if (!isRecord(val)) throw new BadRequestError('An object with builtin_object_class must have an object value');
  if (val._class_name !== undefined && val._class_name !== builtinObjectClass) {
    throw new BadRequestError(
      `Object value is of class ${quote(val._class_name)}, not builtin_object_class ${quote(builtinObjectClass)}`,
    );
  }
  return {
    ...val,
    _type: val._type ?? builtinObjectClass,
    _class_name: builtinObjectClass,
    _bases: val._bases ?? ['Object', 'BaseModel'],
  };
}

interface Classes {
  readonly kind: 'op' | 'object';
  readonly baseObjectClass: string | null;
  readonly leafObjectClass: string | null;
}

/** `kind` and classes of a value, by the rules of SPEC §2.2. */
export function classify(val: unknown): Classes {
  if (!isRecord(val)) return { kind: 'object', baseObjectClass: null, leafObjectClass: null };
  const weaveType = val.weave_type;
  const typeName = isRecord(weaveType) && 'type' in weaveType ? weaveType.type : val._type;
  const kind = typeName === 'Op' ? 'op' : 'object';
  const bases = val._bases;
  const className = val._class_name;
  const isObjectClass =
    Array.isArray(bases) &&
    bases.length >= 2 &&
    bases[bases.length - 1] === 'BaseModel' &&
    (bases[bases.length - 2] === 'Object' || bases[bases.length - 2] === 'BaseObject') &&
    typeof className === 'string';
  if (!isObjectClass) return { kind, baseObjectClass: null, leafObjectClass: null };
  const base: unknown = bases.length > 2 ? bases[bases.length - 3] : className;
  return { kind, baseObjectClass: typeof base === 'string' ? base : null, leafObjectClass: className };
}

function buildQuery(request: ObjQueryReq): { sql: string; params: unknown[] } {
  const filter = request.filter ?? {};
  const where = ['project_id = ?'];
  const params: unknown[] = [request.project_id];
  // Lists travel as one bound JSON array, so their length never changes the SQL shape and
  // never meets SQLite's limit on bound parameters.
  const lists: Array<[column: string, values: readonly string[] | null | undefined]> = [
    ['object_id', filter.object_ids],
    ['base_object_class', filter.base_object_classes],
    ['leaf_object_class', filter.leaf_object_classes],
  ];
  for (const [column, values] of lists) {
    // An empty list is no filter, as in the hosted service (`if req.filter.object_ids:`) and as
    // the calls filter's lists here.
    if (values === undefined || values === null || values.length === 0) continue;
    where.push(`${column} IN (SELECT value FROM json_each(?))`);
    params.push(JSON.stringify(values));
  }
  const excluded = filter.exclude_base_object_classes;
  if (excluded !== undefined && excluded !== null && excluded.length > 0) {
    // As the service's SQL reads it: an object with no base class is left out too (NULL NOT IN).
    where.push('base_object_class NOT IN (SELECT value FROM json_each(?))');
    params.push(JSON.stringify(excluded));
  }
  if (filter.is_op === true) where.push(`kind = 'op'`);
  if (filter.is_op === false) where.push(`kind = 'object'`);
  if (filter.latest_only === true) where.push('is_latest = 1');
  where.push('deleted_at IS NULL');

  const order: string[] = [];
  for (const sort of request.sort_by ?? [{ field: 'created_at', direction: 'asc' as const }]) {
    const column = Object.prototype.hasOwnProperty.call(SORTABLE_COLUMNS, sort.field) ? SORTABLE_COLUMNS[sort.field] : undefined;
    if (column === undefined) {
      throw new BadRequestError(`Unknown sort field: ${quote(sort.field)}`);
    }
    order.push(`${column} ${sort.direction === 'desc' ? 'DESC' : 'ASC'}`);
  }
  // Insertion order breaks ties (versions created within one millisecond).
  order.push('rowid ASC');
  params.push(sqlCount(request.limit, -1), sqlCount(request.offset, 0));
  const columns = request.metadata_only === true ? `${METADATA_COLUMNS}, NULL AS val` : `${METADATA_COLUMNS}, val`;
  return {
    sql: `SELECT ${columns} FROM objects WHERE ${where.join(' AND ')} ORDER BY ${order.join(', ')} LIMIT ? OFFSET ?`,
    params,
  };
}

/**
 * The read form as JSON text, `val` spliced in as stored: Python's `json.dumps` of the value as it
 * was sent (digest-bodies.ts), so `1.0` stays a float and an integer past 2^53 exact for the
 * client, as on the service (older versions hold `JSON.stringify`'s text, valid JSON as well).
 */
function toObjectJson(row: ObjectRow): string {
  const metadata = JSON.stringify({ ...toObject({ ...row, val: null }), val: undefined });
  return `${metadata.slice(0, -1)},"val":${row.val ?? '{}'}}`;
}

function toObject(row: ObjectRow): ObjSchema {
  return {
    project_id: row.project_id,
    object_id: row.object_id,
    digest: row.digest,
    created_at: row.created_at,
    deleted_at: row.deleted_at,
    version_index: row.version_index,
    is_latest: row.is_latest === 1 ? 1 : 0,
    kind: row.kind === 'op' ? 'op' : 'object',
    base_object_class: row.base_object_class,
    leaf_object_class: row.leaf_object_class,
    val: row.val === null ? {} : (JSON.parse(row.val) as unknown),
    wb_user_id: row.wb_user_id,
    size_bytes: row.size_bytes,
  };
}
