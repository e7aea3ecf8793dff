/**
 * Versioned objects on SQLite (SPEC §2.2). A version is identified by the digest of its value;
 * `version_index` counts distinct digests per `(project_id, object_id)` in order of first
 * appearance, and `is_latest` marks the highest. Every write is one transaction.
 */
import type { SqliteDatabase } from './sqlite.js';
import { BadRequestError, NotFoundError } from '../errors.js';
import { quote } from '../quote.js';
import { CanonicalJsonError, canonicalJson, digestOfText } from '../../wire/digest.js';
import type { ObjCreateRes, ObjQueryReq, ObjSchema } from '../../wire/objects.js';
import { nowInstant } from '../timestamps.js';
import { sqlCount, utf8Length } from './content-common.js';
import { StatementCache } from './statement-cache.js';
import { isRecord } from '../../wire/common.js';

export interface ObjectInsert {
  readonly projectId: string;
  readonly objectId: string;
  readonly val: unknown;
  readonly builtinObjectClass?: string | null | undefined;
  /** The username that writes it. */
  readonly wbUserId: string;
}

export interface ObjectStore {
  /** Store a version (a no-op answering the same digest when that value exists already). */
  create(insert: ObjectInsert): ObjCreateRes;
  /**
   * One version by digest, `latest` or `v<N>`.
   * @throws NotFoundError when there is no such version.
   */
  read(projectId: string, objectId: string, digest: string, metadataOnly: boolean): ObjSchema;
  /** Versions matching the filter, `created_at` ascending unless `sort_by` says otherwise. */
  query(request: ObjQueryReq): ObjSchema[];
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
  const findByDigest = db.prepare<[string, string, string], { digest: string }>(
    'SELECT digest FROM objects WHERE project_id = ? AND object_id = ? AND digest = ?',
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
  const readStatements = (columns: string) => ({
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

  const storeVersion = db.transaction((row: Omit<ObjectRow, 'version_index' | 'is_latest' | 'deleted_at'>) => {
    if (findByDigest.get(row.project_id, row.object_id, row.digest) !== undefined) return;
    const { next } = nextVersionIndex.get(row.project_id, row.object_id) as { next: number };
    clearLatest.run(row.project_id, row.object_id);
    insertVersion.run({ ...row, version_index: next });
  });

  return {
    create(insert) {
      const val = withBuiltinClass(insert.val, insert.builtinObjectClass);
      const canonical = canonicalText(val);
      const digest = digestOfText(canonical);
      const stored = JSON.stringify(val);
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
      const reads = metadataOnly ? metadataReads : fullReads;
      let row: ObjectRow | undefined;
      const alias = VERSION_ALIAS.exec(digest);
      if (digest === 'latest') row = reads.latest.get(projectId, objectId);
      else if (alias !== null) row = reads.byIndex.get(projectId, objectId, Number(alias[1]));
      else row = reads.byDigest.get(projectId, objectId, digest);
      if (row === undefined) {
        throw new NotFoundError(`Object ${quote(objectId)} version ${quote(digest)} not found`);
      }
      return toObject(row);
    },

    query(request) {
      const { sql, params } = buildQuery(request);
      const rows = queries.get(sql).all(...params) as ObjectRow[];
      return rows.map(toObject);
    },
  };
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
